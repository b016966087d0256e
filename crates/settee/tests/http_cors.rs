//! Cross-origin requests: the preflight and response headers CouchDB sends, and a real
//! browser (headless Chromium) loading a page from another origin that writes and reads a
//! document with fetch(): allowed when `[cors] origins` lists the page's origin, stopped by
//! the browser (and nothing written) when it does not.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use common::{set_config, Client, TestServer};

fn enable(admin: &Client, origins: &str) {
    set_config(admin, "chttpd", "enable_cors", "true");
    set_config(admin, "cors", "origins", origins);
    set_config(admin, "cors", "credentials", "true");
}

#[test]
fn preflight_and_response_headers() {
    let s = TestServer::start();
    let admin = s.admin();
    let preflight = |origin: &str, method: &str, headers: &str| {
        s.anon().send(
            "OPTIONS",
            "/db/doc",
            None,
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", method),
                ("Access-Control-Request-Headers", headers),
            ],
        )
    };
    let off = preflight("http://app.example", "PUT", "content-type");
    assert!(
        off.header("access-control-allow-origin").is_none(),
        "CORS is off by default"
    );

    enable(&admin, "http://app.example, http://other.example");
    let r = preflight("http://app.example", "PUT", "Content-Type, Authorization");
    assert_eq!(r.status, 204, "{}", r.text);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://app.example")
    );
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("CONNECT, COPY, DELETE, GET, HEAD, OPTIONS, POST, PUT, TRACE")
    );
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("Content-Type, Authorization")
    );
    assert_eq!(r.header("access-control-max-age"), Some("600"));
    assert_eq!(r.header("access-control-allow-credentials"), Some("true"));
    for (origin, method, headers) in [
        ("http://evil.example", "PUT", "content-type"),
        ("http://app.example", "PATCH", ""),
        ("http://app.example", "GET", "x-secret"),
    ] {
        let r = preflight(origin, method, headers);
        assert!(
            r.header("access-control-allow-methods").is_none(),
            "{origin} {method} {headers}: not a preflight this server accepts"
        );
        assert_ne!(r.status, 204, "a browser needs a 2xx answer to proceed");
        assert_eq!(
            r.header("access-control-allow-origin").is_some(),
            origin == "http://app.example",
            "only allowed origins are named"
        );
    }

    let r = admin.send("GET", "/", None, &[("Origin", "http://other.example")]);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://other.example")
    );
    assert_eq!(r.header("access-control-expose-headers"), Some("content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time"));
    let r = admin.send("GET", "/", None, &[("Origin", "http://evil.example")]);
    assert_eq!(r.status, 200, "a request from another origin is served");
    assert!(
        r.header("access-control-allow-origin").is_none(),
        "but without CORS headers, so the browser hides it"
    );
}

/// Serves `page` to every connection on a new loopback port; returns the page's origin.
fn serve_page(page: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten().take(64) {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let reply = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}", page.len());
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    origin
}

/// Loads `url` in headless Chromium and returns the text of the page's `#out` element once
/// its scripts have finished.
fn browse(url: &str) -> String {
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "Chromium is not installed: run ./scripts/test, which installs Debian's chromium package"
    );
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--virtual-time-budget=15000", "--dump-dom", url])
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    let start = dom.find("<pre id=\"out\">").unwrap_or_else(|| {
        panic!(
            "no output in the page: {dom}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    }) + "<pre id=\"out\">".len();
    dom[start..]
        .split("</pre>")
        .next()
        .unwrap_or("")
        .to_string()
}

fn page(server: &str) -> String {
    format!(
        r#"<html><body><pre id="out">pending</pre><script>
const base = "{server}";
const auth = "Basic " + btoa("admin:secret");
(async () => {{
  const seen = [];
  try {{
    let r = await fetch(base + "/corsdb/fromweb", {{method: "PUT", headers: {{"Content-Type": "application/json", "Authorization": auth}}, body: JSON.stringify({{hello: "browser"}})}});
    seen.push("put:" + r.status);
    r = await fetch(base + "/corsdb/fromweb", {{headers: {{"Authorization": auth}}}});
    const doc = await r.json();
    seen.push("get:" + r.status + ":" + doc.hello + ":" + (r.headers.get("etag") ? "etag" : "no-etag"));
  }} catch (e) {{
    seen.push("error:" + e.name);
  }}
  document.getElementById("out").textContent = seen.join(" ");
}})();
</script></body></html>"#
    )
}

#[test]
fn a_browser_on_another_origin_reads_and_writes_only_when_allowed() {
    let s = TestServer::start();
    let admin = s.admin();
    assert_eq!(admin.put("/corsdb", "").status, 201);
    let origin = serve_page(page(&s.url));

    enable(&admin, "http://elsewhere.example");
    assert_eq!(
        browse(&format!("{origin}/")),
        "error:TypeError",
        "the browser refuses an origin the server does not list"
    );
    assert_eq!(
        admin.get("/corsdb/fromweb").status,
        404,
        "and the write never reached the server"
    );

    enable(&admin, &origin);
    assert_eq!(
        browse(&format!("{origin}/")),
        "put:201 get:200:browser:etag"
    );
    assert_eq!(admin.get("/corsdb/fromweb").json()["hello"], "browser");
}
