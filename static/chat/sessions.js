// The sidebar's session list: load, render, rename, delete.

import { el, icon, api, formatWhen } from "./util.js";
import { teamIcon } from "./team.js";

// A chat's address on the page and its socket: a web session by its chat id, an API or OpenAI
// client's session or a team's chat by its whole key (`web:abc` is `/c/abc/`, `api:x` is
// `/c/api:x/`, `openai:y` is `/c/openai:y/`, `team:z` is `/c/team:z/`; see sessions_app/keys.py).
export const chatOfKey = (key) => (key.startsWith("web:") ? key.slice(4) : key);
export const keyOfChat = (chat) => (/^(api|openai|team):/.test(chat) ? chat : `web:${chat}`);
// The badge of a session another door started.
const BADGES = {
  api: { text: "API", title: "Started through the API" },
  openai: { text: "OpenAI", title: "Started by an OpenAI client (/v1/chat/completions)" },
};
// Not escaped: the rule keeps chat ids to characters a path takes as they are, and an escaped
// `:` would make the address differ from `location.pathname`.
export const chatUrl = (chat) => `/c/${chat}/`;
const UNTITLED = "Untitled chat";

export class Sidebar {
  /**
   * options: {list, empty, url, isChat(chat), onSelect(chat), onDeleted(session), onChange(), onError(message),
   *           teamName(slug), mayDelete(session) (a team chat: only its team's admins may)}
   */
  constructor(options) {
    this.o = options;
    this.sessions = [];
    this.loaded = false;
    this.current = "";
    this.editing = "";
    this.pending = null;
  }

  /** Reload the list from the API (coalescing concurrent calls). Returns the sessions the page
   * opens: web chats and API sessions, each with its address as `chat`. */
  refresh() {
    if (this.pending) return this.pending;
    this.pending = api("GET", this.o.url)
      .then((data) => {
        const rows = Array.isArray(data) ? data : (data && data.results) || [];
        this.sessions = rows.filter((s) => s && typeof s.key === "string" && this.opens(s.key));
        for (const s of this.sessions) s.chat = chatOfKey(s.key);
        this.loaded = true;
        this.render();
        this.o.onChange();
        return this.sessions;
      })
      .finally(() => {
        this.pending = null;
      });
    return this.pending;
  }

  /** Whether the page opens session `key`: its address is a chat and names it back. */
  opens(key) {
    const chat = chatOfKey(key);
    return this.o.isChat(chat) && keyOfChat(chat) === key;
  }

  find(chat) {
    return this.sessions.find((s) => s.chat === chat) || null;
  }

  setCurrent(chat) {
    this.current = chat;
    this.render();
  }

  render() {
    if (this.editing) return; // don't destroy an open rename box
    const { list, empty } = this.o;
    const items = [];
    if (this.current && !this.find(this.current)) {
      // The open chat has no stored messages yet: show it as a draft at the top.
      items.push(
        el(
          "li",
          { class: "session-item draft", dataset: { key: keyOfChat(this.current), chatId: this.current }, "aria-current": "page" },
          el("a", { class: "session-link", href: chatUrl(this.current) }, el("span", { class: "session-title", text: "New chat" })),
        ),
      );
    }
    // The person's own chats first; then each team's, under the team's name.
    const teams = new Map();
    for (const s of this.sessions) {
      if (!s.team) items.push(this.item(s));
      else if (teams.has(s.team)) teams.get(s.team).push(s);
      else teams.set(s.team, [s]);
    }
    const named = Array.from(teams, ([slug, sessions]) => [this.o.teamName(slug), slug, sessions]);
    named.sort((a, b) => a[0].localeCompare(b[0]));
    for (const [name, slug, sessions] of named) {
      items.push(
        el(
          "li",
          { class: "session-team", dataset: { team: slug } },
          el("div", { class: "session-team-label", id: `team-label-${slug}` }, teamIcon(), el("span", { class: "session-team-name", text: name })),
          el("ul", { class: "session-list session-team-list", "aria-labelledby": `team-label-${slug}` }, ...sessions.map((s) => this.item(s))),
        ),
      );
    }
    list.replaceChildren(...items);
    empty.hidden = !this.loaded || items.length > 0;
  }

  item(s) {
    const title = s.title || UNTITLED;
    const active = s.chat === this.current;
    const badge = BADGES[s.key.split(":", 1)[0]];
    const link = el(
      "a",
      { class: "session-link", href: chatUrl(s.chat), title },
      el("span", { class: "session-title", text: title }),
      badge ? el("span", { class: "session-badge", text: badge.text, title: badge.title }) : null,
      el("span", { class: "session-when", text: formatWhen(s.updated), title: s.updated ? new Date(s.updated).toLocaleString() : "" }),
    );
    link.addEventListener("click", (event) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
      this.o.onSelect(s.chat);
    });
    const rename = el("button", { type: "button", class: "icon-btn session-rename", "aria-label": `Rename “${title}”`, title: "Rename" }, icon("pencil"));
    rename.addEventListener("click", () => this.startRename(s, li));
    // A team chat is every member's: only its team's admins delete it.
    const remove = this.o.mayDelete(s) ? el("button", { type: "button", class: "icon-btn session-delete", "aria-label": `Delete “${title}”`, title: "Delete" }, icon("trash")) : null;
    if (remove) remove.addEventListener("click", () => this.remove(s));
    const li = el(
      "li",
      { class: `session-item${active ? " active" : ""}`, dataset: { key: s.key, chatId: s.chat }, "aria-current": active ? "page" : null },
      link,
      el("div", { class: "session-actions" }, rename, remove),
    );
    return li;
  }

  startRename(s, li) {
    this.editing = s.key;
    const input = el("input", {
      type: "text",
      class: "session-rename-input",
      value: s.title || "",
      maxlength: "200",
      "aria-label": "New title",
    });
    let finished = false;
    const finish = async (save) => {
      if (finished) return;
      finished = true;
      this.editing = "";
      const title = input.value.trim();
      if (save && title && title !== s.title) {
        try {
          const updated = await api("PATCH", `${this.o.url}/${encodeURIComponent(s.key)}`, { title });
          s.title = (updated && updated.title) || title;
          this.o.onChange();
        } catch (error) {
          this.o.onError(`Could not rename the chat: ${error.message}`);
        }
      }
      this.render();
      const again = this.o.list.querySelector(`[data-key="${CSS.escape(s.key)}"] .session-rename`);
      if (again && !save) again.focus();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        finish(true);
      } else if (event.key === "Escape") {
        event.preventDefault();
        finish(false);
      }
    });
    input.addEventListener("blur", () => finish(true));
    li.replaceChildren(input);
    li.classList.add("editing");
    input.focus();
    input.select();
  }

  async remove(s) {
    const title = s.title || UNTITLED;
    if (!window.confirm(`Delete “${title}”? Its messages are removed for good.`)) return;
    try {
      await api("DELETE", `${this.o.url}/${encodeURIComponent(s.key)}`);
    } catch (error) {
      if (error.status !== 404) {
        this.o.onError(`Could not delete the chat: ${error.message}`);
        return;
      }
    }
    this.sessions = this.sessions.filter((x) => x.key !== s.key);
    this.render();
    this.o.onDeleted(s);
  }
}
