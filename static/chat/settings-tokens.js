// The API tokens tab of the settings dialog: the person's named tokens (`GET /api/tokens`),
// a form that makes one (`POST /api/tokens`) and shows its secret this once with a copy
// button, and a Revoke button on each, asked about first (`DELETE /api/tokens/<id>`).

import { api, copyButton, el, icon } from "./util.js";
import { ask } from "./confirm.js";

const URL = "/api/tokens";

/** "12 Mar 2025, 14:05" in the reader's own time zone. */
function formatDate(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  return date.toLocaleString([], { day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit" });
}

/** A 400's fields as one line: "name: This field may not be blank." */
function problem(error) {
  try {
    const data = JSON.parse(error.message);
    return Object.entries(data)
      .map(([field, reasons]) => `${field}: ${[].concat(reasons).join(" ")}`)
      .join(" ");
  } catch {
    return error.message;
  }
}

export class TokensPart {
  /** dom: {form, name, expiry, create, error, secret, secretRow, secretValue, secretDone, list, empty} */
  constructor(dom) {
    this.dom = dom;
    this.secret = "";
    this.loading = null;
    dom.secretRow.append(copyButton(() => this.secret, "Copy", "Copy the new token"));
    dom.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.create();
    });
    dom.secretDone.addEventListener("click", () => {
      this.forgetSecret();
      dom.name.focus();
    });
    dom.secretValue.addEventListener("focus", () => dom.secretValue.select());
  }

  async load() {
    if (this.loading) return this.loading;
    this.dom.list.setAttribute("aria-busy", "true");
    this.loading = (async () => {
      try {
        this.render(await api("GET", URL));
        this.showError("");
      } catch (error) {
        this.showError(`Your tokens could not be read: ${error.message}`);
      } finally {
        this.dom.list.setAttribute("aria-busy", "false");
        this.loading = null;
      }
    })();
    return this.loading;
  }

  render(tokens) {
    const { list, empty } = this.dom;
    list.replaceChildren(...tokens.map((token) => this.item(token)));
    empty.hidden = tokens.length > 0;
  }

  item(token) {
    const name = el("span", { class: "token-name", text: token.name });
    const prefix = el("code", { class: "token-prefix", title: "How the token starts", text: `${token.prefix}…` });
    const head = el("div", { class: "token-head" }, name, prefix);
    if (token.expired) head.append(el("span", { class: "token-badge token-expired", text: "Expired" }));
    const expires = token.expires
      ? `${token.expired ? "Expired" : "Expires"} ${formatDate(token.expires)}`
      : "Never expires";
    const meta = el(
      "p",
      { class: "token-meta" },
      el("span", { text: `Created ${formatDate(token.created)}` }),
      el("span", { class: "token-expires", text: expires }),
      el("span", { class: "token-used", text: token.last_used ? `Last used ${formatDate(token.last_used)}` : "Never used" }),
    );
    const revoke = el(
      "button",
      { type: "button", class: "btn token-revoke", "aria-label": `Revoke ${token.name}` },
      icon("trash"),
      el("span", { text: "Revoke" }),
    );
    revoke.addEventListener("click", () => this.revoke(token, revoke));
    return el(
      "li",
      { class: `token-item${token.expired ? " is-expired" : ""}`, dataset: { tokenId: String(token.id) } },
      el("div", { class: "token-info" }, head, meta),
      revoke,
    );
  }

  async create() {
    const { name, expiry, create } = this.dom;
    const wanted = name.value.trim();
    if (!wanted) {
      this.showError("Give the token a name, to tell it apart later.");
      name.focus();
      return;
    }
    const body = { name: wanted };
    if (expiry.value) body.expires_in_days = Number(expiry.value);
    create.disabled = true;
    try {
      const made = await api("POST", URL, body);
      this.showError("");
      name.value = "";
      this.showSecret(made.token);
      await this.load();
    } catch (error) {
      this.showError(`The token was not made: ${problem(error)}`);
    } finally {
      create.disabled = false;
    }
  }

  async revoke(token, button) {
    const yes = await ask({
      message: `Revoke the token “${token.name}”? Every program that uses it is refused from now on, and chats opened with it close.`,
      yes: "Revoke",
      label: "Revoke a token",
    });
    if (!yes) {
      button.focus();
      return;
    }
    button.disabled = true;
    try {
      await api("DELETE", `${URL}/${token.id}`);
      this.showError("");
    } catch (error) {
      // Already gone (revoked in another tab): the list says so once it is read again.
      if (error.status !== 404) this.showError(`The token was not revoked: ${error.message}`);
    }
    await this.load();
    this.dom.name.focus();
  }

  showSecret(secret) {
    const { secret: box, secretValue } = this.dom;
    this.secret = secret;
    secretValue.value = secret;
    box.hidden = false;
    secretValue.focus();
  }

  forgetSecret() {
    this.secret = "";
    this.dom.secretValue.value = "";
    this.dom.secret.hidden = true;
  }

  showError(message) {
    this.dom.error.textContent = message;
    this.dom.error.hidden = !message;
  }
}
