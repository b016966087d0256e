//! Settee's own replicator (issue 29) between real servers: `POST /_replicate` one-shot and
//! continuous, Settee to Settee (two processes) and local to local, second runs resuming
//! from the checkpoint, `doc_ids`/`filter`/`selector`, 10,000 documents with conflicts,
//! deletions and attachments (some over 1 MB) compared as whole state, `_replicator`
//! documents and the scheduler's states, the job's server killed with SIGKILL and the
//! target killed mid-way, and bad input.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::replication::{assert_resumed, assert_same, assert_same_dbs, seed};
use common::{base64_bytes, Client, TestServer, ADMIN};
use serde_json::{json, Value};

/// `http://admin:secret@127.0.0.1:PORT`.
fn with_creds(url: &str) -> String {
    url.replacen("http://", &format!("http://{}:{}@", ADMIN.0, ADMIN.1), 1)
}

/// Runs a one-shot `_replicate` on `c`; its answer.
fn run(c: &Client, job: &Value) -> Value {
    let r = c.post("/_replicate", &job.to_string());
    assert_eq!(r.status, 200, "{job} -> {}", r.text);
    let answer = r.json();
    assert_eq!(answer["ok"], true, "{answer}");
    answer
}

/// Waits up to `secs` for `done`, failing with `what`.
fn wait_for(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn doc_count(c: &Client, db: &str) -> u64 {
    c.get(&format!("/{db}")).json()["doc_count"]
        .as_u64()
        .unwrap_or(0)
}

fn ids(c: &Client, db: &str) -> Vec<String> {
    c.get(&format!("/{db}/_all_docs")).json()["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| r["id"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Attachment bytes of `len` that differ per `seed`.
fn blob(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|n| (n.wrapping_mul(31) ^ seed) as u8)
        .collect()
}

/// Conflicts on every 200th document from 5 and deletions on every 200th from 7, and two
/// documents with attachments over 1 MB.
fn roughen(c: &Client, db: &str) {
    let conflicts: Vec<Value> = (5..10_000)
        .step_by(200)
        .map(|i| json!({"_id": format!("doc{i:04}"), "_rev": "1-00000000000000000000000000000abc", "side": "b"}))
        .collect();
    let body = json!({"new_edits": false, "docs": conflicts});
    assert_eq!(
        c.post(&format!("/{db}/_bulk_docs"), &body.to_string())
            .status,
        201
    );
    for i in (7..10_000).step_by(200) {
        let id = format!("doc{i:04}");
        let rev = c.get(&format!("/{db}/{id}")).json()["_rev"].clone();
        let r = c.delete(&format!("/{db}/{id}?rev={}", rev.as_str().unwrap()));
        assert_eq!(r.status, 200, "{}", r.text);
    }
    for (id, len) in [("huge-1", 1_500_000), ("huge-2", 3_000_000)] {
        let doc = json!({"_attachments": {"big.bin": {
            "content_type": "application/octet-stream",
            "data": base64_bytes(&blob(len, len as u32))
        }}});
        assert_eq!(c.put(&format!("/{db}/{id}"), &doc.to_string()).status, 201);
    }
}

#[test]
fn settee_to_settee_with_ten_thousand_documents_resumes_from_its_checkpoint() {
    let (a, b) = (TestServer::start(), TestServer::start());
    let (ca, cb) = (a.admin(), b.admin());
    assert_eq!(ca.put("/big", "").status, 201);
    for k in 0..10 {
        seed(&ca, "big", k * 1000..(k + 1) * 1000);
    }
    roughen(&ca, "big");
    // Pushed by A's replicator: a local source, a remote target made for it.
    let push = json!({"source": "big", "target": format!("{}/big", with_creds(&b.url)),
                      "create_target": true});
    let first = run(&ca, &push);
    assert_eq!(first["history"].as_array().unwrap().len(), 1, "{first}");
    assert_same(&ca, &cb, "big");
    for (id, len) in [("huge-1", 1_500_000), ("huge-2", 3_000_000)] {
        let copy = raw_get(&b.url, &format!("/big/{id}/big.bin"));
        assert!(
            copy == blob(len, len as u32),
            "{id}: attachment bytes differ"
        );
    }
    // The second run starts at the first's checkpoint and copies only what is new.
    seed(&ca, "big", 10_000..10_010);
    let second = run(&ca, &push);
    assert_resumed(&first, &second, 10);
    assert_same(&ca, &cb, "big");
    // Nothing new: CouchDB's `no_changes` answer, the same session as before.
    let third = run(&ca, &push);
    assert_eq!(third["no_changes"], true, "{third}");
    assert_eq!(third["session_id"], second["session_id"], "{third}");
    // Pulled by B's replicator: a remote source, a local target.
    let pull = json!({"source": format!("{}/big", with_creds(&a.url)), "target": "pulled",
                      "create_target": true});
    run(&cb, &pull);
    assert_same_dbs(&ca, "big", &cb, "pulled");
}

/// The body of a GET as bytes.
fn raw_get(base: &str, path: &str) -> Vec<u8> {
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let auth = base64_bytes(format!("{}:{}", ADMIN.0, ADMIN.1).as_bytes());
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {auth}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..split]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(!head.contains("chunked"), "{head}");
    all[split..].to_vec()
}

#[test]
fn local_replications_follow_doc_ids_selectors_and_filters() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/f-src", "").status, 201);
    let docs = json!({"docs": [
        {"_id": "a", "kind": "x"}, {"_id": "b", "kind": "y"}, {"_id": "c", "kind": "x"},
        {"_id": "_design/d", "filters": {
            "by_kind": "function(doc, req) { return doc.kind === req.query.kind; }"}}
    ]});
    assert_eq!(c.post("/f-src/_bulk_docs", &docs.to_string()).status, 201);
    let job = |target: &str, extra: Value| {
        let mut j = json!({"source": "f-src", "target": target, "create_target": true});
        j.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        j
    };
    run(&c, &job("f-ids", json!({"doc_ids": ["a", "b"]})));
    assert_eq!(ids(&c, "f-ids"), ["a", "b"]);
    run(&c, &job("f-sel", json!({"selector": {"kind": "y"}})));
    assert_eq!(ids(&c, "f-sel"), ["b"]);
    let filtered = job(
        "f-js",
        json!({"filter": "d/by_kind", "query_params": {"kind": "x"}}),
    );
    let first = run(&c, &filtered);
    assert_eq!(ids(&c, "f-js"), ["a", "c"]);
    // A filtered replication resumes from its own checkpoint too.
    assert_eq!(c.put("/f-src/e", r#"{"kind": "x"}"#).status, 201);
    assert_eq!(c.put("/f-src/f", r#"{"kind": "y"}"#).status, 201);
    let second = run(&c, &filtered);
    assert_eq!(ids(&c, "f-js"), ["a", "c", "e"]);
    assert_eq!(
        second["history"][0]["start_last_seq"], first["source_last_seq"],
        "{second}"
    );
    assert_eq!(second["history"][0]["docs_written"], 1, "{second}");
    // Everything, design document included, when unfiltered.
    run(&c, &job("f-all", json!({})));
    assert_eq!(ids(&c, "f-all"), ["_design/d", "a", "b", "c", "e", "f"]);
}

/// A replication document's state as `/_scheduler/docs` shows it.
fn doc_state(c: &Client, id: &str) -> Value {
    c.get(&format!("/_scheduler/docs/_replicator/{id}")).json()
}

#[test]
fn replicator_documents_start_restart_and_stop_jobs() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/live", "").status, 201);
    assert_eq!(c.put("/live/first", "{}").status, 201);
    let cont = json!({"source": "live", "target": "live-copy", "continuous": true,
                      "create_target": true});
    assert_eq!(c.put("/_replicator/cont", &cont.to_string()).status, 201);
    wait_for("the first document", 30, || doc_count(&c, "live-copy") == 1);
    for i in 0..20 {
        assert_eq!(c.put(&format!("/live/d{i}"), "{}").status, 201);
    }
    wait_for("twenty more documents", 30, || {
        doc_count(&c, "live-copy") == 21
    });
    let state = doc_state(&c, "cont");
    assert_eq!(state["state"], "running", "{state}");
    assert!(
        state["info"]["docs_written"].as_u64().unwrap() >= 21,
        "{state}"
    );
    assert!(
        state["id"]
            .as_str()
            .unwrap()
            .ends_with("+continuous+create_target"),
        "{state}"
    );
    let jobs = c.get("/_scheduler/jobs").json();
    assert!(
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["doc_id"] == "cont"),
        "{jobs}"
    );
    let tasks = c.get("/_active_tasks").json();
    assert!(
        tasks
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["type"] == "replication"
                && t["doc_id"] == "cont"
                && t["continuous"] == true),
        "{tasks}"
    );
    // A one-shot document completes and says so in itself.
    let once = json!({"source": "live", "target": "once-copy", "create_target": true});
    assert_eq!(c.put("/_replicator/once", &once.to_string()).status, 201);
    wait_for("the one-shot job to complete", 30, || {
        c.get("/_replicator/once").json()["_replication_state"] == "completed"
    });
    let once = c.get("/_replicator/once").json();
    assert_eq!(once["_replication_stats"]["docs_written"], 21, "{once}");
    assert_eq!(doc_count(&c, "once-copy"), 21);
    assert_eq!(doc_state(&c, "once")["state"], "completed");
    // A malformed document fails with the reason, in itself and in the scheduler.
    assert_eq!(
        c.put("/_replicator/bad", r#"{"source": "live"}"#).status,
        201
    );
    wait_for("the malformed document to fail", 30, || {
        c.get("/_replicator/bad").json()["_replication_state"] == "failed"
    });
    let bad = c.get("/_replicator/bad").json();
    assert!(
        bad["_replication_state_reason"]
            .as_str()
            .unwrap()
            .contains("target"),
        "{bad}"
    );
    assert_eq!(doc_state(&c, "bad")["state"], "failed");
    // Updating a document restarts its job with what it says now.
    let rev = c.get("/_replicator/cont").json()["_rev"].clone();
    let mut changed = cont.clone();
    changed["_rev"] = rev;
    changed["target"] = json!("live-copy2");
    assert_eq!(c.put("/_replicator/cont", &changed.to_string()).status, 201);
    wait_for("the restarted job", 30, || {
        doc_count(&c, "live-copy2") == 21
    });
    // Deleting it stops the job.
    let rev = c.get("/_replicator/cont").json()["_rev"].clone();
    let r = c.delete(&format!("/_replicator/cont?rev={}", rev.as_str().unwrap()));
    assert_eq!(r.status, 200);
    wait_for("the job to stop", 30, || {
        c.get("/_scheduler/docs/_replicator/cont").status == 404
    });
    assert_eq!(c.put("/live/after", "{}").status, 201);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        doc_count(&c, "live-copy2"),
        21,
        "a deleted job went on copying"
    );
}

/// The id of a replication document's job, without its option suffixes.
fn base_id(c: &Client, doc: &str) -> String {
    let state = doc_state(c, doc);
    let id = state["id"].as_str().unwrap_or_else(|| panic!("{state}"));
    id.split('+').next().unwrap().to_string()
}

#[test]
fn a_killed_job_server_resumes_from_its_checkpoint() {
    let (mut a, b) = (TestServer::start(), TestServer::start());
    let cb = b.admin();
    let ca = a.admin();
    assert_eq!(ca.put("/r-src", "").status, 201);
    seed(&ca, "r-src", 0..100);
    let doc = json!({"source": "r-src", "target": format!("{}/r-tgt", with_creds(&b.url)),
                     "continuous": true, "create_target": true, "checkpoint_interval": 200});
    assert_eq!(ca.put("/_replicator/r", &doc.to_string()).status, 201);
    wait_for("the first documents", 60, || doc_count(&cb, "r-tgt") == 100);
    let id = base_id(&ca, "r");
    wait_for("a checkpoint", 30, || {
        let info = doc_state(&ca, "r")["info"].clone();
        info["checkpointed_source_seq"] == info["through_seq"] && info["through_seq"] != 0
    });
    let before = cb.get(&format!("/r-tgt/_local/{id}")).json();
    a.kill();
    a.restart();
    let ca = a.admin();
    seed(&ca, "r-src", 100..150);
    wait_for("the documents written after the restart", 60, || {
        doc_count(&cb, "r-tgt") == 150
    });
    assert_same_dbs(&ca, "r-src", &cb, "r-tgt");
    // The new session started where the old one's checkpoint was.
    wait_for("the new session's checkpoint", 30, || {
        cb.get(&format!("/r-tgt/_local/{id}")).json()["session_id"] != before["session_id"]
    });
    let after = cb.get(&format!("/r-tgt/_local/{id}")).json();
    assert_eq!(
        after["history"][0]["start_last_seq"], before["source_last_seq"],
        "{after}"
    );
}

#[test]
fn a_job_crashes_while_its_target_is_down_and_recovers() {
    let (a, mut b) = (TestServer::start(), TestServer::start());
    let ca = a.admin();
    assert_eq!(ca.put("/t-src", "").status, 201);
    seed(&ca, "t-src", 0..20);
    let doc = json!({"source": "t-src", "target": format!("{}/t-tgt", with_creds(&b.url)),
                     "continuous": true, "create_target": true, "retries_per_request": 1});
    assert_eq!(ca.put("/_replicator/t", &doc.to_string()).status, 201);
    wait_for("the first documents", 60, || {
        doc_count(&b.admin(), "t-tgt") == 20
    });
    b.kill();
    seed(&ca, "t-src", 20..40);
    // A request cut mid-answer before the outage waits out the connection timeout (30 s)
    // before its retries meet the outage: allow for that on a loaded machine.
    wait_for("the job to crash", 120, || {
        doc_state(&ca, "t")["state"] == "crashing"
    });
    let crashing = doc_state(&ca, "t");
    assert!(crashing["error_count"].as_u64().unwrap() >= 1, "{crashing}");
    assert!(crashing["info"]["error"].is_string(), "{crashing}");
    b.restart_same_port();
    let cb = b.admin();
    wait_for("the documents written while it was down", 90, || {
        doc_count(&cb, "t-tgt") == 40
    });
    wait_for("the job to run again", 30, || {
        doc_state(&ca, "t")["state"] == "running"
    });
    assert_same_dbs(&ca, "t-src", &cb, "t-tgt");
    let jobs = ca.get("/_scheduler/jobs").json();
    let job = &jobs["jobs"][0];
    assert!(
        job["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["type"] == "crashed"),
        "{job}"
    );
}

/// A server that answers every request with `200` and a body that is not JSON.
fn garbage_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten().take(50) {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello there",
            );
        }
    });
    url
}

#[test]
fn bad_replications_get_couchdbs_errors_and_leave_nothing_stuck() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/src", "").status, 201);
    let r = c.post("/_replicate", "[]");
    r.error(400, "bad_request");
    assert_eq!(r.json()["reason"], "Request body must be a JSON object");
    let r = c.post(
        "/_replicate",
        r#"{"source": "src", "target": "t", "doc_ids": "a"}"#,
    );
    assert_eq!(r.json()["reason"], "parameter `doc_ids` must be an array");
    r.error(400, "bad_request");
    let r = c.post(
        "/_replicate",
        r#"{"source": "src", "target": "t", "continuous": "yes"}"#,
    );
    r.error(400, "bad_request");
    c.post(
        "/_replicate",
        r#"{"source": "src", "target": "t", "filter": "x"}"#,
    )
    .error(400, "bad_request");
    c.post(
        "/_replicate",
        r#"{"source": "src", "target": "t", "doc_ids": ["a"], "selector": {}}"#,
    )
    .error(400, "bad_request");
    c.post("/_replicate", r#"{"source": "src"}"#)
        .error(400, "bad_request");
    c.post("/_replicate", "{not json").error(400, "bad_request");
    let r = c.post("/_replicate", r#"{"source": "nope", "target": "t"}"#);
    r.error(500, "db_not_found");
    assert_eq!(r.json()["reason"], "could not open nope");
    let unreachable = json!({"source": "http://127.0.0.1:1/x", "target": "t",
                             "retries_per_request": 1});
    let r = c.post("/_replicate", &unreachable.to_string());
    assert_eq!(r.status, 500, "{}", r.text);
    let wrong = json!({"source": format!("{}/src", s.url.replacen("http://", "http://admin:wrong@", 1)),
                       "target": "t"});
    c.post("/_replicate", &wrong.to_string())
        .error(401, "unauthorized");
    let garbage = json!({"source": format!("{}/db", garbage_server()), "target": "t",
                         "retries_per_request": 1});
    let r = c.post("/_replicate", &garbage.to_string());
    assert_eq!(r.status, 500, "{}", r.text);
    assert!(
        r.json()["reason"].as_str().unwrap().contains("not"),
        "{}",
        r.text
    );
    c.post(
        "/_replicate",
        r#"{"source": "src", "target": "t", "cancel": true}"#,
    )
    .error(404, "not_found");
    // A continuous replication answers at once, and cancelling it stops it.
    let cont = json!({"source": "src", "target": "t2", "continuous": true,
                      "create_target": true});
    let r = c.post("/_replicate", &cont.to_string());
    assert_eq!(r.status, 202, "{}", r.text);
    let id = r.json()["_local_id"].as_str().unwrap().to_string();
    assert!(id.ends_with("+continuous+create_target"), "{id}");
    wait_for("the continuous job to run", 30, || {
        c.get("/_scheduler/jobs").json()["jobs"][0]["id"] == id.as_str()
    });
    let mut cancel = cont.clone();
    cancel["cancel"] = json!(true);
    let r = c.post("/_replicate", &cancel.to_string());
    assert_eq!(
        (r.status, r.json()["_local_id"].clone()),
        (200, json!(id)),
        "{}",
        r.text
    );
    assert_eq!(c.get("/_scheduler/jobs").json()["total_rows"], 0);
    // The server is whole: a good replication still works.
    run(
        &c,
        &json!({"source": "src", "target": "t3", "create_target": true}),
    );
    assert_eq!(c.get("/t3").status, 200);
}

/// How the fault proxy treats new connections.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Faults {
    /// Pass everything through.
    None,
    /// Drop, stall and truncate connections at random.
    Random,
    /// Refuse everything (the peer is down).
    Outage,
}

/// A TCP proxy to `upstream` that breaks connections as `faults` says.
struct FaultProxy {
    url: String,
    faults: std::sync::Arc<std::sync::Mutex<Faults>>,
    /// The client side of every connection, so that a change of mode reaches the
    /// connections kept alive from before too.
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl FaultProxy {
    fn start(upstream: &str) -> FaultProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let faults = std::sync::Arc::new(std::sync::Mutex::new(Faults::None));
        let upstream = upstream.trim_start_matches("http://").to_string();
        let mode = faults.clone();
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let registry = open.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let faults = *mode.lock().unwrap();
                if let Ok(c) = client.try_clone() {
                    registry.lock().unwrap().push(c);
                }
                let upstream = upstream.clone();
                std::thread::spawn(move || proxy_connection(client, &upstream, faults));
            }
        });
        FaultProxy { url, faults, open }
    }

    /// Sets the mode, breaking every connection made before.
    fn set(&self, faults: Faults) {
        *self.faults.lock().unwrap() = faults;
        for c in self.open.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Copies `from` to `to` until either closes, or until `limit` bytes when given.
fn pump(mut from: std::net::TcpStream, mut to: std::net::TcpStream, limit: Option<usize>) {
    let mut buf = [0u8; 8192];
    let mut left = limit.unwrap_or(usize::MAX);
    while left > 0 {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n.min(left),
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        left -= n;
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

fn proxy_connection(client: std::net::TcpStream, upstream: &str, faults: Faults) {
    let roll = rand::random::<u32>() % 100;
    match faults {
        Faults::Outage => return,
        Faults::Random if roll < 15 => return,
        Faults::Random if roll < 25 => {
            std::thread::sleep(Duration::from_secs(3));
            return;
        }
        _ => {}
    }
    let Ok(server) = std::net::TcpStream::connect(upstream) else {
        return;
    };
    // Truncated: the answers stop after a few kilobytes, mid-message.
    let limit = (faults == Faults::Random && roll < 45).then(|| rand::random::<usize>() % 20_000);
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    std::thread::spawn(move || pump(c2, s2, None));
    if faults == Faults::Random {
        // Connections kept alive die at a random moment too.
        let (c3, s3) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let life = Duration::from_millis(200 + rand::random::<u64>() % 3000);
        std::thread::spawn(move || {
            std::thread::sleep(life);
            let _ = c3.shutdown(std::net::Shutdown::Both);
            let _ = s3.shutdown(std::net::Shutdown::Both);
        });
    }
    pump(server, client, limit);
}

#[test]
fn a_continuous_push_through_a_faulty_network_converges_without_duplicates() {
    through_a_faulty_network(true);
}

/// The job's source is remote here: its continuous changes feed is what breaks.
#[test]
fn a_continuous_pull_through_a_faulty_network_converges_without_duplicates() {
    through_a_faulty_network(false);
}

/// A continuous replication of server A's `p-src` into server B's `p-tgt`, run by A
/// (`push`) or by B, its connections to the other server going through a [`FaultProxy`],
/// while documents are written on A.
fn through_a_faulty_network(push: bool) {
    let (a, b) = (TestServer::start(), TestServer::start());
    let (ca, cb) = (a.admin(), b.admin());
    let proxy = FaultProxy::start(if push { &b.url } else { &a.url });
    let far = with_creds(&proxy.url);
    assert_eq!(ca.put("/p-src", "").status, 201);
    seed(&ca, "p-src", 0..50);
    let (runner, source, target) = if push {
        (&ca, json!("p-src"), json!(format!("{far}/p-tgt")))
    } else {
        (&cb, json!(format!("{far}/p-src")), json!("p-tgt"))
    };
    let doc = json!({"source": source, "target": target,
                     "continuous": true, "create_target": true, "retries_per_request": 2,
                     "worker_batch_size": 20, "checkpoint_interval": 500});
    assert_eq!(runner.put("/_replicator/p", &doc.to_string()).status, 201);
    wait_for("the first documents", 60, || doc_count(&cb, "p-tgt") == 50);
    let mut states = std::collections::BTreeSet::new();
    let note = |states: &mut std::collections::BTreeSet<String>| {
        let s = doc_state(runner, "p")["state"]
            .as_str()
            .unwrap_or("")
            .to_string();
        states.insert(s);
    };
    // Writes go on while connections are dropped, stalled and cut, then during an outage.
    proxy.set(Faults::Random);
    for k in 0..20 {
        seed(&ca, "p-src", 50 + k * 10..60 + k * 10);
        note(&mut states);
        std::thread::sleep(Duration::from_millis(300));
    }
    proxy.set(Faults::Outage);
    for k in 20..25 {
        seed(&ca, "p-src", 50 + k * 10..60 + k * 10);
        std::thread::sleep(Duration::from_millis(400));
    }
    // A request cut mid-answer before the outage waits out the connection timeout (30 s)
    // before its retries meet the outage: allow for that on a loaded machine.
    wait_for("the job to crash", 120, || {
        note(&mut states);
        states.contains("crashing")
    });
    proxy.set(Faults::None);
    wait_for("every document", 120, || {
        note(&mut states);
        doc_count(&cb, "p-tgt") == 300
    });
    wait_for("the job to run again", 60, || {
        doc_state(runner, "p")["state"] == "running"
    });
    // Nothing lost, nothing extra: the same leaf revisions on both sides.
    assert_same_dbs(&ca, "p-src", &cb, "p-tgt");
    assert!(
        states.contains("running") && states.contains("crashing"),
        "{states:?}"
    );
}

#[test]
fn since_seq_winning_revs_only_and_no_checkpoints_do_what_they_say() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/o-src", "").status, 201);
    for i in 0..5 {
        assert_eq!(c.put(&format!("/o-src/d{i}"), "{}").status, 201);
    }
    // since_seq: only what came after it.
    let three = c.get("/o-src/_changes?limit=3").json()["last_seq"].clone();
    run(
        &c,
        &json!({"source": "o-src", "target": "o-since", "create_target": true,
                    "since_seq": three}),
    );
    assert_eq!(ids(&c, "o-since").len(), 2);
    // winning_revs_only: a conflicted document arrives without its losing revision.
    let conflict = json!({"new_edits": false, "docs": [
        {"_id": "d0", "_rev": "1-00000000000000000000000000000001", "side": "loser"}
    ]});
    assert_eq!(
        c.post("/o-src/_bulk_docs", &conflict.to_string()).status,
        201
    );
    assert!(c.get("/o-src/d0?conflicts=true").json()["_conflicts"].is_array());
    run(
        &c,
        &json!({"source": "o-src", "target": "o-winners", "create_target": true,
                    "winning_revs_only": true}),
    );
    let d0 = c.get("/o-winners/d0?conflicts=true").json();
    assert!(d0.get("_conflicts").is_none(), "{d0}");
    assert_eq!(d0["_rev"], c.get("/o-src/d0").json()["_rev"]);
    // use_checkpoints=false: no replication log on either side, and every run starts over.
    let logs = |db: &str| {
        c.get(&format!("/{db}/_local_docs")).json()["rows"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let before = logs("o-src");
    let job = json!({"source": "o-src", "target": "o-nocp", "create_target": true,
                     "use_checkpoints": false});
    run(&c, &job);
    assert_eq!((logs("o-src"), logs("o-nocp")), (before, 0));
    let again = run(&c, &job);
    assert_eq!(again["history"][0]["start_last_seq"], 0, "{again}");
    assert_eq!(again["history"][0]["missing_checked"], 6, "{again}");
}

#[test]
fn prefixed_replicator_databases_run_their_documents_and_users_replicate_as_themselves() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/team%2F_replicator", "").status, 201);
    assert_eq!(c.put("/x-src", "").status, 201);
    assert_eq!(c.put("/x-src/a", "{}").status, 201);
    let doc = json!({"source": "x-src", "target": "x-copy", "create_target": true});
    assert_eq!(
        c.put("/team%2F_replicator/one", &doc.to_string()).status,
        201
    );
    wait_for("the prefixed replicator database's job", 30, || {
        c.get("/team%2F_replicator/one").json()["_replication_state"] == "completed"
    });
    assert_eq!(doc_count(&c, "x-copy"), 1);
    let listed = c.get("/_scheduler/docs/team%2F_replicator").json();
    assert_eq!(listed["docs"][0]["doc_id"], "one", "{listed}");
    assert_eq!(listed["docs"][0]["state"], "completed", "{listed}");
    // A user replicates with their own rights: a database they are no member of is refused.
    let user = json!({"name": "bob", "password": "pw", "roles": [], "type": "user"});
    assert_eq!(
        c.put("/_users/org.couchdb.user:bob", &user.to_string())
            .status,
        201
    );
    assert_eq!(c.put("/private", "").status, 201);
    let sec = json!({"members": {"names": ["alice"]}, "admins": {}});
    assert_eq!(c.put("/private/_security", &sec.to_string()).status, 200);
    let bob = Client::new(&s.url, Some(("bob", "pw")));
    let r = bob.post("/_replicate", r#"{"source": "private", "target": "bobs"}"#);
    r.error(403, "forbidden");
    assert_eq!(c.get("/bobs").status, 404);
    // A prefixed replicator database follows `_replicator`'s ownership rules.
    let sec = json!({"members": {"names": ["bob"]}, "admins": {}});
    assert_eq!(
        c.put("/team%2F_replicator/_security", &sec.to_string())
            .status,
        200
    );
    let mine = json!({"source": "http://bob:pw@127.0.0.1:1/a", "target": "b"});
    assert_eq!(
        bob.put("/team%2F_replicator/bobs-own", &mine.to_string())
            .status,
        201
    );
    assert_eq!(c.get("/team%2F_replicator/bobs-own").json()["owner"], "bob");
    let alices = json!({"source": "x-src", "target": "y", "owner": "alice"});
    assert_eq!(
        c.put("/team%2F_replicator/alices", &alices.to_string())
            .status,
        201
    );
    let mut theirs = c.get("/team%2F_replicator/alices").json();
    theirs["target"] = json!("elsewhere");
    bob.put("/team%2F_replicator/alices", &theirs.to_string())
        .error(403, "forbidden");
}

#[test]
fn the_scheduler_rotates_jobs_beyond_max_jobs() {
    let s = TestServer::start();
    let c = s.admin();
    common::set_config(&c, "replicator", "max_jobs", "1");
    common::set_config(&c, "replicator", "interval", "1000");
    for n in 1..=2 {
        assert_eq!(c.put(&format!("/rot{n}"), "").status, 201);
        let doc = json!({"source": format!("rot{n}"), "target": format!("rot{n}-copy"),
                         "continuous": true, "create_target": true});
        assert_eq!(
            c.put(&format!("/_replicator/rot{n}"), &doc.to_string())
                .status,
            201
        );
    }
    let mut ran = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while ran.len() < 2 {
        assert!(Instant::now() < deadline, "only {ran:?} ever ran");
        let docs = c.get("/_scheduler/docs").json();
        let states: Vec<(String, String)> = docs["docs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["doc_id"].to_string(),
                    d["state"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let running: Vec<&(String, String)> =
            states.iter().filter(|(_, s)| s == "running").collect();
        assert!(running.len() <= 1, "more than max_jobs running: {states:?}");
        ran.extend(running.iter().map(|(id, _)| id.clone()));
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn without_bulk_get_revisions_are_read_with_open_revs() {
    let (a, b) = (TestServer::start(), TestServer::start());
    let (ca, cb) = (a.admin(), b.admin());
    assert_eq!(ca.put("/nb", "").status, 201);
    seed(&ca, "nb", 0..40);
    // Pulled by B from A without `_bulk_get`: every revision read with `open_revs`, the
    // attachments' bytes with them.
    let pull = json!({"source": format!("{}/nb", with_creds(&a.url)), "target": "nb",
                      "create_target": true, "use_bulk_get": false});
    let first = run(&cb, &pull);
    assert_eq!(first["history"][0]["docs_written"], 42, "{first}");
    assert_same(&ca, &cb, "nb");
}
