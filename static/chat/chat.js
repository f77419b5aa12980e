// The chat page: wires the socket, the frames, the conversation, the composer and the sidebar
// together; keeps the header and the outbox, and routes between chats.
// Template values come from data-* attributes on <body> (see templates/chat.html).

import { el, newChatId, formatUsage } from "./util.js";
import { Conversation } from "./conversation.js";
import { Sidebar, chatUrl, chatOfKey } from "./sessions.js";
import { ChatSocket } from "./socket.js";
import { Composer } from "./composer.js";
import { Attach } from "./attach.js";
import { Drawer } from "./drawer.js";
import { Frames } from "./frames.js";
import { ModelPicker } from "./models.js";
import { Approvals } from "./approvals.js";
import { AlwaysBadges } from "./always.js";
import { HistoryPages } from "./pages.js";
import { Rewind } from "./rewind.js";
import { Versions } from "./versions.js";
import { RetryButtons } from "./retry.js";
import { ChatSearch } from "./search.js";
import { ConnectionBadge, Notices } from "./status.js";
import { Team } from "./team.js";

const $ = (id) => document.getElementById(id);
const data = document.body.dataset;
const config = {
  // A chat is addressed by its path segment: a web chat id, or the whole key of another
  // door's session (`api:<id>`, `openai:<id>`).
  chat: data.chatId || "",
  // The server's rule for that segment (sessions_app/keys.py), not a copy that could drift.
  chatRe: new RegExp(`^(?:${data.chatPattern})$`),
  wsPrefix: data.wsPathPrefix || "/ws/chat/",
  defaultModel: data.defaultModel || "",
  // The ids the operator lets users pick, AGENT_MODEL first (`GET /api/models`).
  models: (data.models || "").split(",").filter(Boolean),
  loginUrl: data.loginUrl || "/accounts/login/",
  sessionsUrl: (data.sessionsUrl || "/api/sessions").replace(/\/+$/, ""),
  searchUrl: data.searchUrl || "/api/search",
  uploadsUrl: data.uploadsUrl || "/api/uploads",
};

const dom = {
  title: $("chat-title"),
  model: $("model-name"),
  usage: $("chat-usage"),
  fatal: $("fatal"),
};

const state = {
  chat: "",
  model: "",
  refreshTimer: 0,
  running: false, // a turn of the chat is being written (not one that waits for an answer)
  outbox: [], // messages written while the socket was (re)connecting; sent on `history`
  outboxNotice: null,
};

const badge = new ConnectionBadge($("conn-status"));
const notices = new Notices($("notices"), () => composer.focus());
const notice = (message, kind) => notices.show(message, kind);

const conv = new Conversation({
  scroller: $("scroller"),
  messages: $("messages"),
  emptyState: $("empty-state"),
  thinking: $("thinking"),
  thinkingNote: $("thinking-note"),
  thinkingTime: $("thinking-time"),
  jump: $("jump"),
});

// A team chat's authors, viewers and team; and starting one (chat/team.js).
const team = new Team(
  { messages: $("messages"), chip: $("team-chip"), presence: $("presence"), newButton: $("new-team-chat"), menu: $("team-menu") },
  {
    conv,
    sessionsUrl: config.sessionsUrl,
    onTeams: () => {
      sidebar.render();
      updateHeader();
    },
    onCreated: async (session) => {
      drawer.close();
      await sidebar.refresh().catch(onApiError);
      switchChat(chatOfKey(session.key));
      composer.focus();
    },
    onError: (message) => notice(message),
  },
);

const drawer = new Drawer({
  sidebar: $("sidebar"),
  menu: $("menu"),
  close: $("close-sidebar"),
  backdrop: $("backdrop"),
});

const sidebar = new Sidebar({
  list: $("session-list"),
  empty: $("session-empty"),
  url: config.sessionsUrl,
  isChat: (chat) => config.chatRe.test(chat),
  onSelect: (chat) => {
    drawer.close();
    switchChat(chat);
  },
  onDeleted: (session) => {
    if (session.chat === state.chat) {
      const next = sidebar.sessions[0];
      switchChat(next ? next.chat : newChatId());
    }
  },
  onChange: () => {
    // The socket says what the open chat uses (history, `model` frames); the list may be older.
    const session = sidebar.find(state.chat);
    if (session && session.model && !state.model) state.model = session.model;
    updateHeader();
  },
  onError: (message) => notice(message),
  teamName: (slug) => team.nameOf(slug),
  mayDelete: (session) => team.mayDelete(session),
});

const socket = new ChatSocket({
  prefix: config.wsPrefix,
  onFrame: (frame) => {
    team.before(frame);
    frames.handle(frame);
    team.after(frame);
  },
  onStatus: (status) => badge.set(status),
  onFatal: (message) => setFatal(message),
  onLoginLost: () => goLogin(),
  onFailing: () => {
    sidebar.refresh().catch((error) => {
      if (error && (error.status === 401 || error.status === 403)) goLogin();
    });
  },
  onError: (message) => notice(message),
});

const composer = new Composer(
  {
    form: $("composer-form"),
    input: $("composer"),
    send: $("send"),
    sendLabel: $("send-label"),
    hint: $("composer-hint"),
  },
  {
    onSubmit: submitMessage,
    onStop: stopTurn,
    escapeStops: () => state.running,
    // (`attach` is made below; asked only once the page is up)
    hasAttachments: () => attach.count > 0,
  },
);

const attach = new Attach(
  {
    button: $("attach"),
    input: $("attach-input"),
    dropZone: document.querySelector(".main"),
    chips: $("attachments"),
  },
  {
    url: config.uploadsUrl,
    onAttached: () => {
      composer.updateSendable();
      composer.focus();
    },
    onRemoved: () => {
      composer.updateSendable();
      composer.focus();
    },
    onError: (message) => notice(message),
    onLoginLost: () => goLogin(),
  },
);

const picker = new ModelPicker(
  { select: $("model-picker"), chip: $("model-chip") },
  {
    models: config.models,
    onPick: (model) => {
      if (socket.send({ type: "model", model })) return true;
      notice("Not connected: the model was not changed. Try again in a moment.");
      return false;
    },
  },
);

const approvals = new Approvals({
  conv,
  send: (frame) => socket.send(frame),
  notice: (message) => notice(message),
  // Stop, too, while a call waits for an answer: it declines the call and ends the turn.
  onChange: () => composer.setRunning(state.running || approvals.waiting > 0),
});

const always = new AlwaysBadges($("always-list"), { send: (frame) => socket.send(frame), notice });

const pages = new HistoryPages(
  { scroller: $("scroller"), messages: $("messages"), button: $("earlier") },
  { conv, send: (frame) => socket.send(frame), notice },
);

const rewind = new Rewind(
  { messages: $("messages") },
  {
    conv,
    send: (frame) => socket.send(frame),
    notice,
    resync: () => {
      socket.close();
      socket.open(state.chat);
    },
  },
);

const versions = new Versions({ messages: $("messages"), scroller: $("scroller") }, { conv, send: (frame) => socket.send(frame), notice });
const retries = new RetryButtons($("messages"), { send: (frame) => socket.send(frame), notice });

new ChatSearch(
  { input: $("search"), results: $("search-results"), list: $("search-list"), empty: $("search-empty"), sessions: $("session-nav") },
  {
    url: config.searchUrl,
    isOpenable: (key) => sidebar.opens(key),
    onOpen: (chat, messageId) => openAt(chat, messageId),
    onLoginLost: () => goLogin(),
  },
);

const frames = new Frames({
  conv,
  composer,
  approvals,
  setRunning,
  onHistory,
  onModel: (model) => {
    state.model = model;
    updateHeader();
    scheduleSidebarRefresh();
  },
  onError: () => {
    picker.forget();
    rewind.onError();
    retries.onError();
  },
  notice,
  refreshSoon: () => scheduleSidebarRefresh(),
  onArchived: (f) => {
    versions.onArchived(f);
    rewind.onArchived(f);
  },
  onVersion: (f) => versions.onVersion(f),
  onEarlier: (f) => pages.onEarlier(f),
  onAllowedTools: (tools) => always.set(tools),
});

// ---- helpers ------------------------------------------------------------

function goLogin() {
  const next = location.pathname + location.search;
  location.assign(`${config.loginUrl}?next=${encodeURIComponent(next)}`);
}

function chatFromPath() {
  const match = location.pathname.match(/^\/c\/([^/]+)\/?$/);
  let chat = "";
  try {
    chat = match ? decodeURIComponent(match[1]) : "";
  } catch {
    /* a malformed escape: no chat */
  }
  return config.chatRe.test(chat) ? chat : "";
}

function updateHeader() {
  const session = sidebar.find(state.chat);
  const title = (session && session.title) || (session ? "Untitled chat" : "New chat");
  dom.title.textContent = title;
  dom.title.title = title;
  const model = state.model || (session && session.model) || config.defaultModel;
  dom.model.textContent = model || "no model set";
  dom.model.title = model ? `Model: ${model}` : "No model configured";
  picker.show(model);
  // The chat's runs so far, summed by the server (`usage` of the sessions list).
  const used = session && session.usage && session.usage.total_tokens ? formatUsage(session.usage) : "";
  dom.usage.replaceChildren(...(used ? [el("span", { class: "usage-label", text: "This chat: " }), used] : []));
  dom.usage.title = used ? `This chat so far: ${used}` : "";
  dom.usage.hidden = !used;
  document.title = `${title} · agentsite`;
  team.header(session);
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

// ---- running, and a chat that is gone ------------------------------------

function setRunning(running, runId) {
  state.running = running;
  conv.setRunning(running, runId);
  composer.setRunning(running || approvals.waiting > 0);
}

function setFatal(message) {
  setRunning(false);
  conv.reset();
  dom.fatal.textContent = team.fatalText(message);
  team.closed();
  // Gone (deleted, or of a team the person left): not in the list, not even as a draft.
  sidebar.setCurrent("");
  scheduleSidebarRefresh(0);
  dom.fatal.hidden = false;
  composer.lock();
  badge.hide();
}

// ---- the history of a chat, on (re)connecting ----------------------------

function onHistory(f) {
  // (the socket has already marked the connection open)
  picker.forget(); // a pick sent on an earlier connection was taken or not: history says
  if (f.model) state.model = f.model;
  approvals.clear();
  always.set(f.allowed_tools);
  conv.renderHistory(Array.isArray(f.messages) ? f.messages : []);
  setRunning(Boolean(f.running), f.run_id);
  pages.onHistory(f);
  updateHeader();
  flushOutbox();
}

// ---- sending ------------------------------------------------------------

async function submitMessage() {
  if ((!composer.value.trim() && !attach.count) || socket.fatal) return;
  // (the question is a modal dialog: the text cannot change while it is asked)
  if (!(await approvals.confirmSend(composer.value))) return;
  const text = attach.takeInto(composer.value);
  if (socket.send({ type: "message", content: text })) {
    conv.addUser(text, { pending: true });
  } else {
    // Not connected yet (the page is still opening its socket, or reconnecting): keep the
    // message and send it as soon as the server has sent the history.
    state.outbox.push(text);
    if (!state.outboxNotice || !state.outboxNotice.isConnected) {
      state.outboxNotice = notice("Connecting… your message will be sent as soon as the connection is up.", "warning");
    }
    socket.retryNow();
  }
  composer.clear();
}

function flushOutbox() {
  while (state.outbox.length) {
    const text = state.outbox[0];
    if (!socket.send({ type: "message", content: text })) return;
    state.outbox.shift();
    conv.addUser(text, { pending: true });
  }
  if (state.outboxNotice) {
    state.outboxNotice.remove();
    state.outboxNotice = null;
  }
}

function stopTurn() {
  if (socket.send({ type: "stop" })) composer.stopping();
}

// ---- switching chats ----------------------------------------------------

/** Open `chat` at message `id` (a search result): scrolled to and highlighted. */
function openAt(chat, id) {
  drawer.close();
  if (!sidebar.find(chat)) scheduleSidebarRefresh(0); // a chat the list has not had yet
  const url = chatUrl(chat) + (id ? `#message-${id}` : "");
  if (chat === state.chat && socket.active) {
    history.replaceState({ chat }, "", url);
    if (id) pages.reveal(id);
    return;
  }
  switchChat(chat, { at: id });
}

function switchChat(chat, { push = true, at = null } = {}) {
  if (chat === state.chat && (socket.active || socket.fatal)) return;
  socket.close();
  state.chat = chat;
  state.outbox = [];
  state.model = "";
  team.reset(chat);
  frames.reset();
  approvals.clear();
  always.set([]);
  pages.reset();
  rewind.closeEditor();
  versions.reset();
  if (at) pages.seek(at);
  dom.fatal.hidden = true;
  composer.unlock();
  conv.reset();
  setRunning(false);
  const url = chatUrl(chat) + (at ? `#message-${at}` : "");
  if (location.pathname + location.hash !== url) {
    if (push) history.pushState({ chat }, "", url);
    else history.replaceState({ chat }, "", url);
  }
  sidebar.setCurrent(chat);
  updateHeader();
  socket.open(chat);
}

$("new-chat").addEventListener("click", () => {
  drawer.close();
  switchChat(newChatId());
  composer.focus();
});

window.addEventListener("popstate", () => {
  const chat = chatFromPath();
  if (chat && chat !== state.chat) switchChat(chat, { push: false });
});

// ---- come back to life after sleep / network loss ------------------------

window.addEventListener("online", () => socket.retryNow());
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") {
    socket.retryNow();
    scheduleSidebarRefresh(0);
  }
});

// ---- start --------------------------------------------------------------

async function start() {
  composer.start();
  team.load();
  const initial = config.chatRe.test(config.chat) ? config.chat : chatFromPath();
  if (initial) {
    // `#message-<id>`: a link to one message of the chat (a search result's).
    const at = location.hash.match(/^#message-(\d+)$/);
    switchChat(initial, { push: false, at: at ? Number(at[1]) : null });
    sidebar.refresh().catch(onApiError);
    return;
  }
  // "/" : open the newest web chat, or start a new one (API sessions open from the list).
  let sessions = [];
  try {
    sessions = await sidebar.refresh();
  } catch (error) {
    onApiError(error);
  }
  const newest = sessions.find((s) => s.key.startsWith("web:"));
  switchChat(newest ? newest.chat : newChatId(), { push: false });
}

start();
if (!matchMedia("(pointer: coarse)").matches) composer.focus();
