// The sidebar's session list: load, render, rename, delete.

import { el, icon, api, formatWhen } from "./util.js";

export const chatUrl = (chatId) => `/c/${encodeURIComponent(chatId)}/`;
const UNTITLED = "Untitled chat";

export class Sidebar {
  /**
   * options: {list, empty, url, onSelect(chatId), onDeleted(session), onChange(), onError(message)}
   */
  constructor(options) {
    this.o = options;
    this.sessions = [];
    this.loaded = false;
    this.current = "";
    this.editing = "";
    this.pending = null;
  }

  /** Reload the list from the API (coalescing concurrent calls). Returns the web sessions. */
  refresh() {
    if (this.pending) return this.pending;
    this.pending = api("GET", this.o.url)
      .then((data) => {
        const rows = Array.isArray(data) ? data : (data && data.results) || [];
        this.sessions = rows.filter((s) => s && (s.channel === "web" || String(s.key || "").startsWith("web:")));
        for (const s of this.sessions) {
          if (!s.chat_id) s.chat_id = String(s.key).slice(4);
        }
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

  find(chatId) {
    return this.sessions.find((s) => s.chat_id === chatId) || null;
  }

  setCurrent(chatId) {
    this.current = chatId;
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
          { class: "session-item draft", dataset: { key: `web:${this.current}`, chatId: this.current }, "aria-current": "page" },
          el("a", { class: "session-link", href: chatUrl(this.current) }, el("span", { class: "session-title", text: "New chat" })),
        ),
      );
    }
    for (const s of this.sessions) items.push(this.item(s));
    list.replaceChildren(...items);
    empty.hidden = !this.loaded || items.length > 0;
  }

  item(s) {
    const title = s.title || UNTITLED;
    const active = s.chat_id === this.current;
    const link = el(
      "a",
      { class: "session-link", href: chatUrl(s.chat_id), title },
      el("span", { class: "session-title", text: title }),
      el("span", { class: "session-when", text: formatWhen(s.updated), title: s.updated ? new Date(s.updated).toLocaleString() : "" }),
    );
    link.addEventListener("click", (event) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
      this.o.onSelect(s.chat_id);
    });
    const rename = el("button", { type: "button", class: "icon-btn session-rename", "aria-label": `Rename “${title}”`, title: "Rename" }, icon("pencil"));
    rename.addEventListener("click", () => this.startRename(s, li));
    const remove = el("button", { type: "button", class: "icon-btn session-delete", "aria-label": `Delete “${title}”`, title: "Delete" }, icon("trash"));
    remove.addEventListener("click", () => this.remove(s));
    const li = el(
      "li",
      { class: `session-item${active ? " active" : ""}`, dataset: { key: s.key, chatId: s.chat_id }, "aria-current": active ? "page" : null },
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
