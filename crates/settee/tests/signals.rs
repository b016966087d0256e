//! Signals, as an operator sends them: SIGTERM and SIGINT stop the server cleanly (no new
//! connections, requests being answered finish, writes accepted with `batch=ok` committed,
//! exit status 0) and lose no acknowledged write, even in the middle of a bulk load; SIGHUP
//! reloads the configuration file.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Client, TestServer};
use serde_json::{json, Value};

/// Writes batches of documents until told to stop, keeping the ids each acknowledged
/// (201) answer named.
fn bulk_load(c: Client, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<String>>>, tag: usize) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let docs: Vec<Value> = (0..50)
            .map(|i| json!({"_id": format!("w{tag}-{n:06}-{i:02}"), "n": i}))
            .collect();
        n += 1;
        let Ok(r) = c.try_send(
            "POST",
            "/load/_bulk_docs",
            Some(&json!({ "docs": docs }).to_string()),
            &[],
        ) else {
            return;
        };
        if r.status != 201 {
            return;
        }
        let rows: Vec<Value> = serde_json::from_str(&r.text).expect("rows");
        let mut acked = acked.lock().unwrap();
        for row in rows {
            if row["ok"] == true {
                acked.push(row["id"].as_str().unwrap().to_string());
            }
        }
    }
}

fn stops_cleanly_on(signal: &str) {
    let mut s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/load", "").status, 201);
    let (stop, acked) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let writers: Vec<_> = (0..3)
        .map(|tag| {
            let (c, stop, acked) = (s.admin(), stop.clone(), acked.clone());
            std::thread::spawn(move || bulk_load(c, stop, acked, tag))
        })
        .collect();
    while acked.lock().unwrap().len() < 2_000 {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Accepted, not yet committed (the batch timer waits 50 ms): the stop must commit them.
    for i in 0..20 {
        let r = c.put(&format!("/load/batched{i:02}?batch=ok"), "{}");
        assert_eq!(r.status, 202, "{}", r.text);
    }
    s.signal(signal);
    let status = s
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("still running 20 s after SIG{signal}"));
    assert!(status.success(), "exit status after SIG{signal}: {status}");
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    s.start_again();
    let c = s.admin();
    let acked = acked.lock().unwrap().clone();
    let mut wanted = acked.clone();
    wanted.extend((0..20).map(|i| format!("batched{i:02}")));
    for chunk in wanted.chunks(500) {
        let r = c.post("/load/_all_docs", &json!({ "keys": chunk }).to_string());
        let rows = r.json()["rows"].as_array().unwrap().clone();
        let missing: Vec<&Value> = rows.iter().filter(|r| r.get("error").is_some()).collect();
        assert!(missing.is_empty(), "acknowledged, then lost: {missing:?}");
    }
    assert!(acked.len() >= 2_000);
}

#[test]
fn sigterm_during_a_bulk_load_loses_no_acknowledged_write() {
    stops_cleanly_on("TERM");
}

#[test]
fn sigint_stops_the_server_as_sigterm_does() {
    stops_cleanly_on("INT");
}

#[test]
fn sighup_reloads_the_configuration_file() {
    let s = TestServer::start();
    let c = s.admin();
    let path = s.dir.path().join("settee.ini");
    let before = c.get("/_node/_local/_config/uuids/algorithm");
    assert_ne!(before.json(), "utc_random");
    let mut ini = std::fs::read_to_string(&path).unwrap();
    ini.push_str("\n[uuids]\nalgorithm = utc_random\n");
    std::fs::write(&path, ini).unwrap();
    s.signal("HUP");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = c.get("/_node/_local/_config/uuids/algorithm");
        if now.status == 200 && now.json() == "utc_random" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not reloaded: {}",
            now.text
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The server is still serving.
    assert_eq!(c.get("/").status, 200);
}
