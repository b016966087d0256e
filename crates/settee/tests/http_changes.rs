//! Change feeds over HTTP: normal, longpoll, continuous and eventsource; resuming with
//! `since`; filters; and feeds waking on writes rather than polling.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use common::TestServer;
use serde_json::{json, Value};

fn seed(c: &common::Client, n: usize) {
    c.put("/db", "");
    let docs: Vec<Value> = (0..n)
        .map(|i| json!({"_id": format!("d{i}"), "i": i}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", &json!({"docs": docs}).to_string())
            .status,
        201
    );
}

#[test]
fn normal_feed_resumes_and_filters() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, 30);
    let r = c.get("/db/_changes");
    assert!(r.text.starts_with("{\"results\":[\n"), "{}", r.text);
    let all = r.json();
    let rows = all["results"].as_array().unwrap();
    assert_eq!(rows.len(), 30);
    assert_eq!(all["pending"], 0);
    assert_eq!(all["last_seq"], c.get("/db").json()["update_seq"]);
    // Resuming from any row's seq gives exactly the rows after it.
    let cut = rows[9]["seq"].as_str().unwrap();
    let rest = c.get(&format!("/db/_changes?since={cut}")).json();
    let ids: Vec<&str> = rest["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = rows[10..]
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, want);
    let limited = c.get("/db/_changes?limit=5").json();
    assert_eq!(limited["results"].as_array().unwrap().len(), 5);
    assert_eq!(limited["pending"], 25);
    assert_eq!(
        c.get(&format!(
            "/db/_changes?since={}",
            all["last_seq"].as_str().unwrap()
        ))
        .json()["results"],
        json!([])
    );
    assert_eq!(c.get("/db/_changes?since=now").json()["results"], json!([]));
    let docs = c.get("/db/_changes?include_docs=true&limit=1").json();
    assert_eq!(docs["results"][0]["doc"]["_id"], docs["results"][0]["id"]);
    let filtered = c
        .post("/db/_changes?filter=_doc_ids", r#"{"doc_ids":["d3","d7"]}"#)
        .json();
    assert_eq!(filtered["results"].as_array().unwrap().len(), 2);
    let filtered = c
        .get("/db/_changes?filter=_doc_ids&doc_ids=%5B%22d4%22%5D")
        .json();
    assert_eq!(filtered["results"][0]["id"], "d4");
    c.put("/db/_design/x", "{}");
    assert_eq!(
        c.get("/db/_changes?filter=_design").json()["results"][0]["id"],
        "_design/x"
    );
    let rev = c.get("/db/d1").json()["_rev"].as_str().unwrap().to_string();
    c.delete(&format!("/db/d1?rev={rev}"));
    let last = c.get("/db/_changes?descending=true&limit=1").json();
    assert_eq!(last["results"][0]["id"], "d1");
    assert_eq!(last["results"][0]["deleted"], true);
    c.get("/db/_changes?since=garbage")
        .error(400, "bad_request");
    c.get("/db/_changes?feed=sideways")
        .error(400, "bad_request");
    c.get("/db/_changes?heartbeat=-5").error(400, "bad_request");
    c.get("/db/_changes?filter=nope/nope")
        .error(404, "not_found");
    c.get("/db/_changes?filter=x/nope").error(404, "not_found");
    c.get("/db/_changes?filter=_view").error(400, "bad_request");
    // JavaScript filters get each document and the request; `_view` passes documents the
    // view's map function emits rows for.
    let rev = c.get("/db/_design/x").json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    let ddoc = json!({
        "_rev": rev,
        "filters": {"mod": "function(doc, req) { return doc.i % Number(req.query.m) == 0 && req.method == 'GET'; }"},
        "views": {"big": {"map": "function(doc) { if (doc.i >= 27) emit(doc.i, null); }"}}
    });
    assert_eq!(c.put("/db/_design/x", &ddoc.to_string()).status, 201);
    let ids = |v: Value| -> Vec<String> {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    let mut by_ten = ids(c.get("/db/_changes?filter=x/mod&m=10").json());
    by_ten.sort();
    assert_eq!(by_ten, ["d0", "d10", "d20"]);
    let mut big = ids(c.get("/db/_changes?filter=_view&view=x/big").json());
    big.sort();
    assert_eq!(big, ["d27", "d28", "d29"]);
    c.get("/db/_changes?filter=_view&view=x/none")
        .error(404, "not_found");
    // Mango selectors, evaluated against each document's winning revision.
    let picked = c
        .post(
            "/db/_changes?filter=_selector&include_docs=true",
            r#"{"selector":{"i":{"$gte":10,"$lt":13}}}"#,
        )
        .json();
    let ids: Vec<&str> = picked["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{picked}");
    assert!(ids.contains(&"d10") && ids.contains(&"d12"));
    assert_eq!(
        picked["last_seq"],
        c.get("/db").json()["update_seq"],
        "filtered rows still advance the position"
    );
    c.get("/db/_changes?filter=_selector")
        .error(400, "bad_request");
    c.post(
        "/db/_changes?filter=_selector",
        r#"{"selector":{"i":{"$bogus":1}}}"#,
    )
    .error(400, "bad_request");
}

#[test]
fn longpoll_wakes_on_a_write() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, 3);
    let since = c.get("/db").json()["update_seq"]
        .as_str()
        .unwrap()
        .to_string();
    let url = s.url.clone();
    let waiter = std::thread::spawn(move || {
        let c = common::Client::new(&url, Some(common::ADMIN));
        let started = Instant::now();
        let r = c.get(&format!(
            "/db/_changes?feed=longpoll&since={since}&timeout=20000"
        ));
        (r.json(), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    c.put("/db/late", "{}");
    let (feed, took) = waiter.join().unwrap();
    assert_eq!(feed["results"][0]["id"], "late");
    assert!(
        took < Duration::from_secs(15),
        "woke on the write, not the timeout ({took:?})"
    );
    // With nothing to report it returns at the timeout with the same position.
    let now = c.get("/db").json()["update_seq"]
        .as_str()
        .unwrap()
        .to_string();
    let idle = c
        .get(&format!(
            "/db/_changes?feed=longpoll&since={now}&timeout=200"
        ))
        .json();
    assert_eq!(
        (idle["results"].clone(), idle["last_seq"].clone()),
        (json!([]), json!(now))
    );
}

/// Reads a continuous feed line by line from a raw connection.
fn open_feed(s: &TestServer, query: &str) -> BufReader<std::net::TcpStream> {
    let addr = s.url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "GET /db/_changes?{query} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\n\r\n",
        common::admin_auth()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            return reader;
        }
    }
}

/// The next non-empty JSON line of a chunked feed (chunk-size lines and heartbeats skipped).
fn next_json(reader: &mut BufReader<std::net::TcpStream>, prefix: &str) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "feed ended");
        if let Some(json) = line.trim().strip_prefix(prefix) {
            if json.starts_with('{') {
                return serde_json::from_str(json).unwrap();
            }
        }
    }
}

#[test]
fn continuous_and_eventsource_feeds_stream_new_writes() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, 2);
    let mut feed = open_feed(&s, "feed=continuous&heartbeat=100");
    assert_eq!(next_json(&mut feed, "")["id"].as_str().unwrap().len(), 2);
    next_json(&mut feed, "");
    c.put("/db/live1", "{}");
    assert_eq!(next_json(&mut feed, "")["id"], "live1");
    c.put("/db/live2", "{}");
    assert_eq!(next_json(&mut feed, "")["id"], "live2");

    // A batched write reaches the feed once it is committed.
    assert_eq!(c.put("/db/batched?batch=ok", "{}").status, 202);
    assert_eq!(next_json(&mut feed, "")["id"], "batched");

    let mut events = open_feed(&s, "feed=eventsource&since=now&heartbeat=100");
    c.put("/db/ev", "{}");
    assert_eq!(next_json(&mut events, "data: ")["id"], "ev");

    let mut ending = open_feed(&s, "feed=continuous&since=now&timeout=200");
    let last = next_json(&mut ending, "");
    assert!(last["last_seq"].is_string(), "{last}");
}

#[test]
fn many_listeners_wait_cheaply() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, 1);
    let mut feeds: Vec<_> = (0..200)
        .map(|_| open_feed(&s, "feed=continuous&since=now&heartbeat=5000"))
        .collect();
    c.put("/db/wake", "{}");
    for f in &mut feeds {
        assert_eq!(next_json(f, "")["id"], "wake");
    }
}

/// The rows of a feed and the sequences they carry (`None` for `"seq": null`).
fn seqs_of(feed: &Value) -> Vec<(String, Option<String>)> {
    feed["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["seq"].as_str().map(str::to_string),
            )
        })
        .collect()
}

#[test]
fn seq_interval_shows_a_sequence_on_every_nth_row_as_couchdb_counts() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, 30);
    let full = seqs_of(&c.get("/db/_changes").json());
    assert!(full.iter().all(|(_, seq)| seq.is_some()));
    // CouchDB counts the limit down: a row shows its sequence when the rows still allowed,
    // itself included, are a multiple of the interval. Those that show are the full feed's.
    let shown = |query: &str| -> Vec<usize> {
        let feed = c.get(&format!("/db/_changes?{query}")).json();
        assert!(feed["last_seq"].is_string(), "{feed}");
        let rows = seqs_of(&feed);
        assert_eq!(
            rows.iter().map(|r| &r.0).collect::<Vec<_>>(),
            full.iter()
                .take(rows.len())
                .map(|r| &r.0)
                .collect::<Vec<_>>()
        );
        rows.iter()
            .enumerate()
            .filter_map(|(i, (_, seq))| {
                seq.as_ref().map(|seq| {
                    assert_eq!(Some(seq), full[i].1.as_ref(), "row {i}");
                    i
                })
            })
            .collect()
    };
    assert_eq!(shown("seq_interval=5&limit=10"), vec![0, 5]);
    assert_eq!(shown("seq_interval=4&limit=10"), vec![2, 6]);
    // With no limit CouchDB counts down from 10^15: a multiple of 4, one more than one of 3.
    assert_eq!(shown("seq_interval=4"), vec![0, 4, 8, 12, 16, 20, 24, 28]);
    assert_eq!(
        shown("seq_interval=3"),
        vec![1, 4, 7, 10, 13, 16, 19, 22, 25, 28]
    );
    assert_eq!(shown("seq_interval=1&limit=3"), vec![0, 1, 2]);
    // A shown sequence resumes the feed just after its row.
    let feed = c.get("/db/_changes?seq_interval=5&limit=10").json();
    let cut = feed["results"][5]["seq"].as_str().unwrap();
    let rest = seqs_of(&c.get(&format!("/db/_changes?since={cut}")).json());
    assert_eq!(
        rest.iter().map(|r| &r.0).collect::<Vec<_>>(),
        full[6..].iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    for bad in ["0", "-2", "x", ""] {
        assert_eq!(
            c.get(&format!("/db/_changes?seq_interval={bad}"))
                .error(400, "bad_request")
                .json()["reason"],
            "invalid_seq_interval",
            "{bad}"
        );
    }
    // Continuous and eventsource feeds count the same way.
    let lines: Vec<Value> = c
        .get("/db/_changes?feed=continuous&seq_interval=2&limit=4")
        .text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<bool> = lines[..4].iter().map(|r| r["seq"].is_string()).collect();
    assert_eq!(seqs, vec![true, false, true, false]);
    assert!(lines[..4]
        .iter()
        .all(|r| r.as_object().unwrap().contains_key("seq")));
    assert!(lines[4]["last_seq"].is_string());
    let events = c
        .get("/db/_changes?feed=eventsource&seq_interval=2&limit=2")
        .text;
    let ids: Vec<&str> = events
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert_eq!(ids.len(), 2, "{events}");
    assert_eq!(ids[0], format!("\"{}\"", full[0].1.as_ref().unwrap()));
    assert_eq!(ids[1], "null");
}

#[test]
fn a_normal_feed_answers_304_until_the_database_or_the_question_changes() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, 3);
    let first = c.get("/db/_changes");
    let etag = first
        .header("etag")
        .expect("a normal feed has an ETag")
        .to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
        "{etag}"
    );
    let again = c.send("GET", "/db/_changes", None, &[("If-None-Match", &etag)]);
    assert_eq!(
        (again.status, again.text.as_str(), again.header("etag")),
        (304, "", Some(etag.as_str()))
    );
    // The same state asked a different question, or by POST with another body, is another answer.
    assert_eq!(
        c.send(
            "GET",
            "/db/_changes?limit=1",
            None,
            &[("If-None-Match", &etag)]
        )
        .status,
        200
    );
    let ids = |body: &str| {
        c.send(
            "POST",
            "/db/_changes?filter=_doc_ids",
            Some(body),
            &[("Content-Type", "application/json")],
        )
        .header("etag")
        .unwrap()
        .to_string()
    };
    let (d0, d1) = (ids(r#"{"doc_ids":["d0"]}"#), ids(r#"{"doc_ids":["d1"]}"#));
    assert_ne!(d0, d1);
    assert_eq!(
        c.send(
            "POST",
            "/db/_changes?filter=_doc_ids",
            Some(r#"{"doc_ids":["d0"]}"#),
            &[("Content-Type", "application/json"), ("If-None-Match", &d0)]
        )
        .status,
        304
    );
    // A write, a purge, a compaction, and the database made again each give a new ETag.
    let mut seen = vec![etag.clone()];
    let mut fresh = |c: &common::Client, what: &str| {
        let r = c.send(
            "GET",
            "/db/_changes",
            None,
            &[("If-None-Match", seen.last().unwrap())],
        );
        assert_eq!(r.status, 200, "after {what}");
        let tag = r.header("etag").unwrap().to_string();
        assert!(!seen.contains(&tag), "after {what}: {tag} again");
        seen.push(tag);
    };
    c.put("/db/d9", "{}");
    fresh(&c, "a write");
    let rev = c.get("/db/d9").json()["_rev"].as_str().unwrap().to_string();
    assert_eq!(
        c.post("/db/_purge", &json!({"d9": [rev]}).to_string())
            .status,
        201
    );
    fresh(&c, "a purge");
    assert_eq!(c.post("/db/_compact", "").status, 202);
    let started = Instant::now();
    while c.get("/db").json()["compact_running"] == true
        && started.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    fresh(&c, "a compaction");
    c.delete("/db");
    seed(&c, 3);
    fresh(&c, "the database made again with the same documents");
    // Only the normal feed is named: the others answer what arrives while they wait.
    assert_eq!(
        c.get("/db/_changes?feed=longpoll&timeout=100")
            .header("etag"),
        None
    );
    assert_eq!(
        c.get("/db/_changes?feed=continuous&timeout=100")
            .header("etag"),
        None
    );
}
