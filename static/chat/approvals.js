// Cards for the tool calls that wait for the user's yes (`approval_request`): the tool, its
// arguments, and Allow / Deny / Always for this chat. Every tab of the chat shows them and
// any may answer; a card goes in every tab once its call is answered (`approval_resolved`),
// whoever or whatever answered it (a tab, the API, its time running out, a stop).

import { el, parseArguments, summariseArguments } from "./util.js";

// How long a card's buttons stay disabled after a click with no answer from the server.
const RETRY_AFTER_MS = 5000;

export class Approvals {
  /** page: {conv (where cards go), send(frame) -> bool, notice(message)} */
  constructor(page) {
    this.page = page;
    this.cards = new Map(); // call id -> card node
  }

  /** The chat's history is shown afresh: its waiting calls are asked again after it. */
  clear() {
    for (const node of this.cards.values()) node.remove();
    this.cards.clear();
  }

  request(f) {
    const id = String(f.id || "");
    if (!id || this.cards.has(id)) return;
    const name = f.name || "tool";
    const [parsed, pretty] = parseArguments(f.arguments);
    const buttons = [
      this.button("Allow", "btn btn-primary approval-allow", id, true, false),
      this.button("Deny", "btn approval-deny", id, false, false),
      this.button("Always for this chat", "btn approval-always", id, true, true),
    ];
    const node = el(
      "div",
      {
        class: "approval-card",
        role: "group",
        "aria-label": `${name} waits for your approval`,
        dataset: { callId: id, toolName: name, runId: f.run_id || "" },
      },
      el(
        "div",
        { class: "approval-head" },
        el("span", { class: "approval-title", text: "Allow this tool call?" }),
        el("span", { class: "tool-name", text: name }),
        el("span", { class: "tool-args", text: summariseArguments(parsed, pretty) }),
      ),
      el("pre", { class: "approval-args", tabindex: "0", text: pretty }),
      el("div", { class: "approval-actions" }, ...buttons),
    );
    this.cards.set(id, node);
    this.page.conv.add(node);
  }

  resolved(f) {
    const id = String(f.id || "");
    const node = this.cards.get(id);
    if (!node) return;
    node.remove();
    this.cards.delete(id);
  }

  button(label, cls, id, allow, always) {
    const button = el("button", { type: "button", class: cls, text: label });
    button.addEventListener("click", () => this.answer(id, allow, always));
    return button;
  }

  answer(id, allow, always) {
    const node = this.cards.get(id);
    if (!node) return;
    if (!this.page.send({ type: "approve", id, allow, always })) {
      this.page.notice("Not connected: answer again once the connection is back.");
      return;
    }
    const buttons = node.querySelectorAll("button");
    for (const button of buttons) button.disabled = true;
    // The card goes when the server says the call is answered; if that never comes (the
    // answer was refused, the connection dropped), it may be answered again.
    setTimeout(() => {
      for (const button of buttons) button.disabled = false;
    }, RETRY_AFTER_MS);
  }
}
