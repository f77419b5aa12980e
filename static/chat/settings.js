// The settings dialog of the chat page: the header's Settings button opens it; its close
// button, Escape and a click outside close it. Two tabs: the person's API tokens
// (settings-tokens.js) and who they are here, their teams and what their policy lets them do
// (settings-me.js). Each tab reads the server afresh whenever it is shown.

import { TokensPart } from "./settings-tokens.js";
import { MePart } from "./settings-me.js";

const $ = (id) => document.getElementById(id);

class SettingsDialog {
  constructor() {
    this.dialog = $("settings");
    this.opener = $("settings-open");
    this.tabs = [...this.dialog.querySelectorAll("[role=tab]")];
    const tokens = new TokensPart({
      form: $("token-form"),
      name: $("token-name"),
      expiry: $("token-expiry"),
      create: $("token-create"),
      error: $("tokens-error"),
      secret: $("token-secret"),
      secretRow: $("token-secret-row"),
      secretValue: $("token-secret-value"),
      secretDone: $("token-secret-done"),
      list: $("token-list"),
      empty: $("token-empty"),
    });
    const me = new MePart($("me-body"));
    this.parts = { "settings-tokens": tokens, "settings-me": me };

    this.opener.addEventListener("click", () => this.open());
    $("settings-close").addEventListener("click", () => this.dialog.close());
    // A click on the backdrop lands on the dialog itself, outside its box.
    this.dialog.addEventListener("click", (event) => {
      if (event.target !== this.dialog) return;
      const box = this.dialog.getBoundingClientRect();
      const inside =
        event.clientX >= box.left && event.clientX <= box.right && event.clientY >= box.top && event.clientY <= box.bottom;
      if (!inside) this.dialog.close();
    });
    this.dialog.addEventListener("close", () => {
      tokens.forgetSecret(); // a secret shown once is not left in the page
      this.opener.focus();
    });
    for (const tab of this.tabs) {
      tab.addEventListener("click", () => this.select(tab));
      tab.addEventListener("keydown", (event) => this.onTabKey(event, tab));
    }
  }

  open() {
    if (this.dialog.open) return;
    this.dialog.showModal();
    const current = this.tabs.find((tab) => tab.getAttribute("aria-selected") === "true") || this.tabs[0];
    this.select(current);
  }

  select(tab) {
    for (const other of this.tabs) {
      const chosen = other === tab;
      other.setAttribute("aria-selected", String(chosen));
      other.tabIndex = chosen ? 0 : -1;
      $(other.getAttribute("aria-controls")).hidden = !chosen;
    }
    this.parts[tab.getAttribute("aria-controls")].load();
  }

  // The tabs as one stop of the keyboard: the arrows, Home and End move between them.
  onTabKey(event, tab) {
    const at = this.tabs.indexOf(tab);
    const moves = {
      ArrowRight: at + 1,
      ArrowLeft: at - 1,
      Home: 0,
      End: this.tabs.length - 1,
    };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const next = this.tabs[(moves[event.key] + this.tabs.length) % this.tabs.length];
    next.focus();
    this.select(next);
  }
}

if (document.getElementById("settings")) new SettingsDialog();
