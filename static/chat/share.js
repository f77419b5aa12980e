// "Share" in the chat page's header: shares the open chat, as it is now and read-only, with
// teams of the person's (ticked, from `GET /api/me`) and people (typed by username), then
// shows the link to copy (`POST /api/sessions/<key>/shares`). The dialog is built here,
// the first time it opens; the page itself has only the button (templates/chat.html).

import { api, el, icon, copyButton } from "./util.js";
import { keyOfChat } from "./sessions.js";

const ME_URL = "/api/me";

/** The open chat's address on the page (`/c/<chat>/`); "" for none. */
function openChat() {
  const match = location.pathname.match(/^\/c\/([^/]+)\/?$/);
  if (!match) return "";
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return "";
  }
}

/** A 400's reasons in words: `{"people": ["No such person: x."]}` reads "No such person: x." */
function reasons(error) {
  const text = error && error.message ? error.message : String(error);
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed === "object") return Object.values(parsed).flat().join(" ");
  } catch {
    /* already words */
  }
  return text;
}

class ShareDialog {
  constructor(opener) {
    this.opener = opener;
    this.key = "";
    this.teamNames = new Map(); // slug -> the team's name, as `GET /api/me` gave it
    this.teams = el("div", { class: "share-teams", id: "share-teams", "aria-busy": "true" });
    this.people = el("input", {
      type: "text",
      id: "share-people",
      name: "people",
      autocomplete: "off",
      spellcheck: "false",
      placeholder: "Usernames, separated by commas",
    });
    this.error = el("p", { class: "settings-error", id: "share-error", role: "alert", hidden: true });
    this.submit = el("button", { type: "submit", class: "btn btn-primary", id: "share-submit", text: "Share" });
    const cancel = el("button", { type: "button", class: "btn", text: "Cancel", on: { click: () => this.dialog.close() } });
    this.form = el(
      "form",
      { class: "share-form", id: "share-form", novalidate: true },
      el(
        "p",
        { class: "settings-intro" },
        "Those you share with see this chat as it is now, tool calls included, read-only, and may continue it in a chat of their own. What it says later is not shared.",
      ),
      el("fieldset", { class: "share-fieldset" }, el("legend", { text: "Your teams" }), this.teams),
      el("div", { class: "token-field" }, el("label", { for: "share-people", text: "People" }), this.people),
      this.error,
      el("div", { class: "share-actions" }, cancel, this.submit),
    );
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.share();
    });

    this.link = el("input", { type: "text", class: "token-secret-value", id: "share-link", readonly: true, "aria-label": "The shared chat's link" });
    this.result = el(
      "div",
      { class: "share-result", id: "share-result", hidden: true },
      el("p", { class: "share-result-text", id: "share-result-text" }),
      el("div", { class: "token-secret-row" }, this.link, copyButton(() => this.link.value, "Copy", "Copy the link")),
      el("button", { type: "button", class: "btn share-done", text: "Done", on: { click: () => this.dialog.close() } }),
    );

    this.dialog = el(
      "dialog",
      { class: "settings-dialog share-dialog", id: "share-dialog", "aria-labelledby": "share-title" },
      el(
        "div",
        { class: "settings-head" },
        el("h2", { class: "settings-title", id: "share-title", text: "Share this chat" }),
        el("button", { type: "button", class: "icon-btn", "aria-label": "Close", on: { click: () => this.dialog.close() } }, icon("close")),
      ),
      el("div", { class: "settings-panel" }, this.form, this.result),
    );
    // A click on the backdrop lands on the dialog itself, outside its box.
    this.dialog.addEventListener("click", (event) => {
      if (event.target !== this.dialog) return;
      const box = this.dialog.getBoundingClientRect();
      const inside = event.clientX >= box.left && event.clientX <= box.right && event.clientY >= box.top && event.clientY <= box.bottom;
      if (!inside) this.dialog.close();
    });
    this.dialog.addEventListener("close", () => this.opener.focus());
    document.body.append(this.dialog);
  }

  open() {
    const chat = openChat();
    this.key = chat ? keyOfChat(chat) : "";
    this.form.hidden = false;
    this.result.hidden = true;
    this.error.hidden = true;
    this.people.value = "";
    this.submit.disabled = false;
    this.dialog.showModal();
    if (!chat || chat.startsWith("team:")) {
      this.form.hidden = true;
      this.showResult(chat ? "A team's chat is its members' already." : "Open a chat to share it.", "");
      return;
    }
    this.loadTeams();
  }

  async loadTeams() {
    this.teams.setAttribute("aria-busy", "true");
    this.teams.replaceChildren(el("p", { class: "settings-empty", text: "Loading your teams…" }));
    try {
      const me = await api("GET", ME_URL);
      const teams = (me && me.teams) || [];
      this.teamNames = new Map(teams.map((team) => [team.slug, team.name || team.slug]));
      if (!teams.length) {
        this.teams.replaceChildren(el("p", { class: "settings-empty", text: "You are in no team: name people below." }));
      } else {
        this.teams.replaceChildren(
          ...teams.map((team) =>
            el(
              "label",
              { class: "share-team" },
              el("input", { type: "checkbox", name: "teams", value: team.slug }),
              el("span", { text: team.name || team.slug }),
            ),
          ),
        );
      }
    } catch (error) {
      this.teams.replaceChildren(el("p", { class: "settings-empty", text: `Your teams could not be read: ${reasons(error)}` }));
    } finally {
      this.teams.setAttribute("aria-busy", "false");
    }
  }

  async share() {
    const teams = [...this.teams.querySelectorAll("input[name=teams]:checked")].map((box) => box.value);
    const people = this.people.value.split(/[\s,;]+/).filter(Boolean);
    if (!teams.length && !people.length) {
      this.fail("Tick a team or name a person to share the chat with.");
      return;
    }
    this.submit.disabled = true;
    this.error.hidden = true;
    try {
      const made = await api("POST", `/api/sessions/${this.key}/shares`, { teams, people });
      const readers = [...made.teams.map((slug) => `the team ${this.teamNames.get(slug) || slug}`), ...made.people];
      this.form.hidden = true;
      this.showResult(`Shared with ${readers.join(", ")}. They can open it at this link:`, made.url);
    } catch (error) {
      this.fail(error && error.status === 404 ? "This chat has no messages to share yet." : reasons(error));
    } finally {
      this.submit.disabled = false;
    }
  }

  showResult(text, url) {
    this.result.querySelector(".share-result-text").textContent = text;
    this.link.value = url;
    this.link.parentElement.hidden = !url;
    this.result.hidden = false;
    if (url) {
      this.link.focus();
      this.link.select();
    }
  }

  fail(message) {
    this.error.textContent = message;
    this.error.hidden = false;
  }
}

const opener = document.getElementById("share-open");
if (opener) {
  let dialog = null;
  opener.addEventListener("click", () => {
    dialog = dialog || new ShareDialog(opener);
    dialog.open();
  });
}
