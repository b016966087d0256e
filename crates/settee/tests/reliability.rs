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
        assert_eq!(puts.iter().filter(|&&s| s == 201).count(), 1, "{statuses:?}");
        assert!(puts.iter().all(|&s| s == 201 || s == 412), "{statuses:?}");
        assert!(statuses.iter().skip(1).step_by(2).all(|&s| s == 200 || s == 404), "{statuses:?}");
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
                        let s = c.put(&format!("/db/old-{round}-{w}-{i}"), r#"{"old":true}"#).status;
                        assert!(s == 201 || s == 404, "a write racing a deletion answered {s}");
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
        let stale: Vec<&Value> = all["rows"].as_array().unwrap().iter().filter(|r| !r["id"].as_str().unwrap().contains(&format!("-{round}-")) && r["id"] != format!("new-{round}")).collect();
        assert!(stale.is_empty(), "documents of an earlier database came back: {stale:?}");
        let before = c.get("/db").json()["doc_count"].clone();
        server.restart();
        let c2 = server.admin();
        assert_eq!(c2.get(&format!("/db/new-{round}")).status, 200, "an acknowledged write to the new database was lost");
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
    let docs: Vec<Value> = (0..2000).map(|i| json!({"_id": format!("filler{i:05}"), "pad": "x".repeat(200)})).collect();
    assert_eq!(c.post("/db/_bulk_docs", &json!({"docs": docs}).to_string()).status, 201);
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
    let data: String = (0..2_500_000u32).map(|i| char::from(b'!' + (i * 7 % 94) as u8)).collect();
    for i in 0..25 {
        let r = c.send("PUT", &format!("/db/att{i}/blob"), Some(&data), &[("Content-Type", "application/octet-stream")]);
        assert_eq!(r.status, 201, "upload {i}: {}", r.text);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let runs = compactor.join().unwrap();
    assert!(runs >= 2, "the uploads should overlap compactions ({runs} ran)");
    for i in 0..25 {
        let r = c.get(&format!("/db/att{i}/blob"));
        assert!(r.status == 200 && r.text == data, "attachment {i} reads back whole");
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
        assert!(back.text.trim_end().ends_with(&body[1..]), "{id} comes back whole");
    }
    let bulk = format!("{{\"docs\":[{{\"_id\":\"bulk\",{}]}}", &objects(5_000)[1..]);
    let r = c.post("/deep/_bulk_docs", &bulk);
    assert_eq!(r.status, 201, "{}", r.text);
    // Through the selector filter of a change feed, the stored body is read again.
    let changes = c.post("/deep/_changes?filter=_selector", r#"{"selector":{"v":{"$exists":true}}}"#);
    assert_eq!(changes.status, 200, "{}", changes.text);
    assert_eq!(changes.json()["results"].as_array().unwrap().len(), 3);
    // A view's map function may not manage such a document; the view still answers.
    assert_eq!(c.put("/deep/_design/v", r#"{"views":{"v":{"map":"function(doc){ emit(doc._id, 1); }"}}}"#).status, 201);
    assert_eq!(c.get("/deep/_design/v/_view/v").status, 200);
    for body in [objects(max + 1), arrays(max + 5)] {
        let r = c.put("/deep/too", &body);
        r.error(400, "bad_request");
        assert!(r.json()["reason"].as_str().unwrap().contains("levels deep"), "{}", r.text);
    }
    assert_eq!(c.get("/").status, 200, "the server is still up");
}
