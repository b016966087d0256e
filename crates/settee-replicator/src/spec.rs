//! What a replication is asked to do: a `POST /_replicate` body or a `_replicator`
//! document, read with CouchDB's rules and error reasons.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use settee_config::registry as r;
use settee_config::Config;

use crate::endpoint::Filter;
use crate::error::{Error, Result};

/// One side of a replication as it was described.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointSpec {
    /// A URL, or (no `://` in it) the name of a database of this node.
    pub url: String,
    /// Headers sent with every request (`headers`).
    pub headers: BTreeMap<String, String>,
    /// `auth.basic` credentials.
    pub basic: Option<(String, String)>,
}

impl EndpointSpec {
    /// Whether this names a database of this node.
    pub fn is_local(&self) -> bool {
        !self.url.contains("://")
    }

    /// The endpoint as shown to anyone: its URL without credentials.
    pub fn display(&self) -> String {
        settee_node::strip_userinfo(&self.url)
    }
}

/// How a job runs: connection settings and batch sizes, from `[replicator]` and the
/// replication's own options.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Connections kept open to each remote endpoint.
    pub http_connections: usize,
    /// How long to wait to connect (and, at least 30 s, for an answer).
    pub connection_timeout: Duration,
    /// Retries of a failed request before the job crashes.
    pub retries_per_request: u32,
    /// Workers copying batches at once.
    pub worker_processes: usize,
    /// Changes per batch.
    pub worker_batch_size: usize,
    /// Time between checkpoints.
    pub checkpoint_interval: Duration,
    /// Whether checkpoints are written at all.
    pub use_checkpoints: bool,
    /// Whether documents are read with `_bulk_get`.
    pub use_bulk_get: bool,
}

impl Default for Settings {
    /// The defaults of `[replicator]` (the configuration registry's).
    fn default() -> Settings {
        Settings::from_config(&Config::default())
    }
}

impl Settings {
    /// The settings `[replicator]` gives, the registry's defaults elsewhere.
    pub fn from_config(config: &Config) -> Settings {
        let n = |setting| config.value::<u64>(setting);
        Settings {
            http_connections: n(&r::REPLICATOR_HTTP_CONNECTIONS).max(1) as usize,
            connection_timeout: Duration::from_millis(n(&r::REPLICATOR_CONNECTION_TIMEOUT)),
            retries_per_request: n(&r::REPLICATOR_RETRIES_PER_REQUEST) as u32,
            worker_processes: n(&r::REPLICATOR_WORKER_PROCESSES).max(1) as usize,
            worker_batch_size: n(&r::REPLICATOR_WORKER_BATCH_SIZE).max(1) as usize,
            checkpoint_interval: Duration::from_millis(n(&r::REPLICATOR_CHECKPOINT_INTERVAL)),
            use_checkpoints: config.value(&r::REPLICATOR_USE_CHECKPOINTS),
            use_bulk_get: config.value(&r::REPLICATOR_USE_BULK_GET),
        }
    }
}

/// A replication as described.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicationSpec {
    /// Where documents come from.
    pub source: EndpointSpec,
    /// Where they go.
    pub target: EndpointSpec,
    /// Keep going as changes arrive.
    pub continuous: bool,
    /// Make the target when it does not exist.
    pub create_target: bool,
    /// `q` and `partitioned` for a target made.
    pub create_target_params: Map<String, Value>,
    /// Which documents.
    pub filter: Filter,
    /// Start here instead of at the checkpoint.
    pub since_seq: Option<Value>,
    /// Copy only winning revisions.
    pub winning_revs_only: bool,
    /// Stop the replication described (`_replicate` only).
    pub cancel: bool,
    /// The replication to stop, by its id (`_replicate` with `cancel` only).
    pub replication_id: Option<String>,
    /// How it runs.
    pub settings: Settings,
}

fn bad(reason: impl Into<String>) -> Error {
    Error::BadRequest(reason.into())
}

fn flag(body: &Map<String, Value>, key: &str) -> Result<bool> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad(format!("parameter `{key}` must be a boolean"))),
    }
}

fn positive(body: &Map<String, Value>, key: &str) -> Result<Option<u64>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(bad(format!("parameter `{key}` must be a positive integer"))),
        },
    }
}

/// Reads one endpoint: a string (URL or local name) or an object with `url`, `headers`
/// and `auth.basic`.
fn endpoint(value: Option<&Value>, side: &str) -> Result<EndpointSpec> {
    let mut spec = EndpointSpec {
        url: String::new(),
        headers: BTreeMap::new(),
        basic: None,
    };
    match value {
        Some(Value::String(s)) if !s.is_empty() => spec.url = s.clone(),
        Some(Value::Object(obj)) => {
            spec.url = match obj.get("url") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                _ => return Err(bad(format!("`{side}` must have a `url` string"))),
            };
            match obj.get("headers") {
                None | Some(Value::Null) => {}
                Some(Value::Object(h)) => {
                    for (k, v) in h {
                        let v = v
                            .as_str()
                            .ok_or_else(|| bad(format!("header `{k}` must be a string")))?;
                        spec.headers.insert(k.clone(), v.to_string());
                    }
                }
                Some(_) => return Err(bad("`headers` must be an object")),
            }
            if let Some(basic) = obj.get("auth").and_then(|a| a.get("basic")) {
                let field = |k: &str| basic.get(k).and_then(Value::as_str).map(str::to_string);
                match (field("username"), field("password")) {
                    (Some(u), Some(p)) => spec.basic = Some((u, p)),
                    _ => return Err(bad("`auth.basic` needs `username` and `password` strings")),
                }
            }
        }
        None | Some(Value::Null) => {
            return Err(Error::BadRequest(format!(
                "Missing `{side}` in the replication"
            )))
        }
        Some(_) => return Err(bad(format!("`{side}` must be a URL string or an object"))),
    }
    if !spec.is_local() {
        let url = reqwest::Url::parse(&spec.url)
            .map_err(|_| bad(format!("Could not parse the URL of `{side}`")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!("Unsupported scheme in the URL of `{side}`")));
        }
    }
    Ok(spec)
}

fn filter(body: &Map<String, Value>) -> Result<Filter> {
    let given: Vec<&str> = ["doc_ids", "filter", "selector"]
        .into_iter()
        .filter(|k| body.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if given.len() > 1 {
        return Err(bad("`doc_ids`,`filter`,`selector` are mutually exclusive"));
    }
    Ok(match given.first().copied() {
        None => Filter::All,
        Some("doc_ids") => match &body["doc_ids"] {
            Value::Array(ids) => Filter::DocIds(
                ids.iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<_>>()
                    .ok_or_else(|| bad("parameter `doc_ids` must be an array of strings"))?,
            ),
            _ => return Err(bad("parameter `doc_ids` must be an array")),
        },
        Some("selector") => match &body["selector"] {
            Value::Object(_) => {
                settee_mango::Selector::parse(&body["selector"])
                    .map_err(|e| bad(format!("Invalid selector: {e}")))?;
                Filter::Selector(body["selector"].clone())
            }
            _ => return Err(bad("parameter `selector` must be a JSON object")),
        },
        Some(_) => {
            let name = body["filter"]
                .as_str()
                .filter(|n| n.split('/').filter(|p| !p.is_empty()).count() == 2)
                .ok_or_else(|| bad("Invalid filter. Must match `ddocname/filtername`."))?;
            let query_params = match body.get("query_params") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(q)) => q.clone(),
                Some(_) => return Err(bad("parameter `query_params` must be an object")),
            };
            Filter::Design {
                name: name.to_string(),
                query_params,
            }
        }
    })
}

impl ReplicationSpec {
    /// Reads a replication from a `_replicate` body or `_replicator` document, over
    /// `defaults` (`[replicator]`).
    pub fn parse(body: &Value, defaults: &Settings) -> Result<ReplicationSpec> {
        let Value::Object(body) = body else {
            return Err(bad("Request body must be a JSON object"));
        };
        let cancel = flag(body, "cancel")?;
        let replication_id = match body.get("replication_id").or_else(|| body.get("id")) {
            Some(Value::String(s)) if cancel => Some(s.clone()),
            _ => None,
        };
        let mut settings = defaults.clone();
        if let Some(n) = positive(body, "worker_processes")? {
            settings.worker_processes = n as usize;
        }
        if let Some(n) = positive(body, "worker_batch_size")? {
            settings.worker_batch_size = n as usize;
        }
        if let Some(n) = positive(body, "http_connections")? {
            settings.http_connections = n as usize;
        }
        if let Some(n) = positive(body, "connection_timeout")? {
            settings.connection_timeout = Duration::from_millis(n);
        }
        if let Some(n) = positive(body, "retries_per_request")? {
            settings.retries_per_request = n as u32;
        }
        if let Some(n) = positive(body, "checkpoint_interval")? {
            settings.checkpoint_interval = Duration::from_millis(n);
        }
        if body.get("use_checkpoints").is_some() {
            settings.use_checkpoints = flag(body, "use_checkpoints")?;
        }
        if body.get("use_bulk_get").is_some() {
            settings.use_bulk_get = flag(body, "use_bulk_get")?;
        }
        let (source, target) = if cancel && replication_id.is_some() {
            let none = EndpointSpec {
                url: String::new(),
                headers: BTreeMap::new(),
                basic: None,
            };
            (none.clone(), none)
        } else {
            (
                endpoint(body.get("source"), "source")?,
                endpoint(body.get("target"), "target")?,
            )
        };
        let create_target_params = match body.get("create_target_params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err(bad("parameter `create_target_params` must be an object")),
        };
        Ok(ReplicationSpec {
            source,
            target,
            continuous: flag(body, "continuous")?,
            create_target: flag(body, "create_target")?,
            create_target_params,
            filter: filter(body)?,
            since_seq: body.get("since_seq").filter(|v| !v.is_null()).cloned(),
            winning_revs_only: flag(body, "winning_revs_only")?,
            cancel,
            replication_id,
            settings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<ReplicationSpec> {
        ReplicationSpec::parse(&v, &Settings::default())
    }

    fn reason(v: Value) -> String {
        match parse(v) {
            Err(Error::BadRequest(r)) => r,
            other => panic!("expected bad_request, got {other:?}"),
        }
    }

    #[test]
    fn endpoints_are_urls_objects_or_local_names() {
        let spec = parse(json!({
            "source": "http://u:p@h:5984/a",
            "target": {"url": "https://h/b", "headers": {"X-A": "1"},
                       "auth": {"basic": {"username": "bob", "password": "pw"}}},
        }))
        .unwrap();
        assert_eq!(spec.source.display(), "http://h:5984/a");
        assert!(!spec.source.is_local());
        assert_eq!(spec.target.headers["X-A"], "1");
        assert_eq!(spec.target.basic, Some(("bob".into(), "pw".into())));
        let local = parse(json!({"source": "a", "target": "b"})).unwrap();
        assert!(local.source.is_local() && local.target.is_local());
    }

    #[test]
    fn options_are_read_with_couchdb_reasons() {
        let base = |k: &str, v: Value| {
            let mut b = json!({"source": "a", "target": "b"});
            b[k] = v;
            b
        };
        assert_eq!(reason(json!([])), "Request body must be a JSON object");
        assert_eq!(
            reason(base("doc_ids", json!("a"))),
            "parameter `doc_ids` must be an array"
        );
        assert_eq!(
            reason(base("continuous", json!("yes"))),
            "parameter `continuous` must be a boolean"
        );
        assert_eq!(
            reason(base("selector", json!("x"))),
            "parameter `selector` must be a JSON object"
        );
        assert_eq!(
            reason(base("filter", json!("a"))),
            "Invalid filter. Must match `ddocname/filtername`."
        );
        let mut both = base("doc_ids", json!(["a"]));
        both["selector"] = json!({});
        assert_eq!(
            reason(both),
            "`doc_ids`,`filter`,`selector` are mutually exclusive"
        );
        assert!(reason(base("worker_processes", json!("x"))).contains("worker_processes"));
        assert!(reason(json!({"target": "b"})).contains("source"));
        assert!(reason(json!({"source": "ftp://h/a", "target": "b"})).contains("scheme"));
        let spec = parse(base("worker_batch_size", json!(10))).unwrap();
        assert_eq!(spec.settings.worker_batch_size, 10);
        let spec = parse(json!({"source": "a", "target": "b", "filter": "d/f",
                                "query_params": {"k": "v"}}))
        .unwrap();
        assert!(matches!(spec.filter, Filter::Design { ref name, .. } if name == "d/f"));
    }
}
