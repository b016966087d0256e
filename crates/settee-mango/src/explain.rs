//! `POST /{db}/_explain`: the plan of a query in CouchDB 3.5's shape: the chosen index, the
//! normalised selector, the options, the view arguments of the index scan, whether the index
//! covers the query, every index considered with why it was not chosen, and which fields of
//! the selector an index could narrow.

use serde_json::{json, Map, Value};

use crate::plan::{Chosen, Plan};
use crate::selector::Range;
use crate::FindQuery;

/// The explanation of `q`'s plan on database `db`.
pub fn explain(db: &str, q: &FindQuery, plan: &Plan) -> Value {
    let index = match &plan.chosen {
        Chosen::AllDocs => crate::index::all_docs_json(),
        Chosen::Json(i, _) => i.to_json(),
    };
    let fields = match &q.fields {
        Some(f) if !f.is_empty() => json!(f),
        _ => json!("all_fields"),
    };
    let mut candidates: Vec<Value> = plan.candidates.iter().map(|c| c.to_json()).collect();
    if !matches!(plan.chosen, Chosen::AllDocs) {
        candidates.push(json!({"index": crate::index::all_docs_json(), "analysis": {
            "usable": true, "reasons": [{"name": "unfavored_type"}], "ranking": 1,
            "covering": null}}));
    }
    let indexable = q.selector.indexable_fields();
    let unindexable: Vec<String> = q
        .selector
        .fields()
        .into_iter()
        .filter(|f| !indexable.contains(f))
        .collect();
    json!({
        "dbname": db,
        "index": index,
        "partitioned": false,
        "selector": q.selector.to_json(),
        "opts": opts(q),
        "limit": q.limit,
        "skip": q.skip,
        "fields": fields,
        "mrargs": mrargs(q, plan),
        "covering": plan.covering,
        "index_candidates": candidates,
        "selector_hints": [{"type": "json", "indexable_fields": indexable,
            "unindexable_fields": unindexable}],
    })
}

/// The query's options as CouchDB lists them.
fn opts(q: &FindQuery) -> Value {
    let mut sort = Map::new();
    for f in &q.sort {
        sort.insert(f.clone(), json!(if q.descending { "desc" } else { "asc" }));
    }
    json!({
        "use_index": q.use_index_json,
        "bookmark": q.bookmark,
        "limit": q.limit,
        "skip": q.skip,
        "sort": sort,
        "fields": q.fields.clone().unwrap_or_default(),
        "partition": q.partition,
        "r": q.r,
        "conflicts": q.conflicts,
        "stale": false,
        "update": q.update,
        "stable": q.stable,
        "execution_stats": q.execution_stats,
        "allow_fallback": q.allow_fallback,
    })
}

/// The view arguments of the scan.
fn mrargs(q: &FindQuery, plan: &Plan) -> Value {
    let direction = if q.descending { "rev" } else { "fwd" };
    match &plan.chosen {
        Chosen::AllDocs => json!({
            "include_docs": true, "view_type": "map", "reduce": false, "partition": null,
            "start_key": null, "end_key": "<MAX>", "direction": direction,
            "stable": q.stable, "update": q.update.to_string(), "conflicts": "undefined",
        }),
        Chosen::Json(_, ranges) => {
            let (mut start, mut end) = (start_key(ranges), end_key(ranges));
            if q.descending {
                std::mem::swap(&mut start, &mut end);
            }
            json!({
                "include_docs": !plan.covering, "view_type": "map", "reduce": false,
                "partition": null, "start_key": start, "end_key": end,
                "direction": direction, "stable": q.stable, "update": q.update.to_string(),
                "conflicts": "undefined",
            })
        }
    }
}

/// The lowest key the scan reads, as CouchDB writes it.
fn start_key(ranges: &[Option<Range>]) -> Value {
    let mut out = Vec::new();
    for r in ranges {
        match r.as_ref().and_then(|r| r.low.as_ref()) {
            Some((v, inclusive)) => {
                out.push(v.clone());
                if !inclusive {
                    break;
                }
            }
            None => break,
        }
    }
    Value::Array(out)
}

/// The highest key the scan reads, as CouchDB writes it (`"<MAX>"` for no bound).
fn end_key(ranges: &[Option<Range>]) -> Value {
    let mut out = Vec::new();
    for r in ranges {
        match r.as_ref().and_then(|r| r.high.as_ref()) {
            Some((v, inclusive)) => {
                out.push(v.clone());
                if !inclusive {
                    return Value::Array(out);
                }
            }
            None => break,
        }
    }
    out.push(json!("<MAX>"));
    Value::Array(out)
}
