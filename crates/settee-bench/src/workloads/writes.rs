//! Durable writes, each measured for a fixed time rather than a fixed count, so that a fast
//! server is measured as long as a slow one: `_bulk_docs` in batches of 1,000 with
//! sequential ids and with random 32-hex ids (as PouchDB sends), and single-document
//! `PUT`s with fresh random ids from one client and from many. Every answer is checked
//! (each document saved under its own id), and each database must hold exactly the
//! documents acknowledged, with a sample read back.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::client::{Conn, Target};
use crate::error::{Error, Result};
use crate::report::{quantile_ms, Metric, Outcome};

/// The workload's sizes.
#[derive(Clone, Debug)]
pub struct Params {
    /// How long each measurement runs.
    pub seconds: f64,
    /// Documents per `_bulk_docs` request.
    pub batch: usize,
    /// Client counts for single-document writes, one measurement each.
    pub clients: Vec<usize>,
}

impl Params {
    /// The issue's shape: 1,000-doc batches, one and 64 clients, 3 s each.
    pub fn standard() -> Params {
        Params {
            seconds: 3.0,
            batch: 1000,
            clients: vec![1, 64],
        }
    }
}

const DB: &str = "bench_writes";
/// Documents read back from each database to check their bodies.
const SAMPLE: usize = 200;

/// How document ids are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ids {
    /// `w00000000`, `w00000001`, ...: every batch appends to the end of the id order.
    Sequential,
    /// 32 random hex digits, as PouchDB makes them: every batch lands all over the tree.
    Random,
}

/// A document's id: the `n`th of a run.
fn make_id(ids: Ids, n: usize, rng: &mut StdRng) -> String {
    match ids {
        Ids::Sequential => format!("w{n:08}"),
        Ids::Random => format!("{:032x}", rng.gen::<u128>()),
    }
}

/// The body every document of the workload has: a small document like fabric_bench's,
/// written by hand (the generator shares the machine with the server).
fn doc_json(out: &mut Vec<u8>, id: &str, n: usize) {
    use std::io::Write;
    let _ = write!(
        out,
        "{{\"_id\":\"{id}\",\"n\":{n},\"data\":\"{:032}\",\"tags\":[\"bench\",\"w{}\"]}}",
        n.wrapping_mul(2_654_435_761) % 1_000_000_007,
        n % 10
    );
}

/// Whether `body` is the document written as number `n` with id `id`.
fn is_doc(body: &Value, id: &str, n: usize) -> bool {
    let mut want = Vec::new();
    doc_json(&mut want, id, n);
    let want: Value = serde_json::from_slice(&want).unwrap_or_default();
    body["_id"] == want["_id"] && body["n"] == want["n"] && body["data"] == want["data"]
}

/// Deletes and creates the workload's database.
async fn fresh_db(c: &mut Conn) -> Result<()> {
    let _ = c.call(Method::DELETE, &format!("/{DB}"), None).await?;
    c.expect(Method::PUT, &format!("/{DB}"), None, &[201, 202])
        .await?;
    Ok(())
}

/// Checks that the database holds exactly `written` (id, number) documents: its count, and
/// a sample of them read back.
async fn verify(c: &mut Conn, written: &[(String, usize)], rng: &mut StdRng) -> Result<u64> {
    let info = c
        .expect(Method::GET, &format!("/{DB}"), None, &[200])
        .await?;
    let info: Value = serde_json::from_slice(&info.body)
        .map_err(|_| Error::WrongAnswer("database info is not JSON".into()))?;
    if info["doc_count"] != written.len() {
        return Err(Error::WrongAnswer(format!(
            "{} documents acknowledged, but doc_count is {}",
            written.len(),
            info["doc_count"]
        )));
    }
    let mut failures = 0;
    for _ in 0..SAMPLE.min(written.len()) {
        let (id, n) = &written[rng.gen_range(0..written.len())];
        let a = c.call(Method::GET, &format!("/{DB}/{id}"), None).await?;
        let ok = a.status == 200
            && serde_json::from_slice::<Value>(&a.body).is_ok_and(|d| is_doc(&d, id, *n));
        failures += u64::from(!ok);
    }
    Ok(failures)
}

/// One `_bulk_docs` request body of `count` documents from number `first`.
fn batch_body(ids: Ids, first: usize, count: usize, rng: &mut StdRng) -> (Bytes, Vec<String>) {
    let mut body = Vec::with_capacity(count * 110 + 16);
    body.extend_from_slice(b"{\"docs\":[");
    let mut names = Vec::with_capacity(count);
    for k in 0..count {
        if k > 0 {
            body.push(b',');
        }
        let id = make_id(ids, first + k, rng);
        doc_json(&mut body, &id, first + k);
        names.push(id);
    }
    body.extend_from_slice(b"]}");
    (Bytes::from(body), names)
}

/// Whether a `_bulk_docs` answer saved every document of the batch under its id.
fn all_saved(answer: &[u8], names: &[String]) -> bool {
    let Ok(rows) = serde_json::from_slice::<Vec<Value>>(answer) else {
        return false;
    };
    rows.len() == names.len()
        && rows
            .iter()
            .zip(names)
            .all(|(r, id)| r["ok"] == true && r["id"] == id.as_str())
}

/// `_bulk_docs` batches for the set time, one request at a time. The rate counts the
/// requests' own time: each batch is made before its request is sent, and its answer checked
/// after, so that where the generator shares the server's cores it takes none of them while
/// the server works.
async fn bulk(c: &mut Conn, p: &Params, ids: Ids, progress: &ProgressBar) -> Result<Outcome> {
    fresh_db(c).await?;
    let mut rng = StdRng::seed_from_u64(34);
    let mut written: Vec<(String, usize)> = Vec::new();
    let path = format!("/{DB}/_bulk_docs");
    let limit = Duration::from_secs_f64(p.seconds);
    let started = Instant::now();
    let (mut batches, mut taken) = (0u64, Duration::ZERO);
    while batches == 0 || started.elapsed() < limit {
        let (body, names) = batch_body(ids, written.len(), p.batch, &mut rng);
        let sent = Instant::now();
        let answer = c.expect(Method::POST, &path, Some(body), &[201, 202]).await;
        taken += sent.elapsed();
        if !all_saved(&answer?.body, &names) {
            return Err(Error::WrongAnswer(
                "_bulk_docs did not save every document".into(),
            ));
        }
        let base = written.len();
        written.extend(names.into_iter().enumerate().map(|(k, id)| (id, base + k)));
        progress.inc(p.batch as u64);
        batches += 1;
    }
    let s = taken.as_secs_f64();
    let failures = verify(c, &written, &mut rng).await?;
    let name = match ids {
        Ids::Sequential => "sequential ids",
        Ids::Random => "random ids",
    };
    Ok(Outcome {
        workload: format!("writes: _bulk_docs, {} docs a batch, {name}", p.batch),
        metrics: vec![
            Metric::rate("docs/s", written.len() as f64 / s),
            Metric::cost("ms a batch", s * 1000.0 / batches as f64),
        ],
        failures,
        series: Vec::new(),
    })
}

/// One single-document writer: `PUT`s fresh random ids until `until`; (documents
/// acknowledged, latencies, failures).
async fn writer(
    target: Target,
    seed: u64,
    until: Instant,
    progress: ProgressBar,
) -> (Vec<(String, usize)>, Vec<Duration>, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut written, mut latencies, mut failures) = (Vec::new(), Vec::new(), 0);
    let Ok(mut c) = Conn::open(&target).await else {
        return (written, latencies, 1);
    };
    while Instant::now() < until {
        let id = make_id(Ids::Random, 0, &mut rng);
        let n = rng.gen_range(0..1_000_000);
        let mut body = Vec::with_capacity(128);
        doc_json(&mut body, &id, n);
        let started = Instant::now();
        let answer = c
            .call(Method::PUT, &format!("/{DB}/{id}"), Some(Bytes::from(body)))
            .await;
        latencies.push(started.elapsed());
        let ok = answer.is_ok_and(|a| {
            a.status == 201
                && serde_json::from_slice::<Value>(&a.body)
                    .is_ok_and(|v| v["ok"] == true && v["id"] == id.as_str())
        });
        if ok {
            written.push((id, n));
        } else {
            failures += 1;
        }
        progress.inc(1);
    }
    (written, latencies, failures)
}

/// Single-document durable writes from `clients` clients for the set time.
async fn singles(
    c: &mut Conn,
    target: &Target,
    p: &Params,
    clients: usize,
    progress: &ProgressBar,
) -> Result<Outcome> {
    fresh_db(c).await?;
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(p.seconds);
    let tasks: Vec<_> = (0..clients)
        .map(|k| {
            tokio::spawn(writer(
                target.clone(),
                3400 + k as u64,
                until,
                progress.clone(),
            ))
        })
        .collect();
    let (mut written, mut latencies, mut failures) = (Vec::new(), Vec::new(), 0);
    for t in tasks {
        let (w, l, f) = t
            .await
            .map_err(|e| Error::Io(format!("a writer stopped: {e}")))?;
        written.extend(w);
        latencies.extend(l);
        failures += f;
    }
    let s = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let mut rng = StdRng::seed_from_u64(35);
    failures += verify(c, &written, &mut rng).await?;
    Ok(Outcome {
        workload: format!(
            "writes: single-doc PUTs, {clients} client{}",
            if clients == 1 { "" } else { "s" }
        ),
        metrics: vec![
            Metric::rate("docs/s", written.len() as f64 / s),
            Metric::cost("p50 ms", quantile_ms(&latencies, 0.5)),
            Metric::cost("p99 ms", quantile_ms(&latencies, 0.99)),
        ],
        failures,
        series: Vec::new(),
    })
}

/// Runs the workload: bulk loads with sequential then random ids, then single-document
/// writes for each client count; the database is deleted at the end.
pub async fn run(target: &Target, p: &Params, progress: ProgressBar) -> Result<Vec<Outcome>> {
    let mut c = Conn::open(target).await?;
    let mut out = vec![
        bulk(&mut c, p, Ids::Sequential, &progress).await?,
        bulk(&mut c, p, Ids::Random, &progress).await?,
    ];
    for &clients in &p.clients {
        out.push(singles(&mut c, target, p, clients, &progress).await?);
    }
    let _ = c.call(Method::DELETE, &format!("/{DB}"), None).await?;
    progress.finish_and_clear();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_read_back_as_written() {
        let mut rng = StdRng::seed_from_u64(1);
        let (body, names) = batch_body(Ids::Random, 5, 3, &mut rng);
        let docs: Value = serde_json::from_slice(&body).unwrap();
        let docs = docs["docs"].as_array().unwrap();
        assert_eq!(docs.len(), 3);
        for (k, (d, id)) in docs.iter().zip(&names).enumerate() {
            assert_eq!(id.len(), 32);
            assert!(is_doc(d, id, 5 + k));
            assert!(!is_doc(d, id, 6 + k));
        }
        let seq = batch_body(Ids::Sequential, 7, 2, &mut rng).1;
        assert_eq!(seq, ["w00000007", "w00000008"]);
    }

    #[test]
    fn an_answer_must_save_every_document_under_its_id() {
        let names = vec!["a".to_string(), "b".to_string()];
        assert!(all_saved(
            br#"[{"ok":true,"id":"a","rev":"1-x"},{"ok":true,"id":"b","rev":"1-y"}]"#,
            &names
        ));
        assert!(!all_saved(br#"[{"ok":true,"id":"a","rev":"1-x"}]"#, &names));
        assert!(!all_saved(
            br#"[{"ok":true,"id":"a"},{"id":"b","error":"conflict"}]"#,
            &names
        ));
        assert!(!all_saved(
            br#"[{"ok":true,"id":"b"},{"ok":true,"id":"a"}]"#,
            &names
        ));
    }
}
