//! Databases and documents over HTTP: CouchDB's status codes, bodies, headers and errors.

mod common;

use common::TestServer;
use serde_json::{json, Value};

#[test]
fn database_lifecycle_and_errors() {
    let s = TestServer::start();
    let c = s.admin();
    let r = c.put("/db", "");
    assert_eq!(r.status, 201);
    assert_eq!(r.json(), json!({"ok": true}));
    assert_eq!(
        r.header("location"),
        Some(format!("{}/db", s.url).as_str()),
        "an absolute URI, as CouchDB answers"
    );
    c.put("/db", "").error(412, "file_exists");
    c.put("/Bad", "").error(400, "illegal_database_name");
    // Other underscore names are taken as databases' names, as CouchDB takes them; the
    // CouchDB endpoints Settee lacks say so.
    c.put("/_bad", "").error(400, "illegal_database_name");
    let r = c.get("/_bad");
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (404, Some("Database does not exist."))
    );
    c.get("/_bad/doc").error(404, "not_found");
    c.post("/_replicate", "{}").error(400, "bad_request");
    for (q, reason) in [
        ("q=0", "The `q` value should be a positive integer."),
        ("q=x", "The `q` value should be a positive integer."),
        ("n=-1", "The `n` value should be a positive integer."),
        ("n=0&q=0", "The `n` value should be a positive integer."),
        (
            "partitioned=true&q=0",
            "The `q` value should be a positive integer.",
        ),
        ("partitioned=yes", "Invalid `partitioned` parameter"),
        ("engine=rocks", "invalid_engine_extension"),
    ] {
        let r = c.put(&format!("/optdb?{q}"), "");
        assert_eq!(
            (
                r.status,
                r.json()["error"].as_str(),
                r.json()["reason"].as_str()
            ),
            (400, Some("bad_request"), Some(reason)),
            "{q}"
        );
    }
    c.get("/optdb").error(404, "not_found");
    assert_eq!(
        c.put("/optdb?n=3&q=3&partitioned=false&engine=couch", "")
            .status,
        201
    );
    assert_eq!(c.get("/optdb").json()["cluster"]["q"], 3);
    c.get("/nope").error(404, "not_found");
    c.get("/nope/doc").error(404, "not_found");
    let info = c.get("/db").json();
    for field in [
        "db_name",
        "update_seq",
        "doc_count",
        "doc_del_count",
        "sizes",
        "purge_seq",
        "compact_running",
        "instance_start_time",
        "props",
        "cluster",
    ] {
        assert!(info.get(field).is_some(), "missing {field}: {info}");
    }
    assert_eq!(info["cluster"]["q"], 2);
    assert_eq!(c.put("/db4?q=4", "").status, 201);
    assert_eq!(c.get("/db4").json()["cluster"]["q"], 4);
    assert_eq!(c.send("HEAD", "/db", None, &[]).status, 200);
    c.send("DELETE", "/db?rev=1-x", None, &[])
        .error(400, "bad_request");
    assert_eq!(c.delete("/db").json(), json!({"ok": true}));
    c.delete("/db").error(404, "not_found");
    c.get("/db").error(404, "not_found");
}

#[test]
fn document_crud_follows_couchdb() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let r = c.put("/db/doc", r#"{"a":1}"#);
    assert_eq!(r.status, 201);
    let rev1 = r.json()["rev"].as_str().unwrap().to_string();
    assert_eq!(
        rev1, "1-23202479633c2b380f79507a776743d5",
        "same revision id as CouchDB gives"
    );
    assert_eq!(r.header("etag"), Some(format!("\"{rev1}\"").as_str()));
    assert_eq!(
        r.header("location"),
        Some(format!("{}/db/doc", s.url).as_str())
    );
    let got = c.get("/db/doc");
    assert_eq!(
        got.text,
        format!("{{\"_id\":\"doc\",\"_rev\":\"{rev1}\",\"a\":1}}\n")
    );
    assert_eq!(got.header("etag"), Some(format!("\"{rev1}\"").as_str()));
    assert_eq!(
        c.send(
            "GET",
            "/db/doc",
            None,
            &[("If-None-Match", &format!("\"{rev1}\""))]
        )
        .status,
        304
    );
    let head = c.send("HEAD", "/db/doc", None, &[]);
    assert_eq!((head.status, head.text.as_str()), (200, ""));
    c.put("/db/doc", r#"{"a":2}"#).error(409, "conflict");
    c.put("/db/doc", r#"{"_rev":"1-x","a":2}"#)
        .error(409, "conflict");
    c.put("/db/doc?rev=1-abc", &format!(r#"{{"_rev":"{rev1}"}}"#))
        .error(400, "bad_request");
    let rev2 = c.put(&format!("/db/doc?rev={rev1}"), r#"{"a":2}"#).json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(rev2.starts_with("2-"));
    let r = c.send(
        "PUT",
        "/db/doc",
        Some(r#"{"a":3}"#),
        &[("If-Match", &format!("\"{rev2}\""))],
    );
    assert_eq!(r.status, 201);
    let rev3 = r.json()["rev"].as_str().unwrap().to_string();
    // Older revisions stay readable until compaction.
    assert_eq!(c.get(&format!("/db/doc?rev={rev1}")).json()["a"], 1);
    c.get("/db/doc?rev=9-nope").error(404, "not_found");
    c.get("/db/doc?rev=bad").error(400, "bad_request");
    let full = c.get("/db/doc?revs=true&revs_info=true").json();
    assert_eq!(full["_revisions"]["start"], 3);
    assert_eq!(full["_revisions"]["ids"].as_array().unwrap().len(), 3);
    assert_eq!(
        full["_revs_info"][0],
        json!({"rev": rev3, "status": "available"})
    );
    // Deleting.
    c.delete("/db/doc").error(409, "conflict");
    c.delete("/db/missing").error(404, "not_found");
    assert_eq!(
        c.delete("/db/missing?rev=1-abc")
            .error(404, "not_found")
            .json()["reason"],
        "missing"
    );
    let disagree = c.send(
        "DELETE",
        &format!("/db/doc?rev={rev3}"),
        None,
        &[("If-Match", "\"1-abc\"")],
    );
    assert_eq!(
        disagree.error(400, "bad_request").json()["reason"],
        "Document rev and etag have different values"
    );
    let del = c.delete(&format!("/db/doc?rev={rev3}"));
    assert_eq!(del.status, 200);
    let rev4 = del.json()["rev"].as_str().unwrap().to_string();
    assert_eq!(
        c.get("/db/doc").error(404, "not_found").json()["reason"],
        "deleted"
    );
    // A deleted document is not deleted again, even named by its tombstone.
    assert_eq!(
        c.delete(&format!("/db/doc?rev={rev4}"))
            .error(404, "not_found")
            .json()["reason"],
        "deleted"
    );
    assert_eq!(
        c.get("/db").json()["update_seq"]
            .as_str()
            .unwrap()
            .split('-')
            .next(),
        Some("4")
    );
    assert_eq!(
        c.get(&format!("/db/doc?rev={rev4}")).json()["_deleted"],
        true
    );
    assert_eq!(c.get("/db/never").json()["reason"], "missing");
    // Recreating continues the history.
    assert!(c.put("/db/doc", r#"{"again":true}"#).json()["rev"]
        .as_str()
        .unwrap()
        .starts_with("5-"));
    let info = c.get("/db").json();
    assert_eq!(
        (info["doc_count"].as_u64(), info["doc_del_count"].as_u64()),
        (Some(1), Some(0))
    );
}

#[test]
fn ids_bodies_and_bad_input() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    for (id, path) in [
        ("a/b", "/db/a%2Fb"),
        ("ünï cødé", "/db/%C3%BCn%C3%AF%20c%C3%B8d%C3%A9"),
        ("_design/dd", "/db/_design/dd"),
    ] {
        assert_eq!(c.put(path, "{}").status, 201, "{id}");
        assert_eq!(c.get(path).json()["_id"], id);
    }
    c.put("/db/_bad", "{}").error(400, "illegal_docid");
    // An underscore id is a document's, as in CouchDB: nothing is found by it.
    c.get("/db/_bad").error(404, "not_found");
    c.delete("/db/_bad?rev=1-x").error(404, "not_found");
    c.post("/db/_explain", "{}")
        .error(400, "missing_required_key");
    // Design functions of a design document that is not there: CouchDB's `missing`.
    c.put("/db/_design/dd/_update/f/x", "{}")
        .error(404, "not_found");
    c.get("/db/_design/dd/_show/f").error(404, "not_found");
    // Endpoints Settee lacks refuse the methods CouchDB's handlers refuse, with its `Allow`
    // (issue 26: they answered 501 to any method).
    let wrong = [
        ("PUT", "/_replicate", Some("POST")),
        ("DELETE", "/_scheduler/jobs", Some("GET,HEAD")),
        ("PUT", "/_node/_local/_stats", Some("GET")),
        ("DELETE", "/_node/_local/_prometheus", Some("GET")),
        ("PUT", "/_db_updates", Some("GET")),
        ("DELETE", "/_utils", Some("GET,HEAD")),
        ("PUT", "/_reshard/jobs", Some("GET,HEAD,POST")),
        ("GET", "/db/_explain", Some("POST")),
        ("PUT", "/db/_index", Some("GET,POST")),
        ("GET", "/db/_index/_bulk_delete", Some("POST")),
        ("GET", "/db/_index/dd/json/name", Some("DELETE")),
        ("GET", "/db/_all_docs/queries", Some("POST")),
        ("DELETE", "/db/_design/dd/_list/l/v", Some("GET,POST,HEAD")),
        ("PUT", "/db/_design/dd/_nouveau/i", Some("GET, POST")),
    ];
    for (method, path, allow) in wrong {
        let r = c.send(method, path, None, &[]);
        r.error(405, "method_not_allowed");
        assert_eq!(r.header("allow"), allow, "{method} {path}");
    }
    assert_eq!(c.get("/_cluster_setup").status, 501);
    c.put("/db/_local/x/att", "x").error(400, "bad_request");
    assert_eq!(
        c.get("/db/_local/x/att").json()["reason"],
        "_local documents do not accept attachments."
    );
    assert_eq!(
        c.get("/db/_local").json()["reason"],
        "Invalid _local document id."
    );
    assert_eq!(
        c.put("/db/_local%2Fx/att", "x")
            .error(400, "bad_request")
            .json()["reason"],
        "_local documents do not accept attachments."
    );
    c.get("/db/_local/x").error(404, "not_found");
    c.put("/db/x", "{not json").error(400, "bad_request");
    c.put("/db/x", "[1]").error(400, "bad_request");
    c.put("/db/x", r#"{"_foo":1}"#).error(400, "doc_validation");
    c.put("/db/x", r#"{"_deleted":"yes"}"#)
        .error(400, "doc_validation");
    c.post("/db", r#"{"_id":""}"#).error(400, "illegal_docid");
    c.send("POST", "/db", Some("{}"), &[("Content-Type", "text/plain")])
        .error(415, "bad_content_type");
    let big = format!(r#"{{"x":"{}"}}"#, "a".repeat(9_000_000));
    c.put("/db/big", &big).error(413, "document_too_large");
    c.get("/db/x").error(404, "not_found");
    c.get("/db/big").error(404, "not_found");
    // An empty body, as CouchDB words it.
    for (method, path) in [
        ("PUT", "/db/x"),
        ("POST", "/db"),
        ("POST", "/db/_bulk_docs"),
    ] {
        let r = c.send(
            method,
            path,
            Some(""),
            &[("Content-Type", "application/json")],
        );
        assert_eq!(
            r.error(400, "bad_request").json()["reason"],
            "invalid UTF-8 JSON"
        );
    }
    // The path's id wins over the body's, which must still be a valid id.
    c.put("/db/x", r#"{"_id":"_x"}"#)
        .error(400, "illegal_docid");
    let r = c.put("/db/x", r#"{"_id":"other","v":1}"#);
    assert_eq!(r.status, 201);
    let rev = r.json()["rev"].as_str().unwrap().to_string();
    assert_eq!(r.json()["id"], "x");
    c.get("/db/other").error(404, "not_found");
    // A revision named by the query alone, or in the body and the query alike.
    let r = c.put(&format!("/db/x?rev={rev}"), r#"{"v":2}"#);
    assert_eq!(r.status, 201, "{}", r.text);
    let rev = r.json()["rev"].as_str().unwrap().to_string();
    c.put(&format!("/db/x?rev={rev}"), r#"{"_rev":"2-0","v":3}"#)
        .error(400, "bad_request");
    c.put("/db/x", r#"{"v":3}"#).error(409, "conflict");
    assert_eq!(c.get("/db/x").json()["v"], 2);
    assert_eq!(c.delete(&format!("/db/x?rev={rev}")).status, 200);
    // POST creates with a generated id; the body's members keep their order and numbers.
    let r = c.post(
        "/db",
        r#"{"z":1.50,"a":[1,{"b":null}],"n":123456789012345678901234567890}"#,
    );
    assert_eq!(r.status, 201);
    let id = r.json()["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    assert_eq!(
        (r.header("location"), r.header("etag")),
        (Some(format!("{}/db/{id}", s.url).as_str()), None),
        "POST answers a Location and no ETag"
    );
    let design = c.put("/db/_design/a%20b", "{}");
    assert_eq!(
        design.header("location"),
        Some(format!("{}/db/_design%2Fa%20b", s.url).as_str())
    );
    let rev = design.json()["rev"].as_str().unwrap().to_string();
    let gone = c.delete(&format!("/db/_design/a%20b?rev={rev}"));
    assert_eq!(
        (
            gone.status,
            gone.header("location"),
            gone.header("etag").is_some()
        ),
        (200, None, true),
        "DELETE answers an ETag and no Location: {}",
        gone.text
    );
    let text = c.get(&format!("/db/{id}")).text;
    assert!(
        text.ends_with(
            r#","z":1.50,"a":[1,{"b":null}],"n":123456789012345678901234567890}"#
                .to_string()
                .as_str()
                .trim_end()
        ) || text.contains(r#""z":1.50,"a":[1,{"b":null}],"n":123456789012345678901234567890}"#),
        "{text}"
    );
    // batch=ok answers 202 before the commit; the write is there afterwards.
    let r = c.put("/db/batched?batch=ok", r#"{"b":1}"#);
    assert_eq!(r.status, 202);
    assert_eq!(r.json(), json!({"ok": true, "id": "batched"}));
    c.send(
        "POST",
        "/db/_ensure_full_commit",
        Some(""),
        &[("Content-Type", "text/plain")],
    )
    .error(415, "bad_content_type");
    assert_eq!(c.post("/db/_ensure_full_commit", "").status, 201);
    assert_eq!(c.get("/db/batched").json()["b"], 1);
    // As CouchDB, batch=ok answers 202 whatever becomes of the write: a conflict is only
    // logged, and changes nothing.
    let r = c.put("/db/batched?batch=ok", r#"{"b":2}"#);
    assert_eq!(
        (r.status, r.json()),
        (202, json!({"ok": true, "id": "batched"})),
        "a stale batch=ok write is still accepted"
    );
    assert_eq!(
        c.post("/db?batch=ok", r#"{"_id":"batched","b":3}"#).status,
        202
    );
    c.post("/db/_ensure_full_commit", "");
    let kept = c.get("/db/batched").json();
    assert_eq!(
        (
            kept["b"].as_i64(),
            kept["_rev"].as_str().unwrap().starts_with("1-")
        ),
        (Some(1), true),
        "{kept}"
    );
    // Bad input is still refused before the 202; deletions and multipart uploads ignore
    // batch=ok and answer with their revision.
    c.put("/db/batched2?batch=ok", "{")
        .error(400, "bad_request");
    c.put("/db/batched2?batch=ok", r#"{"_foo":1}"#)
        .error(400, "doc_validation");
    // COPY.
    let r = s.raw(&format!("COPY /db/batched HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nDestination: copied\r\nConnection: close\r\n\r\n", common::admin_auth()));
    assert!(r.starts_with("HTTP/1.1 201"), "{r}");
    assert_eq!(c.get("/db/copied").json()["b"], 1);
    let gone = c.delete(&format!(
        "/db/batched?batch=ok&rev={}",
        kept["_rev"].as_str().unwrap()
    ));
    assert_eq!(
        (
            gone.status,
            gone.json()["rev"]
                .as_str()
                .is_some_and(|r| r.starts_with("2-")),
            gone.header("etag").is_some()
        ),
        (200, true, true),
        "{}",
        gone.text
    );
}

#[test]
fn local_documents() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    assert_eq!(c.put("/db/_local/cp", r#"{"seq":1}"#).json()["rev"], "0-1");
    // As CouchDB: no conflicts between local revisions (see tests/compat.rs).
    assert_eq!(c.put("/db/_local/cp", r#"{"seq":2}"#).json()["rev"], "0-1");
    assert_eq!(
        c.put("/db/_local/cp", r#"{"_rev":"0-1","seq":2}"#).json()["rev"],
        "0-2"
    );
    assert_eq!(
        c.get("/db/_local/cp").json(),
        json!({"_id": "_local/cp", "_rev": "0-2", "seq": 2})
    );
    // The write's ETag is the one a read answers, as in CouchDB.
    let written = c
        .put("/db/_local/etag", r#"{"n":1}"#)
        .header("etag")
        .map(str::to_string);
    let read = c.get("/db/_local/etag");
    assert_eq!(
        (written.as_deref(), read.status),
        (read.header("etag"), 200)
    );
    assert_ne!(written.as_deref(), Some("\"0-1\""));
    assert_eq!(
        c.get("/db/_all_docs").json()["total_rows"],
        0,
        "local docs are not listed"
    );
    let locals = c.get("/db/_local_docs").json();
    assert_eq!(locals["rows"][0]["id"], "_local/cp");
    assert_eq!(c.get("/db/_changes").json()["results"], json!([]));
    assert_eq!(c.delete("/db/_local/cp?rev=0-2").status, 200);
    c.get("/db/_local/cp").error(404, "not_found");
}

fn bulk(c: &common::Client, db: &str, docs: Value) -> Value {
    let r = c.post(
        &format!("/{db}/_bulk_docs"),
        &json!({"docs": docs}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()
}

#[test]
fn bulk_docs_all_docs_and_keys() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let docs: Vec<Value> = (0..50)
        .map(|i| json!({"_id": format!("d{i:02}"), "i": i}))
        .collect();
    let res = bulk(&c, "db", json!(docs));
    assert_eq!(res.as_array().unwrap().len(), 50);
    assert!(res.as_array().unwrap().iter().all(|r| r["ok"] == true));
    // Per-document results, not all-or-nothing.
    let res = bulk(&c, "db", json!([{"_id": "d00"}, {"_id": "new"}]));
    assert_eq!(res[0]["error"], "conflict");
    assert_eq!(res[1]["ok"], true);
    let rev = res[1]["rev"].as_str().unwrap();
    bulk(
        &c,
        "db",
        json!([{"_id": "new", "_rev": rev, "_deleted": true}]),
    );
    c.post("/db/_bulk_docs", r#"{"nodocs":[]}"#)
        .error(400, "bad_request");
    c.post("/db/_bulk_docs", r#"{"docs":{}}"#)
        .error(400, "bad_request");
    c.post("/db/_bulk_docs", r#"{"docs":[{"_id":"_bad"}]}"#)
        .error(400, "illegal_docid");
    c.post(
        "/db/_bulk_docs",
        r#"{"docs":[{"_id":"x"}],"new_edits":false}"#,
    )
    .error(400, "bad_request");

    let all = c.get("/db/_all_docs");
    assert!(
        all.text
            .starts_with("{\"total_rows\":50,\"offset\":0,\"rows\":[\r\n"),
        "{}",
        all.text
    );
    let all = all.json();
    assert_eq!(all["rows"].as_array().unwrap().len(), 50);
    assert_eq!(all["rows"][0]["key"], "d00");
    let page = c.get("/db/_all_docs?startkey=%22d10%22&endkey=%22d20%22&inclusive_end=false&skip=2&limit=3&include_docs=true").json();
    assert_eq!(page["offset"], 12);
    let ids: Vec<&str> = page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["d12", "d13", "d14"]);
    assert_eq!(page["rows"][0]["doc"]["i"], 12);
    let desc = c
        .get("/db/_all_docs?descending=true&limit=2&update_seq=true")
        .json();
    assert_eq!(desc["rows"][0]["id"], "d49");
    assert!(desc["update_seq"].is_string());
    assert_eq!(
        c.get("/db/_all_docs?key=%22d07%22").json()["rows"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let keyed = c
        .post(
            "/db/_all_docs?include_docs=true",
            r#"{"keys":["d03","nope","new"]}"#,
        )
        .json();
    assert_eq!(keyed["offset"], Value::Null);
    assert_eq!(keyed["rows"][0]["doc"]["i"], 3);
    assert_eq!(
        keyed["rows"][1],
        json!({"key": "nope", "error": "not_found"})
    );
    assert_eq!(keyed["rows"][2]["value"]["deleted"], true);
    assert_eq!(keyed["rows"][2]["doc"], Value::Null);
    c.get("/db/_all_docs?limit=-1")
        .error(400, "query_parse_error");
    c.get("/db/_all_docs?descending=maybe")
        .error(400, "query_parse_error");
    c.post("/db/_all_docs", r#"{"keys":"d01"}"#)
        .error(400, "bad_request");
    c.put("/db/_design/a", "{}");
    let design = c.get("/db/_design_docs").json();
    assert_eq!(design["rows"].as_array().unwrap().len(), 1);
    assert_eq!(design["rows"][0]["id"], "_design/a");
}

/// A GET asking for JSON: `open_revs` answers `multipart/mixed` to any other client.
fn json_get(c: &common::Client, path: &str) -> Value {
    c.send("GET", path, None, &[("Accept", "application/json")])
        .json()
}

#[test]
fn replication_endpoints() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let r1 = c.put("/db/d", r#"{"v":1}"#).json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    let hash = r1.split('-').nth(1).unwrap();
    // new_edits=false: two branches arrive from elsewhere; errors-only answer.
    let res = c.post(
        "/db/_bulk_docs",
        &json!({"new_edits": false, "docs": [
            {"_id": "d", "_revisions": {"start": 2, "ids": ["aaaa", hash]}, "v": 2},
            {"_id": "d", "_revisions": {"start": 2, "ids": ["bbbb", hash]}, "v": 3},
        ]})
        .to_string(),
    );
    assert_eq!((res.status, res.json()), (201, json!([])));
    // A revision replicated with any text, quotes included, is answered as valid JSON.
    let odd = c.put("/db/odd?new_edits=false", r#"{"_rev":"1-a\"b\\c"}"#);
    assert_eq!(
        (odd.status, odd.json()),
        (201, json!({"ok": true, "id": "odd", "rev": "1-a\"b\\c"}))
    );
    let doc = c.get("/db/d?conflicts=true").json();
    assert_eq!(doc["_rev"], "2-bbbb");
    assert_eq!(doc["_conflicts"], json!(["2-aaaa"]));
    let open = json_get(&c, "/db/d?open_revs=all");
    assert_eq!(open.as_array().unwrap().len(), 2);
    let some = json_get(&c, "/db/d?open_revs=%5B%223-zzz%22,%222-aaaa%22%5D");
    assert_eq!(some[0]["ok"]["v"], 2);
    assert_eq!(some[1], json!({"missing": "3-zzz"}));
    // latest: an inner revision stands for the leaves below it.
    let latest = json_get(&c, &format!("/db/d?open_revs=%5B%22{r1}%22%5D&latest=true"));
    assert_eq!(latest.as_array().unwrap().len(), 2);
    let bulk_latest = c
        .post(
            "/db/_bulk_get?latest=true",
            &json!({"docs": [{"id": "d", "rev": r1}]}).to_string(),
        )
        .json();
    assert_eq!(
        bulk_latest["results"][0]["docs"].as_array().unwrap().len(),
        2
    );
    // multipart/mixed when asked for.
    let mixed = c.send(
        "GET",
        "/db/d?open_revs=%5B%222-aaaa%22,%223-zzz%22%5D",
        None,
        &[("Accept", "multipart/mixed")],
    );
    assert!(
        mixed
            .header("content-type")
            .unwrap()
            .starts_with("multipart/mixed; boundary="),
        "{:?}",
        mixed.headers
    );
    assert!(
        mixed.text.contains("\"_rev\":\"2-aaaa\"")
            && mixed.text.contains("error=\"true\"")
            && mixed.text.contains("\"missing\":\"3-zzz\""),
        "{}",
        mixed.text
    );
    let diff = c
        .post(
            "/db/_revs_diff",
            r#"{"d":["2-aaaa","3-cccc"],"other":["1-x"]}"#,
        )
        .json();
    assert_eq!(diff["d"]["missing"], json!(["3-cccc"]));
    assert_eq!(diff["d"]["possible_ancestors"], json!(["2-bbbb", "2-aaaa"]));
    assert_eq!(diff["other"]["missing"], json!(["1-x"]));
    assert_eq!(
        c.post("/db/_revs_diff", r#"{"d":["2-aaaa"]}"#).json(),
        json!({})
    );
    assert_eq!(
        c.post("/db/_missing_revs", r#"{"d":["2-aaaa","9-q"]}"#)
            .json(),
        json!({"missing_revs": {"d": ["9-q"]}})
    );
    let got = c
        .post(
            "/db/_bulk_get?revs=true",
            r#"{"docs":[{"id":"d","rev":"2-aaaa"},{"id":"d"},{"id":"zz"},{"rev":"1-x"}]}"#,
        )
        .json();
    let results = got["results"].as_array().unwrap();
    assert_eq!(
        results[0]["docs"][0]["ok"]["_revisions"]["ids"],
        json!(["aaaa", hash])
    );
    assert_eq!(results[1]["docs"].as_array().unwrap().len(), 2);
    assert_eq!(results[2]["docs"][0]["error"]["error"], "not_found");
    assert_eq!(
        results[3]["docs"][0]["error"]["reason"],
        "document id missed"
    );
    let mixed = c.send(
        "POST",
        "/db/_bulk_get",
        Some(r#"{"docs":[{"id":"d","rev":"2-aaaa"},{"id":"zz"}]}"#),
        &[("Accept", "multipart/mixed")],
    );
    assert!(
        mixed
            .header("content-type")
            .unwrap()
            .starts_with("multipart/mixed"),
        "{:?}",
        mixed.headers
    );
    assert!(
        mixed.text.contains("\"_rev\":\"2-aaaa\"") && mixed.text.contains("error=\"true\""),
        "{}",
        mixed.text
    );
    // Entries CouchDB refuses one by one, each naming what it can.
    let odd = c.post("/db/_bulk_get", r#"{"docs":[{"rev":"1-x"},{"id":"_bad"},{"id":"d","atts_since":"x"},{"id":"d","atts_since":["bad"]},{"id":"d","rev":"2-aaaa","atts_since":[]}]}"#).json();
    let error = |k: usize| odd["results"][k]["docs"][0]["error"].clone();
    assert_eq!(
        error(0),
        json!({"id": null, "rev": null, "error": "bad_request", "reason": "document id missed"})
    );
    assert_eq!(
        (error(1)["rev"].clone(), error(1)["error"].clone()),
        (Value::Null, json!("illegal_docid"))
    );
    assert_eq!(
        (error(2)["rev"].as_str(), error(2)["reason"].as_str()),
        (Some("x"), Some("att_since value must be array of revs."))
    );
    assert_eq!(
        (error(3)["rev"].as_str(), error(3)["reason"].as_str()),
        (Some("bad"), Some("Invalid rev format"))
    );
    assert_eq!(
        odd["results"][4]["docs"][0]["ok"]["_rev"], "2-aaaa",
        "an empty atts_since asks for nothing"
    );
    // Multipart only for a client that does not take JSON; multipart/related when that is all it takes.
    let related = c.send(
        "POST",
        "/db/_bulk_get",
        Some(r#"{"docs":[{"id":"d","rev":"2-aaaa"}]}"#),
        &[("Accept", "multipart/related")],
    );
    assert!(
        related
            .header("content-type")
            .unwrap()
            .starts_with("multipart/related; boundary="),
        "{:?}",
        related.headers
    );
    let both = c.send(
        "POST",
        "/db/_bulk_get",
        Some(r#"{"docs":[{"id":"d","rev":"2-aaaa"}]}"#),
        &[("Accept", "multipart/mixed, application/json")],
    );
    assert_eq!(both.json()["results"][0]["docs"][0]["ok"]["_rev"], "2-aaaa");
    c.post("/db/_bulk_get?rev=1-x", r#"{"docs":[]}"#)
        .error(400, "bad_request");
    c.post("/db/_bulk_get", r#"{}"#).error(400, "bad_request");
    // Revs limit and security are stored and returned.
    assert_eq!(c.get("/db/_revs_limit").json(), json!(1000));
    assert_eq!(c.put("/db/_revs_limit", "3").json(), json!({"ok": true}));
    assert_eq!(c.get("/db/_revs_limit").json(), json!(3));
    c.put("/db/_revs_limit", "0").error(400, "bad_request");
    let sec =
        json!({"admins": {"names": ["a"], "roles": []}, "members": {"names": [], "roles": ["r"]}});
    assert_eq!(c.put("/db/_security", &sec.to_string()).status, 200);
    assert_eq!(c.get("/db/_security").json(), sec);
    c.put("/db/_security", r#"{"admins":{"names":"a"}}"#)
        .error(400, "bad_request");
}

#[test]
fn purge_removes_revisions_for_good() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let r1 = c.put("/db/p", r#"{"v":1}"#).json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    let hash = r1.split('-').nth(1).unwrap().to_string();
    c.post("/db/_bulk_docs", &json!({"new_edits": false, "docs": [{"_id": "p", "_revisions": {"start": 2, "ids": ["aaaa", hash]}}, {"_id": "p", "_revisions": {"start": 2, "ids": ["bbbb", hash]}}]}).to_string());
    let before = c.get("/db").json();
    let r = c.post(
        "/db/_purge",
        r#"{"p":["2-bbbb","1-nope"],"absent":["1-x"]}"#,
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({"purge_seq": null, "purged": {"p": ["2-bbbb"], "absent": []}})
    );
    let doc = c.get("/db/p?conflicts=true").json();
    assert_eq!(doc["_rev"], "2-aaaa");
    assert!(
        doc.get("_conflicts").is_none(),
        "the purged branch is gone: {doc}"
    );
    assert_eq!(
        c.post("/db/_revs_diff", r#"{"p":["2-bbbb"]}"#).json()["p"]["missing"],
        json!(["2-bbbb"])
    );
    let after = c.get("/db").json();
    assert_ne!(after["purge_seq"], before["purge_seq"]);
    // Purging the last leaf removes the document entirely, from _changes too.
    c.post("/db/_purge", r#"{"p":["2-aaaa"]}"#);
    c.get("/db/p").error(404, "not_found");
    assert_eq!(c.get("/db").json()["doc_count"], 0);
    assert_eq!(c.get("/db/_changes").json()["results"], json!([]));
    c.post("/db/_purge", r#"{"p":"2-x"}"#)
        .error(400, "bad_request");
    // The limits of one request, from `[purge]`: 100 documents and 1,000 revisions by default.
    let revs = |n: usize| (0..n).map(|k| format!("1-{k:032x}")).collect::<Vec<_>>();
    let too_many_revs = json!({"p": revs(600), "q": revs(401)}).to_string();
    assert_eq!(
        c.post("/db/_purge", &too_many_revs)
            .error(400, "bad_request")
            .json()["reason"],
        "Exceeded maximum number of revisions."
    );
    assert_eq!(
        c.post(
            "/db/_purge",
            &json!({"p": revs(600), "q": revs(400)}).to_string()
        )
        .status,
        201
    );
    common::set_config(&c, "purge", "max_revisions_number", "2");
    assert_eq!(
        c.post("/db/_purge", r#"{"p":["1-a","1-b","1-c"]}"#)
            .error(400, "bad_request")
            .json()["reason"],
        "Exceeded maximum number of revisions."
    );
    common::set_config(&c, "purge", "max_document_id_number", "1");
    assert_eq!(
        c.post("/db/_purge", r#"{"p":["1-a"],"q":["1-b"]}"#)
            .error(400, "bad_request")
            .json()["reason"],
        "Exceeded maximum number of documents."
    );
    assert_eq!(c.get("/db/_purged_infos_limit").json(), json!(1000));
    assert_eq!(c.put("/db/_purged_infos_limit", "20").status, 200);
    assert_eq!(c.get("/db/_purged_infos_limit").json(), json!(20));
    assert_eq!(
        c.put("/db/_purged_infos_limit", "0")
            .error(400, "bad_request")
            .json()["reason"],
        "`purge_infos_limit` must be positive integer"
    );
}

/// A raw GET's status line and head (lowercased) and body, with no `Accept` unless given.
fn raw_get(s: &TestServer, path: &str, extra: &str) -> (String, String) {
    let out = s.raw(&format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\n{extra}Connection: close\r\n\r\n",
        common::admin_auth()
    ));
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head.to_ascii_lowercase(), body.to_string())
}

#[test]
fn document_reads_follow_couchdb_option_by_option() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/db?q=1", "").status, 201);
    let r1 = c.put("/db/d", r#"{"v":1}"#).json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    let hash = r1.split('-').nth(1).unwrap().to_string();
    let branch = |id: &str, deleted: bool, v: u32| {
        let doc = json!({"_id": "d", "_revisions": {"start": 2, "ids": [id, hash]}, "_deleted": deleted, "v": v});
        assert_eq!(
            c.post(
                "/db/_bulk_docs",
                &json!({"new_edits": false, "docs": [doc]}).to_string()
            )
            .status,
            201
        );
    };
    // The winner 2-bbbb is written before the conflicts: the document's latest change is not its own.
    branch("bbbb", false, 3);
    branch("aaaa", false, 2);
    branch("cccc", true, 4);

    // The winner's metadata only when the winner is read, and then no ETag.
    let meta = c.get("/db/d?meta=true");
    let doc = meta.json();
    assert_eq!(
        (
            doc["_rev"].as_str(),
            doc["_conflicts"].clone(),
            doc["_deleted_conflicts"].clone()
        ),
        (Some("2-bbbb"), json!(["2-aaaa"]), json!(["2-cccc"]))
    );
    assert_eq!(
        doc["_revs_info"][1],
        json!({"rev": r1, "status": "available"})
    );
    assert_eq!(meta.header("etag"), None);
    assert_eq!(
        c.get("/db/d?local_seq=true").json()["_local_seq"],
        4,
        "the document's latest change, as CouchDB's high_seq"
    );
    let at = c.get("/db/d?rev=2-aaaa&conflicts=true&deleted_conflicts=true&revs_info=true&local_seq=true&meta=true&revs=true");
    let doc = at.json();
    assert_eq!(
        (doc["_rev"].as_str(), doc["v"].as_u64()),
        (Some("2-aaaa"), Some(2))
    );
    for key in [
        "_conflicts",
        "_deleted_conflicts",
        "_revs_info",
        "_local_seq",
    ] {
        assert!(doc.get(key).is_none(), "{key} with a rev: {doc}");
    }
    assert_eq!(
        doc["_revisions"],
        json!({"start": 2, "ids": ["aaaa", hash]})
    );
    assert_eq!(at.header("etag"), Some("\"2-aaaa\""));

    // An ETag and a 304 whenever no metadata shows, a list of ETags included.
    let with = |path: &str, inm: &str| c.send("GET", path, None, &[("If-None-Match", inm)]).status;
    assert_eq!(c.get("/db/d?revs=true").header("etag"), Some("\"2-bbbb\""));
    assert_eq!(with("/db/d?revs=true", "\"2-bbbb\""), 304);
    assert_eq!(with("/db/d?rev=2-aaaa", "\"1-x\", \"2-aaaa\""), 304);
    assert_eq!(
        with("/db/d", "2-bbbb"),
        200,
        "an ETag is compared with its quotes"
    );
    c.put("/db/plain", "{}");
    assert!(
        c.get("/db/plain?conflicts=true&deleted_conflicts=true")
            .header("etag")
            .is_some(),
        "no conflicts to show"
    );
    assert_eq!(c.get("/db/d?conflicts=true").header("etag"), None);

    // latest reads the winner whatever rev names; deleted=true reads a deleted winner.
    assert_eq!(
        c.get(&format!("/db/d?rev={r1}&latest=true")).json()["_rev"],
        "2-bbbb"
    );
    let gone = c.put("/db/gone", "{}").json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    c.delete(&format!("/db/gone?rev={gone}"));
    assert_eq!(
        c.get("/db/gone").error(404, "not_found").json()["reason"],
        "deleted"
    );
    assert_eq!(
        c.get(&format!("/db/gone?rev={gone}&latest=true"))
            .error(404, "not_found")
            .json()["reason"],
        "deleted"
    );
    let tomb = c.get("/db/gone?deleted=true").json();
    assert_eq!(
        (
            tomb["_deleted"].as_bool(),
            tomb["_rev"].as_str().map(|r| r.starts_with("2-"))
        ),
        (Some(true), Some(true))
    );

    // Flags are on for `true` alone, any of them; other values are ignored.
    assert!(c.get("/db/d?revs=maybe").json().get("_revisions").is_none());
    assert!(c
        .get("/db/d?revs=false&revs=true")
        .json()
        .get("_revisions")
        .is_some());

    // open_revs: found first, then missing, each in revision order and once; no metadata.
    assert_eq!(
        json_get(&c, "/db/d?open_revs=%5B%5D")["_rev"],
        "2-bbbb",
        "an empty list is a plain read"
    );
    let asked = json_get(&c, "/db/d?open_revs=%5B%222-bbbb%22,%223-zzz%22,%222-aaaa%22,%222-bbbb%22,%221-nope%22%5D&conflicts=true&revs=true");
    let order: Vec<String> = asked
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["ok"]["_rev"]
                .as_str()
                .or(r["missing"].as_str())
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(order, ["2-aaaa", "2-bbbb", "1-nope", "3-zzz"]);
    assert!(
        asked[1]["ok"].get("_conflicts").is_none() && asked[1]["ok"]["_revisions"]["start"] == 2,
        "{asked}"
    );
    let all: Vec<Value> = json_get(&c, "/db/d?open_revs=all")
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ok"]["_rev"].clone())
        .collect();
    assert_eq!(all, ["2-aaaa", "2-bbbb", "2-cccc"]);
    let below = json_get(
        &c,
        &format!("/db/d?open_revs=%5B%22{r1}%22,%222-aaaa%22%5D&latest=true"),
    );
    assert_eq!(below.as_array().unwrap().len(), 3, "{below}");

    // multipart/mixed unless the client's Accept leaves it out, as CouchDB decides.
    for (accept, multipart) in [
        ("", true),
        ("Accept: application/json, */*\r\n", true),
        ("Accept: multipart/mixed;q=0, application/json\r\n", false),
        ("Accept: multipart/mixed;q=0, */*\r\n", false),
        ("Accept: application/json\r\n", false),
    ] {
        let (head, _) = raw_get(&s, "/db/d?open_revs=all", accept);
        assert_eq!(
            head.contains("content-type: multipart/mixed"),
            multipart,
            "{accept:?}: {head}"
        );
    }

    // Bad values, as CouchDB words them.
    let reason = |path: &str| {
        c.get(path).error(400, "bad_request").json()["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(reason("/db/d?open_revs=nope"), "invalid UTF-8 JSON");
    assert_eq!(reason("/db/d?open_revs=%5B1%5D"), "Invalid rev format");
    assert_eq!(
        reason("/db/d?open_revs=%7B%7D"),
        "Invalid list of revisions"
    );
    assert_eq!(
        reason("/db/d?rev=garbage&open_revs=all"),
        "Invalid rev format"
    );
    assert_eq!(
        reason("/db/d?atts_since=%22x%22"),
        "Invalid list of revisions"
    );

    // Local documents: an ETag naming revision and body, `_revisions`, only their own rev.
    c.put("/db/_local/l", r#"{"n":1}"#);
    let local = c.get("/db/_local/l?revs=true");
    let etag = local.header("etag").unwrap().to_string();
    assert_eq!(
        local.json()["_revisions"],
        json!({"start": 0, "ids": ["1"]})
    );
    assert_eq!(with("/db/_local/l", &etag), 304);
    c.put("/db/_local/l", r#"{"n":2,"_rev":"0-1"}"#);
    assert_eq!(with("/db/_local/l", &etag), 200);
    assert_eq!(c.get("/db/_local/l?rev=0-2").json()["n"], 2);
    c.get("/db/_local/l?rev=0-9").error(404, "not_found");
}

#[test]
fn all_docs_follows_couchdb_parameter_by_parameter() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let docs: Vec<Value> = (0..10)
        .map(|i| json!({"_id": format!("d{i}"), "i": i}))
        .collect();
    c.post("/db/_bulk_docs", &json!({"docs": docs}).to_string());
    c.put("/db/_design/a", "{}");
    c.put("/db/_design/b", "{}");
    c.put("/db/_local/l", r#"{"n":1}"#);
    let ids = |v: &Value| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };

    // A POST body carries options as the query string does; the query string wins.
    let posted = c
        .post(
            "/db/_all_docs",
            r#"{"keys":["d1","d2"],"include_docs":true}"#,
        )
        .json();
    assert_eq!(posted["rows"][1]["doc"]["i"], 2);
    assert_eq!(
        ids(&c
            .post("/db/_all_docs", r#"{"limit":1,"startkey":"d5"}"#)
            .json()),
        ["d5"]
    );
    assert_eq!(
        ids(&c
            .post("/db/_all_docs?limit=2", r#"{"limit":1,"startkey":"d5"}"#)
            .json()),
        ["d5", "d6"]
    );
    // Range options apply in the order given, a later one winning, as CouchDB folds them
    // (the body's before the query string's); `key` does not force an inclusive end.
    let range = |q: &str| ids(&c.get(&format!("/db/_all_docs?{q}")).json());
    assert_eq!(range("key=%22d3%22&startkey=%22d1%22"), ["d1", "d2", "d3"]);
    assert_eq!(range("startkey=%22d1%22&key=%22d3%22"), ["d3"]);
    assert_eq!(
        range("start_key=%22d7%22&startkey=%22d8%22&endkey=%22d8%22"),
        ["d8"]
    );
    assert_eq!(
        range("startkey=%22d8%22&start_key=%22d7%22&endkey=%22d8%22"),
        ["d7", "d8"]
    );
    assert!(range("key=%22d3%22&inclusive_end=false").is_empty());
    assert_eq!(
        ids(&c
            .post("/db/_all_docs?key=%22d4%22", r#"{"startkey":"d2"}"#)
            .json()),
        ["d4"]
    );
    assert_eq!(
        ids(&c
            .post(
                "/db/_all_docs",
                r#"{"startkey":1,"startkey_docid":"d8","limit":1}"#
            )
            .json()),
        ["d8"],
        "a body's docid is its text"
    );
    // keys exclude a range; update_seq with keys is null.
    let bad = c.get("/db/_all_docs?keys=%5B%22d1%22%5D&startkey=%22d0%22");
    assert_eq!(
        bad.error(400, "query_parse_error").json()["reason"],
        "`keys` is incompatible with `key`, `start_key` and `end_key`"
    );
    let keyed = c
        .get("/db/_all_docs?keys=%5B%22d1%22%5D&update_seq=true")
        .json();
    assert!(
        keyed.as_object().unwrap().contains_key("update_seq") && keyed["update_seq"].is_null(),
        "{keyed}"
    );
    // offset is capped by total_rows; each namespace counts its own rows.
    let all = c.get("/db/_all_docs?skip=100").json();
    assert_eq!(
        (all["total_rows"].as_u64(), all["offset"].as_u64()),
        (Some(12), Some(12))
    );
    let design = c.get("/db/_design_docs?update_seq=true").json();
    assert_eq!(
        (design["total_rows"].as_u64(), ids(&design)),
        (
            Some(2),
            vec!["_design/a".to_string(), "_design/b".to_string()]
        )
    );
    assert!(design["update_seq"].is_string());
    assert_eq!(c.get("/db/_design_docs?skip=5").json()["offset"], 2);
    let local = c.get("/db/_local_docs?update_seq=true").json();
    assert!(
        local["total_rows"].is_null() && local["offset"].is_null() && local["update_seq"].is_null(),
        "{local}"
    );
    assert_eq!(ids(&local), ["_local/l"]);
    // keys find local documents as CouchDB opens them.
    let found = c
        .post(
            "/db/_local_docs",
            r#"{"keys":["_local/l","_local/zz"],"include_docs":true}"#,
        )
        .json();
    assert_eq!(found["rows"][0]["value"]["rev"], "0-1");
    assert_eq!(found["rows"][0]["doc"]["n"], 1);
    assert_eq!(
        found["rows"][1],
        json!({"key": "_local/zz", "error": "not_found"})
    );
    // A key that is not a string is ignored; the docid bounds stand in for it.
    assert_eq!(ids(&c.get("/db/_all_docs?startkey=123").json()).len(), 12);
    assert_eq!(
        ids(&c.get("/db/_all_docs?startkey_docid=d8").json()),
        ["d8", "d9"]
    );
    assert_eq!(
        ids(&c
            .get("/db/_all_docs?startkey=%22d8%22&endkey_docid=d8")
            .json()),
        ["d8"]
    );
    // Booleans in any case; bad JSON as CouchDB words it.
    assert_eq!(
        ids(&c.get("/db/_all_docs?descending=TRUE&limit=1").json()),
        ["d9"]
    );
    assert_eq!(
        c.get("/db/_all_docs?startkey=nope")
            .error(400, "bad_request")
            .json()["reason"],
        "invalid UTF-8 JSON"
    );
    // all_or_nothing is refused as CouchDB 3 refuses it: 417, nothing written.
    let atomic = c.post(
        "/db/_bulk_docs",
        r#"{"all_or_nothing":true,"docs":[{"_id":"x1"},{"_id":"d1","_rev":"1-abc"}]}"#,
    );
    assert_eq!(atomic.status, 417);
    assert_eq!(
        atomic.json(),
        json!([
            {"id": "x1", "rev": "0-", "error": "not_implemented", "reason": "all_or_nothing is not supported"},
            {"id": "d1", "rev": "1-abc", "error": "not_implemented", "reason": "all_or_nothing is not supported"},
        ])
    );
    c.get("/db/x1").error(404, "not_found");
    // A replicated edit's error row names its revision.
    let stub = c.post("/db/_bulk_docs", r#"{"new_edits":false,"docs":[{"_id":"r","_rev":"1-abc","_attachments":{"a":{"stub":true}}},{"_id":"r2","_rev":"1-abd"}]}"#).json();
    assert_eq!(
        (
            stub[0]["id"].as_str(),
            stub[0]["rev"].as_str(),
            stub[0]["error"].as_str()
        ),
        (Some("r"), Some("1-abc"), Some("missing_stub"))
    );
    assert_eq!(stub.as_array().unwrap().len(), 1);
}

#[test]
fn document_bodies_are_read_as_couchdb_reads_them() {
    let mut s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    // `_rev: null` is a bad revision, as any revision that is not a string.
    let r = c.put("/db/a", r#"{"_rev":null}"#);
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (400, Some("Invalid rev format"))
    );
    // Special members that are not objects, with CouchDB's texts.
    let r = c.put("/db/a", r#"{"_revisions":[1]}"#);
    assert_eq!(
        (
            r.status,
            r.json()["error"].as_str(),
            r.json()["reason"].as_str()
        ),
        (
            400,
            Some("doc_validation"),
            Some("Bad special document member: _revisions")
        )
    );
    let r = c.put("/db/a", r#"{"_attachments":"x"}"#);
    assert_eq!(
        (
            r.status,
            r.json()["error"].as_str(),
            r.json()["reason"].as_str()
        ),
        (
            400,
            Some("doc_validation"),
            Some("Bad special document member: _attachments")
        )
    );
    let r = c.put(
        "/db/a",
        r#"{"_attachments":{"f":{"content_type":"text/plain"}}}"#,
    );
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (400, Some("Invalid attachment data for f"))
    );
    c.get("/db/a").error(404, "not_found");
    // An attachment entry that is not an object is no attachment.
    let r = c.put(
        "/db/a",
        r#"{"_attachments":{"f":1,"g":{"content_type":"text/plain","data":"aGk="}}}"#,
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let atts = c.get("/db/a").json()["_attachments"].clone();
    assert_eq!(
        atts.as_object()
            .map(|a| a.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["g".to_string()])
    );
    // `[couchdb] max_document_id_length` (bytes), read at start, for every write that
    // names an id; reads are not refused.
    c.put(
        "/_node/_local/_config/couchdb/max_document_id_length",
        r#""5""#,
    );
    c.put("/db/toolong", "{}");
    s.restart();
    let c = s.admin();
    for r in [
        c.put("/db/sixsix", "{}"),
        c.post("/db", r#"{"_id":"sixsix"}"#),
        c.post("/db/_bulk_docs", r#"{"docs":[{"_id":"sixsix"}]}"#),
        c.put("/db/sixsix/att", "x"),
    ] {
        assert_eq!(
            (
                r.status,
                r.json()["error"].as_str(),
                r.json()["reason"].as_str()
            ),
            (400, Some("illegal_docid"), Some("Document id is too long")),
            "{}",
            r.text
        );
    }
    let bulk = c
        .post("/db/_bulk_get", r#"{"docs":[{"id":"sixsix"}]}"#)
        .json();
    assert_eq!(
        bulk["results"][0]["docs"][0]["error"]["reason"],
        "Document id is too long"
    );
    assert_eq!(c.put("/db/five5", "{}").status, 201);
    assert_eq!(
        c.put("/db/%C3%BC1234", "{}").status,
        400,
        "the limit counts bytes"
    );
    assert_eq!(c.get("/db/toolong").status, 200, "reads are not refused");
    c.delete("/_node/_local/_config/couchdb/max_document_id_length");
}

#[test]
fn mango_find_scans_documents_with_a_selector() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let docs: Vec<Value> = (0..30).map(|i| json!({"_id": format!("d{i:02}"), "n": i, "kind": if i % 2 == 0 { "even" } else { "odd" }, "name": {"first": format!("F{i}"), "last": "L"}})).collect();
    c.post("/db/_bulk_docs", &json!({"docs": docs}).to_string());
    c.put("/db/_design/x", r#"{"kind":"even"}"#);
    let find = |body: Value| {
        let r = c.post("/db/_find", &body.to_string());
        assert_eq!(r.status, 200, "{body}: {}", r.text);
        r.json()
    };
    let ids = |v: &Value| {
        v["docs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["_id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let evens: Vec<String> = (0..30).step_by(2).map(|i| format!("d{i:02}")).collect();
    // Every match, in id order, design documents left out; CouchDB's warning without an index.
    let all = find(json!({"selector": {"kind": "even"}}));
    assert_eq!(ids(&all), evens);
    assert_eq!(
        all["warning"],
        "No matching index found, create an index to optimize query time."
    );
    assert!(all["docs"][0]["_rev"].as_str().unwrap().starts_with("1-"));
    // 25 by default; pages by bookmark; skip.
    assert_eq!(
        ids(&find(json!({"selector": {"n": {"$gte": 0}}}))).len(),
        25
    );
    let (mut paged, mut bookmark) = (Vec::new(), json!(null));
    loop {
        let page = find(json!({"selector": {"kind": "even"}, "limit": 4, "bookmark": bookmark}));
        if page["docs"].as_array().unwrap().is_empty() {
            assert_eq!(
                page["bookmark"], bookmark,
                "a page that moved nothing answers the bookmark it was given"
            );
            break;
        }
        paged.extend(ids(&page));
        bookmark = page["bookmark"].clone();
    }
    assert_eq!(
        paged, evens,
        "pages follow one another without gaps or repeats"
    );
    // Matches that `skip` passes over move the bookmark too.
    let skipped = find(json!({"selector": {"kind": "even"}, "limit": 2, "skip": 14}));
    assert_eq!(ids(&skipped), ["d28"]);
    assert!(
        find(json!({"selector": {"kind": "even"}, "bookmark": skipped["bookmark"]}))["docs"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        ids(&find(json!({"selector": {"kind": "even"}, "skip": 13}))),
        ["d26", "d28"]
    );
    // Fields, conditions, sorting by id, and statistics.
    assert_eq!(
        find(json!({"selector": {"n": 3}, "fields": ["_id", "name.first"]}))["docs"],
        json!([{"_id": "d03", "name": {"first": "F3"}}])
    );
    assert_eq!(
        ids(&find(
            json!({"selector": {"_id": {"$gt": null}, "n": {"$gt": 26}}, "sort": [{"_id": "desc"}]})
        )),
        ["d29", "d28", "d27"]
    );
    let hint = find(json!({"selector": {"n": 3}, "use_index": "byn"}))["warning"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(hint.starts_with("_design/byn was not used because it does not contain a valid index for this query.\nNo matching index found"), "{hint}");
    assert!(
        hint.contains("The number of documents examined is high"),
        "30 read for 1 returned: {hint}"
    );
    assert_eq!(
        ids(&find(
            json!({"selector": {"$or": [{"n": 1}, {"name.first": "F5"}]}})
        )),
        ["d01", "d05"]
    );
    let stats = find(json!({"selector": {"n": {"$lt": 2}}, "execution_stats": true}))
        ["execution_stats"]
        .clone();
    assert_eq!(
        (
            stats["results_returned"].as_u64(),
            stats["total_docs_examined"].as_u64()
        ),
        (Some(2), Some(31)),
        "every row read counts, the design document's too, as CouchDB counts them"
    );
    // CouchDB's errors.
    let err = |body: &str| c.post("/db/_find", body).json();
    assert_eq!(err(r#"{"limit":1}"#)["error"], "missing_required_key");
    assert_eq!(
        err(r#"{"selector":{"n":1},"sort":["n"]}"#)["error"],
        "no_usable_index"
    );
    assert_eq!(
        err(r#"{"selector":{"n":1},"sort":["_id"]}"#)["error"],
        "no_usable_index"
    );
    assert_eq!(
        err(r#"{"selector":{"n":1},"limt":1}"#)["error"],
        "invalid_key"
    );
    assert_eq!(
        err(r#"{"selector":{"n":1},"bookmark":"garbage!"}"#)["error"],
        "invalid_bookmark"
    );
    assert_eq!(
        c.post("/db/_find", r#"{"selector":{"n":1},"limit":-1}"#)
            .status,
        400
    );
    c.send(
        "POST",
        "/db/_find",
        Some("{}"),
        &[("Content-Type", "text/plain")],
    )
    .error(415, "bad_content_type");
    c.get("/db/_find").error(405, "method_not_allowed");
    c.post("/nope/_find", r#"{"selector":{}}"#)
        .error(404, "not_found");
    // The one index there is.
    let indexes = c.get("/db/_index").json();
    assert_eq!(
        (
            indexes["total_rows"].as_u64(),
            indexes["indexes"][0]["name"].as_str()
        ),
        (Some(1), Some("_all_docs"))
    );
    // With an index on `n`, the sort that was refused runs on it.
    assert_eq!(
        c.post("/db/_index", r#"{"index":{"fields":["n"]}}"#).json()["result"],
        "created"
    );
    let sorted = find(json!({"selector": {"n": {"$gt": 26}}, "sort": [{"n": "desc"}]}));
    assert_eq!(ids(&sorted), ["d29", "d28", "d27"]);
    assert!(sorted.get("warning").is_none());
}
