//! Design documents in other languages, run by external query servers over CouchDB's line
//! protocol: views mapped and reduced by the real `couchpy` (couchdb-python's view server),
//! design-document filters and `views.lib` through a server that speaks the whole protocol,
//! compilation errors refusing a design document, unknown languages, and a hung process
//! killed at `os_process_timeout` while the server keeps serving.

mod common;

use std::path::PathBuf;

use common::{Client, TestServer};
use serde_json::{json, Value};

/// couchdb-python's view server, installed by ./scripts/test.
fn couchpy() -> String {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/.venv/bin/couchpy");
    assert!(
        path.exists(),
        "couchpy is not installed: run ./scripts/test, which creates clients/python/.venv"
    );
    path.canonicalize()
        .expect("couchpy path")
        .display()
        .to_string()
}

/// A query server for tests that implements every command, `add_lib` and `ddoc` included.
fn full_protocol_server() -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../settee-queryserver/tests/query_server.py");
    format!(
        "python3 {}",
        script.canonicalize().expect("query_server.py").display()
    )
}

/// A server that runs `command` for design documents in `lang`, named as CouchDB names
/// query servers (the HTTP API may not change `[query_servers]`).
fn server_with(lang: &str, command: &str) -> TestServer {
    TestServer::start_with_env(&[(
        &format!("COUCHDB_QUERY_SERVER_{}", lang.to_ascii_uppercase()),
        command,
    )])
}

fn bulk(c: &Client, db: &str, docs: Value) {
    let r = c.post(
        &format!("/{db}/_bulk_docs"),
        &json!({"docs": docs}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
}

fn rows(c: &Client, path: &str) -> Value {
    let r = c.get(path);
    assert_eq!(r.status, 200, "{path}: {}", r.text);
    r.json()["rows"].clone()
}

/// couchpy's map functions yield `(key, value)` pairs.
const BY_TAG: &str = "def fun(doc):\n    if 'tag' in doc:\n        yield doc['tag'], doc['n']";
/// Counts rows when reducing and adds counts when rereducing, so a wrong rereduce shows.
const COUNT: &str =
    "def fun(keys, values, rereduce):\n    return sum(values) if rereduce else len(values)";

#[test]
fn couchpy_maps_and_reduces_a_python_view() {
    let s = server_with("python", &couchpy());
    let c = s.admin();
    assert_eq!(c.put("/db", "").status, 201);
    // Enough rows for several tree leaves, so reductions are rereduced.
    let docs: Vec<Value> = (0..3000)
        .map(|i| json!({"_id": format!("doc{i:04}"), "n": i, "tag": (["a", "b", "c"][i % 3])}))
        .collect();
    bulk(&c, "db", json!(docs));
    let ddoc = json!({"language": "python", "views": {
        "by_tag": {"map": BY_TAG},
        "count": {"map": BY_TAG, "reduce": COUNT},
        "sum": {"map": BY_TAG, "reduce": "_sum"},
    }});
    let r = c.put("/db/_design/py", &ddoc.to_string());
    assert_eq!(r.status, 201, "{}", r.text);

    let first = rows(&c, "/db/_design/py/_view/by_tag?limit=2");
    assert_eq!(
        first,
        json!([{"id": "doc0000", "key": "a", "value": 0}, {"id": "doc0003", "key": "a", "value": 3}])
    );
    assert_eq!(
        rows(
            &c,
            "/db/_design/py/_view/by_tag?key=%22c%22&descending=true&limit=1"
        ),
        json!([{"id": "doc2999", "key": "c", "value": 2999}])
    );
    assert_eq!(
        rows(&c, "/db/_design/py/_view/count"),
        json!([{"key": null, "value": 3000}])
    );
    assert_eq!(
        rows(&c, "/db/_design/py/_view/count?group=true"),
        json!([{"key": "a", "value": 1000}, {"key": "b", "value": 1000}, {"key": "c", "value": 1000}])
    );
    let total: i64 = (0..3000).filter(|i| i % 3 == 1).sum();
    assert_eq!(
        rows(&c, "/db/_design/py/_view/sum?key=%22b%22"),
        json!([{"key": null, "value": total}])
    );

    // Incremental: an edit moves a row, a deletion removes one.
    let doc = c.get("/db/doc0000").json();
    let r = c.put(
        "/db/doc0000",
        &json!({"_rev": doc["_rev"], "n": 0, "tag": "z"}).to_string(),
    );
    assert_eq!(r.status, 201);
    let doc = c.get("/db/doc0001").json();
    assert_eq!(
        c.delete(&format!(
            "/db/doc0001?rev={}",
            doc["_rev"].as_str().unwrap()
        ))
        .status,
        200
    );
    assert_eq!(
        rows(&c, "/db/_design/py/_view/count?group=true"),
        json!([{"key": "a", "value": 999}, {"key": "b", "value": 999}, {"key": "c", "value": 1000}, {"key": "z", "value": 1}])
    );
    let info = c.get("/db/_design/py/_info").json();
    assert_eq!(info["view_index"]["language"], "python");
}

#[test]
fn python_functions_that_do_not_compile_refuse_the_design_document() {
    let s = server_with("python", &couchpy());
    let c = s.admin();
    assert_eq!(c.put("/db", "").status, 201);
    let bad = json!({"language": "python", "views": {"v": {"map": "def fun(doc) yield 1"}}});
    let r = c.put("/db/_design/bad", &bad.to_string());
    r.error(500, "map_compilation_error");
    assert_eq!(
        c.get("/db/_design/bad").status,
        404,
        "the design document was not saved"
    );
    let not_a_function = json!({"language": "python", "views": {"v": {"map": "x = 1"}}});
    let r = c.put("/db/_design/bad", &not_a_function.to_string());
    r.error(500, "map_compilation_error");
    assert!(
        r.json()["reason"]
            .as_str()
            .unwrap()
            .contains("string must eval to a function"),
        "{}",
        r.text
    );
    let good = json!({"language": "python", "views": {"v": {"map": BY_TAG, "reduce": COUNT}}});
    assert_eq!(c.put("/db/_design/good", &good.to_string()).status, 201);
}

#[test]
fn design_documents_in_unknown_languages_save_but_cannot_be_queried() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/db", "").status, 201);
    let ddoc = json!({"language": "cobol", "views": {"v": {"map": "DISPLAY 'HELLO'."}}, "filters": {"f": "x"}});
    assert_eq!(
        c.put("/db/_design/old", &ddoc.to_string()).status,
        201,
        "CouchDB lets such documents be saved"
    );
    let r = c.get("/db/_design/old/_view/v");
    r.error(500, "unknown_query_language");
    assert_eq!(r.json()["reason"], "cobol");
    c.get("/db/_changes?filter=old/f")
        .error(500, "unknown_query_language");
    c.get("/db/_changes?filter=_view&view=old/v")
        .error(500, "unknown_query_language");
    assert_eq!(
        c.post("/db/_compact/old", "{}").status,
        202,
        "nothing to compact is accepted, as CouchDB accepts it"
    );
}

#[test]
fn filters_libraries_and_view_filters_over_the_whole_protocol() {
    let s = server_with("testlang", &full_protocol_server());
    let c = s.admin();
    assert_eq!(c.put("/db", "").status, 201);
    let docs: Vec<Value> = (1..=6)
        .map(|n| json!({"_id": format!("d{n}"), "n": n}))
        .collect();
    bulk(&c, "db", json!(docs));
    let ddoc = json!({
        "language": "testlang",
        "views": {
            "lib": {"half": "def half(x):\n    return x / 2"},
            "halves": {"map": "def fun(doc):\n    if doc.get('n', 0) % 2 == 0:\n        yield require('views/lib/half')['half'](doc['n']), None"},
        },
        "filters": {"mod": "def fun(doc, req):\n    return 'n' in doc and doc['n'] % int(req['query']['m']) == 0"},
    });
    assert_eq!(c.put("/db/_design/t", &ddoc.to_string()).status, 201);
    let keys: Vec<Value> = rows(&c, "/db/_design/t/_view/halves")
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].clone())
        .collect();
    assert_eq!(
        keys,
        vec![json!(1.0), json!(2.0), json!(3.0)],
        "map functions can require views.lib modules"
    );

    let ids = |path: &str| -> Vec<String> {
        let r = c.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        r.json()["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids("/db/_changes?filter=t/mod&m=3"),
        ["d3", "d6"],
        "the filter sees the request's query"
    );
    assert_eq!(ids("/db/_changes?filter=t/mod&m=2"), ["d2", "d4", "d6"]);
    assert_eq!(
        ids("/db/_changes?filter=_view&view=t/halves"),
        ["d2", "d4", "d6"]
    );

    // A new revision of the design document is taught to processes that knew the old one.
    let mut newer = c.get("/db/_design/t").json();
    newer["filters"]["mod"] =
        json!("def fun(doc, req):\n    return doc.get('n', 0) == int(req['query']['m'])");
    assert_eq!(c.put("/db/_design/t", &newer.to_string()).status, 201);
    assert_eq!(ids("/db/_changes?filter=t/mod&m=3"), ["d3"]);
}

#[test]
fn a_hung_query_server_is_stopped_by_the_time_limit() {
    let mut s = server_with("python", &couchpy());
    s.allow_errors = true;
    let c = s.admin();
    assert_eq!(
        c.put(
            "/_node/_local/_config/couchdb/os_process_timeout",
            r#""1000""#
        )
        .status,
        200
    );
    assert_eq!(c.put("/db", "").status, 201);
    bulk(&c, "db", json!([{"_id": "a", "tag": "x", "n": 1}]));
    let hang = json!({"language": "python", "views": {"v": {"map": "def fun(doc):\n    while True:\n        pass\n    yield 1, 1"}}});
    assert_eq!(c.put("/db/_design/hang", &hang.to_string()).status, 201);
    let started = std::time::Instant::now();
    let r = c.get("/db/_design/hang/_view/v");
    r.error(500, "os_process_error");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "answered after the limit, not never"
    );
    assert_eq!(c.get("/db/a").status, 200, "the server keeps serving");

    let mut fixed = c.get("/db/_design/hang").json();
    fixed["views"]["v"]["map"] = json!(BY_TAG);
    assert_eq!(c.put("/db/_design/hang", &fixed.to_string()).status, 201);
    assert_eq!(
        rows(&c, "/db/_design/hang/_view/v"),
        json!([{"id": "a", "key": "x", "value": 1}]),
        "a new process serves the fixed view"
    );
}
