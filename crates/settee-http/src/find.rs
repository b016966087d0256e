//! Mango over HTTP: `POST /{db}/_find` and `/_explain`, and the indexes at `/{db}/_index`
//! (list, create, delete, bulk delete). Parsing, planning and running queries, and what an
//! index's design document holds, are `settee-mango`'s; this reads bodies and settings,
//! writes design documents through the node, and renders.

use std::sync::Arc;

use hyper::Method;
use serde_json::{json, Map, Value};
use settee_mango::{FindQuery, FindSettings, NewIndex};

use settee_config::registry as setting;

use crate::db::open;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

/// The `_find` body of a request, with the server's defaults, on `partition` when the path
/// names one.
async fn query(
    state: &Arc<State>,
    req: &mut Req,
    partition: Option<&str>,
) -> HttpResult<(FindQuery, FindSettings)> {
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    req.require_json()?;
    let body = req.json_object(state.max_request).await?;
    let (default_limit, settings) = {
        let config = state.node.config.read().expect("config lock");
        let threshold = config.value::<u64>(&setting::MANGO_INDEX_SCAN_WARNING_THRESHOLD);
        (
            config.value::<u64>(&setting::MANGO_DEFAULT_LIMIT),
            FindSettings {
                scan_warning_threshold: threshold,
            },
        )
    };
    let mut query = FindQuery::parse(&body, default_limit)?;
    if let Some(p) = partition {
        // Not CouchDB's answer (a 500): a body naming another partition is refused.
        if !query.partition.is_empty() && query.partition != p {
            return Err(HttpError::bad_request(
                "Conflicting value for `partition` in the request body",
            ));
        }
        query.partition = p.to_string();
    }
    Ok((query, settings))
}

/// `POST /{db}/_find` (and `/{db}/_partition/{p}/_find`): the documents are sent as they are
/// found.
pub async fn find(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    partition: Option<&str>,
) -> HttpResult<Response> {
    let db = open(state, name)?;
    let (query, settings) = query(state, req, partition).await?;
    let engines = settee_mango::Engines {
        views: &state.node.views,
        search: &state.node.search,
    };
    let prepared = settee_mango::prepare(engines, &db, query, settings).await?;
    let (resp, mut sink) = reply::channel(200, "application/json");
    // Headers wait for the first bytes, so that a query failing early fails the request.
    let ready = sink.hold();
    tokio::task::spawn_blocking(move || {
        // CouchDB's framing: a document a line, then each member after `docs` on its own.
        let mut first = true;
        let mut gone = sink.write(b"{\"docs\":[\r\n").is_err();
        let summary = prepared.run(&mut |doc| {
            let mut line = Vec::with_capacity(256);
            if !first {
                line.extend_from_slice(b",\r\n");
            }
            first = false;
            serde_json::to_writer(&mut line, &doc).expect("JSON");
            gone |= sink.write(&line).is_err();
            !gone
        });
        match summary {
            Ok(summary) => {
                let members = summary.tail(prepared.execution_stats());
                let mut tail = String::from(if first { "]" } else { "\r\n]" });
                if !members.is_empty() {
                    tail.push_str(",\r\n");
                }
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        tail.push_str(",\r\n");
                    }
                    tail.push_str(&format!("{}: {v}", Value::String(k.clone())));
                }
                tail.push_str("}\r\n");
                let _ = sink.write(tail.as_bytes());
                let _ = sink.flush();
            }
            Err(e) => {
                if !sink.fail(HttpError::from(e)) {
                    tracing::error!("a query failed while its answer was sent");
                }
            }
        }
    });
    if let Ok(Err(e)) = ready.await {
        return Err(e);
    }
    Ok(resp)
}

/// `POST /{db}/_explain` (and `/{db}/_partition/{p}/_explain`).
pub async fn explain(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    partition: Option<&str>,
) -> HttpResult<Response> {
    let db = open(state, name)?;
    let (query, _) = query(state, req, partition).await?;
    Ok(reply::json(200, &settee_mango::explain(&db, query).await?))
}

/// `/{db}/_index` and below.
pub async fn index(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    let rest: Vec<String> = req.segments[2..].to_vec();
    match (&req.method, rest.as_slice()) {
        (&Method::GET | &Method::HEAD, []) => list(state, req, name),
        (&Method::POST, []) => create(state, req, name).await,
        (_, []) => Err(HttpError::method_not_allowed("GET,POST")),
        (&Method::POST, [bulk]) if bulk == "_bulk_delete" => bulk_delete(state, req, name).await,
        (_, [bulk]) if bulk == "_bulk_delete" => Err(HttpError::method_not_allowed("POST")),
        (&Method::DELETE, _) => match index_path(&rest) {
            Some((ddoc, kind, name_)) => delete(state, req, name, &ddoc, (&kind, &name_)).await,
            None => {
                open(state, name)?;
                Err(HttpError::new(404, "not_found", "missing"))
            }
        },
        _ => Err(HttpError::method_not_allowed("DELETE")),
    }
}

/// The design document, index type and name of `…/_index/{ddoc}/{json|text}/{name}`
/// (the design document with or without `_design/`).
fn index_path(rest: &[String]) -> Option<(String, String, String)> {
    let known = |kind: &str| kind == "json" || kind == "text";
    match rest {
        [d, ddoc, kind, name] if d == "_design" && known(kind) => {
            Some((format!("_design/{ddoc}"), kind.clone(), name.clone()))
        }
        [ddoc, kind, name] if known(kind) => {
            Some((settee_mango::ddoc_id(ddoc), kind.clone(), name.clone()))
        }
        _ => None,
    }
}

/// `GET /{db}/_index`, with `skip` and `limit`.
fn list(state: &State, req: &Req, name: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    let all = settee_mango::indexes(&db.snapshot())?;
    let total = all.len();
    // CouchDB answers a bad `skip` or `limit` with this 500.
    let bad = || {
        HttpError::new(
            500,
            "invalid_list_index_params",
            "Index parameter ranges: limit > 1, skip > 0",
        )
    };
    let number = |name: &str| match req.query.get(name) {
        None => Ok(None),
        Some(v) => v.parse::<usize>().map(Some).map_err(|_| bad()),
    };
    let skip = number("skip")?.unwrap_or(0);
    let limit = match number("limit")? {
        Some(0) => return Err(bad()),
        l => l.unwrap_or(usize::MAX),
    };
    let page: Vec<Value> = all.into_iter().skip(skip).take(limit).collect();
    Ok(reply::json(
        200,
        &json!({"total_rows": total, "indexes": page}),
    ))
}

/// `POST /{db}/_index`.
async fn create(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    req.require_json()?;
    let body = req.json_object(state.max_request).await?;
    let new = NewIndex::parse(&body, db.partitioned())?;
    let created = (state.node)
        .create_index(req.user.as_ref(), &db, &new)
        .await?;
    let result = if created { "created" } else { "exists" };
    Ok(reply::json(
        200,
        &json!({"result": result, "id": new.ddoc(), "name": new.name()}),
    ))
}

/// `DELETE /{db}/_index/{ddoc}/{json|text}/{name}`.
async fn delete(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    ddoc: &str,
    index: (&str, &str),
) -> HttpResult<Response> {
    let db = open(state, name)?;
    (state.node)
        .delete_indexes(req.user.as_ref(), &db, ddoc, Some(index))
        .await?;
    Ok(reply::json(200, &json!({"ok": true})))
}

/// `POST /{db}/_index/_bulk_delete`: every index of each design document named.
async fn bulk_delete(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    req.require_json()?;
    let body = req.json_object(state.max_request).await?;
    let ids = bulk_delete_ids(&body)?;
    let (mut success, mut fail) = (Vec::new(), Vec::new());
    for id in ids {
        let id = settee_mango::ddoc_id(&id);
        match (state.node)
            .delete_indexes(req.user.as_ref(), &db, &id, None)
            .await
        {
            Ok(()) => success.push(json!({"id": id, "ok": true})),
            Err(e) => fail.push(json!({"id": id, "error": HttpError::from(e).error})),
        }
    }
    // Latest first, as CouchDB lists them.
    success.reverse();
    fail.reverse();
    Ok(reply::json(200, &json!({"success": success, "fail": fail})))
}

/// The design documents a bulk delete names.
fn bulk_delete_ids(body: &Map<String, Value>) -> HttpResult<Vec<String>> {
    if let Some(k) = body.keys().find(|k| !matches!(k.as_str(), "docids" | "w")) {
        return Err(HttpError::new(
            400,
            "invalid_key",
            format!("Invalid key {k} for this request."),
        ));
    }
    if let Some(w) = body.get("w") {
        if w.as_u64().is_none_or(|w| w == 0) {
            return Err(HttpError::new(
                400,
                "invalid_pos_integer",
                format!(
                    "{} is not an integer greater than zero",
                    settee_mango::erl_w(w)
                ),
            ));
        }
    }
    let ids = body.get("docids").ok_or_else(|| {
        HttpError::new(400, "missing_required_key", "Missing required key: docids")
    })?;
    let Value::Array(ids) = ids else {
        return Err(HttpError::new(
            400,
            "invalid_bulk_docs",
            format!(
                "Bulk Delete requires an array of non-null docids. Docids: {}",
                settee_mango::erl_w(ids)
            ),
        ));
    };
    ids.iter()
        .map(|v| {
            v.as_str().map(str::to_string).ok_or_else(|| {
                HttpError::new(
                    400,
                    "invalid_index_name",
                    format!("Invalid index name: {}", settee_mango::erl_w(v)),
                )
            })
        })
        .collect()
}
