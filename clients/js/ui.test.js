// The admin UI at /_utils in a real headless Chromium (Debian's, driven over the DevTools
// protocol by puppeteer-core; nothing downloads a browser). Run by
// crates/settee/tests/clients.rs with SETTEE_URL, SETTEE_USER, SETTEE_PASSWORD; screenshots
// go to SETTEE_UI_SHOTS when it is set.
const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const puppeteer = require("puppeteer-core");

const url = process.env.SETTEE_URL || "http://127.0.0.1:5984";
const user = process.env.SETTEE_USER || "admin";
const password = process.env.SETTEE_PASSWORD || "admin";
const shots = process.env.SETTEE_UI_SHOTS;
// `firefox` runs the same steps in Firefox (WebDriver BiDi); Chromium otherwise.
const firefox = process.env.SETTEE_BROWSER === "firefox";
const auth = "Basic " + Buffer.from(`${user}:${password}`).toString("base64");

let browser;
let page;
const consoleErrors = [];

async function rest(method, p, body) {
  const r = await fetch(url + p, { method, headers: { Authorization: auth, "Content-Type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

async function shot(name) {
  if (shots && !firefox) await page.screenshot({ path: path.join(shots, `${name}.png`) });
}

/** Waits for an element whose text contains `text`. */
async function waitText(selector, text, timeout = 10000) {
  try {
    await page.waitForFunction((s, t) => [...document.querySelectorAll(s)].some((e) => e.textContent.includes(t)), { timeout }, selector, text);
  } catch (e) {
    const seen = await page.evaluate((s) => [...document.querySelectorAll(s)].map((x) => x.textContent).join(" | "), selector);
    const banner = await page.$eval("#banner", (b) => b.textContent);
    throw new Error(`no ${selector} with "${text}" (${seen.slice(0, 300)}; banner: ${banner}; hash ${await page.evaluate(() => location.hash)})`);
  }
}

/** Waits for the page's hash to satisfy `ok`; on failure says what the page shows. */
async function waitHash(ok, timeout = 10000) {
  const start = Date.now();
  while (Date.now() - start < timeout) {
    if (ok(await page.evaluate(() => location.hash))) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  const banner = await page.$eval("#banner", (b) => b.textContent);
  throw new Error(`the page stayed at ${await page.evaluate(() => location.hash)} (banner: ${banner})`);
}

async function go(hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
}

async function clickText(selector, text) {
  await page.waitForFunction((s, t) => [...document.querySelectorAll(s)].some((e) => e.textContent.trim() === t), {}, selector, text);
  await page.evaluate((s, t) => [...document.querySelectorAll(s)].find((e) => e.textContent.trim() === t).click(), selector, text);
}

async function fillDialog(values) {
  await page.waitForSelector(".modal form");
  for (const [name, value] of Object.entries(values)) {
    const sel = `.modal [name="${name}"]`;
    if (typeof value === "boolean") {
      const checked = await page.$eval(sel, (e) => e.checked);
      if (checked !== value) await page.click(sel);
    } else {
      await page.$eval(sel, (e) => { e.value = ""; });
      await page.type(sel, value);
    }
  }
  await page.click(".modal button[type=submit]");
}

/** Replaces the JSON editor's text. */
async function setEditor(text, index = 0) {
  await page.evaluate((t, i) => {
    const area = document.querySelectorAll("textarea.json-input")[i];
    area.value = t;
    area.dispatchEvent(new Event("input"));
  }, text, index);
}

before(async () => {
  browser = firefox
    ? await puppeteer.launch({ browser: "firefox", executablePath: "/usr/bin/firefox-esr", headless: true })
    : await puppeteer.launch({
      executablePath: "/usr/bin/chromium",
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  page.on("request", (r) => { if (!r.url().startsWith(url) && !r.url().startsWith("data:")) consoleErrors.push(`request left the origin: ${r.url()}`); });
});

after(async () => {
  if (browser) await browser.close();
});

test("the admin UI does what Fauxton does, in a real browser", { timeout: 180000 }, async () => {
  for (const db of ["uitest", "uitest_copy"]) await rest("DELETE", `/${db}`);
  const job = await rest("GET", "/_replicator/copy-job");
  if (job.status === 200) await rest("DELETE", `/_replicator/copy-job?rev=${job.body._rev}`);
  for (const u of ["ann", "bob"]) {
    const old = await rest("GET", `/_users/org.couchdb.user:${u}`);
    if (old.status === 200) await rest("DELETE", `/_users/org.couchdb.user:${u}?rev=${old.body._rev}`);
  }
  // Logging in.
  const first = await page.goto(`${url}/_utils`, { waitUntil: "networkidle0" });
  assert.equal(first.status(), 200);
  await page.waitForSelector("#login-name");
  await shot("login");
  await page.type("#login-name", user);
  await page.type("#login-password", password);
  await page.click("form button[type=submit]");
  await waitText("#who", user);
  await page.waitForSelector("#db-list");

  // Creating a database.
  await clickText("button", "Create database");
  await fillDialog({ name: "uitest", partitioned: false });
  await waitHash((h) => h === "#/db/uitest");
  await page.waitForSelector("#doc-list");

  // A document: create, edit, delete.
  await clickText("a", "New document");
  await page.waitForSelector("textarea.json-input");
  await setEditor(JSON.stringify({ _id: "doc1", name: "first", n: 1 }, null, 2));
  await clickText("button", "Save");
  await waitHash((h) => h.endsWith("/doc/doc1"));
  await waitText("#banner", "Saved doc1");
  let doc = (await rest("GET", "/uitest/doc1")).body;
  assert.equal(doc.name, "first");
  const edited = { ...doc, name: "edited" };
  await setEditor(JSON.stringify(edited, null, 2));
  await clickText("button", "Save");
  await waitText("#banner", "at 2-");
  doc = (await rest("GET", "/uitest/doc1")).body;
  assert.equal(doc.name, "edited");
  await shot("document");

  // An attachment.
  const input = await page.waitForSelector("#upload");
  const file = path.join(require("node:os").tmpdir(), `settee-ui-${process.pid}.txt`);
  require("node:fs").writeFileSync(file, "hello from the browser");
  await input.uploadFile(file);
  await waitText("#banner", "Uploaded");
  await waitText(".attachments", path.basename(file));
  const att = await fetch(`${url}/uitest/doc1/${path.basename(file)}`, { headers: { Authorization: auth } });
  assert.equal(await att.text(), "hello from the browser");

  // A conflict, resolved by keeping one side.
  await rest("POST", "/uitest/_bulk_docs", { new_edits: false, docs: [{ _id: "twin", _rev: "1-aaaa", side: "a" }, { _id: "twin", _rev: "1-bbbb", side: "b" }] });
  await go("#/db/uitest/doc/twin");
  await waitText(".conflicts", "Conflicts (1)");
  await shot("conflicts");
  await page.evaluate(() => [...document.querySelectorAll(".conflicts th")].find((th) => th.textContent.includes("1-aaaa")).querySelector("button").click());
  await waitText("#banner", "Kept 1-aaaa");
  const twin = (await rest("GET", "/uitest/twin?conflicts=true")).body;
  assert.equal(twin._conflicts, undefined);
  assert.equal(twin.side, "a");

  // Deleting a document.
  await rest("PUT", "/uitest/gone", { x: 1 });
  await go("#/db/uitest/doc/gone");
  await waitText("h2", "gone");
  await clickText("button", "Delete");
  await page.click(".modal button[type=submit]");
  await waitHash((h) => h === "#/db/uitest");
  assert.equal((await rest("GET", "/uitest/gone")).status, 404);

  // A view: define it and query it.
  await go("#/db/uitest/views");
  await clickText("button", "New view");
  await fillDialog({ ddoc: "app", view: "by_name", map: "function (doc) { if (doc.name) emit(doc.name, 1); }", reduce: "_count" });
  await waitHash((h) => h === "#/db/uitest/view/app/by_name");
  await page.waitForSelector("#run-view");
  await page.select("select[name=reduce]", "false");
  await page.click("#run-view");
  await waitText("#view-results", "edited");
  await shot("view");

  // A Mango query.
  await go("#/db/uitest/find");
  await page.waitForSelector("#run-find");
  await setEditor(JSON.stringify({ selector: { name: "edited" }, execution_stats: true }));
  await page.click("#run-find");
  await waitText("#find-results", "1 documents");
  await waitText("#exec-stats", "total_docs_examined");
  await shot("mango");

  // The changes feed, live: a write elsewhere appears without reloading.
  await go("#/db/uitest/changes");
  await page.waitForSelector("#changes-list");
  await waitText("[role=status]", "Listening");
  await new Promise((r) => setTimeout(r, 300));
  await rest("PUT", "/uitest/live-one", { hello: "live" });
  await waitText("#changes-list", "live-one");

  // Mango indexes: create one, see it listed and used, delete it.
  await go("#/db/uitest/find");
  await page.waitForSelector("#indexes");
  await clickText("button", "Create index");
  await waitText("#indexes", "by-name");
  await setEditor(JSON.stringify({ selector: { name: "edited" }, execution_stats: true }));
  await page.click("#run-find");
  await waitText("#find-results", "1 documents");
  await waitText("#exec-stats", "total_docs_examined: 1");
  await page.evaluate(() => [...document.querySelectorAll("#indexes tr")].find((tr) => tr.textContent.includes("by-name")).querySelector("button").click());
  await page.waitForFunction(() => !document.querySelector("#indexes").textContent.includes("by-name"));

  // Bulk selection and deletion.
  await rest("POST", "/uitest/_bulk_docs", { docs: [{ _id: "aa1" }, { _id: "aa2" }] });
  await go("#/db/uitest?startkey=aa&endkey=aa9");
  await waitText("#doc-list", "aa2");
  await page.$$eval("#doc-list input[type=checkbox]", (boxes) => boxes.forEach((b) => { b.checked = true; }));
  await clickText("button", "Delete selected");
  await page.click(".modal button[type=submit]");
  await page.waitForFunction(() => !document.querySelector("#doc-list").textContent.includes("aa2"));
  assert.equal((await rest("GET", "/uitest/aa1")).status, 404);

  // Exporting the database as newline-delimited JSON (Chromium's downloads can be read).
  if (!firefox) {
    const downloads = require("node:fs").mkdtempSync(path.join(require("node:os").tmpdir(), "settee-ui-"));
    const cdp = await page.createCDPSession();
    await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
    await go("#/db/uitest");
    await page.waitForSelector("#doc-list");
    await clickText("button", "Export NDJSON");
    const file = path.join(downloads, "uitest.ndjson");
    for (let i = 0; i < 100 && !require("node:fs").existsSync(file); i++) await new Promise((r) => setTimeout(r, 100));
    const lines = require("node:fs").readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    const info = (await rest("GET", "/uitest")).body;
    assert.equal(lines.length, info.doc_count, "one line per document");
    const exported = lines.find((d) => d._id === "doc1");
    assert.equal(exported.name, "edited");
    assert.ok(Object.values(exported._attachments)[0].data, "attachments inline");
  }

  // Importing documents from newline-delimited JSON.
  const nd = path.join(require("node:os").tmpdir(), `settee-ui-${process.pid}.ndjson`);
  require("node:fs").writeFileSync(nd, '{"_id":"imp1","n":1}\n{"_id":"imp2","_rev":"1-abc","n":2}\n');
  const importer = await page.$("input[type=file][accept]");
  await importer.uploadFile(nd);
  await waitText("#banner", "Imported 2 documents");
  assert.equal((await rest("GET", "/uitest/imp2")).body._rev, "1-abc", "revisions kept");

  // Permissions: a member's access changes.
  await rest("PUT", "/_users/org.couchdb.user:ann", { name: "ann", password: "annpw", type: "user", roles: [] });
  await rest("PUT", "/_users/org.couchdb.user:bob", { name: "bob", password: "bobpw", type: "user", roles: [] });
  const as = (who) => fetch(`${url}/uitest/doc1`, { headers: { Authorization: "Basic " + Buffer.from(`${who}:${who}pw`).toString("base64") } });
  assert.equal((await as("ann")).status, 403, "a new database is its admins' only");
  await go("#/db/uitest/settings");
  await page.waitForSelector("#members-names");
  await page.type("#members-names", "ann");
  await clickText("button", "Save permissions");
  await waitText("#banner", "Permissions saved");
  assert.equal((await as("ann")).status, 200, "ann is a member now");
  assert.equal((await as("bob")).status, 403, "bob is no member");
  const sec = (await rest("GET", "/uitest/_security")).body;
  assert.deepEqual(sec.members.names, ["ann"]);
  await shot("permissions");

  // A running task shows in active tasks: a continuous replication runs until cancelled
  // (a compaction here can end between two of the page's polls on a fast machine).
  const endpoint = (db) => ({ url: `${url}/${db}`, headers: { Authorization: "Basic " + Buffer.from(`${user}:${password}`).toString("base64") } });
  const follow = { source: endpoint("uitest"), target: endpoint("uitest_follow"), continuous: true, create_target: true };
  await go("#/_active_tasks?every=100");
  await page.waitForSelector("#tasks");
  const seen = page.waitForFunction(() => document.querySelector("#tasks table")?.textContent.includes("replication"), { timeout: 30000, polling: 50 });
  assert.ok([200, 202].includes((await rest("POST", "/_replicate", follow)).status), "the continuous replication starts");
  await seen;
  await shot("active-tasks");
  await rest("POST", "/_replicate", { ...follow, cancel: true });

  // Replication: a job made as a _replicator document completes.
  await go("#/_replication");
  await page.waitForSelector("#replication-form");
  await page.type("#replication-form [name=source]", `${url.replace("://", `://${user}:${password}@`)}/uitest`);
  await page.type("#replication-form [name=target]", `${url.replace("://", `://${user}:${password}@`)}/uitest_copy`);
  await page.type("#replication-form [name=id]", "copy-job");
  await page.click("#replication-form [name=create_target]");
  await clickText("button", "Start replication");
  await waitText("#replications", "completed", 60000);
  await shot("replication");
  assert.equal((await rest("GET", "/uitest_copy/doc1")).body.name, "edited");

  // The rest of the server's pages.
  await go("#/_setup");
  await clickText("button", "Verify");
  await waitText("#verify-results", "Delete the databases", 30000);
  const failed = await page.$$eval("#verify-results .bad", (l) => l.map((e) => e.textContent));
  assert.deepEqual(failed, []);
  await go("#/_config");
  await waitText("summary", "[couchdb]");
  await go("#/_dashboard");
  await waitText("#dashboard", "Requests/s");
  // A few seconds of samples, with requests to draw.
  for (let i = 0; i < 8; i++) {
    await Promise.all(Array.from({ length: 20 }, () => rest("GET", "/uitest/doc1")));
    await new Promise((r) => setTimeout(r, 500));
  }
  await page.waitForSelector("#dashboard svg.spark polyline");
  await shot("dashboard");
  await go("#/");
  await waitText("#db-list", "uitest_copy");
  await shot("databases");
  // A phone-width screen.
  await page.setViewport({ width: 390, height: 800 });
  await go("#/db/uitest");
  await page.waitForSelector("#doc-list");
  await shot("phone");
  await page.setViewport({ width: 1280, height: 800 });

  // Errors are shown with CouchDB's error and reason.
  await go("#/db/nosuchdb");
  await waitText("#app", "not_found");

  // Deleting a database, confirmed by typing its name.
  await go("#/");
  await page.waitForSelector("#db-list");
  await page.evaluate(() => [...document.querySelectorAll("#db-list tr")].find((tr) => tr.firstChild.textContent === "uitest_copy").querySelector("button").click());
  await page.waitForSelector(".modal form");
  assert.equal(await page.$eval(".modal button[type=submit]", (b) => b.disabled), true, "disabled until the name is typed");
  await page.type(".modal [name=confirm]", "uitest_copy");
  await page.click(".modal button[type=submit]");
  await waitText("#banner", "Deleted uitest_copy");
  assert.equal((await rest("GET", "/uitest_copy")).status, 404);

  // Logging out.
  await clickText("button", "Log out");
  await page.waitForSelector("#login-name");

  const unexpected = consoleErrors.filter((e) => !/status of 40[134]/.test(e));
  assert.deepEqual(unexpected, [], "no errors in the browser console");
});
