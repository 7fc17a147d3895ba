/* gpuportal: draws every chart of the page from the JSON data block next to it (scheduling/charts.py).
   The figures are data, not code: the Content-Security-Policy runs no inline script.
   plotly.js (the cartesian partial bundle, 1.5 MB) is fetched only when the page has a chart, so pages
   without one (quota requests, the ledger, forms) never load it. */
(function () {
  "use strict";
  var script = document.currentScript;

  function draw(holder) {
    var block = document.getElementById(holder.dataset.figure);
    if (!block || holder.dataset.drawn) { return; }
    var figure = JSON.parse(block.textContent);
    holder.dataset.drawn = "1";
    window.Plotly.newPlot(holder, figure.data, figure.layout, figure.config);
  }

  function drawAll() {
    var holders = document.querySelectorAll(".plot[data-figure]");
    if (!holders.length) { return; }
    if (window.Plotly) { holders.forEach(draw); return; }
    var loader = document.createElement("script");
    loader.src = script.dataset.plotly;
    loader.onload = function () { holders.forEach(draw); };
    document.head.appendChild(loader);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
