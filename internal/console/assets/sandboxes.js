// The Sandboxes page: every sandbox of the account, create, start, stop,
// restart, delete and fork.
import { get, call, operation, enc } from "./api.js";
import { el, bytes, ago, table, status, showError, progress, busy, field, ask } from "./ui.js";

// act runs a long change with a progress bar in place, then refresh.
export async function act(root, label, method, path, body, refresh) {
  const p = progress(label);
  root.prepend(p.box);
  p.box.scrollIntoView({ block: "nearest" });
  try {
    const res = await operation(method, path, body, p.onEvent);
    status(`${label}: done.`, "ok");
    return res;
  } catch (err) {
    showError(err);
    throw err;
  } finally {
    p.box.remove();
    if (refresh) await refresh().catch(showError);
  }
}

function network(sb) {
  const n = sb.network;
  if (!n) return "—";
  return n.mode + ((n.allow && n.allow.length) ? ` (+${n.allow.length} allowed)` : "");
}

function portsCell(ports) {
  if (!ports || !ports.length) return "—";
  return el("span", {}, ports.map((p, i) => [i ? ", " : "", el("a", { href: p.url, target: "_blank", rel: "noopener noreferrer" }, String(p.port)), p.public ? " (public)" : ""]));
}

export async function sandboxesPage(root) {
  const body = el("div");
  const name = el("input", { id: "new-name", name: "name", required: true, pattern: "[a-z0-9][a-z0-9\\-]{0,62}", autocomplete: "off", placeholder: "web" });
  const image = el("select", { id: "new-image", name: "image" });
  const cpus = el("input", { id: "new-cpus", type: "number", min: "0", step: "0.5", placeholder: "any" });
  const memory = el("input", { id: "new-memory", placeholder: "512M", size: "7" });
  const disk = el("input", { id: "new-disk", placeholder: "2G", size: "7" });
  const interval = el("input", { id: "new-interval", placeholder: "5m", size: "6" });
  const net = el("select", { id: "new-network" }, el("option", { value: "" }, "default"), el("option", { value: "none" }, "none"), el("option", { value: "egress" }, "egress"));
  const createBtn = el("button", { type: "submit", id: "create" }, "Create");
  const form = el("form", { class: "inline", id: "create-form", "aria-label": "Create a sandbox" },
    field("Name", name), field("Image", image), field("CPUs", cpus), field("Memory", memory), field("Disk size", disk),
    field("Checkpoint every", interval), field("Network", net), createBtn);
  root.replaceChildren(el("h1", {}, "Sandboxes"),
    el("p", { class: "read-only note" }, "This session's token is read-only: it can look, not change."),
    el("section", { class: "card needs-member", "aria-labelledby": "create-title" },
    el("h2", { id: "create-title", style: "margin-top:0" }, "Create a sandbox"), form), body);

  get("/v1/images").then((imgs) => {
    for (const i of imgs || []) image.append(el("option", { value: i.name }, i.name));
    if (!imgs || !imgs.length) image.append(el("option", { value: "busybox" }, "busybox"));
  }).catch(() => image.append(el("option", { value: "busybox" }, "busybox")));

  async function refresh() {
    const list = await get("/v1/sandboxes");
    // The list has neither disk use nor ports: each sandbox's info does.
    const ports = {}, disk = {};
    await Promise.all(list.flatMap((sb) => [
      get(`/v1/sandboxes/${enc(sb.name)}/ports`).then((p) => { ports[sb.name] = p; }).catch(() => {}),
      get(`/v1/sandboxes/${enc(sb.name)}`).then((i) => { disk[sb.name] = i.disk; }).catch(() => {}),
    ]));
    const cols = [
      ["Name", (sb) => el("a", { href: `#/sandbox/${enc(sb.name)}` }, sb.name)],
      ["State", (sb) => el("span", { class: `state ${sb.state}` }, sb.state)],
      ["Image", (sb) => sb.image],
      ["CPUs", (sb) => sb.cpus || "any"],
      ["Memory", (sb) => sb.memory_bytes ? bytes(sb.memory_bytes) : "any"],
      ["Disk used", (sb) => `${disk[sb.name] ? bytes(disk[sb.name].used) : "—"} of ${sb.disk_bytes ? bytes(sb.disk_bytes) : "the pool"}`],
      ["Last checkpoint", (sb) => ago(sb.last_checkpoint_at)],
      ["Off-site", (sb) => sb.offsite_off ? "off" : ago(sb.last_offsite_at)],
      ["Network", network],
      ["Ports", (sb) => portsCell(ports[sb.name])],
      ["Actions", (sb) => actions(sb)],
    ];
    body.replaceChildren(table("Sandboxes", cols, list, "No sandboxes yet: create one above."));
  }

  function actions(sb) {
    const b = (text, label, fn, cls = "secondary small") => {
      const btn = el("button", { type: "button", class: cls, "aria-label": `${label} ${sb.name}` }, text);
      btn.addEventListener("click", () => busy(btn, fn).catch(() => {}));
      return btn;
    };
    const path = `/v1/sandboxes/${enc(sb.name)}`;
    const running = sb.state === "running";
    return el("div", { class: "actions needs-member" },
      running ? b("Stop", "Stop", () => act(root, `Stopping ${sb.name}`, "POST", `${path}/stop`, {}, refresh))
        : b("Start", "Start", () => act(root, `Starting ${sb.name}`, "POST", `${path}/start`, undefined, refresh)),
      running && b("Restart", "Restart", () => act(root, `Restarting ${sb.name}`, "POST", `${path}/restart`, undefined, refresh)),
      b("Fork", "Fork", async () => {
        const a = await ask({ title: `Fork ${sb.name}`, text: "Each copy is an independent sandbox made from a new checkpoint of this one, started.",
          fields: [{ name: "count", label: "Copies", type: "number", value: "1", min: "1", required: true },
            { name: "prefix", label: "Names", placeholder: `${sb.name}-fork (then -1, -2…)` }], ok: "Fork" });
        if (!a) return;
        const count = parseInt(a.count, 10);
        if (!(count > 0)) { status("A fork needs a count of at least 1.", "error"); return; }
        const req = { count };
        if (a.prefix) req.name_prefix = a.prefix;
        await act(root, `Forking ${sb.name} ×${count}`, "POST", `${path}/fork`, req, refresh);
      }),
      b("Delete", "Delete", async () => {
        if (!await ask({ title: `Delete ${sb.name}?`, text: "A final checkpoint is taken first: its automatic checkpoints are kept 14 days (restore them from Snapshots), its named snapshots until you delete them.", ok: "Delete", danger: true })) return;
        await act(root, `Deleting ${sb.name}`, "DELETE", path, undefined, refresh);
      }, "danger small"));
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const req = { name: name.value.trim(), image: image.value || undefined };
    if (cpus.value) req.cpus = parseFloat(cpus.value);
    if (memory.value) req.memory = memory.value.trim();
    if (disk.value) req.disk = disk.value.trim();
    if (interval.value) req.auto_checkpoint = interval.value.trim();
    if (net.value) req.network = { mode: net.value };
    await busy(createBtn, () => act(root, `Creating ${req.name}`, "POST", "/v1/sandboxes", req, refresh)).then(() => { name.value = ""; }).catch(() => {});
  });

  await refresh();
  const timer = setInterval(() => {
    if (!document.querySelector("progress") && !body.contains(document.activeElement)) refresh().catch(() => {});
  }, 5000);
  return () => clearInterval(timer);
}
