// Older messages, a page at a time, and opening a chat at one message. The socket's `history`
// frame holds the latest messages (and says whether there are older ones); an `earlier` frame
// asked for with {"type": "earlier", "before": id, "to"?: id} brings those before them, all
// the way back to a given message when one is sought. A message found is scrolled to and
// highlighted.

export class HistoryPages {
  /**
   * dom: {scroller, messages, button}; options: {conv, send(frame) → bool, notice(message)}
   */
  constructor(dom, options) {
    this.dom = dom;
    this.o = options;
    this.hasMore = false;
    this.loading = 0; // the `before` of the page asked for, while it is on its way
    this.target = null; // the message to show once it is loaded
    dom.button.addEventListener("click", () => this.loadEarlier());
  }

  /** Another chat: nothing loaded, nothing sought (but what `seek` is given next). */
  reset() {
    this.hasMore = false;
    this.loading = 0;
    this.target = null;
    this.update();
  }

  /** Show message `id` once the chat's history is there. */
  seek(id) {
    this.target = Number(id) || null;
  }

  /** The id of the oldest message shown, or 0. */
  oldest() {
    let least = 0;
    for (const node of this.dom.messages.querySelectorAll("[data-id]")) {
      const id = Number(node.dataset.id);
      if (id > 0 && (!least || id < least)) least = id;
    }
    return least;
  }

  onHistory(frame) {
    this.hasMore = Boolean(frame.has_more);
    this.loading = 0;
    this.update();
    if (this.target) this.reveal(this.target);
  }

  loadEarlier(to = null) {
    const before = this.oldest();
    if (!before || this.loading) return false;
    const frame = { type: "earlier", before };
    if (to) frame.to = to;
    if (!this.o.send(frame)) return false;
    this.loading = before;
    this.update();
    return true;
  }

  onEarlier(frame) {
    if (frame.before !== this.loading) return; // a page for another chat, or one shown already
    this.loading = 0;
    this.hasMore = Boolean(frame.has_more);
    const { conv } = this.o;
    const scroller = this.dom.scroller;
    const height = scroller.scrollHeight;
    conv.stick = false; // the view stays where it was: the older messages come above it
    this.dom.messages.prepend(conv.build(Array.isArray(frame.messages) ? frame.messages : []));
    scroller.scrollTop += scroller.scrollHeight - height;
    this.update();
    if (this.target) this.reveal(this.target);
  }

  /** Scroll to message `id` and mark it; fetch older pages until it is loaded. */
  reveal(id) {
    this.target = Number(id) || null;
    if (!this.target) return;
    const node = this.dom.messages.querySelector(`[data-id="${this.target}"]`);
    if (node) {
      this.target = null;
      this.highlight(node);
      return;
    }
    const oldest = this.oldest();
    if (this.hasMore && oldest && this.target < oldest) {
      if (!this.loading) this.loadEarlier(this.target);
      return;
    }
    this.target = null;
    this.o.notice("That message is no longer in this chat (it may have been edited or archived).", "warning");
  }

  highlight(node) {
    for (const old of this.dom.messages.querySelectorAll("[data-found]")) delete old.dataset.found;
    this.o.conv.stick = false;
    node.dataset.found = "true"; // highlighted a moment (conversation.css), marked until another
    node.scrollIntoView({ block: "center" });
  }

  update() {
    const { button } = this.dom;
    button.hidden = !this.hasMore;
    button.disabled = Boolean(this.loading);
    button.textContent = this.loading ? "Loading earlier messages…" : "Show earlier messages";
  }
}
