//! A database on a CouchDB-compatible server, over HTTP(S): one keep-alive connection pool
//! per endpoint, requests retried with backoff when the connection fails or the server
//! answers 5xx, as CouchDB's replicator retries them (`retries_per_request`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde_json::{json, Map, Value};

use crate::continuous::{Broken, LiveFeed};
use crate::endpoint::{
    Change, ChangesPage, ChangesRequest, DbInfo, Endpoint, Filter, Missing, Revision, Wanted,
    WriteFailure,
};
use crate::error::{Error, Result};
use crate::spec::{EndpointSpec, Settings};

/// A remote database.
pub struct RemoteDb {
    client: reqwest::Client,
    /// The database's URL without credentials, ending in `/`.
    base: String,
    retries: u32,
    timeout: Duration,
    /// Set once the server showed it has no `_bulk_get`.
    no_bulk_get: AtomicBool,
    /// Set once the server refused a continuous changes feed (long polls are used then).
    no_continuous: AtomicBool,
    /// The continuous changes feed a continuous job reads, kept open between pages.
    live: tokio::sync::Mutex<Option<LiveFeed>>,
    use_bulk_get: bool,
}

/// The content type of JSON bodies.
const JSON: &str = "application/json";

/// A revision as a `multipart/related` body: its JSON with each attachment that carries
/// `data` marked `"follows": true` (and its `length`), then a part with the bytes of each,
/// in the same order. The body and its content type.
fn multipart_related(doc: &Revision) -> Result<(Vec<u8>, String)> {
    let garbage = || Error::Garbage(format!("revision of {} not understood", doc.id));
    let mut value: Value = serde_json::from_str(doc.json.get()).map_err(|_| garbage())?;
    let mut parts = Vec::new();
    if let Some(Value::Object(atts)) = value.get_mut("_attachments") {
        for (name, att) in atts.iter_mut() {
            let Some(att) = att.as_object_mut() else {
                continue;
            };
            let Some(Value::String(data)) = att.remove("data") else {
                continue;
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|_| garbage())?;
            att.insert("follows".into(), Value::Bool(true));
            att.insert("length".into(), Value::from(bytes.len()));
            let content_type = att
                .get("content_type")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream")
                .to_string();
            parts.push((name.clone(), content_type, bytes));
        }
    }
    let boundary = format!("{:032x}", rand::random::<u128>());
    let mut body = format!("--{boundary}\r\nContent-Type: {JSON}\r\n\r\n").into_bytes();
    serde_json::to_writer(&mut body, &value).expect("json");
    for (name, content_type, bytes) in parts {
        let filename = name.replace('\\', "\\\\").replace('"', "\\\"");
        body.extend_from_slice(
            format!(
                "\r\n--{boundary}\r\nContent-Disposition: attachment; filename=\"{filename}\"\r\n\
                 Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                bytes.len()
            )
            .as_bytes(),
        );
        body.extend_from_slice(&bytes);
    }
    body.extend_from_slice(format!("\r\n--{boundary}--").as_bytes());
    Ok((body, format!("multipart/related; boundary=\"{boundary}\"")))
}

/// How often a waiting changes feed is asked to send a heartbeat.
const HEARTBEAT: Duration = Duration::from_secs(10);

/// Characters escaped in a document id put in a path.
const ID_ESCAPES: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A document id as a path: `_design/` and `_local/` prefixes kept, the rest escaped.
fn doc_path(id: &str) -> String {
    let enc = |s: &str| percent_encoding::utf8_percent_encode(s, ID_ESCAPES).to_string();
    for prefix in ["_design/", "_local/"] {
        if let Some(rest) = id.strip_prefix(prefix) {
            return format!("{prefix}{}", enc(rest));
        }
    }
    enc(id)
}

/// A sequence as a `since` parameter: strings as they are, anything else as JSON.
fn seq_param(seq: &Value) -> String {
    match seq {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl RemoteDb {
    /// Opens the endpoint `spec` (a URL, with credentials in it, in `auth.basic` or in
    /// `headers`).
    pub fn new(spec: &EndpointSpec, settings: &Settings) -> Result<RemoteDb> {
        let mut url = reqwest::Url::parse(&spec.url)
            .map_err(|_| Error::BadRequest(format!("Invalid URL: {}", spec.display())))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::BadRequest(format!(
                "Unsupported URL scheme in {}",
                spec.display()
            )));
        }
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        for (k, v) in &spec.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| Error::BadRequest(format!("Invalid header name: {k}")))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| Error::BadRequest(format!("Invalid header value for {k}")))?;
            headers.insert(name, value);
        }
        let user = percent_encoding::percent_decode_str(url.username())
            .decode_utf8_lossy()
            .to_string();
        let password = url.password().map(|p| {
            percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .to_string()
        });
        let basic = spec
            .basic
            .clone()
            .or_else(|| (!user.is_empty()).then(|| (user, password.unwrap_or_default())));
        if let Some((user, password)) = basic {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            let value = HeaderValue::from_str(&format!("Basic {token}"))
                .map_err(|_| Error::BadRequest("Invalid credentials".into()))?;
            headers.insert(AUTHORIZATION, value);
        }
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let mut base = url.to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .pool_max_idle_per_host(settings.http_connections)
            .connect_timeout(settings.connection_timeout)
            // A peer silent this long is gone (a waiting changes feed sends heartbeats).
            .read_timeout(settings.connection_timeout.max(HEARTBEAT * 3))
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|e| Error::BadRequest(format!("Cannot make an HTTP client: {e}")))?;
        Ok(RemoteDb {
            client,
            base,
            retries: settings.retries_per_request,
            timeout: settings.connection_timeout.max(Duration::from_secs(30)),
            no_bulk_get: AtomicBool::new(false),
            no_continuous: AtomicBool::new(false),
            live: tokio::sync::Mutex::new(None),
            use_bulk_get: settings.use_bulk_get,
        })
    }

    /// One request, retried while the failure may be transient; the status and body of the
    /// last answer.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        wait: Option<Duration>,
    ) -> Result<(StatusCode, Vec<u8>)> {
        let body = body.map(|b| (serde_json::to_vec(b).expect("json"), JSON.to_string()));
        self.send_bytes(method, path, query, body, wait).await
    }

    /// [`RemoteDb::send`] with a body already encoded, and its content type.
    async fn send_bytes(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<(Vec<u8>, String)>,
        wait: Option<Duration>,
    ) -> Result<(StatusCode, Vec<u8>)> {
        let mut attempt = 0;
        loop {
            match self.once(&method, path, query, body.as_ref(), wait).await {
                Ok((status, bytes)) if !retried_status(status) || attempt >= self.retries => {
                    return Ok((status, bytes))
                }
                Err(e) if attempt >= self.retries => return Err(e),
                _ => {}
            }
            tokio::time::sleep(backoff(attempt)).await;
            attempt += 1;
        }
    }

    async fn once(
        &self,
        method: &Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&(Vec<u8>, String)>,
        wait: Option<Duration>,
    ) -> Result<(StatusCode, Vec<u8>)> {
        use settee_metrics::{inc, Metric};
        inc(Metric::CouchReplicatorRequests);
        let answer = async {
            let resp = self
                .request(method, path, query, body, wait)
                .send()
                .await
                .map_err(|e| self.unreachable(&e))?;
            let status = resp.status();
            let bytes = resp.bytes().await.map_err(|e| self.unreachable(&e))?;
            Ok((status, bytes.to_vec()))
        }
        .await;
        inc(match &answer {
            Ok((status, _)) if status.as_u16() < 500 => Metric::CouchReplicatorResponsesSuccess,
            _ => Metric::CouchReplicatorResponsesFailure,
        });
        answer
    }

    fn request(
        &self,
        method: &Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&(Vec<u8>, String)>,
        wait: Option<Duration>,
    ) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .request(method.clone(), format!("{}{path}", self.base));
        // A waiting changes feed has no deadline of its own (CouchDB's ignores `timeout`
        // when heartbeats are asked for); the client's read timeout finds a silent peer.
        if wait.is_none() {
            req = req.timeout(self.timeout);
        }
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some((bytes, content_type)) = body {
            req = req
                .header(CONTENT_TYPE, content_type.as_str())
                .body(bytes.clone());
        }
        req
    }

    /// A page of the continuous feed, opened (again) when it is not where the page starts;
    /// `None` when the server refuses continuous feeds.
    async fn continuous_page(
        &self,
        req: &ChangesRequest<'_>,
        method: Method,
        mut query: Vec<(&str, String)>,
        body: Option<&Value>,
    ) -> Result<Option<ChangesPage>> {
        let wait = req.wait.unwrap_or_default();
        let mut live = self.live.lock().await;
        if live.as_ref().is_none_or(|f| &f.position != req.since) {
            *live = None;
            query.retain(|(k, _)| *k != "limit");
            query.push(("feed", "continuous".into()));
            query.push(("heartbeat", HEARTBEAT.as_millis().to_string()));
            let body = body.map(|b| (serde_json::to_vec(b).expect("json"), JSON.to_string()));
            let resp = self
                .request(&method, "_changes", &query, body.as_ref(), Some(wait))
                .send()
                .await
                .map_err(|e| self.unreachable(&e))?;
            let status = resp.status();
            if status == StatusCode::BAD_REQUEST {
                self.no_continuous.store(true, Ordering::Relaxed);
                return Ok(None);
            }
            if !status.is_success() {
                let bytes = resp.bytes().await.unwrap_or_default();
                return Err(self.peer_error(status, &bytes));
            }
            *live = Some(LiveFeed::new(resp, req.since.clone()));
        }
        let feed = live.as_mut().expect("opened");
        let page = match feed.page(req.limit as usize, wait).await {
            Ok(page) => page,
            Err(broken) => {
                *live = None;
                return Err(match broken {
                    Broken::Connection(e) => self.unreachable(&e),
                    Broken::Garbage => {
                        Error::Garbage(format!("{}: bad continuous feed", self.display()))
                    }
                });
            }
        };
        let last_seq = page
            .rows
            .last()
            .map(|r| r.seq.clone())
            .unwrap_or_else(|| req.since.clone());
        match page.ended {
            // The source ended the feed: the next page opens another.
            Some(_) => *live = None,
            None => feed.position = last_seq.clone(),
        }
        Ok(Some(ChangesPage {
            rows: page.rows,
            last_seq,
            pending: None,
        }))
    }

    fn unreachable(&self, e: &reqwest::Error) -> Error {
        let what = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "could not connect"
        } else {
            "connection failed"
        };
        Error::Unreachable(format!("{}: {what}: {e}", self.display()))
    }

    /// A request whose answer must be a 2xx JSON body.
    async fn json(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        wait: Option<Duration>,
    ) -> Result<Value> {
        let (status, bytes) = self.send(method, path, query, body, wait).await?;
        if !status.is_success() {
            return Err(self.peer_error(status, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|_| {
            Error::Garbage(format!(
                "{} answered something that is not JSON",
                self.display()
            ))
        })
    }

    fn peer_error(&self, status: StatusCode, bytes: &[u8]) -> Error {
        let body: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
        match status.as_u16() {
            401 => Error::Unauthorized(self.display()),
            403 => Error::Peer {
                status: 403,
                error: "forbidden".into(),
                reason: self.display(),
            },
            status => Error::Peer {
                status,
                error: text("error").unwrap_or_else(|| "error".into()),
                reason: text("reason")
                    .unwrap_or_else(|| format!("{} answered {status}", self.display())),
            },
        }
    }

    async fn bulk_get(&self, wanted: &[Wanted]) -> Result<Option<Vec<Revision>>> {
        let docs: Vec<Value> = wanted
            .iter()
            .flat_map(|w| {
                w.revs
                    .iter()
                    .map(|r| json!({"id": w.id, "rev": r, "atts_since": w.atts_since}))
            })
            .collect();
        let query = [
            ("revs", "true".to_string()),
            ("attachments", "true".to_string()),
            ("latest", "true".to_string()),
        ];
        let body = json!({"docs": docs});
        let (status, bytes) = self
            .send(Method::POST, "_bulk_get", &query, Some(&body), None)
            .await?;
        if matches!(status.as_u16(), 400 | 404 | 405 | 406 | 501) {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(self.peer_error(status, &bytes));
        }
        let answer: BulkGet = serde_json::from_slice(&bytes).map_err(|_| {
            Error::Garbage(format!(
                "{}: _bulk_get answer not understood",
                self.display()
            ))
        })?;
        let revisions = answer
            .results
            .into_iter()
            .flat_map(|r| r.docs)
            .filter_map(|d| d.ok)
            .map(Revision::new)
            .collect::<Result<_>>()?;
        Ok(Some(revisions))
    }

    async fn open_revs(&self, w: &Wanted) -> Result<Vec<Revision>> {
        let query = [
            ("revs", "true".to_string()),
            ("latest", "true".to_string()),
            ("attachments", "true".to_string()),
            ("open_revs", json!(w.revs).to_string()),
            ("atts_since", json!(w.atts_since).to_string()),
        ];
        let (status, bytes) = self
            .send(Method::GET, &doc_path(&w.id), &query, None, None)
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(Vec::new());
        }
        if !status.is_success() {
            return Err(self.peer_error(status, &bytes));
        }
        let items: Vec<BulkGetItem> = serde_json::from_slice(&bytes).map_err(|_| {
            Error::Garbage(format!("{}: open_revs answer not a list", self.display()))
        })?;
        items
            .into_iter()
            .filter_map(|i| i.ok)
            .map(Revision::new)
            .collect()
    }

    /// Revisions without attachment bytes in one `_bulk_docs`, sent as they came in.
    async fn write_batch(&self, batch: &[Revision]) -> Result<Vec<WriteFailure>> {
        let mut body = b"{\"new_edits\":false,\"docs\":[".to_vec();
        for (n, doc) in batch.iter().enumerate() {
            if n > 0 {
                body.push(b',');
            }
            body.extend_from_slice(doc.json.get().as_bytes());
        }
        body.extend_from_slice(b"]}");
        let (status, bytes) = self
            .send_bytes(
                Method::POST,
                "_bulk_docs",
                &[],
                Some((body, JSON.to_string())),
                None,
            )
            .await?;
        if !status.is_success() {
            return Err(self.peer_error(status, &bytes));
        }
        let answer: Value = serde_json::from_slice(&bytes).map_err(|_| {
            Error::Garbage(format!("{}: _bulk_docs answer not JSON", self.display()))
        })?;
        let text =
            |row: &Value, k: &str| row.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Ok(answer
            .as_array()
            .into_iter()
            .flatten()
            .filter(|row| row.get("error").is_some())
            .map(|row| WriteFailure {
                id: text(row, "id"),
                error: text(row, "error"),
                reason: text(row, "reason"),
            })
            .collect())
    }

    /// A revision with attachment bytes, on its own: `PUT ?new_edits=false` as
    /// `multipart/related`, each attachment's bytes a part of their own (no base64), as
    /// CouchDB's replicator sends them; why the target refused it, if it did.
    async fn write_one(&self, doc: Revision) -> Result<Option<WriteFailure>> {
        let query = [("new_edits", "false".to_string())];
        let body = multipart_related(&doc)?;
        let (status, bytes) = self
            .send_bytes(Method::PUT, &doc_path(&doc.id), &query, Some(body), None)
            .await?;
        if status.is_success() {
            return Ok(None);
        }
        let (error, reason) = match self.peer_error(status, &bytes) {
            Error::Unauthorized(_) => ("unauthorized".to_string(), "unauthorized".to_string()),
            Error::Peer {
                status: 400 | 403 | 409 | 412 | 413 | 415,
                error,
                reason,
            } => (error, reason),
            e => return Err(e),
        };
        Ok(Some(WriteFailure {
            id: doc.id,
            error,
            reason,
        }))
    }
}

/// A `_bulk_get` answer, its revisions kept unparsed.
#[derive(serde::Deserialize)]
struct BulkGet {
    results: Vec<BulkGetResult>,
}

#[derive(serde::Deserialize)]
struct BulkGetResult {
    #[serde(default)]
    docs: Vec<BulkGetItem>,
}

/// One revision of a `_bulk_get` or `open_revs` answer: found, or an error (skipped).
#[derive(serde::Deserialize)]
struct BulkGetItem {
    #[serde(default)]
    ok: Option<Box<serde_json::value::RawValue>>,
}

fn retried_status(status: StatusCode) -> bool {
    status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
}

/// Waits between retries of one request: 250 ms doubling, at most 10 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250u64.saturating_mul(1 << attempt.min(6)).min(10_000))
}

#[async_trait::async_trait]
impl Endpoint for RemoteDb {
    fn display(&self) -> String {
        self.base.clone()
    }

    async fn info(&self) -> Result<DbInfo> {
        let info = match self.json(Method::GET, "", &[], None, None).await {
            Err(Error::Peer { status: 404, .. }) => return Err(Error::DbNotFound(self.display())),
            other => other?,
        };
        let update_seq = info
            .get("update_seq")
            .cloned()
            .ok_or_else(|| Error::Garbage(format!("{} is not a database", self.display())))?;
        Ok(DbInfo {
            update_seq,
            instance_start_time: info
                .get("instance_start_time")
                .and_then(Value::as_str)
                .unwrap_or("0")
                .to_string(),
        })
    }

    async fn create(&self, params: &Map<String, Value>) -> Result<()> {
        let query: Vec<(&str, String)> = params
            .iter()
            .map(|(k, v)| (k.as_str(), seq_param(v)))
            .collect();
        let (status, bytes) = self.send(Method::PUT, "", &query, None, None).await?;
        match status.as_u16() {
            200..=299 | 412 => Ok(()),
            _ => Err(self.peer_error(status, &bytes)),
        }
    }

    async fn get_local(&self, id: &str) -> Result<Option<Value>> {
        match self.json(Method::GET, &doc_path(id), &[], None, None).await {
            Ok(doc) => Ok(Some(doc)),
            Err(Error::Peer { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn put_local(&self, id: &str, doc: &Value) -> Result<()> {
        let mut doc = doc.clone();
        for _ in 0..3 {
            match self
                .json(Method::PUT, &doc_path(id), &[], Some(&doc), None)
                .await
            {
                Err(Error::Peer { status: 409, .. }) => {
                    let rev = self
                        .get_local(id)
                        .await?
                        .and_then(|d| d.get("_rev").cloned());
                    doc["_rev"] = rev.unwrap_or(Value::Null);
                }
                other => return other.map(|_| ()),
            }
        }
        Err(Error::Peer {
            status: 409,
            error: "conflict".into(),
            reason: format!("could not write the replication log {id}"),
        })
    }

    async fn changes(&self, req: ChangesRequest<'_>) -> Result<ChangesPage> {
        let style = if req.winning_only {
            "main_only"
        } else {
            "all_docs"
        };
        let mut query = vec![
            ("style", style.to_string()),
            ("since", seq_param(req.since)),
            ("limit", req.limit.to_string()),
        ];
        let (method, body) = match req.filter {
            Filter::All => (Method::GET, None),
            Filter::DocIds(ids) => {
                query.push(("filter", "_doc_ids".into()));
                (Method::POST, Some(json!({"doc_ids": ids})))
            }
            Filter::Selector(sel) => {
                query.push(("filter", "_selector".into()));
                (Method::POST, Some(json!({"selector": sel})))
            }
            Filter::Design { name, query_params } => {
                query.push(("filter", name.clone()));
                for (k, v) in query_params {
                    query.push((k.as_str(), seq_param(v)));
                }
                (Method::GET, None)
            }
        };
        if req.wait.is_some() && !self.no_continuous.load(Ordering::Relaxed) {
            let page = self
                .continuous_page(&req, method.clone(), query.clone(), body.as_ref())
                .await?;
            if let Some(page) = page {
                return Ok(page);
            }
        }
        if let Some(wait) = req.wait {
            query.push(("feed", "longpoll".into()));
            query.push(("timeout", wait.as_millis().to_string()));
            query.push(("heartbeat", HEARTBEAT.as_millis().to_string()));
        }
        let answer = self
            .json(method, "_changes", &query, body.as_ref(), req.wait)
            .await?;
        parse_changes(&answer, req.since)
            .ok_or_else(|| Error::Garbage(format!("{}: bad _changes answer", self.display())))
    }

    async fn revs_diff(
        &self,
        revs: BTreeMap<String, Vec<String>>,
    ) -> Result<BTreeMap<String, Missing>> {
        let body = serde_json::to_value(&revs).expect("json");
        let answer = self
            .json(Method::POST, "_revs_diff", &[], Some(&body), None)
            .await?;
        let Value::Object(map) = answer else {
            return Err(Error::Garbage(format!(
                "{}: bad _revs_diff answer",
                self.display()
            )));
        };
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(map
            .into_iter()
            .map(|(id, entry)| {
                let missing = Missing {
                    missing: strings(entry.get("missing")),
                    possible_ancestors: strings(entry.get("possible_ancestors")),
                };
                (id, missing)
            })
            .collect())
    }

    async fn fetch(&self, wanted: Vec<Wanted>) -> Result<Vec<Revision>> {
        if self.use_bulk_get && !self.no_bulk_get.load(Ordering::Relaxed) {
            match self.bulk_get(&wanted).await? {
                Some(docs) => return Ok(docs),
                None => self.no_bulk_get.store(true, Ordering::Relaxed),
            }
        }
        let mut docs = Vec::new();
        for w in &wanted {
            docs.extend(self.open_revs(w).await?);
        }
        Ok(docs)
    }

    async fn write(&self, docs: Vec<Revision>) -> Result<Vec<WriteFailure>> {
        let (single, batch): (Vec<Revision>, Vec<Revision>) =
            docs.into_iter().partition(|d| d.att_data);
        let mut failures = Vec::new();
        if !batch.is_empty() {
            failures.extend(self.write_batch(&batch).await?);
        }
        for doc in single {
            if let Some(f) = self.write_one(doc).await? {
                failures.push(f);
            }
        }
        Ok(failures)
    }

    async fn ensure_full_commit(&self) -> Result<()> {
        let (status, bytes) = self
            .send(
                Method::POST,
                "_ensure_full_commit",
                &[],
                Some(&json!({})),
                None,
            )
            .await?;
        if status.is_success() || matches!(status.as_u16(), 404 | 405 | 501) {
            Ok(())
        } else {
            Err(self.peer_error(status, &bytes))
        }
    }

    async fn filter_code(&self, ddoc: &str, name: &str) -> Result<String> {
        let doc = self
            .json(
                Method::GET,
                &doc_path(&format!("_design/{ddoc}")),
                &[],
                None,
                None,
            )
            .await?;
        filter_source(&doc, name)
    }
}

/// A design document's filter function source.
pub(crate) fn filter_source(ddoc: &Value, name: &str) -> Result<String> {
    ddoc.get("filters")
        .and_then(|f| f.get(name))
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| Error::BadRequest(format!("Could not find filter {name}")))
}

/// One row of a changes feed.
pub(crate) fn parse_row(row: &Value) -> Option<Change> {
    let revs = row
        .get("changes")?
        .as_array()?
        .iter()
        .filter_map(|c| c.get("rev").and_then(Value::as_str).map(str::to_string))
        .collect();
    Some(Change {
        seq: row.get("seq")?.clone(),
        id: row.get("id")?.as_str()?.to_string(),
        revs,
        deleted: row.get("deleted") == Some(&Value::Bool(true)),
    })
}

/// A `_changes` answer's rows; `since` stands for `last_seq` when the answer has none.
fn parse_changes(answer: &Value, since: &Value) -> Option<ChangesPage> {
    let rows = answer.get("results")?.as_array()?;
    let out: Vec<Change> = rows.iter().map(parse_row).collect::<Option<_>>()?;
    let last_seq = answer
        .get("last_seq")
        .cloned()
        .or_else(|| out.last().map(|c| c.seq.clone()))
        .unwrap_or_else(|| since.clone());
    Some(ChangesPage {
        rows: out,
        last_seq,
        pending: answer.get("pending").and_then(Value::as_u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_escaped_but_keep_their_prefix() {
        assert_eq!(doc_path("a b/c"), "a%20b%2Fc");
        assert_eq!(doc_path("_design/x y"), "_design/x%20y");
        assert_eq!(doc_path("_local/abc+1"), "_local/abc%2B1");
    }

    #[test]
    fn changes_answers_are_read() {
        let answer = json!({"results": [
            {"seq": "1-a", "id": "x", "changes": [{"rev": "1-a"}, {"rev": "1-b"}]},
            {"seq": "2-a", "id": "y", "changes": [{"rev": "2-c"}], "deleted": true}
        ], "last_seq": "2-a", "pending": 3});
        let page = parse_changes(&answer, &json!(0)).unwrap();
        assert_eq!(page.rows.len(), 2);
        assert_eq!(page.rows[0].revs, ["1-a", "1-b"]);
        assert!(page.rows[1].deleted);
        assert_eq!(page.last_seq, json!("2-a"));
        assert_eq!(page.pending, Some(3));
        assert!(parse_changes(&json!({"rows": []}), &json!(0)).is_none());
    }

    #[test]
    fn revisions_with_attachment_bytes_go_as_multipart_related() {
        let json = r#"{"_id":"d","_rev":"2-a","_attachments":{"a.txt":{"content_type":"text/plain","revpos":2,"digest":"md5-x","data":"aGVsbG8="},"old.bin":{"stub":true,"revpos":1}}}"#;
        let rev =
            Revision::new(serde_json::value::RawValue::from_string(json.into()).unwrap()).unwrap();
        assert!(rev.att_data);
        let (body, content_type) = multipart_related(&rev).unwrap();
        let boundary = content_type
            .split("boundary=\"")
            .nth(1)
            .unwrap()
            .trim_end_matches('"');
        let text = String::from_utf8(body).unwrap();
        let parts: Vec<&str> = text.split(&format!("--{boundary}")).collect();
        // Preamble, the JSON, one attachment, the end.
        assert_eq!(parts.len(), 4, "{text}");
        let doc: Value =
            serde_json::from_str(parts[1].split("\r\n\r\n").nth(1).unwrap().trim_end()).unwrap();
        assert_eq!(
            doc["_attachments"]["a.txt"],
            json!({"content_type": "text/plain", "revpos": 2, "digest": "md5-x", "follows": true, "length": 5})
        );
        assert_eq!(
            doc["_attachments"]["old.bin"],
            json!({"stub": true, "revpos": 1})
        );
        assert!(parts[2].contains("filename=\"a.txt\""), "{}", parts[2]);
        assert!(parts[2].ends_with("\r\n\r\nhello\r\n"), "{:?}", parts[2]);
        assert_eq!(parts[3], "--");
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(0), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(1000));
        assert_eq!(backoff(30), Duration::from_millis(10_000));
    }
}
