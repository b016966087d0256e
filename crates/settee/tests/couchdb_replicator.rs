//! CouchDB's own replicator against the real server (issue 27's client matrix): a real
//! CouchDB 3.5 replicates from Settee and to Settee with `POST /_replicate`, each twice (the
//! second run resumes from the checkpoint the first left in a `_local` document), and
//! continuously through a `_replicator` document while documents are written, with
//! `/_scheduler/docs` showing no error throughout. Both sides must then hold the same
//! documents, revisions, conflicts, deletions and attachments. Skipped, saying so, where
//! `../shared/couchdb/start` is absent.

mod common;

use std::time::{Duration, Instant};

use common::replication::{assert_resumed, assert_same, replicate, seed};
use common::{Client, ReferenceCouch, TestServer, ADMIN};
use serde_json::json;

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

/// Settee's replicator with CouchDB at the other end: Settee pulls a CouchDB database and
/// pushes one of its own to CouchDB, each twice (the second run resuming from the
/// checkpoint), and both sides hold the same documents, revisions, conflicts, deletions and
/// attachments.
#[test]
fn settees_replicator_pulls_from_and_pushes_to_couchdb() {
    let Some(couch) = ReferenceCouch::start("Settee's replicator with CouchDB") else {
        return;
    };
    let s = TestServer::start();
    let (settee, reference) = (s.admin(), couch.admin());
    let couch_url = couch.url.replacen("http://", "http://admin:admin@", 1);
    for (from, to, name, job) in [
        (
            &reference,
            &settee,
            "pulled-from-couchdb",
            json!({"source": format!("{couch_url}/pulled-from-couchdb"),
                   "target": "pulled-from-couchdb", "create_target": true}),
        ),
        (
            &settee,
            &reference,
            "pushed-to-couchdb",
            json!({"source": "pushed-to-couchdb",
                   "target": format!("{couch_url}/pushed-to-couchdb"), "create_target": true}),
        ),
    ] {
        assert_eq!(from.put(&format!("/{name}"), "").status, 201);
        seed(from, name, 0..150);
        let first = replicate(&settee, &job);
        assert_eq!(first["history"][0]["docs_written"], 152, "{first}");
        assert_same(from, to, name);
        seed(from, name, 150..160);
        let second = replicate(&settee, &job);
        assert_resumed(&first, &second, 10);
        assert_same(from, to, name);
    }
    // Continuously, from CouchDB's continuous feed: what is written there arrives here.
    let doc = json!({"source": format!("{couch_url}/pulled-from-couchdb"),
                     "target": "pulled-from-couchdb", "continuous": true});
    let r = settee.put("/_replicator/from-couchdb", &doc.to_string());
    assert_eq!(r.status, 201, "{}", r.text);
    seed(&reference, "pulled-from-couchdb", 160..170);
    let deadline = Instant::now() + Duration::from_secs(60);
    while settee.get("/pulled-from-couchdb").json()["doc_count"]
        != reference.get("/pulled-from-couchdb").json()["doc_count"]
    {
        assert!(
            Instant::now() < deadline,
            "the continuous pull did not catch up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_same(&reference, &settee, "pulled-from-couchdb");
    let state = settee
        .get("/_scheduler/docs/_replicator/from-couchdb")
        .json();
    assert_eq!(state["state"], "running", "{state}");
}
