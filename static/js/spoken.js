// What a screen reader hears of the parts htmx swaps in (the node map's words: node_map.js): a change
// that matters ([data-announce]: a job's state, the fit preview's outcome, the quota what-if's count)
// is said once, politely, in the page's #announcer, and only when its words change: the polled parts
// themselves carry no live region, so a poll that brings the same figures, or a preview re-run after
// each pause in typing, is not read out again.
(function () {
  "use strict";

  var said = {}; // [data-announce] key -> the words it last had

  // Its words, then those of the elements beside it that data-announce-with selects (the quota what-if's
  // warnings, shown once on the page and said after its count), in the page's order.
  function words(el) {
    var prefix = el.getAttribute("data-announce-prefix");
    var texts = [el.textContent];
    var also = el.getAttribute("data-announce-with");
    if (also && el.parentNode) {
      Array.prototype.forEach.call(el.parentNode.querySelectorAll(also), function (other) { texts.push(other.textContent); });
    }
    var text = texts.join(" ").replace(/\s+/g, " ").trim();
    return prefix ? prefix + " " + text : text;
  }

  function announce(text) {
    var region = document.getElementById("announcer");
    if (!region) return;
    region.textContent = "";
    // A moment later, so that a region emptied and refilled is read as a change.
    window.setTimeout(function () { region.textContent = text; }, 50);
  }

  function sayChanges(root) {
    var found = Array.prototype.slice.call(root.querySelectorAll("[data-announce]"));
    if (root.matches && root.matches("[data-announce]")) found.unshift(root);
    found.forEach(function (el) {
      var key = el.getAttribute("data-announce"), now = words(el);
      if (Object.prototype.hasOwnProperty.call(said, key) && said[key] !== now) announce(now);
      said[key] = now; // the page as loaded is only remembered, never read out
    });
  }

  document.addEventListener("htmx:load", function (event) {
    var root = event.detail && event.detail.elt;
    if (!root || !root.querySelectorAll) return;
    sayChanges(root);
  });
})();
