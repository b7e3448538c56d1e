// podline ui: live updates. The page was rendered at the store mark in <body data-mark>;
// the event stream reports each later change, and the page re-renders its <main> from the
// server (which escapes everything), at most once per second.
(function () {
  "use strict";
  if (!window.EventSource || !window.fetch) return;
  var live = document.getElementById("live");
  var mark = document.body.getAttribute("data-mark") || "";
  var busy = false, again = false;

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { headers: { "Accept": "text/html" }, cache: "no-store" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (text === null) return;
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("main");
        var main = document.getElementById("main");
        if (fresh && main) {
          main.replaceWith(document.importNode(fresh, true));
          document.body.setAttribute("data-updated", String(Date.now()));
        }
        if (live) {
          live.classList.add("flash");
          setTimeout(function () { live.classList.remove("flash"); }, 400);
        }
      })
      .catch(function () {})
      .then(function () {
        setTimeout(function () {
          busy = false;
          if (again) { again = false; refresh(); }
        }, 1000);
      });
  }

  var source = new EventSource("/api/events" + (mark ? "?since=" + encodeURIComponent(mark) : ""));
  source.addEventListener("ready", function () { if (live) live.classList.add("on"); });
  source.addEventListener("change", refresh);
  source.onerror = function () { if (live) live.classList.remove("on"); };
})();
