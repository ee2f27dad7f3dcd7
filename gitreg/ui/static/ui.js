// gitreg web UI: progressive enhancement only. Every feature below works
// without this file (tabs are links, the version picker is a GET form).
(function () {
  "use strict";

  function setupTabs() {
    var list = document.querySelector('[role="tablist"]');
    if (!list) return;
    var tabs = Array.prototype.slice.call(list.querySelectorAll('[role="tab"]'));
    function select(tab, focus) {
      tabs.forEach(function (other) {
        var on = other === tab;
        other.setAttribute("aria-selected", on ? "true" : "false");
        other.tabIndex = on ? 0 : -1;
        var panel = document.getElementById(other.getAttribute("aria-controls"));
        if (panel) panel.hidden = !on;
      });
      if (focus) tab.focus();
      var url = new URL(window.location.href);
      url.searchParams.set("tab", tab.dataset.tab);
      window.history.replaceState(null, "", url.toString());
    }
    tabs.forEach(function (tab, index) {
      tab.addEventListener("click", function (event) {
        event.preventDefault();
        select(tab, false);
      });
      tab.addEventListener("keydown", function (event) {
        var next = null;
        if (event.key === "ArrowRight") next = tabs[(index + 1) % tabs.length];
        else if (event.key === "ArrowLeft") next = tabs[(index - 1 + tabs.length) % tabs.length];
        else if (event.key === "Home") next = tabs[0];
        else if (event.key === "End") next = tabs[tabs.length - 1];
        else if (event.key === " ") next = tab;
        if (next) {
          event.preventDefault();
          select(next, true);
        }
      });
    });
  }

  function setupPicker() {
    document.querySelectorAll("select[data-navigate]").forEach(function (select) {
      var form = select.form;
      function go() {
        var option = select.options[select.selectedIndex];
        if (!option || !option.dataset.href) return false;
        var tab = new URL(window.location.href).searchParams.get("tab");
        var query = tab ? "?tab=" + encodeURIComponent(tab) : "";
        window.location.assign(option.dataset.href + query);
        return true;
      }
      // A pointer choice navigates at once; arrow keys only move the choice
      // (some browsers fire `change` on each): Go, or Enter, submits it.
      var pointer = false;
      select.addEventListener("pointerdown", function () { pointer = true; });
      select.addEventListener("keydown", function (event) {
        pointer = false;
        if (event.key === "Enter" && go()) event.preventDefault();
      });
      select.addEventListener("change", function () {
        if (pointer) go();
      });
      if (form) {
        form.addEventListener("submit", function (event) {
          if (go()) event.preventDefault();
        });
      }
    });
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "offscreen";
      document.body.appendChild(area);
      area.select();
      var ok = document.execCommand("copy");
      document.body.removeChild(area);
      if (ok) resolve(); else reject(new Error("copy refused"));
    });
  }

  function setupCopy() {
    document.querySelectorAll("button[data-copy]").forEach(function (button) {
      var label = button.textContent;
      var live = document.getElementById(button.dataset.copy + "-live");
      var timer = null;
      function show(text, copied) {
        button.textContent = text;
        button.classList.toggle("done", copied);
        if (live) live.textContent = copied ? "Copied to the clipboard" : "";
        if (copied) button.dataset.copied = "true";
        window.clearTimeout(timer);
        timer = window.setTimeout(function () {
          button.textContent = label;
          button.classList.remove("done");
          if (live) live.textContent = "";
        }, 2500);
      }
      button.addEventListener("click", function () {
        var source = document.getElementById(button.dataset.copy);
        if (!source) return;
        copyText(source.textContent).then(function () {
          show("Copied", true);
        }, function () {
          show("Select and copy", false);
        });
      });
    });
  }

  // Scrolling README blocks and tables are reachable from the keyboard. Each
  // is measured when it first comes into view, not all at load: a large
  // README would otherwise be laid out in one long task.
  function setupScrollables() {
    var boxes = document.querySelectorAll(".readme pre, .readme table, .table-wrap");
    function mark(box) {
      if (box.scrollWidth > box.clientWidth && !box.hasAttribute("tabindex")) {
        box.setAttribute("tabindex", "0");
      }
    }
    if (!("IntersectionObserver" in window)) {
      boxes.forEach(mark);
      return;
    }
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (!entry.isIntersecting) return;
        mark(entry.target);
        observer.unobserve(entry.target);
      });
    });
    boxes.forEach(function (box) { observer.observe(box); });
  }

  function targetOf(fragment) {
    var id = decodeURIComponent(fragment);
    return id && (document.getElementById(id) || document.getElementsByName(id)[0]);
  }

  // A link to a README heading or anchor opens the panel that holds it, and
  // the folded rows of a long table when it is among them, and shows it.
  function showTarget() {
    var target = targetOf(window.location.hash.slice(1));
    if (!target) return;
    var moved = false;
    var panel = target.closest('[role="tabpanel"]');
    if (panel && panel.hidden) {
      var tab = document.getElementById(panel.getAttribute("aria-labelledby"));
      if (tab) tab.click();
      moved = true;
    }
    // Browsers that open a closed <details> for a link scroll to the
    // <details>, or not at all, rather than to the target inside it.
    var folded = target.closest("details");
    if (folded) {
      folded.open = true;
      moved = true;
    }
    if (moved) target.scrollIntoView();
  }

  // A followed link opens folded rows before the browser looks for its
  // target; showTarget then scrolls to it when the fragment changes.
  function openFoldedTargets() {
    document.addEventListener("click", function (event) {
      var link = event.target.closest && event.target.closest('a[href^="#"]');
      var target = link && targetOf(link.getAttribute("href").slice(1));
      var folded = target && target.closest("details");
      if (folded) folded.open = true;
    });
  }

  document.documentElement.classList.add("js");
  setupTabs();
  setupScrollables();
  showTarget();
  window.addEventListener("hashchange", showTarget);
  openFoldedTargets();
  setupPicker();
  setupCopy();
})();
