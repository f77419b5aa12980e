// Who wrote a reply and when: a short line in the reply's actions (shown on hover, as the
// Copy button is), with the full date in its tooltip.

import { el } from "./util.js";

/**
 * Name on reply `node` the model that wrote it and when (`created`, ISO 8601). What is
 * not known is left out; a later call (the turn's own reply frame) replaces an earlier one.
 */
export function markWriter(node, { model, created } = {}) {
  const actions = node && node.querySelector(".msg-actions");
  if (!actions) return;
  const when = created ? new Date(created) : null;
  const dated = when && !Number.isNaN(when.getTime()) ? when : null;
  const parts = [model, dated && shortTime(dated)].filter(Boolean);
  if (!parts.length) return;
  const line = actions.querySelector(".msg-meta") || el("span", { class: "msg-meta" });
  line.textContent = parts.join(" · ");
  line.title = [model ? `Written by ${model}` : "", dated ? dated.toLocaleString() : ""].filter(Boolean).join(", ");
  if (model) node.dataset.model = model;
  if (dated) node.dataset.written = dated.toISOString();
  actions.prepend(line);
}

/** "14:05" today, "12 Mar 14:05" on another day (with the year when it is not this one). */
function shortTime(date) {
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  const now = new Date();
  if (date.toDateString() === now.toDateString()) return time;
  const day = { day: "numeric", month: "short" };
  if (date.getFullYear() !== now.getFullYear()) day.year = "numeric";
  return `${date.toLocaleDateString([], day)} ${time}`;
}
