//! Show, list, update and rewrite functions (`_show`, `_list`, `_update`, `_rewrite`) in
//! JavaScript and through an external query server, and `validate_doc_update` through one:
//! CouchDB's request object, response objects, content negotiation, ETags, streamed lists,
//! saved updates, rewrite rules, errors; and the same requests answered as the reference
//! CouchDB answers them.

mod common;

use std::path::PathBuf;

use common::{Client, ReferenceCouch, Resp, TestServer};
use serde_json::{json, Value};

/// The JavaScript design document every test here uses.
fn app_ddoc() -> Value {
    json!({
        "shows": {
            "hello": "function(doc, req) { return {body: 'Hello ' + (doc ? doc.name : 'nobody') + ' ' + req.query.x, headers: {'X-Id': String(req.id)}}; }",
            "req": "function(doc, req) { return {json: {doc: doc, id: req.id, method: req.method, query: req.query, body: req.body, form: req.form, path: req.path, requested_path: req.requested_path, raw_path: req.raw_path, peer: req.peer, cookie: req.cookie, userCtx: req.userCtx, secObj: req.secObj, db: req.info.db_name, uuid: req.uuid.length, headers: Object.keys(req.headers).filter(function(h) { return h != 'Host' && h != 'User-Agent' && h != 'Content-Length'; })}}; }",
            "fmt": "function(doc, req) { provides('html', function() { return '<p>' + doc.name + '</p>'; }); provides('json', function() { return JSON.stringify({name: doc.name}); }); }",
            "named": "function(doc, req) { throw({error: req.query.e, reason: 'because'}); }",
            "plain": "function(doc, req) { throw 'boom'; }",
            "raw": "function(doc, req) { return {base64: 'aGk=', code: 203, headers: {'Content-Type': 'text/plain'}}; }",
            "bogus": "function(doc, req) { return {bogus: 1}; }",
            "nothing": "function(doc, req) { }",
            "spin": "function(doc, req) { while (true) {} }"
        },
        "lists": {
            "ul": "function(head, req) { start({headers: {'Content-Type': 'text/html', 'X-Total': String(head.total_rows)}}); send('<ul>'); var row; while ((row = getRow())) { send('<li>' + row.key + '=' + row.value + (row.doc ? '+' : '') + '</li>'); } return '</ul>'; }",
            "csv": "function(head, req) { provides('csv', function() { var row; while ((row = getRow())) { send(row.key + ',' + row.value + '\\n'); } }); }",
            "head": "function(head, req) { return toJSON(head); }",
            "coded": "function(head, req) { start({code: 201}); return 'x'; }",
            "early": "function(head, req) { throw({error: 'early', reason: 'before any output'}); }",
            "late": "function(head, req) { send('one;'); getRow(); send('two;'); getRow(); throw({error: 'midway', reason: 'after output'}); }"
        },
        "updates": {
            "bump": "function(doc, req) { if (!doc) { return [{_id: req.id || req.uuid, n: 1}, 'created']; } doc.n += 1; return [doc, {json: {n: doc.n}}]; }",
            "none": "function(doc, req) { return [null, {code: 202, body: 'nothing'}]; }",
            "coded": "function(doc, req) { return [{_id: 'coded'}, {code: 299, body: 'mine'}]; }",
            "noid": "function(doc, req) { return [{x: 1}, 'no id']; }",
            "stale": "function(doc, req) { return [{_id: 'a', _rev: '1-0000', x: 1}, 'stale']; }",
            "bad": "function(doc, req) { return [{_id: 'bad', bad: true}, 'bad']; }",
            "form": "function(doc, req) { return [{_id: req.form.id, title: req.form.title}, 'saved ' + req.form.id]; }",
            "undef": "function(doc, req) { return [null]; }"
        },
        "views": {
            "by_name": {"map": "function(doc) { if (doc.name) emit(doc.name, doc.n || 0); }", "reduce": "_sum"}
        },
        "validate_doc_update": "function(doc) { if (doc.bad) throw({forbidden: 'no bad documents'}); }",
        "rewrites": [
            {"from": "/hello/:id", "to": "_show/hello/:id", "method": "GET"},
            {"from": "/people", "to": "_list/ul/by_name", "query": {"reduce": "false"}},
            {"from": "/named/:name", "to": "_view/by_name", "query": {"key": ":name", "reduce": "false"}},
            {"from": "/doc/:id", "to": "../../:id"},
            {"from": "/all/*", "to": "../../_all_docs"},
            {"from": "/loop", "to": "_rewrite/loop"},
            {"from": "/up/*", "to": "../../*"}
        ]
    })
}

/// The design document of the rewrite function tests.
fn js_rewrite_ddoc() -> Value {
    json!({"rewrites": "function(req) { var last = req.path[req.path.length - 1]; if (last === 'none') return false; if (last === 'teapot') return {code: 418, body: 'tea', headers: {'X-Pot': 'yes'}}; if (last === 'number') return 5; if (last === 'nopath') return {query: {}}; if (last === 'q') return {path: '../../_all_docs', query: {limit: '1'}}; return '../../' + last; }"})
}

fn fill(c: &Client) {
    assert_eq!(c.put("/rt", "").status, 201);
    assert_eq!(
        c.put("/rt/_design/app", &app_ddoc().to_string()).status,
        201
    );
    assert_eq!(
        c.put("/rt/_design/fn", &js_rewrite_ddoc().to_string())
            .status,
        201
    );
    let docs =
        json!({"docs": [{"_id": "a", "name": "Ann", "n": 1}, {"_id": "b", "name": "Bob", "n": 2}]});
    assert_eq!(c.post("/rt/_bulk_docs", &docs.to_string()).status, 201);
}

fn get(c: &Client, path: &str, headers: &[(&str, &str)]) -> Resp {
    c.send("GET", path, None, headers)
}

fn error(r: &Resp) -> (u16, String, String) {
    let v = r.json();
    (
        r.status,
        v["error"].as_str().unwrap_or_default().to_string(),
        v["reason"].as_str().unwrap_or_default().to_string(),
    )
}

fn err(status: u16, e: &str, reason: &str) -> (u16, String, String) {
    (status, e.to_string(), reason.to_string())
}

#[test]
fn shows_answer_with_couchdbs_request_object_negotiation_and_etags() {
    let s = TestServer::start();
    let c = s.admin();
    fill(&c);
    let r = get(&c, "/rt/_design/app/_show/hello/a?x=1", &[]);
    assert_eq!((r.status, r.text.as_str()), (200, "Hello Ann 1"));
    assert_eq!(r.header("x-id"), Some("a"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("content-security-policy"), Some("sandbox"));
    assert_eq!(r.header("vary"), Some("Accept"));
    let etag = r.header("etag").expect("an ETag").to_string();
    let again = get(
        &c,
        "/rt/_design/app/_show/hello/a?x=1",
        &[("if-none-match", &etag)],
    );
    assert_eq!((again.status, again.text.as_str()), (304, ""));
    let rev = c.get("/rt/a").json()["_rev"].as_str().unwrap().to_string();
    let body = json!({"_rev": rev, "name": "Anne", "n": 1});
    assert_eq!(c.put("/rt/a", &body.to_string()).status, 201);
    let changed = get(
        &c,
        "/rt/_design/app/_show/hello/a?x=1",
        &[("if-none-match", &etag)],
    );
    assert_eq!(
        (changed.status, changed.text.as_str()),
        (200, "Hello Anne 1"),
        "a new revision, a new ETag"
    );
    assert_eq!(
        get(&c, "/rt/_design/app/_show/hello?x=2", &[]).text,
        "Hello nobody 2"
    );
    assert_eq!(
        get(&c, "/rt/_design/app/_show/hello/gone?x=3", &[]).text,
        "Hello nobody 3"
    );

    // The request object.
    let r = get(
        &c,
        "/rt/_design/app/_show/req/b?x=1&key=%22k%22&limit=3",
        &[("x-mY-header", "v"), ("accept", "application/json")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.header("content-security-policy").is_none());
    let v = r.json();
    assert_eq!(v["doc"]["name"], "Bob");
    assert_eq!(v["doc"]["_revisions"]["start"], 1);
    assert_eq!(v["id"], "b");
    assert_eq!(v["method"], "GET");
    assert_eq!(v["query"], json!({"x": "1", "key": "k", "limit": "3"}));
    assert_eq!(v["body"], "undefined");
    assert_eq!(v["form"], json!({}));
    assert_eq!(
        v["path"],
        json!(["rt", "_design", "app", "_show", "req", "b"])
    );
    assert_eq!(
        v["requested_path"],
        json!([
            "rt",
            "_design",
            "app",
            "_show",
            "req",
            "b?x=1&key=\"k\"&limit=3"
        ])
    );
    assert_eq!(
        v["raw_path"],
        "/rt/_design/app/_show/req/b?x=1&key=%22k%22&limit=3"
    );
    assert_eq!(v["peer"], "127.0.0.1");
    assert_eq!(v["cookie"], json!({}));
    assert_eq!(
        v["userCtx"],
        json!({"db": "rt", "name": "admin", "roles": ["_admin"]})
    );
    assert_eq!(v["db"], "rt");
    assert_eq!(v["uuid"], 32);
    assert_eq!(
        v["headers"],
        json!(["Accept", "X-My-Header"]),
        "no Authorization, names capitalised"
    );
    let r = c.send(
        "POST",
        "/rt/_design/app/_show/req?q=1",
        Some("f1=v1&f2=a+b%20c"),
        &[("content-type", "application/x-www-form-urlencoded")],
    );
    let v = r.json();
    assert_eq!(
        (v["id"].clone(), v["method"].clone()),
        (Value::Null, json!("POST"))
    );
    assert_eq!(v["body"], "f1=v1&f2=a+b%20c");
    assert_eq!(v["form"], json!({"f1": "v1", "f2": "a b c"}));
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_show/req?key=nope", &[])),
        err(400, "bad_request", "invalid UTF-8 JSON")
    );

    // Content negotiation.
    let html = get(
        &c,
        "/rt/_design/app/_show/fmt/b",
        &[("accept", "text/html")],
    );
    assert_eq!(
        (html.text.as_str(), html.header("content-type")),
        ("<p>Bob</p>", Some("text/html; charset=utf-8"))
    );
    let json = get(&c, "/rt/_design/app/_show/fmt/b?format=json", &[]);
    assert_eq!(
        (json.text.as_str(), json.header("content-type")),
        ("{\"name\":\"Bob\"}", Some("application/json"))
    );
    let refused = get(
        &c,
        "/rt/_design/app/_show/fmt/b",
        &[("accept", "image/png")],
    );
    assert_eq!(error(&refused), err(406, "not_acceptable", "Content-Type image/png not supported, try one of: application/json, text/x-json, text/html; charset=utf-8"));

    // Response objects.
    let raw = get(&c, "/rt/_design/app/_show/raw", &[]);
    assert_eq!(
        (raw.status, raw.text.as_str(), raw.header("content-type")),
        (203, "hi", Some("text/plain"))
    );
    let empty = get(&c, "/rt/_design/app/_show/nothing", &[]);
    assert_eq!(
        (
            empty.status,
            empty.text.as_str(),
            empty.header("content-type")
        ),
        (200, "", Some("application/json"))
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_show/bogus", &[])),
        err(
            500,
            "external_response_error",
            "Invalid data from external server: {<<\"bogus\">>,1}"
        )
    );

    // Errors: thrown names keep CouchDB's statuses; a missing document fails as itself.
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_show/named?e=forbidden", &[])),
        err(403, "forbidden", "because")
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_show/named?e=mine", &[])),
        err(500, "mine", "because")
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_show/named/gone?e=mine", &[])),
        err(404, "not_found", "document not found")
    );
    let plain = error(&get(&c, "/rt/_design/app/_show/plain", &[]));
    assert_eq!((plain.0, plain.1.as_str()), (500, "render_error"));
    assert!(
        plain.2.starts_with("function raised error: boom"),
        "{}",
        plain.2
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_show/missing", &[])),
        err(404, "not_found", "missing json key: missing")
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/fn/_show/x", &[])),
        err(404, "not_found", "missing json key: shows")
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_show", &[])),
        err(404, "show_error", "Invalid path.")
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/nope/_show/x", &[])),
        err(404, "not_found", "missing")
    );

    // A function that never returns is stopped at os_process_timeout; the server goes on.
    common::set_config(&c, "couchdb", "os_process_timeout", "300");
    let spin = get(&c, "/rt/_design/app/_show/spin", &[]);
    assert_eq!(
        (spin.status, spin.json()["error"].as_str()),
        (500, Some("os_process_error"))
    );
    assert_eq!(
        get(&c, "/rt/_design/app/_show/hello/b?x=4", &[]).text,
        "Hello Bob 4"
    );
}

#[test]
fn lists_stream_a_views_rows() {
    let s = TestServer::start();
    let c = s.admin();
    fill(&c);
    let r = get(&c, "/rt/_design/app/_list/ul/by_name?reduce=false", &[]);
    assert_eq!(
        (r.status, r.text.as_str()),
        (200, "<ul><li>Ann=1</li><li>Bob=2</li></ul>")
    );
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert_eq!(r.header("x-total"), Some("2"));
    assert_eq!(r.header("content-security-policy"), Some("sandbox"));
    let docs = get(
        &c,
        "/rt/_design/app/_list/ul/by_name?reduce=false&include_docs=true&descending=true&limit=1",
        &[],
    );
    assert_eq!(docs.text, "<ul><li>Bob=2+</li></ul>");
    let csv = get(
        &c,
        "/rt/_design/app/_list/csv/app/by_name?group=true",
        &[("accept", "text/csv")],
    );
    assert_eq!(
        (csv.text.as_str(), csv.header("content-type")),
        ("Ann,1\nBob,2\n", Some("text/csv"))
    );
    let head = get(
        &c,
        "/rt/_design/app/_list/head/by_name?reduce=false&update_seq=true",
        &[],
    );
    let head: Value = serde_json::from_str(&head.text).unwrap();
    assert_eq!(
        (head["total_rows"].clone(), head["offset"].clone()),
        (json!(2), json!(0))
    );
    assert!(head["update_seq"].is_string());
    assert_eq!(
        get(&c, "/rt/_design/app/_list/head/by_name", &[]).text,
        "{}",
        "a reduce list's head"
    );
    let keys = c.send(
        "POST",
        "/rt/_design/app/_list/ul/by_name?reduce=false",
        Some("{\"keys\":[\"Bob\"]}"),
        &[("content-type", "application/json")],
    );
    assert_eq!(keys.text, "<ul><li>Bob=2</li></ul>");
    // Lists with other design documents' views, from another design document.
    let other = json!({"lists": {"ul": app_ddoc()["lists"]["ul"]}});
    assert_eq!(c.put("/rt/_design/other", &other.to_string()).status, 201);
    assert_eq!(
        get(
            &c,
            "/rt/_design/other/_list/ul/app/by_name?reduce=false",
            &[]
        )
        .text,
        "<ul><li>Ann=1</li><li>Bob=2</li></ul>"
    );
    let coded = get(&c, "/rt/_design/app/_list/coded/by_name", &[]);
    assert_eq!(
        (
            coded.status,
            coded.text.as_str(),
            coded.header("content-type")
        ),
        (201, "x", Some("application/json"))
    );

    // Errors before output are answers of their own; after output they end the body.
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_list/early/by_name", &[])),
        err(500, "early", "before any output")
    );
    let late = get(&c, "/rt/_design/app/_list/late/by_name?reduce=false", &[]);
    assert_eq!(late.status, 200);
    assert_eq!(
        late.text,
        "one;two;\n{\"code\":500,\"error\":\"midway\",\"reason\":\"after output\"}\n"
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_list/nope/by_name", &[])),
        err(404, "not_found", "missing json key: nope")
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_list/ul/nope", &[])),
        err(404, "not_found", "missing_named_view")
    );
    assert_eq!(
        error(&get(&c, "/rt/_design/app/_list/ul", &[])),
        err(404, "list_error", "Invalid path.")
    );
    let put = c.put("/rt/_design/app/_list/ul/by_name", "");
    assert_eq!(
        error(&put),
        err(405, "method_not_allowed", "Only GET,POST,HEAD allowed")
    );
    assert_eq!(put.header("allow"), Some("GET,POST,HEAD"));
    let not_json = c.send(
        "POST",
        "/rt/_design/app/_list/ul/by_name",
        Some("{}"),
        &[("content-type", "text/plain")],
    );
    assert_eq!(not_json.status, 415);
    // The server answers other requests after every one of those.
    assert_eq!(
        get(&c, "/rt/_design/app/_list/ul/by_name?reduce=false", &[]).status,
        200
    );
}

#[test]
fn updates_save_what_the_function_returns() {
    let s = TestServer::start();
    let c = s.admin();
    fill(&c);
    let made = c.post("/rt/_design/app/_update/bump/c", "");
    assert_eq!((made.status, made.text.as_str()), (201, "created"));
    let rev = made.header("x-couch-update-newrev").unwrap().to_string();
    assert_eq!(made.header("x-couch-id"), Some("c"));
    assert_eq!(c.get("/rt/c").json()["_rev"], rev.as_str());
    let bumped = c.put("/rt/_design/app/_update/bump/c", "");
    assert_eq!((bumped.status, bumped.json()), (201, json!({"n": 2})));
    assert!(bumped
        .header("x-couch-update-newrev")
        .unwrap()
        .starts_with("2-"));
    let fresh = c.post("/rt/_design/app/_update/bump", "");
    let id = fresh.header("x-couch-id").unwrap().to_string();
    assert_eq!(
        (fresh.status, id.len()),
        (201, 32),
        "a new id from req.uuid"
    );
    assert_eq!(c.get(&format!("/rt/{id}")).json()["n"], 1);
    let odd = c.post("/rt/_design/app/_update/bump/a%20b%2Fc", "");
    assert_eq!(odd.header("x-couch-id"), Some("a%20b%2Fc"));
    let none = c.post("/rt/_design/app/_update/none", "");
    assert_eq!((none.status, none.text.as_str()), (202, "nothing"));
    assert!(none.header("x-couch-id").is_none());
    let coded = c.post("/rt/_design/app/_update/coded", "");
    assert_eq!(
        (coded.status, coded.header("x-couch-id")),
        (299, Some("coded"))
    );
    let form = c.send(
        "POST",
        "/rt/_design/app/_update/form",
        Some("id=f1&title=A+title"),
        &[("content-type", "application/x-www-form-urlencoded")],
    );
    assert_eq!((form.status, form.text.as_str()), (201, "saved f1"));
    assert_eq!(c.get("/rt/f1").json()["title"], "A title");

    // Refusals.
    assert_eq!(
        error(&c.get("/rt/_design/app/_update/bump/c")),
        err(
            405,
            "method_not_allowed",
            "Update functions do not allow GET"
        )
    );
    assert_eq!(
        error(&c.post("/rt/_design/app/_update/noid", "")),
        err(400, "illegal_docid", "Document id must not be empty")
    );
    assert_eq!(
        error(&c.post("/rt/_design/app/_update/stale", "")),
        err(409, "conflict", "Document update conflict.")
    );
    assert_eq!(
        error(&c.post("/rt/_design/app/_update/bad", "")),
        err(403, "forbidden", "no bad documents")
    );
    assert_eq!(
        c.get("/rt/bad").status,
        404,
        "a refused update saves nothing"
    );
    assert_eq!(
        error(&c.post("/rt/_design/app/_update/undef", "")),
        err(
            500,
            "render_error",
            "undefined response from update function"
        )
    );
    assert_eq!(
        error(&c.post("/rt/_design/app/_update/nope", "")),
        err(404, "not_found", "missing json key: nope")
    );
    assert_eq!(
        error(&c.post("/rt/_design/app/_update", "")),
        err(404, "update_error", "Invalid path.")
    );
    // A reader who is no writer cannot update through a function either.
    let users = json!({"_id": "org.couchdb.user:reader", "name": "reader", "type": "user", "roles": [], "password": "pw"});
    assert_eq!(c.post("/_users", &users.to_string()).status, 201);
    let sec = json!({"members": {"names": ["reader"]}});
    assert_eq!(c.put("/rt/_security", &sec.to_string()).status, 200);
    let reader = Client::new(&s.url, Some(("reader", "pw")));
    assert_eq!(
        reader.get("/rt/_design/app/_show/hello/a?x=1").text,
        "Hello Ann 1"
    );
    assert_eq!(
        reader.post("/rt/_design/app/_update/bump/c", "").status,
        201,
        "members write documents"
    );
    assert_eq!(
        Client::new(&s.url, None)
            .post("/rt/_design/app/_update/bump/c", "")
            .status,
        401
    );
}

#[test]
fn rewrites_send_requests_on() {
    let s = TestServer::start();
    let c = s.admin();
    fill(&c);
    assert_eq!(
        c.get("/rt/_design/app/_rewrite/hello/a?x=2").text,
        "Hello Ann 2"
    );
    assert_eq!(
        c.get("/rt/_design/app/_rewrite/people").text,
        "<ul><li>Ann=1</li><li>Bob=2</li></ul>"
    );
    let named = c.get("/rt/_design/app/_rewrite/named/Bob");
    assert_eq!(
        named.json()["rows"],
        json!([{"id": "b", "key": "Bob", "value": 2}])
    );
    assert_eq!(
        c.get("/rt/_design/app/_rewrite/doc/a").json()["name"],
        "Ann"
    );
    assert_eq!(
        c.get("/rt/_design/app/_rewrite/all/x?limit=1").json()["rows"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        error(&c.get("/rt/_design/app/_rewrite/hello/a/b")),
        err(404, "not_found", "missing")
    );
    assert_eq!(
        error(&c.post("/rt/_design/app/_rewrite/hello/a", "")),
        err(404, "not_found", "missing"),
        "rules match methods"
    );
    assert_eq!(
        error(&c.get("/rt/_design/app/_rewrite/loop")),
        err(400, "bad_request", "Exceeded rewrite recursion limit")
    );
    // Rules never reach above the database; each rewritten request is checked again.
    let up = c.get("/rt/_design/app/_rewrite/up/%2E%2E/%2E%2E/_all_dbs");
    assert_eq!(
        up.json()["error"],
        "not_found",
        "a `..` in the path stays in the database"
    );
    let anon = Client::new(&s.url, None);
    let sec = json!({"members": {"roles": ["_admin"]}});
    assert_eq!(c.put("/rt/_security", &sec.to_string()).status, 200);
    assert_eq!(anon.get("/rt/_design/app/_rewrite/doc/a").status, 401);

    // Bad rules fail every request to the design document.
    let bad = json!({"rewrites": [{"from": "/x", "to": "y"}, {"from": "/z"}]});
    assert_eq!(c.put("/rt/_design/bad", &bad.to_string()).status, 201);
    assert_eq!(
        error(&c.get("/rt/_design/bad/_rewrite/x")),
        err(500, "error", "invalid_rewrite_target")
    );
    let insecure = json!({"rewrites": [{"from": "/x", "to": "../../../_all_dbs"}]});
    assert_eq!(
        c.put("/rt/_design/insecure", &insecure.to_string()).status,
        201
    );
    assert_eq!(
        error(&c.get("/rt/_design/insecure/_rewrite/x")),
        err(500, "insecure_rewrite_rule", "too many ../.. segments")
    );
    assert_eq!(
        error(&c.get("/rt/_design/other/_rewrite/x")),
        err(404, "not_found", "missing")
    );

    // Rewrite functions.
    assert_eq!(c.get("/rt/_design/fn/_rewrite/a").json()["name"], "Ann");
    let tea = c.get("/rt/_design/fn/_rewrite/teapot");
    assert_eq!(
        (tea.status, tea.text.as_str(), tea.header("x-pot")),
        (418, "tea", Some("yes"))
    );
    assert_eq!(
        c.get("/rt/_design/fn/_rewrite/q").json()["rows"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        error(&c.get("/rt/_design/fn/_rewrite/none")),
        err(404, "rewrite_error", "Invalid path.")
    );
    assert_eq!(
        error(&c.get("/rt/_design/fn/_rewrite/number")),
        err(500, "rewrite_error", "bad rewrite")
    );
    assert_eq!(
        error(&c.get("/rt/_design/fn/_rewrite/nopath")),
        err(
            500,
            "rewrite_error",
            "Rewrite result must produce a new path."
        )
    );
    assert_eq!(
        error(&c.get("/rt/_design/nope/_rewrite/x")),
        err(404, "not_found", "missing")
    );
}

/// What of an answer is compared between servers: status, content type and body, with the
/// parts that differ by server or by moment (ids, revisions, sizes) left out.
fn comparable(r: &Resp) -> Value {
    let body = serde_json::from_str::<Value>(&r.text).unwrap_or_else(|_| json!(r.text));
    let ctype = r.header("content-type").map(|t| t.to_string());
    json!({"status": r.status, "type": ctype, "body": body})
}

/// A request: method, path, body and headers.
type Request<'a> = (&'a str, &'a str, Option<&'a str>, Vec<(&'a str, &'a str)>);

#[test]
fn answers_match_the_reference_couchdb() {
    let Some(couch) = ReferenceCouch::start("answers_match_the_reference_couchdb") else {
        return;
    };
    let s = TestServer::start();
    let (ours, theirs) = (s.admin(), couch.admin());
    fill(&ours);
    fill(&theirs);
    let requests: Vec<Request> = vec![
        ("GET", "/rt/_design/app/_show/hello/a?x=1", None, vec![]),
        ("GET", "/rt/_design/app/_show/hello?x=1", None, vec![]),
        (
            "GET",
            "/rt/_design/app/_show/fmt/a",
            None,
            vec![("accept", "text/html")],
        ),
        (
            "GET",
            "/rt/_design/app/_show/fmt/a?format=json",
            None,
            vec![],
        ),
        (
            "GET",
            "/rt/_design/app/_show/fmt/a",
            None,
            vec![("accept", "image/png")],
        ),
        (
            "GET",
            "/rt/_design/app/_show/fmt/a",
            None,
            vec![("accept", "*/*")],
        ),
        (
            "GET",
            "/rt/_design/app/_show/named?e=forbidden",
            None,
            vec![],
        ),
        (
            "GET",
            "/rt/_design/app/_show/named?e=conflict",
            None,
            vec![],
        ),
        ("GET", "/rt/_design/app/_show/named/gone?e=x", None, vec![]),
        ("GET", "/rt/_design/app/_show/raw", None, vec![]),
        ("GET", "/rt/_design/app/_show/nothing", None, vec![]),
        ("GET", "/rt/_design/app/_show/bogus", None, vec![]),
        ("GET", "/rt/_design/app/_show/missing", None, vec![]),
        ("GET", "/rt/_design/app/_show", None, vec![]),
        ("GET", "/rt/_design/app/_show/req?key=nope", None, vec![]),
        (
            "GET",
            "/rt/_design/app/_list/ul/by_name?reduce=false",
            None,
            vec![],
        ),
        (
            "GET",
            "/rt/_design/app/_list/csv/app/by_name?group=true",
            None,
            vec![("accept", "text/csv")],
        ),
        ("GET", "/rt/_design/app/_list/head/by_name", None, vec![]),
        ("GET", "/rt/_design/app/_list/coded/by_name", None, vec![]),
        ("GET", "/rt/_design/app/_list/early/by_name", None, vec![]),
        (
            "GET",
            "/rt/_design/app/_list/late/by_name?reduce=false",
            None,
            vec![],
        ),
        ("GET", "/rt/_design/app/_list/nope/by_name", None, vec![]),
        ("GET", "/rt/_design/app/_list/ul/nope", None, vec![]),
        ("GET", "/rt/_design/app/_list/ul", None, vec![]),
        ("PUT", "/rt/_design/app/_list/ul/by_name", None, vec![]),
        ("POST", "/rt/_design/app/_update/none", None, vec![]),
        ("POST", "/rt/_design/app/_update/noid", None, vec![]),
        ("POST", "/rt/_design/app/_update/stale", None, vec![]),
        ("POST", "/rt/_design/app/_update/bad", None, vec![]),
        ("POST", "/rt/_design/app/_update/undef", None, vec![]),
        ("GET", "/rt/_design/app/_update/bump/a", None, vec![]),
        (
            "POST",
            "/rt/_design/app/_update/form",
            Some("id=f1&title=T"),
            vec![("content-type", "application/x-www-form-urlencoded")],
        ),
        ("GET", "/rt/f1", None, vec![]),
        ("GET", "/rt/_design/app/_rewrite/hello/a?x=2", None, vec![]),
        ("GET", "/rt/_design/app/_rewrite/people", None, vec![]),
        ("GET", "/rt/_design/app/_rewrite/named/Bob", None, vec![]),
        ("GET", "/rt/_design/app/_rewrite/nomatch", None, vec![]),
        ("GET", "/rt/_design/app/_rewrite/loop", None, vec![]),
        ("GET", "/rt/_design/fn/_rewrite/teapot", None, vec![]),
        ("GET", "/rt/_design/fn/_rewrite/none", None, vec![]),
        ("GET", "/rt/_design/fn/_rewrite/nopath", None, vec![]),
        ("GET", "/rt/_design/fn/_rewrite/q", None, vec![]),
    ];
    let mut differ = Vec::new();
    for (method, path, body, headers) in &requests {
        let a = comparable(&ours.send(method, path, *body, headers));
        let b = comparable(&theirs.send(method, path, *body, headers));
        if a != b {
            differ.push(format!("{method} {path}\n  settee:  {a}\n  couchdb: {b}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        requests.len(),
        differ.join("\n")
    );
}

/// A query server speaking CouchDB's whole protocol (shows, lists, updates, rewrites and
/// validation included), from the query server crate's tests.
fn python_server() -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../settee-queryserver/tests/query_server.py");
    format!(
        "python3 {}",
        script.canonicalize().expect("query_server.py").display()
    )
}

#[test]
fn functions_in_other_languages_run_through_their_query_server() {
    let s = TestServer::start_with_env(&[("COUCHDB_QUERY_SERVER_PYTHON", &python_server())]);
    let c = s.admin();
    assert_eq!(c.put("/py", "").status, 201);
    let ddoc = json!({
        "language": "python",
        "shows": {"hello": "def fun(doc, req):\n    return {'body': 'Hello ' + (doc['name'] if doc else 'nobody'), 'headers': {'X-Method': req['method']}}"},
        "lists": {"keys": "def fun(head, req, start, send, get_row):\n    start({'headers': {'Content-Type': 'text/plain'}})\n    send('total=%d;' % head['total_rows'])\n    while True:\n        row = get_row()\n        if row is None:\n            break\n        send(row['key'] + ';')\n    return 'end'",
                  "first": "def fun(head, req, start, send, get_row):\n    row = get_row()\n    return 'first=' + row['key']"},
        "updates": {"touch": "def fun(doc, req):\n    doc = doc or {'_id': req['id']}\n    doc['touched'] = doc.get('touched', 0) + 1\n    return [doc, 'touched %d' % doc['touched']]"},
        "rewrites": "def fun(req):\n    return '../../' + req['path'][-1] if req['path'][-1] != 'none' else None",
        "validate_doc_update": "def fun(new, old, ctx, sec):\n    if new.get('bad'):\n        raise ValueError('no bad documents')",
        "views": {"names": {"map": "def fun(doc):\n    if 'name' in doc:\n        yield doc['name'], 1"}}
    });
    assert_eq!(c.put("/py/_design/py", &ddoc.to_string()).status, 201);
    let docs = json!({"docs": [{"_id": "a", "name": "Ann"}, {"_id": "b", "name": "Bob"}, {"_id": "c", "name": "Cy"}]});
    assert_eq!(c.post("/py/_bulk_docs", &docs.to_string()).status, 201);
    let hello = c.get("/py/_design/py/_show/hello/a");
    assert_eq!(
        (hello.status, hello.text.as_str(), hello.header("x-method")),
        (200, "Hello Ann", Some("GET"))
    );
    assert_eq!(c.get("/py/_design/py/_show/hello").text, "Hello nobody");
    let list = c.get("/py/_design/py/_list/keys/names");
    assert_eq!(
        (list.text.as_str(), list.header("content-type")),
        ("total=3;Ann;Bob;Cy;end", Some("text/plain"))
    );
    // A list that stops reading early leaves its process unusable: it is replaced.
    assert_eq!(c.get("/py/_design/py/_list/first/names").text, "first=Ann");
    assert_eq!(
        c.get("/py/_design/py/_list/keys/names?limit=1").text,
        "total=3;Ann;end"
    );
    let touched = c.post("/py/_design/py/_update/touch/new", "");
    assert_eq!(
        (
            touched.status,
            touched.text.as_str(),
            touched.header("x-couch-id")
        ),
        (201, "touched 1", Some("new"))
    );
    assert_eq!(
        c.put("/py/_design/py/_update/touch/new", "").text,
        "touched 2"
    );
    assert_eq!(c.get("/py/new").json()["touched"], 2);
    assert_eq!(c.get("/py/_design/py/_rewrite/b").json()["name"], "Bob");
    assert_eq!(
        error(&c.get("/py/_design/py/_rewrite/none")),
        err(404, "rewrite_error", "Invalid path.")
    );
    // validate_doc_update through the query server, on every write path.
    assert_eq!(
        error(&c.put("/py/d", "{\"bad\":true}")),
        err(403, "forbidden", "no bad documents")
    );
    let bulk = c.post(
        "/py/_bulk_docs",
        &json!({"docs": [{"_id": "e", "bad": 1}, {"_id": "f"}]}).to_string(),
    );
    assert_eq!(bulk.json()[0]["error"], "forbidden");
    assert_eq!(bulk.json()[1]["ok"], true);
    assert_eq!(c.put("/py/g", "{\"good\":true}").status, 201);
    assert_eq!(c.get("/py/d").status, 404);
    assert_eq!(c.get("/py/e").status, 404);
}
