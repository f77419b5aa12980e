// Team chats on the page (a session a team shares): who wrote each message and whose message
// a reply answers, who is looking right now, the team's name in the header, and starting a
// chat of one of the person's teams. A personal chat shows none of it.

import { el, api } from "./util.js";

const ME_URL = "/api/me";
// Past this many viewers the header shows "+N" instead of more badges.
const MOST_BADGES = 4;
// The text of the `error` frame a member removed from the team gets before the socket closes.
const REMOVED = /no longer a member/i;

export const isTeamChat = (chat) => typeof chat === "string" && chat.startsWith("team:");

/** "Ada Lovelace" → "AL", "bob" → "B": a person's initials, for a round badge. */
export function initials(name) {
  const words = String(name || "?").trim().split(/\s+/).filter(Boolean);
  if (!words.length) return "?";
  const first = Array.from(words[0])[0] || "?";
  const last = words.length > 1 ? Array.from(words[words.length - 1])[0] || "" : "";
  return (first + last).toUpperCase();
}

/** A round badge with `person`'s initials, its colour steady per person. */
export function personBadge(person, extra = "") {
  const name = (person && person.name) || "Someone";
  const id = Number(person && person.id) || 0;
  const badge = el("span", { class: `person-badge ${extra}`.trim(), "aria-hidden": "true", text: initials(name) });
  // Spread neighbouring ids around the colour wheel.
  badge.style.setProperty("--badge-hue", String((id * 137) % 360));
  return badge;
}

/** Two people, the icon of a team. */
export function teamIcon() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.setAttribute("class", "icon");
  for (const d of ["M16 21v-2a4 4 0 0 0-4-4H6a4 4 0 0 0-4 4v2", "M9 11a4 4 0 1 0 0-8 4 4 0 0 0 0 8Z", "M22 21v-2a4 4 0 0 0-3-3.9", "M16 3.1a4 4 0 0 1 0 7.8"]) {
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

export class Team {
  /**
   * dom: {messages, chip, presence, newButton, menu}
   * options: {conv, sessionsUrl, onTeams() (the teams were read: the list names them),
   *           onCreated(session) (a team chat was started), onError(message)}
   */
  constructor(dom, options) {
    this.dom = dom;
    this.o = options;
    this.me = null; // {id, is_staff, ...} of /api/me
    this.teams = []; // [{slug, name, admin}]
    this.viewers = []; // who the header shows looking
    this.reset("");
    // Bubbles of stored messages come from history, earlier pages and earlier versions,
    // all built by the conversation: named as they are added (see `decorate`).
    this.observer = new MutationObserver((changes) => this.onAdded(changes));
    this.observer.observe(dom.messages, { childList: true });
    this.setupMenu();
  }

  // ---- who I am and my teams ----------------------------------------------

  async load() {
    try {
      const data = await api("GET", ME_URL);
      this.me = (data && data.user) || null;
      this.teams = Array.isArray(data && data.teams) ? data.teams.filter((t) => t && t.slug) : [];
    } catch {
      this.teams = []; // the page works without: no team names, no new team chats
    }
    this.teams.sort((a, b) => this.nameOf(a.slug).localeCompare(this.nameOf(b.slug)));
    // What was shown before the page knew who it is for: "you" among them now.
    for (const node of this.dom.messages.querySelectorAll(".msg.user[data-author-id]")) {
      node.classList.toggle("mine", this.mine({ id: node.dataset.authorId }));
    }
    for (const node of this.dom.messages.querySelectorAll(".msg[data-answering]")) {
      node.classList.toggle("theirs", !this.mine({ id: node.dataset.answering }));
    }
    if (this.viewers.length) this.showPresence(this.viewers);
    this.renderMenu();
    this.o.onTeams();
  }

  nameOf(slug) {
    const team = this.teams.find((t) => t.slug === slug);
    return (team && team.name) || slug || "Team";
  }

  /** Whether the person may delete team chat `session`: its team's admins and staff may. */
  mayDelete(session) {
    if (!session || !session.team) return true;
    if (this.me && this.me.is_staff) return true;
    const team = this.teams.find((t) => t.slug === session.team);
    return Boolean(team && team.admin);
  }

  // ---- the chat that is open -------------------------------------------------

  /** Another chat (or none): forget the last one's people and turns. */
  reset(chat) {
    this.active = isTeamChat(chat);
    // A team chat is every member's already: the page offers no Share for it.
    document.body.classList.toggle("in-team-chat", this.active);
    this.authors = new Map(); // message id -> who wrote it
    this.answering = new Map(); // message id of a turn's first reply -> whose message it answers
    this.labelled = new Set(); // run ids whose reply says whom it answers
    this.runAuthors = new Map(); // run id -> whose message the run answers (live frames)
    this.turn = null; // the running turn: {runId, author}
    this.removed = false;
    this.slug = "";
    if (this.dom) {
      this.showPresence([]);
      this.header(null);
    }
  }

  /** The header's team label, from the chat's entry in the list. */
  header(session) {
    const chip = this.dom.chip;
    const slug = this.active && session && session.team ? session.team : "";
    this.slug = slug;
    if (!slug) {
      chip.hidden = true;
      chip.replaceChildren();
      return;
    }
    const name = this.nameOf(slug);
    chip.replaceChildren(teamIcon(), el("span", { class: "team-chip-name", text: name }));
    chip.title = `A chat of the team ${name}: every member reads and writes it`;
    chip.hidden = false;
  }

  /** What the page says when the chat closed for good: a member who left the team is told so. */
  fatalText(message) {
    if (!this.removed) return message;
    const team = this.slug ? ` ${this.nameOf(this.slug)}` : "";
    return `You are no longer a member of the team${team}: this chat is closed to you.`;
  }

  /** The chat closed for good: nobody is shown looking. */
  closed() {
    this.showPresence([]);
  }

  // ---- frames ---------------------------------------------------------------------

  /** Before the page applies `frame`: learn who wrote the stored messages it carries. */
  before(frame) {
    if (!this.active || !frame) return;
    if (frame.type === "history") {
      this.authors.clear();
      this.answering.clear();
      this.labelled.clear();
      this.runAuthors.clear();
      this.turn = null;
    }
    if (Array.isArray(frame.messages)) this.learn(frame.messages);
    if (frame.type === "history" && frame.running && Array.isArray(frame.messages)) {
      // Joined in the middle of a turn: it answers the latest person's message, which
      // started it.
      const started = frame.messages.filter((m) => m && m.role === "user").pop();
      if (started && started.author && started.run_id) {
        const runId = String(started.run_id);
        this.runAuthors.set(runId, started.author);
        this.turn = { runId, author: started.author };
      }
    }
  }

  /** After the page applied `frame`: name the live bubbles it made, show who is looking. */
  after(frame) {
    if (!this.active || !frame) return;
    const { messages } = this.dom;
    switch (frame.type) {
      case "presence":
        this.showPresence(Array.isArray(frame.viewers) ? frame.viewers : []);
        break;
      case "thinking_started":
        this.turn = frame.run_id && frame.author ? { runId: String(frame.run_id), author: frame.author } : null;
        if (this.turn) this.runAuthors.set(this.turn.runId, this.turn.author);
        break;
      case "stream_start": {
        // The running turn's first reply, as it starts. (A stream that overtook its turn's
        // `thinking_started`, from another process, is named when the turn ends, below.)
        const record = this.o.conv.streams.get(frame.msg_id);
        const turn = this.turn;
        if (record && turn && !this.labelled.has(turn.runId)) {
          this.labelled.add(turn.runId);
          markAnswering(record.node, turn.author);
        }
        break;
      }
      case "message":
        if (frame.role === "user" && frame.author && frame.run_id) {
          this.runAuthors.set(String(frame.run_id), frame.author);
          const node = messages.querySelector(`.msg.user[data-run-id="${CSS.escape(String(frame.run_id))}"]`);
          if (node) markAuthor(node, frame.author, this.mine(frame.author));
        } else if (frame.role === "assistant" && frame.run_id) {
          this.settle(String(frame.run_id));
        }
        break;
      case "thinking_finished":
        if (frame.run_id) this.settle(String(frame.run_id));
        this.turn = null;
        break;
      case "error":
        if (REMOVED.test(String(frame.message || ""))) this.removed = true;
        break;
      default:
        break;
    }
  }

  /** Stored messages: who wrote each person's message, and whom each turn's first reply answers. */
  learn(messages) {
    const firstReply = new Map(); // run id -> the id of its first reply that shows text
    for (const m of messages) {
      if (!m || m.id === undefined || m.id === null) continue;
      if (m.role === "user" && m.author) this.authors.set(String(m.id), m.author);
      const text = typeof m.content === "string" ? m.content.trim() : m.content;
      if (m.role === "assistant" && m.answering && m.run_id && text && !m.error) {
        const run = String(m.run_id);
        if (!firstReply.has(run) && !this.labelled.has(run)) firstReply.set(run, m);
      }
    }
    for (const [run, m] of firstReply) {
      this.answering.set(String(m.id), m.answering);
      this.labelled.add(run);
    }
  }

  /** A turn that ended: its first reply says whose message it answers, if it does not yet:
   *  the first reply after the message that started it. */
  settle(runId) {
    const author = this.runAuthors.get(runId);
    if (!author || this.labelled.has(runId)) return;
    const started = this.dom.messages.querySelector(`:scope > .msg.user[data-run-id="${CSS.escape(runId)}"]`);
    for (let at = started && started.nextElementSibling; at; at = at.nextElementSibling) {
      if (at.matches(".msg.user")) return;
      if (at.matches(".msg.assistant")) {
        this.labelled.add(runId);
        markAnswering(at, author);
        return;
      }
    }
  }

  onAdded(changes) {
    if (!this.active) return;
    for (const change of changes) {
      for (const node of change.addedNodes) {
        if (!(node instanceof HTMLElement)) continue;
        const bubbles = node.matches(".msg[data-id]") ? [node] : node.querySelectorAll(".msg[data-id]");
        for (const bubble of bubbles) this.decorate(bubble);
      }
    }
  }

  decorate(node) {
    const id = node.dataset.id;
    if (!id) return;
    if (node.dataset.role === "user" && this.authors.has(id)) {
      const author = this.authors.get(id);
      markAuthor(node, author, this.mine(author));
    } else if (node.dataset.role === "assistant" && this.answering.has(id)) {
      const author = this.answering.get(id);
      markAnswering(node, author);
      // Only the member it answers may regenerate a reply (the server refuses the others).
      node.classList.toggle("theirs", !this.mine(author));
    }
  }

  mine(person) {
    return Boolean(this.me && person && Number(person.id) === Number(this.me.id));
  }

  // ---- who is looking ------------------------------------------------------------

  showPresence(viewers) {
    const box = this.dom.presence;
    this.viewers = viewers;
    if (!this.active || !viewers.length) {
      box.hidden = true;
      box.replaceChildren();
      box.removeAttribute("title");
      return;
    }
    const names = viewers.map((v) => (this.mine(v) ? `${v.name || "you"} (you)` : v.name || "Someone"));
    const shown = viewers.slice(0, viewers.length > MOST_BADGES ? MOST_BADGES - 1 : MOST_BADGES);
    const badges = shown.map((v, i) => {
      const badge = personBadge(v, "presence-badge");
      badge.title = names[i];
      badge.dataset.viewerId = String(v.id);
      badge.removeAttribute("aria-hidden");
      badge.setAttribute("role", "img");
      badge.setAttribute("aria-label", names[i]);
      return badge;
    });
    if (viewers.length > shown.length) {
      const rest = names.slice(shown.length);
      badges.push(el("span", { class: "person-badge presence-more", role: "img", "aria-label": `and ${rest.join(", ")}`, title: rest.join(", "), text: `+${rest.length}` }));
    }
    box.replaceChildren(...badges);
    box.title = `Here now: ${names.join(", ")}`;
    box.setAttribute("aria-label", `Here now: ${names.join(", ")}`);
    box.hidden = false;
  }

  // ---- starting a team chat ---------------------------------------------------------

  setupMenu() {
    const { newButton, menu } = this.dom;
    newButton.addEventListener("click", () => (menu.hidden ? this.openMenu() : this.closeMenu()));
    menu.addEventListener("keydown", (event) => {
      const items = Array.from(menu.querySelectorAll("button"));
      const at = items.indexOf(document.activeElement);
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation(); // the drawer stays open
        this.closeMenu();
        newButton.focus();
      } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        const step = event.key === "ArrowDown" ? 1 : -1;
        items[(at + step + items.length) % items.length].focus();
      }
    });
    document.addEventListener("click", (event) => {
      if (!menu.hidden && !menu.contains(event.target) && !newButton.contains(event.target)) this.closeMenu();
    });
  }

  renderMenu() {
    const { newButton, menu } = this.dom;
    newButton.parentElement.hidden = this.teams.length === 0; // the button and its menu
    const items = this.teams.map((team) => {
      const name = this.nameOf(team.slug);
      const button = el("button", { type: "button", class: "team-menu-item", role: "menuitem", dataset: { team: team.slug } }, teamIcon(), el("span", { text: name }));
      button.addEventListener("click", () => this.start(team.slug));
      return el("li", { role: "none" }, button);
    });
    menu.replaceChildren(el("li", { class: "team-menu-label", role: "presentation", text: "Start a chat every member shares" }), ...items);
  }

  openMenu() {
    this.dom.menu.hidden = false;
    this.dom.newButton.setAttribute("aria-expanded", "true");
    const first = this.dom.menu.querySelector("button");
    if (first) first.focus();
  }

  closeMenu() {
    this.dom.menu.hidden = true;
    this.dom.newButton.setAttribute("aria-expanded", "false");
  }

  async start(slug) {
    this.closeMenu();
    try {
      const session = await api("POST", this.o.sessionsUrl, { team: slug });
      await this.o.onCreated(session);
    } catch (error) {
      this.o.onError(`Could not start a chat of ${this.nameOf(slug)}: ${error.message}`);
    }
  }
}

/** A person's message in a team chat: who wrote it, above the bubble. */
function markAuthor(node, author, mine) {
  if (!author || node.querySelector(":scope > .msg-author")) return;
  const name = author.name || "Someone";
  node.dataset.authorId = String(author.id ?? "");
  node.classList.add("authored");
  if (mine) node.classList.add("mine");
  const line = el("div", { class: "msg-author", title: mine ? `${name} (you)` : name }, personBadge(author), el("span", { class: "msg-author-name", text: name }));
  node.prepend(line);
}

/** A turn's reply in a team chat: whose message it answers, subtly. */
function markAnswering(node, author) {
  if (!author || node.querySelector(":scope > .msg-answering")) return;
  node.dataset.answering = String(author.id ?? "");
  node.prepend(el("div", { class: "msg-answering", text: `answering ${author.name || "someone"}` }));
}
