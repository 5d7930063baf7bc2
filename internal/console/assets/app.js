// The console's entry point: the session (login, logout, who), the
// router (#/sandboxes, #/sandbox/NAME, #/snapshots, #/account) and the
// page frame.
import { call, setCSRF, onSessionEnded, APIError } from "./api.js";
import { el, status, showError } from "./ui.js";
import { sandboxesPage } from "./sandboxes.js";
import { sandboxPage } from "./sandbox.js";
import { snapshotsPage } from "./snapshots.js";
import { accountPage } from "./account.js";

export const session = { account: "", role: "", tokenName: "" };

const main = () => document.getElementById("main");
let cleanup = () => {};

function setSession(s) {
  session.account = s.account;
  session.role = s.role;
  session.tokenName = s.token_name || "";
  setCSRF(s.csrf);
  document.body.dataset.role = s.role; // a read token's pages hide what it cannot do
  const who = document.getElementById("who-name");
  who.replaceChildren(el("span", {}, "Account "), el("strong", { id: "who-account" }, s.account), " ",
    el("span", { class: "role", id: "who-role", title: "the token's role" }, s.role));
  document.getElementById("who").hidden = false;
  document.getElementById("nav").hidden = false;
}

function loggedOut(message) {
  cleanup(); cleanup = () => {};
  setCSRF("");
  document.getElementById("who").hidden = true;
  document.getElementById("nav").hidden = true;
  const input = el("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true,
    placeholder: "cairn_…", "aria-describedby": "token-help" });
  const form = el("form", { class: "card login", id: "login-form", "aria-labelledby": "login-title" },
    el("h1", { id: "login-title" }, "Log in to cairn"),
    el("p", { id: "token-help", class: "muted" }, "Paste an API token (", el("code", {}, "cairn token create"), " makes one). It is kept by the server for this session only."),
    el("label", { for: "token" }, "API token", input),
    el("p", {}, el("button", { type: "submit", id: "login" }, "Log in")));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const s = await call("POST", "/console/session", { token: input.value });
      input.value = "";
      setSession(s);
      status("");
      if (!location.hash || location.hash === "#/login") location.hash = "#/sandboxes";
      else route();
    } catch (err) { showError(err); }
  });
  main().replaceChildren(form);
  if (message) status(message, "error");
  input.focus();
}

onSessionEnded(() => { if (!document.getElementById("nav").hidden) loggedOut("Your session has ended: log in again."); });

async function route() {
  cleanup(); cleanup = () => {};
  const [, page, ...rest] = (location.hash || "#/sandboxes").slice(1).split("/");
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === page || (page === "sandbox" && a.dataset.page === "sandboxes")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const root = main();
  delete root.dataset.ready; // set when the page has loaded (tests wait for it)
  if (!document.querySelector("#status .error")) status("");
  root.replaceChildren(el("p", { class: "muted" }, "Loading…"));
  const pages = { sandboxes: sandboxesPage, sandbox: sandboxPage, snapshots: snapshotsPage, account: accountPage };
  const fn = pages[page] || sandboxesPage;
  try {
    const done = await fn(root, decodeURIComponent(rest.join("/")));
    if (typeof done === "function") cleanup = done;
    root.dataset.ready = location.hash;
    root.focus({ preventScroll: true });
  } catch (err) {
    if (err instanceof APIError && err.code === "A01") return;
    root.replaceChildren(el("p", { class: "muted" }, "This page could not be shown."));
    showError(err);
  }
}

async function start() {
  document.body.dataset.started = "1"; // the modules loaded (tests wait for it)
  document.getElementById("logout").addEventListener("click", async () => {
    try { await call("DELETE", "/console/session"); } catch (err) { if (err.code !== "A01") { showError(err); return; } }
    loggedOut("");
    status("Logged out.", "ok");
  });
  window.addEventListener("hashchange", () => { if (!document.getElementById("nav").hidden) route(); });
  try {
    setSession(await call("GET", "/console/session"));
    route();
  } catch (err) {
    loggedOut("");
  }
}

start();
