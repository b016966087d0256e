//! Replication: the server's own replicator copying one of its databases to another over
//! HTTP (`POST /_replicate` with both endpoints as URLs, as CouchDB 3 runs every
//! replication): many small documents, then documents with 100 KB attachments, then the lag
//! of a continuous replication while writes arrive at a steady rate. Every copy is checked:
//! the target's document count, the answer's `docs_written`, and a sample of documents (or
//! attachment digests) read back from both sides.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use hyper::Method;
use indicatif::ProgressBar;
use serde_json::{json, Value};

use super::{bulk_bodies, load_bodies};
use crate::client::{Conn, Target};
use crate::error::{Error, Result};
use crate::report::{quantile_ms, Metric, Outcome};

/// The workload's size.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Small documents replicated in one one-shot replication.
    pub docs: usize,
    /// Documents with an attachment each.
    pub att_docs: usize,
    /// Bytes of each attachment.
    pub att_bytes: usize,
    /// Writes made while a continuous replication runs.
    pub lag_writes: usize,
    /// Their rate per second.
    pub lag_rate: u64,
    /// Seconds the one-shot replications of each kind take at least: the source is copied
    /// into fresh targets until then, so that a fast server is measured long enough.
    pub seconds: f64,
}

impl Params {
    /// The sizes issue 29 measures: 100,000 documents, 2,000 with 100 KB attachments, 30 s
    /// of 100 writes/s.
    pub const FULL: Params = Params {
        docs: 100_000,
        att_docs: 2_000,
        att_bytes: 100_000,
        lag_writes: 3_000,
        lag_rate: 100,
        seconds: 3.0,
    };

    /// A quick run.
    pub const SMALL: Params = Params {
        docs: 10_000,
        att_docs: 200,
        att_bytes: 100_000,
        lag_writes: 500,
        lag_rate: 100,
        seconds: 3.0,
    };
}

/// A database of the target as a replication endpoint, credentials in its headers.
fn endpoint(target: &Target, db: &str) -> Value {
    let mut e = json!({"url": format!("http://{}/{db}", target.addr)});
    if let Some(auth) = &target.auth {
        e["headers"] = json!({"Authorization": auth});
    }
    e
}

async fn json_of(c: &mut Conn, path: &str) -> Result<Value> {
    let a = c.expect(Method::GET, path, None, &[200]).await?;
    serde_json::from_slice(&a.body).map_err(|_| Error::WrongAnswer(format!("{path}: not JSON")))
}

/// Runs a one-shot replication of `src` into a new `tgt`; its time and answer.
async fn replicate_once(
    c: &mut Conn,
    target: &Target,
    src: &str,
    tgt: &str,
) -> Result<(f64, Value)> {
    let _ = c.call(Method::DELETE, &format!("/{tgt}"), None).await?;
    let body = json!({"source": endpoint(target, src), "target": endpoint(target, tgt),
                      "create_target": true});
    let started = Instant::now();
    let a = c
        .expect(
            Method::POST,
            "/_replicate",
            Some(Bytes::from(body.to_string())),
            &[200],
        )
        .await?;
    let elapsed = started.elapsed().as_secs_f64();
    let answer: Value = serde_json::from_slice(&a.body)
        .map_err(|_| Error::WrongAnswer("_replicate answer is not JSON".into()))?;
    Ok((elapsed, answer))
}

/// Fails unless `tgt` holds `n` documents and the answer says `n` were written.
async fn check_copy(c: &mut Conn, tgt: &str, n: usize, answer: &Value) -> Result<()> {
    let written = answer["history"][0]["docs_written"].as_u64();
    let count = json_of(c, &format!("/{tgt}")).await?["doc_count"].as_u64();
    if written != Some(n as u64) || count != Some(n as u64) {
        return Err(Error::WrongAnswer(format!(
            "replicated {written:?} documents, target holds {count:?}, want {n}"
        )));
    }
    Ok(())
}

/// Fails unless the sampled documents read the same (`fields` of each) on both databases.
async fn check_sample(
    c: &mut Conn,
    src: &str,
    tgt: &str,
    ids: &[String],
    fields: &[&str],
) -> Result<()> {
    for id in ids {
        let a = json_of(c, &format!("/{src}/{id}")).await?;
        let b = json_of(c, &format!("/{tgt}/{id}")).await?;
        for f in fields {
            let pick = |d: &Value| d.pointer(f).cloned();
            if pick(&a) != pick(&b) || pick(&a).is_none() {
                return Err(Error::WrongAnswer(format!(
                    "{tgt}/{id}: {f} differs from the source"
                )));
            }
        }
    }
    Ok(())
}

fn sample_ids(n: usize, prefix: &str) -> Vec<String> {
    (0..50)
        .map(|k| format!("{prefix}{:07}", k * n / 50))
        .collect()
}

/// One kind of one-shot replication: `n` documents of `src`, whose sampled `ids` must read
/// the same `fields` on the copy.
struct Copy<'a> {
    src: &'a str,
    tgt: &'a str,
    n: usize,
    ids: Vec<String>,
    fields: &'a [&'a str],
}

impl Copy<'_> {
    /// Replicates the source into fresh targets (the first named `tgt`, kept; the others
    /// `tgt-2`, `tgt-3`, ..., deleted once checked) until `seconds` of replicating have
    /// passed, once at least; each copy is checked. How many, and their total time.
    async fn repeat(&self, c: &mut Conn, target: &Target, seconds: f64) -> Result<(usize, f64)> {
        let (mut copies, mut took) = (0usize, 0.0);
        while copies == 0 || took < seconds {
            let tgt = match copies {
                0 => self.tgt.to_string(),
                k => format!("{}-{}", self.tgt, k + 1),
            };
            let (elapsed, answer) = replicate_once(c, target, self.src, &tgt).await?;
            check_copy(c, &tgt, self.n, &answer).await?;
            check_sample(c, self.src, &tgt, &self.ids, self.fields).await?;
            if copies > 0 {
                c.expect(Method::DELETE, &format!("/{tgt}"), None, &[200, 202])
                    .await?;
            }
            copies += 1;
            took += elapsed;
        }
        Ok((copies, took))
    }
}

async fn small_docs(target: &Target, p: &Params, progress: &ProgressBar) -> Result<Outcome> {
    let mut c = Conn::open(target).await?;
    progress.set_length(p.docs as u64);
    let docs = (0..p.docs).map(
        |i| json!({"_id": format!("d{i:07}"), "n": i, "name": "replicated", "tags": ["a", "b"]}),
    );
    load_bodies(&mut c, "bench-repl-src", bulk_bodies(docs), progress).await?;
    let copy = Copy {
        src: "bench-repl-src",
        tgt: "bench-repl-tgt",
        n: p.docs,
        ids: sample_ids(p.docs, "d"),
        fields: &["/_rev", "/n"],
    };
    let (copies, took) = copy.repeat(&mut c, target, p.seconds).await?;
    Ok(Outcome {
        workload: format!("replicate {} docs", p.docs),
        metrics: vec![
            Metric::cost("copies", copies as f64),
            Metric::cost("elapsed s", took),
            Metric::rate("docs/s", (p.docs * copies) as f64 / took),
        ],
        failures: 0,
        series: Vec::new(),
    })
}

async fn attachments(target: &Target, p: &Params, progress: &ProgressBar) -> Result<Outcome> {
    let mut c = Conn::open(target).await?;
    progress.set_position(0);
    progress.set_length(p.att_docs as u64);
    let docs = (0..p.att_docs).map(|i| {
        let bytes: Vec<u8> = (0..p.att_bytes)
            .map(|k| (k as u64 * 131 + i as u64 * 7) as u8)
            .collect();
        json!({"_id": format!("a{i:07}"), "n": i, "_attachments": {"blob.bin": {
            "content_type": "application/octet-stream",
            "data": base64::engine::general_purpose::STANDARD.encode(bytes)}}})
    });
    load_bodies(&mut c, "bench-repl-att", bulk_bodies(docs), progress).await?;
    let copy = Copy {
        src: "bench-repl-att",
        tgt: "bench-repl-att-tgt",
        n: p.att_docs,
        ids: sample_ids(p.att_docs, "a"),
        fields: &[
            "/_rev",
            "/_attachments/blob.bin/digest",
            "/_attachments/blob.bin/length",
        ],
    };
    let (copies, took) = copy.repeat(&mut c, target, p.seconds).await?;
    let mb = (p.att_docs * p.att_bytes * copies) as f64 / 1e6;
    Ok(Outcome {
        workload: format!(
            "replicate {} docs with {} KB attachments",
            p.att_docs,
            p.att_bytes / 1000
        ),
        metrics: vec![
            Metric::cost("copies", copies as f64),
            Metric::cost("elapsed s", took),
            Metric::rate("docs/s", (p.att_docs * copies) as f64 / took),
            Metric::rate("MB/s", mb / took),
        ],
        failures: 0,
        series: Vec::new(),
    })
}

/// Follows the target's changes, noting when each id first appears, until `want` have.
async fn watch_arrivals(
    target: Target,
    db: String,
    want: usize,
) -> Result<HashMap<String, Instant>> {
    let mut c = Conn::open(&target).await?;
    let mut seen = HashMap::new();
    let mut since = Value::from(0);
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < want && Instant::now() < deadline {
        let since_text = since
            .as_str()
            .map_or_else(|| since.to_string(), str::to_string);
        let path = format!("/{db}/_changes?feed=longpoll&timeout=1000&since={since_text}");
        let answer: Value =
            serde_json::from_slice(&c.expect(Method::GET, &path, None, &[200]).await?.body)
                .map_err(|_| Error::WrongAnswer("_changes answer is not JSON".into()))?;
        let now = Instant::now();
        for row in answer["results"].as_array().into_iter().flatten() {
            if let Some(id) = row["id"].as_str() {
                seen.entry(id.to_string()).or_insert(now);
            }
        }
        since = answer["last_seq"].clone();
    }
    Ok(seen)
}

async fn lag(target: &Target, p: &Params, progress: &ProgressBar) -> Result<Outcome> {
    let mut c = Conn::open(target).await?;
    for db in ["bench-lag-src", "bench-lag-tgt"] {
        let _ = c.call(Method::DELETE, &format!("/{db}"), None).await?;
        c.expect(Method::PUT, &format!("/{db}"), None, &[201, 202])
            .await?;
    }
    let job = json!({"source": endpoint(target, "bench-lag-src"),
                     "target": endpoint(target, "bench-lag-tgt"), "continuous": true});
    c.expect(
        Method::POST,
        "/_replicate",
        Some(Bytes::from(job.to_string())),
        &[200, 202],
    )
    .await?;
    let watcher = tokio::spawn(watch_arrivals(
        target.clone(),
        "bench-lag-tgt".into(),
        p.lag_writes,
    ));
    progress.set_position(0);
    progress.set_length(p.lag_writes as u64);
    let mut written = HashMap::new();
    let period = Duration::from_micros(1_000_000 / p.lag_rate.max(1));
    let mut tick = tokio::time::interval(period);
    for i in 0..p.lag_writes {
        tick.tick().await;
        let id = format!("l{i:07}");
        c.expect(
            Method::PUT,
            &format!("/bench-lag-src/{id}"),
            Some(Bytes::from(format!("{{\"i\":{i}}}"))),
            &[201, 202],
        )
        .await?;
        written.insert(id, Instant::now());
        progress.inc(1);
    }
    let arrived = watcher.await.map_err(|e| Error::Io(e.to_string()))??;
    let mut cancel = job.clone();
    cancel["cancel"] = json!(true);
    let _ = c
        .call(
            Method::POST,
            "/_replicate",
            Some(Bytes::from(cancel.to_string())),
        )
        .await;
    let mut lags: Vec<Duration> = written
        .iter()
        .filter_map(|(id, at)| {
            arrived
                .get(id)
                .map(|got| got.saturating_duration_since(*at))
        })
        .collect();
    lags.sort_unstable();
    let missing = (written.len() - lags.len()) as u64;
    Ok(Outcome {
        workload: format!("continuous replication lag at {} writes/s", p.lag_rate),
        metrics: vec![
            Metric::cost("p50 ms", quantile_ms(&lags, 0.5)),
            Metric::cost("p99 ms", quantile_ms(&lags, 0.99)),
            Metric::cost(
                "max ms",
                lags.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
            ),
        ],
        failures: missing,
        series: Vec::new(),
    })
}

/// Runs the workload.
pub async fn run(target: &Target, params: Params, progress: ProgressBar) -> Result<Vec<Outcome>> {
    let out = vec![
        small_docs(target, &params, &progress).await?,
        attachments(target, &params, &progress).await?,
        lag(target, &params, &progress).await?,
    ];
    progress.finish_and_clear();
    Ok(out)
}
