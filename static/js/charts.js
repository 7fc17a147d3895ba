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
    startWithRoomForLabels(holder, figure);
    window.Plotly.newPlot(holder, figure.data, figure.layout, figure.config);
    followLinks(holder, figure);
    addCsvLink(holder, figure);
  }

  // Plotly's automargin draws a chart, finds the legend or labels need more room and draws it all again
  // (half of a chart's drawing time). Starting from margins that already hold the legend above the plot and
  // long category labels, it draws once; automargin still grows them where this estimate falls short.
  // The rules follow plotly.js 4's horizontal legend: one row when every entry fits side by side, else
  // columns as wide as the widest entry; an entry is its text plus 43 px, a row 19 px, 27 px besides.
  var measure = document.createElement("canvas").getContext("2d");
  var MIN_PLOT_WIDTH = 64;  // plotly.js shrinks pushed margins to keep the plot this wide

  function textWidth(text, font) {
    measure.font = font.size + "px " + font.family;
    return measure.measureText(String(text)).width;
  }

  function legendRows(entries, width) {
    var total = 0, widest = 0;
    entries.forEach(function (w) { total += w; widest = Math.max(widest, w); });
    if (total <= width) { return 1; }
    return Math.ceil(entries.length / Math.max(1, Math.floor(width / widest)));
  }

  function startWithRoomForLabels(holder, figure) {
    var layout = figure.layout, data = figure.data;
    roomForAxes(layout, data);
    roomForLegend(layout, data, holder.clientWidth);
    data.forEach(function (trace) {
      if (trace.type === "heatmap" && (layout.yaxis || {}).showticklabels !== false) {
        roomForHeatmap(layout, trace, figure.short_labels, holder.clientWidth);
      }
    });
  }

  function roomForAxes(layout, data) {
    var margin = layout.margin, xaxis = layout.xaxis || {}, yaxis = layout.yaxis || {};
    var first = ((data[0] || {}).x || [])[0];
    var dates = xaxis.type === "date" || (typeof first === "string" && /^\d{4}-\d\d-\d\d/.test(first));
    if (xaxis.side !== "top") {  // date ticks are two lines (day, then year); an axis title adds one
      margin.b = Math.max(margin.b, (dates ? 44 : 24) + (xaxis.title ? 18 : 0));
    }
    if (dates) { margin.r = Math.max(margin.r, 30); }  // the last date label is centred on the plot's edge
    // a tick label on the plot's top edge, or a count too long for its bar, reaches above the plot
    margin.t = Math.max(margin.t, 20);
    if (yaxis.title && yaxis.type !== "category") {  // four-digit tick labels beside the axis title need more
      var top = 0;
      data.forEach(function (trace) {
        if (trace.orientation === "h") { return; }
        (trace.y || []).forEach(function (y) { if (typeof y === "number") { top = Math.max(top, y); } });
      });
      var digits = top >= 10000 ? 3 : String(Math.round(top)).length;  // 10,000 and up read "10k"
      margin.l = Math.max(margin.l, Math.ceil(32 + textWidth("0".repeat(digits), layout.font)));
    }
  }

  function roomForLegend(layout, data, width) {
    var margin = layout.margin;
    var named = data.filter(function (t) { return t.name && t.showlegend !== false; });
    if (layout.showlegend === false || named.length < 2 || !layout.legend || layout.legend.orientation !== "h") {
      return;
    }
    var entries = named.map(function (t) { return textWidth(t.name, layout.font) + 43; });
    margin.t = Math.max(margin.t, Math.ceil(27 + 19 * legendRows(entries, width - margin.l - margin.r)));
  }

  function widest(texts, font) {
    return Math.max.apply(null, texts.map(function (text) { return textWidth(text, font); }));
  }

  // Node labels on the left, the colour key on the right; where they leave no room for the plot (a phone),
  // the figure's short labels (node names) are shown, the hover keeps the full ones, the key goes under the plot.
  function roomForHeatmap(layout, trace, shortLabels, width) {
    var margin = layout.margin, yaxis = layout.yaxis, labels = trace.y || [""];
    var ticks = (trace.colorbar || {}).ticktext || [];
    var left = 18 + widest(labels, layout.font);
    var right = ticks.length ? 85 + widest(ticks, layout.font) : margin.r;
    if (left + right > width - MIN_PLOT_WIDTH && shortLabels) {
      yaxis.tickvals = labels;
      yaxis.ticktext = shortLabels;
      left = 18 + widest(yaxis.ticktext, layout.font);
      right = margin.r;
      trace.colorbar = Object.assign({}, trace.colorbar, {
        orientation: "h", x: 0.45, xanchor: "center", y: -0.01, yanchor: "top", len: 0.8, thickness: 14,
      });
      margin.b = Math.max(margin.b, 60);
    }
    margin.l = Math.max(margin.l, Math.ceil(left));
    margin.r = Math.max(margin.r, Math.ceil(right));
    margin.t = Math.max(margin.t, 34);  // the GPU labels along the top
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
