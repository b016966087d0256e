// JSON shown with syntax colouring, and a JSON editor: a textarea over its coloured copy,
// checked as you type, with pretty printing.

import { h } from "./ui.js";

const TOKEN = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|([{}\[\],])/g;

/** Coloured spans for JSON text (any text: what is not JSON stays plain). */
export function colour(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(TOKEN)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const [all, str, colon, lit, num] = m;
    let cls = "j-punct";
    if (str) cls = colon ? "j-key" : "j-str";
    else if (lit) cls = "j-lit";
    else if (num) cls = "j-num";
    out.push(h("span", { class: cls }, str ? str : all));
    if (colon) out.push(colon);
    last = m.index + all.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** A read-only coloured view of a value. */
export function view(value) {
  return h("pre", { class: "json" }, colour(JSON.stringify(value, null, 2)));
}

/**
 * An editor for a JSON value. Answers the element and `value()`, which returns the parsed
 * value or throws the parse error.
 */
export function editor(value, { label = "JSON", rows = 18 } = {}) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  const shade = h("pre", { class: "json shade", "aria-hidden": "true" });
  const area = h("textarea", { class: "json-input", spellcheck: "false", rows, "aria-label": label });
  area.value = text;
  const status = h("div", { class: "json-status", role: "status" });
  const paint = () => {
    shade.replaceChildren(...colour(area.value + "\n"));
    shade.scrollTop = area.scrollTop;
    shade.scrollLeft = area.scrollLeft;
    try {
      JSON.parse(area.value);
      status.textContent = "Valid JSON";
      status.className = "json-status ok";
    } catch (e) {
      status.textContent = e.message;
      status.className = "json-status bad";
    }
  };
  area.addEventListener("input", paint);
  area.addEventListener("scroll", () => { shade.scrollTop = area.scrollTop; shade.scrollLeft = area.scrollLeft; });
  area.addEventListener("keydown", (ev) => {
    if (ev.key === "Tab" && !ev.shiftKey && !ev.ctrlKey) {
      ev.preventDefault();
      area.setRangeText("  ", area.selectionStart, area.selectionEnd, "end");
      paint();
    }
  });
  const pretty = h("button", { type: "button", onclick: () => {
    try { area.value = JSON.stringify(JSON.parse(area.value), null, 2); paint(); } catch (_) { /* the status says why */ }
  } }, "Format");
  paint();
  const el = h("div", { class: "json-editor" }, h("div", { class: "json-stack" }, shade, area), h("div", { class: "json-tools" }, pretty, status));
  return { el, area, value: () => JSON.parse(area.value) };
}
