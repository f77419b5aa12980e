// Small DOM and formatting helpers shared by the chat page modules.

/** Create an element: el("div", {class: "x", dataset: {a: "1"}, text: "hi"}, child, ...). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// 24x24 stroke icons (paths only; drawn with currentColor).
const ICONS = {
  pencil: ["M12 20h9", "M16.5 3.5a2.1 2.1 0 0 1 3 3L7 19l-4 1 1-4Z"],
  trash: ["M3 6h18", "M8 6V4h8v2", "M19 6l-1 14H6L5 6", "M10 11v6", "M14 11v6"],
  copy: ["M9 9h11v11H9z", "M5 15H4V4h11v1"],
  check: ["M20 6 9 17l-5-5"],
  close: ["M18 6 6 18", "M6 6l12 12"],
  info: ["M12 16v-4", "M12 8h.01", "M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18Z"],
  alert: ["M12 3 2 20h20Z", "M12 10v4", "M12 17h.01"],
  refresh: ["M20 11a8 8 0 1 0-2.3 5.7", "M20 4v7h-7"],
  search: ["M11 18a7 7 0 1 0 0-14 7 7 0 0 0 0 14Z", "M20 20l-4-4"],
};

export function icon(name, extraClass = "") {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.setAttribute("class", `icon ${extraClass}`.trim());
  for (const d of ICONS[name] || []) {
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

/** The CSRF token: the csrftoken cookie, else the hidden form field rendered by the template. */
export function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  if (match) return decodeURIComponent(match[1]);
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** fetch() JSON from our own API with the session cookie and CSRF header. */
export async function api(method, url, body) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin" };
  if (method !== "GET" && method !== "HEAD") headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  if (!response.ok) {
    let detail = `${response.status} ${response.statusText}`.trim();
    try {
      const data = await response.json();
      if (data && typeof data.detail === "string") detail = data.detail;
      else if (data) detail = JSON.stringify(data);
    } catch {
      /* not JSON */
    }
    throw new HttpError(response.status, detail);
  }
  if (response.status === 204) return null;
  const type = response.headers.get("Content-Type") || "";
  return type.includes("json") ? response.json() : null;
}

/** A new web chat id: 32 hex chars, within the rule for chat ids (sessions_app/keys.py). */
export function newChatId() {
  if (globalThis.crypto && typeof crypto.randomUUID === "function") {
    return crypto.randomUUID().replace(/-/g, "");
  }
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Turn any message content (string, list of parts, object) into text. */
export function contentText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === "string" ? part : part && typeof part.text === "string" ? part.text : ""))
      .filter(Boolean)
      .join("\n");
  }
  try {
    return JSON.stringify(content, null, 2);
  } catch {
    return String(content);
  }
}

/** Tool arguments arrive as an object or a JSON string: return [parsed-or-null, pretty text]. */
export function parseArguments(args) {
  if (args === null || args === undefined || args === "") return [{}, "{}"];
  let value = args;
  if (typeof args === "string") {
    try {
      value = JSON.parse(args);
    } catch {
      return [null, args];
    }
  }
  try {
    return [value, JSON.stringify(value, null, 2)];
  } catch {
    return [null, String(args)];
  }
}

const SUMMARY_KEYS = ["command", "path", "pattern", "url", "query", "task", "label", "action", "content", "message"];

/** One line that says what a tool call does, e.g. `ls -la` or `notes/todo.md`. */
export function summariseArguments(parsed, raw) {
  let text = "";
  if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
    const key = SUMMARY_KEYS.find((k) => typeof parsed[k] === "string" && parsed[k].trim());
    if (key) {
      text = parsed[key];
      if (key === "action" && typeof parsed.job_id === "string") text += ` ${parsed.job_id}`;
    } else {
      const entries = Object.entries(parsed);
      text = entries
        .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
        .join(", ");
    }
  } else {
    text = raw || "";
  }
  text = text.replace(/\s+/g, " ").trim();
  return text.length > 140 ? `${text.slice(0, 139)}…` : text;
}

export function formatDuration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
  const minutes = Math.floor(ms / 60000);
  return `${minutes} min ${Math.round((ms % 60000) / 1000)} s`;
}

/** What a run or a chat used: "1,234 tokens · $0.0012", the cost unknown when a model has no price. */
export function formatUsage(usage) {
  if (!usage || typeof usage !== "object") return "";
  const tokens = Number(usage.total_tokens) || 0;
  const words = `${tokens.toLocaleString("en")} token${tokens === 1 ? "" : "s"}`;
  if (typeof usage.cost === "number") return `${words} · ${formatCost(usage.cost)}`;
  const priced = Number(usage.priced_cost) || 0;
  if (!usage.unpriced_runs) return words;
  return priced > 0 ? `${words} · ${formatCost(priced)} + unpriced` : `${words} · cost unknown`;
}

/** "$5.00", "$0.50", "$0.00125": cents, or as many decimals as a small sum needs (six at most). */
function formatCost(dollars) {
  if (dollars >= 1) return `$${dollars.toFixed(2)}`;
  const [whole, decimals = ""] = dollars.toFixed(6).replace(/0+$/, "").split(".");
  return `$${whole}.${decimals.padEnd(2, "0")}`;
}

/** Short time for the sidebar: "14:05" today, "Mon" this week, else "12 Mar". */
export function formatWhen(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const now = new Date();
  const ageDays = (now - date) / 86400000;
  if (date.toDateString() === now.toDateString()) {
    return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }
  if (ageDays < 6) return date.toLocaleDateString([], { weekday: "short" });
  const sameYear = date.getFullYear() === now.getFullYear();
  return date.toLocaleDateString([], sameYear ? { day: "numeric", month: "short" } : { day: "numeric", month: "short", year: "numeric" });
}

/** Copy text to the clipboard; falls back to a hidden textarea + execCommand outside secure contexts. */
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      /* fall through */
    }
  }
  const area = el("textarea", { class: "clipboard-helper", readonly: true, "aria-hidden": "true" });
  area.value = text;
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** A "Copy" button that shows "Copied" for a moment. getText is called on click. */
export function copyButton(getText, label = "Copy", ariaLabel = "Copy to clipboard") {
  const text = el("span", { class: "copy-label", text: label });
  const button = el("button", { type: "button", class: "copy-btn", "aria-label": ariaLabel }, icon("copy"), text);
  button.addEventListener("click", async () => {
    const ok = await copyText(getText());
    text.textContent = ok ? "Copied" : "Copy failed";
    button.classList.toggle("copied", ok);
    clearTimeout(button._timer);
    button._timer = setTimeout(() => {
      text.textContent = label;
      button.classList.remove("copied");
    }, 1500);
  });
  return button;
}
