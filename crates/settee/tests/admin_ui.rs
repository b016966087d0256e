//! The admin UI at `/_utils`: its files served with their types, versioned long-cached
//! names, an uncached page, gzip and the Content-Security-Policy; and the UI itself in a
//! real headless Chromium and Firefox (`clients/js/ui.test.js`, puppeteer-core driving
//! Debian's chromium and firefox-esr): log in, create a database, create, edit and delete documents, upload an
//! attachment, resolve a conflict, define and query a view, run a Mango query, change
//! `_security` and see a member's access change, watch a compaction in active tasks, run a
//! replication to completion, verify the install, with no errors in the browser's console.
//! With `SETTEE_UI_SHOTS=DIR` set, the browser test saves screenshots there (the ones in
//! `docs/ui/` are made so).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{TestServer, ADMIN};

fn header<'a>(r: &'a common::Resp, name: &str) -> &'a str {
    r.header(name).unwrap_or_else(|| panic!("no {name} header"))
}

#[test]
fn files_are_served_with_types_caching_gzip_and_csp() {
    let s = TestServer::start();
    let anon = common::Client::new(&s.url, None);
    let raw = s.raw("GET /_utils HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(raw.starts_with("HTTP/1.1 301"), "{raw}");
    assert!(
        raw.to_ascii_lowercase().contains("location: /_utils/"),
        "{raw}"
    );
    let page = anon.get("/_utils/");
    assert_eq!(
        page.status, 200,
        "the UI is public: it asks who you are itself"
    );
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&page, "cache-control"), "no-cache");
    let csp = header(&page, "content-security-policy");
    assert!(
        csp.contains("default-src 'self'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    let start = page.text.find("v/").expect("a versioned path");
    let version = page.text[start + 2..]
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let js = anon.get(&format!("/_utils/v/{version}/js/main.js"));
    assert_eq!(js.status, 200);
    assert_eq!(
        header(&js, "content-type"),
        "text/javascript; charset=utf-8"
    );
    assert_eq!(
        header(&js, "cache-control"),
        "public, max-age=31536000, immutable"
    );
    assert!(js.text.contains("import "));
    let css = anon.get(&format!("/_utils/v/{version}/app.css"));
    assert_eq!(header(&css, "content-type"), "text/css; charset=utf-8");
    let old = anon.get("/_utils/v/00000000/app.css");
    assert_eq!(
        (old.status, header(&old, "cache-control")),
        (200, "no-cache"),
        "an older page gets today's file, uncached"
    );
    let gz = anon.send(
        "GET",
        &format!("/_utils/v/{version}/js/main.js"),
        None,
        &[("accept-encoding", "gzip, deflate")],
    );
    assert_eq!(header(&gz, "content-encoding"), "gzip");
    assert_eq!(header(&gz, "vary"), "Accept-Encoding");
    assert_eq!(anon.get("/_utils/v/x/nope.js").status, 404);
    assert_eq!(anon.get("/_utils/elsewhere").status, 404);
    let put = anon.put("/_utils/", "");
    assert_eq!((put.status, header(&put, "allow")), (405, "GET,HEAD"));
    // The policy is the server's: `[csp]` turns it off or changes it.
    let admin = s.admin();
    common::set_config(&admin, "csp", "utils_header_value", "default-src 'none'");
    assert_eq!(
        header(&anon.get("/_utils/"), "content-security-policy"),
        "default-src 'none'"
    );
    common::set_config(&admin, "csp", "utils_enable", "false");
    assert!(anon
        .get("/_utils/")
        .header("content-security-policy")
        .is_none());
}

#[test]
fn the_admin_ui_works_in_chromium() {
    browser_test("chromium", "/usr/bin/chromium");
}

#[test]
fn the_admin_ui_works_in_firefox() {
    browser_test("firefox", "/usr/bin/firefox-esr");
}

/// Runs `clients/js/ui.test.js` in `browser` against a new server.
fn browser_test(browser: &str, program: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../clients/js");
    assert!(
        dir.join("node_modules/puppeteer-core").is_dir(),
        "puppeteer-core is not installed: run ./scripts/test, which installs clients/js"
    );
    assert!(
        std::path::Path::new(program).exists(),
        "{program} is not installed: run ./scripts/test, which installs Debian's chromium and firefox-esr"
    );
    let s = TestServer::start();
    let mut cmd = Command::new("node");
    cmd.arg("--test").arg("ui.test.js").current_dir(&dir);
    cmd.env("SETTEE_BROWSER", browser)
        .env("SETTEE_URL", &s.url)
        .env("SETTEE_USER", ADMIN.0)
        .env("SETTEE_PASSWORD", ADMIN.1);
    let out = cmd.output().expect("run node");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the admin UI's browser test failed:\n{text}"
    );
}
