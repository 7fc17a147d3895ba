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
    followLinks(holder, figure);
    addCsvLink(holder, figure);
  }

  // A chart whose x values lead somewhere (the utilisation drill-down: a team's bar opens its users):
  // a click on a bar goes there; the same links are in the table beside the chart for keyboards.
  function followLinks(holder, figure) {
    if (!figure.links) { return; }
    holder.classList.add("linked");
    holder.on("plotly_click", function (event) {
      var url = event.points.length ? figure.links[event.points[0].pointIndex] : null;
      if (url) { window.location.assign(url); }
    });
  }

  // The chart's data as CSV, one row per point (trace, x, y), built in the browser: the PNG is the
  // modebar's camera (its file name is set by scheduling/charts.py).
  function csvCell(value) {
    var text = value === null || value === undefined ? "" : String(value);
    if (/^[=+\-@\t\r]/.test(text) && isNaN(Number(text))) { text = "'" + text; }
    return /[",\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }

  function addCsvLink(holder, figure) {
    var rows = [["trace", "x", "y"]];
    figure.data.forEach(function (trace, index) {
      var xs = trace.x || [], ys = trace.y || [];
      for (var i = 0; i < Math.max(xs.length, ys.length); i++) {
        rows.push([trace.name || "trace " + (index + 1), xs[i], ys[i]]);
      }
    });
    var link = document.createElement("a");
    link.className = "chart-csv small";
    link.textContent = "Data as CSV";
    link.download = ((figure.config.toImageButtonOptions || {}).filename || "chart") + ".csv";
    link.href = URL.createObjectURL(new Blob([rows.map(function (r) { return r.map(csvCell).join(","); }).join("\n") + "\n"], { type: "text/csv" }));
    holder.parentNode.appendChild(link);
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
