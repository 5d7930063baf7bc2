// The Account page: disk used against the limit (a bar), per-sandbox use,
// off-site state, tokens (admin tokens manage them) and the audit log.
import { get, call, enc } from "./api.js";
import { el, bytes, ago, when, table, status, showError, busy, field, ask } from "./ui.js";
import { session } from "./app.js";

function diskText(acct, limit) {
  return `${bytes(acct.disk_used)} used of ${acct.disk_limit ? bytes(acct.disk_limit) + " (the account's limit)" : limit ? bytes(limit) + " (the pool; no limit of its own)" : "no limit"}` +
    ` · ${acct.sandboxes} sandboxes · ${acct.checkpoints} checkpoints`;
}

function setMeter(bar, acct, limit) {
  const pct = limit ? Math.min(100, (acct.disk_used / limit) * 100) : 0;
  bar.className = `bar${pct >= 90 ? " full" : ""}`;
  bar.setAttribute("aria-valuenow", String(acct.disk_used));
  bar.setAttribute("aria-valuetext", `${bytes(acct.disk_used)} of ${limit ? bytes(limit) : "no limit"}`);
  bar.firstChild.style.width = `${pct.toFixed(1)}%`;
}

export async function accountPage(root) {
  const [acct, sandboxes, audit] = await Promise.all([get("/v1/account"), get("/v1/sandboxes"), get("/v1/audit?since=720h&limit=200")]);
  const infos = await Promise.all(sandboxes.map((sb) => get(`/v1/sandboxes/${enc(sb.name)}`).catch(() => sb)));
  const limit = acct.disk_limit || (acct.pool && acct.pool.size) || 0;
  const pct = limit ? Math.min(100, (acct.disk_used / limit) * 100) : 0;
  const bar = el("div", { class: `bar${pct >= 90 ? " full" : ""}`, role: "meter", id: "disk-meter", "aria-label": "Disk used",
    "aria-valuemin": "0", "aria-valuemax": String(limit), "aria-valuenow": String(acct.disk_used),
    "aria-valuetext": `${bytes(acct.disk_used)} of ${limit ? bytes(limit) : "no limit"}` },
  el("span", { style: `width:${pct.toFixed(1)}%` }));
  const off = acct.offsite || {};
  const tokens = el("div");
  root.replaceChildren(
    el("h1", {}, "Account ", el("span", {}, acct.name)),
    el("section", { class: "card", "aria-labelledby": "disk-title" },
      el("h2", { id: "disk-title", style: "margin-top:0" }, "Disk"),
      el("p", { id: "disk-text" }, diskText(acct, limit)),
      bar,
      acct.pool && acct.pool.note && el("p", { class: "note" }, acct.pool.note),
      el("h2", {}, "By sandbox"),
      table("Disk by sandbox", [
        ["Sandbox", (sb) => el("a", { href: `#/sandbox/${enc(sb.name)}` }, sb.name)],
        ["Disk used", (sb) => bytes(sb.disk && sb.disk.used)],
        ["Checkpoints", (sb) => sb.disk ? `${bytes(sb.disk.checkpoints)} (${sb.disk.checkpoint_count})` : "—"],
        ["Size", (sb) => sb.disk_bytes ? bytes(sb.disk_bytes) : "pool"],
      ], infos, "No sandboxes.")),
    el("section", { class: "card", "aria-labelledby": "off-title" },
      el("h2", { id: "off-title", style: "margin-top:0" }, "Off-site"),
      el("p", {}, (acct.offsite_locations || []).length ? `Locations: ${acct.offsite_locations.join(", ")}` : "No off-site locations configured."),
      el("p", { class: "muted" }, Object.keys(off).length ? Object.entries(off).map(([k, v]) => `${k}: ${v}`).join(" · ") : "No checkpoints off-site yet.")),
    el("section", { class: "card", "aria-labelledby": "tok-title" }, el("h2", { id: "tok-title", style: "margin-top:0" }, "Tokens"), tokens),
    el("section", { "aria-labelledby": "audit-title" }, el("h2", { id: "audit-title" }, "Audit log (30 days)"),
      table("Audit log", [
        ["When", (e) => el("time", { datetime: e.at, title: when(e.at) }, ago(e.at))],
        ["Action", (e) => e.action],
        ["Target", (e) => e.target],
        ["Token", (e) => e.token_name || (e.token_id ? e.token_id : "unix socket")],
        ["From", (e) => e.remote],
        ["Outcome", (e) => e.outcome],
      ], (audit || []).slice().reverse(), "Nothing recorded yet.")));

  async function showTokens() {
    if (session.role !== "admin") {
      tokens.replaceChildren(el("p", { class: "muted" }, `You are logged in with the ${session.role} token “${session.tokenName}”. Tokens are made and revoked by an admin token (cairn token create).`));
      return;
    }
    const list = await get("/v1/tokens");
    const name = el("input", { id: "tok-name", required: true, placeholder: "laptop", size: "14" });
    const acctIn = el("input", { id: "tok-account", placeholder: session.account, size: "12" });
    const role = el("select", { id: "tok-role" }, ["member", "read", "admin"].map((r) => el("option", { value: r }, r)));
    const expires = el("input", { id: "tok-expires", placeholder: "30d", size: "6" });
    const mk = el("button", { type: "submit", id: "tok-create" }, "Create token");
    const secret = el("div", { "aria-live": "polite" });
    const form = el("form", { class: "inline", "aria-label": "Create a token" }, field("Name", name), field("Account", acctIn), field("Role", role), field("Expires after", expires), mk);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      busy(mk, async () => {
        const t = await call("POST", "/v1/tokens", { name: name.value.trim(), account: acctIn.value.trim() || undefined, role: role.value, expires: expires.value.trim() || undefined });
        await showTokens();
        tokens.querySelector("[aria-live]").replaceChildren(el("p", {}, "The new token, shown once: copy it now."), el("p", { class: "secret", id: "tok-secret" }, t.token));
      }).catch(showError);
    });
    tokens.replaceChildren(form, secret, table("Tokens", [
      ["Name", (t) => t.name], ["Account", (t) => t.account], ["Role", (t) => t.role], ["State", (t) => t.state],
      ["Created", (t) => ago(t.created_at)], ["Expires", (t) => t.expires_at ? when(t.expires_at) : "never"], ["Last used", (t) => ago(t.last_used_at)],
      ["Actions", (t) => {
        if (t.state !== "active") return "";
        const b = el("button", { type: "button", class: "danger small", "aria-label": `Revoke token ${t.name}` }, "Revoke");
        b.addEventListener("click", () => busy(b, async () => {
          if (!await ask({ title: `Revoke ${t.name}?`, text: "It stops working at once, and so do console sessions opened with it.", ok: "Revoke", danger: true })) return;
          await call("DELETE", `/v1/tokens/${enc(t.id)}`);
          status(`Token ${t.name} revoked.`, "ok");
          await showTokens();
        }).catch(showError));
        return b;
      }],
    ], list, "No tokens."));
  }
  await showTokens();
  // The disk figure follows without a reload.
  const timer = setInterval(async () => {
    try {
      const a = await get("/v1/account");
      const lim = a.disk_limit || (a.pool && a.pool.size) || 0;
      document.getElementById("disk-text").textContent = diskText(a, lim);
      setMeter(bar, a, lim);
    } catch (_) { /* the next tick tries again */ }
  }, 5000);
  return () => clearInterval(timer);
}
