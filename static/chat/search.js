// Search through the user's chats from the sidebar (`GET /api/search`): while the box has
// words in it, the results take the place of the chat list. A result names a chat and the
// message that matched, with the words marked; choosing it opens the chat at that message.

import { el, api } from "./util.js";
import { chatOfKey, chatUrl } from "./sessions.js";

const WAIT_MS = 250;
const UNTITLED = "Untitled chat";
// The words the server matches: letters and digits.
const WORDS = /[\p{L}\p{N}]+/gu;

export class ChatSearch {
  /**
   * dom: {input, results, list, empty, sessions (the chat list's nav)};
   * options: {url, isOpenable(key), onOpen(chat, messageId), onLoginLost()}
   */
  constructor(dom, options) {
    this.dom = dom;
    this.o = options;
    this.timer = 0;
    this.asked = 0; // the number of the latest request: answers to older ones are dropped
    dom.input.addEventListener("input", () => this.schedule());
    dom.input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        this.clear();
      } else if (event.key === "ArrowDown") {
        const first = dom.list.querySelector("a");
        if (first) {
          event.preventDefault();
          first.focus();
        }
      }
    });
    dom.input.addEventListener("search", () => this.schedule()); // the box's own clear button
  }

  get query() {
    return this.dom.input.value.trim();
  }

  clear() {
    this.dom.input.value = "";
    this.show(false);
  }

  schedule() {
    clearTimeout(this.timer);
    if (!this.query.match(WORDS)) {
      this.asked += 1;
      this.show(false);
      return;
    }
    this.timer = setTimeout(() => this.run(), WAIT_MS);
  }

  async run() {
    const query = this.query;
    const asked = ++this.asked;
    let hits;
    try {
      hits = await api("GET", `${this.o.url}?${new URLSearchParams({ q: query })}`);
    } catch (error) {
      if (asked !== this.asked) return;
      if (error && (error.status === 401 || error.status === 403)) this.o.onLoginLost();
      else this.render([], `Search failed: ${error && error.message ? error.message : error}`);
      return;
    }
    if (asked !== this.asked) return;
    this.render(Array.isArray(hits) ? hits : [], "");
  }

  show(searching) {
    this.dom.results.hidden = !searching;
    this.dom.sessions.hidden = searching;
  }

  render(hits, failure) {
    const terms = (this.query.match(WORDS) || []).map((word) => word.toLowerCase());
    const rows = hits.filter((hit) => hit && typeof hit.session === "string" && this.o.isOpenable(hit.session));
    this.dom.list.replaceChildren(...rows.map((hit) => this.item(hit, terms)));
    this.dom.empty.textContent = failure || "No chats match.";
    this.dom.empty.hidden = rows.length > 0 && !failure;
    this.show(true);
  }

  item(hit, terms) {
    const chat = chatOfKey(hit.session);
    const id = hit.message_id;
    const href = id ? `${chatUrl(chat)}#message-${id}` : chatUrl(chat);
    const who = hit.role === "assistant" ? "Agent" : hit.role === "user" ? "You" : "Title";
    const link = el(
      "a",
      { class: "search-link", href, dataset: { session: hit.session, messageId: id ?? "" } },
      el("span", { class: "search-title" }, marked(hit.title || UNTITLED, terms)),
      el("span", { class: "search-snippet" }, el("span", { class: "search-who", text: `${who}: ` }), marked(hit.snippet || "", terms)),
    );
    link.addEventListener("click", (event) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
      this.o.onOpen(chat, id || null);
    });
    return el("li", { class: "search-item" }, link);
  }
}

/** `text` with each of `terms` (case aside) in a <mark>, as DOM nodes (no HTML parsed). */
function marked(text, terms) {
  const frag = document.createDocumentFragment();
  const words = terms.filter(Boolean).map((term) => term.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!words.length) {
    frag.append(text);
    return frag;
  }
  const pattern = new RegExp(`(${words.join("|")})`, "giu");
  for (const [i, part] of text.split(pattern).entries()) {
    if (part) frag.append(i % 2 ? el("mark", { text: part }) : part);
  }
  return frag;
}
