//! Server-level endpoints, authentication and configuration, over HTTP against the real binary.

mod common;

use common::TestServer;
use serde_json::{json, Value};

#[test]
fn welcome_up_and_uuids() {
    let s = TestServer::start();
    let anon = s.anon();
    let r = anon.get("/");
    assert_eq!(r.status, 200);
    let w = r.json();
    assert_eq!(w["couchdb"], "Welcome");
    assert_eq!(w["vendor"]["name"], "Settee");
    assert_eq!(w["uuid"].as_str().unwrap().len(), 32);
    let sha = w["git_sha"].as_str().unwrap();
    assert!(
        sha == "unknown" || (sha.len() == 7 && sha.chars().all(|c| c.is_ascii_hexdigit())),
        "{sha}"
    );
    assert!(r.text.ends_with('\n'));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.header("server").unwrap().starts_with("Settee/"));
    let speaks = format!("(CouchDB/{})", w["version"].as_str().unwrap());
    assert!(
        r.header("server").unwrap().ends_with(&speaks),
        "the Server header names the API version"
    );
    anon.send("POST", "/", Some("{}"), &[])
        .error(405, "method_not_allowed");
    assert_eq!(anon.get("/_up").json()["status"], "ok");
    let ids = anon.get("/_uuids?count=5").json();
    let ids = ids["uuids"].as_array().unwrap();
    assert_eq!(ids.len(), 5);
    assert!(ids.iter().all(|i| i.as_str().unwrap().len() == 32));
    // CouchDB's texts for bad counts, and headers that keep caches from repeating ids.
    for (count, reason) in [
        ("x", "count must be a positive integer"),
        ("-1", "count must be a positive integer"),
        ("", "count must be a positive integer"),
        ("1001", "count parameter too large"),
        ("99999999999999999999999", "count parameter too large"),
    ] {
        let r = anon.get(&format!("/_uuids?count={count}"));
        assert_eq!(
            (
                r.status,
                r.json()["error"].as_str(),
                r.json()["reason"].as_str()
            ),
            (400, Some("bad_request"), Some(reason)),
            "count={count}"
        );
    }
    assert_eq!(anon.get("/_uuids?count=0").json(), json!({"uuids": []}));
    let r = anon.get("/_uuids");
    assert_eq!(
        (
            r.header("cache-control"),
            r.header("pragma"),
            r.header("expires")
        ),
        (
            Some("no-cache"),
            Some("no-cache"),
            Some("Mon, 01 Jan 1990 00:00:00 GMT")
        )
    );
    let again = anon.get("/_uuids");
    assert!(
        r.header("etag").is_some() && r.header("etag") != again.header("etag"),
        "each answer's ETag names its ids"
    );
    let r = anon.send("POST", "/_uuids", Some("{}"), &[]);
    assert_eq!(
        (r.status, r.header("allow"), r.json()["reason"].as_str()),
        (405, Some("GET"), Some("Only GET allowed"))
    );
    // The uuid is stable per install.
    let mut s = s;
    s.restart();
    assert_eq!(s.anon().get("/").json()["uuid"], w["uuid"]);
}

#[test]
fn secure_by_default_and_sessions() {
    let s = TestServer::start();
    let anon = s.anon();
    anon.get("/_all_dbs").error(401, "unauthorized");
    anon.put("/newdb", "").error(401, "unauthorized");
    common::Client::new(&s.url, Some(("admin", "wrong")))
        .get("/")
        .error(401, "unauthorized");
    let admin = s.admin();
    assert_eq!(admin.put("/newdb", "").status, 201);
    anon.get("/newdb").error(401, "unauthorized");
    // Cookie login, JSON and form.
    let r = anon.post("/_session", r#"{"name":"admin","password":"secret"}"#);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["roles"], json!(["_admin"]));
    let cookie = r
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert!(cookie.starts_with("AuthSession="));
    let mut with_cookie = s.anon();
    with_cookie.extra.push(("Cookie".into(), cookie));
    let me = with_cookie.get("/_session").json();
    assert_eq!(me["userCtx"]["name"], "admin");
    assert_eq!(me["info"]["authenticated"], "cookie");
    assert_eq!(
        with_cookie.get("/_all_dbs").json(),
        json!(["_replicator", "_users", "newdb"])
    );
    let form = anon.send(
        "POST",
        "/_session",
        Some("name=admin&password=secret"),
        &[("Content-Type", "application/x-www-form-urlencoded")],
    );
    assert_eq!(form.status, 200);
    anon.post("/_session", r#"{"name":"admin","password":"nope"}"#)
        .error(401, "unauthorized");
    assert_eq!(anon.get("/_session").json()["userCtx"]["name"], Value::Null);
    let out = anon.delete("/_session");
    assert!(out.header("set-cookie").unwrap().contains("AuthSession=;"));
    // `basic=true` makes an anonymous caller log in; a known one is simply answered.
    anon.get("/_session?basic=true").error(401, "unauthorized");
    assert_eq!(
        anon.get("/_session?basic=true").json()["reason"],
        "Please login."
    );
    assert_eq!(
        admin.get("/_session?basic=true").json()["userCtx"]["name"],
        "admin"
    );
}

/// Posts a login form on a raw connection (an HTTP library would follow the redirect).
fn login_form(s: &TestServer, query: &str, form: &str, extra: &str) -> String {
    s.raw(&format!(
        "POST /_session{query} HTTP/1.1\r\nHost: db.example:5984\r\n{extra}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    ))
}

#[test]
fn session_logins_redirect_to_next_and_fail_as_forms_ask() {
    let s = TestServer::start();
    let good = "name=admin&password=secret";
    let bad = "name=admin&password=nope";
    let ok = login_form(&s, "?next=/db/_all_docs", good, "");
    assert!(ok.starts_with("HTTP/1.1 302"), "{ok}");
    assert!(
        ok.to_ascii_lowercase()
            .contains("\r\nlocation: http://db.example:5984/db/_all_docs\r\n"),
        "{ok}"
    );
    assert!(
        ok.contains("AuthSession=") && ok.contains(r#""ok":true"#),
        "the cookie and the answer stay: {ok}"
    );
    let failed = login_form(&s, "?next=/yes&fail=/login%3Fagain", bad, "");
    assert!(failed.starts_with("HTTP/1.1 302"), "{failed}");
    assert!(
        failed
            .to_ascii_lowercase()
            .contains("\r\nlocation: http://db.example:5984/login?again\r\n"),
        "{failed}"
    );
    assert!(
        failed.contains("AuthSession=;") && failed.contains(r#""error":"unauthorized""#),
        "{failed}"
    );
    // Without the parameter for its outcome a login answers as usual.
    assert!(login_form(&s, "?fail=/login", good, "").starts_with("HTTP/1.1 200"));
    assert!(login_form(&s, "?next=/db", bad, "").starts_with("HTTP/1.1 401"));
    // A location that cannot be a header is refused rather than sent without one.
    assert!(login_form(&s, "?next=/a%0D%0ASet-Cookie:%20x=1", good, "").starts_with("HTTP/1.1 400"));
    // Behind a proxy the address is the one the client used.
    let proxied = login_form(
        &s,
        "?next=/app",
        good,
        "X-Forwarded-Host: public.example\r\nX-Forwarded-Proto: https\r\n",
    );
    assert!(
        proxied
            .to_ascii_lowercase()
            .contains("\r\nlocation: https://public.example/app\r\n"),
        "{proxied}"
    );
}

#[test]
fn generated_admin_password_is_printed_once_and_stored_hashed() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_settee"))
        .args(["serve", "--port", "0", "--data"])
        .arg(dir.path())
        .env_remove("SETTEE_ADMIN")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = out;
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut reader, &mut first).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let password = first.split('`').nth(3).expect("password shown");
    let ini = std::fs::read_to_string(dir.path().join("settee.ini")).unwrap();
    assert!(ini.contains("admin = -pbkdf2:sha256-"), "{ini}");
    assert!(
        !ini.contains(password),
        "the password is not stored in plain text"
    );
}

#[test]
fn all_dbs_dbs_info_and_node_endpoints() {
    let s = TestServer::start();
    let c = s.admin();
    for db in ["b", "a", "c/d", "e"] {
        assert_eq!(
            c.put(&format!("/{}", db.replace('/', "%2F")), "").status,
            201
        );
    }
    assert_eq!(
        c.get("/_all_dbs").json(),
        json!(["_replicator", "_users", "a", "b", "c/d", "e"]),
        "the system databases exist from the start"
    );
    assert_eq!(
        c.get("/_all_dbs?descending=true&limit=2").json(),
        json!(["e", "c/d"])
    );
    assert_eq!(
        c.get("/_all_dbs?start_key=%22b%22&end_key=%22c/d%22")
            .json(),
        json!(["b", "c/d"])
    );
    assert_eq!(c.get("/_all_dbs?skip=5").json(), json!(["e"]));
    // As CouchDB's _all_docs over its database list: `key`, `inclusive_end`, the later of
    // two aliases, and keys of other types ignored.
    let names = |q: &str| c.get(&format!("/_all_dbs?{q}")).json();
    assert_eq!(names("key=%22b%22"), json!(["b"]));
    assert_eq!(
        names("startkey=%22a%22&endkey=%22c/d%22&inclusive_end=false"),
        json!(["a", "b"])
    );
    assert_eq!(
        names("descending=true&startkey=%22c/d%22&endkey=%22a%22&inclusive_end=false"),
        json!(["c/d", "b"])
    );
    assert_eq!(
        names("start_key=%22e%22&startkey=%22b%22&endkey=%22b%22"),
        json!(["b"])
    );
    assert_eq!(
        names("startkey=1&endkey=%22_z%22"),
        json!(["_replicator", "_users"])
    );
    let all = json!(["_replicator", "_users", "a", "b", "c/d", "e"]);
    assert_eq!(
        (names("startkey=%5B%5D"), names("endkey=null")),
        (all.clone(), all)
    );
    assert_eq!(
        names("startkey=1&startkey_docid=c"),
        json!(["c/d", "e"]),
        "a key that is not a string gives way to the docid, as in _all_docs"
    );
    c.get("/_all_dbs?inclusive_end=maybe")
        .error(400, "query_parse_error");
    let info = c.post("/_dbs_info", r#"{"keys":["a","zz"]}"#).json();
    assert_eq!(info[0]["info"]["db_name"], "a");
    assert_eq!(info[1]["error"], "not_found");
    assert_eq!(c.get("/_dbs_info").json().as_array().unwrap().len(), 6);
    // As CouchDB: a key that names no database, a string or not, is a not_found row; keys
    // beyond `[chttpd] max_db_number_for_dbs_info_req` (100) are refused whole.
    assert_eq!(
        c.post("/_dbs_info", r#"{"keys":[1,"a"]}"#).json()[0],
        json!({"key": 1, "error": "not_found"})
    );
    assert_eq!(
        c.post("/_dbs_info", r#"{"keys":"a"}"#)
            .error(400, "bad_request")
            .json()["reason"],
        "`keys` member must be an array."
    );
    let many = json!({"keys": (0..101).map(|i| format!("db{i}")).collect::<Vec<_>>()}).to_string();
    assert_eq!(
        c.post("/_dbs_info", &many).error(400, "bad_request").json()["reason"],
        "too_many_keys"
    );
    common::set_config(&c, "chttpd", "max_db_number_for_dbs_info_req", "2");
    c.post("/_dbs_info", r#"{"keys":["a","b","e"]}"#)
        .error(400, "bad_request");
    assert_eq!(c.post("/_dbs_info", r#"{"keys":["a","b"]}"#).status, 200);
    assert_eq!(c.get("/_active_tasks").json(), json!([]));
    assert_eq!(
        c.get("/_membership").json()["all_nodes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(c.get("/_node/_local").json()["name"].is_string());
    s.anon().get("/_active_tasks").error(401, "unauthorized");
}

#[test]
fn config_is_read_written_and_persisted() {
    let mut s = TestServer::start();
    let c = s.admin();
    assert!(c.get("/_node/_local/_config").json()["admins"]["admin"]
        .as_str()
        .unwrap()
        .starts_with("-pbkdf2"));
    assert_eq!(
        c.put("/_node/_local/_config/uuids/algorithm", r#""random""#)
            .json(),
        json!("")
    );
    assert_eq!(
        c.get("/_node/_local/_config/uuids/algorithm").json(),
        json!("random")
    );
    assert_eq!(
        c.get("/_node/_local/_config/uuids").json(),
        json!({"algorithm": "random"})
    );
    c.get("/_node/_local/_config/uuids/nope")
        .error(404, "not_found");
    // A plaintext admin password set through the API is stored hashed.
    c.put("/_node/_local/_config/admins/second", r#""pw2""#);
    assert!(c
        .get("/_node/_local/_config/admins/second")
        .json()
        .as_str()
        .unwrap()
        .starts_with("-pbkdf2"));
    assert_eq!(
        common::Client::new(&s.url, Some(("second", "pw2")))
            .get("/_all_dbs")
            .status,
        200
    );
    // Credentials accepted before stop working as soon as the admin's password changes, or
    // the admin is removed.
    c.put("/_node/_local/_config/admins/second", r#""pw3""#);
    common::Client::new(&s.url, Some(("second", "pw2")))
        .get("/_all_dbs")
        .error(401, "unauthorized");
    assert_eq!(
        common::Client::new(&s.url, Some(("second", "pw3")))
            .get("/_all_dbs")
            .status,
        200
    );
    c.delete("/_node/_local/_config/admins/second");
    common::Client::new(&s.url, Some(("second", "pw3")))
        .get("/_all_dbs")
        .error(401, "unauthorized");
    assert_eq!(
        c.delete("/_node/_local/_config/uuids/algorithm").json(),
        json!("random")
    );
    c.put("/_node/_local/_config/uuids/algorithm", r#""utc_random""#);
    s.restart();
    assert_eq!(
        s.admin()
            .get("/_node/_local/_config/uuids/algorithm")
            .json(),
        json!("utc_random")
    );
    s.anon()
        .get("/_node/_local/_config")
        .error(401, "unauthorized");
    s.admin()
        .put("/_node/_local/_config/a/b", "5")
        .error(400, "bad_request");
    // As CouchDB: sections that name programs cannot be changed over HTTP, and nothing
    // written can start another line of the file.
    let c = s.admin();
    for section in ["query_servers", "os_daemons", "native_query_servers"] {
        let r = c.put(
            &format!("/_node/_local/_config/{section}/x"),
            r#""touch /tmp/pwned""#,
        );
        assert_eq!(
            (
                r.status,
                r.json()["error"].as_str(),
                r.json()["reason"].as_str()
            ),
            (
                403,
                Some("forbidden"),
                Some("Config section blacklisted for modification over HTTP API.")
            )
        );
        c.delete(&format!("/_node/_local/_config/{section}/x"))
            .error(403, "forbidden");
    }
    let injected = c.put(
        "/_node/_local/_config/uuids/x",
        r#""a\n[query_servers]\npython = touch /tmp/pwned""#,
    );
    assert_eq!(
        injected.error(400, "bad_request").json()["reason"],
        "Invalid configuration value"
    );
    assert_eq!(
        c.put("/_node/_local/_config/uuids/a%3Db", r#""1""#)
            .error(400, "bad_request")
            .json()["reason"],
        "Invalid configuration key"
    );
    assert_eq!(
        c.put("/_node/_local/_config/a%5Db/k", r#""1""#)
            .error(400, "bad_request")
            .json()["reason"],
        "Invalid configuration section"
    );
    // A locked section cannot be reached by a name the file's loader would read as it.
    for hidden in [
        "%20query_servers",
        "query_servers%09",
        "%C2%A0query_servers",
        "query%20servers",
    ] {
        let r = c.put(
            &format!("/_node/_local/_config/{hidden}/python"),
            r#""touch /tmp/pwned""#,
        );
        assert_eq!(
            (r.status, r.json()["reason"].as_str()),
            (400, Some("Invalid configuration section")),
            "{hidden}"
        );
    }
    assert_eq!(
        c.put("/_node/_local/_config/uuids/%20padded", r#""1""#)
            .error(400, "bad_request")
            .json()["reason"],
        "Invalid configuration key"
    );
    assert_eq!(
        c.put("/_node/_local/_config/uuids/padded", r#""  v  ""#)
            .status,
        200
    );
    assert_eq!(
        c.get("/_node/_local/_config/uuids/padded").json(),
        json!("v"),
        "values are trimmed, as CouchDB trims them"
    );
    s.restart();
    let all = s.admin().get("/_node/_local/_config").json();
    assert!(
        all.get("query_servers").is_none() && all["uuids"].get("x").is_none(),
        "{all}"
    );
}

/// CouchDB's `X-Couch-Persist: false` keeps a change in memory, out of the file; `POST
/// _config/_reload` forgets such changes and takes in what the file says now.
#[test]
fn config_changes_can_stay_in_memory_and_be_reloaded_away() {
    let mut s = TestServer::start();
    let c = s.admin();
    let in_memory = [("X-Couch-Persist", "false")];
    assert_eq!(
        c.send(
            "PUT",
            "/_node/_local/_config/log/level",
            Some(r#""debug""#),
            &in_memory
        )
        .json(),
        json!("")
    );
    c.put("/_node/_local/_config/uuids/algorithm", r#""random""#);
    assert_eq!(
        c.get("/_node/_local/_config/log/level").json(),
        json!("debug")
    );
    let ini = s.dir.path().join("settee.ini");
    let file = std::fs::read_to_string(&ini).unwrap();
    assert!(
        file.contains("algorithm = random") && !file.contains("debug"),
        "{file}"
    );
    // A delete kept in memory hides the value until the file is read again.
    assert_eq!(
        c.send(
            "DELETE",
            "/_node/_local/_config/uuids/algorithm",
            None,
            &in_memory
        )
        .json(),
        json!("random")
    );
    c.get("/_node/_local/_config/uuids/algorithm")
        .error(404, "not_found");
    c.send(
        "DELETE",
        "/_node/_local/_config/uuids/algorithm",
        None,
        &in_memory,
    )
    .error(404, "not_found");
    assert!(std::fs::read_to_string(&ini)
        .unwrap()
        .contains("algorithm = random"));
    // Changes made to the file by hand, an admin with a plaintext password among them.
    std::fs::write(
        &ini,
        std::fs::read_to_string(&ini).unwrap()
            + "\n[couchdb]\nmax_dbs_open = 77\n\n[admins]\nhand = handpw\n",
    )
    .unwrap();
    c.get("/_node/_local/_config/_reload")
        .error(405, "method_not_allowed");
    assert_eq!(
        c.post("/_node/_local/_config/_reload", "").json(),
        json!({"ok": true})
    );
    let all = c.get("/_node/_local/_config").json();
    assert_eq!(
        (
            &all["log"]["level"],
            &all["uuids"]["algorithm"],
            &all["couchdb"]["max_dbs_open"]
        ),
        (&json!(null), &json!("random"), &json!("77")),
        "{all}"
    );
    assert!(
        all["admins"]["hand"]
            .as_str()
            .unwrap()
            .starts_with("-pbkdf2"),
        "{all}"
    );
    assert!(
        !std::fs::read_to_string(&ini).unwrap().contains("handpw"),
        "the file keeps only the hash"
    );
    assert_eq!(
        common::Client::new(&s.url, Some(("hand", "handpw")))
            .get("/_all_dbs")
            .status,
        200
    );
    s.anon()
        .post("/_node/_local/_config/_reload", "")
        .error(401, "unauthorized");
    // What was kept in memory is gone after a restart too.
    c.send(
        "PUT",
        "/_node/_local/_config/log/level",
        Some(r#""debug""#),
        &in_memory,
    );
    s.restart();
    s.admin()
        .get("/_node/_local/_config/log/level")
        .error(404, "not_found");
}

#[test]
fn a_panicking_request_is_one_logged_500() {
    let mut s = TestServer::start();
    s.allow_errors = true;
    let c = s.admin();
    let r = c.get("/_settee_test_panic");
    r.error(500, "unknown_error");
    assert_eq!(c.get("/").status, 200, "the server goes on");
    let log = std::fs::read_to_string(&s.log).unwrap();
    assert!(
        log.contains("[error]") && log.contains("test panic requested"),
        "{log}"
    );
    assert_eq!(r.header("x-couch-request-id").map(str::len), Some(10));
    let put = c.put("/timed", "");
    assert!(
        put.header("x-couchdb-body-time")
            .is_some_and(|t| t.parse::<u64>().is_ok()),
        "{:?}",
        put.headers
    );
}

#[test]
fn serve_help_documents_every_option() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_settee"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for option in [
        "--data",
        "--bind",
        "--port",
        "--config",
        "SETTEE_ADMIN",
        "database_dir",
        "bind_address",
    ] {
        assert!(text.contains(option), "{option} missing from:\n{text}");
    }
}

#[test]
fn oversized_requests_are_refused_and_change_nothing() {
    let mut s = TestServer::start();
    let c = s.admin();
    c.put(
        "/_node/_local/_config/chttpd/max_http_request_size",
        r#""2000""#,
    );
    c.put(
        "/_node/_local/_config/couchdb/max_document_size",
        r#""500""#,
    );
    s.restart();
    let c = s.admin();
    c.put("/db", "");
    let big_bulk = json!({"docs": (0..100).map(|i| json!({"_id": format!("d{i}"), "pad": "x".repeat(50)})).collect::<Vec<_>>()}).to_string();
    c.post("/db/_bulk_docs", &big_bulk).error(413, "too_large");
    c.put("/db/doc", &json!({"pad": "y".repeat(800)}).to_string())
        .error(413, "document_too_large");
    assert_eq!(c.get("/db").json()["doc_count"], 0, "nothing was written");
    assert_eq!(c.put("/db/small", r#"{"ok":1}"#).status, 201);
    // A small gzip upload that would decode past the request limit is too large too.
    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut e, &[0u8; 100_000]).unwrap();
        e.finish().unwrap()
    };
    assert!(gz.len() < 2000);
    let answer = {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
        let head = format!("PUT /db/z/a.bin HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/octet-stream\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", common::admin_auth(), gz.len());
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&gz).unwrap();
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    assert!(
        answer.starts_with("HTTP/1.1 413") && answer.contains("attachment_too_large"),
        "{answer}"
    );
    c.get("/db/z").error(404, "not_found");
}

#[test]
fn session_cookies_are_refreshed_as_they_age() {
    let mut s = TestServer::start();
    s.admin()
        .put("/_node/_local/_config/chttpd_auth/timeout", r#""20""#);
    s.restart();
    let r = s
        .anon()
        .post("/_session", r#"{"name":"admin","password":"secret"}"#);
    let set = r.header("set-cookie").unwrap().to_string();
    assert!(set.contains("Max-Age=20"), "persistent by default: {set}");
    let mut with_cookie = s.anon();
    with_cookie
        .extra
        .push(("Cookie".into(), set.split(';').next().unwrap().to_string()));
    assert!(
        with_cookie.get("/_session").header("set-cookie").is_none(),
        "a fresh cookie is not replaced"
    );
    std::thread::sleep(std::time::Duration::from_millis(3100));
    let later = with_cookie.get("/_session");
    assert_eq!(later.json()["userCtx"]["name"], "admin");
    let renewed = later
        .header("set-cookie")
        .expect("an aged cookie is replaced")
        .to_string();
    assert!(renewed.starts_with("AuthSession=") && renewed != set);
}
