//! Mango text indexes over HTTP against the real binary: created, listed and deleted as
//! CouchDB stores them; `_find` on them for `$text` and every operator, each answer checked
//! against the documents themselves; sorts, bookmarks, skip and the 200 limit; `fields`,
//! `default_field` and partial filters; the planner's choice among JSON and text indexes
//! and `_explain`; updates and deletions; and CouchDB's errors.

mod common;

use std::collections::BTreeSet;

use common::{Client, TestServer};
use serde_json::{json, Value};

const COLOURS: &[&str] = &["red", "green", "blue", "amber"];
const CITIES: &[&str] = &["Oslo", "Lima", "Pune"];

/// Document `i`: a name, an age, tags, a city for most, and a sentence.
fn person(i: usize) -> Value {
    let mut d = json!({
        "_id": format!("p{i:03}"),
        "name": format!("{} {i}", ["Alice", "Bob", "Carol", "Dave"][i % 4]),
        "age": i % 50,
        "tags": (0..(i % 3)).map(|k| COLOURS[(i + k) % 4]).collect::<Vec<_>>(),
        "kind": if i.is_multiple_of(5) { "a" } else { "b" },
        "bio": if i.is_multiple_of(2) {
            format!("the quick brown fox jumps over the lazy dog {i}")
        } else {
            format!("a slow green turtle walking to town {i}")
        },
    });
    if !i.is_multiple_of(7) {
        d["city"] = json!(CITIES[i % 3]);
    }
    d
}

const N: usize = 300;

fn seed(c: &Client, db: &str) -> Vec<Value> {
    assert_eq!(c.put(&format!("/{db}"), "").status, 201);
    let docs: Vec<Value> = (0..N).map(person).collect();
    let r = c.post(
        &format!("/{db}/_bulk_docs"),
        &json!({ "docs": docs }).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    docs
}

fn create(c: &Client, db: &str, body: Value) -> Value {
    let r = c.post(&format!("/{db}/_index"), &body.to_string());
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

fn find(c: &Client, db: &str, body: Value) -> Value {
    let r = c.post(&format!("/{db}/_find"), &body.to_string());
    assert_eq!(r.status, 200, "{body}: {}", r.text);
    r.json()
}

fn ids(answer: &Value) -> Vec<String> {
    answer["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["_id"].as_str().unwrap().to_string())
        .collect()
}

/// Every id a selector matches, read page by page through bookmarks (no repeats allowed).
fn all_ids(c: &Client, db: &str, selector: &Value, extra: Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut bookmark: Option<String> = None;
    loop {
        let mut body = json!({"selector": selector, "limit": 7});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        if let Some(b) = &bookmark {
            body["bookmark"] = json!(b);
        }
        let page = find(c, db, body);
        let got = ids(&page);
        if got.is_empty() {
            break;
        }
        out.extend(got);
        bookmark = Some(page["bookmark"].as_str().unwrap().to_string());
    }
    let unique: BTreeSet<&String> = out.iter().collect();
    assert_eq!(unique.len(), out.len(), "a page repeated a document");
    out
}

fn expected(docs: &[Value], pred: impl Fn(&Value) -> bool) -> BTreeSet<String> {
    docs.iter()
        .filter(|d| pred(d))
        .map(|d| d["_id"].as_str().unwrap().to_string())
        .collect()
}

fn explain(c: &Client, db: &str, body: Value) -> Value {
    let r = c.post(&format!("/{db}/_explain"), &body.to_string());
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

#[test]
fn text_indexes_are_created_listed_and_deleted_as_couchdb_stores_them() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/t", "").status, 201);
    let body = json!({"index": {}, "type": "text", "ddoc": "txt", "name": "everything"});
    let r = create(&c, "t", body.clone());
    assert_eq!(
        r,
        json!({"result": "created", "id": "_design/txt", "name": "everything"})
    );
    assert_eq!(create(&c, "t", body)["result"], "exists");
    let ddoc = c.get("/t/_design/txt").json();
    assert_eq!(ddoc["language"], "query");
    assert_eq!(
        ddoc["indexes"]["everything"]["index"],
        json!({"default_analyzer": "keyword", "default_field": {},
            "partial_filter_selector": {}, "selector": {}, "fields": "all_fields",
            "index_array_lengths": true})
    );
    assert_eq!(
        ddoc["indexes"]["everything"]["analyzer"],
        json!({"name": "perfield", "default": "keyword", "fields": {"$default": "standard"}})
    );
    // Unnamed: CouchDB's name, from the definition and options.
    let r = create(
        &c,
        "t",
        json!({"index": {"fields": [{"name": "age", "type": "number"}],
            "default_field": false}, "type": "text"}),
    );
    let auto = r["name"].as_str().unwrap().to_string();
    assert_eq!(auto.len(), 40);
    assert_eq!(r["id"], format!("_design/{auto}"));
    let list = c.get("/t/_index").json();
    assert_eq!(list["total_rows"], 3);
    let text: Vec<&Value> = list["indexes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "text")
        .collect();
    assert_eq!(text.len(), 2);
    let everything = text.iter().find(|i| i["name"] == "everything").unwrap();
    assert_eq!(
        everything["def"],
        json!({"default_analyzer": "keyword", "default_field": {}, "selector": {},
            "fields": [], "index_array_lengths": true})
    );
    assert_eq!(everything["partitioned"], false);
    let named = text.iter().find(|i| i["name"] == auto.as_str()).unwrap();
    assert_eq!(named["def"]["fields"], json!([{"age": "number"}]));
    // Bad definitions: CouchDB's errors, nothing written.
    for (body, error) in [
        (json!({"index": [], "type": "text"}), "invalid_index_text"),
        (
            json!({"index": {"analyzer": "standard"}, "type": "text"}),
            "invalid_key",
        ),
        (
            json!({"index": {"fields": [{"name": "a", "type": "date"}]}, "type": "text"}),
            "invalid_index_fields_definition",
        ),
        (
            json!({"index": {"fields": [{"name": "", "type": "string"}]}, "type": "text"}),
            "invalid_index_fields_definition",
        ),
        (
            json!({"index": {"fields": "some"}, "type": "text"}),
            "invalid_index_fields_definition",
        ),
        (
            json!({"index": {"index_array_lengths": "yes"}, "type": "text"}),
            "invalid_bool",
        ),
        (
            json!({"index": {"default_analyzer": "klingon"}, "type": "text"}),
            "invalid_index",
        ),
    ] {
        c.post("/t/_index", &body.to_string()).error(400, error);
    }
    assert_eq!(c.get("/t/_index").json()["total_rows"], 3);
    // Deleted by type and name; the design document goes with its last index.
    c.delete("/t/_index/_design/txt/json/everything")
        .error(404, "not_found");
    let r = c.delete("/t/_index/txt/text/everything");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(c.get("/t/_design/txt").status, 404);
    c.delete("/t/_index/txt/text/everything")
        .error(404, "not_found");
    let r = c.post(
        "/t/_index/_bulk_delete",
        &json!({"docids": [format!("_design/{auto}")]}).to_string(),
    );
    assert_eq!(r.json()["success"][0]["ok"], true, "{}", r.text);
    assert_eq!(c.get("/t/_index").json()["total_rows"], 1);
}

#[test]
fn queries_on_a_text_index_find_what_their_selectors_match() {
    let s = TestServer::start();
    let c = s.admin();
    let docs = seed(&c, "t");
    create(
        &c,
        "t",
        json!({"index": {}, "type": "text", "ddoc": "txt", "name": "all"}),
    );
    let has = |d: &Value, f: &str| d.get(f).is_some();
    let tags = |d: &Value| -> Vec<String> {
        d["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect()
    };
    let age = |d: &Value| d["age"].as_u64().unwrap();
    let name = |d: &Value| d["name"].as_str().unwrap().to_string();
    let bio = |d: &Value| d["bio"].as_str().unwrap().to_string();
    type Case = (Value, Box<dyn Fn(&Value) -> bool>);
    let cases: Vec<Case> = vec![
        (
            json!({"$text": "lazy dog"}),
            Box::new(move |d| bio(d).contains("lazy dog")),
        ),
        (
            json!({"$text": "turtle", "age": {"$lt": 10}}),
            Box::new(move |d| bio(d).contains("turtle") && age(d) < 10),
        ),
        (json!({"age": {"$gt": 45}}), Box::new(move |d| age(d) > 45)),
        (
            json!({"age": {"$gte": 10, "$lte": 12}}),
            Box::new(move |d| (10..=12).contains(&age(d))),
        ),
        (json!({"age": 7}), Box::new(move |d| age(d) == 7)),
        (
            json!({"age": {"$ne": 7}, "kind": "a"}),
            Box::new(move |d| age(d) != 7 && d["kind"] == "a"),
        ),
        (
            json!({"name": "Bob 9"}),
            Box::new(move |d| name(d) == "Bob 9"),
        ),
        (
            json!({"name": {"$gt": "Carol"}}),
            Box::new(move |d| name(d).as_str() > "Carol"),
        ),
        (
            json!({"name": {"$beginsWith": "Al"}}),
            Box::new(move |d| name(d).starts_with("Al")),
        ),
        (
            json!({"name": {"$regex": "^D.*7$"}}),
            Box::new(move |d| name(d).starts_with('D') && name(d).ends_with('7')),
        ),
        (
            json!({"tags": {"$in": ["amber"]}}),
            Box::new(move |d| tags(d).contains(&"amber".to_string())),
        ),
        (
            json!({"tags": {"$all": ["red", "green"]}}),
            Box::new(move |d| {
                let t = tags(d);
                t.contains(&"red".to_string()) && t.contains(&"green".to_string())
            }),
        ),
        (
            json!({"tags": {"$size": 2}}),
            Box::new(move |d| tags(d).len() == 2),
        ),
        (
            json!({"tags": {"$elemMatch": {"$eq": "blue"}}}),
            Box::new(move |d| tags(d).contains(&"blue".to_string())),
        ),
        (
            json!({"city": {"$exists": false}}),
            Box::new(move |d| !has(d, "city")),
        ),
        (
            json!({"city": {"$exists": true}, "age": {"$mod": [10, 0]}}),
            Box::new(move |d| has(d, "city") && age(d) % 10 == 0),
        ),
        (
            json!({"$or": [{"city": "Lima"}, {"age": {"$lt": 2}}]}),
            Box::new(move |d| d["city"] == "Lima" || age(d) < 2),
        ),
        (
            json!({"city": {"$nin": ["Oslo", "Pune"]}}),
            // A missing field matches no `$nin`, as in CouchDB.
            Box::new(move |d| has(d, "city") && d["city"] != "Oslo" && d["city"] != "Pune"),
        ),
        (
            json!({"$and": [{"kind": "b"}, {"$not": {"age": {"$gt": 3}}}]}),
            Box::new(move |d| d["kind"] == "b" && age(d) <= 3),
        ),
    ];
    for (selector, pred) in &cases {
        let want = expected(&docs, pred);
        let got: BTreeSet<String> = all_ids(&c, "t", selector, json!({})).into_iter().collect();
        assert_eq!(got, want, "selector {selector}");
        let e = explain(&c, "t", json!({"selector": selector}));
        assert_eq!(e["index"]["type"], "text", "{selector}: {e}");
    }
    // The query CouchDB shows, and its sort.
    let e = explain(
        &c,
        "t",
        json!({"selector": {"age": {"$gt": 5}}, "sort": [{"age": "desc"}]}),
    );
    assert_eq!(e["query"], "(age_3anumber:{5 TO *])");
    assert_eq!(e["sort"], json!(["-age_3anumber<number>"]));
    assert_eq!(e["partition"], Value::Null);
    assert!(e.get("mrargs").is_none());
    // Sorted by number and by string (the type from the suffix or the selector).
    let by_age = find(
        &c,
        "t",
        json!({"selector": {"age": {"$gt": 40}}, "sort": [{"age:number": "desc"}],
            "limit": 200}),
    );
    let ages: Vec<u64> = by_age["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["age"].as_u64().unwrap())
        .collect();
    assert_eq!(ages.len(), expected(&docs, |d| age(d) > 40).len());
    assert!(ages.windows(2).all(|w| w[0] >= w[1]), "{ages:?}");
    let sorted = all_ids(
        &c,
        "t",
        &json!({"name": {"$gt": "C"}}),
        json!({"sort": ["name"]}),
    );
    let names: Vec<String> = sorted
        .iter()
        .map(|id| name(&docs[id[1..].parse::<usize>().unwrap()]))
        .collect();
    let mut want = names.clone();
    want.sort();
    assert_eq!(names, want);
    assert_eq!(
        names.len(),
        expected(&docs, |d| name(d).as_str() > "C").len()
    );
    c.post(
        "/t/_find",
        &json!({"selector": {"$text": "fox"}, "sort": ["age"]}).to_string(),
    )
    .error(400, "text_sort_error");
    // Skip, fields, limits (at most 200 a page), execution statistics.
    let all = find(
        &c,
        "t",
        json!({"selector": {"kind": "b"}, "limit": 1000, "execution_stats": true}),
    );
    assert_eq!(ids(&all).len(), 200);
    assert_eq!(all["execution_stats"]["results_returned"], 200);
    let first = find(
        &c,
        "t",
        json!({"selector": {"age": {"$lt": 5}}, "sort": ["_id:string"], "limit": 10}),
    );
    let skipped = find(
        &c,
        "t",
        json!({"selector": {"age": {"$lt": 5}}, "sort": ["_id:string"], "limit": 5,
            "skip": 5, "fields": ["_id", "age"]}),
    );
    assert_eq!(ids(&skipped), ids(&first)[5..].to_vec());
    let doc = &skipped["docs"][0];
    assert_eq!(doc.as_object().unwrap().len(), 2, "{doc}");
    c.post(
        "/t/_find",
        &json!({"selector": {"$text": "fox"}, "bookmark": "not-a-bookmark"}).to_string(),
    )
    .error(400, "invalid_bookmark");
}

#[test]
fn named_fields_default_field_and_partial_filters() {
    let s = TestServer::start();
    let c = s.admin();
    let docs = seed(&c, "t");
    // Only `age`, no `$default`.
    create(
        &c,
        "t",
        json!({"index": {"fields": [{"name": "age", "type": "number"}],
            "default_field": false}, "type": "text", "ddoc": "ages", "name": "ages"}),
    );
    let got = all_ids(&c, "t", &json!({"age": {"$lte": 2}}), json!({}));
    assert_eq!(
        got.into_iter().collect::<BTreeSet<_>>(),
        expected(&docs, |d| d["age"].as_u64().unwrap() <= 2)
    );
    // A field it does not hold: not usable, so `_all_docs` answers with CouchDB's warning.
    let r = find(&c, "t", json!({"selector": {"name": "Bob 1"}}));
    assert_eq!(ids(&r), vec!["p001"]);
    assert!(r["warning"].as_str().unwrap().contains("No matching index"));
    // `$text` needs `$default`.
    c.post(
        "/t/_find",
        &json!({"selector": {"$text": "fox"}}).to_string(),
    )
    .error(400, "no_usable_index");
    // `$default` with the English analyzer: stems match.
    create(
        &c,
        "t",
        json!({"index": {"default_field": {"enabled": true, "analyzer": "english"},
            "partial_filter_selector": {"kind": "a"}},
            "type": "text", "ddoc": "eng", "name": "eng"}),
    );
    let r = find(
        &c,
        "t",
        json!({"selector": {"$text": "jumping"}, "use_index": "eng", "limit": 200}),
    );
    let want = expected(&docs, |d| {
        d["kind"] == "a" && d["bio"].as_str().unwrap().contains("jumps")
    });
    assert!(!want.is_empty());
    assert_eq!(ids(&r).into_iter().collect::<BTreeSet<_>>(), want);
    // An index with a partial filter serves only the queries that name it.
    let e = explain(&c, "t", json!({"selector": {"$text": "jumping"}}));
    assert_ne!(e["index"]["name"], "eng", "{e}");
}

#[test]
fn the_planner_chooses_json_first_and_one_text_index() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, "t");
    c.post(
        "/t/_find",
        &json!({"selector": {"$text": "fox"}}).to_string(),
    )
    .error(400, "no_usable_index");
    create(
        &c,
        "t",
        json!({"index": {}, "type": "text", "ddoc": "a", "name": "a"}),
    );
    create(
        &c,
        "t",
        json!({"index": {"fields": ["age"]}, "ddoc": "j", "name": "j"}),
    );
    let e = explain(&c, "t", json!({"selector": {"age": {"$gt": 3}}}));
    assert_eq!(e["index"]["type"], "json");
    let e = explain(
        &c,
        "t",
        json!({"selector": {"$text": "fox", "age": {"$gt": 3}}}),
    );
    assert_eq!(e["index"]["type"], "text");
    assert_eq!(
        e["query"],
        "(($default:\"fox\") AND (age_3anumber:{3 TO *]))"
    );
    let e = explain(
        &c,
        "t",
        json!({"selector": {"age": {"$gt": 3}}, "use_index": ["a", "a"]}),
    );
    assert_eq!(e["index"]["type"], "text");
    create(
        &c,
        "t",
        json!({"index": {}, "type": "text", "ddoc": "b", "name": "b"}),
    );
    c.post(
        "/t/_find",
        &json!({"selector": {"$text": "fox"}}).to_string(),
    )
    .error(400, "multiple_text_indexes");
    let r = find(
        &c,
        "t",
        json!({"selector": {"$text": "fox"}, "use_index": "b", "limit": 1}),
    );
    assert_eq!(ids(&r).len(), 1);
    // Negated text queries are refused as CouchDB refuses them.
    c.post(
        "/t/_find",
        &json!({"selector": {"$not": {"$text": "fox"}}}).to_string(),
    )
    .error(400, "bad_arg");
}

#[test]
fn text_indexes_follow_updates_and_deletions() {
    let s = TestServer::start();
    let c = s.admin();
    seed(&c, "t");
    create(
        &c,
        "t",
        json!({"index": {}, "type": "text", "ddoc": "a", "name": "a"}),
    );
    let q = json!({"selector": {"$text": "zebra"}});
    assert!(ids(&find(&c, "t", q.clone())).is_empty());
    let doc = c.get("/t/p004").json();
    let mut changed = doc.clone();
    changed["bio"] = json!("a zebra in the garden");
    assert_eq!(c.put("/t/p004", &changed.to_string()).status, 201);
    assert_eq!(ids(&find(&c, "t", q.clone())), vec!["p004"]);
    let r = find(
        &c,
        "t",
        json!({"selector": {"$text": "lazy dog"}, "limit": 200}),
    );
    assert!(!ids(&r).contains(&"p004".to_string()));
    let rev = c.get("/t/p004").json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(c.delete(&format!("/t/p004?rev={rev}")).status, 200);
    assert!(ids(&find(&c, "t", q)).is_empty());
}

#[test]
fn partitioned_text_indexes_answer_one_partition() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/pt?partitioned=true", "").status, 201);
    let docs: Vec<Value> = (0..40)
        .map(|i| {
            json!({"_id": format!("{}:d{i:02}", ["east", "west"][i % 2]),
                "note": format!("shared words {i}"), "n": i})
        })
        .collect();
    let r = c.post("/pt/_bulk_docs", &json!({ "docs": docs }).to_string());
    assert_eq!(r.status, 201, "{}", r.text);
    let r = create(
        &c,
        "pt",
        json!({"index": {}, "type": "text", "ddoc": "p", "name": "p"}),
    );
    assert_eq!(r["result"], "created");
    let r = c.post(
        "/pt/_partition/east/_find",
        &json!({"selector": {"$text": "shared", "n": {"$lt": 10}}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let got: BTreeSet<String> = ids(&r.json()).into_iter().collect();
    let want: BTreeSet<String> = (0..10)
        .step_by(2)
        .map(|i| format!("east:d{i:02}"))
        .collect();
    assert_eq!(got, want);
    // A global query cannot use the partitioned index.
    c.post(
        "/pt/_find",
        &json!({"selector": {"$text": "shared"}}).to_string(),
    )
    .error(400, "no_usable_index");
}
