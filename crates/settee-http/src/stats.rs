//! The node's statistics over HTTP: `GET /_node/{node}/_stats[/{group}/{metric}…]` in
//! CouchDB's JSON, `/_prometheus` in Prometheus's text format, and `/_system`.

use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::Method;

use crate::error::HttpResult;
use crate::node::only;
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

/// Brings the gauges read when asked up to date.
fn sample(state: &State) {
    state.node.sample_stats();
    state.replicator.count_jobs();
}

/// `GET /_node/{node}/_stats` and below: the group or metric at the path, `null` where
/// there is none (as CouchDB answers).
pub fn stats(state: &State, req: &Req, path: &[&str]) -> HttpResult<Response> {
    only(req, &[Method::GET, Method::HEAD], "GET")?;
    sample(state);
    Ok(reply::json(200, &settee_metrics::stats_at(path)))
}

/// `GET /_node/{node}/_prometheus`.
pub fn prometheus(state: &State, req: &Req) -> HttpResult<Response> {
    only(req, &[Method::GET, Method::HEAD], "GET")?;
    sample(state);
    let text = settee_metrics::prometheus(&state.node.prometheus_samples(run_queue()));
    let mut resp = reply::bytes(200, text.into_bytes());
    let h = resp.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("must-revalidate"));
    Ok(resp)
}

/// `GET /_node/{node}/_system`.
pub fn system(state: &State, req: &Req) -> HttpResult<Response> {
    only(req, &[Method::GET, Method::HEAD], "GET")?;
    let mut system = state.node.system(run_queue());
    // Not CouchDB's: the HTTP connections open now (the admin UI's dashboard shows them).
    system["http_connections"] = serde_json::json!(state.connections.count());
    Ok(reply::json(200, &system))
}

/// `GET /_node/{node}/_versions`.
pub fn versions(req: &Req) -> HttpResult<Response> {
    only(req, &[Method::GET, Method::HEAD], "GET")?;
    Ok(reply::json(200, &settee_node::stats::versions()))
}

/// Tasks waiting in the request runtime's global queue.
fn run_queue() -> u64 {
    tokio::runtime::Handle::try_current().map_or(0, |h| h.metrics().global_queue_depth() as u64)
}
