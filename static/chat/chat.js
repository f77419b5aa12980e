// The chat page: WebSocket connection, composer, routing between chats, header.
// Template values come from data-* attributes on <body> (see templates/chat.html).

import { el, icon, newChatId, CHAT_ID_RE, contentText } from "./util.js";
import { Conversation } from "./conversation.js";
import { Sidebar, chatUrl } from "./sessions.js";

const $ = (id) => document.getElementById(id);
const data = document.body.dataset;
const config = {
  chatId: data.chatId || "",
  wsPrefix: data.wsPathPrefix || "/ws/chat/",
  defaultModel: data.defaultModel || "",
  loginUrl: data.loginUrl || "/accounts/login/",
  sessionsUrl: (data.sessionsUrl || "/api/sessions").replace(/\/+$/, ""),
};

const BACKOFF_MIN = 500;
const BACKOFF_MAX = 10000;
const FATAL_CLOSE = {
  4404: "This chat was not found.",
  4410: "This chat was deleted.",
};

const dom = {
  composer: $("composer"),
  form: $("composer-form"),
  send: $("send"),
  sendLabel: $("send-label"),
  hint: $("composer-hint"),
  title: $("chat-title"),
  model: $("model-name"),
  conn: $("conn-status"),
  notices: $("notices"),
  menu: $("menu"),
  backdrop: $("backdrop"),
  fatal: $("fatal"),
};

const state = {
  chatId: "",
  socket: null,
  attempt: 0,
  reconnectTimer: 0,
  connectingTimer: 0,
  fatal: false,
  model: "",
  lastFrame: "",
  stopTimer: 0,
  refreshTimer: 0,
  outbox: [], // messages written while the socket was (re)connecting; sent on `history`
  outboxNotice: null,
};

const conv = new Conversation({
  scroller: $("scroller"),
  messages: $("messages"),
  emptyState: $("empty-state"),
  thinking: $("thinking"),
  thinkingNote: $("thinking-note"),
  thinkingTime: $("thinking-time"),
  jump: $("jump"),
});

const sidebar = new Sidebar({
  list: $("session-list"),
  empty: $("session-empty"),
  url: config.sessionsUrl,
  onSelect: (chatId) => {
    closeSidebar();
    switchChat(chatId);
  },
  onDeleted: (session) => {
    if (session.chat_id === state.chatId) {
      const next = sidebar.sessions[0];
      switchChat(next ? next.chat_id : newChatId());
    }
  },
  onChange: () => {
    const session = sidebar.find(state.chatId);
    if (session && session.model) state.model = session.model;
    updateHeader();
  },
  onError: (message) => notice(message),
});

// ---- helpers ------------------------------------------------------------

function goLogin() {
  const next = location.pathname + location.search;
  location.assign(`${config.loginUrl}?next=${encodeURIComponent(next)}`);
}

function chatIdFromPath() {
  const match = location.pathname.match(/^\/c\/([^/]+)\/?$/);
  const id = match ? decodeURIComponent(match[1]) : "";
  return CHAT_ID_RE.test(id) ? id : "";
}

function notice(message, kind = "error") {
  const close = el("button", { type: "button", class: "icon-btn notice-close", "aria-label": "Dismiss" }, icon("close"));
  const node = el("div", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" }, el("span", { class: "notice-text", text: message }), close);
  close.addEventListener("click", () => {
    node.remove();
    dom.composer.focus();
  });
  dom.notices.append(node);
  while (dom.notices.childElementCount > 3) dom.notices.firstElementChild.remove();
  return node;
}

function updateHeader() {
  const session = sidebar.find(state.chatId);
  const title = (session && session.title) || (session ? "Untitled chat" : "New chat");
  dom.title.textContent = title;
  dom.title.title = title;
  const model = state.model || (session && session.model) || config.defaultModel;
  dom.model.textContent = model || "no model set";
  dom.model.title = model ? `Model: ${model}` : "No model configured";
  document.title = `${title} · agentsite`;
}

function scheduleSidebarRefresh(delay = 300) {
  clearTimeout(state.refreshTimer);
  state.refreshTimer = setTimeout(() => {
    sidebar.refresh().catch(onApiError);
  }, delay);
}

function onApiError(error) {
  if (error && (error.status === 401 || error.status === 403)) goLogin();
  else notice(`Could not load your chats: ${error && error.message ? error.message : error}`);
}

// ---- connection status --------------------------------------------------

function setConn(status) {
  clearTimeout(state.connectingTimer);
  dom.conn.dataset.state = status;
  if (status === "open") {
    dom.conn.hidden = true;
  } else if (status === "connecting") {
    // Only show "Connecting…" if it takes a moment.
    state.connectingTimer = setTimeout(() => {
      dom.conn.textContent = "Connecting…";
      dom.conn.hidden = false;
    }, 800);
  } else {
    dom.conn.textContent = navigator.onLine === false ? "Offline · reconnecting…" : "Reconnecting…";
    dom.conn.hidden = false;
  }
}

function setSendState(running) {
  const mode = running ? "stop" : "send";
  if (dom.send.dataset.state === mode && !dom.send.disabled) return;
  clearTimeout(state.stopTimer);
  dom.send.dataset.state = mode;
  dom.send.disabled = false;
  dom.send.setAttribute("aria-label", running ? "Stop the running turn" : "Send message");
  dom.sendLabel.textContent = running ? "Stop" : "Send";
}

function setRunning(running, runId) {
  conv.setRunning(running, runId);
  setSendState(running);
}

function setFatal(message) {
  setRunning(false);
  state.fatal = true;
  conv.reset();
  dom.fatal.textContent = message;
  dom.fatal.hidden = false;
  dom.composer.disabled = true;
  dom.send.disabled = true;
  clearTimeout(state.connectingTimer);
  dom.conn.hidden = true;
}

// ---- WebSocket ----------------------------------------------------------

function socketUrl(chatId) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${location.host}${config.wsPrefix}${chatId}/`;
}

function connect() {
  clearTimeout(state.reconnectTimer);
  if (!state.chatId || state.fatal || state.socket) return;
  setConn(state.attempt ? "reconnecting" : "connecting");
  let ws;
  try {
    ws = new WebSocket(socketUrl(state.chatId));
  } catch (error) {
    notice(`Cannot open the connection: ${error.message}`);
    return;
  }
  state.socket = ws;
  let opened = false;
  ws.addEventListener("open", () => {
    opened = true;
  });
  ws.addEventListener("message", (event) => {
    if (ws !== state.socket) return;
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch {
      return;
    }
    if (frame && typeof frame.type === "string") handleFrame(frame);
  });
  ws.addEventListener("close", (event) => {
    if (ws !== state.socket) return; // a socket we replaced on purpose
    state.socket = null;
    onClose(event, opened);
  });
}

function disconnect() {
  const ws = state.socket;
  state.socket = null;
  clearTimeout(state.reconnectTimer);
  if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1000);
}

function onClose(event, opened) {
  if (event.code === 4401) {
    goLogin();
    return;
  }
  if (FATAL_CLOSE[event.code]) {
    setFatal(FATAL_CLOSE[event.code]);
    return;
  }
  const delay = Math.min(BACKOFF_MIN * 2 ** state.attempt, BACKOFF_MAX);
  state.attempt += 1;
  setConn("reconnecting");
  state.reconnectTimer = setTimeout(connect, delay);
  // A handshake that keeps failing may mean the login expired: ask the API.
  if (!opened && state.attempt >= 2) {
    sidebar.refresh().catch((error) => {
      if (error && (error.status === 401 || error.status === 403)) goLogin();
    });
  }
}

function send(frame) {
  const ws = state.socket;
  if (!ws || ws.readyState !== WebSocket.OPEN) return false;
  ws.send(JSON.stringify(frame));
  return true;
}

// ---- frames from the server ---------------------------------------------

function handleFrame(f) {
  switch (f.type) {
    case "history":
      state.attempt = 0;
      setConn("open");
      if (f.model) state.model = f.model;
      conv.renderHistory(Array.isArray(f.messages) ? f.messages : []);
      setRunning(Boolean(f.running), f.run_id);
      updateHeader();
      flushOutbox();
      break;
    case "thinking_started":
      setRunning(true, f.run_id);
      break;
    case "stream_start":
      conv.streamStart(f.msg_id);
      break;
    case "stream_chunk":
      conv.streamChunk(f.msg_id, typeof f.content === "string" ? f.content : contentText(f.content));
      break;
    case "stream_end":
      conv.streamEnd(f.msg_id, Boolean(f.discarded));
      break;
    case "thinking":
      conv.setNote(contentText(f.content), state.lastFrame === "thinking");
      break;
    case "tool_call":
      conv.toolCall(f.id, f.name, f.arguments);
      break;
    case "tool_result":
      conv.toolResult(f.id, f.name, f.result, f.duration_ms);
      break;
    case "thinking_finished":
      setRunning(false);
      scheduleSidebarRefresh();
      break;
    case "message":
      onMessage(f);
      break;
    case "error":
      if (f.refused) restoreRefused();
      notice(contentText(f.message) || "Something went wrong.");
      break;
    case "subagent_spawned":
      conv.addSystem(`Sub-agent ${label(f)} started.`, "subagent");
      break;
    case "subagent_completed":
      conv.addSystem(`Sub-agent ${label(f)} finished${f.status ? ` (${f.status})` : ""}.`, "subagent");
      break;
    case "cron_executed":
      conv.addSystem(`Scheduled job ${f.job_id ?? ""} ran${f.status ? ` (${f.status})` : ""}.`, "cron");
      scheduleSidebarRefresh();
      break;
    default:
      break; // unknown frames are ignored
  }
  state.lastFrame = f.type;
}

// The server did not take the message just sent (too fast, too many waiting, not valid):
// take its bubble back out of the conversation and give its text back to the composer.
function restoreRefused() {
  const pending = document.querySelectorAll("#messages .msg.user[data-pending]");
  const last = pending[pending.length - 1];
  if (!last) return;
  const text = last.textContent;
  last.remove();
  if (!dom.composer.value.trim()) {
    dom.composer.value = text;
    autoGrow();
    updateHint();
  }
}

function label(f) {
  return f.label ? `“${f.label}”` : f.id ? String(f.id) : "";
}

function onMessage(f) {
  const text = contentText(f.content);
  const role = f.role || "assistant";
  if (role === "user") {
    // An echo of what we already show (optimistically) or a message from another tab.
    const pending = Array.from(document.querySelectorAll("#messages .msg.user[data-pending]")).find(
      (node) => node.textContent === text,
    );
    if (pending) delete pending.dataset.pending;
    else conv.addUser(text);
    return;
  }
  if (text.startsWith("New conversation started")) {
    conv.clear(); // the server archived the old conversation
  } else if (conv.claimStreamed(text, f.run_id)) {
    scheduleSidebarRefresh(); // the streamed bubble already shows this reply
    return;
  }
  if (role === "system") conv.addSystem(text);
  else if (text.trim()) conv.addAssistant(text);
  scheduleSidebarRefresh();
}

// ---- composer -----------------------------------------------------------

function autoGrow() {
  const c = dom.composer;
  c.style.height = "auto";
  c.style.height = `${Math.min(c.scrollHeight, Math.round(window.innerHeight * 0.4))}px`;
}

const DEFAULT_HINT = "Enter to send · Shift+Enter for a new line · /help lists commands";
const COMMANDS = [
  ["/new", "start a new conversation"],
  ["/stop", "stop the running turn"],
  ["/help", "list the commands"],
  ["/model NAME", "switch this chat's model"],
];

function updateHint() {
  const value = dom.composer.value;
  if (value.startsWith("/") && !value.includes("\n")) {
    const typed = value.split(/\s/)[0];
    const matches = COMMANDS.filter(([cmd]) => cmd.startsWith(typed) || typed.startsWith(cmd.split(" ")[0]));
    dom.hint.textContent = (matches.length ? matches : COMMANDS).map(([c, d]) => `${c}: ${d}`).join(" · ");
  } else {
    dom.hint.textContent = DEFAULT_HINT;
  }
}

function submitMessage() {
  const text = dom.composer.value;
  if (!text.trim() || state.fatal) return;
  if (send({ type: "message", content: text })) {
    conv.addUser(text, { pending: true });
  } else {
    // Not connected yet (the page is still opening its socket, or reconnecting): keep the
    // message and send it as soon as the server has sent the history.
    state.outbox.push(text);
    if (!state.outboxNotice || !state.outboxNotice.isConnected) {
      state.outboxNotice = notice("Connecting… your message will be sent as soon as the connection is up.", "warning");
    }
    if (!state.socket) {
      state.attempt = 0;
      connect();
    }
  }
  dom.composer.value = "";
  autoGrow();
  updateHint();
}

function flushOutbox() {
  while (state.outbox.length) {
    const text = state.outbox[0];
    if (!send({ type: "message", content: text })) return;
    state.outbox.shift();
    conv.addUser(text, { pending: true });
  }
  if (state.outboxNotice) {
    state.outboxNotice.remove();
    state.outboxNotice = null;
  }
}

function stopTurn() {
  if (!send({ type: "stop" })) return;
  dom.send.disabled = true;
  dom.sendLabel.textContent = "Stopping…";
  clearTimeout(state.stopTimer);
  // If the server never confirms, make the button usable again.
  state.stopTimer = setTimeout(() => {
    dom.send.disabled = false;
    dom.sendLabel.textContent = dom.send.dataset.state === "stop" ? "Stop" : "Send";
  }, 5000);
}

dom.form.addEventListener("submit", (event) => {
  event.preventDefault();
  if (dom.send.dataset.state === "stop") stopTurn();
  else submitMessage();
  if (!matchMedia("(pointer: coarse)").matches) dom.composer.focus();
});

dom.composer.addEventListener("keydown", (event) => {
  if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) return;
  event.preventDefault();
  submitMessage(); // Enter always sends, even while a turn runs (the server decides)
});

dom.composer.addEventListener("input", () => {
  autoGrow();
  updateHint();
});

// ---- switching chats ----------------------------------------------------

function switchChat(chatId, { push = true } = {}) {
  if (chatId === state.chatId && (state.socket || state.fatal)) return;
  disconnect();
  state.chatId = chatId;
  state.outbox = [];
  state.fatal = false;
  state.attempt = 0;
  state.model = "";
  state.lastFrame = "";
  dom.fatal.hidden = true;
  dom.composer.disabled = false;
  conv.reset();
  setRunning(false);
  const url = chatUrl(chatId);
  if (location.pathname !== url) {
    if (push) history.pushState({ chatId }, "", url);
    else history.replaceState({ chatId }, "", url);
  }
  sidebar.setCurrent(chatId);
  updateHeader();
  connect();
}

$("new-chat").addEventListener("click", () => {
  closeSidebar();
  switchChat(newChatId());
  dom.composer.focus();
});

window.addEventListener("popstate", () => {
  const id = chatIdFromPath();
  if (id && id !== state.chatId) switchChat(id, { push: false });
});

// ---- sidebar drawer (narrow screens) -------------------------------------

function openSidebar() {
  document.body.classList.add("sidebar-open");
  dom.menu.setAttribute("aria-expanded", "true");
  dom.backdrop.hidden = false;
  const first = document.querySelector("#sidebar button, #sidebar a");
  if (first) first.focus();
}

function closeSidebar() {
  if (!document.body.classList.contains("sidebar-open")) return;
  document.body.classList.remove("sidebar-open");
  dom.menu.setAttribute("aria-expanded", "false");
  dom.backdrop.hidden = true;
}

dom.menu.addEventListener("click", () => {
  if (document.body.classList.contains("sidebar-open")) closeSidebar();
  else openSidebar();
});
$("close-sidebar").addEventListener("click", () => {
  closeSidebar();
  dom.menu.focus();
});
dom.backdrop.addEventListener("click", closeSidebar);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && document.body.classList.contains("sidebar-open")) {
    closeSidebar();
    dom.menu.focus();
  }
});

// ---- come back to life after sleep / network loss ------------------------

function reconnectNow() {
  if (state.fatal || state.socket || !state.chatId) return;
  state.attempt = 0;
  connect();
}
window.addEventListener("online", reconnectNow);
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") {
    reconnectNow();
    scheduleSidebarRefresh(0);
  }
});

// ---- start --------------------------------------------------------------

async function start() {
  dom.hint.textContent = DEFAULT_HINT;
  autoGrow();
  const initial = CHAT_ID_RE.test(config.chatId) ? config.chatId : chatIdFromPath();
  if (initial) {
    switchChat(initial, { push: false });
    sidebar.refresh().catch(onApiError);
    return;
  }
  // "/" : open the newest web chat, or start a new one.
  let sessions = [];
  try {
    sessions = await sidebar.refresh();
  } catch (error) {
    onApiError(error);
  }
  switchChat(sessions.length ? sessions[0].chat_id : newChatId(), { push: false });
}

start();
if (!matchMedia("(pointer: coarse)").matches) dom.composer.focus();
