//! Mango: score documents (the indexing workload's shape), a JSON index on `score` built by
//! the first query, equality `_find`s with `limit: 25` from many clients, range queries
//! sorted on the index returning 10,000 documents, and a selector no index serves (a full
//! scan). Every answer is checked against what the generated documents say it must be.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::client::{Conn, Target};
use crate::error::{Error, Result};
use crate::report::{quantile_ms, Metric, Outcome};
use crate::workloads::load;

const DB: &str = "bench_mango";
/// Highest score (scores are uniform in `0..=MAX_SCORE`).
const MAX_SCORE: i64 = 5000;
/// Rows a range query returns.
const RANGE_ROWS: usize = 10_000;
/// Range queries timed.
const RANGES: usize = 5;

/// The workload's sizes.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Score documents (the issue's size: 1,000,000).
    pub docs: usize,
    /// Concurrent clients of the equality queries.
    pub clients: usize,
    /// Equality queries per client.
    pub queries: usize,
    /// Seconds the equality queries, the range queries and the full scans each run at least,
    /// past their counts, so that a fast server is measured long enough.
    pub seconds: f64,
}

impl Params {
    /// The full size.
    pub const FULL: Params = Params {
        docs: 1_000_000,
        clients: 16,
        queries: 250,
        seconds: 3.0,
    };
    /// Sizes that finish in seconds on a small machine.
    pub const SMALL: Params = Params {
        docs: 100_000,
        clients: 16,
        queries: 100,
        seconds: 3.0,
    };
}

/// What the generated documents say: ids by score, in id order; the scan's expected ids.
struct Expected {
    by_score: BTreeMap<i64, Vec<String>>,
    scan: Vec<String>,
}

fn letters(rng: &mut StdRng, n: usize) -> String {
    (0..n).map(|_| rng.gen_range(b'a'..=b'z') as char).collect()
}

/// The documents, and what queries over them must answer.
fn documents(n: usize, seed: u64) -> (Vec<Value>, Expected) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut expected = Expected {
        by_score: BTreeMap::new(),
        scan: Vec::new(),
    };
    let docs = (0..n)
        .map(|i| {
            let id = format!("d{i:08}");
            let (y, m, d) = (
                rng.gen_range(2010..=2019),
                rng.gen_range(1..=12),
                rng.gen_range(1..=28),
            );
            let score = rng.gen_range(0..=MAX_SCORE);
            let username = letters(&mut rng, 6);
            if username.starts_with("zz") {
                expected.scan.push(id.clone());
            }
            expected.by_score.entry(score).or_default().push(id.clone());
            json!({"_id": id, "metadata": {"docType": "score",
                "createdAt": format!("{y}-{m:02}-{d:02}")}, "username": username, "score": score})
        })
        .collect();
    (docs, expected)
}

/// The ids of a `_find` answer, or why it is not one.
fn ids(body: &[u8], what: &str) -> Result<Vec<String>> {
    let answer: Value = serde_json::from_slice(body)
        .map_err(|_| Error::WrongAnswer(format!("{what}: not JSON")))?;
    answer["docs"]
        .as_array()
        .ok_or_else(|| Error::WrongAnswer(format!("{what}: no docs")))?
        .iter()
        .map(|d| {
            d["_id"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| Error::WrongAnswer(format!("{what}: a document without _id")))
        })
        .collect()
}

async fn find(c: &mut Conn, body: Value) -> Result<Vec<String>> {
    let what = format!("_find {body}");
    let answer = c
        .expect(
            Method::POST,
            &format!("/{DB}/_find"),
            Some(Bytes::from(body.to_string())),
            &[200],
        )
        .await?;
    ids(&answer.body, &what)
}

/// Creates the index and times the first query, which builds it.
async fn build(target: &Target, n: usize, e: &Expected) -> Result<Outcome> {
    let mut c = Conn::open(target).await?;
    let index = json!({"index": {"fields": ["score"]}, "ddoc": "score", "name": "score"});
    c.expect(
        Method::POST,
        &format!("/{DB}/_index"),
        Some(Bytes::from(index.to_string())),
        &[200],
    )
    .await?;
    let started = Instant::now();
    let body = json!({"selector": {"score": {"$gte": 0}}, "sort": ["score"], "limit": 1});
    // A server may give up waiting for its index (CouchDB answers 500 `timeout` while the
    // build goes on): ask again until it answers.
    let answer = loop {
        let answer = c
            .call(
                Method::POST,
                &format!("/{DB}/_find"),
                Some(Bytes::from(body.to_string())),
            )
            .await?;
        let timed_out = answer.status == 500
            && serde_json::from_slice::<Value>(&answer.body).is_ok_and(|e| e["error"] == "timeout");
        if !timed_out {
            break answer;
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    if answer.status != 200 {
        return Err(Error::WrongAnswer(format!(
            "the first _find: status {}",
            answer.status
        )));
    }
    let got = ids(&answer.body, "the first _find")?;
    let first = e.by_score.values().next().and_then(|ids| ids.first());
    if got.first() != first {
        return Err(Error::WrongAnswer(
            "the first document by score is not the lowest score's first".into(),
        ));
    }
    Ok(Outcome {
        workload: "mango index build".into(),
        metrics: vec![
            Metric::cost("build+query s", seconds),
            Metric::rate("docs/s", n as f64 / seconds),
        ],
        failures: 0,
        series: Vec::new(),
    })
}

/// One client of the equality queries: latencies and wrong answers.
async fn equality_client(
    target: Target,
    queries: usize,
    until: Instant,
    seed: u64,
    by_score: std::sync::Arc<BTreeMap<i64, Vec<String>>>,
    progress: ProgressBar,
) -> (Vec<Duration>, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut latencies = Vec::with_capacity(queries);
    let mut failures = 0;
    let Ok(mut c) = Conn::open(&target).await else {
        return (latencies, queries as u64);
    };
    while latencies.len() < queries || Instant::now() < until {
        let score = rng.gen_range(0..=MAX_SCORE);
        let want: Vec<String> = by_score
            .get(&score)
            .map(|ids| ids.iter().take(25).cloned().collect())
            .unwrap_or_default();
        let started = Instant::now();
        let got = find(&mut c, json!({"selector": {"score": score}, "limit": 25})).await;
        latencies.push(started.elapsed());
        if got.ok() != Some(want) {
            failures += 1;
        }
        progress.inc(1);
    }
    (latencies, failures)
}

async fn equality(
    target: &Target,
    p: Params,
    e: &Expected,
    progress: &ProgressBar,
) -> Result<Outcome> {
    let by_score = std::sync::Arc::new(e.by_score.clone());
    progress.set_length((p.clients * p.queries) as u64);
    progress.set_position(0);
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(p.seconds.max(0.0));
    let tasks: Vec<_> = (0..p.clients)
        .map(|i| {
            tokio::spawn(equality_client(
                target.clone(),
                p.queries,
                until,
                100 + i as u64,
                by_score.clone(),
                progress.clone(),
            ))
        })
        .collect();
    let (mut latencies, mut failures) = (Vec::new(), 0);
    for t in tasks {
        let (l, f) = t.await.map_err(|e| Error::Io(e.to_string()))?;
        latencies.extend(l);
        failures += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Ok(Outcome {
        workload: format!("mango equality _find, limit 25, {} clients", p.clients),
        metrics: vec![
            Metric::rate(
                "queries/s",
                (latencies.len() as f64 - failures as f64) / elapsed,
            ),
            Metric::cost("p50 ms", quantile_ms(&latencies, 0.5)),
            Metric::cost("p99 ms", quantile_ms(&latencies, 0.99)),
        ],
        failures,
        series: Vec::new(),
    })
}

/// Range queries sorted on the index, each returning `RANGE_ROWS` documents: [`RANGES`] of
/// them, and more until `floor` has passed.
async fn ranges(target: &Target, e: &Expected, floor: f64) -> Result<Outcome> {
    let mut c = Conn::open(target).await?;
    let mut rng = StdRng::seed_from_u64(7);
    let (mut rows, mut seconds, mut failures) = (0usize, 0.0, 0u64);
    let mut asked = 0;
    while asked < RANGES || seconds < floor {
        asked += 1;
        let low = rng.gen_range(0..MAX_SCORE / 2);
        let want: Vec<String> = e
            .by_score
            .range(low..)
            .flat_map(|(_, ids)| ids.iter().cloned())
            .take(RANGE_ROWS)
            .collect();
        let body = json!({"selector": {"score": {"$gte": low}}, "sort": ["score"],
            "limit": RANGE_ROWS});
        let started = Instant::now();
        let got = find(&mut c, body).await?;
        seconds += started.elapsed().as_secs_f64();
        rows += got.len();
        if got != want {
            failures += 1;
        }
    }
    Ok(Outcome {
        workload: format!("mango range sorted on the index, {RANGE_ROWS} rows"),
        metrics: vec![
            Metric::rate("rows/s", rows as f64 / seconds),
            Metric::cost("ms per query", seconds * 1000.0 / asked as f64),
        ],
        failures,
        series: Vec::new(),
    })
}

/// A selector no index serves: every document read, once and again until `floor` has
/// passed; the mean scan is reported.
async fn scan(target: &Target, n: usize, e: &Expected, floor: f64) -> Result<Outcome> {
    let mut c = Conn::open(target).await?;
    let body = json!({"selector": {"username": {"$regex": "^zz"}}, "limit": n});
    let started = Instant::now();
    let (mut scans, mut failures) = (0u32, 0u64);
    while scans == 0 || started.elapsed().as_secs_f64() < floor {
        let got = find(&mut c, body.clone()).await?;
        failures += u64::from(got != e.scan);
        scans += 1;
    }
    let seconds = started.elapsed().as_secs_f64() / f64::from(scans);
    Ok(Outcome {
        workload: "mango full scan ($regex, no index)".into(),
        metrics: vec![
            Metric::cost("s", seconds),
            Metric::rate("docs examined/s", n as f64 / seconds),
        ],
        failures,
        series: Vec::new(),
    })
}

/// Runs the workload.
pub async fn run(target: &Target, p: Params, progress: ProgressBar) -> Result<Vec<Outcome>> {
    let (docs, expected) = documents(p.docs, 30);
    progress.set_length(p.docs as u64);
    let mut c = Conn::open(target).await?;
    load(&mut c, DB, docs.into_iter(), &progress).await?;
    let mut out = vec![build(target, p.docs, &expected).await?];
    out.push(equality(target, p, &expected, &progress).await?);
    out.push(ranges(target, &expected, p.seconds).await?);
    out.push(scan(target, p.docs, &expected, p.seconds).await?);
    progress.finish_and_clear();
    let _ = c.call(Method::DELETE, &format!("/{DB}"), None).await;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_follow_the_documents() {
        let (docs, e) = documents(2000, 1);
        let total: usize = e.by_score.values().map(Vec::len).sum();
        assert_eq!(total, docs.len());
        for (score, ids) in &e.by_score {
            for id in ids {
                let doc = docs.iter().find(|d| d["_id"] == json!(id)).unwrap();
                assert_eq!(doc["score"], json!(score));
            }
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "in id order");
        }
        let scanned = docs
            .iter()
            .filter(|d| d["username"].as_str().unwrap().starts_with("zz"))
            .count();
        assert_eq!(scanned, e.scan.len());
        assert!(ids(br#"{"docs":[{"_id":"a"}]}"#, "t").unwrap() == ["a"]);
        assert!(ids(br#"{"docs":[{}]}"#, "t").is_err());
    }
}
