// A question the page asks before it does something it cannot take back, in the page's own
// look (window.confirm cannot be styled): a modal <dialog>, so focus stays inside it and
// Escape closes it as Cancel.

import { el } from "./util.js";

/**
 * Ask `message`; resolves true for `yes`, false for Cancel, Escape or a click outside.
 * `label` names the dialog for screen readers.
 */
export function ask({ message, yes = "OK", no = "Cancel", label = "Confirm" }) {
  const yesButton = el("button", { type: "button", class: "btn btn-primary confirm-yes", text: yes });
  const noButton = el("button", { type: "button", class: "btn confirm-no", text: no });
  const text = el("p", { class: "confirm-text", id: "confirm-text", text: message });
  const dialog = el(
    "dialog",
    { class: "confirm-dialog", "aria-label": label, "aria-describedby": "confirm-text" },
    el("div", { class: "confirm-body" }, text, el("div", { class: "confirm-actions" }, noButton, yesButton)),
  );
  document.body.append(dialog);
  return new Promise((resolve) => {
    const finish = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    yesButton.addEventListener("click", () => finish(true));
    noButton.addEventListener("click", () => finish(false));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(false);
    });
    // A click on the backdrop lands on the dialog itself (its body fills the box).
    dialog.addEventListener("click", (event) => {
      if (event.target === dialog) finish(false);
    });
    dialog.showModal();
    yesButton.focus();
  });
}
