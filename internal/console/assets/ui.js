// Small helpers for the pages. Everything shown is set as text, never as
// HTML: names, comments and output come from sandboxes, which are not
// trusted.

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else if (v === true) e.setAttribute(k, "");
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function bytes(n) {
  if (n === undefined || n === null) return "—";
  if (n < 1024) return `${n} B`;
  const u = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${u[i]}`;
}

export function ago(t) {
  if (!t) return "—";
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 60) return `${Math.floor(s)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export function when(t) {
  if (!t) return "—";
  return new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

// table builds a table: cols are [heading, row => cell]; on a phone each
// row shows as a card whose cells are labelled with their heading.
export function table(caption, cols, rows, empty) {
  if (!rows.length) return el("p", { class: "muted" }, empty);
  const head = el("tr", {}, cols.map(([h]) => el("th", { scope: "col" }, h)));
  const body = rows.map((r) => el("tr", {}, cols.map(([h, f]) => el("td", { "data-label": h }, f(r)))));
  return el("div", { class: "table-wrap" },
    el("table", { class: "cards" }, el("caption", { class: "skip" }, caption), el("thead", {}, head), el("tbody", {}, body)));
}

// status shows a message in the page's live region (read out by screen
// readers); kind is "", "ok" or "error".
let statusTimer;
export function status(msg, kind = "") {
  const box = document.getElementById("status");
  box.replaceChildren();
  clearTimeout(statusTimer);
  if (!msg) return;
  box.append(el("div", { class: kind }, msg));
  box.scrollIntoView({ block: "nearest" });
  if (kind === "ok") statusTimer = setTimeout(() => box.replaceChildren(), 6000);
}

export function showError(err) {
  status(err && err.code ? `error ${err.code}: ${err.message}` : String(err), "error");
}

// progress returns a progress element and an event handler for
// api.operation that moves it.
export function progress(label) {
  const bar = el("progress", { "aria-label": label });
  const text = el("span", { class: "muted" }, label);
  const box = el("div", { class: "progress card", role: "group", "aria-label": label }, text, bar);
  const onEvent = (ev) => {
    if (typeof ev.data === "string") text.textContent = ev.data;
    const p = ev.progress;
    if (p && p.total > 0) { bar.max = p.total; bar.value = p.done || 0; }
  };
  return { box, onEvent };
}

// busy disables a button while fn runs.
export async function busy(button, fn) {
  button.disabled = true;
  try { return await fn(); } finally { button.disabled = false; }
}

export function field(label, input) {
  return el("label", {}, label, input);
}

// ask opens a modal dialog (keyboard: Tab between its controls, Enter
// confirms, Escape cancels) with a text and fields [{name, label, value,
// type, placeholder, required, pattern, min}]; it resolves with the
// fields' values, or null when cancelled.
export function ask({ title, text, fields = [], ok = "OK", danger = false }) {
  return new Promise((resolve) => {
    const inputs = fields.map((f, i) => el("input", {
      id: `dialog-field-${i}`, name: f.name, type: f.type || "text", value: f.value, placeholder: f.placeholder,
      required: f.required, pattern: f.pattern, min: f.min, autocomplete: "off",
    }));
    const okBtn = el("button", { type: "submit", id: "dialog-ok", class: danger ? "danger" : "" }, ok);
    const cancel = el("button", { type: "button", id: "dialog-cancel", class: "secondary" }, "Cancel");
    const form = el("form", { method: "dialog" },
      el("h2", { id: "dialog-title" }, title),
      text && el("p", { id: "dialog-text" }, text),
      fields.map((f, i) => el("p", {}, field(f.label, inputs[i]))),
      el("div", { class: "actions dialog-actions" }, cancel, okBtn));
    const dlg = el("dialog", { "aria-labelledby": "dialog-title", "aria-describedby": text ? "dialog-text" : undefined }, form);
    let answered = null;
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      answered = Object.fromEntries(fields.map((f, i) => [f.name, inputs[i].value.trim()]));
      dlg.close();
    });
    cancel.addEventListener("click", () => dlg.close());
    dlg.addEventListener("close", () => { dlg.remove(); resolve(answered); });
    document.body.append(dlg);
    dlg.showModal();
    (inputs[0] || okBtn).focus();
  });
}
