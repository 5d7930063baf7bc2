// The cairn API, as the console calls it: the same /v1 routes as the CLI,
// with the session cookie (sent by the browser) and the session's CSRF
// token in X-Cairn-CSRF on every change.

export class APIError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
  toString() { return `error ${this.code}: ${this.message}`; }
}

let csrf = "";
let onEnded = () => {};

export function setCSRF(token) { csrf = token; }
export function csrfToken() { return csrf; }
// onSessionEnded is called when an answer says the session is over (A01).
export function onSessionEnded(fn) { onEnded = fn; }

async function failure(res) {
  let code = "X01", message = `${res.status} ${res.statusText}`;
  try {
    const body = await res.json();
    if (body && body.error) { code = body.error.code; message = body.error.message; }
  } catch (_) { /* not the error shape */ }
  if (code === "A01") onEnded();
  return new APIError(code, message, res.status);
}

function headers(method, extra) {
  const h = { "Accept": "application/json", ...extra };
  if (method !== "GET" && method !== "HEAD") h["X-Cairn-CSRF"] = csrf;
  return h;
}

// send is fetch, with a read tried again (twice, after a pause) when the
// network failed under it (the browser saw its network change, say); a
// change is never sent twice.
async function send(path, init) {
  for (let i = 0; ; i++) {
    try {
      return await fetch(path, init);
    } catch (err) {
      if (init.method !== "GET" || i >= 2) throw new APIError("X01", `the request did not reach cairnd: ${err.message}`, 0);
      await new Promise((r) => setTimeout(r, 300 * (i + 1)));
    }
  }
}

// call makes one request and returns its JSON answer (null for 204).
export async function call(method, path, body) {
  const init = { method, headers: headers(method), credentials: "same-origin" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const res = await send(path, init);
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path) => call("GET", path);

// getText reads a plain-text answer (a service's log).
export async function getText(path) {
  const res = await send(path, { method: "GET", headers: { "Accept": "text/plain" }, credentials: "same-origin" });
  if (!res.ok) throw await failure(res);
  return res.text();
}

// operation starts a long change and follows its NDJSON events: onEvent
// sees each one (progress and info); it resolves with the complete
// event's data and rejects with the error event's code and message. If
// the stream breaks once the operation has started (the browser's
// network changed, say), it follows the operation again by its id
// (GET /v1/operations/ID/events), never starting it twice.
export async function operation(method, path, body, onEvent) {
  const init = { method, headers: headers(method, { "Accept": "application/x-ndjson" }), credentials: "same-origin" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new APIError("X01", `the request did not reach cairnd (${err.message}); look at the page again before you retry`, 0);
  }
  if (!res.ok) throw await failure(res);
  const type = res.headers.get("Content-Type") || "";
  if (!type.includes("ndjson")) {
    const text = await res.text();
    return text ? JSON.parse(text) : null;
  }
  const id = res.headers.get("Cairn-Operation");
  for (let tries = 0; ; tries++) {
    try {
      return await readEvents(res, onEvent);
    } catch (err) {
      if (err instanceof APIError || !id || tries >= 3) throw err instanceof APIError ? err : new APIError("X01", `lost the operation's progress: ${err.message}`, 0);
      await new Promise((r) => setTimeout(r, 300 * (tries + 1)));
      res = await send(`/v1/operations/${encodeURIComponent(id)}/events`, { method: "GET", headers: { "Accept": "application/x-ndjson" }, credentials: "same-origin" });
      if (!res.ok) throw await failure(res);
    }
  }
}

// readEvents reads an operation's NDJSON events to its end.
async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const ev = JSON.parse(line);
      if (ev.type === "complete") return ev.data;
      if (ev.type === "error") {
        const e = ev.data || {};
        throw new APIError(e.code || "X01", e.message || "the operation failed", 0);
      }
      if (onEvent) onEvent(ev);
    }
    if (done) throw new Error("the stream ended before the operation did");
  }
}

// follow reads an NDJSON stream (a sandbox's events with follow=true)
// until signal aborts it, calling onEvent for each line; it resolves when
// the stream ends.
export async function follow(path, signal, onEvent) {
  const res = await fetch(path, { headers: { "Accept": "application/x-ndjson" }, credentials: "same-origin", signal });
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) onEvent(JSON.parse(line));
    }
  }
}

export const enc = encodeURIComponent;
