//! Partitioned databases over HTTP: `?partitioned=true`, the `partition:id` rules on every
//! write path, `/{db}/_partition/{p}` with its `_all_docs`, views, `_find` and `_explain`,
//! partitioned and global design documents and Mango indexes, all kept across a restart;
//! partition queries read only their partition; and the same requests sent to the
//! reference CouchDB answered alike.

mod common;

use common::{Client, ReferenceCouch, Resp, TestServer};
use serde_json::{json, Value};

/// Documents of three partitions, `s1` a prefix of `s10`, one id with two colons.
fn readings() -> Value {
    json!({"docs": [
        {"_id": "s1:a", "v": 3, "t": "x"},
        {"_id": "s1:b", "v": 1, "t": "y"},
        {"_id": "s2:a", "v": 2, "t": "x"},
        {"_id": "s1:c:d", "v": 5, "t": "x"},
        {"_id": "s10:a", "v": 4, "t": "y"},
    ]})
}

fn ids(rows: &Value, member: &str) -> Vec<String> {
    rows[member]
        .as_array()
        .unwrap_or_else(|| panic!("no {member} in {rows}"))
        .iter()
        .map(|r| {
            r.get("id")
                .unwrap_or(&r["_id"])
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn keys_and_values(v: &Value) -> Vec<(Value, Value)> {
    v["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows in {v}"))
        .iter()
        .map(|r| (r["key"].clone(), r["value"].clone()))
        .collect()
}

fn setup(c: &Client) {
    assert_eq!(c.put("/pt?partitioned=true", "").status, 201);
    let r = c.post("/pt/_bulk_docs", &readings().to_string());
    assert_eq!(r.status, 201, "{}", r.text);
    let views =
        json!({"views": {"by_v": {"map": "function(d){ emit(d.v, d.t) }", "reduce": "_count"}}});
    assert_eq!(c.put("/pt/_design/v", &views.to_string()).status, 201);
    let global = json!({"options": {"partitioned": false},
        "views": {"by_v": {"map": "function(d){ emit(d.v, 1) }", "reduce": "_sum"}}});
    assert_eq!(c.put("/pt/_design/g", &global.to_string()).status, 201);
}

#[test]
fn creation_and_document_ids_follow_couchdb_rules() {
    let s = TestServer::start();
    let c = s.admin();
    let features = c.get("/").json()["features"].clone();
    assert!(
        features.as_array().unwrap().contains(&json!("partitioned")),
        "{features}"
    );
    c.put("/pt?partitioned=yes", "").error(400, "bad_request");
    c.put("/_users?partitioned=true", "")
        .error(400, "bad_request");
    assert_eq!(c.put("/plain", "").status, 201);
    assert_eq!(c.get("/plain").json()["props"], json!({}));
    assert_eq!(c.put("/pt?partitioned=true", "").status, 201);
    assert_eq!(c.get("/pt").json()["props"], json!({"partitioned": true}));
    for (id, error, reason) in [
        (
            "nocolon",
            "illegal_docid",
            "Doc id must be of form partition:id",
        ),
        (":x", "illegal_partition", "Partition must not be empty"),
        ("p:", "illegal_docid", "Document id must not be empty"),
        (
            "_p:x",
            "illegal_docid",
            "Only reserved document ids may start with underscore.",
        ),
        (
            "p:_x",
            "illegal_docid",
            "Only reserved document ids may start with underscore.",
        ),
    ] {
        let r = c.put(&format!("/pt/{}", id.replace(':', "%3A")), "{}");
        r.error(400, error);
        assert_eq!(r.json()["reason"], reason, "{id}");
    }
    // Every write path: POST without an id, a bulk write with one bad id (refused whole),
    // replicated revisions, attachments.
    c.post("/pt", "{}").error(400, "illegal_docid");
    c.post("/pt/_bulk_docs", r#"{"docs":[{"_id":"a:1"},{"_id":"b"}]}"#)
        .error(400, "illegal_docid");
    c.post(
        "/pt/_bulk_docs",
        r#"{"new_edits":false,"docs":[{"_id":"b","_rev":"1-abc"}]}"#,
    )
    .error(400, "illegal_docid");
    c.send(
        "PUT",
        "/pt/b/att.txt",
        Some("hi"),
        &[("Content-Type", "text/plain")],
    )
    .error(400, "illegal_docid");
    assert_eq!(c.get("/pt").json()["doc_count"], 0, "nothing was written");
    // Ids with a partition, design and local documents are written.
    for path in ["/pt/p:d:e", "/pt/p%3Aenc", "/pt/_design/x", "/pt/_local/x"] {
        assert_eq!(c.put(path, "{}").status, 201, "{path}");
    }
    assert_eq!(c.get("/pt/p:enc").status, 200);
    // A database that is not partitioned takes any id.
    assert_eq!(c.put("/plain/nocolon", "{}").status, 201);
}

#[test]
fn partitions_answer_their_own_documents_and_rows() {
    let mut s = TestServer::start();
    setup(&s.admin());
    for round in ["before a restart", "after a restart"] {
        let c = s.admin();
        assert_eq!(
            c.get("/pt").json()["props"],
            json!({"partitioned": true}),
            "{round}"
        );
        let info = c.get("/pt/_partition/s1").json();
        assert_eq!(
            (
                &info["db_name"],
                &info["partition"],
                &info["doc_count"],
                &info["doc_del_count"]
            ),
            (&json!("pt"), &json!("s1"), &json!(3), &json!(0)),
            "{round}: {info}"
        );
        assert!(info["sizes"]["external"].as_u64().unwrap() > 0);
        assert_eq!(c.get("/pt/_partition/zz").json()["doc_count"], 0);
        let all = c.get("/pt/_partition/s1/_all_docs").json();
        assert_eq!(ids(&all, "rows"), ["s1:a", "s1:b", "s1:c:d"], "{round}");
        let back = c.get("/pt/_partition/s1/_all_docs?descending=true").json();
        assert_eq!(ids(&back, "rows"), ["s1:c:d", "s1:b", "s1:a"]);
        let from = c
            .get("/pt/_partition/s1/_all_docs?startkey=%22s1:b%22")
            .json();
        assert_eq!(ids(&from, "rows"), ["s1:b", "s1:c:d"]);
        let global = c.get("/pt/_all_docs?partition=s10").json();
        assert_eq!(ids(&global, "rows"), ["s10:a"]);
        // Views: rows and reductions of the partition alone, in key order.
        let rows = c
            .get("/pt/_partition/s1/_design/v/_view/by_v?reduce=false")
            .json();
        assert_eq!(
            keys_and_values(&rows),
            [
                (json!(1), json!("y")),
                (json!(3), json!("x")),
                (json!(5), json!("x"))
            ]
        );
        let rows = c
            .get("/pt/_partition/s1/_design/v/_view/by_v?reduce=false&descending=true&limit=2")
            .json();
        assert_eq!(ids(&rows, "rows"), ["s1:c:d", "s1:a"]);
        let rows = c
            .get("/pt/_design/v/_view/by_v?reduce=false&partition=s1&startkey=2&endkey=4")
            .json();
        assert_eq!(ids(&rows, "rows"), ["s1:a"]);
        let count = c.get("/pt/_partition/s1/_design/v/_view/by_v").json();
        assert_eq!(keys_and_values(&count), [(json!(null), json!(3))]);
        let count = c.get("/pt/_partition/s10/_design/v/_view/by_v").json();
        assert_eq!(keys_and_values(&count), [(json!(null), json!(1))]);
        let grouped = c
            .get("/pt/_partition/s1/_design/v/_view/by_v?group=true")
            .json();
        assert_eq!(grouped["rows"].as_array().unwrap().len(), 3);
        // A global design document in the same database answers global queries only.
        let sum = c.get("/pt/_design/g/_view/by_v").json();
        assert_eq!(keys_and_values(&sum), [(json!(null), json!(5))]);
        s.restart();
    }
}

#[test]
fn partition_queries_are_refused_where_couchdb_refuses_them() {
    let s = TestServer::start();
    let c = s.admin();
    setup(&c);
    assert_eq!(c.put("/plain", "").status, 201);
    let refusals: [(&str, u16, &str, &str); 10] = [
        (
            "/pt/_partition/_bad",
            400,
            "illegal_partition",
            "Partition must not start with an underscore",
        ),
        (
            "/pt/_partition/a:b",
            400,
            "illegal_partition",
            "Partition must not contain a colon",
        ),
        (
            "/plain/_partition/p",
            400,
            "bad_request",
            "database is not partitioned",
        ),
        (
            "/pt/_partition",
            400,
            "bad_request",
            "invalid_partition_req",
        ),
        (
            "/pt/_partition/s1/_all_docs?partition=s2",
            400,
            "bad_request",
            "Conflicting value for `partition` in query string",
        ),
        (
            "/pt/_all_docs?partition=_x",
            400,
            "illegal_partition",
            "Partition must not start with an underscore",
        ),
        (
            "/plain/_all_docs?partition=p",
            400,
            "query_parse_error",
            "`partition` parameter is not supported on this db",
        ),
        (
            "/pt/_design/v/_view/by_v",
            400,
            "query_parse_error",
            "`partition` parameter is mandatory for queries to this view.",
        ),
        (
            "/pt/_partition/s1/_design/g/_view/by_v",
            400,
            "query_parse_error",
            "`partition` parameter is not supported in this design doc",
        ),
        ("/pt/_partition/s1/s1:a", 404, "not_found", "missing"),
    ];
    for (path, status, error, reason) in refusals {
        let r = c.get(path);
        r.error(status, error);
        assert_eq!(r.json()["reason"], reason, "{path}");
    }
    c.delete("/pt/_partition/s1")
        .error(405, "method_not_allowed");
    let bad = json!({"options": {"partitioned": "yes"}, "views": {}});
    c.put("/pt/_design/bad", &bad.to_string())
        .error(400, "invalid_design_doc");
    let bad = json!({"options": {"partitioned": true}, "views": {}});
    c.put("/plain/_design/bad", &bad.to_string())
        .error(400, "invalid_design_doc");
}

fn find(c: &Client, path: &str, q: Value) -> Value {
    let r = c.post(path, &q.to_string());
    assert_eq!(r.status, 200, "{path} {q}: {}", r.text);
    r.json()
}

#[test]
fn mango_indexes_are_partitioned_by_default_and_partition_queries_read_one_partition() {
    let s = TestServer::start();
    let c = s.admin();
    setup(&c);
    let index = |body: Value| c.post("/pt/_index", &body.to_string());
    assert_eq!(
        index(json!({"index": {"fields": ["v"]}, "ddoc": "pv", "name": "pv"})).status,
        200
    );
    let global =
        json!({"index": {"fields": ["v"]}, "ddoc": "gv", "name": "gv", "partitioned": false});
    assert_eq!(index(global).status, 200);
    assert_eq!(
        c.get("/pt/_design/gv").json()["options"],
        json!({"partitioned": false})
    );
    index(json!({"index": {"fields": ["t"]}, "ddoc": "gv"}))
        .error(400, "invalid_partitioned_option");
    let listed = c.get("/pt/_index").json();
    let scopes: Vec<(Value, Value)> = listed["indexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["name"].clone(), i["partitioned"].clone()))
        .collect();
    assert_eq!(
        scopes,
        [
            (json!("_all_docs"), Value::Null),
            (json!("gv"), json!(false)),
            (json!("pv"), json!(true))
        ]
    );
    // A partition query on the partitioned index examines that partition's rows only.
    let q = json!({"selector": {"v": {"$gt": 0}}, "execution_stats": true});
    let got = find(&c, "/pt/_partition/s1/_find", q.clone());
    assert_eq!(ids(&got, "docs"), ["s1:b", "s1:a", "s1:c:d"]);
    assert_eq!(got["execution_stats"]["total_keys_examined"], 3, "{got}");
    let explained = find(&c, "/pt/_partition/s1/_explain", q.clone());
    assert_eq!(explained["index"]["name"], "pv");
    assert_eq!(explained["opts"]["partition"], "s1");
    assert_eq!(explained["mrargs"]["partition"], "s1");
    // A global query uses the global index and sees every partition.
    let got = find(&c, "/pt/_find", q.clone());
    assert_eq!(got["docs"].as_array().unwrap().len(), 5);
    let explained = find(&c, "/pt/_explain", q);
    assert_eq!(explained["index"]["name"], "gv");
    let reasons: Vec<Value> = explained["index_candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["analysis"]["reasons"][0]["name"].clone())
        .collect();
    assert!(reasons.contains(&json!("scope_mismatch")), "{explained}");
    // Without a usable index, a partition query scans that partition's documents only.
    let q = json!({"selector": {"t": "x"}, "execution_stats": true});
    let got = find(&c, "/pt/_partition/s1/_find", q);
    assert_eq!(ids(&got, "docs"), ["s1:a", "s1:c:d"]);
    assert_eq!(got["execution_stats"]["total_docs_examined"], 3, "{got}");
    let sorted = json!({"selector": {"t": "x"}, "sort": ["t"]});
    let r = c.post("/pt/_find", &sorted.to_string());
    r.error(400, "no_usable_index");
    assert_eq!(
        r.json()["reason"],
        "No global index exists for this sort, try indexing by the sort fields."
    );
    c.post("/pt/_partition/s1/_find", &sorted.to_string())
        .error(400, "no_usable_index");
}

/// What may differ between the servers: revisions are CouchDB's own, but totals and offsets
/// count a shard in CouchDB (the database here), sizes are each engine's, bookmarks opaque.
fn comparable(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        for k in [
            "total_rows",
            "offset",
            "bookmark",
            "sizes",
            "instance_start_time",
        ] {
            o.remove(k);
        }
        if let Some(stats) = o.get_mut("execution_stats").and_then(Value::as_object_mut) {
            stats.remove("execution_time_ms");
        }
    }
    v
}

fn both(
    ours: &Client,
    theirs: &Client,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (Resp, Resp) {
    let text = body.map(|b| b.to_string());
    (
        ours.send(
            method,
            path,
            text.as_deref(),
            &[("Content-Type", "application/json")],
        ),
        theirs.send(
            method,
            path,
            text.as_deref(),
            &[("Content-Type", "application/json")],
        ),
    )
}

#[test]
fn partitioned_answers_match_couchdb() {
    let Some(couch) = ReferenceCouch::start("partitioned_answers_match_couchdb") else {
        return;
    };
    let s = TestServer::start();
    let (ours, theirs) = (s.admin(), couch.admin());
    let steps: Vec<(&str, &str, Option<Value>)> = vec![
        ("PUT", "/pt?partitioned=true", None),
        ("PUT", "/np", None),
        ("PUT", "/pt/nocolon", Some(json!({}))),
        ("PUT", "/pt/%3Ax", Some(json!({}))),
        ("POST", "/pt", Some(json!({"a": 1}))),
        (
            "POST",
            "/pt/_bulk_docs",
            Some(json!({"docs": [{"_id": "a:1"}, {"_id": "b"}]})),
        ),
        ("POST", "/pt/_bulk_docs", Some(readings())),
        (
            "PUT",
            "/pt/_design/v",
            Some(
                json!({"views": {"by_v": {"map": "function(d){ emit(d.v, d.t) }", "reduce": "_count"}}}),
            ),
        ),
        (
            "PUT",
            "/pt/_design/g",
            Some(
                json!({"options": {"partitioned": false}, "views": {"by_v": {"map": "function(d){ emit(d.v, 1) }", "reduce": "_sum"}}}),
            ),
        ),
        (
            "PUT",
            "/pt/_design/bad",
            Some(json!({"options": {"partitioned": "yes"}, "views": {}})),
        ),
        (
            "PUT",
            "/np/_design/bad",
            Some(json!({"options": {"partitioned": true}, "views": {}})),
        ),
        ("GET", "/pt/_partition/s1", None),
        ("GET", "/pt/_partition/_bad", None),
        ("GET", "/np/_partition/p", None),
        ("GET", "/pt/_partition/s1/_all_docs?include_docs=true", None),
        (
            "GET",
            "/pt/_partition/s1/_all_docs?descending=true&limit=2",
            None,
        ),
        ("GET", "/pt/_all_docs?partition=s2", None),
        ("GET", "/pt/_partition/s1/_all_docs?partition=s2", None),
        ("GET", "/pt/_design/v/_view/by_v", None),
        ("GET", "/pt/_partition/s1/_design/v/_view/by_v", None),
        (
            "GET",
            "/pt/_partition/s1/_design/v/_view/by_v?reduce=false&include_docs=true",
            None,
        ),
        (
            "GET",
            "/pt/_partition/s1/_design/v/_view/by_v?group=true&descending=true",
            None,
        ),
        (
            "GET",
            "/pt/_design/v/_view/by_v?partition=s10&reduce=false",
            None,
        ),
        ("GET", "/pt/_partition/s1/_design/g/_view/by_v", None),
        ("GET", "/pt/_design/g/_view/by_v?group=true", None),
        (
            "POST",
            "/pt/_index",
            Some(json!({"index": {"fields": ["v"]}, "name": "pv", "ddoc": "pv"})),
        ),
        (
            "POST",
            "/pt/_index",
            Some(
                json!({"index": {"fields": ["v"]}, "name": "gv", "ddoc": "gv", "partitioned": false}),
            ),
        ),
        (
            "POST",
            "/pt/_index",
            Some(json!({"index": {"fields": ["t"]}, "name": "gt", "ddoc": "gv"})),
        ),
        (
            "POST",
            "/pt/_index",
            Some(
                json!({"index": {"fields": ["t"]}, "name": "pt2", "ddoc": "pv", "partitioned": true}),
            ),
        ),
        ("GET", "/pt/_index", None),
        ("GET", "/pt/_design/pv", None),
        ("GET", "/pt/_design/gv", None),
        (
            "POST",
            "/pt/_partition/s1/_find",
            Some(json!({"selector": {"v": {"$gt": 0}}, "execution_stats": true})),
        ),
        (
            "POST",
            "/pt/_partition/s1/_find",
            Some(json!({"selector": {"v": {"$gt": 0}}, "sort": [{"v": "desc"}]})),
        ),
        (
            "POST",
            "/pt/_find",
            Some(json!({"selector": {"v": {"$gt": 0}}, "sort": ["v"]})),
        ),
        (
            "POST",
            "/pt/_find",
            Some(json!({"selector": {"t": "x"}, "sort": ["t"]})),
        ),
        (
            "POST",
            "/pt/_partition/s1/_find",
            Some(json!({"selector": {"t": "x"}, "sort": ["t"]})),
        ),
        (
            "POST",
            "/pt/_partition/s1/_find",
            Some(json!({"selector": {"t": "x"}})),
        ),
        (
            "POST",
            "/pt/_partition/s1/_find",
            Some(json!({"selector": {"v": {"$gt": 0}}, "use_index": "gv"})),
        ),
        (
            "POST",
            "/pt/_partition/s1/_explain",
            Some(json!({"selector": {"v": {"$gt": 0}}})),
        ),
        (
            "POST",
            "/pt/_explain",
            Some(json!({"selector": {"v": {"$gt": 0}}})),
        ),
        (
            "POST",
            "/np/_find",
            Some(json!({"selector": {"v": {"$gt": 0}}, "partition": "x"})),
        ),
    ];
    for (method, path, body) in steps {
        let (a, b) = both(&ours, &theirs, method, path, body);
        assert_eq!(
            a.status, b.status,
            "{method} {path}: {} vs {}",
            a.text, b.text
        );
        assert_eq!(
            comparable(a.json()),
            comparable(b.json()),
            "{method} {path}"
        );
    }
    let (a, b) = both(&ours, &theirs, "GET", "/pt", None);
    assert_eq!(a.json()["props"], b.json()["props"]);
}

/// A replication that creates its target with `create_target_params: {"partitioned": true}`
/// makes a partitioned database; its partitioned design documents and indexes answer
/// partition queries on arrival. With the reference CouchDB, both directions.
#[test]
fn partitioned_databases_replicate_with_their_design_documents() {
    let s = TestServer::start();
    let c = s.admin();
    setup(&c);
    let index = json!({"index": {"fields": ["v"]}, "ddoc": "pv", "name": "pv"});
    assert_eq!(c.post("/pt/_index", &index.to_string()).status, 200);
    let settee_url = s.url.replacen(
        "http://",
        &format!("http://{}:{}@", common::ADMIN.0, common::ADMIN.1),
        1,
    );
    let couch =
        ReferenceCouch::start("partitioned_databases_replicate_with_their_design_documents");
    let couch_url = couch
        .as_ref()
        .map(|r| r.url.replacen("http://", "http://admin:admin@", 1));
    let mut hops = vec![(settee_url.clone(), "pt", settee_url.clone(), "copy")];
    if let Some(cu) = &couch_url {
        // Settee to CouchDB, then CouchDB back to Settee.
        hops.push((settee_url.clone(), "pt", cu.clone(), "there"));
        hops.push((cu.clone(), "there", settee_url.clone(), "back"));
    }
    for (from, source, to, target) in hops {
        let job = json!({"source": format!("{from}/{source}"), "target": format!("{to}/{target}"),
            "create_target": true, "create_target_params": {"partitioned": true}});
        let r = c.post("/_replicate", &job.to_string());
        assert_eq!(r.status, 200, "{job}: {}", r.text);
        if to != settee_url {
            continue;
        }
        assert_eq!(
            c.get(&format!("/{target}")).json()["props"],
            json!({"partitioned": true})
        );
        assert_eq!(
            c.get(&format!("/{target}/_partition/s1")).json()["doc_count"],
            3
        );
        let count = c
            .get(&format!("/{target}/_partition/s1/_design/v/_view/by_v"))
            .json();
        assert_eq!(
            keys_and_values(&count),
            [(json!(null), json!(3))],
            "{target}"
        );
        let q = json!({"selector": {"v": {"$gt": 1}}});
        let found = find(&c, &format!("/{target}/_partition/s1/_find"), q.clone());
        assert_eq!(ids(&found, "docs"), ["s1:a", "s1:c:d"], "{target}");
        let explained = find(&c, &format!("/{target}/_partition/s1/_explain"), q);
        assert_eq!(explained["index"]["name"], "pv", "{target}");
    }
    if let (Some(couch), Some(_)) = (&couch, &couch_url) {
        let theirs = couch.admin();
        assert_eq!(
            theirs.get("/there").json()["props"],
            json!({"partitioned": true})
        );
        let found = find(
            &theirs,
            "/there/_partition/s1/_find",
            json!({"selector": {"v": {"$gt": 1}}}),
        );
        assert_eq!(ids(&found, "docs"), ["s1:a", "s1:c:d"]);
    }
}
