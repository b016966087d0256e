// Server pages: active tasks (live, filterable), replication jobs (`_replicator` documents
// and their state from `/_scheduler/docs`), the configuration editor, membership with a
// "verify install" check, and a live dashboard from `_stats`.

import { api, get, put, post, del, enc } from "../api.js";
import { h, mount, attempt, banner, table, size, reload } from "../ui.js";
import { onLeave } from "../main.js";

/** Runs `fn` now and every `ms` until the page is left. */
function every(ms, fn) {
  fn();
  const timer = setInterval(fn, ms);
  onLeave(() => clearInterval(timer));
}

export async function activeTasks(params) {
  const filter = h("select", { "aria-label": "Task type", id: "task-type" },
    ["all", "database_compaction", "view_compaction", "indexer", "replication", "search_indexer"].map((t) => h("option", { value: t }, t.replace("_", " "))));
  const body = h("div", { id: "tasks" });
  const load = async () => {
    const tasks = await attempt(() => get("/_active_tasks"));
    if (!tasks) return;
    const shown = tasks.filter((t) => filter.value === "all" || t.type === filter.value);
    body.replaceChildren(shown.length ? table(["type", "database", "design document", "progress", "started", "updated"], shown.map((t) => [
      t.type, t.database || t.source || "", t.design_document || "", t.progress !== undefined ? `${t.progress}%` : (t.changes_done !== undefined ? `${t.changes_done} changes` : ""),
      t.started_on ? new Date(t.started_on * 1000).toLocaleTimeString() : "", t.updated_on ? new Date(t.updated_on * 1000).toLocaleTimeString() : "",
    ]), { class: "grid" }) : h("p", { class: "muted" }, "No tasks running."));
  };
  filter.addEventListener("change", load);
  mount(h("div", { class: "titlebar" }, h("h1", {}, "Active tasks"), filter), body);
  // `?every=ms` polls faster (at most ten times a second), for short tasks.
  every(Math.max(100, Number(params && params.get("every")) || 1000), load);
}

export async function replication() {
  const jobs = h("div", { id: "replications" });
  const load = async () => {
    const docs = await attempt(() => get("/_scheduler/docs/_replicator"));
    if (!docs) return;
    jobs.replaceChildren(docs.docs.length ? table(["document", "source", "target", "state", "updated", ""], docs.docs.map((d) => [
      d.doc_id, d.source || "", d.target || "", h("span", { class: `state ${d.state}` }, d.state || ""), d.last_updated || "",
      h("button", { type: "button", class: "danger small", onclick: async () => {
        const doc = await attempt(() => get(`/_replicator/${enc(d.doc_id)}`));
        if (doc && await attempt(() => del(`/_replicator/${enc(d.doc_id)}?rev=${doc._rev}`))) load();
      } }, "Delete"),
    ]), { class: "grid" }) : h("p", { class: "muted" }, "No replication jobs."));
  };
  const field = (name, label, value = "") => h("label", {}, label, h("input", { name, value, required: name !== "id" }));
  const form = h("form", { class: "card", id: "replication-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const f = ev.target.elements;
    const doc = { source: f.source.value, target: f.target.value, create_target: f.create_target.checked, continuous: f.continuous.checked };
    const id = f.id.value;
    const out = id ? await attempt(() => put(`/_replicator/${enc(id)}`, doc)) : await attempt(() => post("/_replicator", doc));
    if (out) { banner(`Replication ${out.id} created.`, "notice"); load(); }
  } }, h("h2", {}, "New replication"),
  field("source", "Source (a database name or URL)"), field("target", "Target (a database name or URL)"), field("id", "Document id (optional)"),
  h("label", {}, h("input", { type: "checkbox", name: "create_target" }), " Create target"),
  h("label", {}, h("input", { type: "checkbox", name: "continuous" }), " Continuous"),
  h("button", { type: "submit", class: "primary" }, "Start replication"));
  mount(h("h1", {}, "Replication"), form, h("h2", {}, "Jobs"), jobs);
  every(2000, load);
}

export async function config() {
  const all = await get("/_node/_local/_config");
  const sections = Object.keys(all).sort();
  const edit = async (section, key, value) => {
    const out = await attempt(() => put(`/_node/_local/_config/${encodeURIComponent(section)}/${encodeURIComponent(key)}`, value));
    if (out !== undefined) banner(`[${section}] ${key} = ${value}`, "notice");
  };
  const remove = async (section, key) => {
    if (await attempt(() => del(`/_node/_local/_config/${encodeURIComponent(section)}/${encodeURIComponent(key)}`)) !== undefined) reload(`Deleted [${section}] ${key}.`);
  };
  const add = h("form", { class: "options", onsubmit: async (ev) => {
    ev.preventDefault();
    const f = ev.target.elements;
    await edit(f.section.value, f.key.value, f.value.value);
    reload();
  } }, h("input", { name: "section", placeholder: "section", required: true, "aria-label": "Section" }),
  h("input", { name: "key", placeholder: "key", required: true, "aria-label": "Key" }),
  h("input", { name: "value", placeholder: "value", "aria-label": "Value" }),
  h("button", { type: "submit" }, "Set"));
  const cors = all.cors || {};
  mount(h("h1", {}, "Configuration"),
    h("section", { class: "card" }, h("h2", {}, "CORS"),
      h("p", {}, `Enabled: ${(all.chttpd || {}).enable_cors || (all.httpd || {}).enable_cors || "false"}; origins: ${cors.origins || "none"}`),
      h("button", { type: "button", onclick: () => edit("chttpd", "enable_cors", "true") }, "Enable CORS"), " ",
      h("button", { type: "button", onclick: () => edit("cors", "origins", "*") }, "Allow all origins")),
    h("h2", {}, "Add or change a setting"), add,
    sections.map((s) => h("details", {}, h("summary", {}, `[${s}]`),
      table(["key", "value", ""], Object.entries(all[s]).sort().map(([k, v]) => {
        const input = h("input", { value: v, "aria-label": `${s} ${k}` });
        return [k, input, h("span", {},
          h("button", { type: "button", class: "small", onclick: () => edit(s, k, input.value) }, "Save"), " ",
          h("button", { type: "button", class: "small danger", onclick: () => remove(s, k) }, "Delete"))];
      }), { class: "grid" }))));
}

export async function setup() {
  const membership = await get("/_membership");
  const welcome = await get("/");
  const out = h("ol", { id: "verify-results" });
  const verify = async () => {
    out.replaceChildren();
    const name = `verify_install_${Date.now()}`;
    const step = async (label, fn) => {
      try { await fn(); out.append(h("li", { class: "ok" }, `✓ ${label}`)); return true; } catch (e) { out.append(h("li", { class: "bad" }, `✗ ${label}: ${e.error || e.message}: ${e.reason || ""}`)); return false; }
    };
    await step("Create a database", () => put(`/${name}`));
    await step("Write a document", () => put(`/${name}/doc`, { hello: "settee" }));
    await step("Read it back", async () => { const d = await get(`/${name}/doc`); if (d.hello !== "settee") throw new Error("wrong content"); });
    await step("Build and query a view", async () => {
      await put(`/${name}/_design/v`, { views: { all: { map: "function (doc) { emit(doc._id, null); }" } } });
      const r = await get(`/${name}/_design/v/_view/all`);
      if (r.total_rows !== 1) throw new Error(`expected 1 row, got ${r.total_rows}`);
    });
    await step("Replicate the database", async () => {
      const r = await post("/_replicate", { source: name, target: `${name}_copy`, create_target: true });
      if (!r.ok) throw new Error("replication failed");
    });
    await step("Delete the databases", async () => { await del(`/${name}`); await del(`/${name}_copy`); });
  };
  mount(h("h1", {}, "Setup"),
    h("section", { class: "card" }, h("h2", {}, "Server"), h("p", {}, `${welcome.vendor ? welcome.vendor.name : "server"} ${welcome.version}, uuid ${welcome.uuid}`),
      h("p", {}, `Features: ${(welcome.features || []).join(", ")}`)),
    h("section", { class: "card" }, h("h2", {}, "Membership"),
      h("p", {}, `All nodes: ${membership.all_nodes.join(", ")}`), h("p", {}, `Cluster nodes: ${membership.cluster_nodes.join(", ")}`)),
    h("section", { class: "card" }, h("h2", {}, "Verify install"),
      h("button", { type: "button", class: "primary", id: "verify", onclick: verify }, "Verify"), out));
}

/** A small line chart of the last values. */
function spark(values, label) {
  const w = 240, hgt = 48;
  const max = Math.max(1, ...values);
  const pts = values.map((v, i) => `${(i / Math.max(1, values.length - 1)) * w},${hgt - (v / max) * hgt}`).join(" ");
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${hgt}`);
  svg.setAttribute("class", "spark");
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", pts);
  svg.append(line);
  return svg;
}

export async function dashboard() {
  const history = { requests: [], reads: [], writes: [] };
  let last = null;
  const body = h("div", { class: "dashboard", id: "dashboard" });
  const value = (stats, path) => path.split(".").reduce((o, k) => (o ? o[k] : undefined), stats);
  const load = async () => {
    const stats = await attempt(() => get("/_node/_local/_stats"));
    const system = await attempt(() => get("/_node/_local/_system"));
    if (!stats || !system) return;
    const now = {
      t: Date.now(),
      requests: value(stats, "couchdb.httpd.requests.value") || 0,
      reads: value(stats, "couchdb.database_reads.value") || 0,
      writes: value(stats, "couchdb.database_writes.value") || 0,
    };
    if (last) {
      const secs = (now.t - last.t) / 1000;
      for (const k of ["requests", "reads", "writes"]) {
        history[k].push(Math.max(0, (now[k] - last[k]) / secs));
        if (history[k].length > 60) history[k].shift();
      }
    }
    last = now;
    const latency = value(stats, "couchdb.request_time.value") || {};
    const pct = latency.percentile || [];
    const tile = (title, text, chart) => h("div", { class: "tile" }, h("h3", {}, title), h("p", { class: "big" }, text), chart || "");
    const rate = (k) => (history[k].length ? history[k][history[k].length - 1].toFixed(1) : "…");
    body.replaceChildren(
      tile("Requests/s", rate("requests"), spark(history.requests, "requests per second")),
      tile("Reads/s", rate("reads"), spark(history.reads, "reads per second")),
      tile("Writes/s", rate("writes"), spark(history.writes, "writes per second")),
      tile("Latency (ms)", pct.length ? pct.map(([p, v]) => `p${p} ${Number(v).toFixed(1)}`).join(" · ") : "no requests yet"),
      tile("Open databases", String(value(stats, "couchdb.open_databases.value") ?? "")),
      tile("Open files", String(value(stats, "couchdb.open_os_files.value") ?? "")),
      system.http_connections !== undefined ? tile("Connections", String(system.http_connections)) : null,
      tile("Memory", size(system.memory && system.memory.processes_used)),
      tile("Uptime", `${system.uptime}s`));
  };
  mount(h("h1", {}, "Dashboard"), body);
  every(1000, load);
}
