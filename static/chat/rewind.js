// Editing a message of the user's and regenerating the last reply. Each user bubble gets an
// Edit button that opens an editor in its place, each reply a Regenerate button (shown on the
// last one only, by CSS); neither shows while a turn runs. The server archives the message
// (and all after it) and says so with an `archived` frame, which every tab of the chat gets:
// the bubbles go, and the new turn's frames follow. An edit that drops later messages says
// so first and waits for a yes: they stay reachable as an earlier version (versions.js).

import { el, icon } from "./util.js";

export class Rewind {
  /**
   * dom: {messages}; options: {conv, send(frame) → bool, notice(message, kind),
   *        resync() (load the conversation afresh)}
   */
  constructor(dom, options) {
    this.dom = dom;
    this.o = options;
    this.editing = null; // {node, editor, input, send, waiting, warning}
    new MutationObserver((changes) => this.onChanges(changes)).observe(dom.messages, { childList: true });
  }

  // ---- buttons ------------------------------------------------------------

  onChanges(changes) {
    for (const change of changes) {
      for (const node of change.addedNodes) {
        if (!(node instanceof HTMLElement) || !node.classList.contains("msg")) continue;
        if (node.dataset.role === "user") this.addEdit(node);
        else if (node.dataset.role === "assistant") this.addRegenerate(node);
      }
    }
    this.markLast();
  }

  addEdit(node) {
    if (node.querySelector(".msg-edit")) return;
    // Icons alone: a bubble's text is its message's, nothing more.
    const button = el("button", { type: "button", class: "copy-btn msg-edit", "aria-label": "Edit this message", title: "Edit" }, icon("pencil"));
    button.addEventListener("click", () => this.edit(node));
    node.append(el("div", { class: "msg-actions user-actions" }, button));
  }

  addRegenerate(node) {
    const actions = node.querySelector(".msg-actions");
    if (!actions || actions.querySelector(".msg-regenerate")) return;
    const button = el("button", { type: "button", class: "copy-btn msg-regenerate", "aria-label": "Regenerate this reply", title: "Regenerate" }, icon("refresh"));
    button.addEventListener("click", () => this.regenerate(button));
    actions.append(button);
  }

  /** The last reply that no message of the user's follows is the one to regenerate. */
  markLast() {
    const nodes = this.dom.messages.querySelectorAll(".msg.assistant, .msg.user");
    let last = null;
    for (let i = nodes.length - 1; i >= 0; i--) {
      if (nodes[i].dataset.role === "user") break;
      last = nodes[i];
    }
    for (const node of this.dom.messages.querySelectorAll(".msg.assistant[data-last-reply]")) {
      if (node !== last) delete node.dataset.lastReply;
    }
    if (last) last.dataset.lastReply = "true";
  }

  regenerate(button) {
    if (this.o.send({ type: "regenerate" })) button.disabled = true;
    else this.o.notice("Not connected: try again in a moment.", "warning");
  }

  // ---- the editor ---------------------------------------------------------

  edit(node) {
    if (this.editing) this.closeEditor();
    const body = node.querySelector(".msg-body");
    const input = el("textarea", { class: "edit-input", rows: "3", "aria-label": "Edit your message" });
    input.value = body ? body.textContent : "";
    const cancel = el("button", { type: "button", class: "btn edit-cancel", text: "Cancel" });
    const send = el("button", { type: "submit", class: "btn btn-primary edit-send", text: "Send" });
    const editor = el("form", { class: "msg-editor" }, input, el("div", { class: "edit-buttons" }, cancel, send));
    this.editing = { node, editor, input, send, waiting: false, warning: null };
    editor.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    cancel.addEventListener("click", () => this.closeEditor());
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        this.closeEditor();
      } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.submit();
      }
    });
    node.hidden = true;
    node.after(editor);
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  submit() {
    const editing = this.editing;
    if (!editing || editing.waiting) return;
    const content = editing.input.value;
    if (!content.trim()) return;
    if (editing.warning) {
      // Asked already: the answer is one of its buttons, not another Enter.
      editing.warning.querySelector(".edit-confirm").focus();
      return;
    }
    const later = laterMessages(editing.node);
    if (later && !editing.confirmed) {
      this.warn(editing, later);
      return;
    }
    const { id, runId } = editing.node.dataset;
    const frame = { type: "edit", content };
    if (Number(id) > 0) frame.id = Number(id);
    else if (runId) frame.run_id = runId;
    else {
      this.o.notice("This message is still being sent: edit it in a moment.", "warning");
      return;
    }
    if (!this.o.send(frame)) {
      this.o.notice("Not connected: try again in a moment.", "warning");
      return;
    }
    // Until the server archives the message (or says why not).
    editing.waiting = true;
    editing.input.disabled = true;
    editing.send.disabled = true;
  }

  /** Say what the edit drops, and wait for a yes (send) or a no (keep editing). */
  warn(editing, later) {
    const text = later === 1 ? "Editing this message drops the later message" : `Editing this message drops the ${later} later messages`;
    const keep = el("button", { type: "button", class: "btn edit-keep", text: "Keep editing" });
    const confirm = el("button", { type: "button", class: "btn btn-primary edit-confirm", text: "Send anyway" });
    const warning = el(
      "div",
      { class: "edit-warning", role: "alert" },
      el("p", { text: `${text}; earlier versions stay reachable with ‹ ›.` }),
      el("div", { class: "edit-buttons" }, keep, confirm),
    );
    const done = () => {
      warning.remove();
      editing.warning = null;
      editing.send.hidden = false;
    };
    keep.addEventListener("click", () => {
      done();
      editing.input.focus();
    });
    confirm.addEventListener("click", () => {
      done();
      editing.confirmed = true;
      this.submit();
    });
    warning.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        done();
        editing.input.focus();
      }
    });
    editing.warning = warning;
    editing.send.hidden = true;
    editing.editor.append(warning);
    confirm.focus();
  }

  closeEditor() {
    const editing = this.editing;
    if (!editing) return;
    this.editing = null;
    editing.editor.remove();
    editing.node.hidden = false;
  }

  /** An error frame: an edit waiting for its answer was refused; it can be tried again. */
  onError() {
    for (const button of this.dom.messages.querySelectorAll(".msg-regenerate[disabled]")) button.disabled = false;
    const editing = this.editing;
    if (!editing || !editing.waiting) return;
    editing.waiting = false;
    editing.input.disabled = false;
    editing.send.disabled = false;
    editing.input.focus();
  }

  /** Messages left the conversation: from the bubble of message `id` (run `run_id`) on. */
  onArchived(frame) {
    const { messages } = this.dom;
    let first = messages.querySelector(`.msg.user[data-id="${Number(frame.id)}"]`);
    if (!first && frame.run_id) first = messages.querySelector(`.msg.user[data-run-id="${CSS.escape(String(frame.run_id))}"]`);
    if (this.editing && (!first || this.editing.node === first || first.compareDocumentPosition(this.editing.node) & Node.DOCUMENT_POSITION_FOLLOWING)) {
      this.closeEditor();
    }
    if (!first) {
      // Older than anything shown here (all of that went), or a bubble this tab never got:
      // the server's account is the one to show.
      this.o.resync();
      return;
    }
    while (first.nextSibling) first.nextSibling.remove();
    first.remove();
    this.o.conv.updateEmpty();
    this.markLast();
  }
}

/** How many bubbles of the conversation come after `node` (an edit of it drops them). */
function laterMessages(node) {
  let count = 0;
  for (let at = node.nextElementSibling; at; at = at.nextElementSibling) {
    if (at.classList.contains("msg")) count++;
  }
  return count;
}
