// slotguard dashboard: live refresh. Every few seconds the page is fetched again and each element
// marked data-live is replaced by its new version, in place: the scroll position stays, and forms
// (never inside a live part) keep what is typed in them. A live part holding the focus is left alone.
(function () {
  "use strict";
  var EVERY_MS = 5000;
  var busy = false;

  function refresh() {
    if (busy || document.hidden) return;
    var parts = document.querySelectorAll("[data-live]");
    if (parts.length === 0) return;
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "x-slotguard-live": "1" } })
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (text) {
        if (text === null) return;
        var fresh = new DOMParser().parseFromString(text, "text/html");
        parts.forEach(function (part) {
          if (part.contains(document.activeElement)) return;
          var next = fresh.getElementById(part.id);
          if (next && next.innerHTML !== part.innerHTML) part.replaceChildren.apply(part, Array.from(next.childNodes));
        });
        document.documentElement.dataset.refreshed = String(Date.now());
      })
      .catch(function () { /* the next tick tries again */ })
      .finally(function () { busy = false; });
  }

  setInterval(refresh, EVERY_MS);
})();
