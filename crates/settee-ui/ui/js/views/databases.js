// The databases: a paged, filterable list with sizes, counts and the partitioned flag;
// create and delete (confirmed by typing the name).

import { get, put, post, del, enc, qs } from "../api.js";
import { h, mount, dialog, table, pager, size, attempt, reload } from "../ui.js";

const PAGE = 20;

export async function databases(params) {
  const skip = Number(params.get("skip") || 0);
  const filter = params.get("q") || "";
  // A filter is a key range over the sorted names: fast with many databases.
  const range = filter ? { start_key: JSON.stringify(filter), end_key: JSON.stringify(filter + "\ufff0") } : {};
  const names = await get(`/_all_dbs${qs({ ...range, skip, limit: PAGE })}`);
  const infos = names.length ? await post("/_dbs_info", { keys: names }) : [];
  const rows = names.map((name, i) => {
    const info = (infos[i] && infos[i].info) || {};
    return [
      h("a", { href: `#/db/${encodeURIComponent(name)}` }, name),
      size(info.sizes && info.sizes.file),
      String(info.doc_count ?? ""),
      String(info.doc_del_count ?? ""),
      info.props && info.props.partitioned ? "yes" : "",
      h("button", { type: "button", class: "danger small", onclick: () => remove(name) }, "Delete"),
    ];
  });
  const search = h("input", { type: "search", placeholder: "Filter by name prefix", value: filter, "aria-label": "Filter databases" });
  search.addEventListener("change", () => { location.hash = `#/${qs({ q: search.value })}`; });
  mount(
    h("div", { class: "titlebar" }, h("h1", {}, "Databases"),
      h("div", { class: "actions" }, search, h("button", { type: "button", class: "primary", onclick: create }, "Create database"))),
    table(["Name", "Size", "Documents", "Deleted", "Partitioned", ""], rows, { class: "grid", id: "db-list" }),
    pager({ skip, limit: PAGE, shown: names.length, onPage: (s) => { location.hash = `#/${qs({ q: filter, skip: s })}`; } }),
  );
}

async function create() {
  const v = await dialog("Create database", [
    { name: "name", label: "Name", required: true },
    { name: "partitioned", label: "Partitioned", type: "checkbox" },
  ], { confirmText: "Create" });
  if (!v) return;
  const ok = await attempt(() => put(`/${encodeURIComponent(v.name)}${v.partitioned ? "?partitioned=true" : ""}`));
  if (ok) location.hash = `#/db/${encodeURIComponent(v.name)}`;
}

async function remove(name) {
  const v = await dialog(`Delete ${name}?`, [
    { name: "confirm", label: `Type the database's name (${name}) to delete it and every document in it` },
  ], { confirmText: "Delete", check: (x) => x.confirm === name });
  if (!v) return;
  if (await attempt(() => del(`/${enc(name)}`))) {
    reload(`Deleted ${name}.`);
  }
}
