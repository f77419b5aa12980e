// What the page tells the person besides the conversation: notices above the message box,
// and the badge that says the connection is being made or made again.

import { el, icon } from "./util.js";

const MOST_NOTICES = 3;
// "Connecting…" only shows if connecting takes a moment.
const CONNECTING_AFTER_MS = 800;

export class Notices {
  /** box: the notices' element; onDismiss(): after one is closed (focus goes back). */
  constructor(box, onDismiss) {
    this.box = box;
    this.onDismiss = onDismiss;
  }

  /** Show `message` (kind "error", "warning" or "info"); returns its node. */
  show(message, kind = "error") {
    const close = el("button", { type: "button", class: "icon-btn notice-close", "aria-label": "Dismiss" }, icon("close"));
    const node = el("div", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" }, el("span", { class: "notice-text", text: message }), close);
    close.addEventListener("click", () => {
      node.remove();
      this.onDismiss();
    });
    this.box.append(node);
    while (this.box.childElementCount > MOST_NOTICES) this.box.firstElementChild.remove();
    return node;
  }
}

export class ConnectionBadge {
  constructor(node) {
    this.node = node;
    this.timer = 0;
  }

  /** status: "open", "connecting" or "reconnecting". */
  set(status) {
    const node = this.node;
    clearTimeout(this.timer);
    node.dataset.state = status;
    if (status === "open") {
      node.hidden = true;
    } else if (status === "connecting") {
      this.timer = setTimeout(() => {
        node.textContent = "Connecting…";
        node.hidden = false;
      }, CONNECTING_AFTER_MS);
    } else {
      node.textContent = navigator.onLine === false ? "Offline · reconnecting…" : "Reconnecting…";
      node.hidden = false;
    }
  }

  hide() {
    clearTimeout(this.timer);
    this.node.hidden = true;
  }
}
