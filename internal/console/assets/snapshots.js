// The Snapshots page: every named and automatic checkpoint of the
// account, as `cairn snapshot list` shows them; filter, sort, restore
// into a name, delete.
import { get, enc } from "./api.js";
import { el, bytes, ago, when, table, status, busy, field, ask } from "./ui.js";
import { act } from "./sandboxes.js";

function offsite(ck) {
  const d = ck.offsite_detail;
  if (ck.offsite === "uploaded" || !d) return ck.offsite || "—";
  return ck.offsite;
}

export async function snapshotsPage(root) {
  const filter = el("input", { id: "snap-filter", type: "search", placeholder: "name, sandbox, comment…", autocomplete: "off" });
  const sort = el("select", { id: "snap-sort" },
    el("option", { value: "new" }, "newest first"), el("option", { value: "old" }, "oldest first"),
    el("option", { value: "size" }, "largest first"), el("option", { value: "sandbox" }, "by sandbox"));
  const body = el("div");
  root.replaceChildren(el("h1", {}, "Snapshots"),
    el("p", { class: "muted" }, "Every named and automatic checkpoint of the account. Named ones are never deleted automatically and outlive their sandbox."),
    el("form", { class: "inline card", role: "search", onsubmit: (e) => e.preventDefault() }, field("Filter", filter), field("Sort", sort)), body);
  let all = [];

  function show() {
    const f = filter.value.trim().toLowerCase();
    let rows = all.filter((c) => !f || [c.name, c.sandbox, c.id, c.global_id, c.comment, c.label, c.trigger].some((v) => v && v.toLowerCase().includes(f)));
    const by = { new: (a, b) => b.created_at.localeCompare(a.created_at), old: (a, b) => a.created_at.localeCompare(b.created_at),
      size: (a, b) => b.size_exclusive - a.size_exclusive, sandbox: (a, b) => a.sandbox.localeCompare(b.sandbox) || b.created_at.localeCompare(a.created_at) };
    rows = rows.slice().sort(by[sort.value]);
    body.replaceChildren(table("Snapshots", [
      ["Id", (c) => c.global_id],
      ["Name", (c) => c.name || "—"],
      ["Sandbox", (c) => c.sandbox_deleted ? `${c.sandbox}/${c.id} (deleted)` : el("span", {}, el("a", { href: `#/sandbox/${enc(c.sandbox)}` }, c.sandbox), `/${c.id}`)],
      ["Comment", (c) => c.comment || c.label || ""],
      ["Trigger", (c) => c.trigger],
      ["State", (c) => c.state || "ready"],
      ["Consistency", (c) => c.consistency],
      ["Age", (c) => el("time", { datetime: c.created_at, title: when(c.created_at) }, ago(c.created_at))],
      ["Size", (c) => bytes(c.size_exclusive)],
      ["Off-site", offsite],
      ["Actions", (c) => actions(c)],
    ], rows, all.length ? "Nothing matches the filter." : "No snapshots or checkpoints yet."));
  }

  async function refresh() {
    all = await get("/v1/snapshots");
    show();
  }

  function actions(c) {
    const label = c.name || `${c.sandbox}/${c.id}`;
    const restore = el("button", { type: "button", class: "secondary small", "aria-label": `Restore ${label} into a new sandbox` }, "Restore");
    restore.addEventListener("click", () => busy(restore, async () => {
      const a = await ask({ title: `Restore ${label} into a new sandbox`, text: "A new, independent sandbox is made from it; its source is not touched.",
        fields: [{ name: "name", label: "New sandbox's name", required: true, pattern: "[a-z0-9][a-z0-9\\-]{0,62}" }], ok: "Restore" });
      if (!a) return;
      await act(root, `Restoring ${label} as ${a.name}`, "POST", `/v1/snapshots/${enc(c.global_id)}/restore`, { name: a.name }, refresh);
      status(`${a.name} was made from ${label}.`, "ok");
    }).catch(() => {}));
    const del = el("button", { type: "button", class: "danger small", "aria-label": `Delete ${label}` }, "Delete");
    del.addEventListener("click", () => busy(del, async () => {
      if (!await ask({ title: `Delete ${label}?`, text: "Its space is freed at once, here and off-site.", ok: "Delete", danger: true })) return;
      await act(root, `Deleting ${label}`, "DELETE", `/v1/snapshots/${enc(c.global_id)}`, undefined, refresh);
    }).catch(() => {}));
    return el("div", { class: "actions needs-member" }, restore, del);
  }

  filter.addEventListener("input", show);
  sort.addEventListener("change", show);
  await refresh();
}
