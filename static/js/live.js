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

  // As core/durations.py's duration() writes a span, rounding half up, so that a time the server wrote does
  // not step back when the script takes it over: "45 s", "3 min", "2 h 5 min", "3 d".
  function ago(ms) {
    var seconds = Math.max(0, Math.floor(ms / 1000 + 0.5));
    if (seconds < 60) return seconds + " s ago";
    var minutes = Math.floor(seconds / 60 + 0.5);
    if (minutes < 60) return minutes + " min ago";
    var hours = Math.floor(minutes / 60), rest = minutes % 60;
    if (hours < 48) return hours + " h" + (rest ? " " + rest + " min" : "") + " ago";
    return Math.floor(hours / 24 + rest / 1440 + 0.5) + " d ago";
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
    // The banner is an alert: any change inside it is read out again. Each failed poll (every part,
    // every few seconds) calls this, so it writes only what is new.
    if (!offline) banner.querySelector("[data-offline-since]").textContent = clock(lastHeard);
    var said = banner.querySelector("[data-offline-what]");
    if (said.textContent !== what) said.textContent = what;
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

  // A polled part is swapped whole, so what the reader was doing inside it would go with the old
  // content: how far its scrolling boxes were scrolled (the node map, a log, a wide table on a
  // tablet scrolled sideways to its reasons), which replica logs were opened or closed, and which
  // link or field had the keyboard's focus. All three are carried over to the new content.
  var SCROLLERS = ".nodes, .table-wrap, pre";
  var FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  var kept = {}; // part id -> what to carry over

  function polled(part) {
    return part.hasAttribute("data-live") || /\bevery\b/.test(part.getAttribute("hx-trigger") || "");
  }

  function keys(elements) {
    // Each element's key: its kind and place among its kind ("the queue's table"), so a
    // table that comes or goes above (the sweeps) does not shift the rest.
    var seen = {};
    return elements.map(function (el) {
      var inner = el.firstElementChild;
      var kind = el.tagName + "." + el.className + ">" + (inner ? inner.tagName + "." + inner.className : "");
      seen[kind] = (seen[kind] || 0) + 1;
      return kind + "#" + seen[kind];
    });
  }

  function all(part, selector) {
    return Array.prototype.slice.call(part.querySelectorAll(selector));
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var part = event.detail.target;
    if (!event.detail.shouldSwap || !part || !part.id || !polled(part)) return;
    var boxes = all(part, SCROLLERS), scrolled = {};
    keys(boxes).forEach(function (key, i) {
      if (boxes[i].scrollTop || boxes[i].scrollLeft) scrolled[key] = [boxes[i].scrollTop, boxes[i].scrollLeft];
    });
    var opened = all(part, "details").map(function (details) { return details.open; });
    var focused = document.activeElement, focus = null;
    if (focused && focused !== part && part.contains(focused)) {
      focus = { index: all(part, FOCUSABLE).indexOf(focused), tag: focused.tagName,
                name: focused.getAttribute("name"), href: focused.getAttribute("href") };
    }
    kept[part.id] = { scrolled: scrolled, opened: opened, focus: focus };
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    var id = event.detail.target && event.detail.target.id;
    var was = id && kept[id];
    var part = was && document.getElementById(id);
    delete kept[id];
    if (!part) return;
    var details = all(part, "details");
    if (details.length === was.opened.length) details.forEach(function (el, i) { el.open = was.opened[i]; });
    var boxes = all(part, SCROLLERS);
    keys(boxes).forEach(function (key, i) {
      var at = was.scrolled[key];
      if (at) { boxes[i].scrollTop = at[0]; boxes[i].scrollLeft = at[1]; }
    });
    var focus = was.focus;
    if (!focus || (document.activeElement && document.activeElement !== document.body)) return; // htmx kept it (by id)
    var same = function (el) {
      return el && el.tagName === focus.tag && el.getAttribute("name") === focus.name && el.getAttribute("href") === focus.href;
    };
    var focusable = all(part, FOCUSABLE);
    var match = same(focusable[focus.index]) ? focusable[focus.index] : focusable.filter(same)[0];
    if (match) match.focus({ preventScroll: true });
  });

  document.addEventListener("DOMContentLoaded", function () {
    var status = document.getElementById("live-status");
    if (status && document.querySelector("[data-live]")) status.hidden = false;
    readSkew();
    tick();
    window.setInterval(tick, 1000);
  });
})();
