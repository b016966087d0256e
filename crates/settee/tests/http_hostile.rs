//! Hostile and malformed requests: random methods, paths, parameters, headers and bodies
//! against a database with known contents. No request may get a 500, crash the server or
//! change what is stored (the requests carry no valid revision, so no write can succeed).

mod common;

use common::TestServer;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;

fn path_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("db".to_string()),
        Just("doc".to_string()),
        Just("_all_docs".to_string()),
        Just("_bulk_docs".to_string()),
        Just("_bulk_get".to_string()),
        Just("_changes".to_string()),
        Just("_revs_diff".to_string()),
        Just("_purge".to_string()),
        Just("_local".to_string()),
        Just("_design".to_string()),
        Just("_security".to_string()),
        Just("_revs_limit".to_string()),
        Just("_compact".to_string()),
        Just("_node".to_string()),
        Just("_config".to_string()),
        Just("%2F".to_string()),
        Just("%FF%FE".to_string()),
        Just("..".to_string()),
        "[a-z_%0-9]{0,12}",
    ]
}

fn query() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("rev"),
        Just("revs"),
        Just("open_revs"),
        Just("limit"),
        Just("skip"),
        Just("startkey"),
        Just("keys"),
        Just("since"),
        Just("feed"),
        Just("heartbeat"),
        Just("timeout"),
        Just("filter"),
        Just("attachments"),
        Just("atts_since"),
        Just("q"),
        Just("new_edits"),
        Just("batch"),
        Just("descending"),
        Just("include_docs"),
        Just("latest"),
        Just("count"),
    ];
    let value = prop_oneof![
        Just("true".to_string()),
        Just("-1".to_string()),
        Just("%22x%22".to_string()),
        Just("[".to_string()),
        Just("all".to_string()),
        Just("longpoll".to_string()),
        Just("1".to_string()),
        "[a-z0-9%\\[\\]\\-]{0,10}"
    ];
    prop::collection::vec((key, value), 0..3).prop_map(|kv| {
        kv.into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    })
}

fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("{".to_string()),
        Just("[]".to_string()),
        Just("null".to_string()),
        Just(r#"{"docs":5}"#.to_string()),
        Just(r#"{"docs":[{"_id":""},{"_rev":"x"},7]}"#.to_string()),
        Just(r#"{"_id":"doc","_rev":"1-nope","x":1}"#.to_string()),
        Just(r#"{"_attachments":{"a":{"data":"%%%"}}}"#.to_string()),
        Just(r#"{"_attachments":{"a":{"stub":true}},"_rev":"9-z"}"#.to_string()),
        Just(r#"{"doc":["1-x","2-y"],"keys":{"a":1},"selector":{"$bad":1}}"#.to_string()),
        Just(r#"{"_revisions":{"start":-1,"ids":[1]}}"#.to_string()),
        Just("--b\r\n\r\n{}\r\n--b".to_string()),
        "\\PC{0,40}",
    ]
}

#[test]
fn hostile_requests_never_500_and_change_nothing() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let rev = c.put("/db/doc", r#"{"keep":true}"#).json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    c.put("/db/_local/l", r#"{"keep":true}"#);
    let before = (
        c.get("/db/_all_docs?include_docs=true").text,
        c.get("/db/_changes").json()["last_seq"].clone(),
    );

    let methods = prop::sample::select(vec![
        "GET", "PUT", "POST", "DELETE", "HEAD", "COPY", "PATCH", "OPTIONS",
    ]);
    let content_types = prop::sample::select(vec![
        "application/json",
        "text/plain",
        "multipart/related; boundary=b",
        "multipart/related",
        "application/x-www-form-urlencoded",
    ]);
    let templates = prop::sample::select(vec![
        "/db",
        "/db/doc",
        "/db/_local/l",
        "/db/_all_docs",
        "/db/_design_docs",
        "/db/_bulk_docs",
        "/db/_bulk_get",
        "/db/_changes",
        "/db/_revs_diff",
        "/db/_missing_revs",
        "/db/_purge",
        "/db/_security",
        "/db/_revs_limit",
        "/db/doc/att.txt",
        "/db/_design/x",
        "/db/_design/x/y",
        "/db/_ensure_full_commit",
        "/_all_dbs",
        "/_uuids",
        "/_session",
        "/_dbs_info",
        "/_active_tasks",
        "/",
    ]);
    let pieces = (templates, prop::collection::vec(path_piece(), 0..2)).prop_map(|(t, extra)| {
        let mut p: Vec<String> = t
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        p.extend(extra);
        p
    });
    let strategy = (methods, pieces, query(), body(), content_types);
    let seed = proptest::test_runner::RngSeed::Fixed(0x5e77ee);
    let mut runner = TestRunner::new(Config {
        cases: 600,
        failure_persistence: None,
        rng_seed: seed,
        ..Config::default()
    });
    runner
        .run(&strategy, |(method, pieces, query, body, content_type)| {
            // Writes with a valid revision could legitimately succeed; keep them out.
            prop_assume!(!(body.contains(&rev) || query.contains(&rev)));
            // Creating or deleting whole databases and compaction are legitimate changes too.
            let path = format!("/{}", pieces.join("/"));
            prop_assume!(!(pieces.len() == 1 && matches!(method, "PUT" | "DELETE")));
            prop_assume!(
                !(pieces.first().is_some_and(|p| p == "db")
                    && pieces
                        .get(1)
                        .is_some_and(|p| p == "_purge" || p == "_security" || p == "_revs_limit"))
            );
            prop_assume!(!path.contains("_config"));
            // Local documents take writes without a revision, as in CouchDB: those are
            // legitimate changes as well.
            let local_write = !matches!(method, "GET" | "HEAD" | "OPTIONS");
            prop_assume!(!(local_write && pieces.iter().any(|p| p == "_local")));
            // Feeds end quickly: every request carries a short timeout after its own parameters.
            let path = format!("{path}?{query}&timeout=50");
            let extra = [("Content-Type", content_type), ("Destination", "copied")];
            let r = c.try_send(
                method,
                &path,
                (!body.is_empty()).then_some(body.as_str()),
                &extra,
            );
            if let Ok(r) = r {
                prop_assert!(
                    r.status != 500,
                    "{method} {path} {body:?} -> {} {}",
                    r.status,
                    r.text
                );
            }
            Ok(())
        })
        .unwrap();
    // Malformed HTTP itself.
    for raw in [
        "GARBAGE\r\n\r\n",
        "GET / HTTP/9.9\r\n\r\n",
        "GET /db HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        "POST /db/_bulk_docs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n",
    ] {
        let _ = s.raw(raw);
    }
    assert_eq!(c.get("/").status, 200, "the server is still up");
    let after = (
        c.get("/db/_all_docs?include_docs=true").text,
        c.get("/db/_changes").json()["last_seq"].clone(),
    );
    // Documents created by hostile requests with fresh ids would be legitimate writes; the
    // stored document must be untouched and nothing may have been deleted.
    assert_eq!(
        c.get("/db/doc").json(),
        json!({"_id": "doc", "_rev": rev, "keep": true})
    );
    assert_eq!(c.get("/db/_local/l").json()["keep"], true);
    if after.1 == before.1 {
        assert_eq!(after.0, before.0);
    }
}

/// A flood of connections beyond the server's open-files limit: the server keeps its sockets
/// within what its descriptors allow beside the databases' (it never runs out), answers new
/// clients meanwhile by closing connections that wait for nothing, and still writes.
#[test]
fn a_flood_of_connections_does_not_exhaust_the_servers_descriptors() {
    let s = TestServer::start_with_open_files(128);
    let c = s.admin();
    assert_eq!(c.get("/").status, 200);
    let addr: std::net::SocketAddr = s.url.trim_start_matches("http://").parse().unwrap();
    // The kernel completes the handshakes the server does not accept yet; once the listen
    // queue is full too, connecting stalls and the flood stops there.
    let flood: Vec<std::net::TcpStream> = (0..300)
        .map_while(|_| {
            std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(1)).ok()
        })
        .collect();
    assert!(
        flood.len() > 128,
        "the flood reached the listener ({} connections)",
        flood.len()
    );
    assert_eq!(c.get("/").status, 200, "answered during the flood");
    assert_eq!(c.put("/during", "").status, 201, "and databases still open");
    let log = std::fs::read_to_string(&s.log).unwrap_or_default();
    assert!(
        !log.contains("accepting a connection failed"),
        "the server ran out of descriptors: {log}"
    );
    drop(flood);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match c.try_send("GET", "/", None, &[]) {
            Ok(r) if r.status == 200 => break,
            other => assert!(
                std::time::Instant::now() < deadline,
                "the server stopped answering: {other:?}"
            ),
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(c.put("/afterwards", "").status, 201, "and still writes");
}
