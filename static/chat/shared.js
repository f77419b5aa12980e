// The page of a shared chat (templates/shared.html): the snapshot rendered read-only by the
// chat page's own conversation view (bubbles, markdown, tool cards), from the top; and
// "Continue in my own chat", which copies it into a new chat of the reader's and opens it.
// The snapshot comes as data in a json_script tag: the page runs no inline script.

import { api } from "./util.js";
import { Conversation } from "./conversation.js";

const $ = (id) => document.getElementById(id);

function readSnapshot() {
  try {
    return JSON.parse($("shared-snapshot").textContent);
  } catch {
    return { messages: [] };
  }
}

const snapshot = readSnapshot();

const conv = new Conversation({
  scroller: $("scroller"),
  messages: $("messages"),
  emptyState: $("empty-state"),
  thinking: $("thinking"),
  thinkingNote: $("thinking-note"),
  thinkingTime: $("thinking-time"),
  jump: $("jump"),
});
conv.renderHistory(Array.isArray(snapshot.messages) ? snapshot.messages : []);
// Every turn of a snapshot has ended: a call without its result will not get one.
conv.settleTools();
// A shared chat is read from its beginning (the chat page opens at its end).
conv.stick = false;
$("scroller").scrollTop = 0;

const button = $("continue");
const error = $("shared-error");

button.addEventListener("click", async () => {
  button.disabled = true;
  button.textContent = "Copying…";
  error.hidden = true;
  try {
    const made = await api("POST", snapshot.continue_url);
    location.assign(made.url);
  } catch (failure) {
    if (failure && failure.status === 401) {
      location.reload(); // signed out meanwhile: the page asks for a login again
      return;
    }
    error.textContent = `The chat could not be copied: ${failure && failure.message ? failure.message : failure}`;
    error.hidden = false;
    button.disabled = false;
    button.textContent = "Continue in my own chat";
  }
});
