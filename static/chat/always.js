// The chat's "Always for this chat" answers, in its header: a badge per tool that no longer
// waits for a yes here ("always allowed: exec"). A click takes it back (`forget_always`):
// the tool's calls wait again from the next turn on. The server says what the list is, in
// `history` and, in every tab, as `allowed_tools` frames when it changes.

import { el } from "./util.js";

export class AlwaysBadges {
  /** box: where the badges go; page: {send(frame) -> bool, notice(message)} */
  constructor(box, page) {
    this.box = box;
    this.page = page;
  }

  /** The tools answered "always" in the chat (none for another chat, until it says). */
  set(tools) {
    const names = Array.isArray(tools) ? tools.filter((t) => typeof t === "string" && t) : [];
    this.box.replaceChildren(...names.map((name) => this.badge(name)));
    this.box.hidden = !names.length;
  }

  badge(name) {
    const button = el(
      "button",
      {
        type: "button",
        class: "always-badge",
        dataset: { tool: name },
        title: `${name} runs without asking in this chat. Click to be asked again.`,
        "aria-label": `${name} is always allowed in this chat: ask again`,
      },
      el("span", { class: "always-label", text: "always allowed:" }),
      el("span", { class: "always-tool", text: name }),
      el("span", { class: "always-undo", "aria-hidden": "true", text: "×" }),
    );
    button.addEventListener("click", () => {
      if (!this.page.send({ type: "forget_always", tool: name })) {
        this.page.notice("Not connected: try again once the connection is back.");
        return;
      }
      // The badge goes when the server's list comes back without it.
      button.disabled = true;
    });
    return button;
  }
}
