// Small DOM helpers: elements, the error banner, dialogs, tables and pagers.

/** An element: h("a", {href: "#"}, "text", child...). `on*` attributes become listeners. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** Replaces the main area's content. */
export function mount(...children) {
  const app = document.getElementById("app");
  app.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return app;
}

/** Shows an error (CouchDB's `error` and `reason`) or a notice at the top of the page. */
export function banner(message, kind = "error") {
  const el = document.getElementById("banner");
  el.className = kind;
  el.replaceChildren(
    typeof message === "string" ? message : describe(message),
    h("button", { class: "link", type: "button", "aria-label": "Dismiss", onclick: () => { el.hidden = true; } }, "×"),
  );
  el.hidden = false;
}

/** A notice to show once the next page is shown (the page is about to change). */
let flashed = null;
export function flash(message) {
  flashed = message;
}

/** The notice waiting for the page being shown, once. */
export function takeFlash() {
  const m = flashed;
  flashed = null;
  return m;
}

/** Shows the current page again (after a change), then `message`. */
export function reload(message) {
  if (message) flash(message);
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

export function clearBanner() {
  document.getElementById("banner").hidden = true;
}

/** An error as the server said it. */
export function describe(e) {
  if (e && e.error) return `${e.error}: ${e.reason}`;
  return String((e && e.message) || e);
}

/** Runs `fn`, showing any failure in the banner; answers its result or undefined. */
export async function attempt(fn) {
  try {
    return await fn();
  } catch (e) {
    banner(e);
    return undefined;
  }
}

/** A modal dialog; resolves with the form's values, or null when cancelled. */
export function dialog(title, fields, { confirmText = "OK", check } = {}) {
  return new Promise((resolve) => {
    const inputs = fields.map((f) =>
      h("label", {}, f.label,
        f.type === "checkbox"
          ? h("input", { type: "checkbox", name: f.name, checked: f.value })
          : h("input", { type: f.type || "text", name: f.name, value: f.value || "", required: f.required, autocomplete: "off" })));
    const ok = h("button", { type: "submit", class: "primary" }, confirmText);
    const form = h("form", { class: "dialog", method: "dialog" },
      h("h2", {}, title), ...inputs,
      h("div", { class: "buttons" }, h("button", { type: "button", value: "cancel", onclick: () => close(null) }, "Cancel"), ok));
    const wrap = h("div", { class: "modal", role: "dialog", "aria-modal": "true", "aria-label": title }, form);
    const values = () => Object.fromEntries(fields.map((f) => {
      const input = form.elements[f.name];
      return [f.name, f.type === "checkbox" ? input.checked : input.value];
    }));
    const update = () => { ok.disabled = check ? !check(values()) : false; };
    form.addEventListener("input", update);
    form.addEventListener("submit", (ev) => { ev.preventDefault(); if (!ok.disabled) close(values()); });
    wrap.addEventListener("keydown", (ev) => { if (ev.key === "Escape") close(null); });
    function close(v) { wrap.remove(); resolve(v); }
    document.body.append(wrap);
    update();
    const first = form.querySelector("input");
    if (first) first.focus();
  });
}

/** A table from column titles and rows of cells. */
export function table(columns, rows, attrs = {}) {
  return h("table", attrs,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))));
}

/** Previous / next buttons around "from–to". */
export function pager({ skip, limit, shown, total, onPage }) {
  return h("div", { class: "pager" },
    h("button", { type: "button", disabled: skip === 0, onclick: () => onPage(Math.max(0, skip - limit)) }, "‹ Previous"),
    h("span", {}, shown ? `${skip + 1}–${skip + shown}${total !== undefined ? ` of ${total}` : ""}` : "none"),
    h("button", { type: "button", disabled: shown < limit, onclick: () => onPage(skip + limit) }, "Next ›"));
}

/** Bytes as a short size. */
export function size(n) {
  if (n === undefined || n === null) return "";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}
