//! CouchDB's own replicator against the real server (issue 27's client matrix): a real
//! CouchDB 3.5 replicates from Settee and to Settee with `POST /_replicate`, each twice (the
//! second run resumes from the checkpoint the first left in a `_local` document), and
//! continuously through a `_replicator` document while documents are written, with
//! `/_scheduler/docs` showing no error throughout. Both sides must then hold the same
//! documents, revisions, conflicts, deletions and attachments. Skipped, saying so, where
//! `../shared/couchdb/start` is absent.

mod common;

use std::time::{Duration, Instant};

use common::{base64_bytes, Client, ReferenceCouch, TestServer, ADMIN};
use serde_json::{json, Value};

/// How long the continuous replication must run without an error while writes go on.
const CONTINUOUS_FOR: Duration = Duration::from_secs(120);

#[test]
fn couchdbs_replicator_replicates_both_ways_and_resumes() {
    let Some(couch) = ReferenceCouch::start("CouchDB's replicator") else {
        return;
    };
    let s = TestServer::start();
    let (settee, reference) = (s.admin(), couch.admin());
    let settee_url = s
        .url
        .replacen("http://", &format!("http://{}:{}@", ADMIN.0, ADMIN.1), 1);
    let couch_url = couch.url.replacen("http://", "http://admin:admin@", 1);

    // Settee to CouchDB, then CouchDB to Settee, each from a database seeded on its source.
    for (from, from_url, to, to_url, name) in [
        (&settee, &settee_url, &reference, &couch_url, "from-settee"),
        (&reference, &couch_url, &settee, &settee_url, "from-couchdb"),
    ] {
        assert_eq!(from.put(&format!("/{name}"), "").status, 201);
        seed(from, name, 0..150);
        let job = json!({
            "source": format!("{from_url}/{name}"),
            "target": format!("{to_url}/{name}"),
            "create_target": true
        });
        let first = replicate(&reference, &job);
        assert_eq!(first["history"][0]["docs_written"], 152, "{first}");
        assert_same(from, to, name);
        // The second run starts where the first checkpoint says, and writes only the new.
        seed(from, name, 150..160);
        let second = replicate(&reference, &job);
        let history = second["history"].as_array().unwrap();
        assert_eq!(history.len(), 2, "{second}");
        assert_eq!(
            history[0]["start_last_seq"], first["source_last_seq"],
            "{second}"
        );
        assert_eq!(
            history[0]["docs_written"].as_u64().unwrap()
                - history[1]["docs_written"].as_u64().unwrap(),
            10,
            "{second}"
        );
        assert_same(from, to, name);
    }
    continuous(&settee, &settee_url, &reference, &couch_url);
}

/// Documents `range` into `db`: plain ones, every tenth with a binary attachment, one with a
/// conflict and one deleted (both made on the first call).
fn seed(c: &Client, db: &str, range: std::ops::Range<u32>) {
    let first = range.start == 0;
    let docs: Vec<Value> = range
        .map(|i| {
            let mut doc = json!({"_id": format!("doc{i:04}"), "i": i, "text": "ü ∑ 😀"});
            if i % 10 == 0 {
                let bytes: Vec<u8> = (0..20_000u32).map(|n| (n * 7 + i) as u8).collect();
                doc["_attachments"] = json!({"blob.bin": {
                    "content_type": "application/octet-stream",
                    "data": base64_bytes(&bytes)
                }});
            }
            doc
        })
        .collect();
    let r = c.post(
        &format!("/{db}/_bulk_docs"),
        &json!({ "docs": docs }).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    if first {
        let conflict = json!({"new_edits": false, "docs": [
            {"_id": "doc0001", "_rev": "1-0123456789abcdef0123456789abcdef", "side": "other"}
        ]});
        let r = c.post(&format!("/{db}/_bulk_docs"), &conflict.to_string());
        assert_eq!(r.status, 201, "{}", r.text);
        let r = c.put(&format!("/{db}/gone"), "{}");
        let rev = r.json()["rev"].as_str().unwrap().to_string();
        assert_eq!(c.delete(&format!("/{db}/gone?rev={rev}")).status, 200);
    }
}

/// Runs a one-off replication on the reference CouchDB; its answer.
fn replicate(reference: &Client, job: &Value) -> Value {
    let r = reference.post("/_replicate", &job.to_string());
    assert_eq!(r.status, 200, "{job} -> {}", r.text);
    let answer = r.json();
    assert_eq!(answer["ok"], true, "{answer}");
    answer
}

/// Every document of `db` on both servers: ids, winning revisions, bodies, conflicts,
/// attachment digests and lengths, and the deleted document's deletion.
fn assert_same(a: &Client, b: &Client, db: &str) {
    let (left, right) = (state(a, db), state(b, db));
    assert_eq!(left.len(), right.len(), "{db}: document counts");
    for (l, r) in left.iter().zip(&right) {
        assert_eq!(l, r, "{db}");
    }
    for c in [a, b] {
        let gone = c.get(&format!("/{db}/gone"));
        assert_eq!(
            (gone.status, gone.json()["reason"].clone()),
            (404, json!("deleted"))
        );
    }
}

fn state(c: &Client, db: &str) -> Vec<Value> {
    let r = c.get(&format!("/{db}/_all_docs?include_docs=true&conflicts=true"));
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let mut doc = row["doc"].clone();
            // Compare what the bytes are, not how each server keeps them.
            if let Some(atts) = doc.get_mut("_attachments").and_then(Value::as_object_mut) {
                for att in atts.values_mut() {
                    *att = json!({"digest": att["digest"], "length": att["length"],
                                  "content_type": att["content_type"]});
                }
            }
            doc
        })
        .collect()
}

/// A continuous replication from Settee to CouchDB and one back, each a `_replicator`
/// document on CouchDB, while documents are written on both sides for [`CONTINUOUS_FOR`]:
/// the scheduler never shows an error, and both sides end up the same.
fn continuous(settee: &Client, settee_url: &str, reference: &Client, couch_url: &str) {
    for (c, db) in [(settee, "live-a"), (reference, "live-b")] {
        assert_eq!(c.put(&format!("/{db}"), "").status, 201);
    }
    for (id, source, target) in [
        (
            "to-couchdb",
            format!("{settee_url}/live-a"),
            format!("{couch_url}/live-a"),
        ),
        (
            "to-settee",
            format!("{couch_url}/live-b"),
            format!("{settee_url}/live-b"),
        ),
    ] {
        let doc = json!({"source": source, "target": target, "continuous": true,
                         "create_target": true});
        let r = reference.put(&format!("/_replicator/{id}"), &doc.to_string());
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let started = Instant::now();
    let mut n = 0u32;
    while started.elapsed() < CONTINUOUS_FOR {
        seed(settee, "live-a", n..n + 5);
        seed(reference, "live-b", n..n + 5);
        n += 5;
        assert_no_scheduler_errors(reference);
        std::thread::sleep(Duration::from_millis(500));
    }
    for (from, to, db) in [(settee, reference, "live-a"), (reference, settee, "live-b")] {
        let want = from.get(&format!("/{db}")).json()["doc_count"].clone();
        let deadline = Instant::now() + Duration::from_secs(60);
        while to.get(&format!("/{db}")).json()["doc_count"] != want {
            assert!(Instant::now() < deadline, "{db} did not catch up");
            assert_no_scheduler_errors(reference);
            std::thread::sleep(Duration::from_millis(250));
        }
        assert_same(from, to, db);
    }
    let running = assert_no_scheduler_errors(reference);
    assert_eq!(running, 2, "both replications still listed and running");
}

/// Fails on any replication the scheduler shows in error; how many are running.
fn assert_no_scheduler_errors(reference: &Client) -> usize {
    let docs = reference.get("/_scheduler/docs/_replicator").json();
    let docs = docs["docs"].as_array().unwrap();
    for doc in docs {
        assert!(
            matches!(
                doc["state"].as_str(),
                Some("running" | "pending" | "initializing")
            ),
            "{doc}"
        );
        assert_eq!(doc["error_count"], 0, "{doc}");
        assert_eq!(
            doc["info"]["doc_write_failures"].as_u64().unwrap_or(0),
            0,
            "{doc}"
        );
    }
    docs.iter().filter(|d| d["state"] == "running").count()
}
