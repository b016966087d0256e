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
    let Ok(current) = c.try_send("GET", &format!("/db/{hot}"), None, &[]) else { return acked };
    let mut hot_rev: Option<String> = (current.status == 200).then(|| current.json()["_rev"].as_str().unwrap().to_string());
    for k in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let id = format!("r{round}-w{w}-{k}");
        let Some(r) = try_put(&c, &format!("/db/{id}"), &json!({"k": k, "pad": "x".repeat(k % 3000)})) else { break };
        acked.created.push((id, r));
        let mut body = json!({"n": k});
        if let Some(rev) = &hot_rev {
            body["_rev"] = json!(rev);
        }
        let Some(r) = try_put(&c, &format!("/db/{hot}"), &body) else { break };
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
        assert_eq!(info.status, 200, "database opens after kill {round}: {}", info.text);
        for (id, rev) in &created {
            let r = c.get(&format!("/db/{id}"));
            assert_eq!(r.status, 200, "acknowledged {id} lost in round {round}");
            assert_eq!(r.json()["_rev"], json!(rev));
        }
        for (w, &pos) in hot_revs.iter().enumerate().filter(|(_, p)| **p > 0) {
            let r = c.get(&format!("/db/hot-{w}")).json();
            let now: u64 = r["_rev"].as_str().unwrap().split('-').next().unwrap().parse().unwrap();
            assert!(now >= pos, "acknowledged update {pos} of hot-{w} lost (now {now})");
        }
    }
    assert!(created.len() > ROUNDS * WRITERS * 5, "the writers made progress ({} writes)", created.len());
    assert!(hot_revs.iter().all(|&p| p > ROUNDS as u64), "updates went on in every round: {hot_revs:?}");
}
