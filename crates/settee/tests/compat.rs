//! What CouchDB's clients found (issue 27): each a request a widely used client sends and
//! the answer CouchDB gives it, checked against the real binary.

mod common;

use std::io::{Read, Write};

use common::{Client, TestServer};
use serde_json::{json, Value};

fn gzip(text: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap()
}

/// Sends raw bytes on a new connection; everything the server answers until it closes or
/// goes quiet for a second.
fn raw(s: &TestServer, bytes: &[u8]) -> String {
    let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(1))).unwrap();
    stream.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// CouchDB's replicator writes its checkpoints as `_local` documents with `"_rev": "0-1"`
/// and `"_revisions": {"start": 0, "ids": ["1"]}`; PouchDB and the IBM SDK overwrite and
/// delete them without a revision. Local documents never conflict: the revision given (none
/// counts as 0) plus one.
#[test]
fn local_documents_take_any_revision_as_couchdb_does() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/db", "").status, 201);
    let put = |path: &str, body: Value| c.put(path, &body.to_string());
    assert_eq!(put("/db/_local/ck", json!({"h": 1})).json()["rev"], "0-1");
    let r = put("/db/_local/ck", json!({"_rev": "0-1", "_revisions": {"start": 0, "ids": ["1"]}, "h": 2}));
    assert_eq!((r.status, r.json()["rev"].clone()), (201, json!("0-2")), "{}", r.text);
    assert_eq!(put("/db/_local/ck", json!({"h": 3})).json()["rev"], "0-1", "no revision: overwritten as 0-1");
    assert_eq!(put("/db/_local/ck", json!({"_rev": "0-7", "h": 4})).json()["rev"], "0-8");
    assert_eq!(c.get("/db/_local/ck").json(), json!({"_id": "_local/ck", "_rev": "0-8", "h": 4}));
    let r = put("/db/_local/other", json!({"_revisions": {"start": 0, "ids": ["5", "3", "1"]}}));
    assert_eq!(r.json()["rev"], "0-6", "the newest id counts");
    let r = c.delete("/db/_local/ck");
    assert_eq!((r.status, r.json()), (200, json!({"ok": true, "id": "_local/ck", "rev": "0-0"})), "deleted without a revision");
    c.get("/db/_local/ck").error(404, "not_found");
    c.delete("/db/_local/ck").error(404, "not_found");
    assert_eq!(c.post("/db/_bulk_docs", &json!({"docs": [{"_id": "_local/b", "_rev": "0-3", "x": 1}]}).to_string()).json()[0]["rev"], "0-4");
}

/// The IBM Cloudant SDK and Kivik gzip every JSON body they send; CouchDB decodes them.
#[test]
fn gzip_encoded_json_bodies_are_decoded() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/db", "").status, 201);
    let send = |method: &str, path: &str, body: &str, encoding: &str| {
        let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
        let data = if encoding == "gzip" { gzip(body) } else { body.as_bytes().to_vec() };
        let head = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Encoding: {encoding}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", common::admin_auth(), data.len());
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&data).unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).unwrap();
        out
    };
    assert!(send("PUT", "/db/doc", r#"{"v":1}"#, "gzip").starts_with("HTTP/1.1 201"));
    assert!(send("POST", "/db/_bulk_docs", r#"{"docs":[{"_id":"b","v":2}]}"#, "gzip").starts_with("HTTP/1.1 201"));
    let found = send("POST", "/db/_find", r#"{"selector":{"v":2}}"#, "gzip");
    assert!(found.starts_with("HTTP/1.1 200") && found.contains(r#""_id":"b""#), "{found}");
    let keys = send("POST", "/db/_all_docs", r#"{"keys":["doc"]}"#, "gzip");
    assert!(keys.contains(r#""id":"doc""#), "{keys}");
    assert_eq!(c.get("/db/doc").json()["v"], 1);
    let deflate = send("PUT", "/db/d2", r#"{"v":1}"#, "deflate");
    assert!(deflate.starts_with("HTTP/1.1 415") && deflate.contains("deflate is not a supported content encoding."), "{deflate}");
    let mut broken = gzip(r#"{"v":1}"#);
    broken.truncate(8);
    let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
    let head = format!("PUT /db/d3 HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", common::admin_auth(), broken.len());
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&broken).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 400") && out.contains("Request body is not properly gzipped."), "{out}");
    c.get("/db/d3").error(404, "not_found");
}

/// The IBM Cloudant SDK logs in with `username`; nano's cookie jar reads `Expires`.
#[test]
fn session_logins_take_username_and_cookies_carry_expires() {
    let s = TestServer::start();
    let anon = s.anon();
    let r = anon.post("/_session", &json!({"username": common::ADMIN.0, "password": common::ADMIN.1}).to_string());
    assert_eq!(r.status, 200, "{}", r.text);
    let cookie = r.header("set-cookie").unwrap().to_string();
    let attrs: Vec<&str> = cookie.split("; ").skip(1).map(|a| a.split('=').next().unwrap()).collect();
    assert_eq!(attrs, ["Version", "Expires", "Max-Age", "Path", "HttpOnly"], "{cookie}");
    assert!(cookie.contains(" GMT; Max-Age=600"), "{cookie}");
    let form = anon.send("POST", "/_session", Some(&format!("username={}&password={}", common::ADMIN.0, common::ADMIN.1)), &[("Content-Type", "application/x-www-form-urlencoded")]);
    assert_eq!(form.status, 200, "{}", form.text);
    anon.post("/_session", r#"{"name":"a","username":"b","password":"p"}"#).error(400, "bad_request");
    assert_eq!(anon.post("/_session", r#"{"password":"p"}"#).json()["reason"], "request body must contain a username");
    anon.send("POST", "/_session", Some("name=a"), &[("Content-Type", "text/plain")]).error(415, "bad_content_type");
    let value = cookie.split(';').next().unwrap().trim_start_matches("AuthSession=").to_string();
    let mut by_cookie = Client::new(&s.url, None);
    by_cookie.extra.push(("Cookie".into(), format!("AuthSession={value}")));
    assert_eq!(by_cookie.get("/_session").json()["userCtx"]["name"], common::ADMIN.0);
}

/// couchdb-python sends a 10-byte `Content-Length` for an 11-byte UTF-8 attachment: CouchDB
/// refuses it (400) rather than store the first 10 bytes and read the 11th as a request.
#[test]
fn an_attachment_longer_than_its_content_length_is_refused() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/db", "").status, 201);
    let body = "caf\u{e9} 12345";
    assert_eq!(body.len(), 11);
    let out = raw(&s, format!("PUT /db/doc/att.txt HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n{body}", common::admin_auth()).as_bytes());
    assert!(out.starts_with("HTTP/1.1 400") && out.contains("attachment longer than expected"), "{out}");
    assert!(out.to_ascii_lowercase().contains("connection: close"), "{out}");
    assert_eq!(out.matches("HTTP/1.1").count(), 1, "the extra byte is not taken for a request: {out}");
    c.get("/db/doc/att.txt").error(404, "not_found");
    // The right length is stored, and a keep-alive client goes on.
    let ok = raw(&s, format!("PUT /db/doc/att.txt HTTP/1.1\r\nHost: x\r\nAuthorization: {a}\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\n{body}GET /_up HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", a = common::admin_auth()).as_bytes());
    assert!(ok.starts_with("HTTP/1.1 201"), "{ok}");
    assert_eq!(c.get("/db/doc/att.txt").text, body);
}

/// A failed login for a name no account has must not lock out the account made later under
/// it (CouchDB keys its lockout by name and salt); Basic logins for unknown names never
/// count. New passwords are hashed as CouchDB 3.5 hashes them.
#[test]
fn failures_before_an_account_existed_do_not_lock_it_and_passwords_hash_as_couchdb() {
    let s = TestServer::start();
    let admin = s.admin();
    common::set_config(&admin, "chttpd_auth_lockout", "threshold", "3");
    for _ in 0..5 {
        s.anon().post("/_session", r#"{"name":"newbie","password":"guess"}"#);
        Client::new(&s.url, Some(("newcomer", "guess"))).get("/");
    }
    for name in ["newbie", "newcomer"] {
        let user = json!({"name": name, "password": "right", "roles": [], "type": "user"});
        assert_eq!(admin.put(&format!("/_users/org.couchdb.user:{name}"), &user.to_string()).status, 201);
        assert_eq!(Client::new(&s.url, Some((name, "right"))).get("/_session").json()["userCtx"]["name"], name, "{name} is not locked out");
    }
    let stored = admin.get("/_users/org.couchdb.user:newbie").json();
    assert_eq!((&stored["iterations"], &stored["pbkdf2_prf"], &stored["password_scheme"]), (&json!(600000), &json!("sha256"), &json!("pbkdf2")));
}
