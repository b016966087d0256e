//! `GET /_db_updates`: database creations, updates and deletions as a feed kept in
//! `_global_changes` (as CouchDB keeps it), in every feed mode, resumable with `since` across
//! a restart; server admins only; 404 without `_global_changes`, as in CouchDB.

mod common;

use std::time::{Duration, Instant};

use common::{Client, ReferenceCouch, TestServer};
use serde_json::{json, Value};

/// The `(db_name, type)` of each row of a normal feed.
fn events(v: &Value) -> Vec<(String, String)> {
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {v}"))
        .iter()
        .map(|r| {
            (
                r["db_name"].as_str().unwrap().to_string(),
                r["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The normal feed once it lists every one of `wanted` (events are written a moment after
/// they happen).
fn until_listed(c: &Client, wanted: &[(&str, &str)]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let feed = c.get("/_db_updates").json();
        let got = events(&feed);
        if wanted
            .iter()
            .all(|(d, t)| got.iter().any(|(gd, gt)| gd == d && gt == t))
        {
            return feed;
        }
        assert!(Instant::now() < deadline, "{wanted:?} not all in {feed}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn database_events_are_listed_and_survive_a_restart() {
    let mut s = TestServer::start();
    let c = s.admin();
    let r = c.get("/_db_updates");
    r.error(404, "not_found");
    assert_eq!(r.json()["reason"], "Database does not exist.");
    s.anon().get("/_db_updates").error(401, "unauthorized");
    assert_eq!(c.put("/_global_changes", "").status, 201);
    assert_eq!(c.put("/gc1", "").status, 201);
    assert_eq!(c.put("/gc1/a", "{}").status, 201);
    assert_eq!(c.put("/gc2", "").status, 201);
    assert_eq!(c.delete("/gc2").status, 200);
    let wanted = [
        ("gc1", "created"),
        ("gc1", "updated"),
        ("gc2", "created"),
        ("gc2", "deleted"),
    ];
    let feed = until_listed(&c, &wanted);
    let got = events(&feed);
    assert_eq!(got.len(), 4, "one row per database and kind: {feed}");
    assert!(!got.iter().any(|(d, _)| d == "_global_changes"));
    let row = &feed["results"][0];
    let mut keys: Vec<&String> = row.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["db_name", "seq", "type"]);
    let last = feed["last_seq"].as_str().unwrap().to_string();
    // Many writes to one database in a moment make one `updated` change.
    for i in 0..50 {
        assert_eq!(c.put(&format!("/gc1/m{i}"), "{}").status, 201);
    }
    let limited = c.get("/_db_updates?limit=1&descending=true").json();
    assert_eq!(events(&limited).len(), 1);
    // Written a moment later (a crash before then loses it, as in CouchDB): wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while events(&c.get(&format!("/_db_updates?since={last}")).json()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "gc1's writes never made an event"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Durable: after a restart the feed is the same, and resumes where a client left it.
    s.restart();
    let c = s.admin();
    let after = until_listed(&c, &wanted);
    assert_eq!(events(&after).len(), 4, "{after}");
    let r = c.get(&format!(
        "/_db_updates?feed=longpoll&since={last}&timeout=5000"
    ));
    assert_eq!(
        events(&r.json()),
        [("gc1".to_string(), "updated".to_string())]
    );
    assert_eq!(c.put("/gc3", "").status, 201);
    let text = c
        .get(&format!(
            "/_db_updates?feed=continuous&since={last}&timeout=300"
        ))
        .text;
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.last().unwrap().get("last_seq").is_some(), "{text}");
    assert!(
        lines.iter().any(|l| l["db_name"] == "gc1"),
        "the continuous feed lists what came after `since`: {text}"
    );
    until_listed(&c, &[("gc3", "created")]);
}

#[test]
fn db_updates_has_couchdbs_shape() {
    let Some(couch) = ReferenceCouch::start("db_updates_has_couchdbs_shape") else {
        return;
    };
    let s = TestServer::start();
    let (ours, theirs) = (s.admin(), couch.admin());
    for c in [&ours, &theirs] {
        let missing = c.get("/_db_updates");
        assert_eq!(missing.status, 404);
        assert_eq!(missing.json()["error"], "not_found");
        assert_eq!(c.put("/_global_changes", "").status, 201);
        assert_eq!(c.put("/shaped", "").status, 201);
    }
    let wanted = [("shaped", "created")];
    let (a, b) = (until_listed(&ours, &wanted), until_listed(&theirs, &wanted));
    let shape = |v: &Value| {
        let mut top: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        top.sort();
        let row = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["db_name"] == "shaped")
            .cloned()
            .unwrap();
        (top, row["type"].clone(), row["seq"].is_string())
    };
    assert_eq!(shape(&a), shape(&b));
    assert_eq!(shape(&a).1, json!("created"));
}
