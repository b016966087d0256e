//! `POST /{db}/_explain`: the plan of a query in CouchDB 3.5's shape: the chosen index, the
//! normalised selector, the options, the view arguments of the index scan, whether the index
//! covers the query, every index considered with why it was not chosen, and which fields of
//! the selector an index could narrow.

use serde_json::{json, Map, Value};

use crate::plan::{Chosen, Plan};
use crate::selector::Range;
use crate::text_query::TextQuery;
use crate::FindQuery;
use settee_search::SortKey;

/// The explanation of `q`'s plan on database `db`.
pub fn explain(db: &settee_db::Database, q: &FindQuery, plan: &Plan) -> Value {
    let index = match &plan.chosen {
        Chosen::AllDocs => crate::index::all_docs_json(),
        Chosen::Json(i, _) => i.to_json(),
        Chosen::Text(t) => t.to_json(),
        Chosen::Nothing => Value::Null,
    };
    let candidates: Vec<Value> = plan.candidates.iter().map(|c| c.to_json()).collect();
    let (indexable, unindexable) = q.selector.field_hints();
    let mut out = Map::new();
    out.insert("dbname".into(), json!(db.name()));
    out.insert("index".into(), index);
    out.insert("partitioned".into(), json!(db.partitioned()));
    out.insert("selector".into(), q.selector.to_json());
    out.insert("opts".into(), opts(q));
    out.insert("limit".into(), json!(q.limit));
    out.insert("skip".into(), json!(q.skip));
    out.insert("fields".into(), json!(q.fields.clone().unwrap_or_default()));
    out.insert("index_candidates".into(), Value::Array(candidates));
    let mut hints = vec![json!({"type": "json", "indexable_fields": indexable,
        "unindexable_fields": unindexable})];
    // Only a query on a text index is translated for it.
    let text = match plan.chosen {
        Chosen::Text(_) => TextQuery::new(&q.selector.to_json()).ok(),
        _ => None,
    };
    if let Some(text) = text {
        hints.push(
            json!({"type": "text", "indexable_fields": text.indexable_fields(),
            "unindexable_fields": []}),
        );
        // The text cursor's part: the query it runs, the partition and the sort.
        out.insert("selector_hints".into(), Value::Array(hints));
        out.insert("query".into(), json!(text.lucene()));
        out.insert(
            "partition".into(),
            json!(Some(&q.partition).filter(|p| !p.is_empty())),
        );
        let sort = match crate::text_query::sort(q) {
            Ok(keys) if keys.is_empty() => json!("relevance"),
            Ok(keys) => json!(keys.iter().map(sort_spec).collect::<Vec<_>>()),
            Err(_) => Value::Null,
        };
        out.insert("sort".into(), sort);
        return Value::Object(out);
    }
    out.insert("selector_hints".into(), Value::Array(hints));
    if plan.chosen != Chosen::Nothing {
        out.insert("mrargs".into(), mrargs(q, plan));
        out.insert("covering".into(), json!(plan.covering));
    }
    Value::Object(out)
}

/// A text index sort key as CouchDB writes it: `-name_3astring<string>`.
fn sort_spec(k: &SortKey) -> String {
    match k {
        SortKey::Field { name, desc, string } => format!(
            "{}{name}<{}>",
            if *desc { "-" } else { "" },
            if *string { "string" } else { "number" }
        ),
        SortKey::Score { .. } => "relevance".into(),
        SortKey::Doc { .. } => "<doc>".into(),
    }
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

/// The view arguments of the scan, as CouchDB shows them.
fn mrargs(q: &FindQuery, plan: &Plan) -> Value {
    let (mut start, mut end) = match &plan.chosen {
        Chosen::Json(_, ranges) => (start_key(ranges), end_key(ranges)),
        _ => id_keys(q),
    };
    if q.descending {
        std::mem::swap(&mut start, &mut end);
    }
    let conflicts = if q.conflicts {
        json!(true)
    } else {
        json!("undefined")
    };
    json!({
        "include_docs": !plan.covering, "view_type": "map", "reduce": false,
        "partition": Some(&q.partition).filter(|p| !p.is_empty()),
        "start_key": start, "end_key": end,
        "direction": if q.descending { "rev" } else { "fwd" },
        "stable": q.stable, "update": q.update, "conflicts": conflicts,
    })
}

/// `_all_docs`'s keys: the selector's bounds on `_id`.
fn id_keys(q: &FindQuery) -> (Value, Value) {
    let id = q.selector.range(&["_id".to_string()]).unwrap_or_default();
    (
        id.low.map_or(Value::Null, |(v, _)| v),
        id.high.map_or(json!(MAX), |(v, _)| v),
    )
}

/// How CouchDB writes the end of a key range.
const MAX: &str = "<MAX>";

/// The fields of the index the selector narrows, in order (CouchDB's prefix).
fn prefix(ranges: &[Option<Range>]) -> impl Iterator<Item = &Range> {
    ranges.iter().map_while(Option::as_ref)
}

/// The lowest key the scan reads, as CouchDB writes it.
fn start_key(ranges: &[Option<Range>]) -> Value {
    Value::Array(
        prefix(ranges)
            .map_while(|r| r.low.as_ref().map(|(v, _)| v.clone()))
            .collect(),
    )
}

/// The highest key the scan reads, as CouchDB writes it.
fn end_key(ranges: &[Option<Range>]) -> Value {
    let mut out: Vec<Value> = prefix(ranges)
        .map_while(|r| r.high.as_ref().map(|(v, _)| v.clone()))
        .collect();
    out.push(json!(MAX));
    Value::Array(out)
}
