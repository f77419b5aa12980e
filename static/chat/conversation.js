// The conversation view: bubbles, streamed replies, tool cards, system lines,
// the thinking indicator and autoscroll (the tool cards themselves: toolcards.js). It knows
// nothing about sockets.

import { el, icon, copyButton, contentText, formatUsage } from "./util.js";
import { renderMarkdown } from "./markdown.js";
import { toolCard, showResult, settleCard } from "./toolcards.js";
import { markWriter } from "./provenance.js";

const NOTE_MAX = 300;
const norm = (text) => contentText(text).replace(/\s+/g, " ").trim();

export class Conversation {
  constructor(dom) {
    this.dom = dom; // {scroller, messages, emptyState, thinking, thinkingNote, thinkingTime, jump}
    this.streams = new Map(); // msg_id -> {node, body, text}
    this.ended = new Set(); // msg_ids already finished (late chunks are ignored)
    this.cards = new Map(); // tool call id -> card record
    this.streamed = []; // recent finished streamed texts: {runId, text, claimed}
    this.reasoning = null; // the thinking block being streamed: {node, body, text}
    this.dirty = new Set();
    this.frame = 0;
    this.runId = null;
    this.running = false;
    this.startedAt = 0;
    this.timer = 0;
    this.stick = true;
    this.note = "";
    this.ready = false; // false until the first history frame: no empty-state flash

    dom.scroller.addEventListener("scroll", () => this.onScroll(), { passive: true });
    dom.jump.addEventListener("click", () => {
      this.stick = true;
      this.scrollToBottom("smooth");
    });
    if ("ResizeObserver" in window) {
      const observer = new ResizeObserver(() => this.follow());
      observer.observe(dom.messages);
      observer.observe(dom.scroller);
    }
    this.updateEmpty();
  }

  // ---- scrolling --------------------------------------------------------

  atBottom() {
    const s = this.dom.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 48;
  }

  onScroll() {
    this.stick = this.atBottom();
    if (this.stick) this.dom.jump.hidden = true;
  }

  scrollToBottom(behavior = "auto") {
    const s = this.dom.scroller;
    s.scrollTo({ top: s.scrollHeight, behavior });
    this.dom.jump.hidden = true;
  }

  /** Keep the newest content in view unless the user scrolled up. */
  follow() {
    if (this.stick) this.scrollToBottom();
    else if (!this.atBottom()) this.dom.jump.hidden = false;
  }

  // ---- generic ----------------------------------------------------------

  add(node) {
    this.dom.messages.append(node);
    this.updateEmpty();
    this.follow();
    return node;
  }

  updateEmpty() {
    this.dom.emptyState.hidden = !this.ready || this.dom.messages.childElementCount > 0 || this.running;
  }

  /** Forget everything, e.g. when switching chats; the empty state waits for history. */
  reset() {
    this.ready = false;
    this.clear();
  }

  clear() {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.dirty.clear();
    this.dom.messages.replaceChildren();
    this.streams.clear();
    this.ended.clear();
    this.cards.clear();
    this.streamed = [];
    this.reasoning = null;
    this.stick = true;
    this.updateEmpty();
    this.scrollToBottom();
  }

  // ---- bubbles ----------------------------------------------------------

  addUser(text, { pending = false } = {}) {
    const body = el("div", { class: "msg-body", text });
    const node = el("div", { class: "msg user", dataset: { role: "user" } }, body);
    if (pending) node.dataset.pending = "true";
    this.stick = true; // sending always brings the view down
    return this.add(node);
  }

  assistantNode(msgId) {
    const body = el("div", { class: "msg-body markdown" });
    const record = { node: null, body, text: "" };
    const actions = el("div", { class: "msg-actions" }, copyButton(() => record.text, "Copy", "Copy this reply"));
    record.node = el("div", { class: "msg assistant", dataset: { role: "assistant" } }, body, actions);
    if (msgId !== undefined && msgId !== null) record.node.dataset.msgId = String(msgId);
    return record;
  }

  addAssistant(text) {
    const record = this.assistantNode();
    record.text = contentText(text);
    renderMarkdown(record.body, record.text);
    this.add(record.node);
    return record;
  }

  /**
   * A turn that failed: what went wrong, as an error and not as a reply, with a Retry
   * button (the last one only, by CSS) that asks for the turn again (retry.js).
   */
  addError(text, usage) {
    const body = el("div", { class: "msg-body", text: contentText(text) });
    const head = el("div", { class: "msg-error-head" }, icon("alert"), el("span", { text: "The reply failed" }));
    const retry = el("button", { type: "button", class: "btn msg-retry", title: "Ask for this reply again" }, icon("refresh"), el("span", { text: "Retry" }));
    const node = el("div", { class: "msg error", dataset: { role: "error" } }, head, body, el("div", { class: "msg-error-actions" }, retry));
    this.add(node);
    this.addUsage(node, usage);
    return node;
  }

  addSystem(text, kind = "info") {
    // A long note (a sub-agent's report to the agent) shows its first line; the rest on hover.
    const [first, ...rest] = String(text).split("\n");
    const more = rest.some((line) => line.trim());
    const line = el("span", { text: first, title: more ? text : undefined });
    return this.add(el("div", { class: `sys-line sys-${kind}`, role: "note" }, icon("info"), line));
  }

  // ---- thinking blocks ---------------------------------------------------

  /**
   * A model call's reasoning, folded: the same block live (`thinking` frames) and after a
   * reload (the message's `reasoning_content`).
   */
  addThinking(text, { open = false } = {}) {
    const body = el("div", { class: "thinking-text", text });
    const node = el(
      "details",
      { class: "thinking-block", open },
      el("summary", { class: "thinking-summary", text: "Thinking" }),
      body,
    );
    // `body` is the text being streamed; a note ends it, and the reasoning after the note
    // goes into a new one below it.
    const record = { node, body, text, shown: text };
    this.add(node);
    return record;
  }

  /** Reasoning as it streams: one open block per model call, until its answer starts. */
  thinkingChunk(text) {
    if (!text) return;
    if (!this.reasoning) this.reasoning = this.addThinking("", { open: true });
    const record = this.reasoning;
    if (!record.body) {
      record.body = el("div", { class: "thinking-text" });
      record.node.append(record.body);
    }
    record.text += text;
    record.shown += text;
    record.body.textContent = record.text;
    this.follow();
  }

  /** A progress note of the server's (a model call about to be retried): a line of its own. */
  thinkingNote(text) {
    if (!text.trim()) return;
    if (!this.reasoning) this.reasoning = this.addThinking("", { open: true });
    const record = this.reasoning;
    if (record.body && !record.text.trim()) record.body.remove();
    record.node.append(el("div", { class: "thinking-entry", role: "note", text: text.trim() }));
    record.body = null;
    record.text = "";
    record.shown += text;
    this.follow();
  }

  /** The model call's reasoning is over (its answer, a tool call or the turn's end came). */
  endThinking() {
    if (!this.reasoning) return;
    this.reasoning.node.open = false;
    if (!this.reasoning.shown.trim()) this.reasoning.node.remove();
    this.reasoning = null;
  }

  // ---- streaming --------------------------------------------------------

  streamStart(msgId, implicit = false) {
    if (implicit && this.ended.has(msgId)) return null; // a late chunk of a finished reply
    this.ended.delete(msgId);
    const existing = this.streams.get(msgId);
    if (existing) return existing;
    const record = this.assistantNode(msgId);
    record.node.classList.add("streaming");
    record.runId = this.runId;
    this.streams.set(msgId, record);
    this.add(record.node);
    return record;
  }

  streamChunk(msgId, content) {
    // A chunk for an unknown id happens after a reconnect in the middle of a reply.
    const record = this.streams.get(msgId) || this.streamStart(msgId, true);
    if (!record) return;
    record.text += content || "";
    this.dirty.add(record);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.frame = 0;
    for (const record of this.dirty) renderMarkdown(record.body, record.text);
    this.dirty.clear();
    this.follow();
  }

  streamEnd(msgId, discarded, stopped = false) {
    const record = this.streams.get(msgId);
    if (!record) return;
    this.streams.delete(msgId);
    this.ended.add(msgId);
    this.dirty.delete(record);
    if (discarded || !record.text.trim()) {
      record.node.remove();
      this.updateEmpty();
      return;
    }
    renderMarkdown(record.body, record.text);
    record.node.classList.remove("streaming");
    if (stopped) markStopped(record.node);
    this.streamed.push({ runId: record.runId, text: norm(record.text), claimed: Boolean(record.claimed), node: record.node });
    if (this.streamed.length > 50) this.streamed.shift();
    this.follow();
  }

  /** The streamed bubble that already shows this final text (then the `message` frame adds nothing), or null. */
  claimStreamed(content, runId) {
    const text = norm(content);
    if (!text) return null;
    const candidates = [
      ...this.streamed,
      ...Array.from(this.streams.values(), (r) => ({
        runId: r.runId,
        text: norm(r.text),
        claimed: r.claimed,
        live: r,
        node: r.node,
      })),
    ];
    for (let i = candidates.length - 1; i >= 0; i--) {
      const entry = candidates[i];
      if (entry.claimed || entry.text !== text) continue;
      if (runId && entry.runId && entry.runId !== runId) continue;
      if (entry.live) entry.live.claimed = true;
      else entry.claimed = true;
      return entry.node;
    }
    return null;
  }

  /** Under a run's reply: what the run used and cost. */
  addUsage(node, usage) {
    // A turn that failed or was stopped before its model counted anything spent nothing.
    const text = spentTokens(usage) ? formatUsage(usage) : "";
    if (!node || !text) return;
    const line = node.querySelector(".msg-usage") || el("div", { class: "msg-usage" });
    line.textContent = text;
    line.title = usageTitle(usage);
    node.insertBefore(line, node.querySelector(".msg-actions"));
  }

  // ---- tool cards -------------------------------------------------------

  toolCall(id, name, args) {
    const key = id ? String(id) : `anon-${this.cards.size}`;
    if (this.cards.has(key)) return this.cards.get(key);
    const card = toolCard(key, name, args);
    this.cards.set(key, card);
    this.add(card.node);
    return card;
  }

  toolResult(id, name, result, durationMs) {
    const key = id ? String(id) : "";
    const card = this.cards.get(key) || this.toolCall(key || undefined, name, null);
    showResult(card, result, durationMs);
    this.follow();
  }

  /** A turn ended: cards still spinning will never get a result. */
  settleTools() {
    for (const card of this.cards.values()) settleCard(card);
  }

  // ---- history ----------------------------------------------------------

  renderHistory(messages) {
    this.ready = true;
    this.clear();
    this.dom.messages.append(this.build(messages));
    this.updateEmpty();
    this.stick = true;
    this.scrollToBottom();
  }

  /** Stored messages rendered off-DOM, as a fragment to attach at once. */
  build(messages) {
    const frag = document.createDocumentFragment();
    const target = this.dom.messages;
    this.dom.messages = frag;
    try {
      for (const m of messages || []) this.renderStored(m);
    } finally {
      this.dom.messages = target;
    }
    return frag;
  }

  renderStored(m) {
    const role = m && m.role;
    if (role === "user") {
      const node = this.addUser(contentText(m.content));
      node.dataset.id = m.id ?? "";
      if (m.run_id) node.dataset.runId = m.run_id;
      if (m.versions) node.dataset.versions = JSON.stringify(m.versions); // versions.js
    } else if (role === "assistant") {
      if (m.reasoning_content && contentText(m.reasoning_content).trim()) {
        this.addThinking(contentText(m.reasoning_content));
      }
      const text = contentText(m.content);
      if (m.error) {
        this.addError(text, m.run_usage);
      } else if (text.trim()) {
        const { node } = this.addAssistant(text);
        node.dataset.id = m.id ?? "";
        if (m.stopped) markStopped(node);
        if (m.run_usage) this.addUsage(node, m.run_usage);
        markWriter(node, m);
      }
      for (const call of m.tool_calls || []) {
        const fn = call.function || {};
        this.toolCall(call.id, fn.name || call.name, fn.arguments ?? call.arguments);
      }
    } else if (role === "tool") {
      this.toolResult(m.tool_call_id, m.name, contentText(m.content), m.duration_ms);
    } else if (role === "system" && m.content) {
      this.addSystem(contentText(m.content));
    }
  }

  // ---- thinking indicator -----------------------------------------------

  setRunning(running, runId = null) {
    const wasRunning = this.running;
    this.running = running;
    if (running) {
      if (runId) this.runId = runId;
      if (!wasRunning) {
        this.startedAt = Date.now();
        this.setNote("", false);
        this.tick();
        clearInterval(this.timer);
        this.timer = setInterval(() => this.tick(), 1000);
      }
    } else {
      clearInterval(this.timer);
      this.timer = 0;
      this.setNote("", false);
      this.endThinking();
      this.settleTools();
    }
    this.dom.thinking.hidden = !running;
    this.dom.messages.setAttribute("aria-busy", running ? "true" : "false");
    this.updateEmpty();
    this.follow();
  }

  tick() {
    const seconds = Math.floor((Date.now() - this.startedAt) / 1000);
    this.dom.thinkingTime.textContent = seconds >= 2 ? `${seconds}s` : "";
  }

  /** Progress text under the indicator; consecutive notes are joined, only the tail is kept. */
  setNote(text, append) {
    let note = append ? this.note + text : text;
    if (note.length > NOTE_MAX) note = `…${note.slice(-NOTE_MAX)}`;
    this.note = note;
    this.dom.thinkingNote.textContent = note.trim();
    this.dom.thinkingNote.hidden = !note.trim();
  }
}

/** A reply cut short by /stop keeps what it said, with a mark that it stopped there. */
function markStopped(node) {
  node.classList.add("stopped");
  node.dataset.stopped = "true";
  const actions = node.querySelector(".msg-actions");
  node.insertBefore(el("div", { class: "msg-stopped", text: "stopped" }), actions);
}

function spentTokens(usage) {
  return Boolean(usage) && (Number(usage.total_tokens) || Number(usage.prompt_tokens) || Number(usage.completion_tokens)) > 0;
}

function usageTitle(usage) {
  const parts = [`${Number(usage.prompt_tokens) || 0} prompt`, `${Number(usage.completion_tokens) || 0} completion tokens`];
  if (usage.unpriced_runs) parts.push("the model has no known price");
  return parts.join(", ");
}
