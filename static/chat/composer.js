// The composer: the message box (growing with its text), the hint line under it and the
// send/stop button. What a message or a stop does is the page's business (onSubmit, onStop).
// Send is offered only when there is something to send: text, or an attachment
// (hasAttachments, for attachments kept beside the text).

const DEFAULT_HINT = "Enter to send · Shift+Enter for a new line · /help lists commands";
const COMMANDS = [
  ["/new", "start a new conversation"],
  ["/stop", "stop the running turn"],
  ["/help", "list the commands"],
  ["/model NAME", "switch this chat's model"],
];

export class Composer {
  /**
   * dom: {form, input, send, sendLabel, hint};
   * options: {onSubmit(), onStop(), hasAttachments()?, escapeStops()? (whether Escape stops now)}
   */
  constructor(dom, options) {
    this.dom = dom;
    this.o = options;
    this.stopTimer = 0;
    this.stopAsked = false; // a stop was sent and not yet confirmed

    dom.form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (dom.send.dataset.state === "stop") this.o.onStop();
      else this.o.onSubmit();
      if (!matchMedia("(pointer: coarse)").matches) dom.input.focus();
    });
    dom.input.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) return;
      event.preventDefault();
      this.o.onSubmit(); // Enter always sends, even while a turn runs (the server decides)
    });
    // Escape anywhere on the page stops a reply being written, unless something nearer
    // took it (an editor, the search box, the chat list) or a dialog is open: Escape
    // closes that.
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
      if (document.querySelector("dialog[open]")) return;
      if (!this.running || this.stopAsked || !(this.o.escapeStops ? this.o.escapeStops() : true)) return;
      event.preventDefault();
      this.o.onStop();
    });
    dom.input.addEventListener("input", () => {
      this.autoGrow();
      this.updateHint();
      this.updateSendable();
    });
  }

  get value() {
    return this.dom.input.value;
  }

  focus() {
    this.dom.input.focus();
  }

  /** Empty the box (after sending). */
  clear() {
    this.dom.input.value = "";
    this.autoGrow();
    this.updateHint();
    this.updateSendable();
  }

  /** Give back a message the server refused, unless something new is being written. */
  restore(text) {
    if (this.dom.input.value.trim()) return;
    this.dom.input.value = text;
    this.autoGrow();
    this.updateHint();
    this.updateSendable();
  }

  /** Add `line` on a line of its own after what is written, and go on writing. */
  addLine(line) {
    const input = this.dom.input;
    const before = input.value;
    input.value = before && !before.endsWith("\n") ? `${before}\n${line}\n` : `${before}${line}\n`;
    this.autoGrow();
    this.updateHint();
    this.updateSendable();
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  /** The box as the page opens: the usual hint, the height of its content. */
  start() {
    this.dom.hint.textContent = DEFAULT_HINT;
    this.autoGrow();
    this.updateSendable();
  }

  /** Whether there is anything to send: words (not only spaces) or an attachment. */
  get sendable() {
    return Boolean(this.dom.input.value.trim()) || Boolean(this.o.hasAttachments && this.o.hasAttachments());
  }

  /** Send is usable with something to send; Stop always is, unless a stop is on its way. */
  updateSendable() {
    const { send, input } = this.dom;
    if (this.stopAsked) return;
    send.disabled = input.disabled || (send.dataset.state !== "stop" && !this.sendable);
  }

  autoGrow() {
    const c = this.dom.input;
    c.style.height = "auto";
    c.style.height = `${Math.min(c.scrollHeight, Math.round(window.innerHeight * 0.4))}px`;
  }

  updateHint() {
    const value = this.dom.input.value;
    if (value.startsWith("/") && !value.includes("\n")) {
      const typed = value.split(/\s/)[0];
      const matches = COMMANDS.filter(([cmd]) => cmd.startsWith(typed) || typed.startsWith(cmd.split(" ")[0]));
      this.dom.hint.textContent = (matches.length ? matches : COMMANDS).map(([c, d]) => `${c}: ${d}`).join(" · ");
    } else {
      this.dom.hint.textContent = DEFAULT_HINT;
    }
  }

  /** The button sends, or stops the running turn (or the turn that waits for an answer). */
  setRunning(running) {
    const { send, sendLabel } = this.dom;
    const mode = running ? "stop" : "send";
    if (send.dataset.state !== mode || this.stopAsked) {
      clearTimeout(this.stopTimer);
      this.stopAsked = false;
      send.dataset.state = mode;
      send.setAttribute("aria-label", running ? "Stop the running turn" : "Send message");
      sendLabel.textContent = running ? "Stop" : "Send";
    }
    this.updateSendable();
  }

  get running() {
    return this.dom.send.dataset.state === "stop";
  }

  /** A stop was sent: wait for the server to confirm it. */
  stopping() {
    const { send, sendLabel } = this.dom;
    this.stopAsked = true;
    send.disabled = true;
    sendLabel.textContent = "Stopping…";
    clearTimeout(this.stopTimer);
    // If the server never confirms, make the button usable again.
    this.stopTimer = setTimeout(() => {
      this.stopAsked = false;
      sendLabel.textContent = send.dataset.state === "stop" ? "Stop" : "Send";
      this.updateSendable();
    }, 5000);
  }

  /** Nothing can be sent to this chat (it is gone). */
  lock() {
    this.dom.input.disabled = true;
    this.dom.send.disabled = true;
  }

  /** Writing again; the button comes back with the next setRunning. */
  unlock() {
    this.dom.input.disabled = false;
    this.updateSendable();
  }
}
