//! Mango queries: `POST /{db}/_find` and `GET /{db}/_index`. Settee has only CouchDB's
//! special `_all_docs` index, so a query scans documents in id order and keeps those its
//! selector matches, as CouchDB does when no index fits (and says so in `warning`).

use std::sync::Arc;
use std::time::Instant;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hyper::Method;
use serde_json::{json, Map, Value};
use settee_db::{AllDocsOptions, DocOptions, DESIGN_PREFIX};
use settee_mango::Selector;

use settee_config::registry as setting;

use crate::db::{join_error, open};
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

/// What CouchDB says when a query runs on the `_all_docs` index.
const NO_INDEX: &str = "No matching index found, create an index to optimize query time.";

/// What CouchDB adds when a query reads many more documents than it returns.
const SCANNED_MANY: &str =
    "The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.";

/// The keys a `_find` body may have, as CouchDB lists them.
const FIND_KEYS: &[&str] = &[
    "selector",
    "use_index",
    "bookmark",
    "limit",
    "skip",
    "sort",
    "fields",
    "partition",
    "r",
    "conflicts",
    "stale",
    "update",
    "stable",
    "execution_stats",
    "allow_fallback",
];

/// A parsed `_find` body.
struct FindQuery {
    selector: Selector,
    limit: u64,
    skip: u64,
    fields: Option<Vec<String>>,
    descending: bool,
    /// The id of the last document an earlier page returned.
    after: Option<String>,
    conflicts: bool,
    execution_stats: bool,
}

/// `POST /{db}/_find`.
pub async fn find(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    req.require_json()?;
    let body = req.json_object(state.max_request).await?;
    let (default_limit, scan_warning_at) = {
        let config = state.node.config.read().expect("config lock");
        (
            config.value::<u64>(&setting::MANGO_DEFAULT_LIMIT),
            config.value::<u64>(&setting::MANGO_INDEX_SCAN_WARNING_THRESHOLD),
        )
    };
    let mut q = FindQuery::parse(&body, default_limit)?;
    let mut warnings = use_index_warning(body.get("use_index"))
        .into_iter()
        .collect::<Vec<_>>();
    warnings.push(NO_INDEX.to_string());
    let incoming = body
        .get("bookmark")
        .and_then(Value::as_str)
        .filter(|b| !b.is_empty())
        .unwrap_or("nil")
        .to_string();
    let started = Instant::now();
    let snap = db.snapshot();
    let (fields, stats) = (q.fields.take(), q.execution_stats);
    let (docs, examined, last) = tokio::task::spawn_blocking(move || scan(&snap, &q))
        .await
        .map_err(join_error)??;
    let docs = project(docs, fields.as_deref());
    let returned = docs.len() as u64;
    // As CouchDB: a page that moved nothing answers the bookmark it was given.
    let bookmark = last.map_or(incoming, |id| {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json!([id])).expect("json"))
    });
    if scan_warning_at > 0 && examined / returned.max(1) > scan_warning_at {
        warnings.push(SCANNED_MANY.to_string());
    }
    let mut out = json!({"docs": docs, "bookmark": bookmark, "warning": warnings.join("\n")});
    if stats {
        out["execution_stats"] = json!({
            "total_keys_examined": 0,
            "total_docs_examined": examined,
            "total_quorum_docs_examined": 0,
            "results_returned": returned,
            "execution_time_ms": started.elapsed().as_secs_f64() * 1000.0,
        });
    }
    Ok(reply::json(200, &out))
}

/// `GET /{db}/_index`: the one index there is.
pub fn index(state: &State, req: &Req, name: &str) -> HttpResult<Response> {
    match req.method {
        Method::GET | Method::HEAD => {
            open(state, name)?;
            let all_docs = json!({"ddoc": null, "name": "_all_docs", "type": "special", "def": {"fields": [{"_id": "asc"}]}});
            Ok(reply::json(
                200,
                &json!({"total_rows": 1, "indexes": [all_docs]}),
            ))
        }
        _ => Err(crate::node::unbuilt(req, "_index", "GET,POST")),
    }
}

impl FindQuery {
    /// Reads a `_find` body with CouchDB's defaults and errors.
    fn parse(body: &Map<String, Value>, default_limit: u64) -> HttpResult<FindQuery> {
        if let Some(k) = body.keys().find(|k| !FIND_KEYS.contains(&k.as_str())) {
            return Err(HttpError::new(
                400,
                "invalid_key",
                format!("Invalid key {k} for this request."),
            ));
        }
        let flag = |key: &str| match body.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(HttpError::new(
                400,
                "invalid_boolean",
                format!("Invalid boolean value: {v}"),
            )),
        };
        for key in ["update", "stable"] {
            flag(key)?;
        }
        let raw = body.get("selector").ok_or_else(|| {
            HttpError::new(
                400,
                "missing_required_key",
                "Missing required key: selector",
            )
        })?;
        if !raw.is_object() {
            return Err(HttpError::new(
                400,
                "invalid_selector_json",
                format!("Selector must be a JSON object, not: {raw}"),
            ));
        }
        let selector = Selector::parse(raw)
            .map_err(|e| HttpError::bad_request(format!("Invalid selector: {e}")))?;
        let count = |key: &str, default: u64| match body.get(key) {
            None => Ok(default),
            Some(v) => v.as_u64().ok_or_else(|| {
                HttpError::new(
                    400,
                    "invalid_non_neg_integer",
                    format!("{v} is not an integer greater than or equal to zero"),
                )
            }),
        };
        let fields = match body.get("fields") {
            None => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|f| f.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        HttpError::new(400, "invalid_field", "Fields must be strings")
                    })?,
            ),
            Some(_) => {
                return Err(HttpError::new(
                    400,
                    "invalid_fields",
                    "Fields must be a list of strings",
                ))
            }
        };
        let bad_bookmark = |b: &Value| {
            HttpError::new(
                400,
                "invalid_bookmark",
                format!("Invalid bookmark value: {b}"),
            )
        };
        let after = match body.get("bookmark") {
            None | Some(Value::Null) => None,
            Some(Value::String(b)) if b.is_empty() || b == "nil" => None,
            Some(v @ Value::String(b)) => Some(decode_bookmark(b).ok_or_else(|| bad_bookmark(v))?),
            Some(other) => return Err(bad_bookmark(other)),
        };
        Ok(FindQuery {
            limit: count("limit", default_limit)?,
            skip: count("skip", 0)?,
            fields,
            descending: sort_descending(body.get("sort"), raw)?,
            selector,
            after,
            conflicts: flag("conflicts")?,
            execution_stats: flag("execution_stats")?,
        })
    }
}

/// CouchDB's warning for a `use_index` that names an index other than `_all_docs`.
fn use_index_warning(use_index: Option<&Value>) -> Option<String> {
    let ddoc = |d: &str| {
        if d.starts_with(DESIGN_PREFIX) {
            d.to_string()
        } else {
            format!("{DESIGN_PREFIX}{d}")
        }
    };
    match use_index? {
        Value::String(d) if !d.is_empty() => Some(format!(
            "{} was not used because it does not contain a valid index for this query.",
            ddoc(d)
        )),
        Value::Array(a) => match a.as_slice() {
            [Value::String(d)] => Some(format!(
                "{} was not used because it does not contain a valid index for this query.",
                ddoc(d)
            )),
            [Value::String(d), Value::String(v)] => Some(format!(
                "{}, {v} was not used because it is not a valid index for this query.",
                ddoc(d)
            )),
            _ => None,
        },
        _ => None,
    }
}

/// The direction a `sort` asks for. Without indexes only `_id` can be sorted by, and only
/// when the selector bounds `_id` (CouchDB's special index is usable then alone).
fn sort_descending(sort: Option<&Value>, selector: &Value) -> HttpResult<bool> {
    let no_index = || {
        HttpError::new(
            400,
            "no_usable_index",
            "No index exists for this sort, try indexing by the sort fields.",
        )
    };
    let Some(sort) = sort else { return Ok(false) };
    let Value::Array(fields) = sort else {
        return Err(HttpError::new(
            400,
            "invalid_sort_json",
            format!("Sort must be an array of sort specs, not: {sort}"),
        ));
    };
    let mut descending = None;
    for field in fields {
        let bad_field = || {
            HttpError::new(
                400,
                "invalid_sort_field",
                format!("Invalid sort field: {field}"),
            )
        };
        let (name, desc) = match field {
            Value::String(f) if !f.is_empty() => (f.as_str(), false),
            Value::Object(o) if o.len() == 1 => {
                let (f, dir) = o.iter().next().expect("one member");
                match dir.as_str() {
                    Some("asc") if !f.is_empty() => (f.as_str(), false),
                    Some("desc") if !f.is_empty() => (f.as_str(), true),
                    _ => return Err(bad_field()),
                }
            }
            _ => return Err(bad_field()),
        };
        if descending.is_some_and(|d| d != desc) {
            return Err(HttpError::new(
                400,
                "unsupported_mixed_sort",
                "Sorts currently only support a single direction for all fields.",
            ));
        }
        if name != "_id" {
            return Err(no_index());
        }
        descending = Some(desc);
    }
    if descending.is_some() && !bounds_id(selector) {
        return Err(no_index());
    }
    Ok(descending.unwrap_or(false))
}

/// Whether a selector bounds `_id` where CouchDB's special index can use it: at its top or
/// in a top-level `$and`, by equality or a range operator.
fn bounds_id(selector: &Value) -> bool {
    let Some(m) = selector.as_object() else {
        return false;
    };
    m.iter().any(|(k, v)| match k.as_str() {
        "_id" => match v {
            Value::Object(ops) => ops
                .keys()
                .any(|op| matches!(op.as_str(), "$eq" | "$lt" | "$lte" | "$gt" | "$gte")),
            _ => true,
        },
        "$and" => v
            .as_array()
            .is_some_and(|parts| parts.iter().any(bounds_id)),
        _ => false,
    })
}

/// The id a bookmark of ours carries.
fn decode_bookmark(b: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(b).ok()?;
    match serde_json::from_slice::<Value>(&bytes).ok()? {
        Value::Array(a) if a.len() == 1 => a[0].as_str().map(str::to_string),
        _ => None,
    }
}

/// The documents (design documents left out) the selector matches, after `skip` of them and
/// at most `limit`; how many documents were read, and the id of the last one returned.
fn scan(
    snap: &settee_db::DbSnapshot,
    q: &FindQuery,
) -> HttpResult<(Vec<Value>, u64, Option<String>)> {
    let opts = AllDocsOptions {
        start: q.after.clone(),
        include_docs: true,
        descending: q.descending,
        doc: DocOptions {
            conflicts: q.conflicts,
            ..DocOptions::default()
        },
        ..AllDocsOptions::default()
    };
    let (mut docs, mut examined, mut skipped, mut last) = (Vec::new(), 0u64, 0u64, None);
    if q.limit == 0 {
        return Ok((docs, examined, last));
    }
    for row in snap.all_docs(opts)? {
        let row = row?;
        if row.id.starts_with(DESIGN_PREFIX) || q.after.as_deref() == Some(row.id.as_str()) {
            continue;
        }
        let Some(bytes) = row.doc else { continue };
        examined += 1;
        let doc: Value = crate::doc::parse_doc(&bytes)?;
        if !q.selector.matches(&doc) {
            continue;
        }
        // Skipped matches move the bookmark too, as in CouchDB.
        last = Some(row.id);
        if skipped < q.skip {
            skipped += 1;
            continue;
        }
        docs.push(doc);
        if docs.len() as u64 >= q.limit {
            break;
        }
    }
    Ok((docs, examined, last))
}

/// Each document cut down to `fields` (dotted paths into nested objects), when given.
fn project(docs: Vec<Value>, fields: Option<&[String]>) -> Vec<Value> {
    let Some(fields) = fields.filter(|f| !f.is_empty()) else {
        return docs;
    };
    let paths: Vec<Vec<String>> = fields
        .iter()
        .map(|name| settee_mango::field_path(name))
        .collect();
    docs.into_iter()
        .map(|doc| {
            let mut out = Value::Object(Map::new());
            for path in &paths {
                if let Some(v) = settee_mango::field(&doc, path) {
                    put_path(&mut out, path, v.clone());
                }
            }
            out
        })
        .collect()
}

/// Sets `value` at `path` in `out`, making the objects on the way.
fn put_path(out: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = out;
    for p in parents {
        let Value::Object(map) = at else { return };
        at = map
            .entry(p.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Value::Object(map) = at {
        map.insert(last.clone(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_cut_along_dotted_paths() {
        let doc = json!({"_id": "a", "name": {"first": "Ann", "last": "Lee"}, "age": 3});
        let cut = project(
            vec![doc],
            Some(&[
                "_id".to_string(),
                "name.first".to_string(),
                "nope.x".to_string(),
            ]),
        );
        assert_eq!(cut, vec![json!({"_id": "a", "name": {"first": "Ann"}})]);
        let cut = project(
            vec![json!({"a.b": 1, "t": [5, 6]})],
            Some(&["a\\.b".to_string(), "t.1".to_string()]),
        );
        assert_eq!(cut, vec![json!({"a.b": 1, "t": {"1": 6}})]);
    }

    #[test]
    fn only_id_sorts_without_an_index() {
        let by_id = json!({"_id": {"$gt": null}});
        assert!(!sort_descending(None, &json!({})).unwrap());
        assert!(sort_descending(Some(&json!([{"_id": "desc"}])), &by_id).unwrap());
        assert!(!sort_descending(Some(&json!(["_id"])), &json!({"$and": [{"_id": "x"}]})).unwrap());
        let error = |sort: Value, selector: &Value| {
            sort_descending(Some(&sort), selector).unwrap_err().error
        };
        assert_eq!(
            error(json!(["_id"]), &json!({"n": 1})),
            "no_usable_index",
            "the selector must bound _id"
        );
        assert_eq!(error(json!(["age"]), &by_id), "no_usable_index");
        assert_eq!(
            error(json!([{"_id": "sideways"}]), &by_id),
            "invalid_sort_field"
        );
        assert_eq!(
            error(json!(["_id", {"_id": "desc"}]), &by_id),
            "unsupported_mixed_sort"
        );
        assert_eq!(error(json!("_id"), &by_id), "invalid_sort_json");
    }

    #[test]
    fn bodies_are_checked_as_couchdb_checks_them() {
        let parse = |v: Value| {
            FindQuery::parse(v.as_object().unwrap(), 25)
                .err()
                .map(|e| (e.error, e.reason))
        };
        assert_eq!(
            parse(json!({"selector": {}, "limt": 1})),
            Some((
                "invalid_key".into(),
                "Invalid key limt for this request.".into()
            ))
        );
        assert_eq!(
            parse(json!({"selector": []})).unwrap().0,
            "invalid_selector_json"
        );
        assert_eq!(
            parse(json!({"selector": {}, "limit": -1})),
            Some((
                "invalid_non_neg_integer".into(),
                "-1 is not an integer greater than or equal to zero".into()
            ))
        );
        assert_eq!(
            parse(json!({"selector": {}, "conflicts": "true"}))
                .unwrap()
                .0,
            "invalid_boolean"
        );
        assert_eq!(
            parse(json!({"selector": {}, "bookmark": null, "r": 1, "use_index": "x"})),
            None
        );
        assert_eq!(
            use_index_warning(Some(&json!(["d", "v"]))).unwrap(),
            "_design/d, v was not used because it is not a valid index for this query."
        );
    }

    #[test]
    fn bookmarks_round_trip_and_refuse_anything_else() {
        let b = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json!(["doc7"])).unwrap());
        assert_eq!(decode_bookmark(&b).as_deref(), Some("doc7"));
        assert_eq!(decode_bookmark("!!"), None);
        assert_eq!(decode_bookmark(&URL_SAFE_NO_PAD.encode(b"{}")), None);
    }
}
