// The dashboard's node map for a reader who does not see it as drawn or does not use a mouse. It is
// drawn for the eye: one cell per GPU, coloured and marked by team, each run of cells with a tooltip
// naming the team and the job. Here:
// - each node gets the same facts as words ("node-01: 6 of 8 GPUs in use — research: tune-lr (#4)
//   · 4 GPUs; 2 free."), which name it as a picture (role img), its drawn cells hidden from assistive
//   technology;
// - the map is one stop of the Tab key, the node last visited: the arrow keys, Home and End move
//   between its nodes, so that a map of 500 nodes is not 500 stops on the way to the queue;
// - the words of the node with the focus, or under the pointer, show under the map
//   ([data-node-detail]), where a keyboard or a touch screen, which never get a tooltip, reads them.
// The map is a polled part: a swapped-in map is set up again (htmx:load), and live.js gives the focus
// back to the node that had it.
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
    node.querySelectorAll(".gpus > span").forEach(function (run) {
      var title = run.getAttribute("title") || "";
      var count = run.querySelectorAll("i").length;
      parts.push(/ · \d+ GPUs?$/.test(title) ? title : title + " · " + gpus(count));
    });
    var free = node.querySelectorAll(".gpus > i.free").length;
    if (free) parts.push(free + " free");
    return (node.getAttribute("title") || "") + (parts.length ? " — " + parts.join("; ") : "") + ".";
  }

  function nodesOf(map) {
    return Array.prototype.slice.call(map.querySelectorAll(".node"));
  }

  function detailOf(map) {
    var part = map.closest("section");
    return part && part.querySelector("[data-node-detail]");
  }

  // What the line under the map says: the words of `node`, or, for none, what it says as served.
  function show(map, node) {
    var detail = detailOf(map);
    if (!detail) return;
    if (!detail.hasAttribute("data-hint")) detail.setAttribute("data-hint", detail.textContent);
    detail.textContent = node ? node.querySelector(".node-words").textContent : detail.getAttribute("data-hint");
  }

  function setUp(map) {
    var nodes = nodesOf(map);
    nodes.forEach(function (node) {
      if (node.querySelector(".node-words")) return;
      var words = document.createElement("span");
      words.className = "node-words visually-hidden";
      words.textContent = describeNode(node);
      node.appendChild(words);
      node.querySelectorAll(".node-name, .gpus").forEach(function (drawn) { drawn.setAttribute("aria-hidden", "true"); });
      node.setAttribute("role", "img");
      node.setAttribute("aria-label", words.textContent);
      node.removeAttribute("title"); // its words show under the map: a tooltip would say them twice
      node.tabIndex = -1;
    });
    if (nodes.length && !nodes.some(function (node) { return node.tabIndex === 0; })) nodes[0].tabIndex = 0;
  }

  // The node a key moves to from `node`, or null: the next or previous in order (right, left), the
  // first or the last (Home, End), or the nearest in the row below or above (down, up).
  function target(node, key) {
    var nodes = nodesOf(node.closest(".nodes")), at = nodes.indexOf(node);
    if (key === "ArrowRight") return nodes[at + 1] || null;
    if (key === "ArrowLeft") return nodes[at - 1] || null;
    if (key === "Home") return nodes[0];
    if (key === "End") return nodes[nodes.length - 1];
    if (key !== "ArrowDown" && key !== "ArrowUp") return null;
    var box = node.getBoundingClientRect(), middle = box.left + box.width / 2, down = key === "ArrowDown";
    var best = null, bestGap = Infinity, bestOff = Infinity;
    nodes.forEach(function (other) {
      var b = other.getBoundingClientRect();
      var gap = down ? b.top - box.bottom : box.top - b.bottom;
      var off = Math.abs(b.left + b.width / 2 - middle);
      if (gap < 0) return; // in the same row, or the other way
      if (gap < bestGap - 1 || (Math.abs(gap - bestGap) <= 1 && off < bestOff)) {
        best = other; bestGap = Math.min(gap, bestGap); bestOff = off;
      }
    });
    return best;
  }

  document.addEventListener("keydown", function (event) {
    var node = event.target.closest && event.target.closest(".nodes .node");
    if (!node || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    var next = target(node, event.key);
    if (!next) return;
    event.preventDefault(); // the arrows move between nodes, not the page
    next.focus();
  });

  // The node with the focus (by keyboard, a click or a tap, or given back after a poll) is the map's
  // stop of the Tab key, and its words show under the map.
  document.addEventListener("focusin", function (event) {
    var node = event.target.closest && event.target.closest(".nodes .node");
    if (!node) return;
    var map = node.closest(".nodes");
    nodesOf(map).forEach(function (other) { other.tabIndex = other === node ? 0 : -1; });
    show(map, node);
  });
  document.addEventListener("focusout", function (event) {
    var node = event.target.closest && event.target.closest(".nodes .node");
    if (node && !(event.relatedTarget && node.closest(".nodes").contains(event.relatedTarget))) show(node.closest(".nodes"), null);
  });
  document.addEventListener("mouseover", function (event) {
    var map = event.target.closest && event.target.closest(".nodes");
    if (!map) return;
    var node = event.target.closest(".node") || (map.contains(document.activeElement) ? document.activeElement : null);
    show(map, node);
  });
  document.addEventListener("mouseout", function (event) {
    var map = event.target.closest && event.target.closest(".nodes");
    if (!map || (event.relatedTarget && map.contains(event.relatedTarget))) return;
    show(map, map.contains(document.activeElement) ? document.activeElement : null);
  });

  document.addEventListener("htmx:load", function (event) {
    var root = event.detail && event.detail.elt;
    if (!root || !root.querySelectorAll) return;
    if (root.matches(".nodes")) setUp(root);
    root.querySelectorAll(".nodes").forEach(setUp);
  });
})();
