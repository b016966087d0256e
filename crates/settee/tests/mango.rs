//! Mango over HTTP: JSON indexes created, listed and deleted as CouchDB stores them, `_find`
//! and `_explain` using them, indexes following writes and restarts, bad input refused with
//! CouchDB's answers; and the same requests sent to the reference CouchDB answered alike.

mod common;

use common::{Client, ReferenceCouch, Resp, TestServer, ADMIN};
use serde_json::{json, Value};

/// The documents of the comparisons: some fields missing, arrays, nested objects.
fn people() -> Vec<Value> {
    let names = [
        "alice", "bob", "carol", "dave", "eve", "frank", "grace", "heidi", "ivan", "judy", "kim",
        "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "ursula", "walter", "zoe",
    ];
    (0..20)
        .map(|i| {
            let mut d = json!({"_id": format!("d{i:02}")});
            if i % 7 != 3 {
                d["name"] = json!(names[i]);
            }
            if i % 5 != 4 {
                d["age"] = json!(i * 2);
            }
            if i % 3 == 0 {
                d["tags"] = json!([format!("t{}", i % 4), "x"]);
            }
            if i % 4 != 1 {
                d["nested"] = json!({ "x": i });
            }
            d
        })
        .collect()
}

fn load(c: &Client, db: &str, docs: &[Value]) {
    assert_eq!(c.put(&format!("/{db}"), "").status, 201);
    let r = c.post(
        &format!("/{db}/_bulk_docs"),
        &json!({ "docs": docs }).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
}

fn ids(v: &Value) -> Vec<String> {
    v["docs"]
        .as_array()
        .unwrap_or_else(|| panic!("no docs in {v}"))
        .iter()
        .map(|d| d["_id"].as_str().unwrap().to_string())
        .collect()
}

/// A design document as stored, without its revision.
fn stored(c: &Client, path: &str) -> Value {
    let mut doc = c.get(path).json();
    doc.as_object_mut().unwrap().remove("_rev");
    doc
}

#[test]
fn json_indexes_are_stored_listed_and_deleted_as_couchdb_stores_them() {
    let s = TestServer::start();
    let c = s.admin();
    load(&c, "db", &people());
    let create = |body: Value| c.post("/db/_index", &body.to_string());
    // An unnamed index gets CouchDB's name; its design document is CouchDB's.
    let made = create(json!({"index": {"fields": ["foo"]}})).json();
    let name = "a138cce43c361000dcca40cb1fbb8c6776e04ba0";
    assert_eq!(
        made,
        json!({"result": "created", "id": format!("_design/{name}"), "name": name})
    );
    assert_eq!(
        stored(&c, &format!("/db/_design/{name}")),
        json!({"_id": format!("_design/{name}"), "language": "query", "views": {name: {
            "map": {"fields": {"foo": "asc"}, "partial_filter_selector": {}},
            "reduce": "_count", "options": {"def": {"fields": ["foo"]}}}}})
    );
    assert_eq!(
        create(json!({"index": {"fields": ["foo"]}})).json()["result"],
        "exists"
    );
    // A partial filter is stored normalised in the map, as given in the definition.
    let pfs = json!({"year": {"$gt": 2010}, "type": "x"});
    let r = create(
        json!({"index": {"fields": ["year"], "partial_filter_selector": pfs},
        "ddoc": "pfsdd", "name": "pfs"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let normal = json!({"$and": [{"year": {"$gt": 2010}}, {"type": {"$eq": "x"}}]});
    assert_eq!(
        stored(&c, "/db/_design/pfsdd")["views"]["pfs"],
        json!({"map": {"fields": {"year": "asc"}, "partial_filter_selector": normal},
            "reduce": "_count", "options": {"def": {"fields": ["year"], "partial_filter_selector": pfs}}})
    );
    // Two indexes in one design document; a descending one.
    create(json!({"index": {"fields": ["x1"]}, "ddoc": "twodd", "name": "i1"}));
    create(json!({"index": {"fields": [{"x2": "desc"}]}, "ddoc": "_design/twodd", "name": "i2"}));
    let listed = c.get("/db/_index").json();
    assert_eq!(listed["total_rows"], 5);
    assert_eq!(
        listed["indexes"],
        json!([
            {"ddoc": null, "name": "_all_docs", "type": "special", "def": {"fields": [{"_id": "asc"}]}},
            {"ddoc": format!("_design/{name}"), "name": name, "type": "json", "partitioned": false,
                "def": {"fields": [{"foo": "asc"}]}},
            {"ddoc": "_design/pfsdd", "name": "pfs", "type": "json", "partitioned": false,
                "def": {"fields": [{"year": "asc"}], "partial_filter_selector": normal}},
            {"ddoc": "_design/twodd", "name": "i1", "type": "json", "partitioned": false,
                "def": {"fields": [{"x1": "asc"}]}},
            {"ddoc": "_design/twodd", "name": "i2", "type": "json", "partitioned": false,
                "def": {"fields": [{"x2": "desc"}]}},
        ])
    );
    let page = c.get("/db/_index?skip=3&limit=1").json();
    assert_eq!(
        (
            page["total_rows"].clone(),
            page["indexes"][0]["name"].clone()
        ),
        (json!(5), json!("i1"))
    );
    c.get("/db/_index?limit=0")
        .error(500, "invalid_list_index_params");
    // Deleting one index keeps the design document; its last deletes it.
    assert_eq!(
        c.delete("/db/_index/twodd/json/i1").json(),
        json!({"ok": true})
    );
    assert!(stored(&c, "/db/_design/twodd")["views"].get("i1").is_none());
    c.delete("/db/_index/_design/twodd/json/i2");
    c.get("/db/_design/twodd").error(404, "not_found");
    assert_eq!(
        c.delete("/db/_index/twodd/json/i2").json(),
        json!({"error": "not_found", "reason": "missing"})
    );
    c.get("/db/_index/pfsdd/json/pfs")
        .error(405, "method_not_allowed");
    // Bulk deletion: the named design documents' indexes, latest first.
    let r = c.post(
        "/db/_index/_bulk_delete",
        &json!({"docids": ["pfsdd", "_design/missing"]}).to_string(),
    );
    assert_eq!(
        r.json(),
        json!({"success": [{"id": "_design/pfsdd", "ok": true}],
            "fail": [{"id": "_design/missing", "error": "not_found"}]})
    );
    assert_eq!(c.get("/db/_index").json()["total_rows"], 2);
}

#[test]
fn bad_index_requests_get_couchdbs_answers_and_store_nothing() {
    let s = TestServer::start();
    let c = s.admin();
    load(&c, "db", &[]);
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (
            json!({}),
            400,
            "missing_required_key",
            "Missing required key: index",
        ),
        (
            json!({"index": "foo"}),
            400,
            "invalid_index",
            "JSON indexes must be an object, not: <<102,111,111>>",
        ),
        (
            json!({"index": {}}),
            400,
            "missing_required_key",
            "Missing required key: fields",
        ),
        (
            json!({"index": {"fields": "foo"}}),
            400,
            "invalid_sort_json",
            "Sort must be an array of sort specs, not: <<\"foo\">>",
        ),
        (
            json!({"index": {"fields": [5]}}),
            400,
            "invalid_sort_field",
            "Invalid sort field: 5",
        ),
        (
            json!({"index": {"fields": [{"foo": "up"}]}}),
            400,
            "invalid_sort_field",
            "Invalid sort field: {[{<<\"foo\">>,<<\"up\">>}]}",
        ),
        (
            json!({"index": {"fields": [{"foo": "asc"}, {"bar": "desc"}]}}),
            400,
            "unsupported_mixed_sort",
            "Sorts currently only support a single direction for all fields.",
        ),
        (
            json!({"index": {"fields": ["foo"], "partial_filter_selector": 5}}),
            400,
            "invalid_selector_json",
            "Selector must be a JSON object, not: 5",
        ),
        (
            json!({"index": {"fields": ["foo"], "partial_filter_selector": {"foo": {"$bogus": 1}}}}),
            400,
            "invalid_operator",
            "Invalid operator: $bogus",
        ),
        (
            json!({"index": {"fields": ["foo"]}, "ddoc": 5}),
            400,
            "invalid_string",
            "Invalid string: 5",
        ),
        (
            json!({"index": {"fields": ["foo"]}, "name": ""}),
            400,
            "invalid_empty_string",
            "Index name or ddoc cannot be empty string",
        ),
        (
            json!({"index": {"fields": ["foo"]}, "type": "text"}),
            400,
            "invalid_index_fields_definition",
            "Text Index field definitions must be of the form {\"name\": \"non-empty fieldname\", \"type\": \"boolean,number, or string\"}. Def: [<<\"foo\">>]",
        ),
        (
            json!({"index": {"fields": ["foo"]}, "type": "nouveau"}),
            503,
            "required index service unavailable",
            "nouveau",
        ),
        (
            json!({"index": {"fields": ["foo"]}, "type": "nonsense"}),
            400,
            "invalid_index",
            "Invalid type for index: nonsense",
        ),
        (
            json!({"index": {"fields": ["foo"]}, "bogus": 1}),
            400,
            "invalid_key",
            "Invalid key bogus for this request.",
        ),
        (
            json!({"index": {"fields": ["foo"], "bogus": 1}}),
            400,
            "invalid_key",
            "Invalid key bogus for this request.",
        ),
        (
            json!({"index": {"fields": ["foo"]}, "w": "x"}),
            400,
            "invalid_pos_integer",
            "<<120>> is not an integer greater than zero",
        ),
    ];
    for (body, status, error, reason) in cases {
        let r = c.post("/db/_index", &body.to_string());
        assert_eq!(
            (r.status, r.json()),
            (status, json!({"error": error, "reason": reason})),
            "{body}"
        );
    }
    c.send(
        "POST",
        "/db/_index",
        Some("{}"),
        &[("Content-Type", "text/plain")],
    )
    .error(415, "bad_content_type");
    c.post("/db/_index", "[1]").error(400, "bad_request");
    c.post("/nope/_index", r#"{"index":{"fields":["a"]}}"#)
        .error(404, "not_found");
    assert_eq!(
        c.get("/db/_index").json()["total_rows"],
        1,
        "nothing stored"
    );
    assert_eq!(c.get("/db").json()["doc_count"], 0);
    // Bulk deletion's own refusals.
    for (body, error) in [
        (json!({}), "missing_required_key"),
        (json!({"docids": "x"}), "invalid_bulk_docs"),
        (json!({"docids": [5]}), "invalid_index_name"),
        (json!({"docids": ["a"], "w": 0}), "invalid_pos_integer"),
        (json!({"docids": ["a"], "x": 1}), "invalid_key"),
    ] {
        c.post("/db/_index/_bulk_delete", &body.to_string())
            .error(400, error);
    }
    // A member who is not the database's admin cannot write the design document.
    c.put(
        "/_users/org.couchdb.user:mem",
        r#"{"name":"mem","password":"pw","roles":[],"type":"user"}"#,
    );
    c.put("/db/_security", r#"{"members":{"names":["mem"]}}"#);
    let member = Client::new(&s.url, Some(("mem", "pw")));
    let as_member = member.post("/db/_index", r#"{"index":{"fields":["a"]}}"#);
    let ddoc_put = member.put("/db/_design/x", r#"{"language":"query"}"#);
    assert_eq!(as_member.status, ddoc_put.status, "{}", as_member.text);
    assert!(as_member.status == 401 || as_member.status == 403);
    assert_eq!(
        c.get("/db/_index").json()["total_rows"],
        1,
        "nothing stored"
    );
    // A member may still query.
    assert_eq!(member.post("/db/_find", r#"{"selector":{}}"#).status, 200);
}

#[test]
fn queries_use_json_indexes_and_follow_writes_and_restarts() {
    let mut s = TestServer::start();
    let c = s.admin();
    let docs: Vec<Value> = (0..300)
        .map(|i| json!({"_id": format!("p{i:03}"), "n": i, "group": i % 10}))
        .collect();
    load(&c, "db", &docs);
    let find = |c: &Client, body: Value| {
        let r = c.post("/db/_find", &body.to_string());
        assert_eq!(r.status, 200, "{body}: {}", r.text);
        r.json()
    };
    c.post(
        "/db/_index",
        r#"{"index":{"fields":["group","n"]},"ddoc":"gn","name":"gn"}"#,
    );
    c.post(
        "/db/_index",
        r#"{"index":{"fields":["n"]},"ddoc":"n","name":"n"}"#,
    );
    // Equality on the first field, sorted on the second, descending; read from the index.
    let group = find(
        &c,
        json!({"selector": {"group": 3}, "sort": [{"group": "desc"}, {"n": "desc"}],
        "limit": 4, "execution_stats": true}),
    );
    assert_eq!(ids(&group), ["p293", "p283", "p273", "p263"]);
    assert!(group.get("warning").is_none(), "{group}");
    // As CouchDB: the row after a full page is read and counted too.
    assert_eq!(group["execution_stats"]["total_docs_examined"], 5);
    // Paging through a range by bookmark: every row once, in order.
    let (mut paged, mut bookmark) = (Vec::new(), json!(null));
    loop {
        let page = find(
            &c,
            json!({"selector": {"n": {"$gte": 100, "$lt": 200}}, "sort": ["n"],
            "limit": 7, "bookmark": bookmark}),
        );
        if page["docs"].as_array().unwrap().is_empty() {
            break;
        }
        paged.extend(ids(&page));
        bookmark = page["bookmark"].clone();
    }
    let want: Vec<String> = (100..200).map(|i| format!("p{i:03}")).collect();
    assert_eq!(paged, want);
    // A covering query reads no document.
    let covered = find(
        &c,
        json!({"selector": {"n": {"$gt": 297}}, "fields": ["_id", "n"],
        "execution_stats": true}),
    );
    assert_eq!(
        covered["docs"],
        json!([{"_id": "p298", "n": 298}, {"_id": "p299", "n": 299}])
    );
    assert_eq!(covered["execution_stats"]["total_docs_examined"], 0);
    assert_eq!(covered["execution_stats"]["total_keys_examined"], 2);
    // The planner's choice, as _explain tells it.
    let explained = c
        .post("/db/_explain", r#"{"selector":{"group":2,"n":{"$gt":5}}}"#)
        .json();
    assert_eq!(explained["index"]["name"], "gn");
    assert_eq!(explained["mrargs"]["start_key"], json!([2, 5]));
    // The index follows updates and deletions.
    let rev = c.get("/db/p005").json()["_rev"].clone();
    c.put(
        "/db/p005",
        &json!({"_rev": rev, "n": 1000, "group": 5}).to_string(),
    );
    let rev = c.get("/db/p006").json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    c.delete(&format!("/db/p006?rev={rev}"));
    assert_eq!(
        ids(&find(&c, json!({"selector": {"n": {"$gte": 999}}}))),
        ["p005"]
    );
    assert!(ids(&find(&c, json!({"selector": {"n": {"$in": [5, 6]}}}))).is_empty());
    // Cleanup keeps the index files of query design documents; compaction keeps their rows.
    assert_eq!(c.post("/db/_view_cleanup", "").status, 202);
    assert_eq!(c.post("/db/_compact/n", "").status, 202);
    let tasks = c.get("/_active_tasks").json();
    assert!(tasks.as_array().is_some(), "{tasks}");
    let info = c.get("/db/_design/n/_info").json();
    assert_eq!(info["view_index"]["language"], "query", "{info}");
    assert_eq!(
        ids(&find(
            &c,
            json!({"selector": {"n": {"$gte": 999}}, "update": false})
        )),
        ["p005"]
    );
    // The index is a view: _view reads its rows and its _count.
    let rows = c.get("/db/_design/n/_view/n?reduce=false&limit=2").json();
    assert_eq!(
        rows["rows"][0],
        json!({"id": "p000", "key": [0], "value": null})
    );
    assert_eq!(
        c.get("/db/_design/n/_view/n").json()["rows"][0]["value"],
        299
    );
    // A partial index serves only the queries that name it, with only its documents.
    c.post("/db/_index", r#"{"index":{"fields":["n"],"partial_filter_selector":{"group":0}},"ddoc":"zero","name":"zero"}"#);
    let plain = find(
        &c,
        json!({"selector": {"n": {"$lt": 30}}, "fields": ["_id"], "limit": 99}),
    );
    assert_eq!(ids(&plain).len(), 28, "p005 and p006 changed above");
    let zero = find(
        &c,
        json!({"selector": {"n": {"$lt": 30}}, "use_index": "zero"}),
    );
    assert_eq!(ids(&zero), ["p000", "p010", "p020"]);
    // Indexes survive a restart and keep following writes.
    s.restart();
    let c = s.admin();
    c.put("/db/late", r#"{"n":5000,"group":1}"#);
    assert_eq!(
        ids(&find(
            &c,
            json!({"selector": {"n": {"$gt": 999}}, "sort": ["n"]})
        )),
        ["p005", "late"]
    );
    // update:false answers from the index as it is (here current: the write above was read).
    let stale = find(&c, json!({"selector": {"n": 5000}, "update": false}));
    assert!(ids(&stale).len() <= 1);
}

#[test]
fn find_and_explain_refuse_as_couchdb_refuses() {
    let s = TestServer::start();
    let c = s.admin();
    load(&c, "db", &people());
    c.post(
        "/db/_index",
        r#"{"index":{"fields":["age"]},"ddoc":"age","name":"age"}"#,
    );
    let refusal = |body: Value| {
        let r = c.post("/db/_find", &body.to_string());
        (r.status, r.json())
    };
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"selector": {"name": "bob"}, "use_index": "age", "allow_fallback": false}),
            "invalid_index",
            "_design/age specified by `use_index` could not be found or it is not suitable.",
        ),
        (
            json!({"selector": {"name": "bob"}, "allow_fallback": false}),
            "invalid_index",
            "You must specify an index with the `use_index` parameter.",
        ),
        (
            json!({"selector": {"age": 8}, "use_index": 5}),
            "invalid_index_name",
            "Invalid index name: 5",
        ),
        (
            json!({"selector": {"age": 8}, "allow_fallback": "x"}),
            "invalid_boolean",
            "Invalid boolean value: <<120>>",
        ),
        (
            json!({"selector": {"age": {"$gt": 5}}, "sort": ["age", "name"]}),
            "no_usable_index",
            "No index exists for this sort, try indexing by the sort fields.",
        ),
        (
            json!({"selector": {"age": {"$gt": 5}}, "sort": "age"}),
            "invalid_sort_json",
            "Sort must be an array of sort specs, not: <<\"age\">>",
        ),
        (
            json!({"selector": {"age": {"$gt": 5}}, "fields": "name"}),
            "invalid_fields",
            "Fields must be an array of strings, not: <<110,97,109,101>>",
        ),
        (
            json!({"selector": {"age": {"$gt": 5}}, "fields": [5]}),
            "invalid_field",
            "Invalid JSON for field spec: 5",
        ),
        (
            json!({"selector": {"age": {"$gt": 5}}, "limit": "2"}),
            "invalid_non_neg_integer",
            "<<50>> is not an integer greater than or equal to zero",
        ),
        (
            json!({"selector": {"age": 8}, "r": 0}),
            "invalid_pos_integer",
            "0 is not an integer greater than zero",
        ),
        (
            json!({"selector": {"age": 8}, "bookmark": "nil"}),
            "invalid_bookmark",
            "Invalid bookmark value: \"nil\"",
        ),
        (
            json!({"selector": {"age": {"$foo": 1}}}),
            "invalid_operator",
            "Invalid operator: $foo",
        ),
        (
            json!({"selector": {"age": {"$in": 5}}}),
            "bad_arg",
            "Bad argument for operator $in: 5",
        ),
        (
            json!({"selector": {"a": {"$regex": "("}}}),
            "bad_arg",
            "Bad argument for operator $regex: <<40>>",
        ),
        (
            json!({"selector": {"age": 8}, "partition": "p"}),
            "query_parse_error",
            "`partition` parameter is not supported on this db",
        ),
    ];
    for (body, error, reason) in cases {
        assert_eq!(
            refusal(body.clone()),
            (400, json!({"error": error, "reason": reason})),
            "{body}"
        );
    }
    // A huge limit is a limit like any other.
    let huge = c.post(
        "/db/_find",
        r#"{"selector":{"age":10},"limit":999999999999,"fields":["_id"]}"#,
    );
    assert_eq!(huge.json()["docs"], json!([{"_id": "d05"}]));
    // An impossible sort: _find refuses, _explain shows no index.
    let explained = c
        .post("/db/_explain", r#"{"selector":{"age":5},"sort":["tags"]}"#)
        .json();
    assert_eq!(explained["index"], Value::Null);
    assert!(explained.get("mrargs").is_none());
    c.get("/db/_explain").error(405, "method_not_allowed");
}

/// One exchange with both servers: the status and body of each.
fn both(
    ours: &Client,
    theirs: &Client,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (Resp, Resp) {
    let text = body.map(Value::to_string);
    (
        ours.send(method, path, text.as_deref(), &[]),
        theirs.send(method, path, text.as_deref(), &[]),
    )
}

/// A `_find` answer without what may differ between the servers: bookmarks (opaque) and
/// timings.
fn comparable(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("bookmark");
        if let Some(stats) = o.get_mut("execution_stats").and_then(Value::as_object_mut) {
            stats.remove("execution_time_ms");
        }
    }
    v
}

#[test]
fn mango_answers_match_couchdb() {
    let Some(couch) = ReferenceCouch::start("mango_answers_match_couchdb") else {
        return;
    };
    let s = TestServer::start();
    let (ours, theirs) = (s.admin(), couch.admin());
    for c in [&ours, &theirs] {
        load(c, "f1", &people());
    }
    let indexes = [
        json!({"index": {"fields": ["age"]}, "ddoc": "age", "name": "age"}),
        json!({"index": {"fields": ["age", "name"]}, "ddoc": "agename", "name": "agename"}),
        json!({"index": {"fields": ["name"]}}),
        json!({"index": {"fields": [{"nested.x": "desc"}]}}),
        json!({"index": {"fields": ["age"], "partial_filter_selector": {"tags": {"$exists": true}}},
            "ddoc": "tagged"}),
        json!({"index": {"fields": ["nofield"]}, "ddoc": "nofield", "name": "nofield"}),
    ];
    for body in &indexes {
        let (a, b) = both(&ours, &theirs, "POST", "/f1/_index", Some(body));
        assert_eq!((a.status, a.json()), (b.status, b.json()), "{body}");
        let id = a.json()["id"].as_str().unwrap().to_string();
        let (a, b) = both(&ours, &theirs, "GET", &format!("/f1/{id}"), None);
        assert_eq!(
            a.json(),
            b.json(),
            "the design document of {body}, revision included"
        );
    }
    let (a, b) = both(&ours, &theirs, "GET", "/f1/_index", None);
    assert_eq!(a.json(), b.json());
    let queries = [
        json!({"selector": {"age": {"$gt": 5}}}),
        json!({"selector": {"age": {"$gt": 5}}, "execution_stats": true, "limit": 2}),
        json!({"selector": {"age": {"$gt": 5}}, "sort": [{"age": "desc"}], "limit": 3}),
        json!({"selector": {"age": {"$gt": 5}}, "limit": 2, "skip": 3}),
        json!({"selector": {"name": "bob"}, "sort": ["age"]}),
        json!({"selector": {}, "sort": ["age"], "limit": 4}),
        json!({"selector": {"name": {"$gt": "a"}}, "sort": [{"age": "asc"}], "limit": 2}),
        json!({"selector": {"name": {"$regex": "^[a-c]"}}}),
        json!({"selector": {"nested.x": {"$gt": 5}}}),
        json!({"selector": {"$or": [{"age": 4}, {"name": "zoe"}]}}),
        json!({"selector": {"age": {"$in": [2, 4, 99]}}}),
        json!({"selector": {"age": {"$exists": true}}, "fields": ["_id"], "execution_stats": true}),
        json!({"selector": {"age": {"$gt": 5}, "name": {"$gt": "a"}}, "fields": ["_id", "age", "name"]}),
        json!({"selector": {"age": {"$gt": 25}}, "fields": ["_id", "name", "nested.x", "missing"]}),
        json!({"selector": {"name": "bob"}, "use_index": "age"}),
        json!({"selector": {"age": 8}, "use_index": ["age", "nope"]}),
        json!({"selector": {"age": {"$gt": 1}}, "use_index": "tagged"}),
        json!({"selector": {"_id": {"$gt": "d10"}}, "sort": [{"_id": "desc"}]}),
        json!({"selector": {"age": {"$gt": 5}}, "sort": ["name"]}),
        json!({"selector": {"name": "bob"}, "use_index": "age", "allow_fallback": false}),
        json!({"selector": {"age": {"$foo": 1}}}),
        json!({"selector": {"tags": {"$elemMatch": {"$eq": "t2"}}}}),
        json!({"selector": {"age": {"$gte": 10, "$lte": 20}}, "sort": [{"age": "desc"}]}),
        json!({"selector": {"$not": {"name": "bob"}}}),
        json!({"selector": {"$nor": [{"age": 4}, {"nested.x": 3}]}}),
        json!({"selector": {"$not": {"$or": [{"age": 4}, {"name": "zoe"}]}}}),
        json!({"selector": {"tags": {"$all": []}}}),
        json!({"selector": {"age": {"$not": {"$exists": true}}}}),
    ];
    for q in &queries {
        let (a, b) = both(&ours, &theirs, "POST", "/f1/_find", Some(q));
        assert_eq!(
            (a.status, comparable(a.json())),
            (b.status, comparable(b.json())),
            "_find {q}"
        );
        let (a, b) = both(&ours, &theirs, "POST", "/f1/_explain", Some(q));
        assert_eq!((a.status, a.json()), (b.status, b.json()), "_explain {q}");
    }
    // Selectors that match nothing: CouchDB answers with the (empty) documents alone.
    for q in [
        json!({"selector": {"$or": []}, "execution_stats": true}),
        json!({"selector": {"$and": []}}),
        json!({"selector": {"$nor": []}}),
    ] {
        let (a, b) = both(&ours, &theirs, "POST", "/f1/_find", Some(&q));
        assert_eq!((a.status, a.json()), (b.status, b.json()), "_find {q}");
        assert_eq!(a.json(), json!({"docs": []}));
    }
    // Paging through an index by bookmark gives the same documents on both.
    for c in [&ours, &theirs] {
        let (mut seen, mut bookmark) = (Vec::new(), json!(null));
        loop {
            let body = json!({"selector": {"age": {"$gte": 0}}, "sort": ["age"], "limit": 3,
                "bookmark": bookmark});
            let page = c.post("/f1/_find", &body.to_string()).json();
            if page["docs"].as_array().unwrap().is_empty() {
                break;
            }
            seen.extend(ids(&page));
            bookmark = page["bookmark"].clone();
        }
        let want: Vec<&str> = vec![
            "d00", "d01", "d02", "d03", "d05", "d06", "d07", "d08", "d10", "d11", "d12", "d13",
            "d15", "d16", "d17", "d18",
        ];
        assert_eq!(seen, want);
    }
    // Index design documents replicate both ways and serve queries on arrival.
    let settee_url = s
        .url
        .replacen("http://", &format!("http://{}:{}@", ADMIN.0, ADMIN.1), 1);
    let couch_url = couch.url.replacen("http://", "http://admin:admin@", 1);
    for (source, target, from, to, copy) in [
        (&theirs, &ours, &couch_url, &settee_url, "from-couchdb"),
        (&ours, &theirs, &settee_url, &couch_url, "from-settee"),
    ] {
        let job = json!({"source": format!("{from}/f1"), "target": format!("{to}/{copy}"),
            "create_target": true});
        // The target's replicator pulls.
        let r = target.post("/_replicate", &job.to_string());
        assert_eq!(r.status, 200, "{job}: {}", r.text);
        assert_eq!(
            target.get(&format!("/{copy}/_index")).json(),
            source.get("/f1/_index").json(),
            "{copy}"
        );
        let q = json!({"selector": {"age": {"$gt": 5}, "name": {"$gt": "a"}}, "fields": ["_id"]});
        let mut here = target
            .post(&format!("/{copy}/_explain"), &q.to_string())
            .json();
        let mut there = source.post("/f1/_explain", &q.to_string()).json();
        assert_eq!(here["index"]["name"], "agename", "{copy}");
        here["dbname"] = Value::Null;
        there["dbname"] = Value::Null;
        assert_eq!(here, there, "{copy}");
        let found = target
            .post(&format!("/{copy}/_find"), &q.to_string())
            .json();
        let want = source.post("/f1/_find", &q.to_string()).json();
        assert_eq!(comparable(found), comparable(want), "{copy}");
    }
    // Deleting an index: the same answers, the same design document left behind.
    let (a, b) = both(
        &ours,
        &theirs,
        "DELETE",
        "/f1/_index/agename/json/agename",
        None,
    );
    assert_eq!((a.status, a.json()), (b.status, b.json()));
    let (a, b) = both(&ours, &theirs, "GET", "/f1/_design/agename", None);
    assert_eq!((a.status, a.json()), (b.status, b.json()));
}

#[test]
fn the_planner_weighs_indexes_as_couchdb_does() {
    let Some(couch) = ReferenceCouch::start("the_planner_weighs_indexes_as_couchdb_does") else {
        return;
    };
    let s = TestServer::start();
    let (ours, theirs) = (s.admin(), couch.admin());
    for c in [&ours, &theirs] {
        load(c, "x1", &people());
        for (ddoc, fields) in [
            ("age", json!(["age"])),
            ("agename", json!(["age", "name"])),
            ("name", json!(["name"])),
            ("nameage", json!(["name", "age"])),
        ] {
            let body = json!({"index": {"fields": fields}, "ddoc": ddoc, "name": ddoc});
            assert_eq!(c.post("/x1/_index", &body.to_string()).status, 200);
        }
    }
    for q in [
        json!({"selector": {"name": "bob"}, "sort": ["age"]}),
        json!({"selector": {"age": {"$gt": 5}, "name": {"$exists": true}}}),
        json!({"selector": {"age": 5, "name": "x"}}),
        json!({"selector": {"age": {"$gt": 5}, "name": {"$gt": "a"}}, "sort": ["age"]}),
        json!({"selector": {"age": {"$exists": true}, "name": {"$exists": true}}}),
        json!({"selector": {"name": {"$gt": "a"}}, "sort": ["name"]}),
        json!({"selector": {"age": {"$lt": 10}}, "use_index": "agename"}),
        json!({"selector": {"age": {"$lt": 10}, "name": {"$gt": "b"}}, "use_index": ["name", "name"]}),
        json!({"selector": {"name": {"$beginsWith": "a"}}}),
    ] {
        let (a, b) = both(&ours, &theirs, "POST", "/x1/_explain", Some(&q));
        assert_eq!((a.status, a.json()), (b.status, b.json()), "_explain {q}");
        let (a, b) = both(&ours, &theirs, "POST", "/x1/_find", Some(&q));
        assert_eq!(
            (a.status, comparable(a.json())),
            (b.status, comparable(b.json())),
            "_find {q}"
        );
    }
}

#[test]
fn several_all_docs_queries_in_one_request() {
    let s = TestServer::start();
    let c = s.admin();
    load(
        &c,
        "aq",
        &[
            json!({"_id": "a", "v": 1}),
            json!({"_id": "b", "v": 2}),
            json!({"_id": "c", "v": 3}),
            json!({"_id": "_design/x"}),
            json!({"_id": "_design/y"}),
        ],
    );
    c.put("/aq/_local/l1", r#"{"v":1}"#);
    c.put("/aq/_local/l2", r#"{"v":2}"#);
    let ask = |path: &str, body: Value| {
        let r = c.post(path, &body.to_string());
        assert_eq!(r.status, 200, "{path} {body}: {}", r.text);
        r.json()["results"].clone()
    };
    let rows = |v: &Value| -> Vec<String> {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().or(r["key"].as_str()).unwrap().to_string())
            .collect()
    };
    let all = ask(
        "/aq/_all_docs/queries",
        json!({"queries": [{"keys": ["a", "zz"], "include_docs": true},
            {"startkey": "b"}, {"descending": true, "limit": 2}, {}]}),
    );
    assert_eq!(all.as_array().unwrap().len(), 4);
    assert_eq!(all[0]["offset"], Value::Null);
    assert_eq!(all[0]["rows"][0]["doc"]["v"], 1);
    assert_eq!(
        all[0]["rows"][1],
        json!({"key": "zz", "error": "not_found"})
    );
    assert_eq!(
        (all[1]["total_rows"].clone(), all[1]["offset"].clone()),
        (json!(5), json!(3))
    );
    assert_eq!(rows(&all[1]), ["b", "c"]);
    assert_eq!(rows(&all[2]), ["c", "b"]);
    assert_eq!(rows(&all[3]), ["_design/x", "_design/y", "a", "b", "c"]);
    // The query string gives defaults; each query's own members win.
    let defaults = ask(
        "/aq/_all_docs/queries?limit=1",
        json!({"queries": [{}, {"limit": 2}]}),
    );
    assert_eq!((rows(&defaults[0]).len(), rows(&defaults[1]).len()), (1, 2));
    let design = ask(
        "/aq/_design_docs/queries",
        json!({"queries": [{"keys": ["_design/x", "_design/zz", "a"]}, {"limit": 1, "skip": 1}]}),
    );
    assert_eq!(
        rows(&design[0]),
        ["_design/x", "_design/zz"],
        "non-design keys are left out"
    );
    assert_eq!(rows(&design[1]), ["_design/y"]);
    assert_eq!(design[1]["total_rows"], 2);
    let local = ask(
        "/aq/_local_docs/queries",
        json!({"queries": [{"include_docs": true}, {"limit": 1, "skip": 1}]}),
    );
    assert_eq!(local[0]["total_rows"], Value::Null);
    assert_eq!(local[0]["rows"][1]["doc"]["v"], 2);
    assert_eq!(rows(&local[1]), ["_local/l2"]);
    assert_eq!(
        ask("/aq/_all_docs/queries", json!({"queries": []})),
        json!([])
    );
    // Refusals, before any query is answered.
    for (body, error, reason) in [
        (
            json!({}),
            "bad_request",
            "POST body must include `queries` parameter.",
        ),
        (
            json!({"queries": {"keys": ["a"]}}),
            "bad_request",
            "`queries` member must be an array.",
        ),
        (
            json!({"queries": [{"keys": "a"}]}),
            "query_parse_error",
            "`keys` must be an array of strings.",
        ),
    ] {
        assert_eq!(
            c.post("/aq/_all_docs/queries", &body.to_string()).json(),
            json!({"error": error, "reason": reason})
        );
    }
    c.post("/aq/_all_docs/queries", r#"{"queries":[{"limit":"x"}]}"#)
        .error(400, "query_parse_error");
    c.get("/aq/_all_docs/queries")
        .error(405, "method_not_allowed");
}

#[test]
fn deep_documents_odd_names_and_other_views_do_not_break_indexes() {
    let s = TestServer::start();
    let c = s.admin();
    load(&c, "db", &[]);
    // A document nested thousands of levels deep, indexed and found (serde's own limit is
    // 128 levels; the server's threads must not overflow either).
    let mut deep = json!(1);
    for _ in 0..3000 {
        deep = json!({ "a": deep });
    }
    c.put("/db/deep", &json!({"a": deep, "n": 1}).to_string());
    c.put("/db/flat", r#"{"a":2,"n":2}"#);
    c.post(
        "/db/_index",
        r#"{"index":{"fields":["a"]},"ddoc":"a","name":"lib"}"#,
    );
    let r = c.post(
        "/db/_find",
        r#"{"selector":{"a":{"$exists":true}},"fields":["_id"],"sort":["a"]}"#,
    );
    assert_eq!(r.status, 200, "{}", &r.text[..r.text.len().min(300)]);
    assert_eq!(
        ids(&r.json()),
        ["flat", "deep"],
        "an index named lib is an index"
    );
    let page = c
        .post(
            "/db/_find",
            r#"{"selector":{"a":{"$exists":true}},"limit":1,"sort":[{"a":"desc"}],"fields":["_id"]}"#,
        )
        .json();
    let next = json!({"selector": {"a": {"$exists": true}}, "limit": 1, "sort": [{"a": "desc"}],
        "bookmark": page["bookmark"], "fields": ["_id"]});
    assert_eq!(
        ids(&c.post("/db/_find", &next.to_string()).json()),
        ["flat"],
        "a deep key's bookmark"
    );
    assert_eq!(c.get("/").status, 200, "the server is up");
    // `_id` in an index: selectors compare ids byte by byte, the index collates them.
    c.put("/db/A", r#"{"type":"x"}"#);
    c.put("/db/b", r#"{"type":"x"}"#);
    c.post(
        "/db/_index",
        r#"{"index":{"fields":["type","_id"]},"ddoc":"tid","name":"tid"}"#,
    );
    let found = c
        .post(
            "/db/_find",
            r#"{"selector":{"type":"x","_id":{"$gt":"B"}},"use_index":"tid"}"#,
        )
        .json();
    assert_eq!(ids(&found), ["b"], "{found}");
    let found = c
        .post(
            "/db/_find",
            r#"{"selector":{"type":"x","_id":{"$lt":"B"}},"use_index":"tid"}"#,
        )
        .json();
    assert_eq!(ids(&found), ["A"], "{found}");
    // Deleting "an index" that is a JavaScript view is refused; the view stays.
    c.put(
        "/db/_design/js",
        r#"{"views":{"v":{"map":"function(doc){ emit(doc._id) }"}}}"#,
    );
    c.delete("/db/_index/js/json/v").error(404, "not_found");
    assert!(c.get("/db/_design/js").json()["views"]["v"].is_object());
    // A query design document asking for raw collation is read in CouchDB's order anyway.
    c.put("/db/_design/raw", r#"{"language":"query","views":{"r":{"map":{"fields":{"n":"asc"}},"reduce":"_count","options":{"collation":"raw","def":{"fields":["n"]}}}}}"#);
    let r = c.post(
        "/db/_find",
        r#"{"selector":{"n":{"$gt":0}},"use_index":"raw","fields":["_id"]}"#,
    );
    assert_eq!(ids(&r.json()), ["deep", "flat"], "{}", r.text);
}
