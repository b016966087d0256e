//! `POST /_replicate`, `/_scheduler/jobs` and `/_scheduler/docs`: the HTTP edge of the
//! node's replicator.

use std::sync::Arc;

use hyper::Method;
use serde_json::{json, Value};

use crate::error::{HttpError, HttpResult};
use crate::node::only;
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

/// A replicator error as CouchDB's `_replicate` answers it.
fn replicate_error(e: &settee_replicator::Error) -> HttpError {
    let (status, error, reason) = e.couch();
    // CouchDB answers a missing database of a replication with 500.
    let status = if error == "db_not_found" { 500 } else { status };
    HttpError::new(status, &error, reason)
}

/// `POST /_replicate`.
pub async fn replicate(state: &Arc<State>, req: &mut Req) -> HttpResult<Response> {
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    req.require_json()?;
    let body = req.json_object(state.max_request).await?;
    let (status, answer) = state
        .replicator
        .replicate(&Value::Object(body), req.user.clone())
        .await
        .map_err(|e| replicate_error(&e))?;
    Ok(reply::json(status, &answer))
}

/// `limit` and `skip` of a scheduler listing.
fn paging(req: &Req) -> HttpResult<(Option<usize>, usize)> {
    let limit = req.query.u64("limit")?.map(|n| n as usize);
    let skip = req.query.u64("skip")?.unwrap_or(0) as usize;
    Ok((limit, skip))
}

fn missing() -> HttpError {
    HttpError::not_found("missing")
}

/// `GET /_scheduler/...`.
pub fn scheduler(state: &Arc<State>, req: &Req, rest: &[&str]) -> HttpResult<Response> {
    only(req, &[Method::GET, Method::HEAD], "GET,HEAD")?;
    let r = &state.replicator;
    match rest {
        ["jobs"] => {
            let (limit, skip) = paging(req)?;
            Ok(reply::json(200, &r.jobs_json(limit, skip)))
        }
        ["jobs", id] => {
            let all = r.jobs_json(None, 0);
            let job = all["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|j| j["id"] == json!(id))
                .cloned()
                .ok_or_else(missing)?;
            Ok(reply::json(200, &job))
        }
        ["docs"] => {
            let (limit, skip) = paging(req)?;
            Ok(reply::json(200, &r.docs_json(None, limit, skip)))
        }
        ["docs", path @ ..] => {
            let joined = path.join("/");
            if settee_replicator::is_replicator_db(&joined) {
                let (limit, skip) = paging(req)?;
                return Ok(reply::json(200, &r.docs_json(Some(&joined), limit, skip)));
            }
            let (db, doc_id) = joined.rsplit_once('/').ok_or_else(missing)?;
            if !settee_replicator::is_replicator_db(db) {
                return Err(missing());
            }
            let doc = r.doc_state(db, doc_id).ok_or_else(missing)?;
            Ok(reply::json(200, &doc))
        }
        _ => Err(HttpError::not_found("Not found")),
    }
}
