// The trial page's triage keys: n / p the next and previous match of the list the trial was opened from, u back
// to that list (opened from no list: the next and previous trial of its run, and the run), l to the label picker,
// r marks the trial reviewed, x opens "exclude" with its reason, ? shows or hides the list of keys. Each key does
// what a visible link, button or field does (the page works without it): n, p and u follow the link the page marks
// with data-key.
// Loaded on every page (htmx-boosted navigation swaps only the body), it acts only where #triage is present.
(function () {
  "use strict";

  function typing(target) {
    if (!target || !target.closest) return false;
    return Boolean(target.isContentEditable || target.closest("input, textarea, select"));
  }

  function follow(key) {
    var link = document.querySelector('#main a[data-key="' + key + '"]');
    if (link) link.click();
    return Boolean(link);
  }

  var actions = {
    n: function () { return follow("n"); },
    p: function () { return follow("p"); },
    u: function () { return follow("u"); },
    l: function () {
      var picker = document.getElementById("label_id");
      if (picker) picker.focus();
      return Boolean(picker);
    },
    r: function () {
      var form = document.getElementById("mark-reviewed");
      if (form) form.requestSubmit();
      return Boolean(form);
    },
    x: function () {
      var edit = document.getElementById("review-edit");
      var excluded = document.querySelector('#review-form input[name="review_state"][value="excluded"]');
      if (!edit || !excluded) return false;
      edit.open = true;
      excluded.checked = true;
      document.getElementById("reason").focus();
      return true;
    },
    "?": function () {
      var help = document.getElementById("triage-keys");
      if (help) help.hidden = !help.hidden;
      return Boolean(help);
    }
  };

  document.addEventListener("keydown", function (event) {
    if (!document.getElementById("triage") || event.defaultPrevented || event.altKey || event.ctrlKey ||
        event.metaKey || typing(event.target)) {
      return;
    }
    var action = actions[event.key];
    if (action && action()) event.preventDefault();
  });
})();
