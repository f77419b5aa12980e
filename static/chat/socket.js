// The chat's WebSocket: one connection at a time to the open chat, reconnecting with backoff,
// frames parsed and handed on. It knows nothing about the page; it tells it through handlers.

const BACKOFF_MIN = 500;
const BACKOFF_MAX = 10000;
const LOGIN_RETRY_MS = 1500;
const FATAL_CLOSE = {
  4404: "This chat was not found.",
  4410: "This chat was deleted.",
};

export class ChatSocket {
  /**
   * options: {prefix, onFrame(frame), onStatus("connecting" | "reconnecting" | "open"),
   *           onFatal(message), onLoginLost(), onFailing(), onError(message)}
   */
  constructor(options) {
    this.o = options;
    this.chat = "";
    this.ws = null;
    this.attempt = 0;
    this.timer = 0;
    this.fatal = false; // the server closed for good (the chat is gone): no reconnecting
    this.loginRetried = false; // a 4401 of an open socket was tried once more
  }

  /** Whether a socket is open or opening. */
  get active() {
    return Boolean(this.ws);
  }

  url(chat) {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    return `${scheme}://${location.host}${this.o.prefix}${chat}/`;
  }

  /** Connect to `chat`, afresh. */
  open(chat) {
    this.chat = chat;
    this.fatal = false;
    this.attempt = 0;
    this.connect();
  }

  /** Reconnect at once (not after the backoff) if there is a chat to be connected to. */
  retryNow() {
    if (this.fatal || this.ws || !this.chat) return;
    this.attempt = 0;
    this.connect();
  }

  connect() {
    clearTimeout(this.timer);
    if (!this.chat || this.fatal || this.ws) return;
    this.o.onStatus(this.attempt ? "reconnecting" : "connecting");
    let ws;
    try {
      ws = new WebSocket(this.url(this.chat));
    } catch (error) {
      this.o.onError(`Cannot open the connection: ${error.message}`);
      return;
    }
    this.ws = ws;
    let opened = false;
    ws.addEventListener("open", () => {
      opened = true;
    });
    ws.addEventListener("message", (event) => {
      if (ws !== this.ws) return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      if (!frame || typeof frame.type !== "string") return;
      if (frame.type === "history") {
        // The server took the connection: the next loss starts the backoff afresh.
        this.attempt = 0;
        this.loginRetried = false;
        this.o.onStatus("open");
      }
      this.o.onFrame(frame);
    });
    ws.addEventListener("close", (event) => {
      if (ws !== this.ws) return; // a socket we replaced on purpose
      this.ws = null;
      this.closed(event, opened);
    });
  }

  /** Close the socket on purpose (no reconnecting). */
  close() {
    const ws = this.ws;
    this.ws = null;
    clearTimeout(this.timer);
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1000);
  }

  closed(event, opened) {
    if (event.code === 4401) {
      // A socket that was open is closed when its login ends, and also when the person
      // changed their own password, whose login goes on under a cookie renewed by the
      // answer to that change, which may reach the browser a moment after the close: one
      // more try, once that moment has passed, tells the two apart before the page asks
      // for a sign-in.
      if (opened && !this.loginRetried) {
        this.loginRetried = true;
        this.o.onStatus("reconnecting");
        this.timer = setTimeout(() => this.connect(), LOGIN_RETRY_MS);
        return;
      }
      this.o.onLoginLost();
      return;
    }
    if (FATAL_CLOSE[event.code]) {
      this.fatal = true;
      this.o.onFatal(FATAL_CLOSE[event.code]);
      return;
    }
    const delay = Math.min(BACKOFF_MIN * 2 ** this.attempt, BACKOFF_MAX);
    this.attempt += 1;
    this.o.onStatus("reconnecting");
    this.timer = setTimeout(() => this.connect(), delay);
    // A handshake that keeps failing may mean the login expired: the page can ask the API.
    if (!opened && this.attempt >= 2) this.o.onFailing();
  }

  /** Send a frame; false if the socket is not open. */
  send(frame) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(JSON.stringify(frame));
    return true;
  }
}
