//! View endpoints: `/{db}/_design/{ddoc}/_view/{view}` (GET, and POST with `keys` or
//! `queries`), `…/_view/{view}/queries`, `/{db}/_design/{ddoc}/_info`,
//! `/{db}/_compact/{ddoc}` and `/{db}/_view_cleanup`, with CouchDB's parameters and errors.

use std::collections::HashSet;
use std::sync::Arc;

use hyper::Method;
use serde_json::{json, Value};
use settee_db::{Database, DbSnapshot, DocOptions};
use settee_json::Rev;
use settee_store::Snapshot;
use settee_views::plan::{plan, Plan, Update};
use settee_views::{query, DesignDoc, Index, MapRow, Views};

use crate::db::open;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Gone, Out, Response};
use crate::request::{Query, Req};
use crate::server::State;

/// The query string (with a body's members) as a view query's parameters.
impl settee_views::plan::Params for Query {
    type Error = HttpError;

    fn text(&self, name: &str) -> Option<&str> {
        self.get(name)
    }

    fn bool(&self, name: &str) -> HttpResult<Option<bool>> {
        Query::bool(self, name)
    }

    fn flag(&self, name: &str) -> HttpResult<bool> {
        Query::flag(self, name)
    }

    fn u64(&self, name: &str) -> HttpResult<Option<u64>> {
        Query::u64(self, name)
    }

    fn json(&self, name: &str) -> HttpResult<Option<Value>> {
        Query::json(self, name)
    }

    fn key_range(&self) -> HttpResult<settee_views::plan::KeyRange> {
        let r = Query::key_range(self)?;
        Ok(settee_views::plan::KeyRange {
            start_key: r.start_key,
            end_key: r.end_key,
            start_docid: r.start_docid,
            end_docid: r.end_docid,
        })
    }
}

/// The design document and its index, for a request on `_design/{ddoc}`.
fn design(state: &State, db: &Arc<Database>, ddoc: &str) -> HttpResult<(DesignDoc, Arc<Index>)> {
    let ddoc = Views::design_doc(&db.snapshot(), ddoc)?;
    let index = state.node.views.index(db, &ddoc)?;
    Ok((ddoc, index))
}

/// Brings the index up to date as the query asked; the snapshot to answer from.
async fn ready(
    state: &Arc<State>,
    db: &Arc<Database>,
    index: &Arc<Index>,
    update: Update,
) -> HttpResult<Snapshot> {
    if update == Update::Now {
        state.node.views.refresh(db, index).await?;
    }
    let snap = index.snapshot();
    if update == Update::After {
        state.node.views.refresh_in_background(db, index);
    }
    Ok(snap)
}

/// `GET|POST /{db}/_design/{ddoc}/_view/{view}`.
pub async fn view(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    ddoc: &str,
    view: &str,
) -> HttpResult<Response> {
    let db = open(state, name)?;
    let body = match req.method {
        Method::GET | Method::HEAD => None,
        Method::POST => {
            req.require_json()?;
            let body = req.json_object(state.max_request).await?;
            if body.contains_key("queries") {
                return Err(HttpError::bad_request(
                    "The `queries` parameter is no longer supported at this endpoint",
                ));
            }
            if body.get("keys").is_some_and(|k| !k.is_array()) {
                return Err(HttpError::bad_request("`keys` member must be an array."));
            }
            Some(body)
        }
        _ => return Err(HttpError::method_not_allowed("GET,HEAD,POST")),
    };
    // As CouchDB: a POST body's members are query options, the query string winning.
    settee_metrics::inc(settee_metrics::Metric::HttpdViewReads);
    let query = single_keys_as_key(req.query.with_body(body.as_ref(), &[]));
    crate::partition::param(&query)?;
    let (ddoc, index) = design(state, &db, ddoc)?;
    let plan = plan(&ddoc, view, &query, None)?;
    let snap = ready(state, &db, &index, plan.update).await?;
    let dbsnap = db.snapshot();
    if plan.reduce {
        let mut out = Vec::new();
        write_reduce(&mut out, &index, &snap, &plan)?;
        return Ok(reply::json_bytes(200, out));
    }
    let head = map_head(&index, &snap, &plan)?;
    let rows = query::map_rows(&index, &snap, plan.view, &plan.query)?;
    Ok(reply::stream(200, move |sink| {
        sink.write(head.as_bytes())?;
        write_map_rows(sink, rows, &dbsnap, &plan)?;
        sink.write(b"\r\n]}\n")
    }))
}

/// A query whose `keys` name one key, with `key` in their place, as CouchDB reads a view
/// query (a reduce view then reduces that key's rows without `group`).
fn single_keys_as_key(query: Query) -> Query {
    Query(
        query
            .0
            .into_iter()
            .map(
                |(k, v)| match (k == "keys").then(|| serde_json::from_str::<Value>(&v)) {
                    Some(Ok(Value::Array(mut one))) if one.len() == 1 => {
                        ("key".to_string(), one.pop().expect("one key").to_string())
                    }
                    _ => (k, v),
                },
            )
            .collect(),
    )
}

/// `POST /{db}/_design/{ddoc}/_view/{view}/queries`.
pub async fn queries(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    ddoc: &str,
    view: &str,
) -> HttpResult<Response> {
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    let db = open(state, name)?;
    let queries = req.queries(state.max_request).await?;
    Box::pin(many(state, &db, req, ddoc, view, queries)).await
}

/// Several queries of one view, each validated before any is answered.
async fn many(
    state: &Arc<State>,
    db: &Arc<Database>,
    req: &Req,
    ddoc: &str,
    view: &str,
    queries: Vec<serde_json::Map<String, Value>>,
) -> HttpResult<Response> {
    let (ddoc, index) = design(state, db, ddoc)?;
    let mut plans = Vec::with_capacity(queries.len());
    for members in &queries {
        let params = query_params(&req.query, members);
        let keys = members.get("keys").cloned();
        crate::partition::param(&params)?;
        plans.push(plan(&ddoc, view, &params, keys)?);
    }
    let update = if plans.iter().any(|p| p.update == Update::Now) {
        Update::Now
    } else {
        plans.first().map_or(Update::Now, |p| p.update)
    };
    let snap = ready(state, db, &index, update).await?;
    let dbsnap = db.snapshot();
    let mut out = b"{\"results\":[\r\n".to_vec();
    for (i, plan) in plans.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",\r\n");
        }
        if plan.reduce {
            write_reduce(&mut out, &index, &snap, plan)?;
        } else {
            out.extend_from_slice(map_head(&index, &snap, plan)?.as_bytes());
            let rows = query::map_rows(&index, &snap, plan.view, &plan.query)?;
            let _ = write_map_rows(&mut out, rows, &dbsnap, plan);
            out.extend_from_slice(b"\r\n]}");
        }
    }
    out.extend_from_slice(b"\r\n]}\n");
    Ok(reply::json_bytes(200, out))
}

/// A query object's members as query-string parameters (URL parameters are defaults, but
/// grouping and keys start afresh for each query).
fn query_params(url: &Query, members: &serde_json::Map<String, Value>) -> Query {
    let mut pairs: Vec<(String, String)> = url
        .0
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "group" | "group_level" | "keys"))
        .cloned()
        .collect();
    for (k, v) in members {
        if k == "keys" {
            continue;
        }
        let text = match v {
            Value::String(s)
                if !matches!(
                    k.as_str(),
                    "key" | "startkey" | "start_key" | "endkey" | "end_key"
                ) =>
            {
                s.clone()
            }
            other => other.to_string(),
        };
        pairs.push((k.clone(), text));
    }
    Query(pairs)
}

/// A map query's `total_rows` and `offset`.
fn map_counts(index: &Index, snap: &Snapshot, plan: &Plan) -> HttpResult<(u64, u64)> {
    let total = query::total_rows(snap, plan.view)?;
    let offset = query::offset(index, snap, plan.view, &plan.query)?.min(total);
    Ok((total, offset))
}

fn map_head(index: &Index, snap: &Snapshot, plan: &Plan) -> HttpResult<String> {
    let (total, offset) = map_counts(index, snap, plan)?;
    let mut head = format!("{{\"total_rows\":{total},\"offset\":{offset},");
    if plan.update_seq {
        head.push_str(&format!(
            "\"update_seq\":\"{}\",",
            index.meta_of(snap)?.seq.encode()
        ));
    }
    head.push_str("\"rows\":[\r\n");
    Ok(head)
}

fn write_map_rows(
    out: &mut impl Out,
    rows: impl Iterator<Item = settee_views::Result<MapRow>>,
    db: &DbSnapshot,
    plan: &Plan,
) -> Result<(), Gone> {
    let mut first = true;
    for row in rows {
        let row = match row {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "reading a view");
                break;
            }
        };
        let mut line = Vec::with_capacity(64 + row.key.len() + row.value.len());
        if !first {
            line.extend_from_slice(b",\r\n");
        }
        first = false;
        map_row_json(&mut line, &row, db, plan);
        out.put(&line)?;
    }
    Ok(())
}

/// One map row as JSON: `id`, `key`, `value`, and `doc` when the query includes them.
fn map_row_json(line: &mut Vec<u8>, row: &MapRow, db: &DbSnapshot, plan: &Plan) {
    line.extend_from_slice(b"{\"id\":");
    settee_json::body::write_str(line, &row.id);
    line.extend_from_slice(b",\"key\":");
    line.extend_from_slice(row.key.as_bytes());
    line.extend_from_slice(b",\"value\":");
    line.extend_from_slice(row.value.as_bytes());
    if plan.include_docs {
        line.extend_from_slice(b",\"doc\":");
        line.extend_from_slice(&row_doc(db, row, &plan.doc));
    }
    line.push(b'}');
}

/// A view's answer as a list function reads it: the head (`total_rows` and `offset` of a
/// map view, `update_seq` when asked) and each row's JSON, read as the list asks for them.
pub(crate) struct ListRows {
    /// The list function's `head`.
    pub head: Value,
    /// The rows.
    pub rows: Box<dyn Iterator<Item = String> + Send>,
}

/// The rows of view `view` of design document `ddoc` for a list function, queried with
/// `query` as the view itself would be.
pub(crate) async fn list_rows(
    state: &Arc<State>,
    db: &Arc<Database>,
    query: Query,
    ddoc: &str,
    view: &str,
) -> HttpResult<ListRows> {
    let query = single_keys_as_key(query);
    let (ddoc, index) = design(state, db, ddoc)?;
    let plan = plan(&ddoc, view, &query, None)?;
    let snap = ready(state, db, &index, plan.update).await?;
    let mut head = serde_json::Map::new();
    if plan.update_seq {
        head.insert(
            "update_seq".into(),
            json!(index.meta_of(&snap)?.seq.encode()),
        );
    }
    if plan.reduce {
        let rows = query::reduce_rows(&index, &snap, plan.view, &plan.query)?;
        let rows: Vec<String> = rows
            .into_iter()
            .map(|row| match row.value {
                Ok(v) => format!("{{\"key\":{},\"value\":{v}}}", row.key),
                Err((e, r)) => format!(
                    "{{\"key\":{},\"error\":{},\"reason\":{}}}",
                    row.key,
                    json!(e),
                    json!(r)
                ),
            })
            .collect();
        return Ok(ListRows {
            head: Value::Object(head),
            rows: Box::new(rows.into_iter()),
        });
    }
    let (total, offset) = map_counts(&index, &snap, &plan)?;
    head.insert("total_rows".into(), json!(total));
    head.insert("offset".into(), json!(offset));
    let dbsnap = db.snapshot();
    let rows = query::map_rows(&index, &snap, plan.view, &plan.query)?
        .map_while(|row| {
            row.map_err(|e| tracing::error!(error = %e, "reading a view for a list"))
                .ok()
        })
        .map(move |row| {
            let mut line = Vec::with_capacity(64 + row.key.len() + row.value.len());
            map_row_json(&mut line, &row, &dbsnap, &plan);
            String::from_utf8(line).unwrap_or_default()
        });
    Ok(ListRows {
        head: Value::Object(head),
        rows: Box::new(rows),
    })
}

/// The document a row includes: the one a `{"_id": …}` value links to (at `_rev` if given),
/// else the emitting one; `null` when it is missing or deleted.
fn row_doc(db: &DbSnapshot, row: &MapRow, opts: &DocOptions) -> Vec<u8> {
    let linked = if row.value.starts_with('{') {
        serde_json::from_str::<Value>(&row.value).ok()
    } else {
        None
    };
    let found = match linked.as_ref().and_then(|v| v.get("_id")) {
        Some(Value::String(id)) => {
            let rev = linked
                .as_ref()
                .and_then(|v| v.get("_rev"))
                .and_then(Value::as_str)
                .map(Rev::parse);
            match rev {
                Some(Ok(rev)) => db
                    .open_doc(id, Some(&rev), opts)
                    .ok()
                    .filter(|d| !is_deleted(d)),
                Some(Err(_)) => None,
                None => db.open_doc(id, None, opts).ok(),
            }
        }
        Some(_) => None,
        None => db.open_doc(&row.id, None, opts).ok(),
    };
    found.unwrap_or_else(|| b"null".to_vec())
}

fn is_deleted(doc: &[u8]) -> bool {
    settee_json::deep::from_slice::<Value>(doc)
        .ok()
        .and_then(|d| d.get("_deleted").and_then(Value::as_bool))
        .unwrap_or(false)
}

fn write_reduce(out: &mut Vec<u8>, index: &Index, snap: &Snapshot, plan: &Plan) -> HttpResult<()> {
    let rows = query::reduce_rows(index, snap, plan.view, &plan.query)?;
    out.push(b'{');
    if plan.update_seq {
        out.extend_from_slice(
            format!("\"update_seq\":\"{}\",", index.meta_of(snap)?.seq.encode()).as_bytes(),
        );
    }
    out.extend_from_slice(b"\"rows\":[\r\n");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",\r\n");
        }
        out.extend_from_slice(b"{\"key\":");
        out.extend_from_slice(row.key.as_bytes());
        match &row.value {
            Ok(v) => {
                out.extend_from_slice(b",\"value\":");
                out.extend_from_slice(v.as_bytes());
            }
            Err((error, reason)) => {
                out.extend_from_slice(
                    format!(",\"error\":{},\"reason\":{}", json!(error), json!(reason)).as_bytes(),
                );
            }
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"\r\n]}");
    Ok(())
}

/// `GET /{db}/_design/{ddoc}/_info`.
pub fn info(state: &State, req: &Req, name: &str, ddoc_name: &str) -> HttpResult<Response> {
    if req.method != Method::GET && req.method != Method::HEAD {
        return Err(HttpError::method_not_allowed("GET"));
    }
    let db = open(state, name)?;
    let (ddoc, index) = design(state, &db, ddoc_name)?;
    let snap = index.snapshot();
    let meta = index.meta_of(&snap)?;
    let file = std::fs::metadata(index.path()).map_or(0, |m| m.len());
    let active = snap.nodes_bytes().map_err(settee_db::Error::Store)?;
    let (running, waiting, compacting) = index.state();
    let pending = db.snapshot().pending(&meta.seq)?;
    let body = json!({
        "name": ddoc_name,
        "view_index": {
            "updates_pending": {"minimum": pending, "preferred": pending, "total": pending},
            "waiting_commit": false,
            "waiting_clients": waiting,
            "updater_running": running,
            "update_seq": meta.seq.total(),
            "sizes": {"file": file, "external": file, "active": active},
            "signature": index.signature(),
            "purge_seq": meta.purge_seq,
            "language": ddoc.language,
            "compact_running": compacting,
        }
    });
    Ok(reply::json(200, &body))
}

/// `POST /{db}/_compact/{ddoc}`.
pub fn compact(state: &State, req: &Req, name: &str, ddoc: &str) -> HttpResult<Response> {
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    req.require_json()?;
    let db = open(state, name)?;
    match design(state, &db, ddoc) {
        Ok((_, index)) => {
            state.node.views.compact(&db, &index);
        }
        // A design document in a language without a query server has no index to compact;
        // CouchDB accepts the request all the same.
        Err(e) if e.error == "unknown_query_language" => {}
        Err(e) => return Err(e),
    }
    Ok(reply::json(202, &json!({"ok": true})))
}

/// `POST /{db}/_view_cleanup`: removes index files no design document uses.
pub fn cleanup(db: &Arc<Database>) -> HttpResult<()> {
    let snap = db.snapshot();
    let mut keep = HashSet::new();
    for id in snap.design_docs()? {
        let id = id?;
        let Ok(body) = snap.open_doc(&id, None, &DocOptions::default()) else {
            continue;
        };
        let Ok(doc) = settee_json::deep::from_slice::<Value>(&body) else {
            continue;
        };
        if let Ok(d) = DesignDoc::parse(&id, &doc, db.partitioned()) {
            keep.insert(d.signature());
        }
    }
    Views::cleanup(db, &keep)?;
    Ok(())
}

/// `_changes?filter=_view&view=ddoc/view` (see [`Views::view_filter`]).
pub fn view_filter(state: &State, db: &Database, view: &str) -> HttpResult<settee_db::DocFilter> {
    Ok(doc_filter(state.node.views.view_filter(db, view)?))
}

/// `_changes?filter=ddoc/name`, the function seeing the request as CouchDB builds it (see
/// [`Views::design_filter`]).
pub fn js_filter(
    state: &State,
    db: &Database,
    filter: &str,
    req: &Req,
) -> HttpResult<settee_db::DocFilter> {
    let request = filter_request(db, req);
    Ok(doc_filter(
        state.node.views.design_filter(db, filter, request)?,
    ))
}

/// A filter as a feed calls it, its failures CouchDB's errors.
fn doc_filter(filter: settee_views::Filter) -> settee_db::DocFilter {
    settee_db::DocFilter(Arc::new(move |doc: &Value| {
        filter(doc).map_err(|e| filter_error(&e))
    }))
}

/// What a failed filter ends its feed with: CouchDB's error for the failure.
fn filter_error<E>(e: &E) -> settee_db::FilterError
where
    for<'a> HttpError: From<&'a E>,
{
    let e = HttpError::from(e);
    settee_db::FilterError {
        error: e.error,
        reason: e.reason,
    }
}

/// The request object filter functions receive, as CouchDB builds it.
fn filter_request(db: &Database, req: &Req) -> Value {
    let query: serde_json::Map<String, Value> = req
        .query
        .0
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let headers: serde_json::Map<String, Value> = req
        .headers
        .iter()
        .filter_map(|(k, v)| {
            Some((
                k.as_str().to_string(),
                Value::String(v.to_str().ok()?.to_string()),
            ))
        })
        .collect();
    let name = req.user.as_ref().map(|u| u.name.clone());
    let roles = req.user.as_ref().map_or_else(Vec::new, |u| u.roles.clone());
    json!({
        "info": {"db_name": db.name()},
        "id": null,
        "method": req.method.as_str(),
        "path": req.segments,
        "requested_path": req.segments,
        "query": query,
        "headers": headers,
        "body": "undefined",
        "peer": "127.0.0.1",
        "form": {},
        "cookie": {},
        "userCtx": {"db": db.name(), "name": name, "roles": roles},
        "secObj": {},
    })
}
