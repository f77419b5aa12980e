// Earlier versions of the conversation, which an edit or a regeneration replaced. A user
// bubble that replaced others carries them (`data-versions`: {earlier: [message ids, oldest
// first], edited}, from the history, or from the `archived` frame that came before it), and
// gets a `‹ k/N ›` switch: on the bubble when its text was edited, else (regenerations) on
// its turn's reply. Going back shows the earlier version read-only in place of the live one
// and what follows it, as the server keeps it (`version` frames); the last one is the live
// conversation again.

import { el } from "./util.js";

const SWITCH = "version-switch";

export class Versions {
  /**
   * dom: {messages, scroller}; options: {conv, send(frame) → bool, notice(message, kind)}
   */
  constructor(dom, options) {
    this.dom = dom;
    this.o = options;
    this.cache = new Map(); // message id -> the messages of the version it starts
    this.pending = null; // {earlier, text, edited}: for the bubble that follows an `archived`
    this.asked = null; // {root, index}: waiting for a `version` frame to show it
    this.viewing = null; // {root, node, hidden}: an earlier version shown in place of the live one
    new MutationObserver((changes) => this.onChanges(changes)).observe(dom.messages, {
      childList: true,
      attributes: true,
      attributeFilter: ["aria-busy"],
    });
  }

  // ---- what the server says ------------------------------------------------

  /** Messages leave the conversation (an edit or a regeneration): the bubble that says the
   *  first of them again replaces it, with its earlier versions and this one. */
  onArchived(frame) {
    this.close();
    const { messages } = this.dom;
    let first = messages.querySelector(`:scope > .msg.user[data-id="${Number(frame.id)}"]`);
    if (!first && frame.run_id) first = messages.querySelector(`:scope > .msg.user[data-run-id="${CSS.escape(String(frame.run_id))}"]`);
    this.pending = null;
    if (!first) return; // the page loads the conversation afresh, versions and all
    const known = versionsOf(first) || { earlier: [], edited: false };
    this.pending = { earlier: [...known.earlier, Number(frame.id)], text: bodyText(first), edited: known.edited };
  }

  /** A `version` frame: the messages of the earlier version starting at message `id`. */
  onVersion(frame) {
    const id = Number(frame.id);
    this.cache.set(id, Array.isArray(frame.messages) ? frame.messages : []);
    const asked = this.asked;
    if (asked && asked.root.isConnected && idAt(asked.root, asked.index) === id) {
      this.asked = null;
      this.show(asked.root, asked.index, asked.top);
    }
  }

  /** Another chat, or the conversation afresh: nothing shown or asked for is left. */
  reset() {
    this.close();
    this.cache.clear();
    this.pending = null;
    this.asked = null;
  }

  // ---- the page's bubbles -----------------------------------------------------

  onChanges(changes) {
    const viewing = this.viewing;
    if (viewing && !viewing.node.isConnected) this.viewing = null; // the conversation was redrawn
    for (const change of changes) {
      if (change.type === "attributes") {
        // A turn starts: what it writes goes to the live conversation, shown again.
        if (this.dom.messages.getAttribute("aria-busy") === "true") this.close();
        continue;
      }
      for (const node of change.addedNodes) {
        if (!(node instanceof HTMLElement) || (this.viewing && node === this.viewing.node)) continue;
        if (this.viewing && this.viewing.node.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_FOLLOWING) this.close();
        if (this.pending && node.classList.contains("msg") && node.dataset.role === "user") {
          const { earlier, text, edited } = this.pending;
          this.pending = null;
          node.dataset.versions = JSON.stringify({ earlier, edited: edited || bodyText(node) !== text });
        }
      }
    }
    this.decorate();
  }

  /** A switch on every live bubble (or reply) with earlier versions, and on nothing else. */
  decorate() {
    const { messages } = this.dom;
    const wanted = new Map(); // the node that shows the switch -> its root user bubble
    for (const root of messages.querySelectorAll(":scope > .msg.user[data-versions]")) {
      const versions = versionsOf(root);
      if (!versions || !versions.earlier.length) continue;
      wanted.set(targetOf(root, versions), root);
    }
    for (const existing of messages.querySelectorAll(`:scope > .msg > .${SWITCH}`)) {
      const root = wanted.get(existing.parentElement);
      if (root && existing.root === root) wanted.delete(existing.parentElement);
      else existing.remove();
    }
    for (const [target, root] of wanted) {
      const count = versionsOf(root).earlier.length + 1;
      place(target, this.switchFor(root, count, count));
    }
  }

  switchFor(root, index, count) {
    const back = el("button", { type: "button", class: "version-prev", "aria-label": "Earlier version", title: "Earlier version", text: "‹" });
    const next = el("button", { type: "button", class: "version-next", "aria-label": "Later version", title: "Later version", text: "›" });
    const label = el("span", { class: "version-label", "aria-live": "polite", text: `${index}/${count}` });
    back.disabled = index <= 1;
    next.disabled = index >= count;
    const node = el("div", { class: SWITCH, role: "group", "aria-label": `Version ${index} of ${count}` }, back, label, next);
    node.root = root;
    const top = () => node.getBoundingClientRect().top;
    back.addEventListener("click", () => this.go(root, index - 1, top()));
    next.addEventListener("click", () => this.go(root, index + 1, top()));
    return node;
  }

  // ---- showing a version --------------------------------------------------------

  /** Go to version `index` of `root`; `top`: where the switch used was on the screen. */
  go(root, index, top = null) {
    if (!root.isConnected) return;
    const versions = versionsOf(root);
    if (!versions || index < 1 || index > versions.earlier.length + 1) return;
    if (index === versions.earlier.length + 1) {
      this.close();
      this.keepInPlace(top, this.liveSwitch(root));
      return;
    }
    const id = idAt(root, index);
    if (this.cache.has(id)) {
      this.show(root, index, top);
      return;
    }
    if (!this.o.send({ type: "version", id })) {
      this.o.notice("Not connected: try again in a moment.", "warning");
      return;
    }
    this.asked = { root, index, top };
  }

  /** Show version `index` of `root` read-only in place of the live conversation from `root` on. */
  show(root, index, top = null) {
    const { conv } = this.o;
    const versions = versionsOf(root);
    const messages = this.cache.get(idAt(root, index)) || [];
    this.close();
    // Its own tool cards: a call of an earlier version may carry the id of a live one.
    const cards = conv.cards;
    conv.cards = new Map();
    let built;
    try {
      built = conv.build(messages);
    } finally {
      conv.cards = cards;
    }
    const count = versions.earlier.length + 1;
    const note = el("div", { class: "version-note", role: "note", text: `Version ${index} of ${count}: kept for reading; the chat goes on from version ${count}.` });
    const node = el("div", { class: "version-view", role: "group", "aria-label": `Earlier version ${index} of ${count}` }, built, note);
    const first = node.querySelector(".msg.user");
    const view = this.switchFor(root, index, count);
    if (first) place(targetOf(first, versions), view);
    else node.prepend(view);
    const hidden = [];
    for (let at = root; at; at = at.nextElementSibling) {
      if (!at.hidden) {
        at.hidden = true;
        hidden.push(at);
      }
    }
    this.viewing = { root, node, hidden };
    root.before(node);
    this.keepInPlace(top, view);
  }

  /** The live conversation again, in place of an earlier version. */
  close() {
    const viewing = this.viewing;
    if (!viewing) return;
    this.viewing = null;
    viewing.node.remove();
    for (const node of viewing.hidden) node.hidden = false;
    this.decorate();
  }

  liveSwitch(root) {
    return Array.from(this.dom.messages.querySelectorAll(`:scope > .msg > .${SWITCH}`)).find((node) => node.root === root) || null;
  }

  /** Keep the switch just used (now `node`) where it was on the screen, under the pointer. */
  keepInPlace(top, node) {
    if (top === null || !node) return;
    const moved = node.getBoundingClientRect().top - top;
    if (moved) this.dom.scroller.scrollTop += moved;
    this.o.conv.stick = this.o.conv.atBottom();
  }
}

function versionsOf(node) {
  try {
    const value = JSON.parse(node.dataset.versions || "null");
    if (value && Array.isArray(value.earlier)) return { earlier: value.earlier.map(Number), edited: Boolean(value.edited) };
  } catch {
    /* not ours to read */
  }
  return null;
}

/** The id of the message that starts version `index` (1: the oldest) of `root`. */
function idAt(root, index) {
  return versionsOf(root).earlier[index - 1];
}

/** Where a bubble's switch goes: on it when it was edited, else on its turn's reply. */
function targetOf(root, versions) {
  return (!versions.edited && replyOf(root)) || root;
}

function bodyText(node) {
  const body = node.querySelector(".msg-body");
  return body ? body.textContent : "";
}

/** The reply that ends the turn of the user bubble `root`: its last reply before the next
 *  bubble of the user's. */
function replyOf(root) {
  let reply = null;
  for (let at = root.nextElementSibling; at; at = at.nextElementSibling) {
    if (at.classList.contains("msg") && at.dataset.role === "user") break;
    if (at.classList.contains("msg") && at.dataset.role === "assistant") reply = at;
  }
  return reply;
}

/** The switch goes under the bubble's text, before its hover actions. */
function place(target, node) {
  const actions = target.querySelector(":scope > .msg-actions");
  if (actions && target.dataset.role === "assistant") target.insertBefore(node, actions);
  else target.append(node);
}
