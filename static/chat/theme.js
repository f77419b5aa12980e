// The colour theme. Loaded as a plain script at the top of <head> (the Content-Security-Policy
// allows no inline script), so <html data-theme> is set before anything paints: the choice the
// reader made with the toggle, else the system's (prefers-color-scheme), followed as it changes.
// The choice is kept in localStorage under the key and values the Django admin's own toggle
// uses ("theme": "light", "dark" or "auto"), so the chat and the admin follow the same one.
(() => {
  const KEY = "theme";
  const root = document.documentElement;
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");

  function stored() {
    try {
      return localStorage.getItem(KEY);
    } catch {
      return null; // storage refused (a privacy setting): the system decides
    }
  }

  function current() {
    const choice = stored();
    if (choice === "light" || choice === "dark") return choice;
    return systemDark.matches ? "dark" : "light";
  }

  // Stylesheets and theme-color tags made for one theme (data-theme-for) apply in it alone;
  // their media queries, for a browser without this script, follow the system.
  function applyToTags(theme) {
    for (const node of document.querySelectorAll("[data-theme-for]")) {
      node.media = node.dataset.themeFor === theme ? "all" : "not all";
    }
    for (const button of document.querySelectorAll("[data-theme-toggle]")) {
      const dark = theme === "dark";
      button.setAttribute("aria-pressed", String(dark));
      button.title = dark ? "Switch to the light theme" : "Switch to the dark theme";
    }
  }

  function apply() {
    const theme = current();
    root.dataset.theme = theme;
    if (document.readyState !== "loading") applyToTags(theme);
  }

  function toggle() {
    const next = current() === "dark" ? "light" : "dark";
    try {
      localStorage.setItem(KEY, next);
    } catch {
      /* not kept: this page still switches */
    }
    root.dataset.theme = next;
    applyToTags(next);
  }

  apply();
  document.addEventListener("DOMContentLoaded", () => {
    applyToTags(current());
    for (const button of document.querySelectorAll("[data-theme-toggle]")) {
      button.addEventListener("click", toggle);
    }
  });
  systemDark.addEventListener("change", apply);
  // Another tab (or the admin) changed the choice.
  window.addEventListener("storage", (event) => {
    if (event.key === KEY || event.key === null) apply();
  });
})();
