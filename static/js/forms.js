// Form errors, for keyboard and screen-reader users as much as for the eye:
// - after an invalid submit (a 422 swapped in by htmx, or a page loaded with
//   errors) the focus moves to the error summary, scrolled into view;
// - a field's own error clears as soon as its value passes the field's checks
//   (required, min, max, maxlength), its count leaves the summary, and the fit
//   preview re-checks the whole job as before;
// - a "too many requests" sentence leaves once a later post goes through.
(function () {
  "use strict";

  function focusSummary(root) {
    var summary = (root || document).querySelector(".error-summary");
    if (!summary) return;
    if (!summary.hasAttribute("tabindex")) summary.setAttribute("tabindex", "-1");
    summary.focus({ preventScroll: true });
    summary.scrollIntoView({ block: "center" });
  }

  function recount(form) {
    var summary = form.querySelector(".error-summary[data-error-count]");
    if (!summary) return;
    var left = form.querySelectorAll(".field-error").length;
    if (left === 0) {
      summary.textContent = "Every marked field has changed; submit again to check the job.";
      summary.classList.add("resolved");
    } else {
      summary.textContent = left + (left === 1 ? " problem stops" : " problems stop") +
        " this job from being submitted; see the marked field" + (left === 1 ? "" : "s") + " below.";
    }
  }

  function clearOwnError(field) {
    if (field.getAttribute("aria-invalid") !== "true" || !field.checkValidity()) return;
    var id = field.getAttribute("aria-describedby");
    var errors = id && document.getElementById(id);
    if (!errors || !errors.id.startsWith("error-")) return; // a group's error (replica-errors) waits for the server
    errors.remove();
    field.removeAttribute("aria-invalid");
    field.removeAttribute("aria-describedby");
    var holder = field.closest(".has-error");
    if (holder) holder.classList.remove("has-error");
    var form = field.closest("form");
    if (form) recount(form);
  }

  document.addEventListener("input", function (event) {
    if (event.target.matches("input, select, textarea")) clearOwnError(event.target);
  });
  document.addEventListener("change", function (event) {
    if (event.target.matches("select")) clearOwnError(event.target);
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var xhr = event.detail.xhr;
    if (xhr && xhr.status === 422) focusSummary(document);
  });

  // A 429 put "try again in 25 s" in #page-alert; the next post that goes through (a preview, a
  // submit) shows the wait is over, so the sentence goes instead of staying on the page for good.
  document.addEventListener("htmx:afterRequest", function (event) {
    var xhr = event.detail.xhr, config = event.detail.requestConfig;
    if (!xhr || !config || config.verb !== "post" || xhr.status === 0 || xhr.status === 429 || xhr.status >= 500) return;
    var alert = document.getElementById("page-alert");
    if (alert && alert.firstChild) alert.textContent = "";
  });
  document.addEventListener("DOMContentLoaded", function () {
    if (document.querySelector("form .error-summary")) focusSummary(document);
  });
})();
