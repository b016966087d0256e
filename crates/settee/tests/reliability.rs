//! Issue 26's defects, each as the request sequence that showed it: lifecycle races over HTTP,
//! uploads during compaction, hostile clients, lockout, broken JavaScript engines and the
//! smaller differences from CouchDB.

mod common;

use std::sync::Arc;

use common::TestServer;
use serde_json::{json, Value};

/// Two clients creating one new database at once: exactly one 201, the others 412, never a
/// 500, and the database is there afterwards (it answered 500 although it had created it).
#[test]
fn concurrent_creations_answer_201_once_and_412_otherwise() {
    let server = Arc::new(TestServer::start());
    for round in 0..15 {
        let name = format!("/race{round}");
        let threads: Vec<_> = (0..6)
            .map(|i| {
                let (server, name) = (server.clone(), name.clone());
                std::thread::spawn(move || {
                    let c = server.admin();
                    if i % 2 == 0 {
                        c.put(&name, "").status
                    } else {
                        // Opening while it is being made must not break the creation.
                        c.get(&name).status
                    }
                })
            })
            .collect();
        let statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let puts: Vec<u16> = statuses.iter().step_by(2).copied().collect();
        assert_eq!(
            puts.iter().filter(|&&s| s == 201).count(),
            1,
            "{statuses:?}"
        );
        assert!(puts.iter().all(|&s| s == 201 || s == 412), "{statuses:?}");
        assert!(
            statuses
                .iter()
                .skip(1)
                .step_by(2)
                .all(|&s| s == 200 || s == 404),
            "{statuses:?}"
        );
        assert_eq!(server.admin().get(&name).status, 200);
    }
}

/// While clients write to a database it is deleted and created again: the new database is
/// empty, keeps what is written to it, and still has it after a restart.
#[test]
fn a_database_deleted_in_use_and_created_again_starts_empty_and_keeps_its_writes() {
    let mut server = TestServer::start();
    for round in 0..5 {
        let c = server.admin();
        assert_eq!(c.put("/db", "").status, 201);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let (url, stop) = (server.url.clone(), stop.clone());
                std::thread::spawn(move || {
                    let c = common::Client::new(&url, Some(common::ADMIN));
                    let mut i = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let s = c
                            .put(&format!("/db/old-{round}-{w}-{i}"), r#"{"old":true}"#)
                            .status;
                        assert!(
                            s == 201 || s == 404,
                            "a write racing a deletion answered {s}"
                        );
                        i += 1;
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert_eq!(c.delete("/db").status, 200);
        assert_eq!(c.put("/db", "").status, 201);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        // Writers may have written into the new database after it was created; their
        // documents are all that may be there besides this round's.
        let new_doc = c.put(&format!("/db/new-{round}"), r#"{"new":true}"#);
        assert_eq!(new_doc.status, 201, "{}", new_doc.text);
        let all = c.get("/db/_all_docs").json();
        let stale: Vec<&Value> = all["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                !r["id"].as_str().unwrap().contains(&format!("-{round}-"))
                    && r["id"] != format!("new-{round}")
            })
            .collect();
        assert!(
            stale.is_empty(),
            "documents of an earlier database came back: {stale:?}"
        );
        let before = c.get("/db").json()["doc_count"].clone();
        server.restart();
        let c2 = server.admin();
        assert_eq!(
            c2.get(&format!("/db/new-{round}")).status,
            200,
            "an acknowledged write to the new database was lost"
        );
        assert_eq!(c2.get("/db").json()["doc_count"], before);
        assert_eq!(c2.delete("/db").status, 200);
    }
}

/// Attachment uploads while the database compacts again and again: every upload succeeds
/// and reads back whole (a blob written before the compaction swapped files answered 500).
#[test]
fn attachment_uploads_during_compaction_succeed() {
    let server = TestServer::start();
    let c = server.admin();
    assert_eq!(c.put("/db", "").status, 201);
    let docs: Vec<Value> = (0..2000)
        .map(|i| json!({"_id": format!("filler{i:05}"), "pad": "x".repeat(200)}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", &json!({"docs": docs}).to_string())
            .status,
        201
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let compactor = {
        let (url, stop) = (server.url.clone(), stop.clone());
        std::thread::spawn(move || {
            let c = common::Client::new(&url, Some(common::ADMIN));
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let s = c.post("/db/_compact", "{}").status;
                assert_eq!(s, 202);
                runs += 1;
                while c.get("/db").json()["compact_running"] == true {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            runs
        })
    };
    let data: String = (0..2_500_000u32)
        .map(|i| char::from(b'!' + (i * 7 % 94) as u8))
        .collect();
    for i in 0..25 {
        let r = c.send(
            "PUT",
            &format!("/db/att{i}/blob"),
            Some(&data),
            &[("Content-Type", "application/octet-stream")],
        );
        assert_eq!(r.status, 201, "upload {i}: {}", r.text);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let runs = compactor.join().unwrap();
    assert!(
        runs >= 2,
        "the uploads should overlap compactions ({runs} ran)"
    );
    for i in 0..25 {
        let r = c.get(&format!("/db/att{i}/blob"));
        assert!(
            r.status == 200 && r.text == data,
            "attachment {i} reads back whole"
        );
    }
}

/// Documents nest as deeply as [`settee_json::deep::MAX_DEPTH`] levels and come back whole,
/// through every way in; deeper ones are refused with a reason that says why (issue 26: 128
/// levels were refused as `invalid UTF-8 JSON`).
#[test]
fn deeply_nested_documents_are_stored_and_deeper_ones_refused_clearly() {
    let server = TestServer::start();
    let c = server.admin();
    assert_eq!(c.put("/deep", "").status, 201);
    let objects = |n: usize| format!("{{\"v\":{}1{}}}", "{\"a\":".repeat(n), "}".repeat(n));
    let arrays = |n: usize| format!("{{\"v\":{}{}}}", "[".repeat(n), "]".repeat(n));
    let max = settee_json::deep::MAX_DEPTH;
    for (id, body) in [("objects", objects(10_000)), ("arrays", arrays(max - 1))] {
        let r = c.put(&format!("/deep/{id}"), &body);
        assert_eq!(r.status, 201, "{id}: {}", r.text);
        let back = c.get(&format!("/deep/{id}"));
        assert_eq!(back.status, 200);
        assert!(
            back.text.trim_end().ends_with(&body[1..]),
            "{id} comes back whole"
        );
    }
    let bulk = format!("{{\"docs\":[{{\"_id\":\"bulk\",{}]}}", &objects(5_000)[1..]);
    let r = c.post("/deep/_bulk_docs", &bulk);
    assert_eq!(r.status, 201, "{}", r.text);
    // Through the selector filter of a change feed, the stored body is read again.
    let changes = c.post(
        "/deep/_changes?filter=_selector",
        r#"{"selector":{"v":{"$exists":true}}}"#,
    );
    assert_eq!(changes.status, 200, "{}", changes.text);
    assert_eq!(changes.json()["results"].as_array().unwrap().len(), 3);
    // A view's map function may not manage such a document; the view still answers, and
    // still indexes the other documents (a key nested too deeply leaves out only its row).
    assert_eq!(c.put("/deep/flat", r#"{"v":1}"#).status, 201);
    assert_eq!(c.put("/deep/_design/v", r#"{"views":{"v":{"map":"function(doc){ emit(doc._id, 1); }"},"k":{"map":"function(doc){ emit(doc.v, 1); }"}}}"#).status, 201);
    let all = c.get("/deep/_design/v/_view/v");
    assert_eq!(all.status, 200, "{}", all.text);
    let keyed = c.get("/deep/_design/v/_view/k?key=1");
    assert_eq!(
        (keyed.status, keyed.json()["rows"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{}",
        keyed.text
    );
    // Validation functions see the whole document, however deep (issue 26 review: deep
    // documents reached them as if empty).
    let vdu = r#"{"validate_doc_update":"function(doc){ if (doc.role) throw({forbidden: 'no roles'}); }"}"#;
    assert_eq!(c.put("/deep/_design/guard", vdu).status, 201);
    let deep_role = format!(
        "{{\"role\":\"admin\",\"v\":{}1{}}}",
        "{\"a\":".repeat(200),
        "}".repeat(200)
    );
    c.put("/deep/sneaky", &deep_role).error(403, "forbidden");
    for body in [objects(max + 1), arrays(max + 5)] {
        let r = c.put("/deep/too", &body);
        r.error(400, "bad_request");
        assert!(
            r.json()["reason"].as_str().unwrap().contains("levels deep"),
            "{}",
            r.text
        );
    }
    assert_eq!(c.get("/").status, 200, "the server is still up");
}

/// Raises this process's open-files limit to its hard limit (the test holds many sockets);
/// the limit it has then.
fn raise_open_files() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write only the struct given.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    limit.rlim_cur
}

/// Whether the server closes `stream` (EOF or reset) within `within`.
fn closed_within(stream: &mut std::net::TcpStream, within: std::time::Duration) -> bool {
    use std::io::Read;
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// Clients that open sockets and send part of a request head, more of them than the server
/// has file descriptors: the server keeps answering new clients and clients it already
/// serves, databases still open, and each trickling socket is closed after the header
/// timeout (issue 26: 1,100 such sockets on a 1,024-file limit made `/_up` time out).
#[test]
fn clients_that_never_finish_a_request_cannot_starve_the_server() {
    use std::io::Write;
    if raise_open_files() < 1300 {
        println!("skipped: this process may not open the 1,300 files the test needs");
        return;
    }
    let server = TestServer::start_with_open_files(1024);
    let c = server.admin();
    common::set_config(&c, "chttpd", "header_timeout", "6000");
    // A client that keeps its connection between requests throughout.
    let regular = server.admin();
    assert_eq!(regular.get("/_up").status, 200);
    let addr = server.url.trim_start_matches("http://").to_string();
    let mut trickling: Vec<std::net::TcpStream> = Vec::new();
    for i in 0..1100 {
        match std::net::TcpStream::connect(&addr) {
            Ok(mut s) => {
                let _ =
                    s.write_all(format!("GET /_up HTTP/1.1\r\nHost: x\r\nX-Slow-{i}: ").as_bytes());
                trickling.push(s);
            }
            Err(e) => panic!("connecting socket {i}: {e}"),
        }
    }
    let started = std::time::Instant::now();
    let fresh = server.anon().get("/_up");
    assert_eq!(fresh.status, 200, "a new client is answered");
    // Before the header timeout could have freed a socket: room was made for it.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "at once, not after a timeout: {:?}",
        started.elapsed()
    );
    assert_eq!(
        regular.get("/_up").status,
        200,
        "a client already connected is answered"
    );
    assert_eq!(
        c.put("/fresh", "").status,
        201,
        "databases still get descriptors"
    );
    assert_eq!(c.put("/fresh/doc", "{}").status, 201);
    // Each trickling socket is closed: shed for the clients above, or timed out.
    let last = trickling.last_mut().unwrap();
    assert!(
        closed_within(last, std::time::Duration::from_secs(15)),
        "a head never finished is cut off"
    );
    drop(trickling);
    assert_eq!(regular.get("/_up").status, 200);
}

/// The waits between requests and between body bytes are bounded, and answering never is: a
/// long poll outlasts the idle timeout.
#[test]
fn idle_connections_and_stalled_bodies_time_out_but_long_answers_do_not() {
    use std::io::{Read, Write};
    let server = TestServer::start();
    let c = server.admin();
    common::set_config(&c, "chttpd", "idle_timeout", "1500");
    common::set_config(&c, "chttpd", "body_timeout", "1500");
    assert_eq!(c.put("/db", "").status, 201);
    let addr = server.url.trim_start_matches("http://").to_string();
    // Nothing sent at all.
    let mut silent = std::net::TcpStream::connect(&addr).unwrap();
    assert!(
        closed_within(&mut silent, std::time::Duration::from_secs(6)),
        "a silent connection is closed"
    );
    // A full request, then silence: answered, then closed.
    let mut idle = std::net::TcpStream::connect(&addr).unwrap();
    idle.write_all(b"GET /_up HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 12];
    idle.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    assert!(
        closed_within(&mut idle, std::time::Duration::from_secs(6)),
        "an idle keep-alive connection is closed"
    );
    // A body announced and never finished: the request fails and nothing is written.
    let mut stalled = std::net::TcpStream::connect(&addr).unwrap();
    let auth = common::admin_auth();
    stalled.write_all(format!("PUT /db/half HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"a\":").as_bytes()).unwrap();
    assert!(
        closed_within(&mut stalled, std::time::Duration::from_secs(6)),
        "a stalled body ends the request"
    );
    assert_eq!(c.get("/db/half").status, 404);
    // A long poll waits longer than the idle timeout and is answered.
    let started = std::time::Instant::now();
    let r = c.get("/db/_changes?feed=longpoll&timeout=3000&since=now");
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(started.elapsed() >= std::time::Duration::from_millis(2900));
}

/// Runs `settee ARGS`; its exit status and output.
fn settee(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_settee"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// A byte flipped in a log record of a shard: `settee check` finds it, the server opens the
/// database, serves every other document, takes writes and says it is damaged; `settee
/// salvage` rebuilds it (refusing while the server runs), after which it checks out, is no
/// longer reported damaged and keeps what was written (issue 26: one flipped byte made
/// every read and write of the database answer 500).
#[test]
fn a_damaged_database_is_served_checked_and_salvaged() {
    let mut server = TestServer::start();
    server.allow_errors = true;
    let c = server.admin();
    assert_eq!(c.put("/small?q=1", "").status, 201);
    for i in 0..100 {
        assert_eq!(
            c.put(&format!("/small/d{i:03}"), &json!({"n": i}).to_string())
                .status,
            201
        );
    }
    assert_eq!(
        c.put(
            "/small/_design/v",
            r#"{"views":{"n":{"map":"function(doc){ emit(doc.n, 1); }","reduce":"_count"}}}"#
        )
        .status,
        201
    );
    assert_eq!(
        c.get("/small/_design/v/_view/n").json()["rows"][0]["value"],
        100
    );
    let data = server.dir.path().to_str().unwrap().to_string();
    let shard = server.dir.path().join("dbs/small/shard-0.settee");
    server.kill();
    let (ok, out) = settee(&["check", "--data", &data]);
    assert!(ok, "a sound directory checks out: {out}");
    // The log record of one single write, half way through.
    let scan = settee_store::scan_file(&shard).unwrap();
    let logs: Vec<_> = scan
        .records
        .iter()
        .filter(|r| r.kind == Some(settee_store::format::RecordKind::Log))
        .collect();
    let victim = logs[logs.len() / 2];
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[(victim.offset + victim.len / 2) as usize] ^= 0xff;
    std::fs::write(&shard, &bytes).unwrap();
    let (ok, out) = settee(&["check", "--data", &data]);
    assert!(
        !ok && out.contains("shard-0.settee: damaged")
            && out.contains(&format!("log record at offset {}", victim.offset)),
        "{out}"
    );
    // A damaged view index is found too.
    let index = std::fs::read_dir(server.dir.path().join("dbs/small/views"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "view"))
        .unwrap();
    let mut bytes = std::fs::read(&index).unwrap();
    let at = settee_store::scan_file(&index)
        .unwrap()
        .records
        .iter()
        .find(|r| r.kind == Some(settee_store::format::RecordKind::Leaf))
        .unwrap()
        .offset as usize
        + 12;
    bytes[at] ^= 0xff;
    std::fs::write(&index, &bytes).unwrap();
    let (ok, out) = settee(&["check", "--data", &data]);
    assert!(!ok && out.contains(".view: damaged"), "{out}");

    server.restart();
    let c = server.admin();
    let info = c.get("/small");
    assert_eq!(info.status, 200, "{}", info.text);
    assert!(
        info.json()["damaged"]
            .as_array()
            .is_some_and(|d| !d.is_empty()),
        "GET /small says it is damaged: {}",
        info.text
    );
    let served = (0..100)
        .filter(|i| c.get(&format!("/small/d{i:03}")).status == 200)
        .count();
    assert!(served >= 99, "{served} of 100 documents served");
    assert_eq!(
        c.put("/small/written-after", r#"{"after":true}"#).status,
        201,
        "writes go on"
    );
    let (ok, out) = settee(&["salvage", "--data", &data, "--db", "small"]);
    assert!(
        !ok && out.contains("stop it first"),
        "salvage refuses a running server's database: {out}"
    );

    server.kill();
    let (ok, out) = settee(&["salvage", "--data", &data, "--db", "small"]);
    assert!(
        ok && out.contains("rebuilt with") && out.contains("view index deleted"),
        "{out}"
    );
    let (ok, out) = settee(&["check", "--data", &data, "--db", "small"]);
    assert!(ok, "salvaged, it checks out: {out}");
    server.restart();
    let c = server.admin();
    let info = c.get("/small").json();
    assert!(info.get("damaged").is_none(), "{info}");
    assert_eq!(c.get("/small/written-after").status, 200);
    let served = (0..100)
        .filter(|i| c.get(&format!("/small/d{i:03}")).status == 200)
        .count();
    assert!(served >= 99, "{served} of 100 documents after salvage");
    // The view is built again from what the database holds now (and `written-after`).
    assert_eq!(
        c.get("/small/_design/v/_view/n").json()["rows"][0]["value"],
        served + 1
    );
    assert_eq!(c.put("/small/after-salvage", "{}").status, 201);
}

/// A small filesystem of the test's own, if the machine lets it mount one.
fn mount_small_fs(dir: &std::path::Path, megabytes: u32) -> bool {
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
        .arg(dir)
        .output();
    mounted.is_ok_and(|o| o.status.success())
}

/// Text that does not compress.
fn noise(seed: u64, len: usize) -> String {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b'a' + ((x >> 33) % 26) as u8)
        })
        .collect()
}

/// On a filesystem that fills up: a write that does not fit gets 507 and changes nothing,
/// every acknowledged write stays readable, the files still open after a restart, and
/// writes succeed again once there is room.
#[test]
fn a_full_disk_refuses_writes_clearly_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    if !mount_small_fs(dir.path(), 8) {
        println!("skipped: this machine does not let the test mount a small filesystem (tmpfs needs root)");
        return;
    }
    let filler = dir.path().join("filler");
    std::fs::write(&filler, vec![7u8; 2 << 20]).unwrap();
    let mut server = TestServer::start_in(dir);
    let c = server.admin();
    assert_eq!(c.put("/full?q=1", "").status, 201);
    let mut acknowledged = Vec::new();
    let mut refused = None;
    for i in 0..400 {
        let r = c.put(
            &format!("/full/d{i:03}"),
            &json!({"pad": noise(i, 60_000)}).to_string(),
        );
        match r.status {
            201 => acknowledged.push(i),
            _ => {
                refused = Some(r);
                break;
            }
        }
    }
    let refused = refused.expect("the filesystem fills up");
    refused.error(507, "insufficent_storage");
    assert_eq!(refused.json()["reason"], "database_dir is too full");
    assert!(
        acknowledged.len() > 10,
        "{} written before it filled",
        acknowledged.len()
    );
    // Retried while full: refused the same way, never a 500.
    for _ in 0..3 {
        assert_eq!(
            c.put(
                "/full/more",
                &json!({"pad": noise(999, 60_000)}).to_string()
            )
            .status,
            507
        );
    }
    // A large `_bulk_docs`, whose results are known before its commit fails: 507 all the
    // same, and none of it written.
    let docs: Vec<Value> = (0..100)
        .map(|k| json!({"_id": format!("bulk{k:03}"), "pad": noise(2000 + k, 700)}))
        .collect();
    let bulk = c.post("/full/_bulk_docs", &json!({ "docs": docs }).to_string());
    bulk.error(507, "insufficent_storage");
    assert_eq!(c.get("/full/bulk000").status, 404);
    assert_eq!(c.get("/full/bulk099").status, 404);
    let check = |c: &common::Client| {
        for &i in &acknowledged {
            let r = c.get(&format!("/full/d{i:03}"));
            assert_eq!(
                (r.status, r.json()["pad"].as_str().map(str::len)),
                (200, Some(60_000)),
                "d{i:03}"
            );
        }
    };
    check(&c);
    server.restart();
    let c = server.admin();
    check(&c);
    assert_eq!(c.get("/full").json()["doc_count"], acknowledged.len());
    std::fs::remove_file(&filler).unwrap();
    let r = c.put(
        "/full/after",
        &json!({"pad": noise(1000, 60_000)}).to_string(),
    );
    assert_eq!(
        r.status, 201,
        "writes succeed again once there is room: {}",
        r.text
    );
    server.restart();
    let c = server.admin();
    check(&c);
    assert_eq!(c.get("/full/after").status, 200);
    server.kill();
    let _ = std::process::Command::new("umount")
        .arg(server.dir.path())
        .status();
}
