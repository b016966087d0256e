//! Kill the server with SIGKILL at random moments while clients make acknowledged writes;
//! after every restart each acknowledged write must be there and the database must open.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::TestServer;
use rand::Rng;
use serde_json::{json, Value};

const ROUNDS: usize = 12;
const WRITERS: usize = 4;

/// What a writer saw acknowledged: new documents with their revisions, and the highest
/// acknowledged revision of the one document it keeps updating.
#[derive(Default)]
struct Acked {
    created: Vec<(String, String)>,
    updated: Option<(String, u64)>,
}

fn writer(url: String, round: usize, w: usize, stop: Arc<AtomicBool>) -> Acked {
    let c = common::Client::new(&url, Some(common::ADMIN));
    let mut acked = Acked::default();
    let hot = format!("hot-{w}");
    let Ok(current) = c.try_send("GET", &format!("/db/{hot}"), None, &[]) else {
        return acked;
    };
    let mut hot_rev: Option<String> =
        (current.status == 200).then(|| current.json()["_rev"].as_str().unwrap().to_string());
    for k in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let id = format!("r{round}-w{w}-{k}");
        let Some(r) = try_put(
            &c,
            &format!("/db/{id}"),
            &json!({"k": k, "pad": "x".repeat(k % 3000)}),
        ) else {
            break;
        };
        acked.created.push((id, r));
        let mut body = json!({"n": k});
        if let Some(rev) = &hot_rev {
            body["_rev"] = json!(rev);
        }
        let Some(r) = try_put(&c, &format!("/db/{hot}"), &body) else {
            break;
        };
        acked.updated = Some((hot.clone(), r.split('-').next().unwrap().parse().unwrap()));
        hot_rev = Some(r);
    }
    acked
}

/// A PUT whose success was acknowledged; `None` once the server is gone.
fn try_put(c: &common::Client, path: &str, body: &Value) -> Option<String> {
    let r = c.try_send("PUT", path, Some(&body.to_string()), &[]).ok()?;
    (r.status == 201).then(|| r.json()["rev"].as_str().unwrap().to_string())
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let mut s = TestServer::start();
    s.admin().put("/db", "");
    let mut hot_revs = vec![0u64; WRITERS];
    let mut created = Vec::new();
    let mut rng = rand::thread_rng();
    for round in 0..ROUNDS {
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (url, stop) = (s.url.clone(), stop.clone());
                std::thread::spawn(move || writer(url, round, w, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..400)));
        s.kill();
        stop.store(true, Ordering::Relaxed);
        for (w, h) in handles.into_iter().enumerate() {
            let acked = h.join().unwrap();
            created.extend(acked.created);
            if let Some((_, pos)) = acked.updated {
                hot_revs[w] = hot_revs[w].max(pos);
            }
        }
        s.restart();
        let c = s.admin();
        let info = c.get("/db");
        assert_eq!(
            info.status, 200,
            "database opens after kill {round}: {}",
            info.text
        );
        for (id, rev) in &created {
            let r = c.get(&format!("/db/{id}"));
            assert_eq!(r.status, 200, "acknowledged {id} lost in round {round}");
            assert_eq!(r.json()["_rev"], json!(rev));
        }
        for (w, &pos) in hot_revs.iter().enumerate().filter(|(_, p)| **p > 0) {
            let r = c.get(&format!("/db/hot-{w}")).json();
            let now: u64 = r["_rev"]
                .as_str()
                .unwrap()
                .split('-')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                now >= pos,
                "acknowledged update {pos} of hot-{w} lost (now {now})"
            );
        }
    }
    assert!(
        created.len() > ROUNDS * WRITERS * 5,
        "the writers made progress ({} writes)",
        created.len()
    );
    assert!(
        hot_revs.iter().all(|&p| p > ROUNDS as u64),
        "updates went on in every round: {hot_revs:?}"
    );
}

/// What the lifecycle client last had acknowledged about the `scratch` database, and what
/// it had asked that was not answered when the server died.
#[derive(Default, Clone)]
struct Scratch {
    /// Whether the database existed after the last acknowledged step.
    exists: bool,
    /// Documents acknowledged since it was last created.
    docs: Vec<String>,
    /// The step under way when the server died: "create", "delete" or "write".
    in_flight: Option<&'static str>,
}

/// Deletes, creates and writes to `scratch` over and over, one step after another.
fn lifecycle(url: String, round: usize, mut known: Scratch, stop: Arc<AtomicBool>) -> Scratch {
    let c = common::Client::new(&url, Some(common::ADMIN));
    known.in_flight = None;
    for k in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (step, method, path, body) = match k % 3 {
            0 => ("delete", "DELETE", "/scratch".to_string(), None),
            1 => ("create", "PUT", "/scratch".to_string(), None),
            _ => (
                "write",
                "PUT",
                format!("/scratch/r{round}-{k}"),
                Some("{\"x\":1}"),
            ),
        };
        known.in_flight = Some(step);
        let Ok(r) = c.try_send(method, &path, body, &[]) else {
            break;
        };
        known.in_flight = None;
        match (step, r.status) {
            ("delete", 200) => (known.exists, known.docs) = (false, Vec::new()),
            ("delete", 404) => assert!(!known.exists, "scratch vanished before its deletion"),
            ("create", 201) => known.exists = true,
            ("create", 412) => assert!(known.exists, "scratch came back without a creation"),
            ("write", 201) => known
                .docs
                .push(path.trim_start_matches("/scratch/").to_string()),
            ("write", 404) => assert!(!known.exists, "a write to scratch found no database"),
            (step, status) => panic!("{step} answered {status}: {}", r.text),
        }
    }
    known
}

/// Attachments written by one client, acknowledged: document, revision and length.
fn attacher(url: String, round: usize, stop: Arc<AtomicBool>) -> Vec<(String, String, usize)> {
    let c = common::Client::new(&url, Some(common::ADMIN));
    let mut acked = Vec::new();
    for k in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let len = 1000 + (k * 37_001) % 300_000;
        let id = format!("att-{round}-{k}");
        let body = att_bytes(&id, len);
        let Ok(r) = c.try_send(
            "PUT",
            &format!("/db/{id}/blob"),
            Some(&body),
            &[("Content-Type", "application/octet-stream")],
        ) else {
            break;
        };
        if r.status == 201 {
            acked.push((id, r.json()["rev"].as_str().unwrap().to_string(), len));
        }
    }
    acked
}

fn att_bytes(id: &str, len: usize) -> String {
    id.chars().cycle().take(len).collect()
}

/// Compacts the database and its view, and reads the view, over and over.
fn compactor(url: String, stop: Arc<AtomicBool>) {
    let c = common::Client::new(&url, Some(common::ADMIN));
    while !stop.load(Ordering::Relaxed) {
        for path in ["/db/_compact", "/db/_compact/v"] {
            if c.try_send("POST", path, Some("{}"), &[]).is_err() {
                return;
            }
        }
        if c.try_send("GET", "/db/_design/v/_view/count", None, &[])
            .is_err()
        {
            return;
        }
    }
}

/// SIGKILL while databases are deleted and made again, attachments are written, and the
/// database and its view index compact: after every restart every acknowledged write and
/// attachment is there whole, the deleted-and-made database is as its client last knew it
/// (allowing for the one step under way), and the view answers for every document.
#[test]
fn lifecycle_compaction_and_attachments_survive_sigkill() {
    let mut s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    c.put(
        "/db/_design/v",
        r#"{"views":{"count":{"map":"function(doc){ emit(doc._id, 1); }","reduce":"_count"}}}"#,
    );
    let mut scratch = Scratch::default();
    let mut created = Vec::new();
    let mut attachments = Vec::new();
    let mut rng = rand::thread_rng();
    for round in 0..8 {
        let stop = Arc::new(AtomicBool::new(false));
        let url = s.url.clone();
        let docs = {
            let (u, st) = (url.clone(), stop.clone());
            std::thread::spawn(move || writer(u, round, 0, st))
        };
        let life = {
            let (u, st, k) = (url.clone(), stop.clone(), scratch.clone());
            std::thread::spawn(move || lifecycle(u, round, k, st))
        };
        let atts = {
            let (u, st) = (url.clone(), stop.clone());
            std::thread::spawn(move || attacher(u, round, st))
        };
        let comp = {
            let (u, st) = (url.clone(), stop.clone());
            std::thread::spawn(move || compactor(u, st))
        };
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..700)));
        s.kill();
        stop.store(true, Ordering::Relaxed);
        created.extend(docs.join().unwrap().created);
        scratch = life.join().unwrap();
        attachments.extend(atts.join().unwrap());
        comp.join().unwrap();
        s.restart();
        let c = s.admin();
        assert_eq!(c.get("/db").status, 200, "round {round}");
        for (id, rev) in &created {
            assert_eq!(
                c.get(&format!("/db/{id}")).json()["_rev"],
                json!(rev),
                "acknowledged {id} lost in round {round}"
            );
        }
        for (id, rev, len) in &attachments {
            let r = c.get(&format!("/db/{id}/blob"));
            assert!(
                r.status == 200 && r.text == att_bytes(id, *len),
                "attachment of {id} ({len} bytes) lost or damaged in round {round}: {}",
                r.status
            );
            assert_eq!(c.get(&format!("/db/{id}")).json()["_rev"], json!(rev));
        }
        let exists = c.get("/scratch").status == 200;
        match scratch.in_flight {
            Some("delete") => assert!(exists == scratch.exists || !exists, "round {round}"),
            Some("create") => assert!(exists == scratch.exists || exists, "round {round}"),
            _ => assert_eq!(
                exists, scratch.exists,
                "round {round}: scratch should exist: {}",
                scratch.exists
            ),
        }
        if exists && scratch.exists {
            for id in &scratch.docs {
                assert_eq!(
                    c.get(&format!("/scratch/{id}")).status,
                    200,
                    "acknowledged scratch/{id} lost in round {round}"
                );
            }
        }
        // The step under way may have happened: the client goes on from what is there.
        if exists != scratch.exists {
            scratch.docs.clear();
        }
        scratch.exists = exists;
        // Every document but the design document, which views do not map.
        let docs = c.get("/db").json()["doc_count"].as_u64().unwrap() - 1;
        let view = c.get("/db/_design/v/_view/count").json();
        assert_eq!(
            view["rows"][0]["value"].as_u64(),
            Some(docs),
            "round {round}: the view counts every document"
        );
    }
    assert!(
        !attachments.is_empty() && created.len() > 20,
        "the clients made progress"
    );
}
