// A sandbox's page: what it is, its checkpoints (create, restore in place
// with undo, restore as new, delete) and a terminal.
import { get, getText, follow, enc } from "./api.js";
import { el, bytes, ago, when, table, status, showError, busy, field, ask } from "./ui.js";
import { act } from "./sandboxes.js";
import { openTerminal } from "./terminal.js";

function offsite(ck) {
  const d = ck.offsite_detail;
  if (d && d.locations && d.locations.length) return d.locations.map((l) => `${l.name}: ${l.state}`).join(", ");
  return ck.offsite || "—";
}

export async function sandboxPage(root, name) {
  const path = `/v1/sandboxes/${enc(name)}`;
  const info = el("div");
  const cks = el("div");
  const undo = el("div", { "aria-live": "polite" });
  const includeAuto = el("input", { type: "checkbox", id: "include-auto" });
  const comment = el("input", { id: "ck-comment", name: "comment", placeholder: "before the upgrade", size: "28" });
  const memory = el("input", { type: "checkbox", id: "ck-memory" });
  const ckBtn = el("button", { type: "submit", id: "ck-create" }, "Create checkpoint");
  const ckForm = el("form", { class: "inline needs-member", id: "ck-form", "aria-label": "Create a checkpoint" },
    field("Comment", comment), el("label", { class: "check", for: "ck-memory" }, memory, "with memory (running processes)"), ckBtn);
  const termBox = el("section", { class: "card", "aria-labelledby": "term-title" });
  const ports = el("div");
  const services = el("div");
  const logBox = el("div", { "aria-live": "polite" });
  const diffFrom = el("select", { id: "diff-from" });
  const diffTo = el("select", { id: "diff-to" });
  const diffBtn = el("button", { type: "submit", id: "diff-show" }, "Compare");
  const diffOut = el("div", { id: "diff-out", "aria-live": "polite" });
  const diffForm = el("form", { class: "inline", id: "diff-form", "aria-label": "Compare two states" },
    field("From", diffFrom), field("To", diffTo), diffBtn);

  root.replaceChildren(
    el("p", {}, el("a", { href: "#/sandboxes" }, "← Sandboxes")),
    el("h1", {}, "Sandbox ", el("span", { id: "sb-name" }, name)),
    info, undo,
    el("section", { class: "card", "aria-labelledby": "ck-title" },
      el("h2", { id: "ck-title", style: "margin-top:0" }, "Checkpoints"), ckForm,
      el("p", {}, el("label", { class: "check", for: "include-auto" }, includeAuto, "show automatic checkpoints")), cks),
    el("section", { class: "card", "aria-labelledby": "diff-title" },
      el("h2", { id: "diff-title", style: "margin-top:0" }, "What changed"), diffForm, diffOut),
    termBox,
    el("section", { class: "card", "aria-labelledby": "svc-title" },
      el("h2", { id: "svc-title", style: "margin-top:0" }, "Services"), services, logBox),
    el("section", { class: "card", "aria-labelledby": "ports-title" },
      el("h2", { id: "ports-title", style: "margin-top:0" }, "Published ports"), ports));

  async function refresh() {
    const sb = await get(path);
    const d = sb.disk || {};
    info.replaceChildren(el("section", { class: "card", "aria-label": "About" }, el("dl", { class: "kv" },
      el("dt", {}, "State"), el("dd", {}, el("span", { class: `state ${sb.state}`, id: "sb-state" }, sb.state)),
      el("dt", {}, "Image"), el("dd", {}, sb.image),
      el("dt", {}, "CPUs / memory"), el("dd", {}, `${sb.cpus || "any"} / ${sb.memory_bytes ? bytes(sb.memory_bytes) : "any"}`),
      el("dt", {}, "Disk"), el("dd", {}, `${bytes(d.used)} used of ${sb.disk_bytes ? bytes(sb.disk_bytes) : "the pool"}; checkpoints ${bytes(d.checkpoints)} (${d.checkpoint_count || 0})`),
      el("dt", {}, "Checkpoints"), el("dd", {}, `last ${ago(sb.last_checkpoint_at)}, off-site ${sb.offsite_off ? "off" : ago(sb.last_offsite_at)}, automatic every ${Math.round(sb.auto_checkpoint_seconds / 60)} min when the disk changed`),
      el("dt", {}, "Current checkpoint"), el("dd", {}, sb.current_checkpoint || "—"),
      sb.source_checkpoint && [el("dt", {}, "From"), el("dd", {}, sb.source_checkpoint)],
      el("dt", {}, "Network"), el("dd", {}, sb.network ? sb.network.mode : "—"))));
    const list = await get(`${path}/checkpoints${includeAuto.checked ? "?include_auto=true" : ""}`);
    list.reverse(); // newest first
    fillDiffChoices(list);
    cks.replaceChildren(table("Checkpoints", [
      ["Id", (c) => c.id + (c.current ? " (current)" : "")],
      ["Comment", (c) => c.comment || c.label || c.name || ""],
      ["Trigger", (c) => c.trigger],
      ["Consistency", (c) => c.consistency],
      ["Taken", (c) => el("time", { datetime: c.created_at, title: when(c.created_at) }, ago(c.created_at))],
      ["Size", (c) => bytes(c.size_exclusive)],
      ["Memory", (c) => c.has_memory ? "yes" : "no"],
      ["Off-site", offsite],
      ["Actions", (c) => actions(c)],
    ], list, "No checkpoints yet."));
    refreshSides(sb).catch(() => {});
    return sb;
  }

  // Ports and services (services only answer while it runs).
  async function refreshSides(sb) {
    const ps = await get(`${path}/ports`);
    ports.replaceChildren(table("Published ports", [
      ["Port", (p) => String(p.port)],
      ["Access", (p) => p.public ? "public" : "private (the account's port token)"],
      ["URL", (p) => el("a", { href: p.url, target: "_blank", rel: "noopener noreferrer" }, p.url)],
      ["By path", (p) => el("a", { href: p.path_url, target: "_blank", rel: "noopener noreferrer" }, p.path_url)],
    ], ps, "No ports published (cairn port publish NAME PORT)."));
    if (sb.state !== "running") { services.replaceChildren(el("p", { class: "muted" }, "Services are shown while the sandbox runs.")); return; }
    const svcs = await get(`${path}/services`);
    services.replaceChildren(table("Services", [
      ["Name", (s) => s.name], ["State", (s) => el("span", { class: `state ${s.state}` }, s.state)],
      ["Restarts", (s) => String(s.restarts)], ["Since", (s) => ago(s.since)], ["Command", (s) => (s.cmd || []).join(" ")],
      ["Log", (s) => {
        const b = el("button", { type: "button", class: "secondary small", "aria-label": `Show the log of ${s.name}` }, "Log");
        b.addEventListener("click", () => busy(b, async () => {
          const text = await getText(`${path}/services/${enc(s.name)}/logs?tail_bytes=65536`);
          logBox.replaceChildren(el("h3", {}, `Log of ${s.name}`), el("pre", { class: "log" }, text || "(empty)"));
        }).catch(showError));
        return b;
      }],
    ], svcs, "No services (definitions go in /etc/cairn/services/*.json)."));
  }

  function fillDiffChoices(list) {
    const keep = [diffFrom.value, diffTo.value];
    diffFrom.replaceChildren(...list.map((c) => el("option", { value: c.id }, c.id + (c.comment ? ` (${c.comment})` : ""))));
    diffTo.replaceChildren(el("option", { value: "" }, "now (the current disk)"), ...list.map((c) => el("option", { value: c.id }, c.id)));
    if (keep[0] && list.some((c) => c.id === keep[0])) diffFrom.value = keep[0];
    if (keep[1] && list.some((c) => c.id === keep[1])) diffTo.value = keep[1];
    diffBtn.disabled = !list.length;
  }

  diffForm.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(diffBtn, async () => {
      const q = new URLSearchParams({ from: diffFrom.value });
      if (diffTo.value) q.set("to", diffTo.value);
      const entries = await get(`${path}/diff?${q}`);
      const title = `${diffFrom.value} → ${diffTo.value || "now"}`;
      diffOut.replaceChildren(entries.length
        ? el("ul", { class: "diff", "aria-label": `Changes ${title}` }, entries.map((d) => diffEntry(d, q)))
        : el("p", { class: "muted" }, `Nothing changed (${title}).`));
    }).catch(showError);
  });

  // diffEntry is one line of the list of changes; a file whose content
  // changed has a button that shows its text diff under it.
  function diffEntry(d, q) {
    const li = el("li", { class: d.kind },
      `${d.kind === "added" ? "+" : d.kind === "removed" ? "-" : "~"} ${d.path}`, d.what && d.what.length ? `  (${d.what.join(", ")}${d.mode ? " " + d.mode : ""})` : "");
    if (d.kind !== "changed" || !(d.what || []).includes("content") || d.path_bytes) return li;
    const btn = el("button", { type: "button", class: "secondary small", "aria-label": `Show the text diff of ${d.path}` }, "Show diff");
    btn.addEventListener("click", () => busy(btn, async () => {
      const fq = new URLSearchParams(q);
      fq.set("path", d.path);
      const fd = await get(`${path}/diff/file?${fq}`);
      const text = fd.binary ? "Not a text file in one of the two states: only its content differs."
        : fd.too_large ? "Too large to show as text (over 1 MiB a side, or changed throughout)."
        : fd.unified || "The same in both states.";
      const pre = el("pre", { class: "diff", "aria-label": `Text diff of ${d.path}` }, text);
      li.querySelector("pre")?.remove();
      li.append(pre);
    }).catch(showError));
    li.append(" ", btn);
    return li;
  }

  function actions(c) {
    const b = (text, label, fn, cls = "secondary small") => {
      const btn = el("button", { type: "button", class: cls, "aria-label": `${label} ${c.id}` }, text);
      btn.addEventListener("click", () => busy(btn, fn).catch(() => {}));
      return btn;
    };
    return el("div", { class: "actions needs-member" },
      b("Restore", "Restore in place to", () => restoreInPlace(c.id)),
      b("Restore as new", "Restore as a new sandbox from", async () => {
        const a = await ask({ title: `Restore ${name}/${c.id} as a new sandbox`, text: `${name} is not touched.`,
          fields: [{ name: "as", label: "New sandbox's name", required: true, pattern: "[a-z0-9][a-z0-9\\-]{0,62}" }], ok: "Restore" });
        if (!a) return;
        await act(root, `Restoring ${c.id} as ${a.as}`, "POST", `${path}/checkpoints/${enc(c.id)}/restore`, { as: a.as });
        status(`${a.as} was made from ${name}/${c.id}.`, "ok");
      }),
      !c.current && b("Delete", "Delete checkpoint", async () => {
        if (!await ask({ title: `Delete checkpoint ${c.id} of ${name}?`, text: "Its space is freed at once, here and off-site.", ok: "Delete", danger: true })) return;
        await act(root, `Deleting ${c.id}`, "DELETE", `${path}/checkpoints/${enc(c.id)}`, undefined, refresh);
      }, "danger small"));
  }

  async function restoreInPlace(id, isUndo) {
    if (!isUndo && !await ask({ title: `Restore ${name} to ${id} in place?`, text: "A safety checkpoint of its current state is taken first, so you can undo this. Running sessions (the terminal too) end; the sandbox comes back with its services.", ok: "Restore" })) return;
    const started = Date.now();
    await act(root, `Restoring ${name} to ${id}`, "POST", `${path}/checkpoints/${enc(id)}/restore`, {}, refresh);
    if (isUndo) { undo.replaceChildren(); return; }
    const all = await get(`${path}/checkpoints?include_auto=true`);
    const safety = all.filter((c) => c.trigger === "restore" && new Date(c.created_at).getTime() >= started - 60000).pop();
    if (!safety) { undo.replaceChildren(); return; }
    const u = el("button", { type: "button", id: "undo" }, `Undo: restore ${safety.id}`);
    u.addEventListener("click", () => busy(u, () => restoreInPlace(safety.id, true)).catch(() => {}));
    undo.replaceChildren(el("div", { class: "card" }, el("p", { style: "margin-top:0" },
      `${name} was restored to ${id}. Its state just before was saved as safety checkpoint ${safety.id}.`), u));
  }

  ckForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const req = {};
    if (comment.value.trim()) req.comment = comment.value.trim();
    if (memory.checked) req.memory = true;
    await busy(ckBtn, async () => {
      const ck = await act(root, `Checkpointing ${name}`, "POST", `${path}/checkpoint`, req, refresh);
      comment.value = "";
      if (ck && ck.id) status(`Checkpoint created: ${ck.id}`, "ok");
    }).catch(() => {});
  });
  includeAuto.addEventListener("change", () => refresh().catch(() => {}));

  const sb = await refresh();
  const closeTerm = openTerminal(termBox, name, sb.state === "running");
  const timer = setInterval(() => {
    if (!document.querySelector("progress") && !cks.contains(document.activeElement)) refresh().catch(() => {});
  }, 5000);
  // Its state changes, checkpoints and crashes as they happen: each
  // refreshes the page (at most every half second).
  const ctl = new AbortController();
  let pending = null;
  follow(`${path}/events?follow=true`, ctl.signal, () => {
    if (pending) return;
    pending = setTimeout(() => { pending = null; if (!document.querySelector("progress")) refresh().catch(() => {}); }, 500);
  }).catch(() => {});
  return () => { clearInterval(timer); ctl.abort(); clearTimeout(pending); closeTerm(); };
}
