// The trial page's transcript: j/k move between steps, e to the first step with an error (then the next, round
// again after the last), "Expand all" / "Collapse all" toggle every <details>.
// Loaded on every page (htmx-boosted navigation swaps only the body), so it listens on the document and acts
// only where a #transcript is present. Without JavaScript the page reads the same: each <details> toggles alone.
(function () {
  "use strict";

  function transcript() {
    return document.getElementById("transcript");
  }

  // The places j/k stop at: every step and group of repeats not hidden inside a closed <details>.
  function stops(root) {
    return Array.prototype.filter.call(root.querySelectorAll("li.step, li.step-group"), function (item) {
      var parent = item.parentElement && item.parentElement.closest("details");
      return !(parent && root.contains(parent) && !parent.open);
    });
  }

  function openAncestors(element, root) {
    for (var node = element.parentElement; node && node !== root; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
  }

  function current(root, items) {
    var active = document.activeElement;
    var holder = active && active.closest ? active.closest("li.step, li.step-group") : null;
    if (holder && items.indexOf(holder) !== -1) return items.indexOf(holder);
    var marked = root.querySelector("li.current");
    if (marked && items.indexOf(marked) !== -1) return items.indexOf(marked);
    var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    return target && items.indexOf(target) !== -1 ? items.indexOf(target) : -1;
  }

  function go(root, item) {
    var previous = root.querySelector("li.current");
    if (previous) previous.classList.remove("current");
    item.classList.add("current");
    openAncestors(item, root);
    var focusable = item.classList.contains("step-group") ? item.querySelector("summary") : item;
    focusable.focus({ preventScroll: true });
    item.scrollIntoView({ block: "start" });
    if (item.id && history.replaceState) history.replaceState(history.state, "", "#" + item.id);
  }

  // e: the first error step, or the one after the error step the reader is on (the first again after the last).
  function nextError(root) {
    var errors = Array.prototype.slice.call(root.querySelectorAll("li.step.has-error"));
    if (!errors.length) return null;
    var active = document.activeElement;
    var holder = active && active.closest ? active.closest("li.step") : null;
    var at = errors.indexOf(holder);
    if (at === -1) at = errors.indexOf(root.querySelector("li.current"));
    return errors[(at + 1) % errors.length];
  }

  function typing(target) {
    if (!target || !target.closest) return false;
    return Boolean(target.isContentEditable || target.closest("input, textarea, select"));
  }

  document.addEventListener("keydown", function (event) {
    var root = transcript();
    if (!root || event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) {
      return;
    }
    if (event.key === "e") {
      var error = nextError(root);
      if (!error) return;
      event.preventDefault();
      go(root, error);
      return;
    }
    if (event.key !== "j" && event.key !== "k") return;
    var items = stops(root);
    if (!items.length) return;
    var index = current(root, items);
    var next = event.key === "j" ? Math.min(index + 1, items.length - 1) : Math.max(index - 1, 0);
    if (index === -1) next = 0;
    event.preventDefault();
    go(root, items[next]);
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-details]") : null;
    var root = transcript();
    if (!button || !root || !root.contains(button)) return;
    var open = button.getAttribute("data-details") === "open";
    root.querySelectorAll("details").forEach(function (details) {
      details.open = open;
    });
  });

  // A link to a step inside a closed group of repeats opens the group.
  window.addEventListener("hashchange", function () {
    var root = transcript();
    var target = root && location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (target && root.contains(target)) openAncestors(target, root);
  });

  function reveal() {
    var root = transcript();
    if (!root) return;
    root.querySelectorAll(".transcript-tools[hidden]").forEach(function (tools) {
      tools.hidden = false;
    });
    var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (target && root.contains(target)) openAncestors(target, root);
  }

  document.addEventListener("DOMContentLoaded", reveal);
  document.addEventListener("htmx:load", reveal);
})();
