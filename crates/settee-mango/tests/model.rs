//! `_find` against a model: random documents (every JSON type, nested values, missing
//! fields) and random selectors with sorts, run through every JSON index that will take
//! them (forced with `use_index`, no fallback), through the planner's own choice and through
//! `_all_docs`, must give exactly what a brute-force evaluator of CouchDB's rules gives, in
//! CouchDB's order, also when paged by bookmark.

mod common;

use std::cmp::Ordering;
use std::sync::Arc;

use common::{catalog_and_views, views_of};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use serde_json::{json, Map, Value};
use settee_db::{Database, DocLimits, Durability, EditMode, NewDoc};
use settee_json::collate;
use settee_mango::{find, Error, FindQuery, FindSettings};
use settee_views::Views;

const SETTINGS: FindSettings = FindSettings {
    scan_warning_threshold: 0,
};

/// The indexes every case has: name and fields.
const INDEXES: &[(&str, &[&str])] = &[
    ("a", &["a"]),
    ("ab", &["a", "b"]),
    ("b", &["b"]),
    ("ba", &["b", "a"]),
    ("nested", &["o.x"]),
];

/// Values fields take: every JSON type, numbers and strings that collate closely.
fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..4).prop_map(Value::from),
        Just(json!(1.5)),
        Just(json!(-0.0)),
        prop::sample::select(vec!["", "a", "A", "ab", "b", "B", "é"]).prop_map(Value::from),
        Just(json!([1])),
        Just(json!([1, "a"])),
        Just(json!({"x": 1})),
    ]
}

/// A document: each field present or not.
fn doc() -> impl Strategy<Value = Value> {
    (
        prop::option::of(value()),
        prop::option::of(value()),
        prop::option::of(value()),
    )
        .prop_map(|(a, b, x)| {
            let mut d = Map::new();
            if let Some(a) = a {
                d.insert("a".into(), a);
            }
            if let Some(b) = b {
                d.insert("b".into(), b);
            }
            if let Some(x) = x {
                d.insert("o".into(), json!({ "x": x }));
            }
            Value::Object(d)
        })
}

/// One condition: a field, an operator and its argument.
#[derive(Debug, Clone)]
struct Cond {
    field: &'static str,
    op: &'static str,
    arg: Value,
}

fn cond() -> impl Strategy<Value = Cond> {
    let field = prop::sample::select(vec!["a", "b", "o.x"]);
    let op = prop::sample::select(vec![
        "$eq", "$gt", "$gte", "$lt", "$lte", "$ne", "$exists", "$in",
    ]);
    (field, op, value(), prop::collection::vec(value(), 1..3)).prop_map(|(field, op, v, vs)| {
        let arg = match op {
            "$exists" => Value::Bool(v.as_bool().unwrap_or(true)),
            "$in" => Value::Array(vs),
            _ => v,
        };
        Cond { field, op, arg }
    })
}

/// A query: conditions joined by `$and`, a sort, a page size.
#[derive(Debug, Clone)]
struct Query {
    conds: Vec<Cond>,
    sort: Vec<&'static str>,
    desc: bool,
    page: u64,
}

fn query() -> impl Strategy<Value = Query> {
    let sort = prop::sample::select(vec![vec![], vec!["a"], vec!["a", "b"], vec!["b"]]);
    (
        prop::collection::vec(cond(), 0..3),
        sort,
        any::<bool>(),
        1u64..6,
    )
        .prop_map(|(conds, sort, desc, page)| Query {
            conds,
            desc: desc && !sort.is_empty(),
            sort,
            page,
        })
}

impl Query {
    fn selector(&self) -> Value {
        let parts: Vec<Value> = self
            .conds
            .iter()
            .map(|c| json!({ c.field: { c.op: c.arg } }))
            .collect();
        // No conditions: `{}` (an empty `$and` matches nothing, as in CouchDB).
        if parts.is_empty() {
            return json!({});
        }
        json!({ "$and": parts })
    }

    fn body(&self, limit: u64, use_index: Option<&str>, bookmark: &Value) -> Value {
        let dir = if self.desc { "desc" } else { "asc" };
        let sort: Vec<Value> = self.sort.iter().map(|f| json!({ *f: dir })).collect();
        let mut b = json!({"selector": self.selector(), "limit": limit, "bookmark": bookmark});
        if !sort.is_empty() {
            b["sort"] = Value::Array(sort);
        }
        if let Some(i) = use_index {
            b["use_index"] = json!([i, i]);
            b["allow_fallback"] = json!(false);
        }
        b
    }
}

/// The value at a dotted path.
fn at<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, k| v.get(k))
}

fn equal(a: &Value, b: &Value) -> bool {
    collate::compare(a, b) == Ordering::Equal
}

/// CouchDB's rule for one condition, written out independently of the crate's matcher.
fn holds(c: &Cond, doc: &Value) -> bool {
    let Some(v) = at(doc, c.field) else {
        return c.op == "$exists" && c.arg == json!(false);
    };
    let o = collate::compare(v, &c.arg);
    match c.op {
        "$eq" => o == Ordering::Equal,
        "$ne" => o != Ordering::Equal,
        "$gt" => o == Ordering::Greater,
        "$gte" => o != Ordering::Less,
        "$lt" => o == Ordering::Less,
        "$lte" => o != Ordering::Greater,
        "$exists" => c.arg == json!(true),
        "$in" => {
            let args = c.arg.as_array().expect("an array");
            match v {
                Value::Array(items) => items.iter().any(|i| args.iter().any(|a| equal(i, a))),
                _ => args.iter().any(|a| equal(v, a)),
            }
        }
        _ => unreachable!("an operator the model knows"),
    }
}

/// What a query read through an index of `columns` answers: the matching documents that
/// have every indexed field, by the indexed values then id (all reversed when descending);
/// with no columns, `_all_docs`: the matches by id.
fn expected(q: &Query, docs: &[Value], columns: &[&str]) -> Vec<String> {
    let mut hits: Vec<(Vec<Value>, String)> = docs
        .iter()
        .filter(|d| q.conds.iter().all(|c| holds(c, d)))
        .filter_map(|d| {
            let key = columns
                .iter()
                .map(|c| at(d, c).cloned())
                .collect::<Option<Vec<_>>>()?;
            Some((key, d["_id"].as_str().unwrap().to_string()))
        })
        .collect();
    hits.sort_by(|(ka, ia), (kb, ib)| {
        collate::compare(&Value::Array(ka.clone()), &Value::Array(kb.clone())).then(ia.cmp(ib))
    });
    if q.desc {
        hits.reverse();
    }
    hits.into_iter().map(|(_, id)| id).collect()
}

/// Every page of a query, by bookmark, or the refusal of its first page.
async fn pages(
    views: &Views,
    db: &Arc<Database>,
    q: &Query,
    use_index: Option<&str>,
) -> Result<Vec<String>, Error> {
    let (mut out, mut bookmark) = (Vec::new(), Value::Null);
    loop {
        let body = q.body(q.page, use_index, &bookmark);
        let parsed = FindQuery::parse(body.as_object().unwrap(), 25)?;
        let search = settee_search::Search::new(views.pool().clone());
        let engines = settee_mango::Engines {
            views,
            search: &search,
        };
        let found = find(engines, db, parsed, SETTINGS).await?;
        if found.docs.is_empty() {
            return Ok(out);
        }
        out.extend(
            found
                .docs
                .iter()
                .map(|d| d["_id"].as_str().unwrap().to_string()),
        );
        bookmark = Value::String(found.summary.bookmark);
        assert!(out.len() <= 200, "paging does not end");
    }
}

/// The index the planner chooses for `q` (`None`: `_all_docs`).
async fn chosen(db: &Arc<Database>, q: &Query) -> Option<String> {
    let body = q.body(25, None, &Value::Null);
    let parsed = FindQuery::parse(body.as_object().unwrap(), 25).unwrap();
    let explained = settee_mango::explain(db, parsed).await.unwrap();
    explained["index"]["ddoc"]
        .as_str()
        .map(|d| d.trim_start_matches("_design/").to_string())
}

async fn load(db: &Arc<Database>, docs: &[Value]) {
    let mut new: Vec<NewDoc> = docs
        .iter()
        .map(|d| NewDoc::from_json(d.clone(), None, String::new, &DocLimits::default()).unwrap())
        .collect();
    for (name, fields) in INDEXES {
        let ddoc = json!({"_id": format!("_design/{name}"), "language": "query",
            "views": {*name: {"map": {"fields": fields.iter().map(|f| (f.to_string(), json!("asc"))).collect::<Map<_, _>>(), "partial_filter_selector": {}},
                "reduce": "_count", "options": {"def": {"fields": fields}}}}});
        new.push(NewDoc::from_json(ddoc, None, String::new, &DocLimits::default()).unwrap());
    }
    for r in db
        .update(new, EditMode::Interactive, Durability::Durable)
        .await
        .unwrap()
    {
        r.unwrap();
    }
}

#[test]
fn find_through_every_index_matches_a_brute_force_model() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_dir, catalog) = catalog_and_views();
    let views = views_of(&catalog);
    let mut runner = TestRunner::new(Config {
        cases: 96,
        rng_seed: RngSeed::Fixed(30),
        ..Config::default()
    });
    let strategy = (
        prop::collection::vec(doc(), 1..40),
        prop::collection::vec(query(), 1..8),
    );
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let (forced, served, case) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    runner
        .run(&strategy, |(bodies, queries)| {
            let n = case.fetch_add(1, Relaxed);
            let db = catalog.create(&format!("case{n}"), Some(2)).unwrap();
            let docs: Vec<Value> = bodies
                .into_iter()
                .enumerate()
                .map(|(i, mut d)| {
                    d["_id"] = json!(format!("d{i:02}"));
                    d
                })
                .collect();
            rt.block_on(async {
                load(&db, &docs).await;
                for q in &queries {
                    for (name, fields) in INDEXES {
                        forced.fetch_add(1, Relaxed);
                        match pages(&views, &db, q, Some(name)).await {
                            Ok(ids) => {
                                served.fetch_add(1, Relaxed);
                                prop_assert_eq!(
                                    ids,
                                    expected(q, &docs, fields),
                                    "{:?} on {}",
                                    q,
                                    name
                                );
                            }
                            Err(Error::Query { error, .. }) => {
                                prop_assert_eq!(error, "invalid_index")
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    let columns: &[&str] = match chosen(&db, q).await {
                        None => &[],
                        Some(n) => INDEXES.iter().find(|(i, _)| *i == n).unwrap().1,
                    };
                    match pages(&views, &db, q, None).await {
                        Ok(ids) => prop_assert_eq!(ids, expected(q, &docs, columns), "{:?}", q),
                        Err(Error::Query { error, .. }) => {
                            prop_assert!(!q.sort.is_empty());
                            prop_assert_eq!(error, "no_usable_index");
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                Ok(())
            })
        })
        .unwrap();
    let (served, forced) = (served.into_inner(), forced.into_inner());
    assert!(
        served * 6 > forced,
        "indexes served {served} of {forced} forced queries: the model checks too little"
    );
}
