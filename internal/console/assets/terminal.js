// The terminal: xterm.js on a WebSocket to /console/terminal/NAME, which
// the server bridges onto the exec protocol (a shell on a tty). Input
// goes as binary messages, a resize as a text message; output comes as
// binary messages, and one last text message says how it ended.
import { Terminal } from "./vendor/xterm.mjs";
import { FitAddon } from "./vendor/addon-fit.mjs";
import { csrfToken } from "./api.js";
import { el, status } from "./ui.js";

export function openTerminal(box, name, running) {
  const state = el("p", { class: "muted", id: "term-state", "aria-live": "polite" });
  const btn = el("button", { type: "button", id: "term-open", class: "needs-member" }, "Open a shell");
  const screen = el("div", { class: "terminal", id: "terminal", role: "region", "aria-label": `Terminal of ${name}` });
  screen.hidden = true;
  box.replaceChildren(el("h2", { id: "term-title", style: "margin-top:0" }, "Terminal"),
    el("p", {}, btn, " ", state), screen);
  if (!running) state.textContent = "The sandbox is not running: start it to open a shell.";
  let ws = null, term = null, onResize = null;

  function close() {
    if (ws) { ws.onclose = null; ws.close(); ws = null; }
    if (term) { term.dispose(); term = null; }
    if (onResize) { window.removeEventListener("resize", onResize); onResize = null; }
  }

  btn.addEventListener("click", () => {
    close();
    screen.hidden = false;
    screen.replaceChildren();
    term = new Terminal({ convertEol: false, cursorBlink: true, fontSize: 14, screenReaderMode: false });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(screen);
    fit.fit();
    const q = new URLSearchParams({ csrf: csrfToken(), rows: String(term.rows), cols: String(term.cols) });
    ws = new WebSocket(`wss://${location.host}/console/terminal/${encodeURIComponent(name)}?${q}`);
    ws.binaryType = "arraybuffer";
    const enc = new TextEncoder();
    state.textContent = "Connecting…";
    ws.onopen = () => { state.textContent = "Connected: a shell in the sandbox."; term.focus(); };
    ws.onmessage = (m) => {
      if (typeof m.data !== "string") { term.write(new Uint8Array(m.data)); return; }
      const msg = JSON.parse(m.data);
      if (msg.exit) state.textContent = `The shell exited (code ${msg.exit.code}${msg.exit.signal ? ", " + msg.exit.signal : ""}).`;
      else if (msg.error) { state.textContent = `error ${msg.error.code}: ${msg.error.message}`; status(state.textContent, "error"); }
      else if (msg.ended) { state.textContent = msg.ended; status(msg.ended, "error"); }
    };
    ws.onclose = () => { if (state.textContent.startsWith("Connect")) state.textContent = "The terminal's connection closed."; ws = null; };
    term.onData((d) => { if (ws && ws.readyState === 1) ws.send(enc.encode(d)); });
    term.onResize(({ rows, cols }) => { if (ws && ws.readyState === 1) ws.send(JSON.stringify({ rows, cols })); });
    onResize = () => fit.fit();
    window.addEventListener("resize", onResize);
  });
  return close;
}
