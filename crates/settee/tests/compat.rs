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
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .unwrap();
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
    let r = put(
        "/db/_local/ck",
        json!({"_rev": "0-1", "_revisions": {"start": 0, "ids": ["1"]}, "h": 2}),
    );
    assert_eq!(
        (r.status, r.json()["rev"].clone()),
        (201, json!("0-2")),
        "{}",
        r.text
    );
    assert_eq!(
        put("/db/_local/ck", json!({"h": 3})).json()["rev"],
        "0-1",
        "no revision: overwritten as 0-1"
    );
    assert_eq!(
        put("/db/_local/ck", json!({"_rev": "0-7", "h": 4})).json()["rev"],
        "0-8"
    );
    assert_eq!(
        c.get("/db/_local/ck").json(),
        json!({"_id": "_local/ck", "_rev": "0-8", "h": 4})
    );
    let r = put(
        "/db/_local/other",
        json!({"_revisions": {"start": 0, "ids": ["5", "3", "1"]}}),
    );
    assert_eq!(r.json()["rev"], "0-6", "the newest id counts");
    let r = c.delete("/db/_local/ck");
    assert_eq!(
        (r.status, r.json()),
        (200, json!({"ok": true, "id": "_local/ck", "rev": "0-0"})),
        "deleted without a revision"
    );
    c.get("/db/_local/ck").error(404, "not_found");
    c.delete("/db/_local/ck").error(404, "not_found");
    assert_eq!(
        c.post(
            "/db/_bulk_docs",
            &json!({"docs": [{"_id": "_local/b", "_rev": "0-3", "x": 1}]}).to_string()
        )
        .json()[0]["rev"],
        "0-4"
    );
}

/// The IBM Cloudant SDK and Kivik gzip every JSON body they send; CouchDB decodes them.
#[test]
fn gzip_encoded_json_bodies_are_decoded() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/db", "").status, 201);
    let send = |method: &str, path: &str, body: &str, encoding: &str| {
        let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
        let data = if encoding == "gzip" {
            gzip(body)
        } else {
            body.as_bytes().to_vec()
        };
        let head = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Encoding: {encoding}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", common::admin_auth(), data.len());
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&data).unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).unwrap();
        out
    };
    assert!(send("PUT", "/db/doc", r#"{"v":1}"#, "gzip").starts_with("HTTP/1.1 201"));
    assert!(send(
        "POST",
        "/db/_bulk_docs",
        r#"{"docs":[{"_id":"b","v":2}]}"#,
        "gzip"
    )
    .starts_with("HTTP/1.1 201"));
    let found = send("POST", "/db/_find", r#"{"selector":{"v":2}}"#, "gzip");
    assert!(
        found.starts_with("HTTP/1.1 200") && found.contains(r#""_id":"b""#),
        "{found}"
    );
    let keys = send("POST", "/db/_all_docs", r#"{"keys":["doc"]}"#, "gzip");
    assert!(keys.contains(r#""id":"doc""#), "{keys}");
    assert_eq!(c.get("/db/doc").json()["v"], 1);
    let deflate = send("PUT", "/db/d2", r#"{"v":1}"#, "deflate");
    assert!(
        deflate.starts_with("HTTP/1.1 415")
            && deflate.contains("deflate is not a supported content encoding."),
        "{deflate}"
    );
    let mut broken = gzip(r#"{"v":1}"#);
    broken.truncate(8);
    let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
    let head = format!("PUT /db/d3 HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", common::admin_auth(), broken.len());
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&broken).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    assert!(
        out.starts_with("HTTP/1.1 400") && out.contains("Request body is not properly gzipped."),
        "{out}"
    );
    c.get("/db/d3").error(404, "not_found");
}

/// The IBM Cloudant SDK logs in with `username`; nano's cookie jar reads `Expires`.
#[test]
fn session_logins_take_username_and_cookies_carry_expires() {
    let s = TestServer::start();
    let anon = s.anon();
    let r = anon.post(
        "/_session",
        &json!({"username": common::ADMIN.0, "password": common::ADMIN.1}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let cookie = r.header("set-cookie").unwrap().to_string();
    let attrs: Vec<&str> = cookie
        .split("; ")
        .skip(1)
        .map(|a| a.split('=').next().unwrap())
        .collect();
    assert_eq!(
        attrs,
        ["Version", "Expires", "Max-Age", "Path", "HttpOnly"],
        "{cookie}"
    );
    assert!(cookie.contains(" GMT; Max-Age=600"), "{cookie}");
    let form = anon.send(
        "POST",
        "/_session",
        Some(&format!(
            "username={}&password={}",
            common::ADMIN.0,
            common::ADMIN.1
        )),
        &[("Content-Type", "application/x-www-form-urlencoded")],
    );
    assert_eq!(form.status, 200, "{}", form.text);
    anon.post("/_session", r#"{"name":"a","username":"b","password":"p"}"#)
        .error(400, "bad_request");
    assert_eq!(
        anon.post("/_session", r#"{"password":"p"}"#).json()["reason"],
        "request body must contain a username"
    );
    anon.send(
        "POST",
        "/_session",
        Some("name=a"),
        &[("Content-Type", "text/plain")],
    )
    .error(415, "bad_content_type");
    let value = cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("AuthSession=")
        .to_string();
    let mut by_cookie = Client::new(&s.url, None);
    by_cookie
        .extra
        .push(("Cookie".into(), format!("AuthSession={value}")));
    assert_eq!(
        by_cookie.get("/_session").json()["userCtx"]["name"],
        common::ADMIN.0
    );
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
    assert!(
        out.starts_with("HTTP/1.1 400") && out.contains("attachment longer than expected"),
        "{out}"
    );
    assert!(
        out.to_ascii_lowercase().contains("connection: close"),
        "{out}"
    );
    assert_eq!(
        out.matches("HTTP/1.1").count(),
        1,
        "the extra byte is not taken for a request: {out}"
    );
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
        s.anon()
            .post("/_session", r#"{"name":"newbie","password":"guess"}"#);
        Client::new(&s.url, Some(("newcomer", "guess"))).get("/");
    }
    for name in ["newbie", "newcomer"] {
        let user = json!({"name": name, "password": "right", "roles": [], "type": "user"});
        assert_eq!(
            admin
                .put(
                    &format!("/_users/org.couchdb.user:{name}"),
                    &user.to_string()
                )
                .status,
            201
        );
        assert_eq!(
            Client::new(&s.url, Some((name, "right")))
                .get("/_session")
                .json()["userCtx"]["name"],
            name,
            "{name} is not locked out"
        );
    }
    let stored = admin.get("/_users/org.couchdb.user:newbie").json();
    assert_eq!(
        (
            &stored["iterations"],
            &stored["pbkdf2_prf"],
            &stored["password_scheme"]
        ),
        (&json!(600000), &json!("sha256"), &json!("pbkdf2"))
    );
}

/// `/_node/{this node's name}/...` answers as `/_node/_local/...` does (Fauxton and the
/// replicator name the node); another name is CouchDB's 404.
#[test]
fn the_node_answers_to_its_own_name() {
    let s = TestServer::start();
    let c = s.admin();
    let name = c.get("/_node/_local").json()["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(c.get("/_membership").json()["all_nodes"], json!([name]));
    c.put("/_node/_local/_config/couchdb/max_dbs_open", r#""321""#);
    let by_name = c.get(&format!("/_node/{name}/_config/couchdb/max_dbs_open"));
    assert_eq!((by_name.status, by_name.json()), (200, json!("321")));
    let r = c.put(
        &format!("/_node/{name}/_config/couchdb/max_dbs_open"),
        r#""322""#,
    );
    assert_eq!((r.status, r.json()), (200, json!("321")));
    let local = c.get("/_node/_local/_config/couchdb/max_dbs_open");
    assert_eq!(local.json(), json!("322"));
    let section = c.get(&format!("/_node/{name}/_config/couchdb"));
    assert_eq!(section.json()["max_dbs_open"], "322");
    let other = c.get("/_node/nonode@nohost/_config");
    assert_eq!(
        (other.status, other.json()),
        (
            404,
            json!({"error": "not_found", "reason": "no such node: nonode@nohost"})
        )
    );
}

/// Error answers keep the connection open: two requests pipelined on one connection, the
/// first refused (501, 404, 405, 400), each get their answer.
#[test]
fn error_answers_keep_the_connection_alive() {
    let s = TestServer::start();
    let auth = common::admin_auth();
    for first in [
        "GET /_cluster_setup HTTP/1.1",
        "GET /nodb HTTP/1.1",
        "PATCH / HTTP/1.1",
        "GET /_uuids?count=x HTTP/1.1",
    ] {
        let request = format!(
            "{first}\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n\
             GET / HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n"
        );
        let answer = raw(&s, request.as_bytes());
        assert_eq!(
            answer.matches("HTTP/1.1 ").count(),
            2,
            "{first}: both answered on one connection:\n{answer}"
        );
        assert!(answer.contains("\"couchdb\":\"Welcome\""), "{answer}");
        assert!(!answer.to_ascii_lowercase().contains("connection: close"));
    }
}

/// `_changes` filters are named and fail as CouchDB's are (PouchDB's and CouchDB's own suites
/// check these): a filter that throws fails the request with a 500 naming the exception, in
/// every feed, and a feed that already answered is cut short rather than ended as if whole.
#[test]
fn changes_filters_fail_as_couchdb_does() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db?q=1", "");
    c.put("/db/a", r#"{"n":1}"#);
    c.put("/db/b", r#"{"n":2}"#);
    let ddoc = json!({
        "views": {
            "v": {"map": "function(doc){ if (doc.n > 1) emit(doc.n, null); }"},
            "bad": {"map": "function(doc){ if (doc.n > 1) throw new Error('m'); emit(1, null); }"}
        },
        "filters": {
            "throws": "function(doc, req){ if (doc.n == 2) throw new TypeError('bad'); return true; }",
            "forbids": "function(doc, req){ if (doc.n == 2) throw({forbidden: 'x'}); return true; }",
            "named": "function(doc, req){ throw({error: 'e', reason: 'r'}); }",
            "truthy": "function(doc, req){ return doc.n == 1 ? 'yes' : 0; }"
        }
    });
    assert_eq!(c.put("/db/_design/d", &ddoc.to_string()).status, 201);
    c.put("/db/_design/e", "{}");
    let answer = |q: &str| {
        let r = c.get(&format!("/db/_changes?{q}"));
        (r.status, r.json())
    };
    let err = |status: u16, error: &str, reason: &str| {
        (status, json!({"error": error, "reason": reason}))
    };
    let not_found = |reason: &str| err(404, "not_found", reason);
    let bad = |reason: &str| err(400, "bad_request", reason);
    assert_eq!(
        answer("filter=_view"),
        bad("`view` filter parameter is not provided.")
    );
    assert_eq!(
        answer("filter=_view&view=d/nope"),
        not_found("missing json key: nope")
    );
    assert_eq!(
        answer("filter=_view&view=e/v"),
        not_found("missing json key: views")
    );
    assert_eq!(answer("filter=_view&view=x/v"), not_found("missing"));
    assert_eq!(
        answer("filter=x"),
        bad("`filter` must be of the form `designname/filtername`")
    );
    assert_eq!(answer("filter=x/f"), not_found("missing"));
    assert_eq!(answer("filter=e/f"), not_found("missing json key: filters"));
    assert_eq!(answer("filter=d/nope"), not_found("missing json key: nope"));
    for feed in ["normal", "longpoll", "continuous", "eventsource"] {
        assert_eq!(
            answer(&format!("filter=d/throws&feed={feed}&timeout=100")),
            err(500, "TypeError", "bad"),
            "{feed}"
        );
    }
    assert_eq!(
        answer("filter=d/forbids"),
        err(500, "unknown_error", "unnamed_error")
    );
    assert_eq!(answer("filter=d/named"), err(500, "e", "r"));
    assert_eq!(answer("filter=_view&view=d/bad"), err(500, "Error", "m"));
    // Truthy answers pass; a filter is only asked about the rows the feed reaches.
    let ids = |q: &str| -> Vec<Value> {
        let (status, body) = answer(q);
        assert_eq!(status, 200, "{q}: {body}");
        body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].clone())
            .collect()
    };
    assert_eq!(ids("filter=d/truthy"), vec![json!("a")]);
    assert_eq!(ids("filter=d/throws&limit=1"), vec![json!("a")]);
    assert_eq!(ids("filter=_view&view=d/v"), vec![json!("b")]);
    // A live feed whose filter fails on a later write ends there, without a `last_seq`.
    let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
    let head = format!(
        "GET /db/_changes?feed=continuous&since=now&filter=d/throws&timeout=20000 HTTP/1.1\r\n\
         Host: x\r\nAuthorization: {}\r\n\r\n",
        common::admin_auth()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .unwrap();
    let mut first = [0u8; 12];
    stream.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    c.put("/db/c", r#"{"n":1}"#);
    c.put("/db/later", r#"{"n":2}"#);
    // The body ends (its last chunk) although the feed's timeout is far off.
    let mut rest = String::new();
    while !rest.ends_with("\r\n0\r\n\r\n") {
        let mut buf = [0u8; 4096];
        let n = stream.read(&mut buf).expect("the feed ends");
        assert!(n > 0, "closed before the last chunk: {rest}");
        rest.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(rest.contains(r#""id":"c""#), "{rest}");
    assert!(
        !rest.contains("later") && !rest.contains("last_seq"),
        "{rest}"
    );
    assert_eq!(c.get("/db/_changes?filter=d/truthy").status, 200);
}

/// `scripts/diff-couchdb` over every script in `scripts/diff/`, against a real CouchDB 3.5
/// (skipped, saying so, where none can be started): no difference but those each step marks
/// with its reason.
#[test]
fn the_differential_scripts_find_no_unexpected_difference() {
    let Some(couch) = common::ReferenceCouch::start("differential scripts") else {
        return;
    };
    let s = TestServer::start();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/diff-couchdb");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(["--settee", &s.url, "--couchdb", &couch.url])
        .args([
            "--settee-auth",
            &format!("{}:{}", common::ADMIN.0, common::ADMIN.1),
        ])
        .args(["--couchdb-auth", "admin:admin"])
        .output()
        .expect("run scripts/diff-couchdb");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "differences from CouchDB:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(" 0 unexpected differences"), "{text}");
}

/// A `multipart/form-data` POST to a document adds the files sent as `_attachments` at the
/// form's `_rev` (CouchDB's form upload), keeping the other attachments; like CouchDB it
/// needs a `Referer` on the same host and a form content type.
#[test]
fn form_uploads_add_attachments_as_couchdb_does() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let r = c.put(
        "/db/d",
        r#"{"keep":1,"_attachments":{"old.txt":{"content_type":"text/plain","data":"b2xk"}}}"#,
    );
    let rev = r.json()["rev"].as_str().unwrap().to_string();
    let host = s.url.trim_start_matches("http://").to_string();
    let form = |rev: &str| {
        format!(
            "--XyZ\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n{rev}\r\n\
             --XyZ\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"new.txt\"\r\n\
             Content-Type: text/plain\r\n\r\nhello form\r\n--XyZ--\r\n"
        )
    };
    let referer = format!("http://{host}/_utils/");
    let post = |body: &str, headers: &[(&str, &str)]| c.send("POST", "/db/d", Some(body), headers);
    let form_type = ("Content-Type", "multipart/form-data; boundary=XyZ");
    let refused = post(&form(&rev), &[form_type]);
    assert_eq!(
        (refused.status, refused.json()),
        (
            400,
            json!({"error": "bad_request", "reason": "Referer header required."})
        )
    );
    let refused = post(
        &form(&rev),
        &[form_type, ("Referer", "http://elsewhere:1/x")],
    );
    assert_eq!(refused.json()["reason"], "Referer header must match host.");
    let refused = post(
        &form(&rev),
        &[("Content-Type", "application/json"), ("Referer", &referer)],
    );
    assert_eq!(
        (refused.status, refused.json()),
        (
            415,
            json!({"error": "bad_content_type", "reason": "Content-Type must be multipart/form-data"})
        )
    );
    let stale = post(
        &form("1-0123456789abcdef0123456789abcdef"),
        &[form_type, ("Referer", &referer)],
    );
    assert_eq!(stale.status, 404, "{}", stale.text);
    let done = post(&form(&rev), &[form_type, ("Referer", &referer)]);
    assert_eq!(done.status, 201, "{}", done.text);
    let new_rev = done.json()["rev"].as_str().unwrap().to_string();
    assert!(new_rev.starts_with("2-"), "{new_rev}");
    assert_eq!(done.header("etag"), Some(format!("\"{new_rev}\"").as_str()));
    assert_eq!(c.get("/db/d/new.txt").text, "hello form");
    assert_eq!(c.get("/db/d/old.txt").text, "old");
    assert_eq!(c.get("/db/d").json()["keep"], 1);
    // The same form again names a revision no longer current: a conflict.
    let again = post(&form(&rev), &[form_type, ("Referer", &referer)]);
    assert_eq!(again.status, 409, "{}", again.text);
}

/// A users database of one's own (`[chttpd_auth] authentication_db`) with its own
/// `validate_doc_update`: accounts in it are checked by it, log in, and `/_session` names
/// the database, as CouchDB's does once the setting is made.
#[test]
fn a_custom_authentication_db_validates_and_logs_in() {
    let s = TestServer::start();
    let c = s.admin();
    assert!(c.get("/_session").json()["info"]
        .get("authentication_db")
        .is_none());
    common::set_config(&c, "chttpd_auth", "authentication_db", "myusers");
    assert_eq!(c.put("/myusers", "").status, 201);
    let vdu = "function(n, o, u) { if (n.type == 'user' && !n.department) throw({forbidden: 'department required'}); }";
    let r = c.put(
        "/myusers/_design/dept",
        &json!({ "validate_doc_update": vdu }).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let ann = json!({"name": "ann", "password": "pw", "roles": [], "type": "user"});
    let refused = c.put("/myusers/org.couchdb.user:ann", &ann.to_string());
    assert_eq!(
        (refused.status, refused.json()),
        (
            403,
            json!({"error": "forbidden", "reason": "department required"})
        )
    );
    let mut with_dept = ann.clone();
    with_dept["department"] = json!("x");
    let made = c.put("/myusers/org.couchdb.user:ann", &with_dept.to_string());
    assert_eq!(made.status, 201, "{}", made.text);
    let ann_client = Client::new(&s.url, Some(("ann", "pw")));
    let session = ann_client.get("/_session").json();
    assert_eq!(session["userCtx"], json!({"name": "ann", "roles": []}));
    assert_eq!(session["info"]["authentication_db"], "myusers");
    let login = Client::new(&s.url, None).post("/_session", r#"{"name":"ann","password":"pw"}"#);
    assert_eq!(
        login.json(),
        json!({"ok": true, "name": "ann", "roles": []})
    );
}

/// `_design_docs` with `keys` answers only design documents (a non-design id is left out,
/// a missing design id is `not_found`), in the order asked, and pages as CouchDB does.
#[test]
fn design_docs_take_keys_and_ranges_as_couchdb_does() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db?q=1", "");
    let docs = json!({"docs": [{"_id": "_design/a"}, {"_id": "_design/b"}, {"_id": "_design/c"}, {"_id": "doc1"}]});
    c.post("/db/_bulk_docs", &docs.to_string());
    let keys = json!({"keys": ["_design/c", "_design/zz", "_design/a", "doc1"]});
    let listed = c.post("/db/_design_docs", &keys.to_string()).json();
    let rev = listed["rows"][0]["value"]["rev"].clone();
    assert_eq!(
        listed,
        json!({"total_rows": 3, "offset": null, "rows": [
            {"id": "_design/c", "key": "_design/c", "value": {"rev": rev}},
            {"key": "_design/zz", "error": "not_found"},
            {"id": "_design/a", "key": "_design/a", "value": {"rev": rev}}
        ]})
    );
    let paged = c
        .get("/db/_design_docs?start_key=%22_design/b%22&limit=1&skip=1")
        .json();
    assert_eq!(
        (paged["offset"].clone(), paged["rows"][0]["id"].clone()),
        (json!(2), json!("_design/c"))
    );
}

/// CommonJS `require` as CouchDB's: `./` and `../` relative to the requiring module, and a
/// module required again while it loads gets an empty object, not its exports so far.
#[test]
fn circular_requires_get_an_empty_object_as_in_couchdb() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    c.put("/db/x", "{}");
    let ddoc = json!({"views": {
        "lib": {
            "a": "exports.early = 1; exports.fromB = require('views/lib/b').value; exports.value = 'a';",
            "b": "var a = require('views/lib/a'); exports.sawA = JSON.stringify(a); exports.value = 'b';",
            "c": "exports.up = require('./sub/d').name;",
            "sub": {"d": "exports.name = 'd:' + require('../e').name;"},
            "e": "exports.name = 'e';"
        },
        "circular": {"map": "function(doc){ var a = require('views/lib/a'); var b = require('views/lib/b'); emit([a.early, a.fromB, a.value, b.sawA, b.value], null); }"},
        "relative": {"map": "function(doc){ emit(require('views/lib/c').up, null); }"}
    }});
    assert_eq!(c.put("/db/_design/r", &ddoc.to_string()).status, 201);
    let key =
        |view: &str| c.get(&format!("/db/_design/r/_view/{view}")).json()["rows"][0]["key"].clone();
    assert_eq!(key("circular"), json!([1, "b", "a", "{}", "b"]));
    assert_eq!(key("relative"), json!("d:e"));
}

/// Builtin reduce names as CouchDB reads them: by the text they start with.
#[test]
fn builtin_reduce_names_are_read_by_their_start() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    c.post("/db/_bulk_docs", r#"{"docs":[{"n":2},{"n":5}]}"#);
    let map = "function(doc){ emit(doc.n, doc.n); }";
    let ddoc = json!({"views": {
        "sum": {"map": map, "reduce": "_sum\n"},
        "stats": {"map": map, "reduce": "_stats2"},
        "top": {"map": map, "reduce": "_top_1"}
    }});
    assert_eq!(c.put("/db/_design/b", &ddoc.to_string()).status, 201);
    let value = |view: &str| {
        c.get(&format!("/db/_design/b/_view/{view}")).json()["rows"][0]["value"].clone()
    };
    assert_eq!(value("sum"), json!(7));
    assert_eq!(value("stats")["max"], json!(5));
    assert_eq!(value("top"), json!([5]));
    let bad = json!({"views": {"v": {"map": map, "reduce": "_nonsense"}}});
    c.put("/db/_design/bad", &bad.to_string())
        .error(400, "invalid_design_doc");
}

/// A `multipart/related` upload whose parts carry their own `Content-Length` and
/// `Content-Type` headers (as some clients send them), one of them gzip-encoded.
#[test]
fn multipart_parts_with_their_own_headers_are_read() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let plain = "hello multipart world";
    let gz = {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(plain.as_bytes()).unwrap();
        enc.finish().unwrap()
    };
    let doc = json!({"_attachments": {
        "a.txt": {"follows": true, "content_type": "text/plain", "length": plain.len()},
        "g.txt": {"follows": true, "content_type": "text/plain", "length": plain.len(),
                  "encoding": "gzip", "encoded_length": gz.len()}
    }})
    .to_string();
    let mut body = Vec::new();
    let part = |body: &mut Vec<u8>, headers: String, bytes: &[u8]| {
        body.extend_from_slice(format!("--B0\r\n{headers}\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    };
    part(
        &mut body,
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            doc.len()
        ),
        doc.as_bytes(),
    );
    part(
        &mut body,
        format!("Content-Length: {}\r\n", plain.len()),
        plain.as_bytes(),
    );
    part(
        &mut body,
        format!("Content-Length: {}\r\nContent-Encoding: gzip\r\n", gz.len()),
        &gz,
    );
    body.extend_from_slice(b"--B0--");
    let head = format!(
        "PUT /db/d HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: multipart/related; boundary=\"B0\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        common::admin_auth(),
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(&body);
    let answer = raw(&s, &request);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(c.get("/db/d/a.txt").text, plain);
    assert_eq!(c.get("/db/d/g.txt").text, plain);
    let info = c.get("/db/d").json();
    assert_eq!(info["_attachments"]["g.txt"]["length"], plain.len());
}

/// An answer given before the request's body was read says it closes the connection, so a
/// client does not send its next request on a connection about to go.
#[test]
fn an_answer_before_the_body_is_read_closes_the_connection() {
    let s = TestServer::start();
    let head = format!(
        "PUT /nodb/doc HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{\"a\":",
        common::admin_auth()
    );
    let answer = raw(&s, head.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
}

/// Values of every JSON shape, chosen by a fixed sequence: scalars CouchDB's decoder reads
/// differently (integers and floats, `-0`, big integers, escapes), lists of small integers
/// (which Erlang writes as strings of bytes), nested lists and objects.
fn varied_value(seed: &mut u64, depth: u32) -> Value {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    let pick = (*seed >> 33) as usize;
    let scalars = [
        "null",
        "true",
        "false",
        "0",
        "-0",
        "7",
        "255",
        "256",
        "-1",
        "1.0",
        "1e3",
        "0.25",
        "123456789012345678901234567890",
        r#""""#,
        r#""\u00e9\/\n""#,
        r#""\ud83d\ude00""#,
        "[1,2,3]",
        "[0,255]",
        "[255,256]",
        "[1,\"x\"]",
        "[]",
        "{}",
    ];
    match (depth, pick % 4) {
        (3.., _) | (_, 0 | 1) => serde_json::from_str(scalars[pick % scalars.len()]).unwrap(),
        (_, 2) => Value::Array(
            (0..pick % 4)
                .map(|_| varied_value(seed, depth + 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..pick % 4)
                .map(|k| (format!("k{k}"), varied_value(seed, depth + 1)))
                .collect(),
        ),
    }
}

/// A document's revision id is the one CouchDB gives the same edit, for any body: first
/// revisions, edits on top of them and deletions (replicas that made the same edit agree).
#[test]
fn revision_ids_are_couchdbs_for_any_body() {
    let Some(couch) = common::ReferenceCouch::start("revision_ids_are_couchdbs_for_any_body")
    else {
        return;
    };
    let s = TestServer::start();
    let servers = [s.admin(), couch.admin()];
    for c in &servers {
        assert_eq!(c.put("/revs", "").status, 201);
    }
    let mut seed = 27;
    for i in 0..120 {
        let body = varied_value(&mut seed, 0);
        let body = match body {
            Value::Object(o) => Value::Object(o),
            other => json!({ "v": other }),
        };
        let path = format!("/revs/d{i}");
        let revs: Vec<Value> = servers
            .iter()
            .map(|c| c.put(&path, &body.to_string()).json()["rev"].clone())
            .collect();
        assert_eq!(revs[0], revs[1], "first revision of {body}");
        let mut edited = json!({ "_rev": revs[0], "again": varied_value(&mut seed, 1) });
        edited["was"] = body.clone();
        let revs: Vec<Value> = servers
            .iter()
            .map(|c| c.put(&path, &edited.to_string()).json()["rev"].clone())
            .collect();
        assert_eq!(revs[0], revs[1], "second revision of {edited}");
        let gone: Vec<Value> = servers
            .iter()
            .map(|c| {
                c.delete(&format!("{path}?rev={}", revs[0].as_str().unwrap()))
                    .json()["rev"]
                    .clone()
            })
            .collect();
        assert!(gone[0].is_string(), "{gone:?}");
        assert_eq!(gone[0], gone[1], "deletion of {edited}");
    }
}
