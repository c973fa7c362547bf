// The review queue's keys (templates/queue/show.html): r reviewed and next, x exclude and next (an empty reason is
// focused first; Enter in it excludes), 1-9 put on or take off a label, c the failure category, u undo the last
// decision, n / p the next and previous trial, ? the list of keys, Esc leaves a field. Each key presses a visible
// button, ticks a visible box or follows a visible link: the page works without this script.
// The category picker's "New category…" shows the field for the new name (it is shown to a page without script).
// htmx swaps the whole #queue with every answer; a 409 (another reviewer holds the trial, an undo refused) is
// swapped in too, so its reason shows where the decision was.
// Loaded on every page (htmx-boosted navigation swaps only the body), it acts only where #queue is present.
(function () {
  "use strict";

  var NEW_CATEGORY = "+new";

  function queue() {
    return document.getElementById("queue");
  }

  function typing(target) {
    if (!target || !target.closest) return false;
    return Boolean(target.isContentEditable || target.closest("input, textarea, select"));
  }

  function press(selector) {
    var button = document.querySelector(selector);
    if (!button || button.disabled) return false;
    // A key pressed the moment a new trial is swapped in may come before htmx has taken up its form and links:
    // taken up now (again is a no-op), the press is one request swapped in place, never a page load.
    if (window.htmx && queue()) window.htmx.process(queue());
    button.click();
    return true;
  }

  function newCategory() {
    var picker = document.getElementById("human_category");
    var field = document.querySelector(".queue-new-category");
    if (!picker || !field) return;
    field.hidden = picker.value !== NEW_CATEGORY;
  }

  var actions = {
    r: function () { return press("#decide-reviewed"); },
    x: function () {
      var reason = document.getElementById("reason");
      if (reason && !reason.value.trim()) {
        reason.focus();
        return true;
      }
      return press("#decide-excluded");
    },
    c: function () {
      var picker = document.getElementById("human_category");
      if (picker) picker.focus();
      return Boolean(picker);
    },
    u: function () { return press("#undo button[type=submit]"); },
    n: function () { return press('#queue .queue-walk a[data-key="n"]'); },
    p: function () { return press('#queue .queue-walk a[data-key="p"]'); },
    "?": function () {
      var keys = document.getElementById("queue-keys");
      if (keys) keys.open = !keys.open;
      return Boolean(keys);
    }
  };

  document.addEventListener("keydown", function (event) {
    if (!queue() || event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    var target = event.target;
    if (typing(target)) {
      if (event.key === "Escape") {
        target.blur();
        event.preventDefault();
      } else if (event.key === "Enter" && target.id === "reason") {
        event.preventDefault();
        press("#decide-excluded");
      } else if (event.key === "Enter" && target.id === "human_category") {
        event.preventDefault();
        target.blur();
      }
      return;
    }
    var action = actions[event.key];
    if (!action && /^[1-9]$/.test(event.key)) {
      var box = document.querySelector('#decision input[type=checkbox][data-key="' + event.key + '"]');
      action = box ? function () { box.checked = !box.checked; return true; } : null;
    }
    if (action && action()) event.preventDefault();
  });

  document.addEventListener("change", function (event) {
    if (event.target && event.target.id === "human_category") {
      newCategory();
      if (event.target.value === NEW_CATEGORY) document.getElementById("new_category").focus();
    }
  });

  // A refusal the queue explains (409: another reviewer holds the trial, or an undo would lose a change) replaces
  // the queue like an answer; any other failure says so where the last action's words go.
  // A field of the old trial's panel keeps no focus into the next trial's (htmx would give it to the field of the
  // same id, where the next keys would be typed): the queue takes it after the swap.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    if (!detail.target || detail.target.id !== "queue") return;
    if (detail.xhr && detail.xhr.status === 409) {
      detail.shouldSwap = true;
      detail.isError = false;
    }
    if (detail.shouldSwap && detail.target.contains(document.activeElement)) document.activeElement.blur();
  });
  document.addEventListener("htmx:responseError", function (event) {
    var said = document.getElementById("queue-said");
    var xhr = event.detail && event.detail.xhr;
    if (said && queue() && queue().contains(event.detail.elt)) {
      said.textContent = "Nothing changed: the server answered " + (xhr ? xhr.status : "an error") +
        ". Reload the page to see the queue as it is.";
    }
  });

  // After a swap the button that was pressed is gone: the queue takes the focus, so keys and a screen reader go on
  // from the new trial.
  document.addEventListener("htmx:afterSettle", function () {
    var root = queue();
    newCategory();
    if (root && (!document.activeElement || document.activeElement === document.body)) {
      root.setAttribute("tabindex", "-1");
      root.focus({ preventScroll: true });
    }
  });
  document.addEventListener("DOMContentLoaded", newCategory);
  document.addEventListener("htmx:load", newCategory);
})();
