// Tool cards of the conversation view: one folded card per tool call, its arguments and,
// once it came, its result. Conversation keeps the cards by call id and places them.

import { el, copyButton, contentText, parseArguments, summariseArguments, formatDuration } from "./util.js";

const RESULT_MAX = 100000;

/** A running tool's card: {node, result, resultSection, duration, state, done, text (its result)}. */
export function toolCard(key, name, args) {
  const [parsed, pretty] = parseArguments(args);
  const status = el("span", { class: "tool-status", "aria-hidden": "true" });
  const state = el("span", { class: "sr-only", text: "running" });
  const duration = el("span", { class: "tool-duration" });
  const result = el("pre", { class: "tool-result", tabindex: "0" });
  const card = { node: null, result, resultSection: null, duration, state, done: false, text: "" };
  const resultSection = el(
    "div",
    { class: "tool-section", hidden: true },
    sectionHead("Result", () => card.text, "Copy the result"),
    result,
  );
  const node = el(
    "details",
    { class: "tool-card", dataset: { toolName: name || "tool", toolId: key, status: "running" } },
    el(
      "summary",
      { class: "tool-summary" },
      status,
      el("span", { class: "tool-name", text: name || "tool" }),
      el("span", { class: "tool-args", text: summariseArguments(parsed, pretty) }),
      duration,
      state,
    ),
    el(
      "div",
      { class: "tool-body" },
      el(
        "div",
        { class: "tool-section" },
        sectionHead("Arguments", () => pretty, "Copy the arguments"),
        el("pre", { class: "tool-args-full", tabindex: "0", text: pretty }),
      ),
      resultSection,
    ),
  );
  return Object.assign(card, { node, resultSection });
}

/** A section's label, and a button that copies all of its text (a long result too). */
function sectionHead(label, getText, ariaLabel) {
  return el(
    "div",
    { class: "tool-section-head" },
    el("div", { class: "tool-section-label", text: label }),
    copyButton(getText, "Copy", ariaLabel),
  );
}

/** The tool's result on its card: done, or failed when it reads as an error; long output is cut. */
export function showResult(card, result, durationMs) {
  let text = typeof result === "string" ? result : contentText(result);
  card.text = text;
  const isError = /^\s*error/i.test(text);
  if (text.length > RESULT_MAX) {
    text = `${text.slice(0, RESULT_MAX)}\n… (${(text.length - RESULT_MAX).toLocaleString()} more characters not shown)`;
  }
  card.result.textContent = text || "(no output)";
  card.resultSection.hidden = false;
  card.duration.textContent = formatDuration(durationMs);
  card.node.dataset.status = isError ? "error" : "done";
  card.node.classList.toggle("error", isError);
  card.state.textContent = isError ? "failed" : "done";
  card.done = true;
}

/** A card whose turn ended without its result: it will never get one. */
export function settleCard(card) {
  if (card.done) return;
  card.done = true;
  card.node.dataset.status = "incomplete";
  card.state.textContent = "no result";
}
