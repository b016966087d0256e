// Mango: a query editor with results, `_explain` and execution statistics, and the
// database's indexes (create, list, delete). Design documents: list, edit map and reduce
// functions, and run a view with its query options.

import { get, put, post, del, enc, qs } from "../api.js";
import { h, mount, attempt, banner, table, dialog, reload } from "../ui.js";
import { editor, view } from "../json.js";
import { dbNav } from "./dbnav.js";

export async function mango(db) {
  const base = `/${enc(db)}`;
  const q = editor({ selector: { _id: { $gt: null } }, limit: 25, execution_stats: true }, { label: "Mango query", rows: 10 });
  const out = h("div", { class: "results", id: "find-results" });
  const run = async (kind) => {
    let body;
    try { body = q.value(); } catch (e) { return banner(`The query is not JSON: ${e.message}`); }
    const answer = await attempt(() => post(`${base}/${kind}`, body));
    if (!answer) return;
    if (kind === "_explain") {
      out.replaceChildren(h("h3", {}, "Explain"), view(answer));
      return;
    }
    const docs = answer.docs || [];
    out.replaceChildren(
      h("h3", {}, `${docs.length} documents`),
      answer.warning ? h("p", { class: "warning" }, answer.warning) : null,
      answer.execution_stats ? h("p", { class: "muted", id: "exec-stats" }, Object.entries(answer.execution_stats).map(([k, v]) => `${k}: ${v}`).join(" · ")) : null,
      view(docs),
      answer.bookmark ? h("p", { class: "muted mono" }, `bookmark ${answer.bookmark}`) : null);
  };
  const indexes = h("div", { id: "indexes" });
  const loadIndexes = async () => {
    const list = await attempt(() => get(`${base}/_index`));
    if (!list) return;
    indexes.replaceChildren(table(["design document", "name", "type", "fields", ""], list.indexes.map((i) => [
      i.ddoc || "", i.name, i.type, JSON.stringify(i.def.fields),
      i.ddoc ? h("button", { type: "button", class: "danger small", onclick: async () => {
        if (await attempt(() => del(`${base}/_index/${enc(i.ddoc)}/json/${encodeURIComponent(i.name)}`))) loadIndexes();
      } }, "Delete") : "",
    ]), { class: "grid" }));
  };
  const idx = editor({ index: { fields: ["name"] }, name: "by-name", type: "json" }, { label: "Index definition", rows: 5 });
  mount(
    dbNav(db, "find"),
    h("div", { class: "two" },
      h("section", {}, h("h2", {}, "Query"), q.el,
        h("div", { class: "actions" },
          h("button", { type: "button", class: "primary", id: "run-find", onclick: () => run("_find") }, "Run query"),
          h("button", { type: "button", onclick: () => run("_explain") }, "Explain"))),
      h("section", {}, h("h2", {}, "Indexes"), indexes, idx.el,
        h("button", { type: "button", onclick: async () => {
          let body;
          try { body = idx.value(); } catch (e) { return banner(e.message); }
          if (await attempt(() => post(`${base}/_index`, body))) loadIndexes();
        } }, "Create index"))),
    out);
  await loadIndexes();
}

export async function designDocs(db) {
  const base = `/${enc(db)}`;
  const list = await get(`${base}/_design_docs?include_docs=true`);
  const items = list.rows.map((r) => {
    const name = r.id.slice("_design/".length);
    const views = Object.keys((r.doc && r.doc.views) || {});
    return h("li", {},
      h("a", { href: `#/db/${encodeURIComponent(db)}/doc/${encodeURIComponent(r.id)}` }, r.id),
      views.length ? h("ul", {}, views.map((v) => h("li", {}, h("a", { href: `#/db/${encodeURIComponent(db)}/view/${encodeURIComponent(name)}/${encodeURIComponent(v)}` }, v)))) : null);
  });
  const newView = async () => {
    const v = await dialog("New view", [
      { name: "ddoc", label: "Design document (without _design/)", required: true },
      { name: "view", label: "View name", required: true },
      { name: "map", label: "Map function", value: "function (doc) {\n  emit(doc._id, 1);\n}" },
      { name: "reduce", label: "Reduce (empty, _count, _sum, _stats or a function)", value: "" },
    ], { confirmText: "Save" });
    if (!v) return;
    const id = `_design/${v.ddoc}`;
    let ddoc = { _id: id, views: {} };
    try { ddoc = await get(`${base}/${enc(id)}`); } catch (e) { if (e.status !== 404) return banner(e); }
    ddoc.views = ddoc.views || {};
    ddoc.views[v.view] = v.reduce ? { map: v.map, reduce: v.reduce } : { map: v.map };
    if (await attempt(() => put(`${base}/${enc(id)}`, ddoc))) location.hash = `#/db/${encodeURIComponent(db)}/view/${encodeURIComponent(v.ddoc)}/${encodeURIComponent(v.view)}`;
  };
  mount(dbNav(db, "views"),
    h("div", { class: "actions" }, h("button", { type: "button", class: "primary", onclick: newView }, "New view"),
      h("button", { type: "button", onclick: async () => { if (await attempt(() => post(`${base}/_view_cleanup`, {}))) banner("View cleanup started.", "notice"); } }, "Clean up views")),
    items.length ? h("ul", { class: "tree" }, items) : h("p", { class: "muted" }, "No design documents."));
}

export async function runView(db, ddocName, viewName, params) {
  const base = `/${enc(db)}`;
  const id = `_design/${ddocName}`;
  const ddoc = await get(`${base}/${enc(id)}`);
  const def = (ddoc.views || {})[viewName] || { map: "function (doc) {\n  emit(doc._id, 1);\n}" };
  const map = h("textarea", { class: "code", rows: 6, "aria-label": "Map function" });
  map.value = def.map;
  const reduce = h("input", { class: "code", value: def.reduce || "", "aria-label": "Reduce function" });
  const opts = Object.fromEntries(params.entries());
  const field = (name, label, attrs = {}) => h("label", {}, label, " ", h("input", { name, value: opts[name] || "", ...attrs }));
  const flag = (name, label) => h("label", {}, h("input", { type: "checkbox", name, checked: opts[name] === "true" }), " ", label);
  const out = h("div", { class: "results", id: "view-results" });
  const form = h("form", { class: "options", onsubmit: async (ev) => {
    ev.preventDefault();
    const f = ev.target.elements;
    const query = {};
    for (const k of ["key", "startkey", "endkey", "keys", "group_level", "limit", "skip"]) if (f[k].value) query[k] = f[k].value;
    for (const k of ["group", "descending", "include_docs"]) if (f[k].checked) query[k] = "true";
    if (f.reduce.value) query.reduce = f.reduce.value;
    const answer = await attempt(() => get(`${base}/${enc(id)}/_view/${encodeURIComponent(viewName)}${qs(query)}`));
    if (answer) {
      out.replaceChildren(h("h3", {}, `${answer.rows.length} rows${answer.total_rows !== undefined ? ` of ${answer.total_rows}` : ""}`),
        table(["key", "value", "id"], answer.rows.map((r) => [JSON.stringify(r.key), JSON.stringify(r.value), r.id || ""]), { class: "grid" }));
    }
  } },
  field("key", "Key (JSON)"), field("startkey", "Start key"), field("endkey", "End key"), field("keys", "Keys (JSON array)"),
  field("limit", "Limit", { type: "number", min: 0 }), field("skip", "Skip", { type: "number", min: 0 }), field("group_level", "Group level", { type: "number", min: 0 }),
  flag("group", "Group"), flag("descending", "Descending"), flag("include_docs", "Include docs"),
  h("label", {}, "Reduce ", h("select", { name: "reduce" }, h("option", { value: "" }, "default"), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"))),
  h("button", { type: "submit", class: "primary", id: "run-view" }, "Run"));
  const save = async () => {
    ddoc.views = ddoc.views || {};
    ddoc.views[viewName] = reduce.value ? { map: map.value, reduce: reduce.value } : { map: map.value };
    if (await attempt(() => put(`${base}/${enc(id)}`, ddoc))) {
      reload(`Saved ${id}.`);
    }
  };
  mount(dbNav(db, "views"), h("h2", {}, `${id} / ${viewName}`),
    h("label", {}, "Map function"), map, h("label", {}, "Reduce"), reduce,
    h("div", { class: "actions" }, h("button", { type: "button", onclick: save }, "Save view")),
    h("h3", {}, "Query"), form, out);
}
