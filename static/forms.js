/* AgentForge form behaviour (loaded by base.html; no inline script, see web/security.py's CSP).
 *
 * 1. A form that writes (method post) disables its submit buttons while its request is in flight, so a double
 *    click sends one POST; the server refuses a repeated submission key anyway (writes.runs.queue_once).
 * 2. A filter form whose results htmx pushes to the URL (method get, hx-push-url) shows what the URL says after
 *    Back/Forward: its fields are set from location.search when htmx restores a page or the browser shows one.
 * 3. Arrowing through such a form's select updates the results but adds one history entry, not one per key:
 *    the first keyboard change pushes the URL, the next ones replace it, until focus or the pointer moves on.
 * 4. Copy buttons (macros.html copy_text) are shown and copy their read-only field; focusing the field selects it.
 * 6. URL-mirroring filter forms leave empty fields out of the request (and so out of the pushed URL), and their
 *    "More filters" disclosure, once the reader opens it, stays open when htmx swaps the results (the server folds
 *    it unless one of its filters is set, so the list starts on the first screen).
 * 5. A form's hidden `next` (login, switching organization) keeps the page's #fragment: browsers keep a fragment
 *    through the redirect to /login but never send it, so a #step-N link opens that step after logging in.
 * 7. A form marked data-swap-refusals (the compare picker) shows every 4xx answer in place: the server draws the
 *    form again with the refusal, and htmx (whose config swaps 422 only) swaps the other 4xx answers of it too.
 * 8. An error summary (templates/macros.html error_summary, the GOV.UK pattern) takes focus when a page or swap
 *    shows it, and its links move focus to the field they name (a group's first input), scrolled into view with
 *    its label.
 */
(function () {
  "use strict";

  var URL_FORMS = "form[method='get'][hx-push-url]";
  var BROWSE_KEYS = ["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End", "PageUp", "PageDown"];

  function submitButtons(form) {
    return form.querySelectorAll("button:not([type]), button[type='submit'], input[type='submit']");
  }

  function releaseForm(form) {
    submitButtons(form).forEach(function (button) {
      if (button.hasAttribute("data-in-flight")) {
        button.removeAttribute("data-in-flight");
        button.disabled = false;
      }
    });
    form.removeAttribute("aria-busy");
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || (form.getAttribute("method") || "get").toLowerCase() !== "post") {
      return;
    }
    if (form.getAttribute("aria-busy") === "true") {
      event.preventDefault(); // a second submit (Enter) while the first is in flight
      event.stopImmediatePropagation();
      return;
    }
    form.setAttribute("aria-busy", "true");
    // After this event, so the submission (plain or htmx) reads the form before its buttons go disabled.
    window.setTimeout(function () {
      submitButtons(form).forEach(function (button) {
        if (!button.disabled) {
          button.setAttribute("data-in-flight", "");
          button.disabled = true;
        }
      });
    }, 0);
  }, true);

  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    var form = elt && (elt instanceof HTMLFormElement ? elt : elt.closest && elt.closest("form"));
    var xhr = event.detail && event.detail.xhr;
    if (!form) return;
    if (xhr && xhr.getResponseHeader("HX-Redirect")) return; // the browser is leaving for the new page
    releaseForm(form);
  });

  function urlForms() {
    return document.querySelectorAll(URL_FORMS);
  }

  /* Set every named field of the URL-mirroring forms from location.search (absent → empty / first option). */
  function reflectUrl() {
    var params = new URLSearchParams(window.location.search);
    urlForms().forEach(function (form) {
      Array.prototype.forEach.call(form.elements, function (field) {
        if (!field.name || field.type === "submit" || field.type === "button") return;
        var value = params.get(field.name) || "";
        if (field.tagName === "SELECT") {
          var match = Array.prototype.find.call(field.options, function (o) { return o.value === value; });
          if (match) field.value = value; else field.selectedIndex = 0;
        } else if (field.type === "checkbox" || field.type === "radio") {
          field.checked = params.getAll(field.name).indexOf(field.value) !== -1;
        } else if (field.type !== "hidden") {
          field.value = value;
        }
      });
    });
  }

  document.addEventListener("htmx:historyRestore", reflectUrl);
  window.addEventListener("popstate", function () { window.setTimeout(reflectUrl, 0); });
  window.addEventListener("pageshow", function () {
    document.querySelectorAll("form[aria-busy='true']").forEach(releaseForm); // shown again from the back cache
    reflectUrl();
  });

  /* Keyboard browsing of a select in a URL-mirroring form: push once, then replace. The state is kept by the
   * select's name, as htmx swaps the form (and the select with it) after every change. */
  var browsing = null; // {name, pushed} while arrow keys move through one select

  document.addEventListener("keydown", function (event) {
    var select = event.target;
    if (!(select instanceof HTMLSelectElement)) return;
    if (BROWSE_KEYS.indexOf(event.key) === -1) { browsing = null; return; }
    if (!browsing || browsing.name !== select.name) browsing = { name: select.name, pushed: false };
  }, true);

  document.addEventListener("focusin", function (event) {
    if (browsing && !(event.target instanceof HTMLSelectElement && event.target.name === browsing.name)) browsing = null;
  });
  document.addEventListener("pointerdown", function () { browsing = null; }, true);

  /* htmx hands over the history update before making it (detail.history: {type, path}): a keyboard change of the
   * select that already pushed an entry replaces it instead. The filter forms use hx-sync="this:replace", so a
   * request overtaken by a newer key press is aborted and never reaches the history. */
  document.addEventListener("htmx:beforeHistoryUpdate", function (event) {
    var detail = event.detail || {};
    var config = detail.requestConfig || {};
    var form = config.elt;
    if (!detail.history || detail.history.type !== "push" || !(form instanceof HTMLFormElement) || !form.matches(URL_FORMS)) {
      return;
    }
    var trigger = config.triggeringEvent;
    var name = trigger && trigger.type === "change" && trigger.target instanceof HTMLSelectElement ? trigger.target.name : null;
    if (!browsing || name !== browsing.name) return;
    if (browsing.pushed) detail.history.type = "replace"; else browsing.pushed = true;
  });

  /* Copy buttons: hidden in the HTML (the read-only field is the no-JavaScript way), shown once this script runs. */
  function showCopyButtons(root) {
    (root || document).querySelectorAll(".copy-button[hidden]").forEach(function (button) { button.hidden = false; });
  }
  document.addEventListener("DOMContentLoaded", function () { showCopyButtons(document); });
  document.addEventListener("htmx:load", function (event) { showCopyButtons(event.target); });

  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element ? event.target.closest(".copy-button") : null;
    if (!button) return;
    var field = document.getElementById(button.getAttribute("data-copy"));
    if (!field) return;
    var done = function () {
      button.firstChild.textContent = "Copied";
      window.setTimeout(function () { button.firstChild.textContent = "Copy"; }, 2000);
    };
    field.select();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(done, function () { if (document.execCommand("copy")) done(); });
    } else if (document.execCommand("copy")) {
      done();
    }
  });
  document.addEventListener("focusin", function (event) {
    if (event.target instanceof HTMLInputElement && event.target.classList.contains("copy-source")) event.target.select();
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (!window.location.hash) return;
    document.querySelectorAll("form input[type='hidden'][name='next']").forEach(function (next) {
      if (next.value && next.value.indexOf("#") === -1) next.value += window.location.hash;
    });
  });

  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (!(form instanceof HTMLFormElement) || !form.matches(URL_FORMS)) return;
    var parameters = event.detail.parameters;
    var empty = [];
    parameters.forEach(function (value, name) { if (value === "") empty.push(name); });
    empty.forEach(function (name) { parameters.delete(name); });
  });

  /* "More filters" opened by the reader (its summary clicked) stays open when htmx swaps the explorer with the
   * results it asked for; a new page starts from what the server says (open when one of its filters is set). */
  var moreFiltersOpened = false;
  document.addEventListener("click", function (event) {
    var summary = event.target instanceof Element ? event.target.closest("details.more-filters > summary") : null;
    if (summary) moreFiltersOpened = !summary.parentElement.open; // read before the click toggles it
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (!target || target.id !== "explorer") { moreFiltersOpened = false; return; }
    if (moreFiltersOpened) target.querySelectorAll("details.more-filters").forEach(function (d) { d.open = true; });
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail || {};
    var elt = detail.requestConfig && detail.requestConfig.elt; // the form (a boosted form's events fire on body)
    var status = detail.xhr ? detail.xhr.status : 0;
    if (!(elt instanceof Element) || !elt.closest("[data-swap-refusals]") || status < 400 || status > 499) return;
    detail.shouldSwap = true;
    detail.isError = false;
  });

  function focusErrorSummary(root) {
    var summary = (root && root.querySelector ? root : document).querySelector(".error-summary");
    if (!summary && root && root.classList && root.classList.contains("error-summary")) summary = root;
    if (summary) summary.focus();
  }
  document.addEventListener("DOMContentLoaded", function () { focusErrorSummary(document); });
  document.addEventListener("htmx:load", function (event) { focusErrorSummary(event.target); });

  document.addEventListener("click", function (event) {
    var link = event.target instanceof Element ? event.target.closest(".error-summary a[href^='#']") : null;
    if (!link) return;
    var target = document.getElementById(decodeURIComponent(link.getAttribute("href").slice(1)));
    if (!target) return;
    var field = target.matches("input, select, textarea") ? target
      : target.querySelector("input:not([type=hidden]), select, textarea");
    if (!field) return;
    event.preventDefault();
    var details = field.closest("details");
    if (details) details.open = true;
    var label = document.querySelector("label[for='" + field.id + "']");
    var legend = field.closest("fieldset") && field.closest("fieldset").querySelector("legend");
    (label || legend || field).scrollIntoView();
    field.focus({ preventScroll: true });
  });
})();
