//! Mango over HTTP: `POST /{db}/_find` and `GET /{db}/_index`. Parsing, planning and running
//! the query are `settee-mango`'s; this reads the body and the settings, and renders.

use std::sync::Arc;

use hyper::Method;
use serde_json::json;
use settee_mango::{FindQuery, FindSettings};

use settee_config::registry as setting;

use crate::db::{join_error, open};
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

/// `POST /{db}/_find`.
pub async fn find(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
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
    let query = FindQuery::parse(&body, default_limit)?;
    let stats = query.execution_stats;
    let snap = db.snapshot();
    let found = tokio::task::spawn_blocking(move || settee_mango::find(&snap, query, settings))
        .await
        .map_err(join_error)??;
    Ok(reply::json(200, &found.to_json(stats)))
}

/// `GET /{db}/_index`: the database's indexes.
pub fn index(state: &State, req: &Req, name: &str) -> HttpResult<Response> {
    match req.method {
        Method::GET | Method::HEAD => {
            let db = open(state, name)?;
            let indexes: Vec<_> = settee_mango::indexes(&db.snapshot())
                .iter()
                .map(|i| i.definition())
                .collect();
            Ok(reply::json(
                200,
                &json!({"total_rows": indexes.len(), "indexes": indexes}),
            ))
        }
        _ => Err(crate::node::unbuilt(req, "_index", "GET,POST")),
    }
}
