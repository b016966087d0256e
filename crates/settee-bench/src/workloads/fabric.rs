//! Workload 3, fabric_bench (CouchDB's own benchmark, as run for the "parallel preads"
//! change): add N documents in batches of 1,000, read random documents, `_all_docs` with and
//! without `include_docs`, `_changes`, single-document updates; then a mixed run where readers
//! hammer one document while a writer bulk-loads, each measured alone and together, in
//! alternating rounds. With a time floor, each of the first five parts also goes on until
//! that time has passed (adding more documents, reading more, listing again, updating more),
//! so a fast server is measured as long as a slow one.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::client::{Conn, Target};
use crate::error::{Error, Result};
use crate::report::{Metric, Outcome};
use crate::workloads::{bulk_bodies, load, load_bodies};

/// The workload's size.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Documents added, then read at random as many times (published: 100,000).
    pub docs: usize,
    /// Single-document updates of one document (published: 1,000).
    pub updates: usize,
    /// Documents the writer bulk-loads in the mixed run (published: 1,000,000; 0 skips it).
    pub mixed_docs: usize,
    /// Clients reading one document in the mixed run (published: 15).
    pub readers: usize,
    /// Seconds each of the first five parts goes on at least (0: exactly the counts).
    pub seconds: f64,
}

impl Params {
    /// The published sizes.
    pub const PUBLISHED: Params = Params {
        docs: 100_000,
        updates: 1000,
        mixed_docs: 1_000_000,
        readers: 15,
        seconds: 0.0,
    };
    /// Sizes that finish in seconds on a small machine.
    pub const SMALL: Params = Params {
        docs: 10_000,
        updates: 1000,
        mixed_docs: 100_000,
        readers: 15,
        seconds: 0.0,
    };
}

const DB: &str = "fabric_bench";
const LOAD_DB: &str = "fabric_bench_load";

fn id(i: usize) -> String {
    format!("doc{i:08}")
}

/// A small document, as fabric_bench's default `small` size.
fn small_doc(i: usize, rng: &mut StdRng) -> Value {
    let data: String = (0..32)
        .map(|_| rng.gen_range(b'a'..=b'z') as char)
        .collect();
    json!({"_id": id(i), "i": i, "data": data})
}

/// Whether `body` is document `i` as loaded.
fn is_doc(body: &Value, i: usize) -> bool {
    body["_id"] == id(i) && body["i"] == i && body["data"].as_str().is_some_and(|d| d.len() == 32)
}

fn outcome(workload: &str, metrics: Vec<Metric>, failures: u64) -> Outcome {
    Outcome {
        workload: format!("fabric_bench {workload}"),
        metrics,
        failures,
        series: Vec::new(),
    }
}

fn parse(body: &[u8], what: &str) -> Result<Value> {
    serde_json::from_slice(body).map_err(|_| Error::WrongAnswer(format!("{what}: not JSON")))
}

/// Reads random documents of the `n` one after another, at least `gets` of them and for at
/// least `floor`; wrong answers are failures.
async fn random_gets(
    c: &mut Conn,
    n: usize,
    gets: usize,
    floor: Duration,
    rng: &mut StdRng,
    progress: &ProgressBar,
) -> Result<Outcome> {
    let started = Instant::now();
    let until = started + floor;
    let (mut failures, mut done) = (0, 0usize);
    while done < gets || Instant::now() < until {
        done += 1;
        let i = rng.gen_range(0..n);
        let a = c
            .call(Method::GET, &format!("/{DB}/{}", id(i)), None)
            .await?;
        if a.status != 200 || !serde_json::from_slice::<Value>(&a.body).is_ok_and(|d| is_doc(&d, i))
        {
            failures += 1;
        }
        progress.inc(1);
    }
    let s = started.elapsed().as_secs_f64();
    Ok(outcome(
        "random doc gets",
        vec![
            Metric::cost("s", s),
            Metric::rate("gets/s", done as f64 / s),
        ],
        failures,
    ))
}

/// Times whole-database reads, once and then again until `until`, and checks that each
/// lists every document in id order; the time of one.
async fn listing(c: &mut Conn, n: usize, query: &str, until: Instant) -> Result<Outcome> {
    let (mut times, mut taken) = (0u32, Duration::ZERO);
    while times == 0 || Instant::now() < until {
        taken += listed(c, n, query).await?;
        times += 1;
    }
    let s = taken.as_secs_f64() / f64::from(times);
    Ok(outcome(
        query,
        vec![
            Metric::cost("ms", s * 1000.0),
            Metric::rate("rows/s", n as f64 / s),
        ],
        0,
    ))
}

/// One whole-database read, checked; the time its answer took (not the checking).
async fn listed(c: &mut Conn, n: usize, query: &str) -> Result<Duration> {
    let started = Instant::now();
    let a = c
        .expect(Method::GET, &format!("/{DB}/{query}"), None, &[200])
        .await?;
    let taken = started.elapsed();
    let body = parse(&a.body, query)?;
    let ok = if query.starts_with("_changes") {
        let ids: HashSet<&str> = body["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str())
            .collect();
        ids.len() == n && (0..n).all(|i| ids.contains(id(i).as_str()))
    } else {
        let rows = body["rows"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let docs = query.contains("include_docs=true");
        body["total_rows"] == n
            && rows.len() == n
            && rows
                .iter()
                .enumerate()
                .all(|(i, r)| r["id"] == id(i) && (!docs || is_doc(&r["doc"], i)))
    };
    if !ok {
        return Err(Error::WrongAnswer(format!(
            "{query} does not list the {n} documents"
        )));
    }
    Ok(taken)
}

/// Updates one document at least `at_least` times in a row and for at least `floor`,
/// checking each new revision and the result.
async fn updates(c: &mut Conn, at_least: usize, floor: Duration) -> Result<Outcome> {
    let path = format!("/{DB}/{}", id(0));
    let first = parse(
        &c.expect(Method::GET, &path, None, &[200]).await?.body,
        "GET",
    )?;
    let mut rev = first["_rev"].as_str().unwrap_or_default().to_string();
    let started = Instant::now();
    let until = started + floor;
    let (mut failures, mut n) = (0, 0usize);
    while n < at_least || Instant::now() < until {
        let k = n;
        n += 1;
        let body = json!({"_id": id(0), "_rev": rev, "i": 0, "data": format!("{k:032}")});
        let a = c
            .call(Method::PUT, &path, Some(Bytes::from(body.to_string())))
            .await?;
        let new = serde_json::from_slice::<Value>(&a.body)
            .ok()
            .and_then(|v| v["rev"].as_str().map(str::to_string));
        match new {
            Some(r) if a.status == 201 && r.starts_with(&format!("{}-", k + 2)) => rev = r,
            _ => failures += 1,
        }
    }
    let s = started.elapsed().as_secs_f64();
    let last = parse(
        &c.expect(Method::GET, &path, None, &[200]).await?.body,
        "GET",
    )?;
    if failures == 0
        && (last["_rev"] != rev.as_str() || last["data"] != format!("{:032}", n.saturating_sub(1)))
    {
        return Err(Error::WrongAnswer(
            "the updated document does not hold the last update".into(),
        ));
    }
    Ok(outcome(
        "single-doc updates",
        vec![
            Metric::cost("s", s),
            Metric::rate("updates/s", n as f64 / s),
        ],
        failures,
    ))
}

/// One reader: reads document 1 (one revision; document 0 took the updates) until `stop`;
/// (good reads, failures).
async fn reader(target: Target, mut stop: watch::Receiver<bool>) -> (u64, u64) {
    let (mut good, mut bad) = (0, 0);
    let Ok(mut c) = Conn::open(&target).await else {
        return (0, 1);
    };
    let path = format!("/{DB}/{}", id(1));
    while !*stop.borrow_and_update() {
        match c.call(Method::GET, &path, None).await {
            Ok(a)
                if a.status == 200
                    && serde_json::from_slice::<Value>(&a.body).is_ok_and(|d| is_doc(&d, 1)) =>
            {
                good += 1
            }
            _ => bad += 1,
        }
    }
    (good, bad)
}

/// Runs `readers` readers for as long as `during` takes; its output, the reads/s and the
/// failures.
async fn read_during<T>(
    target: &Target,
    readers: usize,
    during: impl std::future::Future<Output = T>,
) -> (T, f64, u64) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let started = Instant::now();
    let tasks: Vec<_> = (0..readers)
        .map(|_| tokio::spawn(reader(target.clone(), stop_rx.clone())))
        .collect();
    let out = during.await;
    let _ = stop_tx.send(true);
    let (mut good, mut bad) = (0, 0);
    for t in tasks {
        let (g, b) = t.await.unwrap_or((0, 1));
        good += g;
        bad += b;
    }
    (out, good as f64 / started.elapsed().as_secs_f64(), bad)
}

/// The request bodies of a bulk load of `n` documents, made before it is timed (the load
/// generator shares the machine: making them while readers run would take their CPU).
fn load_bodies_of(n: usize) -> Vec<(Bytes, usize)> {
    let mut rng = StdRng::seed_from_u64(11);
    bulk_bodies((0..n).map(move |i| small_doc(i, &mut rng))).collect()
}

/// Bulk-loads `n` documents from `bodies` into a fresh database; seconds taken.
async fn bulk_load(
    target: &Target,
    n: usize,
    bodies: Vec<(Bytes, usize)>,
    progress: &ProgressBar,
) -> Result<f64> {
    let mut c = Conn::open(target).await?;
    let started = Instant::now();
    load_bodies(&mut c, LOAD_DB, bodies.into_iter(), progress).await?;
    let s = started.elapsed().as_secs_f64();
    let info = parse(
        &c.expect(Method::GET, &format!("/{LOAD_DB}"), None, &[200])
            .await?
            .body,
        LOAD_DB,
    )?;
    if info["doc_count"] != n {
        return Err(Error::WrongAnswer(format!(
            "{LOAD_DB} holds {} documents after loading {n}",
            info["doc_count"]
        )));
    }
    let _ = c.call(Method::DELETE, &format!("/{LOAD_DB}"), None).await;
    Ok(s)
}

/// Loads with readers running, each time between two windows of reading alone, so that
/// every load is compared with reads measured just before and just after it (the machine's
/// speed drifts over seconds when it is shared).
const MIXED_ROUNDS: usize = 3;

/// The mixed run: load alone, then [`MIXED_ROUNDS`] times read alone for as long and load
/// while reading, then read alone once more. Each round's share kept is its reads/s while
/// loading over the mean of the windows alone on either side; the median round is reported,
/// with the lowest and the highest.
///
/// The load alone is repeated (each into a fresh database) until the time floor has passed,
/// so that a fast server's rate alone is measured long enough; the loads while read take
/// longer than alone.
async fn mixed(target: &Target, params: Params, progress: &ProgressBar) -> Result<Vec<Outcome>> {
    let docs = params.mixed_docs;
    let bodies = load_bodies_of(docs);
    let (mut loads_alone, mut took_alone) = (0u32, 0.0);
    while loads_alone == 0 || took_alone < params.seconds {
        took_alone += bulk_load(target, docs, bodies.clone(), progress).await?;
        loads_alone += 1;
    }
    let load_alone = took_alone / f64::from(loads_alone);
    let window = Duration::from_secs_f64(load_alone.clamp(2.0, 30.0));
    let read_alone = || read_during(target, params.readers, tokio::time::sleep(window));
    let ((), mut before, mut failures) = read_alone().await;
    let (mut alone, mut during, mut kept, mut loads) =
        (vec![before], Vec::new(), Vec::new(), Vec::new());
    for _ in 0..MIXED_ROUNDS {
        let (load, reads, bad) = read_during(
            target,
            params.readers,
            bulk_load(target, docs, bodies.clone(), progress),
        )
        .await;
        loads.push(load?);
        let ((), after, bad_after) = read_alone().await;
        failures += bad + bad_after;
        kept.push(100.0 * reads / ((before + after) / 2.0).max(f64::MIN_POSITIVE));
        during.push(reads);
        alone.push(after);
        before = after;
    }
    let n = docs as f64;
    let load_mixed = median(&mut loads);
    let (lowest, highest) = (min(&kept), max(&kept));
    Ok(vec![
        outcome(
            &format!("mixed, {} readers", params.readers),
            vec![
                Metric::rate("reads/s alone", mean(&alone)),
                Metric::rate("reads/s while loading", mean(&during)),
                Metric::rate("% kept", median(&mut kept)),
                Metric::rate("% kept, lowest round", lowest),
                Metric::rate("% kept, highest round", highest),
            ],
            failures,
        ),
        outcome(
            "mixed, bulk load",
            vec![
                Metric::rate("docs", n),
                Metric::rate("docs/s alone", n / load_alone),
                Metric::rate("docs/s while read", n / load_mixed),
            ],
            0,
        ),
    ])
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(0.0)
}

fn min(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// Runs the workload. A wrong listing or load is an error; wrong single answers are failures.
pub async fn run(target: &Target, params: Params, progress: ProgressBar) -> Result<Vec<Outcome>> {
    if params.docs < 2 {
        return Err(Error::Usage("fabric_bench needs at least 2 documents"));
    }
    progress.set_length(
        (2 * params.docs + params.updates + (1 + MIXED_ROUNDS) * params.mixed_docs) as u64,
    );
    let mut c = Conn::open(target).await?;
    let mut rng = StdRng::seed_from_u64(10);
    let floor = Duration::from_secs_f64(params.seconds.max(0.0));
    let started = Instant::now();
    let mut n = 0usize;
    // The documents asked for, then more while the time floor lasts.
    let docs = (0..).map_while(|i| {
        (i < params.docs || started.elapsed() < floor).then(|| {
            n += 1;
            small_doc(i, &mut rng)
        })
    });
    load(&mut c, DB, docs, &progress).await?;
    let s = started.elapsed().as_secs_f64();
    let mut out = vec![outcome(
        "add docs",
        vec![Metric::cost("s", s), Metric::rate("docs/s", n as f64 / s)],
        0,
    )];
    out.push(random_gets(&mut c, n, params.docs, floor, &mut rng, &progress).await?);
    for query in ["_all_docs", "_all_docs?include_docs=true", "_changes"] {
        out.push(listing(&mut c, n, query, Instant::now() + floor).await?);
    }
    if params.updates > 0 {
        out.push(updates(&mut c, params.updates, floor).await?);
        progress.inc(params.updates as u64);
    }
    if params.mixed_docs > 0 {
        out.extend(mixed(target, params, &progress).await?);
    }
    let _ = c.call(Method::DELETE, &format!("/{DB}"), None).await;
    progress.finish_and_clear();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_recognised_only_when_whole() {
        let doc = small_doc(7, &mut StdRng::seed_from_u64(1));
        assert!(is_doc(&doc, 7));
        assert!(!is_doc(&doc, 8));
        let mut short = doc.clone();
        short["data"] = json!("abc");
        assert!(!is_doc(&short, 7));
    }
}
