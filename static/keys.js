// Keys of every page: "/" puts the cursor in the search field (the trials explorer's "Search trajectories"). On a
// page without one it opens the explorer with its search field focused, unless a form of the page holds changes
// (they would be lost). Not while typing in a field, nor with Ctrl, Alt or Meta. Loaded on every page (htmx-boosted
// navigation swaps only the body), so it listens on the document.
(function () {
  "use strict";

  var FIELD = "input[type='search']";

  function typing(target) {
    if (!target || !target.closest) return false;
    return Boolean(target.isContentEditable || target.closest("input, textarea, select"));
  }

  function searchField() {
    return Array.prototype.find.call(document.querySelectorAll(FIELD), function (field) {
      return field.getClientRects().length > 0 && !field.disabled;
    });
  }

  function focusSearch(field) {
    field.focus();
    field.select();
  }

  // A field whose value differs from the one the page was served with.
  function changed(field) {
    if (field.type === "hidden" || field.type === "submit" || field.type === "button") return false;
    if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
    if (field.tagName === "SELECT") {
      var options = Array.prototype.slice.call(field.options);
      if (field.multiple) return options.some(function (o) { return o.selected !== o.defaultSelected; });
      var served = options.findIndex(function (o) { return o.defaultSelected; });
      return options.length > 0 && field.selectedIndex !== (served === -1 ? 0 : served);
    }
    return field.value !== field.defaultValue;
  }

  function edited() {
    return Array.prototype.some.call(document.forms, function (form) {
      return Array.prototype.some.call(form.elements, changed);
    });
  }

  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey ||
        typing(event.target)) {
      return;
    }
    var field = searchField();
    if (field) {
      event.preventDefault();
      focusSearch(field);
      return;
    }
    var explorer = document.querySelector("a[data-search-page]"); // the main menu's "Trials", when logged in
    if (!explorer || edited()) return;
    event.preventDefault();
    window.location.assign(explorer.href + "#search");
  });

  // Arriving from "/" on another page: the search field takes the focus.
  document.addEventListener("DOMContentLoaded", function () {
    if (window.location.hash !== "#search") return;
    var field = searchField();
    if (field) focusSearch(field);
  });
})();
