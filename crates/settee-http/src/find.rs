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

use crate::db::{join_error, open};
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

/// What CouchDB says when a query runs on the `_all_docs` index.
const NO_INDEX: &str = "No matching index found, create an index to optimize query time.";

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
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    req.require_json()?;
    let db = open(state, name)?;
    let body = req.json_object(state.max_request).await?;
    let q = FindQuery::parse(&body)?;
    let started = Instant::now();
    let snap = db.snapshot();
    let (fields, stats) = (q.fields.clone(), q.execution_stats);
    let (docs, examined, last) = tokio::task::spawn_blocking(move || scan(&snap, &q)).await.map_err(join_error)??;
    let docs = project(docs, fields.as_deref());
    let bookmark = last.map_or_else(|| "nil".to_string(), |id| URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json!([id])).expect("json")));
    let mut out = json!({"docs": docs, "bookmark": bookmark, "warning": NO_INDEX});
    if stats {
        out["execution_stats"] = json!({
            "total_keys_examined": 0,
            "total_docs_examined": examined,
            "total_quorum_docs_examined": 0,
            "results_returned": out["docs"].as_array().map_or(0, Vec::len),
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
            Ok(reply::json(200, &json!({"total_rows": 1, "indexes": [all_docs]})))
        }
        Method::POST => Err(crate::node::not_built("_index")),
        _ => Err(HttpError::method_not_allowed("GET,HEAD,POST")),
    }
}

impl FindQuery {
    /// Reads a `_find` body with CouchDB's defaults (25 documents) and errors.
    fn parse(body: &Map<String, Value>) -> HttpResult<FindQuery> {
        let selector = match body.get("selector") {
            None => return Err(HttpError::new(400, "missing_required_key", "Missing required key: selector")),
            Some(v @ Value::Object(_)) => Selector::parse(v).map_err(|e| HttpError::bad_request(format!("Invalid selector: {e}")))?,
            Some(_) => return Err(HttpError::bad_request("Invalid selector: it must be a JSON object")),
        };
        let count = |key: &str, default: u64| match body.get(key) {
            None => Ok(default),
            Some(v) => v.as_u64().ok_or_else(|| HttpError::bad_request(format!("Invalid value for `{key}`: {v}, it must be a non-negative integer"))),
        };
        let fields = match body.get("fields") {
            None => None,
            Some(Value::Array(a)) => Some(a.iter().map(|f| f.as_str().map(str::to_string)).collect::<Option<Vec<_>>>().ok_or_else(|| HttpError::bad_request("`fields` must be a list of strings"))?),
            Some(_) => return Err(HttpError::bad_request("`fields` must be a list of strings")),
        };
        let after = match body.get("bookmark") {
            None => None,
            Some(Value::String(b)) if b == "nil" => None,
            Some(Value::String(b)) => Some(decode_bookmark(b).ok_or_else(|| HttpError::new(400, "invalid_bookmark", format!("Invalid bookmark value: {b}")))?),
            Some(other) => return Err(HttpError::new(400, "invalid_bookmark", format!("Invalid bookmark value: {other}"))),
        };
        Ok(FindQuery {
            selector,
            limit: count("limit", 25)?,
            skip: count("skip", 0)?,
            fields,
            descending: sort_descending(body.get("sort"))?,
            after,
            conflicts: body.get("conflicts") == Some(&Value::Bool(true)),
            execution_stats: body.get("execution_stats") == Some(&Value::Bool(true)),
        })
    }
}

/// The direction a `sort` asks for; only `_id` can be sorted by without an index.
fn sort_descending(sort: Option<&Value>) -> HttpResult<bool> {
    let no_index = || HttpError::new(400, "no_usable_index", "No index exists for this sort, try indexing by the sort fields.");
    let Some(sort) = sort else { return Ok(false) };
    let Value::Array(fields) = sort else { return Err(HttpError::bad_request("`sort` must be a list")) };
    let mut descending = None;
    for field in fields {
        let (name, desc) = match field {
            Value::String(f) => (f.as_str(), false),
            Value::Object(o) if o.len() == 1 => {
                let (f, dir) = o.iter().next().expect("one member");
                match dir.as_str() {
                    Some("asc") => (f.as_str(), false),
                    Some("desc") => (f.as_str(), true),
                    _ => return Err(HttpError::bad_request(format!("Invalid sort direction for `{f}`: {dir}"))),
                }
            }
            _ => return Err(HttpError::bad_request(format!("Invalid sort field: {field}"))),
        };
        if name != "_id" || descending.is_some_and(|d| d != desc) {
            return Err(no_index());
        }
        descending = Some(desc);
    }
    Ok(descending.unwrap_or(false))
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
fn scan(snap: &settee_db::DbSnapshot, q: &FindQuery) -> HttpResult<(Vec<Value>, u64, Option<String>)> {
    let opts = AllDocsOptions {
        start: q.after.clone(),
        include_docs: true,
        descending: q.descending,
        doc: DocOptions { conflicts: q.conflicts, ..DocOptions::default() },
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
        if skipped < q.skip {
            skipped += 1;
            continue;
        }
        last = Some(row.id);
        docs.push(doc);
        if docs.len() as u64 >= q.limit {
            break;
        }
    }
    Ok((docs, examined, last))
}

/// Each document cut down to `fields` (dotted paths into nested objects), when given.
fn project(docs: Vec<Value>, fields: Option<&[String]>) -> Vec<Value> {
    let Some(fields) = fields.filter(|f| !f.is_empty()) else { return docs };
    docs.into_iter()
        .map(|doc| {
            let mut out = Value::Object(Map::new());
            for field in fields {
                let path: Vec<&str> = field.split('.').collect();
                if let Some(v) = path.iter().try_fold(&doc, |v, p| v.get(p)) {
                    put_path(&mut out, &path, v.clone());
                }
            }
            out
        })
        .collect()
}

/// Sets `value` at `path` in `out`, making the objects on the way.
fn put_path(out: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = out;
    for p in parents {
        let Value::Object(map) = at else { return };
        at = map.entry(p.to_string()).or_insert_with(|| Value::Object(Map::new()));
    }
    if let Value::Object(map) = at {
        map.insert(last.to_string(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_cut_along_dotted_paths() {
        let doc = json!({"_id": "a", "name": {"first": "Ann", "last": "Lee"}, "age": 3});
        let cut = project(vec![doc], Some(&["_id".to_string(), "name.first".to_string(), "nope.x".to_string()]));
        assert_eq!(cut, vec![json!({"_id": "a", "name": {"first": "Ann"}})]);
    }

    #[test]
    fn only_id_sorts_without_an_index() {
        assert!(!sort_descending(None).unwrap());
        assert!(sort_descending(Some(&json!([{"_id": "desc"}]))).unwrap());
        assert!(!sort_descending(Some(&json!(["_id"]))).unwrap());
        assert_eq!(sort_descending(Some(&json!(["age"]))).unwrap_err().error, "no_usable_index");
        assert_eq!(sort_descending(Some(&json!([{"_id": "sideways"}]))).unwrap_err().status, 400);
    }

    #[test]
    fn bookmarks_round_trip_and_refuse_anything_else() {
        let b = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json!(["doc7"])).unwrap());
        assert_eq!(decode_bookmark(&b).as_deref(), Some("doc7"));
        assert_eq!(decode_bookmark("!!"), None);
        assert_eq!(decode_bookmark(&URL_SAFE_NO_PAD.encode(b"{}")), None);
    }
}
