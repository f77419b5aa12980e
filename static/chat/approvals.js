// Cards for the tool calls that wait for the user's yes (`approval_request`): the tool, its
// arguments, and Allow / Deny / Always for this chat. Every tab of the chat shows them and
// any may answer; a card goes in every tab once its call is answered (`approval_resolved`),
// whoever or whatever answered it (a tab, the API, its time running out, a stop).
// After a reload the stored answer lists the waiting call too, as a tool card with no
// result: the approval card takes its place while the call waits.

import { el, parseArguments, summariseArguments } from "./util.js";
import { ask } from "./confirm.js";

// How long a card's buttons stay disabled after a click with no answer from the server.
const RETRY_AFTER_MS = 5000;
// Commands that go without asking: they leave a waiting call alone (/help, /model), or
// say plainly that they end it (/stop). The server's rule for a command: its first word.
const LEAVES_WAITING = new Set(["/help", "/model", "/stop"]);

export class Approvals {
  /**
   * page: {conv (where cards go), send(frame) -> bool, notice(message),
   *        onChange() (a card came or went)}
   */
  constructor(page) {
    this.page = page;
    this.cards = new Map(); // call id -> card node
  }

  /** How many calls wait for an answer here. */
  get waiting() {
    return this.cards.size;
  }

  /**
   * Whether `text` may go now: a new message ends the turn that waits, its calls
   * declined, so with a card waiting the person is asked first. Resolves true or false.
   */
  async confirmSend(text) {
    if (!this.cards.size || LEAVES_WAITING.has(text.trim().split(" ")[0].toLowerCase())) return true;
    const one = this.cards.size === 1;
    return ask({
      message: one
        ? "A tool call is waiting for your answer: send anyway and decline it?"
        : `${this.cards.size} tool calls are waiting for your answer: send anyway and decline them?`,
      yes: "Send",
      no: "Cancel",
      label: "Send while a tool call waits",
    });
  }

  /** The chat's history is shown afresh: its waiting calls are asked again after it. */
  clear() {
    for (const node of this.cards.values()) node.remove();
    const had = this.cards.size;
    this.cards.clear();
    if (had) this.page.onChange();
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
      whoMayAnswer(f.answerable_by),
      el("div", { class: "approval-actions" }, ...buttons),
    );
    this.cards.set(id, node);
    const stored = storedCard(id);
    if (stored) {
      stored.hidden = true;
      stored.before(node);
    } else {
      this.page.conv.add(node);
    }
    this.page.onChange();
  }

  resolved(f) {
    const id = String(f.id || "");
    const node = this.cards.get(id);
    if (!node) return;
    node.remove();
    this.cards.delete(id);
    // A turn that goes on shows the call's result (or why it did not run) on the call's own
    // card; one that ended with it (stopped, or a new message came) sends none, and the
    // card would only say "no result".
    const stored = storedCard(id);
    if (stored && f.reason !== "stopped" && f.reason !== "superseded") stored.hidden = false;
    this.page.onChange();
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

/** In a team chat, the line that says who may answer: the sender, or a team admin. */
function whoMayAnswer(by) {
  if (!by) return null;
  const who = by.author ? `${by.author.name}, who sent the message, or a team admin` : "a team admin";
  return el("div", { class: "approval-who", text: `Only ${who} may answer.` });
}

/** The tool card a reloaded history shows for call `id`, if any. */
function storedCard(id) {
  return document.querySelector(`#messages .tool-card[data-tool-id="${CSS.escape(id)}"]`);
}
