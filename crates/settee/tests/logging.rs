//! The server's log: one access line per request as CouchDB writes it, `[log] level` and
//! `[log] writer`/`file` changed while running through `_config`, `RUST_LOG` honoured, and
//! no secret (passwords, cookies, `Authorization`) ever written.

mod common;

use std::time::{Duration, Instant};

use common::{base64_bytes, TestServer, ADMIN};

/// A server whose log level comes from its configuration (the tests' `SETTEE_LOG=warn`
/// cleared), or from `RUST_LOG` when given.
fn server(rust_log: Option<&str>) -> TestServer {
    let mut env = vec![("SETTEE_LOG", "")];
    if let Some(level) = rust_log {
        env.push(("RUST_LOG", level));
    }
    TestServer::start_with_env(&env)
}

fn log_of(s: &TestServer) -> String {
    std::fs::read_to_string(&s.log).unwrap_or_default()
}

/// Waits until `path`'s text contains `needle` (log lines are written as requests end).
fn until_logged(path: &std::path::Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "`{needle}` never logged:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn each_request_has_couchdbs_access_line_and_no_secret_is_logged() {
    let s = server(None);
    let c = s.admin();
    assert_eq!(c.get("/").status, 200);
    assert_eq!(s.anon().get("/_all_dbs").status, 401);
    assert_eq!(c.get("/nodb/x?q=1").status, 404);
    // A user with a password, who logs in for a cookie and uses it.
    let user_pw = "user-pw-4f1c9e";
    let user = format!(
        r#"{{"_id":"org.couchdb.user:carol","name":"carol","type":"user","roles":[],"password":"{user_pw}"}}"#
    );
    assert_eq!(c.put("/_users/org.couchdb.user:carol", &user).status, 201);
    let login = s.anon().send(
        "POST",
        "/_session",
        Some(&format!("name=carol&password={user_pw}")),
        &[("Content-Type", "application/x-www-form-urlencoded")],
    );
    assert_eq!(login.status, 200, "{}", login.text);
    let cookie = login.header("set-cookie").unwrap().to_string();
    let token = cookie.split(';').next().unwrap().to_string();
    let with_cookie = s
        .anon()
        .send("GET", "/_session", None, &[("Cookie", token.as_str())]);
    assert_eq!(with_cookie.json()["userCtx"]["name"], "carol");
    let admin_pw = "admin-pw-77ab02";
    assert_eq!(
        c.put(
            "/_node/_local/_config/admins/other",
            &format!("\"{admin_pw}\"")
        )
        .status,
        200
    );
    let log = until_logged(&s.log, "PUT /_node/_local/_config/admins/other 200");
    let line = log
        .lines()
        .find(|l| l.contains(" GET / 200 "))
        .unwrap_or_else(|| panic!("no access line for GET /:\n{log}"));
    // `[notice] time node <pid> request-id host peer user method path status ok ms`
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "[notice]", "{line}");
    assert_eq!(words[2], "settee@127.0.0.1", "{line}");
    // The time: `2026-11-30T03:09:10.679839Z`, UTC to the microsecond.
    let time = words[1].as_bytes();
    assert_eq!(time.len(), 27, "{line}");
    for (at, c) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
    ] {
        assert_eq!(time[at], c, "{line}");
    }
    assert_eq!(time[26], b'Z', "{line}");
    assert_eq!(words[4].len(), 10, "the request id: {line}");
    assert_eq!(
        &words[6..],
        ["127.0.0.1", ADMIN.0, "GET", "/", "200", "ok", words[12]]
    );
    assert!(words[12].parse::<u64>().is_ok(), "{line}");
    assert!(log.contains(" undefined GET /_all_dbs 401 ok "), "{log}");
    assert!(log.contains(" admin GET /nodb/x?q=1 404 ok "), "{log}");
    assert!(log.contains(" carol GET /_session 200 ok "), "{log}");
    let basic = base64_bytes(format!("{}:{}", ADMIN.0, ADMIN.1).as_bytes());
    let session_value = token.split_once('=').unwrap().1;
    for secret in [
        user_pw,
        admin_pw,
        basic.as_str(),
        session_value,
        "Authorization",
    ] {
        assert!(!log.contains(secret), "`{secret}` is in the log:\n{log}");
    }
}

#[test]
fn access_lines_are_counted_at_notice_and_escaped() {
    let s = server(None);
    let c = s.admin();
    let notices = || {
        c.get("/_node/_local/_stats/couch_log/level/notice").json()["value"]
            .as_u64()
            .unwrap()
    };
    let before = notices();
    // A user name is the one part of a line a client may fill with any character.
    let name = "tab\tbreak\ndel\u{7f}c1\u{85}é";
    let user = serde_json::json!({
        "_id": format!("org.couchdb.user:{name}"), "name": name, "type": "user",
        "roles": [], "password": "pw-9e1d"
    });
    let id = format!("/_users/{}", encoded(&format!("org.couchdb.user:{name}")));
    assert_eq!(c.put(&id, &user.to_string()).status, 201);
    let basic = base64_bytes(format!("{name}:pw-9e1d").as_bytes());
    let auth = format!("Basic {basic}");
    let mine = s
        .anon()
        .send("GET", "/_session", None, &[("Authorization", &auth)]);
    assert_eq!(mine.json()["userCtx"]["name"], name);
    let log = until_logged(&s.log, "GET /_session 200");
    let line = log
        .lines()
        .find(|l| l.contains(" GET /_session 200 "))
        .unwrap();
    assert!(
        line.contains(" tab\\x09break\\x0adel\\x7fc1\\x85é GET "),
        "{line}"
    );
    // Each line is counted once, as it is written (before its answer goes): the stats
    // request, the user's PUT and the `_session` since `before`, and every line the log
    // holds but this last request's own.
    let lines = log.lines().filter(|l| l.starts_with("[notice] ")).count() as u64;
    let after = notices();
    assert_eq!(after, before + 3, "{log}");
    assert!(after >= lines, "{after} counted, {lines} lines:\n{log}");
}

/// `text` with every byte but letters and digits percent-encoded.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn level_and_writer_change_while_running() {
    let s = server(None);
    let c = s.admin();
    let set = |key: &str, value: &str| {
        let r = c.put(
            &format!("/_node/_local/_config/log/{key}"),
            &format!("\"{value}\""),
        );
        assert_eq!(r.status, 200, "{}", r.text);
    };
    assert_eq!(c.get("/first").status, 404);
    until_logged(&s.log, "GET /first 404");
    set("level", "error");
    assert_eq!(c.get("/unlogged").status, 404);
    let file = s.dir.path().join("moved.log");
    set("file", file.to_str().unwrap());
    set("writer", "file");
    set("level", "notice");
    assert_eq!(c.get("/to-the-file").status, 404);
    until_logged(&file, "GET /to-the-file 404");
    assert!(!log_of(&s).contains("/unlogged"), "logged at level error");
    assert!(!log_of(&s).contains("/to-the-file"), "logged to stderr too");
}

#[test]
fn rust_log_wins_over_the_configuration() {
    let s = server(Some("error"));
    let c = s.admin();
    assert_eq!(c.get("/quiet").status, 404);
    // A request after it, at error level, must not bring the first one's line.
    assert_eq!(c.get("/quiet-too").status, 404);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!log_of(&s).contains("/quiet"), "{}", log_of(&s));
}
