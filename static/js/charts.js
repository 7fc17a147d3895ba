/* gpuportal: draws every chart of the page from the JSON data block next to it (scheduling/charts.py).
   The figures are data, not code: the Content-Security-Policy runs no inline script. */
(function () {
  "use strict";

  function draw(holder) {
    var block = document.getElementById(holder.dataset.figure);
    if (!block || holder.dataset.drawn) { return; }
    var figure = JSON.parse(block.textContent);
    holder.dataset.drawn = "1";
    Plotly.newPlot(holder, figure.data, figure.layout, figure.config);
  }

  function drawAll() {
    document.querySelectorAll(".plot[data-figure]").forEach(draw);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
