// All documents (as a table or as JSON, paged, with ranges and include_docs), bulk
// delete, and one document: the JSON editor, save, clone, delete, revisions, conflicts
// (see the differences, pick a winner) and attachments (upload, download, delete).

import { api, get, put, post, del, enc, qs } from "../api.js";
import { h, mount, dialog, pager, attempt, banner, size, flash, reload } from "../ui.js";
import { editor, view } from "../json.js";
import { dbNav } from "./dbnav.js";

const PAGE = 20;

export async function allDocs(db, params) {
  const opts = Object.fromEntries(params.entries());
  const skip = Number(opts.skip || 0);
  const limit = Number(opts.limit || PAGE);
  const which = opts.which || "_all_docs";
  const query = {
    include_docs: opts.include_docs === "true" ? "true" : undefined,
    descending: opts.descending === "true" ? "true" : undefined,
    startkey: opts.startkey ? JSON.stringify(opts.startkey) : undefined,
    endkey: opts.endkey ? JSON.stringify(opts.endkey) : undefined,
    skip, limit,
  };
  const path = which === "_local_docs" ? "_local_docs" : which === "_design_docs" ? "_design_docs" : "_all_docs";
  const result = await get(`/${enc(db)}/${path}${qs(query)}`);
  const go = (changes) => {
    const next = { ...opts, ...changes };
    location.hash = `#/db/${encodeURIComponent(db)}${qs(next)}`;
  };
  const asJson = opts.as === "json";
  const checks = [];
  const rows = result.rows.map((r) => {
    const box = h("input", { type: "checkbox", "aria-label": `Select ${r.id}`, dataset: { id: r.id, rev: r.value && r.value.rev } });
    checks.push(box);
    return h("tr", {},
      h("td", {}, box),
      h("td", {}, h("a", { href: `#/db/${encodeURIComponent(db)}/doc/${encodeURIComponent(r.id)}` }, r.id)),
      h("td", { class: "mono" }, r.value ? r.value.rev : ""),
      h("td", { class: "mono clip" }, r.doc ? JSON.stringify(r.doc) : ""));
  });
  const form = h("form", { class: "options", onsubmit: (ev) => {
    ev.preventDefault();
    const f = ev.target.elements;
    go({ startkey: f.startkey.value, endkey: f.endkey.value, include_docs: String(f.include_docs.checked), descending: String(f.descending.checked), which: f.which.value, limit: f.limit.value, skip: 0 });
  } },
  h("label", {}, "Show ", h("select", { name: "which" },
    ["_all_docs", "_design_docs", "_local_docs"].map((w) => h("option", { value: w, selected: w === which }, w.slice(1).replace("_", " "))))),
  h("label", {}, "Start key ", h("input", { name: "startkey", value: opts.startkey || "" })),
  h("label", {}, "End key ", h("input", { name: "endkey", value: opts.endkey || "" })),
  h("label", {}, h("input", { type: "checkbox", name: "include_docs", checked: opts.include_docs === "true" }), " Include docs"),
  h("label", {}, h("input", { type: "checkbox", name: "descending", checked: opts.descending === "true" }), " Descending"),
  h("label", {}, "Per page ", h("select", { name: "limit" }, [10, 20, 50, 100].map((n) => h("option", { value: n, selected: n === limit }, n)))),
  h("button", { type: "submit" }, "Apply"));
  const deleteSelected = async () => {
    const chosen = checks.filter((c) => c.checked).map((c) => ({ _id: c.dataset.id, _rev: c.dataset.rev, _deleted: true }));
    if (!chosen.length) return banner("Select documents to delete first.", "notice");
    const v = await dialog(`Delete ${chosen.length} documents?`, [], { confirmText: "Delete" });
    if (!v) return;
    const out = await attempt(() => post(`/${enc(db)}/_bulk_docs`, { docs: chosen }));
    if (out) {
      const failed = out.filter((r) => r.error);
      if (failed.length) banner(`${failed.length} not deleted: ${failed[0].error}: ${failed[0].reason}`);
      else reload(`Deleted ${chosen.length} documents.`);
    }
  };
  mount(
    dbNav(db, "docs"),
    h("div", { class: "actions" },
      h("a", { class: "button primary", href: `#/db/${encodeURIComponent(db)}/new` }, "New document"),
      h("button", { type: "button", class: "danger", onclick: deleteSelected }, "Delete selected"),
      h("a", { class: "button", href: `#/db/${encodeURIComponent(db)}${qs({ ...opts, as: asJson ? "" : "json" })}` }, asJson ? "Table" : "JSON"),
      h("button", { type: "button", onclick: () => exportDb(db) }, "Export NDJSON"),
      h("label", { class: "button" }, "Import NDJSON", h("input", { type: "file", class: "hidden", accept: ".ndjson,.json,.txt", onchange: (ev) => importDb(db, ev.target.files[0]) }))),
    form,
    asJson ? view(result) : h("table", { class: "grid", id: "doc-list" },
      h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "id"), h("th", {}, "rev"), h("th", {}, "doc"))),
      h("tbody", {}, rows)),
    pager({ skip, limit, shown: result.rows.length, total: result.total_rows, onPage: (s) => go({ skip: s }) }),
  );
}

/** Every document as one JSON object per line, downloaded. */
async function exportDb(db) {
  const out = await attempt(() => get(`/${enc(db)}/_all_docs?include_docs=true&attachments=true`));
  if (!out) return;
  const text = out.rows.map((r) => JSON.stringify(r.doc)).join("\n") + "\n";
  const a = h("a", { href: URL.createObjectURL(new Blob([text], { type: "application/x-ndjson" })), download: `${db}.ndjson` });
  document.body.append(a);
  a.click();
  a.remove();
}

/** Documents from a file of one JSON object per line (revisions kept, as a restore). */
async function importDb(db, file) {
  if (!file) return;
  const docs = (await file.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  const withRevs = docs.filter((d) => d._rev);
  const fresh = docs.filter((d) => !d._rev);
  if (withRevs.length) await attempt(() => post(`/${enc(db)}/_bulk_docs`, { docs: withRevs, new_edits: false }));
  if (fresh.length) await attempt(() => post(`/${enc(db)}/_bulk_docs`, { docs: fresh }));
  reload(`Imported ${docs.length} documents.`);
}

export async function documentPage(db, id) {
  const base = `/${enc(db)}`;
  const doc = id ? await get(`${base}/${enc(id)}?conflicts=true&revs_info=true`) : { _id: "" };
  const shown = { ...doc };
  delete shown._revs_info;
  delete shown._conflicts;
  const ed = editor(id ? shown : { _id: crypto.randomUUID().replace(/-/g, "") }, { label: "Document JSON" });
  const save = async () => {
    let value;
    try { value = ed.value(); } catch (e) { return banner(`The document is not JSON: ${e.message}`); }
    const target = value._id || id;
    const out = target ? await attempt(() => put(`${base}/${enc(target)}`, value)) : await attempt(() => post(base, value));
    if (out) {
      flash(`Saved ${out.id} at ${out.rev}.`);
      const target = `#/db/${encodeURIComponent(db)}/doc/${encodeURIComponent(out.id)}`;
      if (location.hash === target) reload();
      else location.hash = target;
    }
  };
  const clone = async () => {
    const v = await dialog("Clone document", [{ name: "id", label: "New id", required: true }], { confirmText: "Clone" });
    if (!v) return;
    const copy = { ...ed.value(), _id: v.id };
    delete copy._rev;
    delete copy._attachments;
    const out = await attempt(() => put(`${base}/${enc(v.id)}`, copy));
    if (out) location.hash = `#/db/${encodeURIComponent(db)}/doc/${encodeURIComponent(out.id)}`;
  };
  const remove = async () => {
    const v = await dialog(`Delete ${id}?`, [], { confirmText: "Delete" });
    if (!v) return;
    if (await attempt(() => del(`${base}/${enc(id)}?rev=${encodeURIComponent(doc._rev)}`))) location.hash = `#/db/${encodeURIComponent(db)}`;
  };
  mount(
    dbNav(db, "docs"),
    h("h2", {}, id || "New document"),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "primary", onclick: save }, "Save"),
      id ? h("button", { type: "button", onclick: clone }, "Clone") : null,
      id ? h("button", { type: "button", class: "danger", onclick: remove }, "Delete") : null),
    ed.el,
    id ? attachments(db, id, doc) : null,
    id && doc._conflicts ? await conflicts(db, id, doc) : null,
    id && doc._revs_info ? h("details", {}, h("summary", {}, `Revisions (${doc._revs_info.length})`),
      h("ul", { class: "mono" }, doc._revs_info.map((r) => h("li", {}, `${r.rev} ${r.status}`)))) : null,
  );
}

function attachments(db, id, doc) {
  const base = `/${enc(db)}/${enc(id)}`;
  const atts = Object.entries(doc._attachments || {});
  const upload = async (ev) => {
    const file = ev.target.files[0];
    if (!file) return;
    const out = await attempt(() => api("PUT", `${base}/${encodeURIComponent(file.name)}?rev=${encodeURIComponent(doc._rev)}`, { body: file, headers: { "Content-Type": file.type || "application/octet-stream" } }));
    if (out) reload(`Uploaded ${file.name}.`);
  };
  const remove = async (name) => {
    if (await attempt(() => del(`${base}/${encodeURIComponent(name)}?rev=${encodeURIComponent(doc._rev)}`))) reload(`Deleted ${name}.`);
  };
  return h("section", { class: "attachments" },
    h("h3", {}, "Attachments"),
    atts.length ? h("ul", {}, atts.map(([name, a]) => h("li", {},
      h("a", { href: `${base}/${encodeURIComponent(name)}`, download: name }, name),
      ` ${a.content_type}, ${size(a.length)} `,
      h("button", { type: "button", class: "danger small", onclick: () => remove(name) }, "Delete")))) : h("p", { class: "muted" }, "None."),
    h("label", { class: "button" }, "Upload attachment", h("input", { type: "file", class: "hidden", id: "upload", onchange: upload })));
}

async function conflicts(db, id, doc) {
  const base = `/${enc(db)}/${enc(id)}`;
  const revs = [doc._rev, ...doc._conflicts];
  const bodies = await Promise.all(revs.map((r) => get(`${base}?rev=${encodeURIComponent(r)}`)));
  const keys = [...new Set(bodies.flatMap((b) => Object.keys(b)))].filter((k) => k !== "_rev");
  const winner = async (rev) => {
    const losers = revs.filter((r) => r !== rev).map((r) => ({ _id: id, _rev: r, _deleted: true }));
    const chosen = bodies[revs.indexOf(rev)];
    const docs = [...losers];
    if (rev !== doc._rev) docs.push({ ...chosen, _rev: doc._rev });
    const out = await attempt(() => post(`/${enc(db)}/_bulk_docs`, { docs }));
    if (out) reload(`Kept ${rev}.`);
  };
  return h("section", { class: "conflicts" },
    h("h3", {}, `Conflicts (${doc._conflicts.length})`),
    h("table", { class: "grid diff" },
      h("thead", {}, h("tr", {}, h("th", {}, "field"), revs.map((r) => h("th", { class: "mono" }, r, " ", h("button", { type: "button", class: "small", onclick: () => winner(r) }, "Keep this"))))),
      h("tbody", {}, keys.map((k) => {
        const vals = bodies.map((b) => JSON.stringify(b[k]));
        const differ = new Set(vals).size > 1;
        return h("tr", { class: differ ? "differs" : "" }, h("td", {}, k), vals.map((v) => h("td", { class: "mono" }, v ?? "—")));
      }))));
}
