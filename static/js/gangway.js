// The few behaviours htmx does not cover: adding and removing replica-group rows
// of the submit form (a Django formset), keeping its indices and TOTAL_FORMS right;
// copying a new API token (shown once) to the clipboard; keeping the keyboard's place
// in a pager whose list is swapped.
(function () {
  "use strict";

  function renumber(form) {
    var rows = form.querySelectorAll("[data-replica-rows] tr");
    rows.forEach(function (row, index) {
      row.querySelectorAll("input, select, label").forEach(function (el) {
        ["name", "id", "for"].forEach(function (attr) {
          var value = el.getAttribute(attr);
          if (value) el.setAttribute(attr, value.replace(/replicas-(\d+|__prefix__)-/, "replicas-" + index + "-"));
        });
      });
    });
    var total = form.querySelector("input[name=replicas-TOTAL_FORMS]");
    if (total) total.value = rows.length;
    form.querySelectorAll("[data-remove-replica]").forEach(function (button) {
      button.disabled = rows.length <= 1;
    });
    var add = form.querySelector("[data-add-replica]");
    var max = form.querySelector("input[name=replicas-MAX_NUM_FORMS]");
    if (add && max) add.disabled = rows.length >= parseInt(max.value, 10);
    form.dispatchEvent(new CustomEvent("replicas-changed", { bubbles: true }));
  }

  document.addEventListener("click", function (event) {
    var form = event.target.closest("form");
    if (!form) return;
    if (event.target.closest("[data-add-replica]")) {
      var template = form.querySelector("#replica-template");
      var body = form.querySelector("[data-replica-rows]");
      body.appendChild(template.content.firstElementChild.cloneNode(true));
      renumber(form);
      var first = body.lastElementChild.querySelector("select, input");
      if (first) first.focus();
    } else if (event.target.closest("[data-remove-replica]")) {
      event.target.closest("tr").remove();
      renumber(form);
    }
  });

  // A new token: [data-copy="#field"] copies the field; the field selects itself on focus.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var field = document.querySelector(button.getAttribute("data-copy"));
    if (!field) return;
    field.focus();
    field.select();
    // The focus is on the field by then, so the button's new word would go unheard: the page's
    // polite live region (#announcer, in base.html) says it too.
    var done = function () {
      button.textContent = "Copied";
      var region = document.getElementById("announcer");
      if (region) region.textContent = "Copied the token to the clipboard.";
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(done, function () { document.execCommand("copy") && done(); });
    } else if (document.execCommand("copy")) {
      done();
    }
  });
  document.addEventListener("focusin", function (event) {
    if (event.target.matches("[data-select-on-focus]")) event.target.select();
  });

  // Paging a list swaps the list with its pager, and the link that had the focus goes with it: the
  // focus would fall back to the top of the page. It goes to the same link of the new pager ("Older →"
  // again), or, on the last page, to the page count, which says where the reader now is.
  var paged = null; // the pager link that had the focus when it asked for its page, and its words
  document.addEventListener("htmx:beforeRequest", function (event) {
    var link = event.detail.elt;
    if (link && link.closest && link.closest(".pager") && link === document.activeElement) {
      paged = { link: link, text: link.textContent.trim() };
    }
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var config = event.detail.requestConfig;
    if (!paged || !config || config.elt !== paged.link) return; // another part (a poll) settled meanwhile
    var text = paged.text;
    paged = null;
    if (document.activeElement && document.activeElement !== document.body) return;
    var pager = document.querySelector(".pager");
    if (!pager) return;
    var same = Array.prototype.filter.call(pager.querySelectorAll("a"), function (a) { return a.textContent.trim() === text; })[0];
    var target = same || pager.querySelector("[data-page-count]");
    if (!target) return;
    if (!same) target.setAttribute("tabindex", "-1");
    target.focus();
  });

  function ready(root) {
    (root || document).querySelectorAll("form [data-replica-rows]").forEach(function (body) {
      var form = body.closest("form");
      form.querySelectorAll("[data-remove-replica]").forEach(function (button) {
        button.disabled = body.children.length <= 1;
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { ready(document); });
  document.addEventListener("htmx:afterSettle", function (event) { ready(event.target); });
})();
