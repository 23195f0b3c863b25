// tidings console: live refresh, theme, confirmations. No dependencies, no build step.
// Everything works without this script too (forms post, pages reload); it only adds comfort.
"use strict";

(function () {
  const root = document.documentElement;
  const THEMES = ["auto", "light", "dark"];

  function setTheme(theme) {
    root.dataset.theme = theme;
    document.cookie = "tidings_theme=" + theme + "; path=/ui; max-age=31536000; SameSite=Strict";
    const button = document.getElementById("theme-toggle");
    if (button) button.textContent = "Theme: " + theme;
  }

  function busy(main) {
    // Never pull the page from under someone: a focused field, a ticked box, a hidden tab.
    if (document.hidden) return true;
    const active = document.activeElement;
    if (active && main.contains(active) && active.matches("input, textarea, select")) return true;
    return main.querySelector("input[type=checkbox]:checked") !== null;
  }

  function localTimes(scope) {
    // Instants in the viewer's own time zone, which only the browser knows.
    scope.querySelectorAll("[data-local-ms]").forEach(function (cell) {
      const when = new Date(Number(cell.dataset.localMs));
      cell.textContent = when.toLocaleString(undefined, {
        year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
        second: "2-digit", timeZoneName: "short"});
    });
  }

  let live = localStorage.getItem("tidings-live") !== "off";

  async function refresh() {
    const main = document.getElementById("main");
    if (!main || !live || busy(main)) return;
    try {
      const response = await fetch(location.href, {credentials: "same-origin",
                                                    headers: {"X-Tidings-Refresh": "1"}});
      if (!response.ok || response.redirected) return;
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById("main");
      if (fresh && !busy(main)) {
        main.replaceChildren(...fresh.childNodes);
        localTimes(main);
        const stamp = document.getElementById("updated");
        if (stamp) stamp.textContent = "updated " + new Date().toLocaleTimeString();
      }
    } catch (err) {
      // Offline or the node restarting: try again at the next tick.
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    const main = document.getElementById("main");
    localTimes(document);
    const themeButton = document.getElementById("theme-toggle");
    if (themeButton) {
      themeButton.textContent = "Theme: " + (root.dataset.theme || "auto");
      themeButton.addEventListener("click", function () {
        const next = THEMES[(THEMES.indexOf(root.dataset.theme || "auto") + 1) % THEMES.length];
        setTheme(next);
      });
    }
    const liveButton = document.getElementById("refresh-toggle");
    if (liveButton) {
      const show = function () {
        liveButton.setAttribute("aria-pressed", String(live));
        liveButton.textContent = live ? "Live: on" : "Live: off";
      };
      show();
      liveButton.addEventListener("click", function () {
        live = !live;
        localStorage.setItem("tidings-live", live ? "on" : "off");
        show();
      });
    }
    const seconds = main ? Number(main.dataset.refresh || "0") : 0;
    if (seconds > 0) setInterval(refresh, seconds * 1000);
  });

  // Confirmation of destructive actions; delegated, so refreshed content keeps it.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });
})();
