// HTTP with the CSRF token and one error shape, and the page's websocket: it reconnects with
// backoff, says when it is offline, and holds frames until it is connected again.

export class HubRequestError extends Error {
  constructor(status, body) {
    const error = body?.error || {};
    super(error.message || `The hub answered ${status}.`);
    this.status = status;
    this.code = error.code || "error";
    this.fields = error.fields || {};
    // 202 saved_not_started: stored, but its run waits for Redis to come back; not to be sent again.
    this.saved = this.code === "saved_not_started";
  }
}

export function csrfToken() {
  return document.querySelector('meta[name="csrf-token"]')?.content || "";
}

async function request(url, options = {}) {
  let response;
  try {
    response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" }, ...options });
  } catch {
    throw new HubRequestError(0, { error: { code: "offline", message: "The hub cannot be reached right now." } });
  }
  let body = null;
  try { body = await response.json(); } catch { body = null; }
  // A 503 (database or Redis down: nothing stored) and a 202 with an error (stored, but not yet
  // handed to a worker) are not the answer the caller asked for either.
  if (!response.ok || (response.status === 202 && body?.error)) throw new HubRequestError(response.status, body);
  return body;
}

export function getJSON(url) {
  return request(url);
}

export function postJSON(url, body = {}) {
  return request(url, {
    method: "POST",
    headers: { Accept: "application/json", "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    body: JSON.stringify(body),
  });
}

// Read this page again and put its fresh copy of element (found by id) in place of the one shown:
// how the pages beside the chats (Memory, Shared links, Usage) stay live. Throws when offline.
export async function readPartAgain(element) {
  const response = await fetch(location.pathname + location.search, { credentials: "same-origin",
    headers: { Accept: "text/html" } });
  if (!response.ok) return;
  const page = new DOMParser().parseFromString(await response.text(), "text/html");
  const fresh = page.getElementById(element.id);
  if (fresh) element.replaceChildren(...fresh.childNodes);
}

// Close codes the server uses for "this chat is not yours / does not exist" and "deleted".
export const CLOSE_NOT_FOUND = 4404;
export const CLOSE_DELETED = 4410;

const FIRST_DELAY = 500;
const MAX_DELAY = 15000;

/**
 * One reconnecting websocket. Callbacks: onEvent(event), onOpen({ first }), onStatus(status,
 * detail) with status "connecting" | "open" | "offline" | "closed", onSent(frame) for each held
 * frame once it is written.
 */
export class Connection {
  constructor(path, callbacks) {
    this.path = path;
    this.callbacks = callbacks;
    this.socket = null;
    this.held = [];
    this.delay = FIRST_DELAY;
    this.timer = null;
    this.opened = false;
    this.stopped = false;
    this.status = "connecting";
    this.retryAt = 0;
    this.wake = () => { if (this.status === "offline") this.reconnectNow(); };
    window.addEventListener("online", this.wake);
    document.addEventListener("visibilitychange", this.wake);
  }

  start() {
    if (this.stopped) return;
    clearTimeout(this.timer);
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    this.setStatus("connecting");
    const socket = new WebSocket(`${scheme}://${location.host}${this.path}`);
    this.socket = socket;
    socket.addEventListener("open", () => {
      if (socket !== this.socket) return;
      this.delay = FIRST_DELAY;
      const first = !this.opened;
      this.opened = true;
      this.setStatus("open");
      this.callbacks.onOpen?.({ first });
      this.flush();
    });
    socket.addEventListener("message", (frame) => {
      if (socket !== this.socket) return;
      let event;
      try { event = JSON.parse(frame.data); } catch { return; }
      this.callbacks.onEvent?.(event);
    });
    socket.addEventListener("close", (event) => {
      if (socket !== this.socket) return;
      this.socket = null;
      if (this.stopped) return;
      if (event.code === CLOSE_NOT_FOUND || event.code === CLOSE_DELETED) {
        this.stopped = true;
        this.setStatus("closed", { code: event.code });
        return;
      }
      this.scheduleRetry();
    });
  }

  scheduleRetry() {
    // Full jitter keeps many tabs from hammering a hub that just came back.
    const wait = Math.round(this.delay / 2 + Math.random() * (this.delay / 2));
    this.delay = Math.min(this.delay * 2, MAX_DELAY);
    this.retryAt = Date.now() + wait;
    this.setStatus("offline", { retryAt: this.retryAt });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.start(), wait);
  }

  reconnectNow() {
    if (this.stopped) return;
    if (this.socket) {
      const old = this.socket;
      this.socket = null;
      old.close();
    }
    this.start();
  }

  setStatus(status, detail = {}) {
    this.status = status;
    this.callbacks.onStatus?.(status, detail);
  }

  get isOpen() {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  // Send now if connected; otherwise hold the frame until the socket opens. Returns whether sent.
  send(frame) {
    if (this.isOpen && this.held.length === 0) {
      this.socket.send(JSON.stringify(frame));
      return true;
    }
    this.held.push(frame);
    return false;
  }

  // Forget a held frame (a pending message the user withdrew before it went out).
  withdraw(predicate) {
    this.held = this.held.filter((frame) => !predicate(frame));
  }

  flush() {
    while (this.held.length && this.isOpen) {
      const frame = this.held.shift();
      this.socket.send(JSON.stringify(frame));
      this.callbacks.onSent?.(frame);
    }
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    window.removeEventListener("online", this.wake);
    document.removeEventListener("visibilitychange", this.wake);
    if (this.socket) {
      const old = this.socket;
      this.socket = null;
      old.close();
    }
  }
}
