/* gpuportal: small progressive enhancements; every page works without this file. */
(function () {
  "use strict";

  // On a phone the navigation is one sideways-scrolling row: bring the current page's entry into view.
  var current = document.querySelector('nav[aria-label="Main"] [aria-current="page"]');
  if (current && current.parentElement.scrollWidth > current.parentElement.clientWidth) {
    current.parentElement.scrollLeft = current.offsetLeft - current.parentElement.clientWidth / 3;
  }

  // Time-range selectors submit as soon as a range is picked (the button stays for keyboard users).
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });

  var form = document.getElementById("fairshare-form");
  if (!form) { return; }
  var rows = Array.prototype.slice.call(form.querySelectorAll("tr[data-team]"));
  var live = document.getElementById("live-check");
  var timer = null;

  function weightInput(row) { return row.querySelector("input[name$='-weight']"); }

  // Instant, local check of the one rule a typo breaks most: siblings' weights sum to at most 100 %.
  function checkSums() {
    var groups = {};
    rows.forEach(function (row) {
      var key = row.dataset.parent + "|" + row.dataset.model;
      var value = parseFloat(weightInput(row).value);
      groups[key] = (groups[key] || 0) + (isNaN(value) ? 0 : value);
    });
    var over = [];
    rows.forEach(function (row) {
      var key = row.dataset.parent + "|" + row.dataset.model;
      var total = Math.round(groups[key] * 100) / 100;
      var cell = row.querySelector("td.sum");
      var input = weightInput(row);
      var bad = total > 100;
      cell.textContent = (row.dataset.parent ? "under " + row.dataset.parent : "top level") + ": " + total + " %";
      cell.classList.toggle("error", bad);
      input.setAttribute("aria-invalid", bad ? "true" : "false");
      if (bad && over.indexOf(key) < 0) { over.push(key); }
    });
    return over;
  }

  function showLocalError(over) {
    var box = document.getElementById("local-errors");
    if (!box) {
      box = document.createElement("div");
      box.id = "local-errors";
      box.className = "error-summary";
      box.setAttribute("role", "alert");
      live.parentNode.insertBefore(box, live);
    }
    if (!over.length) { box.hidden = true; box.textContent = ""; return; }
    box.hidden = false;
    box.textContent = over.map(function (key) {
      var parts = key.split("|");
      return "Weight: the children of " + (parts[0] || "the fleet") + " (" + (parts[1] || "any model") +
        ") sum to more than 100 %.";
    }).join(" ");
  }

  function serverCheck() {
    var data = new FormData(form);
    data.delete("action");
    fetch(form.dataset.checkUrl, { method: "POST", body: data, credentials: "same-origin",
                                   headers: { "X-Requested-With": "fetch" } })
      .then(function (response) { return response.text(); })
      .then(function (html) { live.innerHTML = html; })
      .catch(function () { live.textContent = "Live check unavailable; use Preview."; });
  }

  form.addEventListener("input", function () {
    showLocalError(checkSums());
    rows.forEach(function (row) {
      var changed = Array.prototype.some.call(row.querySelectorAll("input[inputmode]"), function (input) {
        return input.value !== input.defaultValue;
      });
      row.classList.toggle("changed", changed);
    });
    clearTimeout(timer);
    timer = setTimeout(serverCheck, 350);
  });
  checkSums();
})();
