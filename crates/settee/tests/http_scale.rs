//! Scale and maintenance under load: 10,000 keep-alive connections, 10,000 databases with
//! bounded open files, and compaction while clients read and write.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::TestServer;
use serde_json::{json, Value};

/// Raises this process's open-files limit so the test can hold many sockets.
fn raise_nofile(want: u64) -> u64 {
    // SAFETY: plain libc calls on a local struct.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max.min(want);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        lim.rlim_cur
    }
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The bytes in the files under `dir`, however deep.
fn bytes_under(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                bytes_under(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

#[test]
fn ten_thousand_keep_alive_connections() {
    let limit = raise_nofile(12_000);
    assert!(
        limit >= 10_500,
        "the test needs 10,500 open files, the hard limit allows {limit}"
    );
    let s = TestServer::start();
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut conns: Vec<TcpStream> = (0..10_000)
        .map(|i| TcpStream::connect(&addr).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    // Two requests on every connection, all held open at once.
    for round in 0..2 {
        for c in &mut conns {
            c.write_all(b"GET /_up HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
        }
        for (i, c) in conns.iter_mut().enumerate() {
            c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let mut buf = [0u8; 512];
            let mut got = Vec::new();
            while !got.ends_with(b"}\n") {
                let n = c
                    .read(&mut buf)
                    .unwrap_or_else(|e| panic!("round {round} connection {i}: {e}"));
                assert!(n > 0, "round {round} connection {i} closed");
                got.extend_from_slice(&buf[..n]);
            }
            assert!(
                got.starts_with(b"HTTP/1.1 200"),
                "round {round} connection {i}: {}",
                String::from_utf8_lossy(&got)
            );
        }
    }
}

#[test]
fn ten_thousand_databases_with_bounded_open_files() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/_node/_local/_config/couchdb/max_dbs_open", r#""100""#);
    let mut s = s;
    s.restart();
    let c = s.admin();
    let pid = s.child.as_ref().unwrap().id();
    for i in 0..10_000 {
        let r = c.put(&format!("/user-{i:05}?q=1"), "");
        assert_eq!(r.status, 201, "db {i}: {}", r.text);
        if i % 1000 == 0 {
            assert_eq!(
                c.put(&format!("/user-{i:05}/doc"), r#"{"i":1}"#).status,
                201
            );
        }
    }
    let all = c.get("/_all_dbs").json();
    assert_eq!(
        all.as_array().unwrap().len(),
        10_002,
        "ours and the two system databases, _replicator and _users"
    );
    assert!(open_fds(pid) < 600, "{} files open", open_fds(pid));
    // An empty database's file stays small: a few blocks, with room for as many again.
    let bytes = bytes_under(s.dir.path());
    assert!(bytes < 10_000 * (24 << 10), "{bytes} bytes on disk");
    // Every database still answers, reopened on demand.
    for i in (0..10_000).step_by(1000) {
        assert_eq!(c.get(&format!("/user-{i:05}/doc")).json()["i"], 1);
    }
    assert!(open_fds(pid) < 600, "{} files open", open_fds(pid));
}

#[test]
fn compaction_while_clients_read_and_write_loses_nothing() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let docs: Vec<Value> = (0..5000)
        .map(|i| json!({"_id": format!("d{i:05}"), "v": 0, "pad": "x".repeat(i % 2000)}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", &json!({"docs": docs}).to_string())
            .status,
        201
    );
    let url = s.url.clone();
    let writer = std::thread::spawn(move || {
        let c = common::Client::new(&url, Some(common::ADMIN));
        let mut written = Vec::new();
        for i in 0..400 {
            let id = format!("d{:05}", (i * 37) % 5000);
            let cur = c.get(&format!("/db/{id}")).json();
            let r = c.put(
                &format!("/db/{id}"),
                &json!({"_rev": cur["_rev"], "v": i + 1}).to_string(),
            );
            assert_eq!(r.status, 201, "{}", r.text);
            written.push((id, i + 1));
            let new = c.put(&format!("/db/new{i}"), "{}");
            assert_eq!(new.status, 201);
        }
        written
    });
    assert_eq!(c.post("/db/_compact", "{}").status, 202);
    let tasks = c.get("/_active_tasks").json();
    let listed = tasks
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["type"] == "database_compaction" && t["database"] == "db");
    assert!(
        listed || c.get("/db").json()["compact_running"] == false,
        "a running compaction is listed: {tasks}"
    );
    let mut compacting = true;
    while compacting {
        let r = c.get(&format!("/db/d{:05}", rand::random::<u32>() % 5000));
        assert_eq!(r.status, 200);
        compacting = c.get("/db").json()["compact_running"] == true;
    }
    let written = writer.join().unwrap();
    let mut latest = std::collections::HashMap::new();
    for (id, v) in written {
        latest.insert(id, v);
    }
    for (id, v) in latest {
        assert_eq!(c.get(&format!("/db/{id}")).json()["v"], v, "{id}");
    }
    let info = c.get("/db").json();
    assert_eq!(info["doc_count"], 5400);
    assert_eq!(
        c.get("/_active_tasks").json(),
        json!([]),
        "finished tasks leave the list"
    );
    let all = c.get("/db/_all_docs").json();
    assert_eq!(all["rows"].as_array().unwrap().len(), 5400);
}

/// `sizes` of a database as CouchDB reports them: (file, active, external).
fn sizes(c: &common::Client, db: &str) -> (u64, u64, u64) {
    let info = c.get(&format!("/{db}")).json();
    let n = |k: &str| {
        info["sizes"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("sizes.{k} in {info}"))
    };
    (n("file"), n("active"), n("external"))
}

fn wait_compacted(c: &common::Client, db: &str) {
    assert_eq!(c.post(&format!("/{db}/_compact"), "{}").status, 202);
    for _ in 0..600 {
        if c.get(&format!("/{db}")).json()["compact_running"] == false {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("compaction of {db} did not finish");
}

#[test]
fn sizes_count_live_data_and_compaction_gives_back_the_rest() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    // Bodies above the inline limit go to blobs, so superseded ones stop counting at once;
    // random hex, so that compression leaves them at about half their length.
    let pad = |n: usize| {
        (0..n)
            .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap())
            .collect::<String>()
    };
    let body = |i: usize, round: usize| json!({"_id": format!("d{i:04}"), "round": round, "pad": pad(1200 + i % 300)});
    let docs: Vec<Value> = (0..600).map(|i| body(i, 0)).collect();
    let created = c
        .post("/db/_bulk_docs", &json!({"docs": docs}).to_string())
        .json();
    let mut revs: Vec<Value> = created
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rev"].clone())
        .collect();
    // An attachment that does not compress (random bytes, a type stored as it is).
    let att: Vec<u8> = (0..200_000).map(|_| rand::random::<u8>()).collect();
    let att_doc = json!({"_id": "photo", "_attachments": {"p.bin": {"content_type": "application/octet-stream", "data": common::base64_bytes(&att)}}});
    assert_eq!(c.put("/db/photo", &att_doc.to_string()).status, 201);

    let (file1, active1, external1) = sizes(&c, "db");
    assert!(active1 <= file1, "active {active1} within the file {file1}");
    assert!(
        active1 >= external1 / 2 + 200_000,
        "active {active1} counts the bodies ({external1}, stored compressed) and the attachment"
    );

    for round in 1..=4 {
        let docs: Vec<Value> = (0..600)
            .map(|i| {
                let mut d = body(i, round);
                d["_rev"] = revs[i].clone();
                d
            })
            .collect();
        let answers = c
            .post("/db/_bulk_docs", &json!({"docs": docs}).to_string())
            .json();
        revs = answers
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["rev"].clone())
            .collect();
    }
    let (file2, active2, external2) = sizes(&c, "db");
    assert_eq!(external2, external1, "the bodies kept their lengths");
    assert!(
        file2 > file1 + 4 * 600 * 600,
        "four rounds of updates appended their bodies: {file1} -> {file2}"
    );
    assert!(
        active2 < active1 + active1 / 5,
        "superseded bodies are not live: {active1} -> {active2}"
    );

    wait_compacted(&c, "db");
    let (file3, active3, _) = sizes(&c, "db");
    assert!(
        file3 < file2 / 2,
        "compaction gave the superseded bodies back: {file2} -> {file3}"
    );
    assert!(
        active3 <= file3 && active3 >= file3 - file3 / 10,
        "after compaction the file is live data: active {active3}, file {file3}"
    );
    assert!(
        active3 <= active2,
        "compaction keeps no more than was live: {active2} -> {active3}"
    );

    let rev = c.get("/db/photo").json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        c.send("DELETE", &format!("/db/photo?rev={rev}"), None, &[])
            .status,
        200
    );
    let (_, active4, _) = sizes(&c, "db");
    assert!(
        active4 + 190_000 < active3,
        "a deleted document's attachment is no longer live: {active3} -> {active4}"
    );
}

/// Waits until `done` holds, for at most a minute.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what} within a minute"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn databases_and_views_compact_themselves_when_mostly_garbage() {
    let s = TestServer::start();
    let c = s.admin();
    // Start at once and weigh every change (CouchDB waits 30 s, then weighs a file at most
    // every 5 minutes); while the files are written, a size floor no file reaches, so that
    // each is compacted once, after all its writes.
    for (section, key, value) in [
        ("smoosh", "wait_secs", "0"),
        ("smoosh", "staleness", "0"),
        ("smoosh.ratio_dbs", "min_size", "1000000000000"),
        ("smoosh.ratio_views", "min_size", "1000000000000"),
    ] {
        common::set_config(&c, section, key, value);
    }
    c.put("/calm", "");
    let calm: Vec<Value> = (0..30)
        .map(|i| json!({"_id": format!("c{i}"), "n": i}))
        .collect();
    assert_eq!(
        c.post("/calm/_bulk_docs", &json!({"docs": calm}).to_string())
            .status,
        201
    );
    let calm_file = sizes(&c, "calm").0;

    c.put("/churn", "");
    assert_eq!(c.put("/churn/_design/d", r#"{"views": {"by_round": {"map": "function(doc) { if (doc.round !== undefined) emit(doc.round, doc.n); }"}}}"#).status, 201);
    let pad = |n: usize| {
        (0..n)
            .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap())
            .collect::<String>()
    };
    let mut revs: Vec<Option<Value>> = vec![None; 300];
    for round in 0..10 {
        let docs: Vec<Value> = (0..300)
            .map(|i| {
                let mut d =
                    json!({"_id": format!("d{i:03}"), "n": i, "round": round, "pad": pad(1000)});
                if let Some(rev) = &revs[i] {
                    d["_rev"] = rev.clone();
                }
                d
            })
            .collect();
        let answers = c
            .post("/churn/_bulk_docs", &json!({"docs": docs}).to_string())
            .json();
        revs = answers
            .as_array()
            .unwrap()
            .iter()
            .map(|a| Some(a["rev"].clone()))
            .collect();
        let view = c.get("/churn/_design/d/_view/by_round?limit=1").json();
        assert_eq!(view["total_rows"], 300, "{view}");
    }
    // Small floors, but one that keeps the database written once out. A file is weighed
    // again when it changes: one more document, and the index brought up to date.
    common::set_config(&c, "smoosh.ratio_dbs", "min_size", "400000");
    common::set_config(&c, "smoosh.ratio_views", "min_size", "40000");
    assert_eq!(c.put("/churn/last", r#"{"n": 300}"#).status, 201);
    assert_eq!(
        c.get("/churn/_design/d/_view/by_round?limit=1").json()["total_rows"],
        300
    );
    // Ten versions of every body, nine of them garbage: the database compacts itself.
    eventually("the churned database compacts itself", || {
        let (file, active, _) = sizes(&c, "churn");
        file < active + active / 5
    });
    let view_sizes = || {
        let info = c.get("/churn/_design/d/_info").json();
        (
            info["view_index"]["sizes"]["file"].as_u64().unwrap(),
            info["view_index"]["sizes"]["active"].as_u64().unwrap(),
        )
    };
    eventually("the rewritten index compacts itself", || {
        let (file, active) = view_sizes();
        file < 3 * active
    });
    let all = c
        .get("/churn/_all_docs?include_docs=true&start_key=%22d%22&end_key=%22d999%22")
        .json();
    let rows = all["rows"].as_array().unwrap();
    assert!(
        rows.len() == 300
            && rows
                .iter()
                .all(|r| r["doc"]["round"] == 9 && r["doc"]["pad"].as_str().unwrap().len() == 1000),
        "nothing lost"
    );
    assert_eq!(
        c.get("/churn/_design/d/_view/by_round?key=9").json()["rows"]
            .as_array()
            .unwrap()
            .len(),
        300
    );
    assert_eq!(
        sizes(&c, "calm").0,
        calm_file,
        "a database below the size floor is left alone"
    );
}
