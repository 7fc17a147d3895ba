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
    window.Plotly.newPlot(holder, figure.data, figure.layout, withNothingOffSite(figure.config));
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
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

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
    roomForTiltedCategories(layout, data, holder.clientWidth);
    roomForModebar(layout, figure.config);
  }

  // The modebar (camera, zoom, pan…) is drawn over the chart's top right corner, about 192 × 26 px: above a
  // top axis (the heatmap's GPU columns) it covered the labels, on a phone half of them. Such a chart keeps
  // a band for it above the labels; charts whose top is a legend or title space need none.
  var MODEBAR_HEIGHT = 28;

  function roomForModebar(layout, config) {
    if ((layout.xaxis || {}).side === "top" && (config || {}).displayModeBar !== false) {
      layout.margin.t += MODEBAR_HEIGHT;
    }
  }

  // Category labels wider than their slot (team names on a phone) are tilted 30 degrees by plotly.js, each
  // starting at its tick and running down (or, on a top axis, up) to the right: they need the height of the
  // widest tilted label and, right of the plot, the last one's reach past its tick. Beyond the label itself
  // plotly.js keeps about 16 px below, 13 px right of the plot and 23 px above (heatmap columns): measured.
  var TILT_COS = Math.cos(Math.PI / 6), TILT_SIN = Math.sin(Math.PI / 6);

  function roomForTiltedCategories(layout, data, width) {
    var margin = layout.margin, xaxis = layout.xaxis || {}, font = layout.font;
    var trace = data.filter(function (t) { return Array.isArray(t.x) && t.orientation !== "h"; })[0];
    var labels = trace ? trace.x.map(String) : [];
    var first = labels[0];
    if (!labels.length || xaxis.type === "date" || xaxis.showticklabels === false || !isNaN(Number(first))
        || /^\d{4}-\d\d-\d\d/.test(first)) {
      return;
    }
    var slot = (width - margin.l - margin.r) / labels.length;
    var longest = widest(labels, font);
    if (longest + 6 <= slot) { return; }
    var drop = longest * TILT_SIN + font.size * TILT_COS;
    if (xaxis.side === "top") {
      margin.t = Math.max(margin.t, Math.ceil(drop + 23));
    } else {
      margin.b = Math.max(margin.b, Math.ceil(drop + 16 + (xaxis.title ? 18 : 0)));
    }
    var reach = textWidth(labels[labels.length - 1], font) * TILT_COS + font.size * TILT_SIN / 2 - slot / 2;
    margin.r = Math.max(margin.r, Math.ceil(reach + 13));
  }

  function roomForAxes(layout, data) {
    var margin = layout.margin, xaxis = layout.xaxis || {}, yaxis = layout.yaxis || {};
    var first = ((data[0] || {}).x || [])[0];
    var dates = xaxis.type === "date" || (typeof first === "string" && /^\d{4}-\d\d-\d\d/.test(first));
    if (xaxis.side !== "top") {  // date ticks are two lines (day, then year); an axis title adds one
      margin.b = Math.max(margin.b, (dates ? 44 : 24) + (xaxis.title ? 18 : 0));
    }
    if (dates) {  // the last date label ("Dec 20") is centred on the plot's edge; plotly.js keeps 12 px beyond it
      margin.r = Math.max(margin.r, Math.ceil(widest(MONTHS.map(function (m) { return m + " 30"; }), layout.font) / 2 + 12));
    }
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
      left = 20 + widest(yaxis.ticktext, layout.font);  // measured: 2 px more than beside the full labels
      right = margin.r;
      trace.colorbar = Object.assign({}, trace.colorbar, {
        orientation: "h", x: 0.45, xanchor: "center", y: -0.01, yanchor: "top", len: 0.8, thickness: 14,
      });
      margin.b = Math.max(margin.b, 68);
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
      var index = event.points.length ? event.points[0].pointIndex : null;
      if (Array.isArray(index)) { index = index[0]; }  // a heatmap's cell: [row, column]; its row leads on
      var url = index === null ? null : figure.links[index];
      if (url) { window.location.assign(url); }
    });
  }

  // Downloads: a chart's data and a table's rows as CSV, built in the browser from what the page shows (the
  // chart's PNG is the modebar's camera; its file name is set by scheduling/charts.py).
  function csvCell(value) {
    var text = value === null || value === undefined ? "" : String(value);
    if (/^[=+\-@\t\r]/.test(text) && isNaN(Number(text))) { text = "'" + text; }
    return /[",\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }

  function csvLink(rows, fileName, text, kind) {
    var link = document.createElement("a");
    link.className = kind + "-csv small";
    link.textContent = text;
    link.download = fileName + ".csv";
    var body = rows.map(function (r) { return r.map(csvCell).join(","); }).join("\n") + "\n";
    link.href = URL.createObjectURL(new Blob([body], { type: "text/csv" }));
    return link;
  }

  function axisName(axis, fallback) {
    var title = (axis || {}).title;
    return (typeof title === "string" ? title : (title || {}).text) || fallback;
  }

  // One record per point a person sees: a heatmap's cells with their value (and what the colour key calls it),
  // a bar laid from a base (the ownership timeline) as start and end, any other trace as its x and y.
  function traceRecords(trace, index, layout) {
    var name = trace.name || "trace " + (index + 1), records = [];
    var xs = trace.x || [], ys = trace.y || [], X = axisName(layout.xaxis, "x"), Y = axisName(layout.yaxis, "y");
    if (trace.type === "heatmap") {
      var key = {}, ticks = trace.colorbar || {};
      (ticks.tickvals || []).forEach(function (v, i) { key[v] = (ticks.ticktext || [])[i]; });
      (trace.z || []).forEach(function (row, i) {
        row.forEach(function (z, j) {
          if (z === null || z === undefined) { return; }  // a node with fewer GPUs than the widest
          var record = { trace: name, y: ys[i], x: xs[j], value: z };
          if (z in key) { record.meaning = key[z]; }
          records.push(record);
        });
      });
    } else if (trace.base !== undefined && trace.orientation === "h") {
      var bases = Array.isArray(trace.base) ? trace.base : xs.map(function () { return trace.base; });
      var dates = (layout.xaxis || {}).type === "date";
      xs.forEach(function (length, i) {
        var end = dates ? datePlus(bases[i], length) : bases[i] + length;
        records.push({ trace: name, y: ys[i], start: bases[i], end: end });
      });
    } else {
      for (var i = 0; i < Math.max(xs.length, ys.length); i++) {
        var point = { trace: name };
        point[X] = xs[i];
        point[Y] = ys[i];
        records.push(point);
      }
    }
    return records;
  }

  // A bar's end on a date axis: its base (RFC 3339, microseconds as the server wrote them) plus its length in
  // milliseconds, to the microsecond (a JavaScript Date holds milliseconds only).
  function datePlus(base, ms) {
    var parts = /^(.*T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(base);
    if (!parts) { return new Date(Date.parse(base) + ms).toISOString(); }
    var micro = Math.round(parseFloat("0" + (parts[2] || ".0")) * 1e6) + Math.round(ms * 1000);
    var seconds = Math.floor(micro / 1e6), rest = micro - seconds * 1e6;
    var whole = new Date(Date.parse(parts[1] + parts[3]) + seconds * 1000).toISOString().replace(/\.\d+Z$/, "");
    return whole + (rest ? "." + String(rest).padStart(6, "0") : "") + "Z";
  }

  function chartRows(figure) {
    var records = [], columns = [];
    figure.data.forEach(function (trace, index) {
      traceRecords(trace, index, figure.layout).forEach(function (record) {
        Object.keys(record).forEach(function (c) { if (columns.indexOf(c) < 0) { columns.push(c); } });
        records.push(record);
      });
    });
    return [columns].concat(records.map(function (r) { return columns.map(function (c) { return r[c]; }); }));
  }

  function addCsvLink(holder, figure) {
    var name = (figure.config.toImageButtonOptions || {}).filename || "chart";
    holder.parentNode.appendChild(csvLink(chartRows(figure), name, "Data as CSV", "chart"));
  }

  // A table marked data-csv="file-name": its header and rows as shown, a <time> as its exact datetime. A row
  // marked data-csv-note (a sentence under the row before) becomes that row's "Note"; a row of one cell
  // spanning the table (an empty table's message) is left out.
  function cellText(cell) {
    var copy = cell.cloneNode(true);
    copy.querySelectorAll("time[datetime]").forEach(function (t) { t.textContent = t.getAttribute("datetime"); });
    return copy.textContent.replace(/\s+/g, " ").trim();
  }

  function tableRows(table) {
    var head = table.tHead ? [].map.call(table.tHead.rows[0].cells, cellText) : [];
    var rows = [], notes = false;
    [].forEach.call(table.tBodies, function (body) {
      [].forEach.call(body.rows, function (row) {
        var cells = [].map.call(row.cells, cellText);
        if (row.hasAttribute("data-csv-note")) {
          if (rows.length) { rows[rows.length - 1].note = cells.join(" "); notes = true; }
        } else if (!(row.cells.length === 1 && row.cells[0].colSpan > 1)) {
          rows.push({ cells: cells });
        }
      });
    });
    var out = [notes ? head.concat(["Note"]) : head];
    rows.forEach(function (r) { out.push(notes ? r.cells.concat([r.note || ""]) : r.cells); });
    return out;
  }

  function addTableCsvLinks() {
    document.querySelectorAll("table[data-csv]").forEach(function (table) {
      var wrap = table.closest(".table-wrap") || table;
      var paragraph = document.createElement("p");
      paragraph.className = "table-csv-row";
      paragraph.appendChild(csvLink(tableRows(table), table.dataset.csv, "Table as CSV", "table"));
      wrap.parentNode.insertBefore(paragraph, wrap.nextSibling);
    });
  }

  // plotly.js's config has one more URL outside the site: topojsonURL, the maps of geo traces (not in the
  // cartesian bundle, so never fetched). It may not be blank, so it points at plotly.js's own folder here.
  function withNothingOffSite(config) {
    return Object.assign({}, config, { topojsonURL: script.dataset.plotly.replace(/[^/]*$/, "") });
  }

  function loadPlotly() {
    return new Promise(function (resolve, reject) {
      if (window.Plotly) { resolve(); return; }
      var loader = document.createElement("script");
      loader.src = script.dataset.plotly;
      loader.onload = resolve;
      loader.onerror = reject;
      document.head.appendChild(loader);
    });
  }

  // The charts' font (Inter, static/vendor/inter) is measured above and by plotly.js as it lays a chart out:
  // drawn before the font has loaded, labels would be placed for the fallback font and drawn in Inter. Both
  // subsets (Latin, Latin Extended) are asked for; a font that fails to load leaves the fallback, still drawn.
  function loadFont() {
    if (!document.fonts || !document.fonts.load) { return Promise.resolve(); }
    return document.fonts.load("12px Inter", "A\u0100").catch(function () { return null; });
  }

  function drawAll() {
    var holders = document.querySelectorAll(".plot[data-figure]");
    if (!holders.length) { return; }
    Promise.all([loadPlotly(), loadFont()]).then(function () { holders.forEach(draw); });
  }

  function start() {
    addTableCsvLinks();
    drawAll();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
