// What a screen reader hears of the parts htmx swaps in:
// - the node map is drawn for the eye (one coloured cell per GPU, the team and job in a tooltip):
//   each node gets the same facts as words ("node-01: 6 of 8 GPUs in use — research: tune-lr (#4)
//   · 4 GPUs; 2 free."), and its cells are hidden from assistive technology;
// - a change that matters ([data-announce]: a job's state, the fit preview's outcome, the quota
//   what-if's count) is said once, politely, in the page's #announcer, and only when its words
//   change: the polled parts themselves carry no live region, so a poll that brings the same
//   figures, or a preview re-run after each pause in typing, is not read out again.
(function () {
  "use strict";

  function gpus(count) {
    return count + (count === 1 ? " GPU" : " GPUs");
  }

  // The words of one node: its tooltip ("node-01: 6 of 8 GPUs in use"), then each run of cells by
  // its tooltip, then the free cells. The run tooltips name a job's GPUs ("· 4 GPUs"); the outside and
  // reserved runs do not, so their count is added.
  function describeNode(node) {
    var parts = [];
    var runs = node.querySelectorAll(".gpus > span");
    Array.prototype.forEach.call(runs, function (run) {
      var title = run.getAttribute("title") || "";
      var count = run.querySelectorAll("i").length;
      parts.push(/ · \d+ GPUs?$/.test(title) ? title : title + " · " + gpus(count));
    });
    var free = node.querySelectorAll(".gpus > i.free").length;
    if (free) parts.push(free + " free");
    return (node.getAttribute("title") || "") + (parts.length ? " — " + parts.join("; ") : "") + ".";
  }

  function putNodesInWords(root) {
    root.querySelectorAll(".nodes .node").forEach(function (node) {
      if (node.querySelector(".node-words")) return;
      var words = document.createElement("span");
      words.className = "node-words visually-hidden";
      words.textContent = describeNode(node);
      node.appendChild(words);
      node.querySelectorAll(".node-name, .gpus").forEach(function (drawn) { drawn.setAttribute("aria-hidden", "true"); });
    });
  }

  var said = {}; // [data-announce] key -> the words it last had

  function words(el) {
    var prefix = el.getAttribute("data-announce-prefix");
    var text = el.textContent.replace(/\s+/g, " ").trim();
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
    putNodesInWords(root);
    sayChanges(root);
  });
})();
