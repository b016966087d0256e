//! The node's statistics over HTTP: `_stats` counts exactly what the server did, in CouchDB's
//! shape and under its names (compared with the reference CouchDB's own list); `_prometheus`
//! is read by a real text-format parser; `_system` has CouchDB's fields; all are admin-only.

mod common;

use std::process::Command;

use common::{Client, ReferenceCouch, TestServer, ADMIN};
use serde_json::Value;

fn counter(stats: &Value, path: &[&str]) -> i64 {
    let mut at = stats;
    for p in path {
        at = &at[p];
    }
    at["value"]
        .as_i64()
        .unwrap_or_else(|| panic!("no counter at {path:?}: {at}"))
}

fn stats(c: &Client) -> Value {
    let r = c.get("/_node/_local/_stats");
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

#[test]
fn stats_count_exactly_what_the_server_did() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/db", "").status, 201);
    assert_eq!(c.put("/db/doc", "{}").status, 201);
    let before = stats(&c);
    for _ in 0..5 {
        assert_eq!(c.get("/db/doc").status, 200);
    }
    assert_eq!(c.get("/db/missing").status, 404);
    assert_eq!(c.put("/db/new", "{}").status, 201);
    assert_eq!(c.put("/db/_local/x", "{}").status, 201);
    let after = stats(&c);
    let delta = |path: &[&str]| counter(&after, path) - counter(&before, path);
    // Each `_stats` request counts itself before it reads, and its status after.
    assert_eq!(delta(&["couchdb", "httpd_request_methods", "GET"]), 7);
    assert_eq!(delta(&["couchdb", "httpd_request_methods", "PUT"]), 2);
    assert_eq!(delta(&["couchdb", "httpd", "requests"]), 9);
    assert_eq!(delta(&["couchdb", "httpd_status_codes", "200"]), 6);
    assert_eq!(delta(&["couchdb", "httpd_status_codes", "404"]), 1);
    assert_eq!(delta(&["couchdb", "httpd_status_codes", "201"]), 2);
    assert_eq!(delta(&["couchdb", "document_inserts"]), 1);
    assert_eq!(delta(&["couchdb", "document_writes"]), 1);
    assert_eq!(delta(&["couchdb", "local_document_writes"]), 1);
    assert_eq!(delta(&["couchdb", "database_writes"]), 2);
    assert_eq!(delta(&["couchdb", "database_reads"]), 6);
    assert!(delta(&["couchdb", "commits"]) >= 2);
    assert!(delta(&["fsync", "count"]) >= 2);
    assert!(counter(&after, &["couchdb", "open_databases"]) >= 1);
    assert!(counter(&after, &["couchdb", "open_os_files"]) > 0);
    let times = &after["couchdb"]["request_time"];
    assert_eq!(times["type"], "histogram");
    assert!(times["value"]["n"].as_u64().unwrap() >= 9, "{times}");
    assert!(times["value"]["max"].as_f64().unwrap() > 0.0);
    assert_eq!(times["value"]["percentile"].as_array().unwrap().len(), 6);
    // Mango and view counters follow their queries.
    let index = r#"{"index": {"fields": ["n"]}}"#;
    assert_eq!(c.post("/db/_index", index).status, 200);
    let q = r#"{"selector": {"n": {"$gt": 0}}}"#;
    assert_eq!(c.post("/db/_find", q).status, 200);
    let q = r#"{"selector": {"m": 1}}"#;
    assert_eq!(c.post("/db/_find", q).status, 200);
    let later = stats(&c);
    assert_eq!(counter(&later, &["mango", "unindexed_queries"]), 1);
    assert!(counter(&later, &["mango", "docs_examined"]) >= 3);
    assert!(counter(&later, &["couchdb", "mrview", "map_doc"]) >= 2);
    assert_eq!(later["mango"]["query_time"]["value"]["n"], 2);
}

#[test]
fn stats_paths_methods_and_access() {
    let s = TestServer::start();
    let c = s.admin();
    let leaf = c
        .get("/_node/_local/_stats/couchdb/document_inserts")
        .json();
    assert_eq!(leaf["type"], "counter");
    assert_eq!(leaf["desc"], "number of documents inserted");
    let group = c
        .get("/_node/_local/_stats/couchdb/httpd_request_methods")
        .json();
    assert_eq!(group.as_object().unwrap().len(), 7);
    assert_eq!(
        c.get("/_node/_local/_stats/couchdb/nothing").json(),
        Value::Null
    );
    let named = format!("/_node/{}/_stats/couchdb/commits", "settee@127.0.0.1");
    assert_eq!(c.get(&named).json()["type"], "counter");
    c.post("/_node/_local/_stats", "{}")
        .error(405, "method_not_allowed");
    s.anon()
        .get("/_node/_local/_stats")
        .error(401, "unauthorized");
    s.anon()
        .get("/_node/_local/_prometheus")
        .error(401, "unauthorized");
    let system = c.get("/_node/_local/_system").json();
    for field in [
        "uptime",
        "memory",
        "run_queue",
        "context_switches",
        "process_count",
    ] {
        assert!(system.get(field).is_some(), "{field} in {system}");
    }
    assert!(system["memory"]["processes"].as_u64().unwrap() > 0);
    assert!(system["open_os_files"].as_u64().unwrap() > 0);
    assert!(
        system["http_connections"].as_u64().unwrap() >= 1,
        "this request's connection at least"
    );
    let versions = c.get("/_node/_local/_versions").json();
    assert_eq!(versions["javascript_engine"]["name"], "quickjs");
    let engine = versions["javascript_engine"]["version"].as_str().unwrap();
    assert!(engine.split('.').count() >= 2, "{engine}");
    assert_eq!(versions["collation_driver"]["name"], "icu4x");
    assert!(versions["collation_driver"]["library_version"].is_string());
    s.anon()
        .get("/_node/_local/_versions")
        .error(401, "unauthorized");
    let put = c.put("/_node/_local/_versions", "");
    put.error(405, "method_not_allowed");
    assert_eq!(put.header("allow"), Some("GET"));
}

/// The scrape read by prometheus-client's parser (clients/python/test_prometheus.py).
#[test]
fn a_prometheus_scrape_parses_with_couchdbs_families() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python");
    let python = dir.join(".venv/bin/python");
    assert!(
        python.exists(),
        "prometheus-client is not installed: run ./scripts/test, which creates clients/python/.venv"
    );
    let s = TestServer::start();
    let c = s.admin();
    let r = c.get("/_node/_local/_prometheus");
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let out = Command::new(python)
        .arg("test_prometheus.py")
        .current_dir(&dir)
        .env("SETTEE_URL", &s.url)
        .env("SETTEE_USER", ADMIN.0)
        .env("SETTEE_PASSWORD", ADMIN.1)
        .output()
        .expect("run the scrape parser");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every leaf of a `_stats` tree: path, type and description.
fn leaves(v: &Value, path: String, out: &mut Vec<(String, String, String)>) {
    if let (Some(t), Some(d)) = (v.get("type"), v.get("desc")) {
        out.push((path, t.to_string(), d.to_string()));
        return;
    }
    if let Some(o) = v.as_object() {
        for (k, child) in o {
            leaves(child, format!("{path}/{k}"), out);
        }
    }
}

fn families(text: &str) -> std::collections::BTreeSet<String> {
    text.replace('\r', "\n")
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn stats_and_prometheus_have_couchdbs_names() {
    let Some(couch) = ReferenceCouch::start("stats_and_prometheus_have_couchdbs_names") else {
        return;
    };
    let s = TestServer::start();
    let (ours, theirs) = (s.admin(), couch.admin());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    leaves(&stats(&ours), String::new(), &mut a);
    leaves(&stats(&theirs), String::new(), &mut b);
    a.sort();
    b.sort();
    assert_eq!(
        a, b,
        "every metric with CouchDB's path, type and description"
    );
    let ours = families(&ours.get("/_node/_local/_prometheus").text);
    let theirs = families(&theirs.get("/_node/_local/_prometheus").text);
    let missing: Vec<&String> = theirs.difference(&ours).collect();
    assert!(
        missing.iter().all(|n| n.starts_with("couchdb_erlang_")),
        "only the Erlang VM's own figures may be missing: {missing:?}"
    );
    assert!(ours.contains("couchdb_erlang_memory_bytes"));
}
