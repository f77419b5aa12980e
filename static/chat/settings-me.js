// The "You and your teams" tab of the settings dialog (`GET /api/me`): who the person is
// here, their teams, and what their policy lets them do, each part with where it came from
// in plain words ("site setting", "from your team support").

import { api, el } from "./util.js";

const URL = "/api/me";
const UNITS = { s: "second", m: "minute", h: "hour", d: "day" };

/** Where a part of the policy came from: "operator", "personal", "team:<slug>" or "teams:<a>,<b>". */
export function sourceText(source, teams = []) {
  const names = new Map(teams.map((team) => [team.slug, team.name || team.slug]));
  const named = (slug) => names.get(slug) || slug;
  if (!source || source === "operator") return "site setting";
  if (source === "personal") return "set for you by an admin";
  if (source.startsWith("team:")) return `from your team ${named(source.slice(5))}`;
  if (source.startsWith("teams:")) {
    const all = source.slice(6).split(",").filter(Boolean).map(named);
    const last = all.pop();
    return `from your teams ${all.length ? `${all.join(", ")} and ${last}` : last}`;
  }
  return source;
}

function money(amount) {
  return `$${Number(amount).toFixed(2)}`;
}

/** "30/min" as "30 turns a minute", "100/2h" as "100 turns every 2 hours"; empty: no limit. */
function rateText(rate) {
  const match = /^\s*(\d+)\s*\/\s*(\d*)\s*([smhd])/i.exec(rate || "");
  if (!match) return rate ? String(rate) : "No limit";
  const [, count, multiple, unit] = match;
  const turns = `${count} turn${count === "1" ? "" : "s"}`;
  const name = UNITS[unit.toLowerCase()];
  const every = Number(multiple) > 1 ? `every ${multiple} ${name}s` : `a ${name}`;
  return `${turns} ${every}`;
}

function listText(values, none) {
  return values.length ? values.join(", ") : none;
}

export class MePart {
  constructor(root) {
    this.root = root;
    this.loading = null;
  }

  async load() {
    if (this.loading) return this.loading;
    this.root.setAttribute("aria-busy", "true");
    this.loading = (async () => {
      try {
        this.render(await api("GET", URL));
      } catch (error) {
        this.root.replaceChildren(
          el("p", { class: "settings-error", role: "alert", text: `Who you are here could not be read: ${error.message}` }),
        );
      } finally {
        this.root.setAttribute("aria-busy", "false");
        this.loading = null;
      }
    })();
    return this.loading;
  }

  render(me) {
    const teams = me.teams || [];
    this.root.replaceChildren(this.you(me.user || {}), this.teams(teams), this.policy(me.policy || {}, teams));
  }

  you(user) {
    const role = user.is_superuser ? "Superuser" : user.is_staff ? "Staff" : "Member";
    const rows = [
      ["Username", user.username],
      ["Name", user.name],
      ["Email", user.email],
      ["Role", role],
    ].filter(([, value]) => value);
    return this.section("You", el("dl", { class: "me-facts" }, ...rows.flatMap(([label, value]) => [el("dt", { text: label }), el("dd", { text: value })])));
  }

  teams(teams) {
    if (!teams.length) {
      return this.section("Your teams", el("p", { class: "settings-empty", text: "You are in no team: the site's settings apply to you." }));
    }
    const items = teams.map((team) =>
      el(
        "li",
        { class: "me-team", dataset: { slug: team.slug } },
        el("span", { class: "me-team-name", text: team.name || team.slug }),
        team.name && team.name !== team.slug ? el("code", { class: "me-team-slug", text: team.slug }) : null,
        team.admin ? el("span", { class: "token-badge me-admin", text: "team admin" }) : null,
      ),
    );
    return this.section("Your teams", el("ul", { class: "me-teams" }, ...items));
  }

  policy(policy, teams) {
    const rows = [];
    const row = (label, value, source, extra) => {
      rows.push(
        el(
          "div",
          { class: "me-rule" },
          el("dt", { text: label }),
          el("dd", {}, el("span", { class: "me-value", text: value }), el("span", { class: "me-source", text: sourceText(source, teams) }), extra),
        ),
      );
    };
    const part = (key) => policy[key] || { value: null, source: "operator" };

    row("Models", listText(part("models").value || [], "None"), part("models").source);
    const tools = part("tools");
    row("Tools", tools.value === null ? "Every tool" : listText(tools.value, "No tools"), tools.source);
    const waits = policy.approve_tools || [];
    const waitList = waits.length
      ? el(
          "ul",
          { class: "me-waits" },
          ...waits.map((wait) => el("li", {}, el("code", { text: wait.value }), el("span", { class: "me-source", text: sourceText(wait.source, teams) }))),
        )
      : null;
    rows.push(
      el(
        "div",
        { class: "me-rule" },
        el("dt", { text: "Tools that wait for your yes" }),
        el("dd", {}, waitList || el("span", { class: "me-value", text: "None" })),
      ),
    );
    const budget = part("member_daily_budget");
    row("Your daily budget", budget.value === null ? "No limit" : `${money(budget.value)} a day (UTC)`, budget.source);
    for (const team of policy.team_daily_budget || []) {
      row("Team daily budget", `${money(team.value)} a day, shared by its members`, team.source);
    }
    row("Turns", rateText(part("turn_rate").value), part("turn_rate").source);
    const network = part("exec_network");
    row("Network for commands", network.value ? "Allowed" : "Not allowed", network.source);
    return this.section("What you may do", el("dl", { class: "me-rules" }, ...rows));
  }

  section(title, body) {
    return el("section", { class: "me-section" }, el("h3", { class: "settings-subtitle", text: title }), body);
  }
}
