//! `/{db}/_partition/{p}` of a partitioned database: the partition's counts and sizes, and
//! its `_all_docs`, views, `_find` and `_explain`, which are the database's endpoints with
//! the partition as their `partition` (the query parameter both `_all_docs` and views take
//! on the database's own paths too).

use std::sync::Arc;

use hyper::Method;
use serde_json::json;

use crate::db::open;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::{Query, Req};
use crate::server::State;

/// Routes `/{db}/_partition/…`.
pub async fn route(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    let Some(p) = req.segments.get(2).filter(|p| !p.is_empty()).cloned() else {
        return Err(HttpError::bad_request("invalid_partition_req"));
    };
    settee_db::validate_partition(&p)?;
    let db = open(state, name)?;
    if !db.partitioned() {
        return Err(HttpError::bad_request("database is not partitioned"));
    }
    let rest: Vec<String> = req.segments[3..].to_vec();
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    use settee_metrics::{inc, Metric};
    match rest[..] {
        [] => info(req, &db, &p),
        ["_all_docs"] => {
            inc(Metric::HttpdPartitionAllDocsRequests);
            scope(req, &p)?;
            Box::pin(crate::db::all_docs(state, req, name, "_all_docs")).await
        }
        ["_design", ddoc, "_view", view] => {
            inc(Metric::HttpdPartitionViewRequests);
            scope(req, &p)?;
            Box::pin(crate::view::view(state, req, name, ddoc, view)).await
        }
        ["_design", ddoc, "_search", index] => {
            scope(req, &p)?;
            Box::pin(crate::search::search(state, req, name, ddoc, index)).await
        }
        ["_find"] => {
            inc(Metric::HttpdPartitionFindRequests);
            Box::pin(crate::find::find(state, req, name, Some(&p))).await
        }
        ["_explain"] => {
            inc(Metric::HttpdPartitionExplainRequests);
            Box::pin(crate::find::explain(state, req, name, Some(&p))).await
        }
        _ => Err(HttpError::not_found("missing")),
    }
}

/// `GET /{db}/_partition/{p}`: its document counts and sizes, from the trees' reductions.
fn info(req: &Req, db: &settee_db::Database, p: &str) -> HttpResult<Response> {
    if req.method != Method::GET && req.method != Method::HEAD {
        return Err(HttpError::method_not_allowed("GET"));
    }
    let counts = db.snapshot().partition_counts(p)?;
    Ok(reply::json(
        200,
        &json!({
            "db_name": db.name(),
            "sizes": {"active": counts.external + counts.blobs, "external": counts.external},
            "partition": p,
            "doc_count": counts.live,
            "doc_del_count": counts.deleted,
        }),
    ))
}

/// Makes `p` the request's `partition` parameter; a different one given is CouchDB's
/// conflict.
fn scope(req: &mut Req, p: &str) -> HttpResult<()> {
    match req.query.get("partition") {
        Some(given) if given != p => Err(HttpError::bad_request(
            "Conflicting value for `partition` in query string",
        )),
        Some(_) => Ok(()),
        None => {
            req.query.0.push(("partition".into(), p.into()));
            Ok(())
        }
    }
}

/// The `partition` parameter of a query, checked by CouchDB's rules for partition names.
pub fn param(q: &Query) -> HttpResult<Option<&str>> {
    match q.get("partition") {
        None => Ok(None),
        Some(p) => {
            settee_db::validate_partition(p)?;
            Ok(Some(p))
        }
    }
}
