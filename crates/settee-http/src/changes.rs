//! `/{db}/_changes`: normal, longpoll, continuous and eventsource feeds. Feeds wait on the
//! database's write notifications, never polling the disk; each waiting feed costs a task and
//! a channel, so thousands can listen at once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use hyper::header::ETAG;
use hyper::Method;
use serde_json::Value;
use settee_db::{ChangeRow, ChangesOptions, Database, DbSnapshot, SeqVector};
use tokio::time::Instant;

use crate::db::open;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Gone, Response, Sink};
use crate::request::{Query, Req};
use crate::server::State;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Feed {
    Normal,
    Longpoll,
    Continuous,
    EventSource,
}

struct Params {
    /// Rows as `_db_updates` writes them (the feed of `_global_changes`).
    events: bool,
    feed: Feed,
    since: SeqVector,
    opts: ChangesOptions,
    heartbeat: Option<Duration>,
    timeout: Option<Duration>,
    seqs: SeqInterval,
}

/// The limit CouchDB counts rows down from when none is given.
const DEFAULT_LIMIT: u64 = 1_000_000_000_000_000;

/// Which rows carry their sequence (`seq_interval`): with an interval, a row does only when
/// the rows still allowed by the limit, itself included, are a multiple of it, as CouchDB
/// counts; the others have `"seq": null`. A client reading in batches of the interval gets
/// one sequence per batch, the one to resume from.
#[derive(Clone, Copy, Debug)]
struct SeqInterval {
    every: Option<u64>,
    limit: u64,
}

impl SeqInterval {
    /// Whether the row after `written` earlier rows of the feed carries its sequence.
    fn shows(&self, written: u64) -> bool {
        self.every
            .is_none_or(|n| self.limit.wrapping_sub(written).is_multiple_of(n))
    }
}

/// Handles a `_changes` request.
pub async fn handle(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    let mut body_doc_ids = None;
    let mut body_selector = None;
    let mut body = bytes::Bytes::new();
    match req.method {
        Method::GET | Method::HEAD => {}
        Method::POST => {
            req.require_json()?;
            body = req.json_bytes(state.max_request).await?;
            if !body.is_empty() {
                let v: Value = crate::request::parse_json(&body)?;
                body_doc_ids = v.get("doc_ids").cloned();
                body_selector = v.get("selector").cloned();
            }
        }
        _ => return Err(HttpError::method_not_allowed("GET,HEAD,POST")),
    }
    let params = params(state, req, &db, body_doc_ids, body_selector)?;
    let (content_type, feed) = match params.feed {
        Feed::EventSource => ("text/event-stream", params.feed),
        f => ("application/json", f),
    };
    // A normal feed is named by the database's state and the question, as CouchDB names it
    // by the database's information; a client that has it already gets a 304.
    let etag = (feed == Feed::Normal).then(|| etag(&db.snapshot(), &req.query, &body));
    if let Some(etag) = &etag {
        if crate::doc::if_none_match(req, etag) {
            return Ok(reply::with_header(reply::empty(304), ETAG, etag));
        }
    }
    let resp = stream(db, params, content_type).await?;
    Ok(match &etag {
        Some(etag) => reply::with_header(resp, ETAG, etag),
        None => resp,
    })
}

/// Streams a feed; headers wait for the first batch, so that a filter failing on it fails
/// the request.
async fn stream(
    db: Arc<Database>,
    params: Params,
    content_type: &'static str,
) -> HttpResult<Response> {
    let feed = params.feed;
    let (resp, mut sink) = reply::channel(200, content_type);
    let ready = sink.hold();
    tokio::spawn(async move {
        let _ = run(db, params, sink, feed).await;
    });
    if let Ok(Err(e)) = ready.await {
        return Err(e);
    }
    Ok(resp)
}

/// `GET /_db_updates` (server admins): the changes of `_global_changes` as database events
/// (see [`settee_node::db_updates`]), with `feed`, `since`, `timeout`, `heartbeat`, `limit`
/// and `descending`; 404 without that database, as in CouchDB.
pub async fn db_updates(state: &Arc<State>, req: &mut Req) -> HttpResult<Response> {
    if !matches!(req.method, Method::GET | Method::HEAD) {
        return Err(HttpError::method_not_allowed("GET"));
    }
    let db = open(state, settee_node::db_updates::GLOBAL_CHANGES)?;
    let mut params = params(state, req, &db, None, None)?;
    params.events = true;
    params.seqs.every = None;
    params.opts = ChangesOptions {
        descending: params.opts.descending,
        limit: params.opts.limit,
        ..ChangesOptions::default()
    };
    let content_type = match params.feed {
        Feed::EventSource => "text/event-stream",
        _ => "application/json",
    };
    stream(db, params, content_type).await
}

/// The `ETag` of a normal feed: a hash of each shard's commit and of the query and body, so
/// that it changes with any write, purge or compaction, and two different questions never
/// share one.
fn etag(snap: &DbSnapshot, query: &Query, body: &[u8]) -> String {
    use md5::{Digest, Md5};
    let mut hash = Md5::new();
    for (salt, generation) in snap.commit_ids() {
        hash.update(salt);
        hash.update(generation.to_le_bytes());
    }
    for (k, v) in &query.0 {
        for part in [k.as_bytes(), v.as_bytes()] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
    }
    hash.update(body);
    reply::hashed_etag(hash.finalize().into())
}

fn params(
    state: &State,
    req: &Req,
    db: &Database,
    body_doc_ids: Option<Value>,
    body_selector: Option<Value>,
) -> HttpResult<Params> {
    let q = &req.query;
    let feed = match q.get("feed").unwrap_or("normal") {
        "normal" => Feed::Normal,
        "longpoll" => Feed::Longpoll,
        "continuous" | "live" => Feed::Continuous,
        "eventsource" => Feed::EventSource,
        _ => {
            return Err(HttpError::bad_request(
                "Supported `feed` types: normal, continuous, live, longpoll, eventsource",
            ))
        }
    };
    let descending = q.flag("descending")?;
    let since_text = req
        .header("last-event-id")
        .map(str::to_string)
        .or_else(|| q.get("since").map(str::to_string));
    let since = match since_text.as_deref().map(|s| s.trim_matches('"')) {
        None | Some("0") | Some("") => SeqVector::zero(db.q()),
        Some("now") => db.snapshot().seq()?,
        Some(s) => SeqVector::parse(s, db.q())?,
    };
    let heartbeat = match q.get("heartbeat") {
        None => None,
        Some("true") => Some(Duration::from_millis(60_000)),
        Some(v) => match v.parse::<u64>() {
            Ok(ms) if ms > 0 => Some(Duration::from_millis(ms)),
            _ => {
                return Err(HttpError::bad_request(
                    "The heartbeat value should be a positive integer (in milliseconds).",
                ))
            }
        },
    };
    let timeout = q.u64("timeout")?.map(Duration::from_millis);
    let every = match q.get("seq_interval") {
        None => None,
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(HttpError::bad_request("invalid_seq_interval")),
        },
    };
    let mut opts = ChangesOptions {
        descending,
        limit: q.u64("limit")?,
        include_docs: q.flag("include_docs")?,
        doc: q.doc_options()?,
        all_leaves: q.get("style") == Some("all_docs"),
        doc_ids: None,
        design_only: false,
        doc_filter: None,
    };
    match q.get("filter") {
        None => {}
        Some("_doc_ids") => {
            let ids = match body_doc_ids.or(q.json("doc_ids")?) {
                Some(Value::Array(ids)) => ids
                    .into_iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect::<HashSet<_>>(),
                _ => {
                    return Err(HttpError::bad_request(
                        "`doc_ids` filter parameter is not a list of doc ids.",
                    ))
                }
            };
            opts.doc_ids = Some(ids);
        }
        Some("_design") => opts.design_only = true,
        Some("_selector") => {
            let selector = body_selector.ok_or_else(|| {
                HttpError::bad_request("Selector must be specified in POST payload")
            })?;
            let selector = settee_mango::Selector::parse(&selector)
                .map_err(|e| HttpError::bad_request(format!("Invalid selector: {e}")))?;
            opts.doc_filter = Some(settee_db::DocFilter(Arc::new(move |doc| {
                Ok(selector.matches(doc))
            })));
        }
        Some("_view") => {
            let view = q.get("view").ok_or_else(|| {
                HttpError::bad_request("`view` filter parameter is not provided.")
            })?;
            opts.doc_filter = Some(crate::view::view_filter(state, db, view)?);
        }
        Some(f) => opts.doc_filter = Some(crate::view::js_filter(state, db, f, req)?),
    }
    let seqs = SeqInterval {
        every,
        limit: opts.limit.unwrap_or(DEFAULT_LIMIT),
    };
    Ok(Params {
        events: false,
        feed,
        since,
        opts,
        heartbeat,
        timeout,
        seqs,
    })
}

/// One change row as CouchDB writes it, built directly (this runs for every row of a feed);
/// `seq` is its encoded sequence, if it shows one.
fn row_json(row: &ChangeRow, seq: Option<&str>) -> Vec<u8> {
    use settee_json::body::write_str;
    let mut out = Vec::with_capacity(96 + row.id.len() + row.doc.as_ref().map_or(0, Vec::len));
    out.extend_from_slice(b"{\"seq\":");
    match seq {
        Some(seq) => write_str(&mut out, seq),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"id\":");
    write_str(&mut out, &row.id);
    out.extend_from_slice(b",\"changes\":[");
    for (i, rev) in row.revs.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"{\"rev\":" } else { b",{\"rev\":" });
        write_str(&mut out, &rev.to_string());
        out.push(b'}');
    }
    out.push(b']');
    if row.deleted {
        out.extend_from_slice(b",\"deleted\":true");
    }
    if let Some(doc) = &row.doc {
        out.extend_from_slice(b",\"doc\":");
        out.extend_from_slice(doc);
    }
    out.push(b'}');
    out
}

/// One `_db_updates` row: the change of event document `{type}:{db}`.
fn event_json(row: &ChangeRow, seq: Option<&str>) -> Vec<u8> {
    let (kind, db) = row.id.split_once(':').unwrap_or(("updated", &row.id));
    serde_json::to_vec(&serde_json::json!({"db_name": db, "type": kind, "seq": seq})).expect("JSON")
}

/// Where a feed stands between batches: the sequence it has reached and the rows written.
struct Progress {
    position: SeqVector,
    written: u64,
}

/// Writes the changes after `at` from a fresh snapshot; returns where the feed then stands
/// and how many rows this batch wrote.
async fn batch(
    db: &Arc<Database>,
    mut sink: Sink,
    at: Progress,
    opts: ChangesOptions,
    feed: Feed,
    seqs: SeqInterval,
    events: bool,
) -> Result<(Sink, Progress, u64), Gone> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || {
        let snap = db.snapshot();
        let mut changes = match snap.changes(&at.position, opts) {
            Ok(c) => c,
            Err(e) => return Err(failed(&mut sink, &e)),
        };
        let mut n = 0u64;
        for row in changes.by_ref() {
            let row = match row {
                Ok(r) => r,
                Err(e) => return Err(failed(&mut sink, &e)),
            };
            let written = at.written + n;
            let seq = seqs.shows(written).then(|| row.seq.encode());
            let json = if events {
                event_json(&row, seq.as_deref())
            } else {
                row_json(&row, seq.as_deref())
            };
            match feed {
                Feed::Normal | Feed::Longpoll => {
                    sink.write(if written == 0 { b"" } else { b",\r\n" })?;
                    sink.write(&json)?;
                }
                Feed::Continuous => {
                    sink.write(&json)?;
                    sink.write(b"\n")?;
                }
                Feed::EventSource => {
                    sink.write(b"data: ")?;
                    sink.write(&json)?;
                    let id = seq.map_or_else(|| "null".to_string(), |s| format!("\"{s}\""));
                    sink.write(format!("\nid: {id}\n\n").as_bytes())?;
                }
            }
            n += 1;
        }
        let position = changes.position().clone();
        sink.flush()?;
        Ok((
            sink,
            Progress {
                position,
                written: at.written + n,
            },
            n,
        ))
    })
    .await
    .unwrap_or(Err(Gone))
}

/// Ends a feed that could not be read on: with an error answer while its headers are held,
/// or cut short once they went (never with a `last_seq` past rows it did not send).
fn failed(sink: &mut Sink, e: &settee_db::Error) -> Gone {
    if !matches!(e, settee_db::Error::Filter(_)) {
        tracing::error!(error = %e, "reading changes");
    }
    sink.fail(HttpError::from(e));
    Gone
}

/// Counts a client following a continuous feed for as long as it does.
struct Following;

impl Following {
    fn start() -> Following {
        settee_metrics::inc(settee_metrics::Metric::HttpdClientsRequestingChanges);
        Following
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        settee_metrics::dec(settee_metrics::Metric::HttpdClientsRequestingChanges);
    }
}

async fn run(db: Arc<Database>, p: Params, mut sink: Sink, feed: Feed) -> Result<(), Gone> {
    let _following = (feed == Feed::Continuous).then(Following::start);
    let mut rx = db.subscribe();
    if matches!(feed, Feed::Normal | Feed::Longpoll) {
        sink.write(b"{\"results\":[\n")?;
    }
    let waits = feed != Feed::Normal && !p.opts.descending;
    let default_timeout = if p.heartbeat.is_some() {
        None
    } else {
        Some(Duration::from_millis(60_000))
    };
    let deadline = p.timeout.or(default_timeout).map(|t| Instant::now() + t);
    let mut progress = Progress {
        position: p.since.clone(),
        written: 0,
    };
    let mut remaining = p.opts.limit;
    loop {
        rx.borrow_and_update();
        let opts = ChangesOptions {
            limit: remaining,
            ..p.opts.clone()
        };
        let (s, now, n) = batch(&db, sink, progress, opts, feed, p.seqs, p.events).await?;
        sink = s;
        progress = now;
        remaining = remaining.map(|r| r.saturating_sub(n));
        let done = !waits || remaining == Some(0) || (feed == Feed::Longpoll && n > 0);
        if done || !wait(&mut rx, &mut sink, p.heartbeat, deadline, feed).await? {
            break;
        }
    }
    let last = progress.position.encode();
    // `_db_updates` ends without `pending`, as CouchDB's does.
    let pending = if p.events {
        String::new()
    } else {
        let n = db.snapshot().pending(&progress.position).unwrap_or(0);
        format!(",\"pending\":{n}")
    };
    match feed {
        Feed::Normal | Feed::Longpoll => {
            sink.send(format!("\n],\n\"last_seq\":\"{last}\"{pending}}}\n").as_bytes())
                .await
        }
        Feed::Continuous => {
            sink.send(format!("{{\"last_seq\":\"{last}\"{pending}}}\n").as_bytes())
                .await
        }
        Feed::EventSource => Ok(()),
    }
}

/// Waits for a write, sending heartbeats; false once the feed's time is up.
async fn wait(
    rx: &mut tokio::sync::watch::Receiver<u64>,
    sink: &mut Sink,
    heartbeat: Option<Duration>,
    deadline: Option<Instant>,
    feed: Feed,
) -> Result<bool, Gone> {
    loop {
        let beat = heartbeat.map(|h| Instant::now() + h);
        let until = match (beat, deadline) {
            (Some(b), Some(d)) => b.min(d),
            (Some(b), None) => b,
            (None, Some(d)) => d,
            (None, None) => Instant::now() + Duration::from_secs(3600),
        };
        tokio::select! {
            changed = rx.changed() => return Ok(changed.is_ok()),
            _ = tokio::time::sleep_until(until) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(false);
                }
                if heartbeat.is_some() {
                    let beat: &[u8] = if feed == Feed::EventSource { b"event: heartbeat\ndata: \n\n" } else { b"\n" };
                    sink.send(beat).await?;
                }
            }
        }
    }
}
