/* gpuportal: a running what-if scenario polls its status and reloads the page when it is done. */
(function () {
  "use strict";
  var card = document.getElementById("whatif-progress-card");
  if (!card) { return; }
  var url = card.dataset.statusUrl;

  function poll() {
    fetch(url, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (s) {
      document.getElementById("whatif-progress").value = s.progress;
      document.getElementById("whatif-status").textContent = s.status + " — " + s.progress + " %";
      var stalled = document.getElementById("whatif-stalled");
      stalled.hidden = !s.stalled;  // progress stopped: say so instead of a bar that sits at 99 %
      stalled.textContent = s.note;
      if (s.last_progress_at) {
        document.getElementById("whatif-last-progress").textContent = "Last progress " + s.last_progress_at + ".";
      }
      if (s.status === "done" || s.status === "failed") { window.location.reload(); } else { setTimeout(poll, 2000); }
    }).catch(function () { setTimeout(poll, 5000); });
  }
  setTimeout(poll, 2000);
})();
