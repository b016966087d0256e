// The tabs of one database's pages.

import { h } from "../ui.js";

export function dbNav(db, current) {
  const tab = (key, label, href) => h("a", { href, class: key === current ? "current" : "", "aria-current": key === current ? "page" : null }, label);
  const base = `#/db/${encodeURIComponent(db)}`;
  return h("div", { class: "dbhead" },
    h("h1", {}, h("a", { href: "#/" }, "Databases"), " / ", db),
    h("nav", { class: "tabs", "aria-label": "Database" },
      tab("docs", "All documents", base),
      tab("find", "Mango query", `${base}/find`),
      tab("views", "Design documents", `${base}/views`),
      tab("changes", "Changes", `${base}/changes`),
      tab("settings", "Permissions & settings", `${base}/settings`)));
}
