// The Retry button of a failed turn's error (conversation.js draws it, on the last error
// only, by CSS): it asks for the reply again as Regenerate does, with a `regenerate` frame.
// The server archives the failed turn's message, which takes the error out of every tab
// (`archived`), and the new turn's frames follow.

export class RetryButtons {
  /** options: {send(frame) → bool, notice(message, kind)} */
  constructor(messages, options) {
    this.messages = messages;
    this.o = options;
    messages.addEventListener("click", (event) => {
      const button = event.target instanceof Element ? event.target.closest(".msg-retry") : null;
      if (button && !button.disabled) this.retry(button);
    });
  }

  retry(button) {
    if (this.o.send({ type: "regenerate" })) button.disabled = true;
    else this.o.notice("Not connected: try again in a moment.", "warning");
  }

  /** An error frame: the retry was refused (a turn runs, the chat changed); it may be tried again. */
  onError() {
    for (const button of this.messages.querySelectorAll(".msg-retry[disabled]")) button.disabled = false;
  }
}
