// Live parts of a page ([data-live], polled by htmx): each poll sends the part's
// data-etag back as If-None-Match, so the server answers 304 while nothing changed.
// The page says when it last heard from the server ("Updated 4 s ago", the time on
// hover) and, when a request fails to send, times out or gets a 5xx answer, shows
// the offline banner; times that count up from the server's clock ("last cycle 12 s
// ago", [data-age]) then stop counting and show the last time seen instead.
(function () {
  "use strict";

  var lastHeard = Date.now();
  var skew = 0; // server clock minus this browser's clock: from the page as loaded, then each answer's Date
  var offline = false;

  function clock(ms) {
    return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
  }

  function ago(ms) {
    var seconds = Math.max(0, Math.round(ms / 1000));
    if (seconds < 60) return seconds + " s ago";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min ago";
    return Math.floor(seconds / 3600) + " h ago";
  }

  function readSkew() {
    var part = document.querySelector("[data-server-now]");
    var server = part ? Date.parse(part.getAttribute("data-server-now")) : NaN;
    if (!isNaN(server)) skew = server - Date.now();
  }

  function tick() {
    var status = document.getElementById("live-status");
    if (status && !status.hidden) {
      var updated = status.querySelector("[data-updated]");
      updated.textContent = ago(Date.now() - lastHeard);
      updated.setAttribute("datetime", new Date(lastHeard).toISOString());
      updated.title = new Date(lastHeard).toLocaleString();
      status.classList.toggle("stale", offline);
    }
    document.querySelectorAll("time[data-age]").forEach(function (time) {
      var at = Date.parse(time.getAttribute("datetime"));
      if (isNaN(at)) return;
      time.textContent = offline ? "at " + clock(at - skew) + " (last seen)" : ago(Date.now() + skew - at);
      time.classList.toggle("stale", offline);
    });
  }

  function setOffline(what) {
    var banner = document.getElementById("offline-banner");
    if (!banner) return;
    if (!offline) banner.querySelector("[data-offline-since]").textContent = clock(lastHeard);
    banner.querySelector("[data-offline-what]").textContent = what;
    banner.hidden = false;
    offline = true;
    tick();
  }

  function setOnline() {
    var banner = document.getElementById("offline-banner");
    if (banner) banner.hidden = true;
    offline = false;
    lastHeard = Date.now();
    tick();
  }

  document.addEventListener("htmx:configRequest", function (event) {
    var elt = event.detail.elt;
    if (event.detail.verb === "get" && elt && elt.hasAttribute && elt.hasAttribute("data-etag")) {
      event.detail.headers["If-None-Match"] = elt.getAttribute("data-etag");
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (!event.detail.successful) return;
    var date = event.detail.xhr && Date.parse(event.detail.xhr.getResponseHeader("Date") || "");
    if (date && Math.abs(date - Date.now() - skew) > 2000) skew = date - Date.now(); // Date is whole seconds: no jitter
    setOnline();
  });
  document.addEventListener("htmx:sendError", function () { setOffline("Cannot reach the server."); });
  document.addEventListener("htmx:timeout", function () { setOffline("The server does not answer."); });
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (status && status < 500) return; // a refusal (403, 404) is an answer, not an outage
    setOffline("The server answers with an error" + (status ? " (HTTP " + status + ")." : "."));
  });

  document.addEventListener("DOMContentLoaded", function () {
    var status = document.getElementById("live-status");
    if (status && document.querySelector("[data-live]")) status.hidden = false;
    readSkew();
    tick();
    window.setInterval(tick, 1000);
  });
})();
