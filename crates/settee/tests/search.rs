//! Full-text search over HTTP against the real binary: `_search` with each of its
//! parameters (bookmarks through 10,000 hits, sorts, counts, ranges, drilldown, groups,
//! highlights, include_docs and include_fields, stale), `_search_info`, `_search_analyze`,
//! `_search_cleanup`, the `_nouveau` forms, partitioned indexes, updates and deletions
//! leaving the index, an index surviving a restart, and CouchDB's errors for bad input.

mod common;

use std::collections::HashSet;

use common::{Client, TestServer};
use serde_json::{json, Value};

const WORDS: &[&str] = &[
    "apple", "banana", "cherry", "damson", "elder", "fig", "grape",
];

/// `n` documents: `title` (two words), `n`, `kind` (k0-k2), `text` (a sentence).
fn seed(c: &Client, db: &str, n: usize) {
    assert_eq!(c.put(&format!("/{db}"), "").status, 201);
    for chunk in (0..n).collect::<Vec<_>>().chunks(2000) {
        let docs: Vec<Value> = chunk
            .iter()
            .map(|i| {
                json!({
                    "_id": format!("doc{i:05}"),
                    "title": format!("{} {}", WORDS[i % 7], WORDS[i % 5]),
                    "n": i,
                    "kind": format!("k{}", i % 3),
                    "text": format!("The quick brown fox number {i} jumps over the lazy dog"),
                })
            })
            .collect();
        let r = c.post(
            &format!("/{db}/_bulk_docs"),
            &json!({"docs": docs}).to_string(),
        );
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let ddoc = json!({
        "indexes": {
            "all": {
                "index": "function(doc) {
                    if (!doc.title) return;
                    index('default', doc.title);
                    index('title', doc.title, {store: true});
                    index('n', doc.n, {store: true, facet: true});
                    index('kind', doc.kind, {facet: true, store: true});
                    index('text', doc.text, {store: true});
                }"
            },
            "english": {
                "index": "function(doc) { if (doc.text) index('default', doc.text); }",
                "analyzer": "english"
            }
        }
    });
    let r = c.put(&format!("/{db}/_design/s"), &ddoc.to_string());
    assert_eq!(r.status, 201, "{}", r.text);
}

fn search(c: &Client, db: &str, query: &str) -> Value {
    let r = c.get(&format!("/{db}/_design/s/_search/all?{query}"));
    assert_eq!(r.status, 200, "{query}: {}", r.text);
    r.json()
}

fn ids(v: &Value) -> Vec<String> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

fn count(n: usize, f: impl Fn(usize) -> bool) -> u64 {
    (0..n).filter(|i| f(*i)).count() as u64
}

#[test]
fn queries_and_their_answers() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, "db", 1000);
    let apple = |i: usize| i.is_multiple_of(7) || i.is_multiple_of(5);
    let v = search(&c, "db", "q=apple");
    assert_eq!(v["total_rows"], count(1000, apple));
    assert_eq!(v["rows"].as_array().unwrap().len(), 25);
    let row = &v["rows"][0];
    let keys: Vec<&String> = row.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "order", "fields"]);
    assert!(row["order"][0].as_f64().unwrap() > 0.0);
    // The document number is a whole number, as CouchDB writes it.
    assert!(row["order"][1].is_u64(), "{row}");
    assert!(v["bookmark"].is_string());
    for (q, want) in [
        ("title:apple", count(1000, apple)),
        ("n:42", 1),
        ("n:[10 TO 19]", 10),
        ("n:{10 TO 19}", 8),
        ("n:[990 TO Infinity]", 10),
        (
            "title:apple AND kind:k1",
            count(1000, |i| apple(i) && i % 3 == 1),
        ),
        (
            "title:apple -kind:k1",
            count(1000, |i| apple(i) && i % 3 != 1),
        ),
        ("text:\"brown fox\"", 1000),
        ("text:\"fox brown\"", 0),
        ("text:\"number 7 jumps\"", 1),
        ("title:ban*", count(1000, |i| i % 7 == 1 || i % 5 == 1)),
        ("title:b?nana", count(1000, |i| i % 7 == 1 || i % 5 == 1)),
        ("title:bananna~1", count(1000, |i| i % 7 == 1 || i % 5 == 1)),
        ("title:/ch.rry/", count(1000, |i| i % 7 == 2 || i % 5 == 2)),
        (
            "title:[cherry TO damson]",
            count(1000, |i| {
                [2, 3].contains(&(i % 7)) || [2, 3].contains(&(i % 5))
            }),
        ),
        ("*:*", 1000),
        (
            "(apple OR fig) AND kind:k0",
            count(1000, |i| (apple(i) || i % 7 == 5) && i % 3 == 0),
        ),
        ("the", 0),
    ] {
        let v = search(&c, "db", &format!("q={}", enc(q)));
        assert_eq!(v["total_rows"], want, "{q}");
    }
    // POST, `query`, limit 0, include_fields, include_docs.
    let r = c.post(
        "/db/_design/s/_search/all",
        &json!({"query": "n:[0 TO 4]", "sort": "n", "include_docs": true, "include_fields": ["n"], "limit": 3}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(ids(&v), ["doc00000", "doc00001", "doc00002"]);
    assert_eq!(v["rows"][1]["fields"], json!({"n": 1}));
    assert_eq!(v["rows"][1]["doc"]["title"], "banana banana");
    assert_eq!(v["rows"][1]["doc"]["_id"], "doc00001");
    let v = search(&c, "db", "q=apple&limit=0");
    assert_eq!(
        (v["total_rows"].clone(), v["rows"].clone()),
        (json!(count(1000, apple)), json!([]))
    );
    // The English analyzer stems the query and the text alike.
    let r = c.get("/db/_design/s/_search/english?q=jumping");
    assert_eq!(r.json()["total_rows"], 1000, "{}", r.text);
}

#[test]
fn bookmarks_page_through_ten_thousand_hits() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, "db", 10_000);
    for sort in [
        "",
        "&sort=%22-n%22",
        "&sort=%5B%22kind%3Cstring%3E%22%2C%22n%22%5D",
    ] {
        let mut seen = Vec::new();
        let mut bookmark = String::new();
        loop {
            let v = search(
                &c,
                "db",
                &format!("q=*:*&limit=200{sort}&bookmark={bookmark}"),
            );
            assert_eq!(v["total_rows"], 10_000);
            let page = ids(&v);
            if page.is_empty() {
                break;
            }
            seen.extend(page);
            bookmark = v["bookmark"].as_str().unwrap().to_string();
        }
        let unique: HashSet<&String> = seen.iter().collect();
        assert_eq!((seen.len(), unique.len()), (10_000, 10_000), "sort {sort}");
        if sort.contains("-n") {
            assert_eq!(seen[0], "doc09999");
            assert_eq!(seen[9999], "doc00000");
        }
        if sort.contains("kind") {
            assert_eq!(&seen[..2], ["doc00000", "doc00003"]);
            assert_eq!(seen[3334], "doc00001");
        }
    }
    // A bookmark from another sort is refused.
    let v = search(&c, "db", "q=*:*&limit=1");
    let b = v["bookmark"].as_str().unwrap();
    let r = c.get(&format!(
        "/db/_design/s/_search/all?q=*:*&sort=%5B%22n%22%2C%22kind%3Cstring%3E%22%5D&bookmark={b}"
    ));
    r.error(400, "bad_request");
    c.get("/db/_design/s/_search/all?q=*:*&bookmark=!!!")
        .error(400, "bad_request");
}

#[test]
fn sorts_counts_ranges_drilldown_groups_and_highlights() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, "db", 300);
    let apple = |i: usize| i.is_multiple_of(7) || i.is_multiple_of(5);
    // Strings, then numbers descending.
    let v = search(
        &c,
        "db",
        &format!("q=apple&sort={}", enc(r#"["title<string>","-n"]"#)),
    );
    assert_eq!(v["rows"][0]["fields"]["title"], "apple apple");
    assert_eq!(v["rows"][0]["fields"]["n"], 280);
    assert_eq!(v["rows"][0]["order"][0], "apple apple");
    assert_eq!(v["rows"][0]["order"][1], 280.0);
    // Counts and ranges.
    let q = format!(
        "q=apple&counts={}&ranges={}",
        enc(r#"["kind"]"#),
        enc(r#"{"n": {"low": "[0 TO 150}", "high": "[150 TO Infinity]"}}"#)
    );
    let v = search(&c, "db", &q);
    for k in 0..3 {
        assert_eq!(
            v["counts"]["kind"][format!("k{k}")],
            count(300, |i| apple(i) && i % 3 == k)
        );
    }
    assert_eq!(v["ranges"]["n"]["low"], count(150, apple));
    assert_eq!(
        v["ranges"]["n"]["high"],
        count(300, apple) - count(150, apple)
    );
    // Drilldown: values of one dimension are alternatives; dimensions all apply.
    let v = search(
        &c,
        "db",
        &format!("q=apple&drilldown={}", enc(r#"["kind","k1","k2"]"#)),
    );
    assert_eq!(v["total_rows"], count(300, |i| apple(i) && i % 3 != 0));
    let v = search(
        &c,
        "db",
        &format!(
            "q=apple&drilldown={}&drilldown={}",
            enc(r#"["kind","k1"]"#),
            enc(r#"["kind","k2"]"#)
        ),
    );
    assert_eq!(v["total_rows"], count(300, |i| apple(i) && i % 3 != 0));
    // Groups: by kind, two hits each, groups ordered by their first hit.
    let v = search(
        &c,
        "db",
        &format!(
            "q=apple&group_field=kind&limit=2&sort={}&group_sort={}",
            enc("\"n\""),
            enc("\"n\"")
        ),
    );
    assert_eq!(v["total_rows"], count(300, apple));
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 3);
    assert_eq!(groups[0]["by"], "k0");
    assert_eq!(
        groups[0]["total_rows"],
        count(300, |i| apple(i) && i % 3 == 0)
    );
    assert_eq!(ids(&groups[0]), ["doc00000", "doc00015"]);
    assert_eq!(groups[1]["by"], "k2");
    let v = search(&c, "db", "q=apple&group_field=kind&group_limit=1");
    assert_eq!(v["groups"].as_array().unwrap().len(), 1);
    // `group_by` alone: the older answer, with the grouped total of the groups returned.
    let v = search(&c, "db", "q=apple&group_by=kind&group_limit=2&limit=1");
    assert_eq!(v["total_hits"], count(300, apple));
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let grouped: u64 = groups
        .iter()
        .map(|g| g["total_hits"].as_u64().unwrap())
        .sum();
    assert_eq!(v["total_grouped_hits"], grouped);
    assert!(grouped > 0 && v.get("total_rows").is_none());
    assert_eq!(groups[0]["hits"].as_array().unwrap().len(), 1);
    // Highlights.
    let v = search(
        &c,
        "db",
        &format!(
            "q=text:lazy%20AND%20n:7&highlight_fields={}&highlight_pre_tag={}&highlight_post_tag={}",
            enc(r#"["text"]"#),
            enc("\"<b>\""),
            enc("\"</b>\"")
        ),
    );
    assert_eq!(
        v["rows"][0]["highlights"],
        json!({"text": ["The quick brown fox number 7 jumps over the <b>lazy</b> dog"]})
    );
    let v = search(
        &c,
        "db",
        &format!(
            "q=text:fox&limit=1&highlight_fields={}&highlight_size=20",
            enc(r#"["text"]"#)
        ),
    );
    assert_eq!(
        v["rows"][0]["highlights"]["text"],
        json!(["The quick brown <em>fox</em> "])
    );
}

#[test]
fn updates_deletions_restarts_and_info() {
    let mut s = TestServer::start();
    let c = s.admin();
    seed(&c, "db", 100);
    assert_eq!(
        search(&c, "db", "q=title:grape")["total_rows"],
        count(100, |i| i % 7 == 6)
    );
    let doc = c.get("/db/doc00006").json();
    let edit = json!({"_rev": doc["_rev"], "title": "zucchini", "n": 6, "kind": "k0", "text": "x"});
    let r = c.put("/db/doc00006", &edit.to_string());
    assert_eq!(r.status, 201);
    let r = c.get("/db/doc00013");
    c.delete(&format!(
        "/db/doc00013?rev={}",
        r.json()["_rev"].as_str().unwrap()
    ));
    let v = search(&c, "db", "q=title:grape");
    assert_eq!(v["total_rows"], count(100, |i| i % 7 == 6) - 2);
    assert_eq!(ids(&search(&c, "db", "q=zucchini")), ["doc00006"]);
    // stale=ok answers from the index as it is, without the newest write.
    let late = json!({"title": "zucchini", "n": 1000, "kind": "k1", "text": "y"});
    assert_eq!(c.put("/db/late", &late.to_string()).status, 201);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stale = c
        .get("/db/_design/s/_search/all?q=zucchini&stale=ok")
        .json();
    assert!(stale["total_rows"].as_u64().unwrap() >= 1);
    assert_eq!(search(&c, "db", "q=zucchini")["total_rows"], 2);
    let info = c.get("/db/_design/s/_search_info/all").json();
    assert_eq!(info["name"], "_design/s/all");
    assert_eq!(info["search_index"]["doc_count"], 100);
    assert_eq!(
        info["search_index"]["committed_seq"],
        info["search_index"]["pending_seq"]
    );
    assert!(info["search_index"]["disk_size"].as_u64().unwrap() > 0);
    assert_eq!(
        info["search_index"]["signature"].as_str().unwrap().len(),
        32
    );
    let size = c.get("/db/_design/s/_search_disk_size/all").json();
    assert!(size["search_index"]["disk_size"].as_u64().unwrap() > 0);
    // The index survives a restart: answered without rebuilding from the start.
    s.restart();
    let c = s.admin();
    let v = c
        .get("/db/_design/s/_search/all?q=zucchini&stale=ok")
        .json();
    assert_eq!(v["total_rows"], 2);
    // Cleanup removes the files of an index no design document has any more.
    // 100 documents, one deleted, one edited to other text.
    assert_eq!(
        c.get("/db/_design/s/_search/english?q=jumping").json()["total_rows"],
        98
    );
    let ddoc = c.get("/db/_design/s").json();
    let r = c.put(
        "/db/_design/s",
        &json!({"_rev": ddoc["_rev"], "indexes": {"all": ddoc["indexes"]["all"]}}).to_string(),
    );
    assert_eq!(r.status, 201);
    let before = index_dirs(s.dir.path());
    assert_eq!(before, 2, "two search indexes were built");
    let r = c.post("/db/_search_cleanup", "{}");
    assert_eq!((r.status, r.json()), (202, json!({"ok": true})));
    assert_eq!(index_dirs(s.dir.path()), 1);
    assert_eq!(search(&c, "db", "q=zucchini")["total_rows"], 2);
    let r = c.get("/db/_design/s/_search/english?q=jumping");
    r.error(404, "not_found");
    assert_eq!(r.json()["reason"], "english not found.");
}

#[test]
fn bad_input_gets_couchdbs_errors() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, "db", 10);
    let r = c.get("/db/_design/s/_search/all");
    r.error(400, "query_parse_error");
    assert_eq!(
        r.json()["reason"],
        "Query must include a 'q' or 'query' argument"
    );
    for q in ["title:(apple", "\"open", "n:[1 TO", "a^x", "title:/[/"] {
        c.get(&format!("/db/_design/s/_search/all?q={}", enc(q)))
            .error(400, "bad_request");
    }
    let r = c.get("/db/_design/s/_search/all?q=a&limit=201");
    r.error(400, "query_parse_error");
    assert_eq!(
        r.json()["reason"],
        "Value for limit is too large, must not exceed 200"
    );
    c.get("/db/_design/s/_search/all?q=a&limit=-1")
        .error(400, "query_parse_error");
    c.get("/db/_design/s/_search/all?q=a&stale=no")
        .error(400, "query_parse_error");
    let r = c.get(&format!(
        "/db/_design/s/_search/all?q=a&sort={}",
        enc("\"n<date>\"")
    ));
    r.error(400, "bad_request");
    assert_eq!(r.json()["reason"], "Unrecognized type: date");
    c.get(&format!(
        "/db/_design/s/_search/all?q=a&sort={}",
        enc("\"a b\"")
    ))
    .error(400, "bad_request");
    c.get(&format!(
        "/db/_design/s/_search/all?q=a&counts={}",
        enc("\"kind\"")
    ))
    .error(400, "bad_request");
    c.get(&format!(
        "/db/_design/s/_search/all?q=a&ranges={}",
        enc(r#"{"n":{"x":"apple"}}"#)
    ))
    .error(400, "bad_request");
    c.get("/db/_design/s/_search/all?q=a&group_limit=0&group_field=kind")
        .error(400, "query_parse_error");
    c.get("/db/_design/nope/_search/all?q=a")
        .error(404, "not_found");
    c.get("/db/_design/s/_search/nope?q=a")
        .error(404, "not_found");
    c.get("/nodb/_design/s/_search/all?q=a")
        .error(404, "not_found");
    let r = c.send("PUT", "/db/_design/s/_search/all", Some("{}"), &[]);
    r.error(405, "method_not_allowed");
    // Unknown analyzers, functions that throw or loop: errors, and the indexer keeps going.
    let ddoc = json!({"indexes": {
        "klingon": {"index": "function(d){ index('default', d.title); }", "analyzer": "klingon"},
        "throws": {"index": "function(d){ if (d.n % 2) throw new Error('odd'); index('default', d.title); index('x', {}); }"},
        "bad": {"index": "function(d){ index('default', d.title, 'x'); }"},
        "odd": {"index": "function(d){ if (d.n % 2) { index('_x', 1); } else { index('default', d.title); } }"},
        "loops": {"index": "function(d){ while (true) {} }"},
        "syntax": {"index": "function(d){ index( }"}
    }});
    assert_eq!(c.put("/db/_design/bad", &ddoc.to_string()).status, 201);
    let r = c.get("/db/_design/bad/_search/klingon?q=a");
    r.error(400, "bad_request");
    assert_eq!(r.json()["reason"], "klingon is not a valid analyzer name");
    // A field of a kind index() refuses leaves the document out; others are indexed.
    assert_eq!(
        c.get("/db/_design/bad/_search/throws?q=*:*").json()["total_rows"],
        0
    );
    assert_eq!(
        c.get("/db/_design/bad/_search/bad?q=*:*").json()["total_rows"],
        0
    );
    assert_eq!(
        c.get("/db/_design/bad/_search/odd?q=*:*").json()["total_rows"],
        5
    );
    c.get("/db/_design/bad/_search/syntax?q=a")
        .error(400, "compilation_error");
    let mut logs = s;
    logs.allow_errors = true;
    let c = logs.admin();
    common::set_config(&c, "couchdb", "os_process_timeout", "300");
    let r = c.get("/db/_design/bad/_search/loops?q=a");
    assert_eq!(r.status, 500, "{}", r.text);
    assert_eq!(
        search(&c, "db", "q=apple")["total_rows"],
        count(10, |i| i % 7 == 0 || i % 5 == 0)
    );
}

#[test]
fn analyze_endpoints() {
    let s = TestServer::start();
    let c = s.admin();
    let r = c.post(
        "/_search_analyze",
        &json!({"analyzer": "english", "text": "The running dogs"}).to_string(),
    );
    assert_eq!(r.json(), json!({"tokens": ["run", "dog"]}), "{}", r.text);
    let r = c.post(
        "/_search_analyze",
        &json!({"analyzer": "standard", "text": "ablanks@renovations.com"}).to_string(),
    );
    assert_eq!(r.json()["tokens"], json!(["ablanks", "renovations.com"]));
    let r = c.post(
        "/_search_analyze",
        &json!({"analyzer": "email", "text": "ablanks@renovations.com"}).to_string(),
    );
    assert_eq!(r.json()["tokens"], json!(["ablanks@renovations.com"]));
    let r = c.get("/_search_analyze?analyzer=keyword&text=Hello%20World");
    assert_eq!(r.json()["tokens"], json!(["Hello World"]));
    let r = c.post("/_search_analyze", &json!({"text": "x"}).to_string());
    r.error(400, "bad_request");
    assert_eq!(r.json()["reason"], "analyzer parameter is mandatory");
    let r = c.post(
        "/_search_analyze",
        &json!({"analyzer": "x", "text": "x"}).to_string(),
    );
    r.error(400, "bad_request");
    let r = c.post(
        "/_nouveau_analyze",
        &json!({"analyzer": "standard", "text": "The Fox"}).to_string(),
    );
    assert_eq!(r.json()["tokens"], json!(["the", "fox"]));
    c.post(
        "/_nouveau_analyze",
        &json!({"analyzer": 1, "text": "x"}).to_string(),
    )
    .error(400, "bad_request");
    c.get("/_nouveau_analyze").error(405, "method_not_allowed");
    let welcome = c.get("/").json();
    let features: Vec<&str> = welcome["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(features.contains(&"search") && features.contains(&"nouveau"));
}

#[test]
fn nouveau_indexes() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, "db", 100);
    let ddoc = json!({"nouveau": {"n": {
        "index": "function(doc) {
            index('text', 'title', doc.title, {store: true});
            index('string', 'kind', doc.kind);
            index('double', 'n', doc.n, {store: true});
            index('stored', 'text', doc.text);
        }",
        "default_analyzer": "standard"
    }}});
    assert_eq!(c.put("/db/_design/nv", &ddoc.to_string()).status, 201);
    let r = c.get(&format!(
        "/db/_design/nv/_nouveau/n?q={}&sort={}&limit=5&counts={}&ranges={}",
        enc("title:apple"),
        enc(r#"["-n<double>"]"#),
        enc(r#"["kind"]"#),
        enc(r#"{"n":[{"label":"low","min":0,"max":50,"max_inclusive":false},{"label":"high","min":50}]}"#),
    ));
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    let apple = |i: usize| i.is_multiple_of(7) || i.is_multiple_of(5);
    assert_eq!(v["total_hits"], count(100, apple));
    assert_eq!(v["total_hits_relation"], "EQUAL_TO");
    assert_eq!(v["hits"][0]["id"], "doc00098");
    assert_eq!(
        v["hits"][0]["order"],
        json!([{"@type": "double", "value": 98.0}, {"@type": "string", "value": "doc00098"}])
    );
    assert_eq!(
        v["hits"][0]["fields"]["text"],
        "The quick brown fox number 98 jumps over the lazy dog"
    );
    assert_eq!(
        v["counts"]["kind"]["k0"],
        count(100, |i| apple(i) && i % 3 == 0)
    );
    assert_eq!(v["ranges"]["n"]["low"], count(50, apple));
    // Paging by bookmark, POST.
    let mut seen = Vec::new();
    let mut bookmark = Value::Null;
    loop {
        let r = c.post(
            "/db/_design/nv/_nouveau/n",
            &json!({"q": "*:*", "limit": 30, "bookmark": bookmark}).to_string(),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        let v = r.json();
        assert!(v["counts"].is_null() && v["ranges"].is_null());
        let hits = v["hits"].as_array().unwrap();
        if hits.is_empty() {
            break;
        }
        seen.extend(hits.iter().map(|h| h["id"].as_str().unwrap().to_string()));
        bookmark = v["bookmark"].clone();
    }
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 100);
    assert_eq!(seen.len(), 100);
    c.get("/db/_design/nv/_nouveau/n")
        .error(400, "query_parse_error");
    c.get(&format!(
        "/db/_design/nv/_nouveau/n?q=a&sort={}",
        enc("\"n\"")
    ))
    .error(400, "bad_request");
    c.get("/db/_design/nv/_nouveau/n?q=a&limit=0")
        .error(400, "query_parse_error");
    let r = c.send(
        "POST",
        "/db/_design/nv/_nouveau/n",
        Some("q=a"),
        &[("content-type", "application/x-www-form-urlencoded")],
    );
    r.error(415, "bad_content_type");
    let info = c.get("/db/_design/nv/_nouveau_info/n").json();
    assert_eq!(info["name"], "_design/nv/n");
    assert_eq!(info["search_index"]["num_docs"], 100);
    // Nouveau's standard analyzer keeps stop words.
    assert_eq!(
        c.get("/db/_design/nv/_nouveau/n?q=title:the").json()["total_hits"],
        0
    );
    let r = c.post("/db/_nouveau_cleanup", "{}");
    assert_eq!(r.status, 202);
}

#[test]
fn partitioned_search_indexes() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/pdb?partitioned=true", "").status, 201);
    let docs: Vec<Value> = (0..60)
        .map(|i| json!({"_id": format!("p{}:d{i}", i % 3), "title": WORDS[i % 7]}))
        .collect();
    c.post("/pdb/_bulk_docs", &json!({"docs": docs}).to_string());
    let ddoc = json!({"indexes": {"i": {"index": "function(d){ index('default', d.title); }"}}});
    assert_eq!(c.put("/pdb/_design/s", &ddoc.to_string()).status, 201);
    let r = c.get("/pdb/_partition/p1/_design/s/_search/i?q=apple");
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(
        v["total_rows"],
        (0..60).filter(|i| i % 3 == 1 && i % 7 == 0).count()
    );
    assert!(ids(&v).iter().all(|id| id.starts_with("p1:")));
    let r = c.get("/pdb/_design/s/_search/i?q=apple");
    r.error(400, "bad_request");
    assert_eq!(
        r.json()["reason"],
        "`partition` parameter is mandatory for queries to this index."
    );
    c.get(&format!(
        "/pdb/_partition/p1/_design/s/_search/i?q=apple&counts={}",
        enc("[\"x\"]")
    ))
    .error(400, "bad_request");
    // A global design document in a partitioned database searches everything.
    let ddoc = json!({"options": {"partitioned": false}, "indexes": {"i": {"index": "function(d){ index('default', d.title); }"}}});
    assert_eq!(c.put("/pdb/_design/g", &ddoc.to_string()).status, 201);
    let v = c.get("/pdb/_design/g/_search/i?q=apple").json();
    assert_eq!(v["total_rows"], (0..60).filter(|i| i % 7 == 0).count());
    c.get("/pdb/_partition/p1/_design/g/_search/i?q=apple")
        .error(400, "bad_request");
}

#[test]
fn builds_show_in_active_tasks_and_are_shared_by_waiting_clients() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, "db", 20_000);
    let url = s.url.clone();
    let watcher = std::thread::spawn(move || {
        let c = Client::new(&url, Some(common::ADMIN));
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(60) {
            let tasks = c.get("/_active_tasks").json();
            // A task is listed as it starts, before it knows its total: wait for that.
            if let Some(t) = tasks.as_array().and_then(|ts| {
                ts.iter()
                    .find(|t| t["type"] == "search_indexer" && t["total_changes"] != 0)
            }) {
                return Some(t.clone());
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        None
    });
    // Eight clients ask at once while the index is built: one build, eight equal answers.
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let url = s.url.clone();
            std::thread::spawn(move || {
                let c = Client::new(&url, Some(common::ADMIN));
                let r = c.get("/db/_design/s/_search/all?q=apple&limit=1");
                assert_eq!(r.status, 200, "{}", r.text);
                r.json()["total_rows"].clone()
            })
        })
        .collect();
    let want = json!(count(20_000, |i| i % 7 == 0 || i % 5 == 0));
    for t in clients {
        assert_eq!(t.join().unwrap(), want);
    }
    let task = watcher
        .join()
        .unwrap()
        .expect("the build is listed in _active_tasks");
    assert_eq!(task["database"], "db");
    assert_eq!(task["design_document"], "_design/s");
    assert!(task["total_changes"].as_u64().unwrap() >= 20_000, "{task}");
}

#[test]
fn new_index_functions_and_purges_change_answers() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, "db", 50);
    assert_eq!(
        search(&c, "db", "q=title:apple")["total_rows"],
        count(50, |i| i % 7 == 0 || i % 5 == 0)
    );
    // A new function: a new index, built from the start.
    let ddoc = c.get("/db/_design/s").json();
    let f = "function(doc) { if (doc.n < 10) { index('title', doc.title, {store: true}); } }";
    let r = c.put(
        "/db/_design/s",
        &json!({"_rev": ddoc["_rev"], "indexes": {"all": {"index": f}}}).to_string(),
    );
    assert_eq!(r.status, 201);
    assert_eq!(
        search(&c, "db", "q=title:apple")["total_rows"],
        count(10, |i| i % 7 == 0 || i % 5 == 0)
    );
    // A purged document leaves the index.
    let rev = c.get("/db/doc00005").json()["_rev"].clone();
    let r = c.post("/db/_purge", &json!({"doc00005": [rev]}).to_string());
    assert_eq!(r.status, 201, "{}", r.text);
    let v = search(&c, "db", "q=title:apple&limit=50");
    assert_eq!(
        v["total_rows"],
        count(10, |i| (i % 7 == 0 || i % 5 == 0) && i != 5)
    );
    assert!(!ids(&v).contains(&"doc00005".to_string()));
    // A deleted design document's index is gone.
    let ddoc = c.get("/db/_design/s").json();
    c.delete(&format!(
        "/db/_design/s?rev={}",
        ddoc["_rev"].as_str().unwrap()
    ));
    let r = c.get("/db/_design/s/_search/all?q=apple");
    r.error(404, "not_found");
    assert_eq!(r.json()["reason"], "deleted");
}

/// Search index directories (each under a directory named `indexes`) below `root`.
fn index_dirs(root: &std::path::Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|f| f == "indexes") {
                n += std::fs::read_dir(&path).unwrap().count();
            } else {
                n += index_dirs(&path);
            }
        }
    }
    n
}

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
