// The server's frames, applied to the page: streamed replies, tool calls, messages, errors
// and system lines go to the conversation; the rest the page is told through `page`.

import { contentText } from "./util.js";
import { markWriter } from "./provenance.js";

const ENDS_THINKING = new Set(["stream_start", "tool_call", "message", "thinking_finished"]);

export class Frames {
  /**
   * page: {conv, composer, approvals, setRunning(running, runId), onHistory(frame),
   *        onModel(id) (the chat's model changed), onError(frame), notice(message),
   *        refreshSoon() (the chat list may have changed), onArchived(frame) (messages left
   *        the conversation), onEarlier(frame) (older messages came), onVersion(frame) (an
   *        earlier version of the conversation came), onAllowedTools(tools) (the tools
   *        answered "always" in the chat changed)}
   */
  constructor(page) {
    this.page = page;
    this.last = ""; // the type of the previous frame
    this.turn = { runId: null, model: null }; // the running turn, as thinking_started named it
  }

  /** Another chat: no previous frame. */
  reset() {
    this.last = "";
    this.turn = { runId: null, model: null };
  }

  handle(f) {
    const { conv, setRunning, notice, refreshSoon } = this.page;
    // A model call's reasoning comes before what it says or does; either ends its block.
    if (ENDS_THINKING.has(f.type) && (f.type !== "message" || f.role !== "user")) conv.endThinking();
    switch (f.type) {
      case "history":
        this.page.onHistory(f);
        break;
      case "thinking_started":
        this.turn = { runId: f.run_id || null, model: f.model || null };
        setRunning(true, f.run_id);
        break;
      case "stream_start":
        conv.streamStart(f.msg_id);
        break;
      case "stream_chunk":
        conv.streamChunk(f.msg_id, typeof f.content === "string" ? f.content : contentText(f.content));
        break;
      case "stream_end": {
        const streamed = conv.streams.get(f.msg_id);
        conv.streamEnd(f.msg_id, Boolean(f.discarded), Boolean(f.stopped));
        // Written now, by the turn's model; the turn's reply frame, if it is this text, says
        // the same from the server.
        if (streamed && streamed.node.isConnected) this.markWriter(streamed.node, { run_id: streamed.runId });
        break;
      }
      case "thinking":
        if (f.note) conv.thinkingNote(contentText(f.content));
        else conv.thinkingChunk(contentText(f.content));
        break;
      case "tool_call":
        conv.toolCall(f.id, f.name, f.arguments);
        break;
      case "tool_result":
        conv.toolResult(f.id, f.name, f.result, f.duration_ms);
        break;
      case "thinking_finished":
        setRunning(false);
        refreshSoon();
        break;
      case "message":
        this.message(f);
        break;
      case "model":
        if (f.model) this.page.onModel(String(f.model));
        break;
      case "error":
        this.page.onError(f);
        if (f.refused) this.restoreRefused();
        notice(contentText(f.message) || "Something went wrong.");
        break;
      case "archived":
        this.page.onArchived(f);
        break;
      case "earlier":
        this.page.onEarlier(f);
        break;
      case "version":
        this.page.onVersion(f);
        break;
      case "subagent_spawned":
        conv.addSystem(`Sub-agent ${label(f)} started.`, "subagent");
        break;
      case "subagent_completed":
        conv.addSystem(`Sub-agent ${label(f)} finished${f.status ? ` (${f.status})` : ""}.`, "subagent");
        break;
      case "approval_request":
        this.page.approvals.request(f);
        break;
      case "approval_resolved":
        this.page.approvals.resolved(f);
        break;
      case "allowed_tools":
        this.page.onAllowedTools(f.tools);
        break;
      case "cron_executed":
        conv.addSystem(`Scheduled job ${f.job_id ?? ""} ran${f.status ? ` (${f.status})` : ""}.`, "cron");
        refreshSoon();
        break;
      default:
        break; // unknown frames are ignored
    }
    this.last = f.type;
  }

  // The server did not take the message just sent (too fast, too many waiting, not valid):
  // take its bubble back out of the conversation and give its text back to the composer.
  restoreRefused() {
    const pending = document.querySelectorAll("#messages .msg.user[data-pending]");
    const last = pending[pending.length - 1];
    if (!last) return;
    const text = last.textContent;
    last.remove();
    this.page.composer.restore(text);
  }

  message(f) {
    const { conv, refreshSoon } = this.page;
    const text = contentText(f.content);
    const role = f.role || "assistant";
    if (role === "user") {
      // An echo of what we already show (optimistically) or a message from another tab.
      const pending = Array.from(document.querySelectorAll("#messages .msg.user[data-pending]")).find(
        (node) => node.textContent === text,
      );
      const node = pending || conv.addUser(text);
      delete node.dataset.pending;
      // The turn it started: what an edit of this message names it by.
      if (f.run_id) node.dataset.runId = f.run_id;
      return;
    }
    if (f.error) {
      // The turn failed: what went wrong, never streamed, shown as an error.
      conv.addError(text, f.usage);
      refreshSoon();
      return;
    }
    if (text.startsWith("New conversation started")) {
      conv.clear(); // the server archived the old conversation
    } else {
      const streamed = conv.claimStreamed(text, f.run_id);
      if (streamed) {
        conv.addUsage(streamed, f.usage); // the streamed bubble already shows this reply
        this.markWriter(streamed, f);
        refreshSoon();
        return;
      }
    }
    if (role === "system") conv.addSystem(text);
    else if (text.trim()) {
      const { node } = conv.addAssistant(text);
      conv.addUsage(node, f.usage);
      this.markWriter(node, f);
    }
    refreshSoon();
  }

  /** Name the reply's model and time: the frame's, else the running turn's model and now. */
  markWriter(node, f) {
    const ours = Boolean(f.run_id) && f.run_id === this.turn.runId;
    const model = f.model || (ours ? this.turn.model : null);
    markWriter(node, { model, created: f.created || new Date().toISOString() });
  }
}

function label(f) {
  return f.label ? `“${f.label}”` : f.id ? String(f.id) : "";
}
