//! Map/reduce views over HTTP, against the real binary, answered as CouchDB 3 answers them:
//! every query parameter with exact rows, totals and offsets; the builtin and JavaScript
//! reduces and grouping; key collation (ICU and raw); linked documents in `include_docs`;
//! multi-key and multi-query requests; `_info`, view compaction and `_view_cleanup`;
//! CouchDB's exact errors; what map functions see; incremental updates (edits, deletions,
//! conflicts, new map code); a runaway map function cut off by `os_process_timeout`; and
//! twenty clients waiting on one index build.

mod common;

/// Each view test runs on a server of its own; all of them run again, one after another, on
/// one server whose JavaScript engines first met functions that failed in every way (issue
/// 26: such failures left the engines broken for later views and design documents).
macro_rules! view_tests {
    ($($name:ident),* $(,)?) => {
        mod own_server {
            $(#[test]
            fn $name() {
                super::$name(&mut super::TestServer::start());
            })*
        }

        /// Every view test, by name.
        const VIEW_TESTS: &[(&str, fn(&mut TestServer))] = &[$((stringify!($name), $name)),*];
    };
}

view_tests!(
    map_rows_ranges_and_paging,
    keys_doc_ids_and_include_docs,
    builtin_and_javascript_reduces,
    group_levels_over_array_keys,
    sum_of_values_that_are_not_numbers,
    multi_query_requests,
    post_bodies_carry_query_options,
    query_errors_are_couchdbs,
    missing_databases_design_docs_and_views,
    key_collation_unicode_and_raw,
    map_functions_see_ids_revs_and_options,
    require_from_views_lib_and_map_functions_that_throw,
    linked_documents_in_include_docs,
    conflicts_reach_map_functions_and_a_new_winner_changes_the_row,
    incremental_updates_new_map_code_and_cleanup,
    stale_and_update_modes,
    design_info_update_seq_and_shared_signatures,
    view_compaction,
    runaway_map_function_times_out_and_the_server_keeps_serving,
    twenty_clients_share_one_index_build,
    indexing_shows_in_active_tasks_survives_restarts_and_compacts_while_queried,
);

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::{Client, TestServer};
use serde_json::{json, Value};

/// Database `db`'s documents: id, `n`, `tag`, `date`.
const DOCS: [(&str, i64, &str, [i64; 3]); 5] = [
    ("a", 1, "x", [2023, 12, 31]),
    ("b", 2, "y", [2024, 1, 1]),
    ("c", 3, "x", [2024, 1, 15]),
    ("d", 4, "y", [2024, 2, 1]),
    ("e", 5, "x", [2024, 2, 1]),
];

const ALL: [&str; 5] = ["a", "b", "c", "d", "e"];

/// CouchDB's reason when `_sum` meets a value it cannot add.
const SUM_ERROR: &str = "The _sum function requires that map values be numbers, arrays of numbers, or objects. Objects cannot be mixed with other data structures. Objects can be arbitrarily nested, provided that the values for all fields are themselves numbers, arrays of numbers, or objects.";

const NO_ROWS: &str =
    "No rows can match your key range, reverse your start_key and end_key or set descending=true";

fn map_rows_ranges_and_paging(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let v = "/db/_design/d/_view/by_n";
    let r = c.get(v);
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.text
            .starts_with("{\"total_rows\":5,\"offset\":0,\"rows\":[\r\n"),
        "{}",
        r.text
    );
    assert_eq!(
        r.json(),
        json!({"total_rows": 5, "offset": 0, "rows": by_n(&ALL)})
    );
    let cases: Vec<(&str, u64, Vec<&str>)> = vec![
        ("key=3", 2, vec!["c"]),
        ("key=2.5", 2, vec![]),
        ("startkey=2&endkey=4", 1, vec!["b", "c", "d"]),
        (
            "start_key=2&end_key=4&inclusive_end=false",
            1,
            vec!["b", "c"],
        ),
        ("startkey=2&endkey=2", 1, vec!["b"]),
        ("startkey=3", 2, vec!["c", "d", "e"]),
        ("startkey=9", 5, vec![]),
        ("endkey=2", 0, vec!["a", "b"]),
        ("endkey=2&inclusive_end=true", 0, vec!["a", "b"]),
        ("endkey=2&inclusive_end=false", 0, vec!["a"]),
        ("descending=false", 0, ALL.to_vec()),
        ("descending=true", 0, vec!["e", "d", "c", "b", "a"]),
        ("descending=true&key=3", 2, vec!["c"]),
        (
            "descending=true&startkey=4&endkey=2",
            1,
            vec!["d", "c", "b"],
        ),
        (
            "descending=true&startkey=4&endkey=2&inclusive_end=false",
            1,
            vec!["d", "c"],
        ),
        ("descending=true&endkey=4", 0, vec!["e", "d"]),
        ("limit=2", 0, vec!["a", "b"]),
        ("limit=0", 0, vec![]),
        ("limit=99", 0, ALL.to_vec()),
        ("skip=1&limit=2", 1, vec!["b", "c"]),
        ("skip=2&startkey=2", 3, vec!["d", "e"]),
        ("descending=true&skip=1&limit=2", 1, vec!["d", "c"]),
        // In the order given, a later option winning, as CouchDB reads them.
        ("key=4&startkey=2", 1, vec!["b", "c", "d"]),
        ("startkey=2&key=4", 3, vec!["d"]),
        ("end_key=2&endkey=3", 0, vec!["a", "b", "c"]),
        ("key=3&inclusive_end=false", 2, vec![]),
    ];
    for (params, offset, ids) in cases {
        page(&c, &format!("{v}?{params}"), 5, offset, by_n(&ids));
    }
}

fn keys_doc_ids_and_include_docs(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let v = "/db/_design/d/_view/by_n";
    // keys: rows in the order of the keys, keys without rows give nothing.
    let got = ok(&c, &format!("{v}?keys={}", j(&json!([4, 1, 9]))));
    assert_eq!(
        (got["total_rows"].clone(), got["rows"].clone()),
        (json!(5), by_n(&["d", "a"]))
    );
    assert_eq!(
        post_ok(&c, v, json!({"keys": [4, 1, 9]}))["rows"],
        by_n(&["d", "a"])
    );
    assert_eq!(
        post_ok(&c, v, json!({"keys": [2, 2]}))["rows"],
        by_n(&["b", "b"]),
        "a key asked twice is answered twice"
    );
    assert_eq!(post_ok(&c, v, json!({"keys": []}))["rows"], json!([]));
    assert_eq!(
        post_ok(
            &c,
            &format!("{v}?skip=1&limit=1"),
            json!({"keys": [5, 1, 3]})
        )["rows"],
        by_n(&["a"]),
        "skip and limit run across all keys"
    );
    // sorted=false may answer in any order, but with the same rows.
    let mut unsorted = ids_of(&ok(
        &c,
        &format!("{v}?keys={}&sorted=false", j(&json!([3, 1]))),
    ));
    unsorted.sort();
    assert_eq!(unsorted, ["a", "c"]);
    assert_eq!(ok(&c, &format!("{v}?sorted=true"))["rows"], by_n(&ALL));
    c.get(&format!("{v}?sorted=maybe"))
        .error(400, "query_parse_error");

    // include_docs: the emitting document, as GET returns it.
    let (a, b) = (ok(&c, "/db/a"), ok(&c, "/db/b"));
    assert_eq!(
        ok(&c, &format!("{v}?key=2&include_docs=true")),
        json!({"total_rows": 5, "offset": 1, "rows": [{"id": "b", "key": 2, "value": "y", "doc": b}]})
    );
    assert_eq!(
        post_ok(&c, &format!("{v}?include_docs=true"), json!({"keys": [1]}))["rows"],
        json!([{"id": "a", "key": 1, "value": "x", "doc": a}])
    );
    assert_eq!(
        ok(&c, &format!("{v}?include_docs=false&limit=1"))["rows"],
        by_n(&["a"])
    );

    // Document ids break ties between equal keys and bound ranges within a key.
    let t = "/db/_design/d/_view/by_tag";
    page(&c, t, 5, 0, by_tag(&["a", "c", "e", "b", "d"]));
    let cases: Vec<(&str, u64, Vec<&str>)> = vec![
        ("key=%22x%22", 0, vec!["a", "c", "e"]),
        ("key=%22y%22&descending=true", 0, vec!["d", "b"]),
        (
            "startkey=%22x%22&startkey_docid=c",
            1,
            vec!["c", "e", "b", "d"],
        ),
        (
            "start_key=%22x%22&start_key_doc_id=c&limit=2",
            1,
            vec!["c", "e"],
        ),
        ("endkey=%22y%22&endkey_docid=b", 0, vec!["a", "c", "e", "b"]),
        (
            "end_key=%22y%22&end_key_doc_id=b&inclusive_end=false",
            0,
            vec!["a", "c", "e"],
        ),
        (
            "startkey=%22x%22&startkey_docid=c&endkey=%22y%22&endkey_docid=b",
            1,
            vec!["c", "e", "b"],
        ),
        (
            "descending=true&startkey=%22x%22&startkey_docid=c",
            3,
            vec!["c", "a"],
        ),
        (
            "descending=true&startkey=%22y%22&startkey_docid=b&endkey=%22x%22&endkey_docid=c",
            1,
            vec!["b", "e", "c"],
        ),
    ];
    for (params, offset, ids) in cases {
        page(&c, &format!("{t}?{params}"), 5, offset, by_tag(&ids));
    }
}

fn builtin_and_javascript_reduces(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let q = |view: &str, params: &str| ok(&c, &view_url("db", "d", view, params));
    let rows = |v: Value| json!({"rows": v});
    assert_eq!(q("sum", ""), rows(json!([{"key": null, "value": 15}])));
    assert_eq!(
        q("sum", "reduce=true"),
        rows(json!([{"key": null, "value": 15}]))
    );
    assert_eq!(
        q("sum", "group_level=0"),
        rows(json!([{"key": null, "value": 15}]))
    );
    assert_eq!(
        q("sum", "group=false"),
        rows(json!([{"key": null, "value": 15}]))
    );
    assert_eq!(
        q("sum", "group=true"),
        rows(json!([{"key": "x", "value": 9}, {"key": "y", "value": 6}]))
    );
    assert_eq!(
        q("sum", "group=true&descending=true"),
        rows(json!([{"key": "y", "value": 6}, {"key": "x", "value": 9}]))
    );
    assert_eq!(
        q("sum", "group=true&limit=1"),
        rows(json!([{"key": "x", "value": 9}]))
    );
    assert_eq!(
        q("sum", "group=true&skip=1"),
        rows(json!([{"key": "y", "value": 6}]))
    );
    assert_eq!(
        q("sum", "key=%22y%22"),
        rows(json!([{"key": null, "value": 6}]))
    );
    assert_eq!(
        q("sum", "key=%22y%22&group=true"),
        rows(json!([{"key": "y", "value": 6}]))
    );
    assert_eq!(
        q("sum", "startkey=%22y%22"),
        rows(json!([{"key": null, "value": 6}]))
    );
    assert_eq!(
        q("sum", "startkey=%22z%22"),
        rows(json!([])),
        "an empty range has no rows"
    );
    assert_eq!(
        q("sum", "endkey=%22x%22&inclusive_end=false"),
        rows(json!([]))
    );
    // reduce=false turns a reduce view into its map rows.
    assert_eq!(
        q("sum", "reduce=false"),
        json!({"total_rows": 5, "offset": 0, "rows": by_tag(&["a", "c", "e", "b", "d"])})
    );
    assert_eq!(
        q("sum", "reduce=false&include_docs=true&limit=1")["rows"][0]["doc"],
        ok(&c, "/db/a")
    );
    // keys on a grouped reduce: one row per key that has rows, in the keys' order.
    assert_eq!(
        post_ok(
            &c,
            "/db/_design/d/_view/sum?group=true",
            json!({"keys": ["y", "nope", "x"]})
        ),
        rows(json!([{"key": "y", "value": 6}, {"key": "x", "value": 9}]))
    );
    assert_eq!(
        q("count", &format!("group=true&keys={}", j(&json!(["x"])))),
        rows(json!([{"key": "x", "value": 3}]))
    );

    assert_eq!(q("count", ""), rows(json!([{"key": null, "value": 5}])));
    assert_eq!(
        q("count", "group=true"),
        rows(json!([{"key": "x", "value": 3}, {"key": "y", "value": 2}]))
    );
    assert_eq!(
        q("stats", ""),
        rows(
            json!([{"key": null, "value": {"sum": 15, "count": 5, "min": 1, "max": 5, "sumsqr": 55}}])
        )
    );
    assert_eq!(
        q("stats", "group=true"),
        rows(json!([
            {"key": "x", "value": {"sum": 9, "count": 3, "min": 1, "max": 5, "sumsqr": 35}},
            {"key": "y", "value": {"sum": 6, "count": 2, "min": 2, "max": 4, "sumsqr": 20}}
        ]))
    );
    assert_eq!(q("distinct", ""), rows(json!([{"key": null, "value": 2}])));
    assert_eq!(
        q("distinct", "group=true"),
        rows(json!([{"key": "x", "value": 1}, {"key": "y", "value": 1}]))
    );
    assert_eq!(
        q("max", ""),
        rows(json!([{"key": null, "value": 5}])),
        "a JavaScript reduce"
    );
    assert_eq!(
        q("max", "group=true"),
        rows(json!([{"key": "x", "value": 5}, {"key": "y", "value": 4}]))
    );
    assert_eq!(
        q("max", "startkey=%22y%22"),
        rows(json!([{"key": null, "value": 4}]))
    );
    assert_eq!(
        q("vec", ""),
        rows(json!([{"key": null, "value": [15, 5]}])),
        "_sum adds arrays element-wise"
    );
    assert_eq!(
        q("vec", "group=true"),
        rows(json!([{"key": "x", "value": [9, 3]}, {"key": "y", "value": [6, 2]}]))
    );
}

fn group_levels_over_array_keys(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let q = |params: &str| ok(&c, &view_url("db", "d", "dates", params))["rows"].clone();
    let exact = json!([
        {"key": [2023, 12, 31], "value": 1},
        {"key": [2024, 1, 1], "value": 2},
        {"key": [2024, 1, 15], "value": 3},
        {"key": [2024, 2, 1], "value": 9}
    ]);
    assert_eq!(q(""), json!([{"key": null, "value": 15}]));
    assert_eq!(q("group_level=0"), json!([{"key": null, "value": 15}]));
    assert_eq!(
        q("group_level=1"),
        json!([{"key": [2023], "value": 1}, {"key": [2024], "value": 14}])
    );
    assert_eq!(
        q("group_level=2"),
        json!([{"key": [2023, 12], "value": 1}, {"key": [2024, 1], "value": 5}, {"key": [2024, 2], "value": 9}])
    );
    assert_eq!(q("group=true"), exact);
    assert_eq!(q("group_level=3"), exact);
    assert_eq!(
        q("group_level=9"),
        exact,
        "a level past the keys' length groups by whole keys"
    );
    assert_eq!(q("group=true&limit=2"), json!([exact[0], exact[1]]));
    assert_eq!(
        q("group_level=1&descending=true"),
        json!([{"key": [2024], "value": 14}, {"key": [2023], "value": 1}])
    );
    assert_eq!(
        q("group_level=2&skip=1&limit=1"),
        json!([{"key": [2024, 1], "value": 5}])
    );
    let range = format!(
        "group_level=2&startkey={}&endkey={}",
        j(&json!([2024])),
        j(&json!([2024, 1, {}]))
    );
    assert_eq!(q(&range), json!([{"key": [2024, 1], "value": 5}]));
    assert_eq!(
        q(&format!("startkey={}", j(&json!([2024, 2])))),
        json!([{"key": null, "value": 9}])
    );
    let keys = format!(
        "group=true&keys={}",
        j(&json!([[2024, 2, 1], [2023, 12, 31]]))
    );
    assert_eq!(
        q(&keys),
        json!([{"key": [2024, 2, 1], "value": 9}, {"key": [2023, 12, 31], "value": 1}])
    );
}

fn sum_of_values_that_are_not_numbers(s: &mut TestServer) {
    let c = s.admin();
    c.put("/sums", "");
    bulk(
        &c,
        "sums",
        json!([{"_id": "a", "v": 1}, {"_id": "b", "v": "two"}, {"_id": "c", "v": 3}]),
    );
    put_ddoc(
        &c,
        "sums",
        "s",
        json!({"views": {
            "sum": {"map": "function(doc){ emit(doc._id, doc.v); }", "reduce": "_sum"},
            "obj": {"map": "function(doc){ if (typeof doc.v === 'number') emit(doc._id, {total: doc.v, parts: {one: 1}}); }", "reduce": "_sum"}
        }}),
    );
    let failed = json!({"error": "builtin_reduce_error", "reason": SUM_ERROR, "caused_by": "two"});
    // The error takes the value's place in a 200 answer.
    let r = c.get("/sums/_design/s/_view/sum");
    assert_eq!(
        (r.status, r.json()),
        (200, json!({"rows": [{"key": null, "value": failed}]}))
    );
    assert_eq!(
        ok(&c, "/sums/_design/s/_view/sum?group=true"),
        json!({"rows": [{"key": "a", "value": 1}, {"key": "b", "value": failed}, {"key": "c", "value": 3}]})
    );
    assert_eq!(
        ok(&c, "/sums/_design/s/_view/sum?startkey=%22c%22"),
        json!({"rows": [{"key": null, "value": 3}]}),
        "ranges without the bad value still add up"
    );
    page(
        &c,
        "/sums/_design/s/_view/sum?reduce=false",
        3,
        0,
        json!([
            row("a", json!("a"), json!(1)),
            row("b", json!("b"), json!("two")),
            row("c", json!("c"), json!(3))
        ]),
    );
    assert_eq!(
        ok(&c, "/sums/_design/s/_view/obj"),
        json!({"rows": [{"key": null, "value": {"parts": {"one": 2}, "total": 4}}]}),
        "_sum adds objects member-wise"
    );
}

fn multi_query_requests(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let got = post_ok(
        &c,
        "/db/_design/d/_view/by_n/queries",
        json!({"queries": [
            {"keys": [2, 3]},
            {"startkey": 4, "limit": 1},
            {"descending": true, "skip": 1, "limit": 2},
            {"key": 1, "include_docs": true}
        ]}),
    );
    let results = got["results"].as_array().expect("results");
    assert_eq!(results.len(), 4, "{got}");
    assert_eq!(
        (results[0]["total_rows"].clone(), results[0]["rows"].clone()),
        (json!(5), by_n(&["b", "c"]))
    );
    assert_eq!(
        results[1],
        json!({"total_rows": 5, "offset": 3, "rows": by_n(&["d"])})
    );
    assert_eq!(
        results[2],
        json!({"total_rows": 5, "offset": 1, "rows": by_n(&["d", "c"])})
    );
    assert_eq!(
        results[3],
        json!({"total_rows": 5, "offset": 0, "rows": [{"id": "a", "key": 1, "value": "x", "doc": ok(&c, "/db/a")}]})
    );
    // A reduce view: reduced, grouped, map and keyed answers side by side.
    let got = post_ok(
        &c,
        "/db/_design/d/_view/sum/queries",
        json!({"queries": [{}, {"group": true}, {"reduce": false, "limit": 1}, {"keys": ["y"], "group": true}]}),
    );
    assert_eq!(
        got,
        json!({"results": [
            {"rows": [{"key": null, "value": 15}]},
            {"rows": [{"key": "x", "value": 9}, {"key": "y", "value": 6}]},
            {"total_rows": 5, "offset": 0, "rows": by_tag(&["a"])},
            {"rows": [{"key": "y", "value": 6}]}
        ]})
    );
    // URL parameters are defaults for every query.
    let got = post_ok(
        &c,
        "/db/_design/d/_view/by_n/queries?limit=1",
        json!({"queries": [{}, {"startkey": 3}, {"limit": 2}]}),
    );
    let rows: Vec<Value> = got["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["rows"].clone())
        .collect();
    assert_eq!(rows, [by_n(&["a"]), by_n(&["c"]), by_n(&["a", "b"])]);
    // CouchDB 3.5 takes `queries` only at `/queries`.
    let r = c.post(
        "/db/_design/d/_view/by_n",
        &json!({"queries": [{"key": 2}]}).to_string(),
    );
    assert_eq!(
        r.error(400, "bad_request").json()["reason"],
        "The `queries` parameter is no longer supported at this endpoint"
    );
    assert_eq!(
        post_ok(
            &c,
            "/db/_design/d/_view/by_n/queries",
            json!({"queries": []})
        ),
        json!({"results": []})
    );
    // One bad query fails the request.
    let r = c.post(
        "/db/_design/d/_view/by_n/queries",
        &json!({"queries": [{}, {"reduce": true}]}).to_string(),
    );
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            json!({"error": "query_parse_error", "reason": "Reduce is invalid for map-only views."})
        )
    );
    c.post("/db/_design/d/_view/by_n/queries", "{}")
        .error(400, "bad_request");
    c.post(
        "/db/_design/d/_view/by_n",
        &json!({"queries": [], "keys": []}).to_string(),
    )
    .error(400, "bad_request");
}

/// A POST body's members are query options, as CouchDB reads them (issue 27: only `keys` was
/// read, and a body without it refused): the query string wins where both give one, and one
/// key in `keys` is read as `key`.
fn post_bodies_carry_query_options(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let v = |name: &str, query: &str| format!("/db/_design/d/_view/{name}{query}");
    assert_eq!(
        post_ok(&c, &v("by_n", ""), json!({"start_key": 2, "end_key": 3})),
        json!({"total_rows": 5, "offset": 1, "rows": by_n(&["b", "c"])})
    );
    assert_eq!(
        post_ok(&c, &v("sum", ""), json!({"keys": ["y"], "reduce": false}))["rows"],
        json!([
            row("b", json!("y"), json!(2)),
            row("d", json!("y"), json!(4))
        ])
    );
    assert_eq!(
        post_ok(&c, &v("sum", ""), json!({"group": true})),
        json!({"rows": [{"key": "x", "value": 9}, {"key": "y", "value": 6}]})
    );
    assert_eq!(
        post_ok(&c, &v("sum", ""), json!({"keys": ["y"]})),
        json!({"rows": [{"key": null, "value": 6}]}),
        "one key reduces that key"
    );
    assert_eq!(
        post_ok(
            &c,
            &v("sum", ""),
            json!({"keys": ["y", "x"], "group": true, "skip": 1})
        ),
        json!({"rows": [{"key": "x", "value": 9}]})
    );
    // The query string wins.
    assert_eq!(
        post_ok(&c, &v("by_n", "?limit=1"), json!({"limit": 3}))["rows"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        post_ok(&c, &v("sum", "?reduce=true"), json!({"reduce": false})),
        json!({"rows": [{"key": null, "value": 15}]})
    );
    assert_eq!(
        post_ok(
            &c,
            &v("by_n", "?startkey=3"),
            json!({"start_key": 2, "end_key": 3})
        )["rows"],
        json!(by_n(&["c"]))
    );
    // `?keys=[k]` is `key` too.
    assert_eq!(
        ok(&c, &v("sum", &format!("?keys={}", j(&json!(["x"]))))),
        json!({"rows": [{"key": null, "value": 9}]})
    );
}

fn query_errors_are_couchdbs(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let m = "/db/_design/d/_view/by_n";
    let r = "/db/_design/d/_view/sum";
    // One key in `keys` is read as `key` (as CouchDB reads a view query), so these use two.
    let one = j(&json!([1, 2]));
    let incompatible = "`keys` is incompatible with `key`, `start_key` and `end_key`";
    let mut cases: Vec<(String, &str)> = vec![
        (format!("{m}?reduce=true"), "Reduce is invalid for map-only views."),
        (format!("{m}?group=true"), "Invalid use of grouping on a map view."),
        (format!("{m}?group_level=1"), "Invalid use of grouping on a map view."),
        (format!("{r}?reduce=false&group=true"), "Invalid use of grouping on a map view."),
        (format!("{r}?include_docs=true"), "`include_docs` is invalid for reduce"),
        (format!("{r}?conflicts=true"), "`conflicts` is invalid for reduce views."),
        (format!("{r}?keys={}", j(&json!(["x", "y"]))), "Multi-key fetches for reduce views must use `group=true`"),
        (format!("{m}?keys={one}&key=1"), incompatible),
        (format!("{m}?keys={one}&start_key=1"), incompatible),
        (format!("{m}?keys={one}&endkey=1"), incompatible),
        (format!("{m}?startkey=5&endkey=1"), NO_ROWS),
        (format!("{m}?startkey=1&endkey=5&descending=true"), "No rows can match your key range, reverse your start_key and end_key or set descending=false"),
        (format!("{m}?stale=bogus"), "Invalid value for `stale`."),
        (format!("{m}?update=bogus"), "Invalid value for `update`."),
        (format!("{m}?limit=abc"), "Invalid value for integer: \"abc\""),
        (format!("{m}?skip=x1"), "Invalid value for integer: \"x1\""),
        (format!("{m}?limit=-1"), "Invalid value for positive integer: \"-1\""),
        (format!("{m}?skip=-1"), "Invalid value for positive integer: \"-1\""),
        (format!("{r}?group_level=-1"), "Invalid value for positive integer: \"-1\""),
        (format!("{r}?group=false&group_level=1"), "Can't specify group=false and group_level>0 at the same time"),
    ];
    for p in [
        "descending",
        "inclusive_end",
        "include_docs",
        "reduce",
        "group",
        "update_seq",
        "conflicts",
    ] {
        cases.push((format!("{m}?{p}=yes"), "Invalid boolean parameter: \"yes\""));
    }
    for (path, reason) in &cases {
        bad_query(&c, path, reason);
    }
    // The same checks apply to keys in a POST body.
    let got = c.post(r, &json!({"keys": ["x", "y"]}).to_string());
    assert_eq!(
        (got.status, got.json()),
        (
            400,
            json!({"error": "query_parse_error", "reason": "Multi-key fetches for reduce views must use `group=true`"})
        )
    );
    let got = c.post(&format!("{m}?key=1"), &json!({"keys": [1, 2]}).to_string());
    assert_eq!(
        (got.status, got.json()),
        (
            400,
            json!({"error": "query_parse_error", "reason": incompatible})
        )
    );
    c.post(m, r#"{"keys":"x"}"#).error(400, "bad_request");
    assert_eq!(
        post_ok(&c, m, json!({})),
        ok(&c, m),
        "a POST without options is a GET"
    );
    c.get(&format!("{m}?startkey=notjson"))
        .error(400, "bad_request");
    // Nothing was wrong with the view itself.
    page(&c, m, 5, 0, by_n(&ALL));
}

fn missing_databases_design_docs_and_views(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let missing = json!({"error": "not_found", "reason": "missing"});
    for path in ["/db/_design/nope/_view/by_n", "/db/_design/nope/_info"] {
        let r = c.get(path);
        assert_eq!((r.status, r.json()), (404, missing.clone()), "{path}");
    }
    let r = c.post("/db/_design/nope/_view/by_n", r#"{"keys":[1]}"#);
    assert_eq!((r.status, r.json()), (404, missing.clone()));
    let r = c.post("/db/_compact/nope", "{}");
    assert_eq!((r.status, r.json()), (404, missing.clone()));
    let named = json!({"error": "not_found", "reason": "missing_named_view"});
    let r = c.get("/db/_design/d/_view/nope");
    assert_eq!((r.status, r.json()), (404, named.clone()));
    let r = c.post("/db/_design/d/_view/nope", r#"{"keys":[1]}"#);
    assert_eq!((r.status, r.json()), (404, named.clone()));
    let r = c.post("/db/_design/d/_view/nope/queries", r#"{"queries":[{}]}"#);
    assert_eq!((r.status, r.json()), (404, named));
    // A deleted design document.
    let rev = put_ddoc(
        &c,
        "db",
        "gone",
        json!({"views": {"v": {"map": "function(doc){ emit(1, null); }"}}}),
    );
    assert_eq!(ok(&c, "/db/_design/gone/_view/v")["total_rows"], 5);
    assert_eq!(c.delete(&format!("/db/_design/gone?rev={rev}")).status, 200);
    let r = c.get("/db/_design/gone/_view/v");
    assert_eq!(
        (r.status, r.json()),
        (404, json!({"error": "not_found", "reason": "deleted"}))
    );
    c.get("/nodb/_design/d/_view/by_n").error(404, "not_found");
}

fn key_collation_unicode_and_raw(s: &mut TestServer) {
    let c = s.admin();
    c.put("/coll", "");
    let unicode = vec![
        json!(null),
        json!(false),
        json!(true),
        json!(-1),
        json!(1),
        json!(2.5),
        json!(10),
        json!("1"),
        json!("a"),
        json!("A"),
        json!("aa"),
        json!("b"),
        json!("B"),
        json!([]),
        json!(["a"]),
        json!(["a", 1]),
        json!(["b"]),
        json!({}),
        json!({"a": 1}),
    ];
    let raw = vec![
        json!(-1),
        json!(1),
        json!(2.5),
        json!(10),
        json!(false),
        json!(null),
        json!(true),
        json!({}),
        json!({"a": 1}),
        json!([]),
        json!(["a"]),
        json!(["a", 1]),
        json!(["b"]),
        json!("1"),
        json!("A"),
        json!("B"),
        json!("a"),
        json!("aa"),
        json!("b"),
    ];
    // Ids run against the key order, so only the keys can put the rows in order.
    let n = unicode.len();
    let docs: Vec<Value> = unicode
        .iter()
        .enumerate()
        .map(|(i, k)| json!({"_id": format!("k{:02}", n - 1 - i), "k": k}))
        .collect();
    bulk(&c, "coll", json!(docs));
    let map = "function(doc){ if ('k' in doc) emit(doc.k, null); }";
    put_ddoc(&c, "coll", "u", json!({"views": {"v": {"map": map}}}));
    put_ddoc(
        &c,
        "coll",
        "r",
        json!({"views": {"v": {"map": map, "options": {"collation": "raw"}}}}),
    );
    assert_eq!(keys_of(&ok(&c, "/coll/_design/u/_view/v")), unicode);
    assert_eq!(keys_of(&ok(&c, "/coll/_design/r/_view/v")), raw);
    let u = |p: &str| keys_of(&ok(&c, &format!("/coll/_design/u/_view/v?{p}")));
    let r = |p: &str| keys_of(&ok(&c, &format!("/coll/_design/r/_view/v?{p}")));
    assert_eq!(
        u("startkey=%22a%22&endkey=%22b%22"),
        [json!("a"), json!("A"), json!("aa"), json!("b")]
    );
    assert_eq!(
        r("startkey=%22a%22&endkey=%22b%22"),
        [json!("a"), json!("aa"), json!("b")]
    );
    assert_eq!(
        r("startkey=%22B%22&endkey=%22a%22"),
        [json!("B"), json!("a")]
    );
    bad_query(
        &c,
        "/coll/_design/u/_view/v?startkey=%22B%22&endkey=%22a%22",
        NO_ROWS,
    );
    assert_eq!(u("key=%22A%22"), [json!("A")], "case matters for equality");
    assert_eq!(
        u("startkey=1&endkey=%221%22"),
        [json!(1), json!(2.5), json!(10), json!("1")]
    );
    assert_eq!(
        u("startkey=null&endkey=true"),
        [json!(null), json!(false), json!(true)]
    );
    assert_eq!(
        u(&format!(
            "startkey={}&endkey={}",
            j(&json!([])),
            j(&json!(["a", {}]))
        )),
        [json!([]), json!(["a"]), json!(["a", 1])]
    );
    assert_eq!(
        r("descending=true&limit=3"),
        [json!("b"), json!("aa"), json!("a")]
    );
}

fn map_functions_see_ids_revs_and_options(s: &mut TestServer) {
    let c = s.admin();
    c.put("/seen", "");
    let rx = put_doc(&c, "/seen/x", json!({"n": 1}));
    let map = "function(doc){ emit(doc._id, {rev: doc._rev, seq: typeof doc._local_seq, conflicts: '_conflicts' in doc}); }";
    put_ddoc(&c, "seen", "plain", json!({"views": {"v": {"map": map}}}));
    put_ddoc(
        &c,
        "seen",
        "seq",
        json!({"views": {"v": {"map": map}}, "options": {"local_seq": true}}),
    );
    let designs = "function(doc){ if (doc._id.indexOf('_design/') === 0) emit(doc._id, null); }";
    put_ddoc(
        &c,
        "seen",
        "design",
        json!({"views": {"v": {"map": designs}}, "options": {"include_design": true}}),
    );
    put_ddoc(
        &c,
        "seen",
        "nodesign",
        json!({"views": {"v": {"map": designs}}}),
    );
    // Design documents are not mapped by default, so only `x` is here.
    page(
        &c,
        "/seen/_design/plain/_view/v",
        1,
        0,
        json!([row(
            "x",
            json!("x"),
            json!({"rev": rx, "seq": "undefined", "conflicts": false})
        )]),
    );
    page(
        &c,
        "/seen/_design/seq/_view/v",
        1,
        0,
        json!([row(
            "x",
            json!("x"),
            json!({"rev": rx, "seq": "number", "conflicts": false})
        )]),
    );
    let d = |id: &str| row(id, json!(id), Value::Null);
    page(
        &c,
        "/seen/_design/design/_view/v",
        4,
        0,
        json!([
            d("_design/design"),
            d("_design/nodesign"),
            d("_design/plain"),
            d("_design/seq")
        ]),
    );
    page(&c, "/seen/_design/nodesign/_view/v", 0, 0, json!([]));
    // A deleted document leaves every view.
    delete_doc(&c, "/seen/x");
    page(&c, "/seen/_design/plain/_view/v", 0, 0, json!([]));
    page(&c, "/seen/_design/seq/_view/v", 0, 0, json!([]));
}

fn require_from_views_lib_and_map_functions_that_throw(s: &mut TestServer) {
    let c = s.admin();
    c.put("/js", "");
    bulk(
        &c,
        "js",
        json!([{"_id": "ok1", "n": 1}, {"_id": "bad", "bad": true, "n": 2}, {"_id": "ok2", "n": 3}, {"_id": "deep", "deep": {"er": "k"}}]),
    );
    put_ddoc(
        &c,
        "js",
        "t",
        json!({"views": {
            "lib": {
                "mod": "var h = require('./helper'); exports.triple = function(x){ return h.times(x, 3); };",
                "helper": "exports.times = function(a, b){ return a * b; };"
            },
            "tripled": {"map": "function(doc){ if (doc.n) emit(doc._id, require('views/lib/mod').triple(doc.n)); }"},
            "throws": {"map": "function(doc){ if (doc.bad) { throw new Error('boom'); } emit(doc._id, doc.n); }"},
            "nullref": {"map": "function(doc){ emit(doc.deep.er, 1); }"},
            "badrequire": {"map": "function(doc){ emit(doc._id, require('views/lib/nope')); }"},
            "all": {"map": "function(doc){ emit(doc._id, null); }"}
        }}),
    );
    let t = |view: &str| format!("/js/_design/t/_view/{view}");
    page(
        &c,
        &t("tripled"),
        3,
        0,
        json!([
            row("bad", json!("bad"), json!(6)),
            row("ok1", json!("ok1"), json!(3)),
            row("ok2", json!("ok2"), json!(9))
        ]),
    );
    // A function that throws for a document skips that document only.
    page(
        &c,
        &t("throws"),
        3,
        0,
        json!([
            row("deep", json!("deep"), Value::Null),
            row("ok1", json!("ok1"), json!(1)),
            row("ok2", json!("ok2"), json!(3))
        ]),
    );
    page(
        &c,
        &t("nullref"),
        1,
        0,
        json!([row("deep", json!("k"), json!(1))]),
    );
    page(&c, &t("badrequire"), 0, 0, json!([]));
    let all = ["bad", "deep", "ok1", "ok2"].map(|id| row(id, json!(id), Value::Null));
    page(&c, &t("all"), 4, 0, json!(all));
}

fn linked_documents_in_include_docs(s: &mut TestServer) {
    let c = s.admin();
    c.put("/links", "");
    let r1 = put_doc(&c, "/links/target", json!({"v": 1}));
    let r2 = put_doc(&c, &format!("/links/target?rev={r1}"), json!({"v": 2}));
    put_doc(&c, "/links/linker", json!({"type": "linker", "old": r1}));
    let map = "function(doc){ if (doc.type !== 'linker') return; emit(0, {_id: 'target'}); emit(1, {_id: 'target', _rev: doc.old}); emit(2, {_id: 'nowhere'}); emit(3, null); emit(4, {other: 1}); }";
    put_ddoc(&c, "links", "l", json!({"views": {"v": {"map": map}}}));
    let linker = ok(&c, "/links/linker");
    let v = "/links/_design/l/_view/v";
    assert_eq!(
        ok(&c, &format!("{v}?include_docs=true")),
        json!({"total_rows": 5, "offset": 0, "rows": [
            {"id": "linker", "key": 0, "value": {"_id": "target"}, "doc": {"_id": "target", "_rev": r2, "v": 2}},
            {"id": "linker", "key": 1, "value": {"_id": "target", "_rev": r1}, "doc": {"_id": "target", "_rev": r1, "v": 1}},
            {"id": "linker", "key": 2, "value": {"_id": "nowhere"}, "doc": null},
            {"id": "linker", "key": 3, "value": null, "doc": linker},
            {"id": "linker", "key": 4, "value": {"other": 1}, "doc": linker}
        ]})
    );
    assert!(
        ok(&c, v)["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .all(|r| r.get("doc").is_none()),
        "no docs unless asked"
    );
    // A deleted target reads as null; the emitting document is still there.
    delete_doc(&c, "/links/target");
    let rows = ok(&c, &format!("{v}?include_docs=true"))["rows"].clone();
    assert_eq!(rows[0]["doc"], Value::Null);
    assert_eq!(rows[2]["doc"], Value::Null);
    assert_eq!(rows[3]["doc"], linker);
}

fn conflicts_reach_map_functions_and_a_new_winner_changes_the_row(s: &mut TestServer) {
    let c = s.admin();
    c.put("/conf", "");
    let r1 = put_doc(&c, "/conf/c", json!({"v": 1}));
    let hash = r1.split('-').nth(1).expect("rev hash").to_string();
    let r = c.post(
        "/conf/_bulk_docs",
        &json!({"new_edits": false, "docs": [
            {"_id": "c", "_revisions": {"start": 2, "ids": ["aaaa", hash]}, "v": 2},
            {"_id": "c", "_revisions": {"start": 2, "ids": ["bbbb", hash]}, "v": 3}
        ]})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    put_ddoc(
        &c,
        "conf",
        "cf",
        json!({"views": {"v": {"map": "function(doc){ emit(doc._id, [doc._rev, doc.v, doc._conflicts || null]); }"}}}),
    );
    let v = "/conf/_design/cf/_view/v";
    page(
        &c,
        v,
        1,
        0,
        json!([row("c", json!("c"), json!(["2-bbbb", 3, ["2-aaaa"]]))]),
    );
    assert_eq!(
        ok(&c, &format!("{v}?include_docs=true&conflicts=true"))["rows"][0]["doc"],
        json!({"_id": "c", "_rev": "2-bbbb", "v": 3, "_conflicts": ["2-aaaa"]})
    );
    assert_eq!(
        ok(&c, &format!("{v}?include_docs=true"))["rows"][0]["doc"],
        json!({"_id": "c", "_rev": "2-bbbb", "v": 3})
    );
    // Deleting the winner makes the other branch win, and the row follows it.
    assert_eq!(c.delete("/conf/c?rev=2-bbbb").status, 200);
    page(
        &c,
        v,
        1,
        0,
        json!([row("c", json!("c"), json!(["2-aaaa", 2, null]))]),
    );
    // Deleting the last live branch removes the row.
    assert_eq!(c.delete("/conf/c?rev=2-aaaa").status, 200);
    page(&c, v, 0, 0, json!([]));
}

fn incremental_updates_new_map_code_and_cleanup(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let v = "/db/_design/d/_view/by_n";
    let sum = "/db/_design/d/_view/sum?group=true";
    page(&c, v, 5, 0, by_n(&ALL));
    let rev = rev_of(&c, "/db/c");
    put_doc(
        &c,
        &format!("/db/c?rev={rev}"),
        json!({"n": 30, "tag": "x"}),
    );
    let r = |id: &str, n: i64, tag: &str| row(id, json!(n), json!(tag));
    page(
        &c,
        v,
        5,
        0,
        json!([
            r("a", 1, "x"),
            r("b", 2, "y"),
            r("d", 4, "y"),
            r("e", 5, "x"),
            r("c", 30, "x")
        ]),
    );
    assert_eq!(
        ok(&c, sum)["rows"],
        json!([{"key": "x", "value": 36}, {"key": "y", "value": 6}])
    );
    delete_doc(&c, "/db/b");
    page(
        &c,
        v,
        4,
        0,
        json!([
            r("a", 1, "x"),
            r("d", 4, "y"),
            r("e", 5, "x"),
            r("c", 30, "x")
        ]),
    );
    assert_eq!(
        ok(&c, sum)["rows"],
        json!([{"key": "x", "value": 36}, {"key": "y", "value": 4}])
    );
    put_doc(&c, "/db/f", json!({"n": 6, "tag": "z"}));
    page(
        &c,
        v,
        5,
        0,
        json!([
            r("a", 1, "x"),
            r("d", 4, "y"),
            r("e", 5, "x"),
            r("f", 6, "z"),
            r("c", 30, "x")
        ]),
    );
    assert_eq!(
        ok(&c, sum)["rows"],
        json!([{"key": "x", "value": 36}, {"key": "y", "value": 4}, {"key": "z", "value": 6}])
    );
    assert_eq!(
        ok(&c, "/db/_design/d/_view/count?group=true")["rows"],
        json!([{"key": "x", "value": 3}, {"key": "y", "value": 1}, {"key": "z", "value": 1}])
    );

    // New map code is a new index with a new signature.
    let old = signature(&c, "db", "d");
    let mut ddoc = ok(&c, "/db/_design/d");
    ddoc["views"]["by_n"]["map"] = json!("function(doc){ if (doc.n) emit(doc.n * 10, doc.tag); }");
    put_doc(&c, "/db/_design/d", ddoc);
    let tenfold = json!([
        r("a", 10, "x"),
        r("d", 40, "y"),
        r("e", 50, "x"),
        r("f", 60, "z"),
        r("c", 300, "x")
    ]);
    page(&c, v, 5, 0, tenfold.clone());
    let new = signature(&c, "db", "d");
    assert_ne!(new, old);
    assert_eq!(
        ok(&c, sum)["rows"],
        json!([{"key": "x", "value": 36}, {"key": "y", "value": 4}, {"key": "z", "value": 6}])
    );

    // _view_cleanup removes the old index file and keeps the one in use.
    let (old_file, new_file) = (format!("{old}.view"), format!("{new}.view"));
    assert_eq!(
        (
            index_files(s.dir.path(), &old_file),
            index_files(s.dir.path(), &new_file)
        ),
        (1, 1)
    );
    let r = c.post("/db/_view_cleanup", "{}");
    assert_eq!((r.status, r.json()), (202, json!({"ok": true})));
    assert_eq!(
        (
            index_files(s.dir.path(), &old_file),
            index_files(s.dir.path(), &new_file)
        ),
        (0, 1)
    );
    page(&c, v, 5, 0, tenfold);
}

fn stale_and_update_modes(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    // An index nobody has built answers empty when told not to build it.
    put_ddoc(
        &c,
        "db",
        "never",
        json!({"views": {"v": {"map": "function(doc){ emit(doc._id, null); }"}}}),
    );
    for p in ["update=false", "stale=ok"] {
        page(
            &c,
            &format!("/db/_design/never/_view/v?{p}"),
            0,
            0,
            json!([]),
        );
    }
    // Mapping a `slow` document takes three seconds, so an update is visibly in flight.
    let slow = "function(doc){ if (doc.slow) { var t = Date.now(); while (Date.now() - t < 3000) {} } if (doc.n) emit(doc.n, null); }";
    put_ddoc(&c, "db", "s", json!({"views": {"v": {"map": slow}}}));
    let v = "/db/_design/s/_view/v";
    let rows = |n: usize| -> Value {
        ["a", "b", "c", "d", "e", "f", "g", "h"][..n]
            .iter()
            .enumerate()
            .map(|(i, id)| row(id, json!(i + 1), Value::Null))
            .collect()
    };
    page(&c, v, 5, 0, rows(5));

    put_doc(&c, "/db/f", json!({"n": 6, "slow": true}));
    for p in ["update=false", "stale=ok", "update=lazy"] {
        page(&c, &format!("{v}?{p}"), 5, 0, rows(5));
    }
    wait_until("the update after update=lazy lands", || {
        ok(&c, &format!("{v}?update=false"))["total_rows"] == 6
    });
    page(&c, &format!("{v}?update=false"), 6, 0, rows(6));

    put_doc(&c, "/db/g", json!({"n": 7, "slow": true}));
    page(&c, &format!("{v}?stale=update_after"), 6, 0, rows(6));
    wait_until("the update after stale=update_after lands", || {
        ok(&c, &format!("{v}?stale=ok"))["total_rows"] == 7
    });
    page(&c, &format!("{v}?stale=ok"), 7, 0, rows(7));

    put_doc(&c, "/db/h", json!({"n": 8, "slow": true}));
    page(&c, &format!("{v}?update=true"), 8, 0, rows(8));
    page(&c, v, 8, 0, rows(8));
}

fn design_info_update_seq_and_shared_signatures(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let info = ok(&c, "/db/_design/d/_info");
    assert_eq!(info["name"], "d");
    let vi = &info["view_index"];
    let sig = vi["signature"].as_str().expect("signature").to_string();
    assert!(
        sig.len() == 32 && sig.chars().all(|ch| ch.is_ascii_hexdigit()),
        "{sig}"
    );
    let before = [
        ("language", json!("javascript")),
        ("update_seq", json!(0)),
        ("purge_seq", json!(0)),
        ("updater_running", json!(false)),
        ("compact_running", json!(false)),
        ("waiting_clients", json!(0)),
        ("waiting_commit", json!(false)),
    ];
    for (field, want) in before {
        assert_eq!(vi[field], want, "{field} before the first query: {info}");
    }
    for size in ["file", "external", "active"] {
        assert!(vi["sizes"][size].is_u64(), "{info}");
    }
    // update_seq=true: the database position the answer reflects.
    let (seq, total) = db_seq(&c, "db");
    assert_eq!(
        ok(&c, "/db/_design/d/_view/by_n?update_seq=true"),
        json!({"total_rows": 5, "offset": 0, "update_seq": seq, "rows": by_n(&ALL)})
    );
    assert_eq!(
        ok(&c, "/db/_design/d/_view/sum?update_seq=true"),
        json!({"update_seq": seq, "rows": [{"key": null, "value": 15}]})
    );
    wait_until("the updater stops", || {
        ok(&c, "/db/_design/d/_info")["view_index"]["updater_running"] == false
    });
    let info = ok(&c, "/db/_design/d/_info");
    let vi = &info["view_index"];
    assert_eq!(vi["update_seq"], total, "{info}");
    assert_eq!(vi["signature"], sig.as_str());
    assert_eq!(vi["waiting_clients"], 0);
    assert_eq!(vi["compact_running"], false);
    assert!(
        vi["sizes"]["file"].as_u64().expect("file size") > 0,
        "{info}"
    );
    // The same views under another name share the index; other code or options do not.
    put_ddoc(&c, "db", "copy", ddoc_body());
    let copy = ok(&c, "/db/_design/copy/_info");
    assert_eq!(copy["name"], "copy");
    assert_eq!(copy["view_index"]["signature"], sig.as_str());
    assert_eq!(ok(&c, "/db/_design/copy/_view/by_n")["rows"], by_n(&ALL));
    put_ddoc(
        &c,
        "db",
        "other",
        json!({"views": {"by_n": {"map": "function(doc){ if (doc.n) emit(doc.n, 1); }"}}}),
    );
    assert_ne!(signature(&c, "db", "other"), sig);
    let mut raw = ddoc_body();
    raw["views"]["by_n"]["options"] = json!({"collation": "raw"});
    put_ddoc(&c, "db", "raw", raw);
    assert_ne!(signature(&c, "db", "raw"), sig);
}

fn view_compaction(s: &mut TestServer) {
    let c = s.admin();
    fixture(&c);
    let v = "/db/_design/d/_view/by_n";
    page(&c, v, 5, 0, by_n(&ALL));
    // Rewrite every document a few times so the index file holds garbage.
    for round in 0..3 {
        for (id, n, tag, date) in DOCS {
            let rev = rev_of(&c, &format!("/db/{id}"));
            put_doc(
                &c,
                &format!("/db/{id}?rev={rev}"),
                json!({"n": n, "tag": tag, "date": date, "round": round}),
            );
        }
        page(&c, v, 5, 0, by_n(&ALL));
    }
    let groups = ok(&c, "/db/_design/d/_view/sum?group=true");
    let sizes = |k: &str| {
        ok(&c, "/db/_design/d/_info")["view_index"]["sizes"][k]
            .as_u64()
            .unwrap()
    };
    let (file, active) = (sizes("file"), sizes("active"));
    assert!(
        active > 0 && active < file / 2,
        "the rewritten index is mostly garbage: active {active} of {file}"
    );
    let r = c.post("/db/_compact/d", "{}");
    assert_eq!((r.status, r.json()), (202, json!({"ok": true})));
    wait_until("the view compaction finishes", || {
        ok(&c, "/db/_design/d/_info")["view_index"]["compact_running"] == false
    });
    let (compacted, live) = (sizes("file"), sizes("active"));
    assert!(
        compacted < file && live > 0 && live <= compacted,
        "compaction keeps the live nodes: active {live} of {compacted}, {file} before"
    );
    page(&c, v, 5, 0, by_n(&ALL));
    assert_eq!(ok(&c, "/db/_design/d/_view/sum?group=true"), groups);
    // Writes after compaction still reach the index.
    put_doc(&c, "/db/f", json!({"n": 6, "tag": "y"}));
    let after = ok(&c, v);
    assert_eq!(
        (after["total_rows"].clone(), after["rows"][5].clone()),
        (json!(6), row("f", json!(6), json!("y")))
    );
    c.send(
        "POST",
        "/db/_compact/d",
        Some("{}"),
        &[("Content-Type", "text/plain")],
    )
    .error(415, "bad_content_type");
    s.anon()
        .post("/db/_compact/d", "{}")
        .error(401, "unauthorized");
}

fn runaway_map_function_times_out_and_the_server_keeps_serving(s: &mut TestServer) {
    let c = s.admin();
    let r = c.put(
        "/_node/_local/_config/couchdb/os_process_timeout",
        r#""500""#,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    c.put("/rw", "");
    bulk(
        &c,
        "rw",
        json!([{"_id": "calm", "n": 1}, {"_id": "spin", "spin": true}]),
    );
    put_ddoc(
        &c,
        "rw",
        "spin",
        json!({"views": {"v": {"map": "function(doc){ if (doc.spin) { while (true) {} } emit(doc._id, null); }"}}}),
    );
    put_ddoc(
        &c,
        "rw",
        "calm",
        json!({"views": {"v": {"map": "function(doc){ emit(doc._id, 1); }"}}}),
    );
    let timed_out = json!({"error": "os_process_error", "reason": "OS process timed out."});
    let started = Instant::now();
    let r = c.get("/rw/_design/spin/_view/v");
    assert_eq!((r.status, r.json()), (500, timed_out.clone()));
    assert!(
        started.elapsed() < Duration::from_millis(4500),
        "cut off by the configured 500 ms, not the 5 s default: {:?}",
        started.elapsed()
    );
    // The server answers everything else, JavaScript included.
    let w = c.get("/");
    assert_eq!(
        (w.status, w.json()["couchdb"].clone()),
        (200, json!("Welcome"))
    );
    assert_eq!(ok(&c, "/rw/calm")["n"], 1);
    page(
        &c,
        "/rw/_design/calm/_view/v",
        2,
        0,
        json!([
            row("calm", json!("calm"), json!(1)),
            row("spin", json!("spin"), json!(1))
        ]),
    );
    // Asking again runs the map again and fails again; nothing half-built is served.
    let r = c.get("/rw/_design/spin/_view/v");
    assert_eq!((r.status, r.json()), (500, timed_out));
    // Once the offending document is gone the view builds.
    delete_doc(&c, "/rw/spin");
    page(
        &c,
        "/rw/_design/spin/_view/v",
        1,
        0,
        json!([row("calm", json!("calm"), Value::Null)]),
    );
    assert_eq!(c.get("/").status, 200);
}

fn twenty_clients_share_one_index_build(s: &mut TestServer) {
    const N: usize = 2500;
    const CLIENTS: usize = 20;
    let c = s.admin();
    c.put("/big", "");
    let docs: Vec<Value> = (0..N)
        .map(|i| json!({"_id": format!("d{i:04}"), "i": i}))
        .collect();
    bulk(&c, "big", json!(docs));
    put_ddoc(
        &c,
        "big",
        "b",
        json!({"views": {
            "v": {"map": "function(doc){ emit(doc.i, doc._id); }"},
            "total": {"map": "function(doc){ emit(doc.i % 10, doc.i); }", "reduce": "_sum"}
        }}),
    );
    assert_eq!(
        ok(&c, "/big/_design/b/_info")["view_index"]["update_seq"],
        0,
        "not built yet"
    );
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (url, barrier) = (s.url.clone(), barrier.clone());
            std::thread::spawn(move || {
                let c = Client::new(&url, Some(common::ADMIN));
                barrier.wait();
                let map = c.get("/big/_design/b/_view/v");
                let reduced = c.get("/big/_design/b/_view/total?group=true");
                (map.status, map.text, reduced.status, reduced.text)
            })
        })
        .collect();
    let answers: Vec<(u16, String, u16, String)> = clients
        .into_iter()
        .map(|t| t.join().expect("client thread"))
        .collect();
    for (i, (map_status, map, red_status, reduced)) in answers.iter().enumerate() {
        assert_eq!(
            (*map_status, *red_status),
            (200, 200),
            "client {i}: {map:.300} {reduced}"
        );
        assert!(
            *map == answers[0].1,
            "client {i} got a different map answer"
        );
        assert_eq!(*reduced, answers[0].3, "client {i}");
    }
    let map: Value = serde_json::from_str(&answers[0].1).expect("JSON");
    assert_eq!(
        (map["total_rows"].clone(), map["offset"].clone()),
        (json!(N), json!(0))
    );
    let rows = map["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), N);
    for (i, r) in rows.iter().enumerate() {
        let id = format!("d{i:04}");
        assert_eq!(*r, json!({"id": id, "key": i, "value": id}), "row {i}");
    }
    // Group k holds i = k, k + 10, ...: 250 values adding up to 311250 + 250 k.
    let reduced: Value = serde_json::from_str(&answers[0].3).expect("JSON");
    let want: Vec<Value> = (0..10)
        .map(|k| json!({"key": k, "value": 311_250 + 250 * k}))
        .collect();
    assert_eq!(reduced, json!({"rows": want}));
    let info = ok(&c, "/big/_design/b/_info");
    assert_eq!(
        info["view_index"]["update_seq"],
        db_seq(&c, "big").1,
        "{info}"
    );
    assert_eq!(info["view_index"]["waiting_clients"], 0, "{info}");
}

// Helpers.

/// Database `db` with [`DOCS`] and design document `d`.
fn fixture(c: &Client) {
    assert_eq!(c.put("/db", "").status, 201);
    let docs: Vec<Value> = DOCS
        .iter()
        .map(|&(id, n, tag, date)| json!({"_id": id, "n": n, "tag": tag, "date": date}))
        .collect();
    bulk(c, "db", json!(docs));
    put_ddoc(c, "db", "d", ddoc_body());
}

/// Design document `d`: map-only views, every builtin reduce, a JavaScript reduce.
fn ddoc_body() -> Value {
    let by_tag = "function(doc){ if (doc.tag) emit(doc.tag, doc.n); }";
    json!({"views": {
        "by_n": {"map": "function(doc){ if (doc.n) emit(doc.n, doc.tag); }"},
        "by_tag": {"map": by_tag},
        "sum": {"map": by_tag, "reduce": "_sum"},
        "count": {"map": by_tag, "reduce": "_count"},
        "stats": {"map": by_tag, "reduce": "_stats"},
        "distinct": {"map": by_tag, "reduce": "_approx_count_distinct"},
        "max": {"map": by_tag, "reduce": "function(keys, values, rereduce){ return Math.max.apply(null, values); }"},
        "vec": {"map": "function(doc){ if (doc.tag) emit(doc.tag, [doc.n, 1]); }", "reduce": "_sum"},
        "dates": {"map": "function(doc){ if (doc.date) emit(doc.date, doc.n); }", "reduce": "_sum"}
    }})
}

fn fixture_doc(id: &str) -> (&'static str, i64, &'static str, [i64; 3]) {
    *DOCS
        .iter()
        .find(|d| d.0 == id)
        .unwrap_or_else(|| panic!("no fixture document {id}"))
}

/// Rows of `by_n` (key `n`, value `tag`) for these fixture documents, in this order.
fn by_n(ids: &[&str]) -> Value {
    ids.iter()
        .map(|id| fixture_doc(id))
        .map(|(id, n, tag, _)| row(id, json!(n), json!(tag)))
        .collect()
}

/// Rows of `by_tag` (key `tag`, value `n`) for these fixture documents, in this order.
fn by_tag(ids: &[&str]) -> Value {
    ids.iter()
        .map(|id| fixture_doc(id))
        .map(|(id, n, tag, _)| row(id, json!(tag), json!(n)))
        .collect()
}

fn row(id: &str, key: Value, value: Value) -> Value {
    json!({"id": id, "key": key, "value": value})
}

fn ids_of(v: &Value) -> Vec<String> {
    v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

fn keys_of(v: &Value) -> Vec<Value> {
    v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["key"].clone())
        .collect()
}

fn view_url(db: &str, ddoc: &str, view: &str, params: &str) -> String {
    let base = format!("/{db}/_design/{ddoc}/_view/{view}");
    if params.is_empty() {
        base
    } else {
        format!("{base}?{params}")
    }
}

fn ok(c: &Client, path: &str) -> Value {
    let r = c.get(path);
    assert_eq!(r.status, 200, "GET {path}: {}", r.text);
    r.json()
}

fn post_ok(c: &Client, path: &str, body: Value) -> Value {
    let r = c.post(path, &body.to_string());
    assert_eq!(r.status, 200, "POST {path}: {}", r.text);
    r.json()
}

/// Asserts a whole map answer.
fn page(c: &Client, path: &str, total: u64, offset: u64, rows: Value) {
    assert_eq!(
        ok(c, path),
        json!({"total_rows": total, "offset": offset, "rows": rows}),
        "GET {path}"
    );
}

fn bad_query(c: &Client, path: &str, reason: &str) {
    let r = c.get(path);
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "query_parse_error", "reason": reason})),
        "GET {path}"
    );
}

fn bulk(c: &Client, db: &str, docs: Value) {
    let r = c.post(
        &format!("/{db}/_bulk_docs"),
        &json!({"docs": docs}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(
        r.json()
            .as_array()
            .expect("results")
            .iter()
            .all(|d| d["ok"] == true),
        "{}",
        r.text
    );
}

fn put_doc(c: &Client, path: &str, body: Value) -> String {
    let r = c.put(path, &body.to_string());
    assert_eq!(r.status, 201, "PUT {path}: {}", r.text);
    r.json()["rev"].as_str().expect("rev").to_string()
}

fn put_ddoc(c: &Client, db: &str, name: &str, body: Value) -> String {
    put_doc(c, &format!("/{db}/_design/{name}"), body)
}

fn rev_of(c: &Client, path: &str) -> String {
    ok(c, path)["_rev"].as_str().expect("_rev").to_string()
}

fn delete_doc(c: &Client, path: &str) {
    let rev = rev_of(c, path);
    let r = c.delete(&format!("{path}?rev={rev}"));
    assert_eq!(r.status, 200, "DELETE {path}: {}", r.text);
}

fn signature(c: &Client, db: &str, ddoc: &str) -> String {
    ok(c, &format!("/{db}/_design/{ddoc}/_info"))["view_index"]["signature"]
        .as_str()
        .expect("signature")
        .to_string()
}

/// The database's `update_seq` and the number of updates it counts.
fn db_seq(c: &Client, db: &str) -> (String, u64) {
    let seq = ok(c, &format!("/{db}"))["update_seq"]
        .as_str()
        .expect("update_seq")
        .to_string();
    let total = seq
        .split('-')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a numeric prefix");
    (seq, total)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Files named `name` anywhere under `dir`.
fn index_files(dir: &Path, name: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                index_files(&path, name)
            } else {
                usize::from(e.file_name().to_string_lossy() == name)
            }
        })
        .sum()
}

/// Percent-encodes a query-string value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A JSON value as a query-string value.
fn j(v: &Value) -> String {
    enc(&v.to_string())
}

fn indexing_shows_in_active_tasks_survives_restarts_and_compacts_while_queried(s: &mut TestServer) {
    let c = s.admin();
    assert_eq!(c.put("/big", "").status, 201);
    let n = 40_000i64;
    for start in (0..n).step_by(4000) {
        let docs: Vec<Value> = (start..start + 4000)
            .map(|i| json!({"_id": format!("d{i:06}"), "n": i, "g": i % 10}))
            .collect();
        bulk(&c, "big", json!(docs));
    }
    put_ddoc(
        &c,
        "big",
        "v",
        json!({"views": {"by_g": {"map": "function(doc) { emit(doc.g, doc.n); }", "reduce": "_sum"}}}),
    );
    let expected = json!({"rows": (0..10).map(|g| json!({"key": g, "value": (0..n).filter(|i| i % 10 == g).sum::<i64>()})).collect::<Vec<_>>()});
    let url = s.url.clone();
    let watcher = std::thread::spawn(move || {
        let c = Client::new(&url, Some(common::ADMIN));
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            let tasks = c.get("/_active_tasks").json();
            if let Some(t) = tasks
                .as_array()
                .and_then(|ts| ts.iter().find(|t| t["type"] == "indexer"))
            {
                return Some(t.clone());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    });
    assert_eq!(ok(&c, "/big/_design/v/_view/by_g?group=true"), expected);
    let task = watcher
        .join()
        .unwrap()
        .expect("the index build is listed in _active_tasks");
    assert_eq!(
        (task["database"].as_str(), task["design_document"].as_str()),
        (Some("big"), Some("_design/v"))
    );
    for field in [
        "changes_done",
        "total_changes",
        "progress",
        "started_on",
        "updated_on",
    ] {
        assert!(task[field].is_u64(), "{field} in {task}");
    }
    assert!(task["total_changes"].as_u64() >= Some(n as u64), "{task}");
    assert!(task["pid"].is_string() && task["node"].is_string());

    // The index is on disk: after a restart it answers without rebuilding.
    let seq = ok(&c, "/big/_design/v/_info")["view_index"]["update_seq"].clone();
    s.restart();
    let c = s.admin();
    assert_eq!(
        ok(&c, "/big/_design/v/_view/by_g?group=true&update=false"),
        expected
    );
    assert_eq!(
        ok(&c, "/big/_design/v/_info")["view_index"]["update_seq"],
        seq
    );

    // Rewrite a tenth of the documents (same values) so compaction has garbage to drop, and
    // query while it runs: every answer is complete and right.
    let rows = ok(&c, "/big/_all_docs?startkey=%22d%22&limit=4000")["rows"].clone();
    let docs: Vec<Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let i: i64 = r["id"].as_str().unwrap()[1..].parse().unwrap();
            json!({"_id": r["id"], "_rev": r["value"]["rev"], "n": i, "g": i % 10})
        })
        .collect();
    bulk(&c, "big", json!(docs));
    assert_eq!(ok(&c, "/big/_design/v/_view/by_g?group=true"), expected);
    assert_eq!(c.post("/big/_compact/v", "{}").status, 202);
    loop {
        assert_eq!(ok(&c, "/big/_design/v/_view/by_g?group=true"), expected);
        assert_eq!(
            ok(
                &c,
                "/big/_design/v/_view/by_g?reduce=false&limit=1&skip=39999"
            )["rows"][0]["value"],
            json!(39999)
        );
        if ok(&c, "/big/_design/v/_info")["view_index"]["compact_running"] == false {
            break;
        }
    }
    assert_eq!(ok(&c, "/big/_design/v/_view/by_g?group=true"), expected);
}

/// Design documents whose functions fail in every way JavaScript can: they throw, run past
/// `os_process_timeout`, run out of memory (in a local, and by growing a global until the
/// heap is full), or do not compile; as map, reduce, validation and filter functions, each
/// asked more often than there are engines. Every failure is answered, and none may leave an
/// engine broken for what comes after.
fn functions_that_fail_in_every_way(s: &mut TestServer) {
    let c = s.admin();
    let r = c.put(
        "/_node/_local/_config/couchdb/os_process_timeout",
        r#""500""#,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    // A smaller heap fills sooner; what fills it is the same.
    let r = c.put("/_node/_local/_config/settee/js_memory_mb", r#""32""#);
    assert_eq!(r.status, 200, "{}", r.text);
    c.put("/failing", "");
    bulk(
        &c,
        "failing",
        json!((0..20)
            .map(|i| json!({"_id": format!("d{i:02}"), "n": i}))
            .collect::<Vec<_>>()),
    );
    let grow = "if (!globalThis.hoard) { globalThis.hoard = []; } while (true) { globalThis.hoard.push(new Array(1000).fill(doc.n)); }";
    let local = "var a = []; while (true) { a.push(new Array(100000).fill(1)); }";
    let maps = [
        (
            "throws",
            "function(doc) { throw new Error('no ' + doc._id); }".to_string(),
        ),
        ("spins", "function(doc) { while (true) {} }".to_string()),
        ("eats", format!("function(doc) {{ {local} }}")),
        ("hoards", format!("function(doc) {{ {grow} }}")),
        (
            "recurses",
            "function(doc) { function f(n) { return f(n + 1) + 1; } emit(f(0), 1); }".to_string(),
        ),
    ];
    let reduces = [
        (
            "rthrows",
            "function(k, v) { throw new Error('reduce'); }".to_string(),
        ),
        ("rspins", "function(k, v) { while (true) {} }".to_string()),
        ("reats", format!("function(k, v) {{ {local} }}")),
        (
            "rhoards",
            format!("function(k, v) {{ var doc = {{n: 1}}; {grow} }}"),
        ),
    ];
    for round in 0..3 {
        for (name, map) in &maps {
            put_ddoc(
                &c,
                "failing",
                &format!("{name}{round}"),
                json!({"views": {"v": {"map": map}}}),
            );
            let r = c.get(&format!("/failing/_design/{name}{round}/_view/v"));
            assert!(
                r.status == 200 || r.status == 500,
                "{name}: {} {}",
                r.status,
                r.text
            );
        }
        for (name, reduce) in &reduces {
            put_ddoc(
                &c,
                "failing",
                &format!("{name}{round}"),
                json!({"views": {"v": {"map": "function(doc) { emit(doc.n, doc.n); }", "reduce": reduce}}}),
            );
            let r = c.get(&format!("/failing/_design/{name}{round}/_view/v"));
            if *name == "rthrows" {
                // As in CouchDB: logged, and reduced to null.
                assert_eq!(
                    (r.status, r.json()),
                    (200, json!({"rows": [{"key": null, "value": null}]}))
                );
            } else {
                assert_eq!(r.status, 500, "{name}: {}", r.text);
            }
        }
        let r = c.put(
            &format!("/failing/_design/broken{round}"),
            &json!({"views": {"v": {"map": "function(doc) { emit( }"}}}).to_string(),
        );
        r.error(400, "compilation_error");
        // Validation and filter functions that fail: the write or feed fails, nothing else.
        for (i, body) in [
            "throw new Error('vdu');",
            "while (true) {}",
            local,
            &grow.replace("doc.n", "1"),
        ]
        .iter()
        .enumerate()
        {
            let vdu =
                format!("function(newDoc, oldDoc, userCtx) {{ if (newDoc.check) {{ {body} }} }}");
            put_ddoc(
                &c,
                "failing",
                &format!("vdu{round}{i}"),
                json!({"validate_doc_update": vdu, "filters": {"f": format!("function(doc, req) {{ {body} }}")}}),
            );
            let w = c.put(&format!("/failing/check{round}{i}"), r#"{"check":true}"#);
            assert!(
                w.status >= 400,
                "a failing validation refuses the write: {}",
                w.text
            );
            let f = c.get(&format!("/failing/_changes?filter=vdu{round}{i}/f"));
            assert!(
                f.status >= 400 || f.json()["results"] == json!([]),
                "{}",
                f.text
            );
            delete_doc(&c, &format!("/failing/_design/vdu{round}{i}"));
        }
    }
}

/// Deletes every database the view tests made and restores the configuration they change.
fn clear(s: &mut TestServer) {
    let c = s.admin();
    for db in ok(&c, "/_all_dbs").as_array().unwrap() {
        let name = db.as_str().unwrap();
        if !name.starts_with('_') {
            assert_eq!(c.delete(&format!("/{}", enc(name))).status, 200, "{name}");
        }
    }
    for key in ["couchdb/os_process_timeout", "settee/js_memory_mb"] {
        let r = c.delete(&format!("/_node/_local/_config/{key}"));
        assert!(r.status == 200 || r.status == 404, "{}", r.text);
    }
}

#[test]
fn every_view_test_passes_after_functions_that_failed_in_every_way() {
    let mut s = TestServer::start();
    s.allow_errors = true;
    functions_that_fail_in_every_way(&mut s);
    clear(&mut s);
    for (name, test) in VIEW_TESTS {
        eprintln!("after the failures: {name}");
        test(&mut s);
        clear(&mut s);
    }
}

/// A purge changes no sequence; a view queried after one must still leave the purged
/// document out (it answered with it until the next write).
#[test]
fn purged_documents_leave_views_at_once() {
    let s = TestServer::start();
    let c = s.admin();
    assert_eq!(c.put("/pv", "").status, 201);
    let rev = c.put("/pv/a", r#"{"v":1}"#).json()["rev"].clone();
    c.put("/pv/b", r#"{"v":2}"#);
    put_ddoc(
        &c,
        "pv",
        "d",
        json!({"views": {"v": {"map": "function(d) { emit(d.v, 1); }"}}}),
    );
    assert_eq!(ok(&c, "/pv/_design/d/_view/v")["total_rows"], 2);
    let r = c.post("/pv/_purge", &json!({"a": [rev]}).to_string());
    assert_eq!(r.status, 201, "{}", r.text);
    let v = ok(&c, "/pv/_design/d/_view/v");
    assert_eq!(v["total_rows"], 1, "{v}");
    assert_eq!(v["rows"][0]["id"], "b");
}
