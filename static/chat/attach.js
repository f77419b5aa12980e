// The attach button, and files dropped on the chat: each goes into the user's folder (POST
// /api/uploads) and shows as a chip above the message box, with its name and a button that
// takes it off; the next message sent tells the agent where each attached file is.

import { el, icon, csrfToken } from "./util.js";

export class Attach {
  /**
   * dom: {button, input, dropZone, chips (the list the chips go in)}; options: {url,
   * onAttached(path), onRemoved(), onError(message), onLoginLost()}
   */
  constructor(dom, options) {
    this.dom = dom;
    this.o = options;
    this.paths = []; // what the next message carries, in the order attached
    dom.button.addEventListener("click", () => dom.input.click());
    dom.input.addEventListener("change", () => {
      const file = dom.input.files && dom.input.files[0];
      dom.input.value = ""; // the same file chosen again is a new upload
      if (file) this.upload(file);
    });
    if (dom.dropZone) this.acceptDrops(dom.dropZone);
  }

  /** Files dragged over `zone` show it as a target; dropped, they are attached in turn. */
  acceptDrops(zone) {
    const carriesFiles = (event) =>
      event.dataTransfer && Array.from(event.dataTransfer.types || []).includes("Files");
    let depth = 0; // dragenter and dragleave come for each child the pointer crosses
    zone.addEventListener("dragenter", (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      depth += 1;
      zone.classList.add("dropping");
    });
    zone.addEventListener("dragover", (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault(); // without it the browser opens the file instead
      event.dataTransfer.dropEffect = "copy";
    });
    zone.addEventListener("dragleave", (event) => {
      if (!carriesFiles(event)) return;
      depth = Math.max(0, depth - 1);
      if (!depth) zone.classList.remove("dropping");
    });
    zone.addEventListener("drop", async (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      depth = 0;
      zone.classList.remove("dropping");
      for (const file of Array.from(event.dataTransfer.files)) await this.upload(file);
    });
  }

  async upload(file) {
    const { button } = this.dom;
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    const then = await this.send(file);
    // Usable again before the box takes focus, so that the next file can follow at once.
    button.disabled = false;
    button.removeAttribute("aria-busy");
    then();
  }

  /** What to do once the upload of `file` is over. */
  async send(file) {
    const body = new FormData();
    body.append("file", file);
    let response;
    let data = null;
    try {
      response = await fetch(this.o.url, {
        method: "POST",
        body,
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
      });
      data = await response.json().catch(() => null); // not JSON: a proxy's page
    } catch (error) {
      const reason = error && error.message ? error.message : "the upload failed";
      return () => this.o.onError(`Could not attach ${file.name}: ${reason}`);
    }
    if (response.status === 401) return () => this.o.onLoginLost();
    if (!response.ok || !data || typeof data.path !== "string") {
      const detail = data && typeof data.detail === "string" ? data.detail : `${response.status} ${response.statusText}`.trim();
      return () => this.o.onError(`Could not attach ${file.name}: ${detail}`);
    }
    return () => {
      this.add(data.path);
      this.o.onAttached(data.path);
    };
  }

  get count() {
    return this.paths.length;
  }

  /** `text` with a line for each attached file after it (how the agent learns of them), and
   * the chips gone: they leave with this message. */
  takeInto(text) {
    const lines = this.paths.map((path) => `Attached: ${path}`);
    this.paths = [];
    this.render();
    const body = text.replace(/\s+$/, "");
    return [body, ...lines].filter(Boolean).join("\n");
  }

  add(path) {
    this.paths.push(path);
    this.render();
  }

  remove(index) {
    this.paths.splice(index, 1);
    this.render();
  }

  render() {
    const { chips } = this.dom;
    chips.replaceChildren(
      ...this.paths.map((path, index) => {
        const name = path.split("/").pop() || path;
        const remove = el(
          "button",
          { type: "button", class: "attachment-remove", "aria-label": `Remove ${name}`, title: `Remove ${name}` },
          icon("close"),
        );
        remove.addEventListener("click", () => {
          this.remove(index);
          this.o.onRemoved?.();
        });
        return el(
          "li",
          { class: "attachment", title: path, dataset: { path } },
          el("span", { class: "attachment-name", text: name }),
          remove,
        );
      }),
    );
    chips.hidden = !this.paths.length;
  }
}
