// The header's model picker: the ids the operator lets users pick (AGENT_MODEL, then
// AGENT_MODELS), offered when there is more than one. A pick goes to the server, which keeps
// it on the session where `/model NAME` keeps it and tells every tab of the chat; until it
// answers, the select waits, and a refusal puts the previous model back.

import { el } from "./util.js";

export class ModelPicker {
  /**
   * dom: {select, chip (the model's name, shown instead when there is nothing to pick)}
   * options: {models: [id], onPick(id) -> bool (false: could not be sent)}
   */
  constructor(dom, options) {
    this.dom = dom;
    this.o = options;
    this.models = options.models;
    this.current = "";
    this.pending = "";
    this.enabled = this.models.length > 1;
    dom.select.hidden = !this.enabled;
    dom.chip.hidden = this.enabled;
    if (!this.enabled) return;
    dom.select.replaceChildren(...this.models.map((id) => el("option", { value: id, text: id })));
    dom.select.addEventListener("change", () => this.pick(dom.select.value));
  }

  /** The session's model, as the server says it (history, a `model` frame, the list). */
  show(model) {
    this.current = model || "";
    // A pick on its way is answered by a `model` frame or an error; until then it stays.
    if (this.pending && this.pending !== this.current) return;
    this.pending = "";
    if (!this.enabled) return;
    const select = this.dom.select;
    select.value = this.current;
    select.disabled = false;
    select.title = `The model this chat uses: ${this.current}`;
  }

  pick(model) {
    if (model === this.current) return;
    if (!this.o.onPick(model)) {
      this.dom.select.value = this.current;
      return;
    }
    this.pending = model;
    this.dom.select.disabled = true;
  }

  /** A pick on its way will not be taken (the server answered with an error, or the socket
   * closed before it answered): the chat keeps the model it had. */
  forget() {
    if (!this.pending) return;
    this.pending = "";
    this.show(this.current);
  }
}
