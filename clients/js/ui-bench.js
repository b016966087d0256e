// Times the admin UI's databases page in headless Chromium: from a click to the table
// shown, five times each for the first page, a late page and a prefix filter.
// usage: SETTEE_URL=http://127.0.0.1:5984 SETTEE_USER=admin SETTEE_PASSWORD=... \
//        node ui-bench.js   (with many databases named many-NNNNN, see docs/PERFORMANCE.md)
const puppeteer = require("puppeteer-core");

const url = process.env.SETTEE_URL || "http://127.0.0.1:5984";

(async () => {
  const browser = await puppeteer.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
  const page = await browser.newPage();
  await page.goto(`${url}/_utils/`, { waitUntil: "networkidle0" });
  await page.type("#login-name", process.env.SETTEE_USER || "admin");
  await page.type("#login-password", process.env.SETTEE_PASSWORD || "");
  await page.click("form button[type=submit]");
  await page.waitForSelector("#db-list");
  for (const hash of ["#/", "#/?skip=9000", "#/?q=many-077"]) {
    const times = [];
    for (let i = 0; i < 5; i++) {
      await page.evaluate(() => { location.hash = "#/_setup"; });
      await page.waitForSelector("#verify");
      const start = Date.now();
      await page.evaluate((h) => { location.hash = h; }, hash);
      await page.waitForFunction(() => document.querySelectorAll("#db-list tbody tr").length > 0);
      times.push(Date.now() - start);
    }
    times.sort((a, b) => a - b);
    console.log(`${hash}: median ${times[2]} ms`);
  }
  await browser.close();
})();
