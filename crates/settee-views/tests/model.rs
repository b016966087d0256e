//! View query results equal a brute-force computation over the documents, for random
//! documents (written, then partly updated and deleted, so the index is updated
//! incrementally) and random queries: ranges with and without document ids, both
//! directions, inclusive and exclusive ends, skip, limit, keys, reductions and grouping.
//! Half the databases are partitioned: their view is partitioned, and each query reads one
//! partition (whose name is a prefix of another's), which must give exactly the model's
//! answer over that partition's documents.

use std::cmp::Ordering;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use serde_json::{json, Value};
use settee_db::{
    Catalog, CatalogOptions, Creation, Database, DocLimits, Durability, EditMode, NewDoc,
};
use settee_json::collate;
use settee_views::{query, Grouping, ViewQuery, Views, ViewsConfig};

const MAP: &str = "function(doc) { if (doc.k !== undefined) { emit(doc.k, doc.v); } if (doc.twice) { emit(doc.k, 100); } }";

fn key() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..4).prop_map(|n| json!(n)),
        prop::sample::select(vec!["a", "A", "b", "B", "aa", "é"]).prop_map(|s| json!(s)),
    ];
    prop_oneof![
        3 => scalar.clone(),
        2 => prop::collection::vec(scalar, 1..3).prop_map(Value::Array),
    ]
}

#[derive(Clone, Debug)]
struct Doc {
    id: String,
    k: Value,
    v: i64,
    twice: bool,
}

fn docs() -> impl Strategy<Value = Vec<Doc>> {
    prop::collection::vec((0u8..25, key(), -5i64..6, prop::bool::weighted(0.1)), 1..40).prop_map(
        |raw| {
            let mut seen = std::collections::BTreeMap::new();
            for (n, k, v, twice) in raw {
                seen.insert(
                    n,
                    Doc {
                        id: format!("d{n:02}"),
                        k,
                        v,
                        twice,
                    },
                );
            }
            seen.into_values().collect()
        },
    )
}

fn bound() -> impl Strategy<Value = Option<(Value, Option<String>)>> {
    prop::option::of((
        key(),
        prop::option::weighted(0.3, (0u8..25).prop_map(|n| format!("d{n:02}"))),
    ))
}

#[derive(Clone, Debug)]
struct Q {
    start: Option<(Value, Option<String>)>,
    end: Option<(Value, Option<String>)>,
    inclusive_end: bool,
    descending: bool,
    skip: u64,
    limit: Option<u64>,
    keys: Option<Vec<Value>>,
    grouping: Grouping,
}

fn queries() -> impl Strategy<Value = Q> {
    let grouping = prop_oneof![
        Just(Grouping::All),
        Just(Grouping::Exact),
        (0usize..3).prop_map(Grouping::Level)
    ];
    (
        bound(),
        bound(),
        any::<bool>(),
        any::<bool>(),
        0u64..4,
        prop::option::of(0u64..6),
        prop::option::weighted(0.2, prop::collection::vec(key(), 0..4)),
        grouping,
    )
        .prop_map(
            |(start, end, inclusive_end, descending, skip, limit, keys, grouping)| Q {
                start,
                end,
                inclusive_end,
                descending,
                skip,
                limit,
                keys,
                grouping,
            },
        )
}

/// Every row the map function emits, in view order (key, then id, then value).
fn model_rows(docs: &[Doc]) -> Vec<(Value, String, i64)> {
    let mut rows = Vec::new();
    for d in docs {
        rows.push((d.k.clone(), d.id.clone(), d.v));
        if d.twice {
            rows.push((d.k.clone(), d.id.clone(), 100));
        }
    }
    rows.sort_by(|a, b| by_key_and_id(a, b).then_with(|| a.2.cmp(&b.2)));
    rows
}

fn by_key_and_id(a: &(Value, String, i64), b: &(Value, String, i64)) -> Ordering {
    collate::compare(&a.0, &b.0).then_with(|| a.1.cmp(&b.1))
}

fn cmp_at(row: &(Value, String, i64), bound: &(Value, Option<String>)) -> Ordering {
    let by_key = collate::compare(&row.0, &bound.0);
    match (&bound.1, by_key) {
        (Some(id), Ordering::Equal) => row.1.as_str().cmp(id.as_str()),
        _ => by_key,
    }
}

fn in_range(row: &(Value, String, i64), q: &Q) -> bool {
    let (lower_ok, upper_ok) = if q.descending {
        let upper = q
            .start
            .as_ref()
            .is_none_or(|s| cmp_at(row, s) != Ordering::Greater);
        let lower = q.end.as_ref().is_none_or(|e| match cmp_at(row, e) {
            Ordering::Greater => true,
            Ordering::Equal => q.inclusive_end,
            Ordering::Less => false,
        });
        (lower, upper)
    } else {
        let lower = q
            .start
            .as_ref()
            .is_none_or(|s| cmp_at(row, s) != Ordering::Less);
        let upper = q.end.as_ref().is_none_or(|e| match cmp_at(row, e) {
            Ordering::Less => true,
            Ordering::Equal => q.inclusive_end,
            Ordering::Greater => false,
        });
        (lower, upper)
    };
    lower_ok && upper_ok
}

/// The rows a query walks, in walk order, before skip and limit: descending, a document's
/// rows of one key keep their (ascending) value order, and map queries read `keys` from the
/// last, as CouchDB does.
fn walked(rows: &[(Value, String, i64)], q: &Q, map: bool) -> Vec<(Value, String, i64)> {
    let mut ordered = rows.to_vec();
    if q.descending {
        ordered.sort_by(|a, b| by_key_and_id(b, a).then_with(|| a.2.cmp(&b.2)));
    }
    let mut keys = q.keys.clone();
    if let Some(keys) = keys.as_mut().filter(|_| map && q.descending) {
        keys.reverse();
    }
    match &keys {
        Some(keys) => keys
            .iter()
            .flat_map(|k| {
                ordered
                    .iter()
                    .filter(|r| collate::compare(&r.0, k) == Ordering::Equal)
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect(),
        None => ordered.into_iter().filter(|r| in_range(r, q)).collect(),
    }
}

fn group_key(k: &Value, g: Grouping) -> Value {
    match (g, k) {
        (Grouping::Level(n), Value::Array(items)) => {
            Value::Array(items.iter().take(n).cloned().collect())
        }
        _ => k.clone(),
    }
}

fn model_reduce(rows: &[(Value, String, i64)], q: &Q) -> Vec<(Value, i64)> {
    // Reduce queries answer a key asked twice once.
    let mut q = q.clone();
    if let Some(keys) = q.keys.as_mut() {
        let mut unique: Vec<Value> = Vec::new();
        for k in keys.drain(..) {
            if !unique
                .iter()
                .any(|u| collate::compare(u, &k) == Ordering::Equal)
            {
                unique.push(k);
            }
        }
        *keys = unique;
    }
    let q = &q;
    let walked = walked(rows, q, false);
    let groups: Vec<(Value, i64)> = match q.grouping {
        Grouping::All if q.keys.is_none() => {
            if walked.is_empty() {
                vec![]
            } else {
                vec![(Value::Null, walked.iter().map(|r| r.2).sum())]
            }
        }
        Grouping::All => unreachable!("keys need exact grouping"),
        g => {
            let mut out: Vec<(Value, i64)> = Vec::new();
            for r in &walked {
                let k = group_key(&r.0, g);
                match out.last_mut() {
                    Some((last, sum)) if collate::compare(last, &k) == Ordering::Equal => {
                        *sum += r.2
                    }
                    _ => out.push((k, r.2)),
                }
            }
            out
        }
    };
    groups
        .into_iter()
        .skip(q.skip as usize)
        .take(q.limit.map_or(usize::MAX, |l| l as usize))
        .collect()
}

fn view_query(q: &Q) -> ViewQuery {
    ViewQuery {
        start_key: q.start.as_ref().map(|s| s.0.clone()),
        start_docid: q.start.as_ref().and_then(|s| s.1.clone()),
        end_key: q.end.as_ref().map(|e| e.0.clone()),
        end_docid: q.end.as_ref().and_then(|e| e.1.clone()),
        inclusive_end: q.inclusive_end,
        descending: q.descending,
        skip: q.skip,
        limit: q.limit,
        keys: q.keys.clone(),
        grouping: q.grouping,
        partition: None,
    }
}

/// The partitions of a partitioned case ("a" is a prefix of "ab").
const PARTITIONS: [&str; 3] = ["a", "b", "ab"];

/// `dNN` as an id of a partitioned database: in partition `PARTITIONS[NN % 3]`.
fn partitioned_id(id: &str) -> String {
    let n: usize = id[1..].parse().expect("dNN");
    format!("{}:{id}", PARTITIONS[n % 3])
}

/// The case with partitioned ids.
fn partitioned_case(docs: &[Doc], qs: &[Q]) -> (Vec<Doc>, Vec<Q>) {
    let docs = docs
        .iter()
        .map(|d| Doc {
            id: partitioned_id(&d.id),
            ..d.clone()
        })
        .collect();
    let bound = |b: &Option<(Value, Option<String>)>| {
        b.as_ref()
            .map(|(k, id)| (k.clone(), id.as_deref().map(partitioned_id)))
    };
    let qs = qs
        .iter()
        .map(|q| Q {
            start: bound(&q.start),
            end: bound(&q.end),
            ..q.clone()
        })
        .collect();
    (docs, qs)
}

fn new_doc(body: Value) -> settee_db::Result<NewDoc> {
    NewDoc::from_json(
        body,
        None,
        || unreachable!("every document has an id"),
        &DocLimits::default(),
    )
}

fn write(db: &Arc<Database>, rt: &tokio::runtime::Runtime, docs: &[Doc], deleted: &[String]) {
    let snap = db.snapshot();
    let mut edits = Vec::new();
    for d in docs {
        let mut body = json!({"_id": d.id, "k": d.k, "v": d.v, "twice": d.twice});
        if let Ok((rec, w)) = snap.resolve(&d.id, None) {
            body["_rev"] = json!(rec.tree.nodes[w].rev.to_string());
        }
        edits.push(new_doc(body).expect("a document"));
    }
    for id in deleted {
        let (rec, w) = snap.resolve(id, None).expect("written before");
        let body = json!({"_id": id, "_rev": rec.tree.nodes[w].rev.to_string(), "_deleted": true});
        edits.push(new_doc(body).expect("a deletion"));
    }
    for r in rt
        .block_on(db.update(edits, EditMode::Interactive, Durability::Durable))
        .expect("written")
    {
        r.expect("each edit applies");
    }
}

fn check(
    views: &Views,
    db: &Arc<Database>,
    rt: &tokio::runtime::Runtime,
    docs: &[Doc],
    qs: &[Q],
) -> Result<(), TestCaseError> {
    let ddoc = Views::design_doc(&db.snapshot(), "m").expect("the design document");
    let index = views.index(db, &ddoc).expect("an index");
    rt.block_on(views.refresh(db, &index)).expect("updated");
    let snap = index.snapshot();
    let all_rows = model_rows(docs);
    let (map_view, sum_view) = (ddoc.view("map").unwrap().0, ddoc.view("sum").unwrap().0);
    prop_assert_eq!(
        query::total_rows(&snap, map_view).unwrap(),
        all_rows.len() as u64
    );
    prop_assert_eq!(ddoc.options.partitioned, db.partitioned());
    for (i, q) in qs.iter().enumerate() {
        let partition = db.partitioned().then(|| PARTITIONS[i % 3].to_string());
        let rows: Vec<_> = match &partition {
            Some(p) => all_rows
                .iter()
                .filter(|r| r.1.split_once(':').map(|s| s.0) == Some(p.as_str()))
                .cloned()
                .collect(),
            None => all_rows.clone(),
        };
        let vq = ViewQuery {
            grouping: Grouping::All,
            partition: partition.clone(),
            ..view_query(q)
        };
        let got: Vec<(Value, String, i64)> = query::map_rows(&index, &snap, map_view, &vq)
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                (
                    serde_json::from_str(&r.key).unwrap(),
                    r.id,
                    serde_json::from_str::<i64>(&r.value).unwrap(),
                )
            })
            .collect();
        let want: Vec<_> = walked(&rows, q, true)
            .into_iter()
            .skip(q.skip as usize)
            .take(q.limit.map_or(usize::MAX, |l| l as usize))
            .collect();
        prop_assert_eq!(&got, &want, "map rows of {:?}", q);
        if q.keys.is_some() && q.grouping != Grouping::Exact {
            continue;
        }
        let rq = ViewQuery {
            partition,
            ..view_query(q)
        };
        let got: Vec<(Value, i64)> = query::reduce_rows(&index, &snap, sum_view, &rq)
            .unwrap()
            .into_iter()
            .map(|r| {
                (
                    serde_json::from_str(&r.key).unwrap(),
                    serde_json::from_str(&r.value.unwrap()).unwrap(),
                )
            })
            .collect();
        let want = model_reduce(&rows, q);
        prop_assert_eq!(
            got.len(),
            want.len(),
            "reduce rows of {:?}: {:?} vs {:?}",
            q,
            got,
            want
        );
        for (g, w) in got.iter().zip(&want) {
            prop_assert_eq!(
                collate::compare(&g.0, &w.0),
                Ordering::Equal,
                "group keys of {:?}",
                q
            );
            prop_assert_eq!(g.1, w.1, "sums of {:?}", q);
        }
    }
    Ok(())
}

#[test]
fn view_queries_match_brute_force() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let views = Views::new(ViewsConfig {
        workers: 2,
        limits: Default::default(),
        reduce_limit: true,
        store: catalog.store_options().clone(),
        servers: Default::default(),
        natives: Default::default(),
    });
    let mut runner = TestRunner::new(Config {
        cases: 48,
        rng_seed: RngSeed::Fixed(11),
        ..Config::default()
    });
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let case = (
        docs(),
        prop::collection::vec(queries(), 25),
        prop::collection::vec(any::<bool>(), 40),
        -5i64..6,
    );
    runner
        .run(&case, |(docs, qs, churn, bump)| {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            let partitioned = n.is_multiple_of(2);
            let how = Creation { q: Some(1 + n % 3), partitioned, security: None };
            let db = catalog.create_with(&format!("m{n}"), how).unwrap();
            let (docs, qs) = if partitioned { partitioned_case(&docs, &qs) } else { (docs, qs) };
            let ddoc = json!({"_id": "_design/m", "views": {"map": {"map": MAP}, "sum": {"map": MAP, "reduce": "_sum"}}});
            rt.block_on(db.update(vec![new_doc(ddoc).unwrap()], EditMode::Interactive, Durability::Durable)).unwrap();
            write(&db, &rt, &docs, &[]);
            check(&views, &db, &rt, &docs, &qs)?;
            // Churn: some documents change value, some are deleted; the index follows.
            let mut kept = Vec::new();
            let mut deleted = Vec::new();
            let mut changed = Vec::new();
            for (d, flip) in docs.iter().zip(churn.iter().cycle()) {
                match (flip, d.v % 2 == 0) {
                    (true, true) => deleted.push(d.id.clone()),
                    (true, false) => {
                        let d2 = Doc { v: d.v + bump, twice: !d.twice, ..d.clone() };
                        changed.push(d2.clone());
                        kept.push(d2);
                    }
                    _ => kept.push(d.clone()),
                }
            }
            write(&db, &rt, &changed, &deleted);
            check(&views, &db, &rt, &kept, &qs)
        })
        .unwrap();
}
