// The admin UI: a router over `location.hash`, the session shown in the header, and the
// screens in views/. Everything goes through the public HTTP API.

import { get, api } from "./api.js";
import { h, mount, banner, clearBanner, attempt, takeFlash } from "./ui.js";
import { databases } from "./views/databases.js";
import { allDocs, documentPage } from "./views/docs.js";
import { mango, designDocs, runView } from "./views/query.js";
import { changes, settings } from "./views/dbmisc.js";
import { activeTasks, replication, config, setup, dashboard } from "./views/server.js";

export const session = { name: null, roles: [] };

/** Stops whatever the last screen left running (live feeds, timers). */
let cleanup = [];
export function onLeave(fn) { cleanup.push(fn); }

const routes = [
  [/^\/?$/, databases],
  [/^\/login$/, login],
  [/^\/_active_tasks$/, activeTasks],
  [/^\/_replication$/, replication],
  [/^\/_config$/, config],
  [/^\/_setup$/, setup],
  [/^\/_dashboard$/, dashboard],
  [/^\/db\/([^/]+)$/, allDocs],
  [/^\/db\/([^/]+)\/new$/, (db) => documentPage(db, null)],
  [/^\/db\/([^/]+)\/doc\/(.+)$/, documentPage],
  [/^\/db\/([^/]+)\/find$/, mango],
  [/^\/db\/([^/]+)\/views$/, designDocs],
  [/^\/db\/([^/]+)\/view\/([^/]+)\/([^/]+)$/, runView],
  [/^\/db\/([^/]+)\/changes$/, changes],
  [/^\/db\/([^/]+)\/settings$/, settings],
];

async function route() {
  for (const fn of cleanup.splice(0)) fn();
  clearBanner();
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  for (const [re, view] of routes) {
    const m = path.match(re);
    if (m) {
      const args = m.slice(1).map(decodeURIComponent);
      try {
        await view(...args, new URLSearchParams(query || ""));
      } catch (e) {
        if (e.status === 401 && !session.name) {
          location.hash = "#/login";
          return;
        }
        mount(h("h1", {}, "Something went wrong"), h("p", { class: "error-text" }, `${e.error || "error"}: ${e.reason || e.message}`));
      }
      const notice = takeFlash();
      if (notice) banner(notice, "notice");
      document.getElementById("app").focus({ preventScroll: true });
      return;
    }
  }
  mount(h("h1", {}, "Not found"), h("p", {}, "No such page. ", h("a", { href: "#/" }, "Databases")));
}

/** Reads who is logged in and shows it. */
export async function refreshSession() {
  const s = await attempt(() => get("/_session"));
  const ctx = (s && s.userCtx) || { name: null, roles: [] };
  session.name = ctx.name;
  session.roles = ctx.roles || [];
  const who = document.getElementById("who");
  if (session.name) {
    who.replaceChildren(
      h("span", { class: "user", title: `roles: ${session.roles.join(", ") || "none"}` }, session.name,
        session.roles.length ? h("small", {}, ` (${session.roles.join(", ")})`) : ""),
      h("button", { type: "button", class: "link", onclick: logout }, "Log out"));
  } else {
    who.replaceChildren(h("a", { href: "#/login" }, "Log in"));
  }
}

async function logout() {
  await attempt(() => api("DELETE", "/_session"));
  await refreshSession();
  location.hash = "#/login";
}

function login() {
  const name = h("input", { name: "name", autocomplete: "username", required: true, id: "login-name" });
  const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true, id: "login-password" });
  const form = h("form", { class: "card narrow", onsubmit: async (ev) => {
    ev.preventDefault();
    const ok = await attempt(() => api("POST", "/_session", { body: { name: name.value, password: password.value } }));
    if (ok) {
      await refreshSession();
      location.hash = "#/";
    }
  } },
  h("h1", {}, "Log in"),
  h("p", { class: "muted" }, session.name ? `You are logged in as ${session.name}.` : "This server needs you to log in."),
  h("label", { for: "login-name" }, "Name"), name,
  h("label", { for: "login-password" }, "Password"), password,
  h("button", { type: "submit", class: "primary" }, "Log in"));
  mount(form);
  name.focus();
}

window.addEventListener("hashchange", route);
window.addEventListener("unhandledrejection", (ev) => banner(ev.reason));
refreshSession().then(() => {
  // Nobody logged in: the login page first (most servers refuse anonymous requests).
  if (!session.name && location.hash !== "#/login") {
    location.hash = "#/login";
  } else {
    route();
  }
});
