// A database's changes feed, live; its permissions (`_security`), revision limit,
// compaction and view cleanup.

import { api, get, put, post, enc } from "../api.js";
import { h, mount, attempt, banner } from "../ui.js";
import { onLeave } from "../main.js";
import { dbNav } from "./dbnav.js";

export async function changes(db) {
  const base = `/${enc(db)}`;
  const list = h("ol", { class: "changes mono", id: "changes-list", reversed: true });
  const status = h("p", { class: "muted", role: "status" }, "Listening…");
  let since = "now";
  let stopped = false;
  const controller = new AbortController();
  onLeave(() => { stopped = true; controller.abort(); });
  const first = await get(`${base}/_changes?descending=true&limit=25`);
  for (const r of first.results.reverse()) add(r);
  since = first.last_seq;
  function add(r) {
    list.prepend(h("li", {}, `${r.seq.toString().split("-")[0]} `,
      h("a", { href: `#/db/${encodeURIComponent(db)}/doc/${encodeURIComponent(r.id)}` }, r.id),
      ` ${r.changes.map((c) => c.rev).join(", ")}${r.deleted ? " (deleted)" : ""}`));
  }
  mount(dbNav(db, "changes"), status, list);
  // Long polls, one after another, until the page is left.
  (async () => {
    const latest = await attempt(() => get(`${base}/_changes?descending=true&limit=1`));
    if (latest) since = latest.last_seq;
    while (!stopped) {
      try {
        const r = await fetch(`${base}/_changes?feed=longpoll&timeout=25000&since=${encodeURIComponent(since)}`, { credentials: "same-origin", signal: controller.signal });
        const body = await r.json();
        if (!r.ok) throw body;
        for (const c of body.results) add(c);
        since = body.last_seq;
        status.textContent = `Listening… last sequence ${String(since).split("-")[0]}`;
      } catch (e) {
        if (stopped) return;
        status.textContent = `Feed stopped: ${e.error || e.message}: ${e.reason || ""}; retrying`;
        await new Promise((res) => setTimeout(res, 2000));
      }
    }
  })();
}

const split = (s) => s.split(",").map((x) => x.trim()).filter(Boolean);

export async function settings(db) {
  const base = `/${enc(db)}`;
  const sec = await get(`${base}/_security`);
  const info = await get(base);
  const limit = await get(`${base}/_revs_limit`);
  const field = (id, label, value) => h("label", { for: id }, label, h("input", { id, value: (value || []).join(", ") }));
  const side = (name, part) => h("fieldset", {}, h("legend", {}, name === "admins" ? "Admins" : "Members"),
    field(`${name}-names`, "Names (comma-separated)", (part || {}).names),
    field(`${name}-roles`, "Roles (comma-separated)", (part || {}).roles));
  const form = h("form", { class: "card", id: "security-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const v = (id) => split(document.getElementById(id).value);
    const body = {
      ...sec,
      admins: { names: v("admins-names"), roles: v("admins-roles") },
      members: { names: v("members-names"), roles: v("members-roles") },
    };
    if (await attempt(() => put(`${base}/_security`, body))) banner("Permissions saved.", "notice");
  } }, h("h2", {}, "Permissions"), side("admins", sec.admins), side("members", sec.members),
  h("p", { class: "muted" }, "With no member names or roles, anyone may read and write (as in CouchDB)."),
  h("button", { type: "submit", class: "primary" }, "Save permissions"));
  const revs = h("input", { type: "number", min: 1, value: limit, id: "revs-limit" });
  mount(dbNav(db, "settings"), form,
    h("section", { class: "card" }, h("h2", {}, "Revision limit"), revs,
      h("button", { type: "button", onclick: async () => {
        if (await attempt(() => api("PUT", `${base}/_revs_limit`, { body: revs.value, headers: { "Content-Type": "application/json" } }))) banner("Revision limit saved.", "notice");
      } }, "Save")),
    h("section", { class: "card" }, h("h2", {}, "Maintenance"),
      h("p", { class: "muted" }, `Update sequence ${String(info.update_seq).split("-")[0]}, file ${info.sizes.file} bytes, live data ${info.sizes.active} bytes.`),
      h("button", { type: "button", id: "compact", onclick: async () => { if (await attempt(() => post(`${base}/_compact`, {}))) banner("Compaction started; see Active tasks.", "notice"); } }, "Compact database"),
      " ",
      h("button", { type: "button", onclick: async () => { if (await attempt(() => post(`${base}/_view_cleanup`, {}))) banner("View cleanup started.", "notice"); } }, "Clean up views")));
}
