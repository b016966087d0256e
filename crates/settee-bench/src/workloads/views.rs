//! Workload 2, view indexing (from "CouchDB Indexing Benchmark"), and workload 5, word count
//! (from "CouchDB Performance – Too much TCP"): load documents, put a design document, time
//! the first `?group=true` query (which builds the index) and check every group's value
//! against sums computed here.

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
use crate::report::{Metric, Outcome};
use crate::workloads::load;

/// The published map function.
pub const SCORES_MAP: &str = "function(doc){ if (doc.metadata && doc.metadata.createdAt) { var p = doc.metadata.createdAt.split(\"-\"); emit([p[0], p[1]], doc.score); } }";
/// The published JavaScript reduce.
pub const JS_SUM: &str = "function(keys, values, rereduce) { return sum(values); }";

/// Sizes of the indexing workloads.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Score documents (published: 100,000).
    pub docs: usize,
    /// Large score documents, each with up to 100 extra ~800-byte fields (0 skips them).
    pub large_docs: usize,
    /// Word documents for the word count (published: 200,000).
    pub words: usize,
    /// Seconds each build (and the word count's repeated query) goes on at least: the
    /// index is built again under another signature until then (0: once).
    pub seconds: f64,
}

impl Params {
    /// The published sizes.
    pub const PUBLISHED: Params = Params {
        docs: 100_000,
        large_docs: 20_000,
        words: 200_000,
        seconds: 0.0,
    };
    /// Sizes that finish in seconds on a small machine.
    pub const SMALL: Params = Params {
        docs: 20_000,
        large_docs: 1_000,
        words: 50_000,
        seconds: 0.0,
    };
}

fn letters(rng: &mut StdRng, n: usize) -> String {
    (0..n).map(|_| rng.gen_range(b'a'..=b'z') as char).collect()
}

/// A score document; its (year, month) and score.
fn score_doc(i: usize, rng: &mut StdRng, extra_fields: usize) -> (Value, (String, String), i64) {
    let (y, m, d) = (
        rng.gen_range(2010..=2019),
        rng.gen_range(1..=12),
        rng.gen_range(1..=28),
    );
    let score = rng.gen_range(0..=5000);
    let mut doc = json!({"_id": format!("d{i:08}"), "metadata": {"docType": "score", "createdAt": format!("{y}-{m:02}-{d:02}")}, "username": letters(rng, 6), "score": score});
    if extra_fields > 0 {
        for f in 0..rng.gen_range(0..=extra_fields) {
            doc[format!("field{f}")] = json!(letters(rng, 800));
        }
    }
    (doc, (y.to_string(), format!("{m:02}")), score)
}

/// Polls `/_active_tasks` once a second until `done` says stop; the indexer's
/// `changes_done` per second as `(seconds, changes/s)`.
async fn sample_tasks(
    target: Target,
    db: String,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<(f64, f64)> {
    let Ok(mut c) = Conn::open(&target).await else {
        return Vec::new();
    };
    let started = Instant::now();
    let mut series = Vec::new();
    let mut last: Option<(f64, f64)> = None;
    while !*stop.borrow() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Ok(answer) = c.call(Method::GET, "/_active_tasks", None).await else {
            break;
        };
        let tasks: Vec<Value> = serde_json::from_slice(&answer.body).unwrap_or_default();
        let done: f64 = tasks
            .iter()
            .filter(|t| {
                t["type"] == "indexer" && t["database"].as_str().is_some_and(|d| d.ends_with(&db))
            })
            .filter_map(|t| t["changes_done"].as_f64())
            .sum();
        let now = started.elapsed().as_secs_f64();
        if let Some((t0, d0)) = last {
            if done >= d0 {
                series.push((now, (done - d0) / (now - t0)));
            }
        }
        last = Some((now, done));
    }
    series
}

/// Puts `ddoc` with one view and times the first `?group=true` query; checks its rows. Until
/// `floor` has passed, builds it again under a new signature (a comment before the map
/// function; the extra design documents are deleted) and reports the mean build time, with
/// the indexer's progress during the first.
async fn time_first_group(
    target: &Target,
    db: &str,
    ddoc: &str,
    view: Value,
    expected: &BTreeMap<String, f64>,
    floor: Duration,
) -> Result<(f64, Vec<(f64, f64)>)> {
    let mut c = Conn::open(target).await?;
    let until = Instant::now() + floor;
    let (mut builds, mut taken, mut first_series) = (0u32, 0.0, None);
    while builds == 0 || Instant::now() < until {
        let (mut name, mut view) = (ddoc.to_string(), view.clone());
        if builds > 0 {
            name = format!("{ddoc}-{builds}");
            let map = view["map"].as_str().unwrap_or_default();
            view["map"] = json!(format!("/* build {builds} */ {map}"));
        }
        let body = Bytes::from(json!({"views": {"v": view}}).to_string());
        let path = format!("/{db}/_design/{name}");
        let put = c
            .expect(Method::PUT, &path, Some(body), &[201, 202])
            .await?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let sampler = tokio::spawn(sample_tasks(target.clone(), db.to_string(), stop_rx));
        let started = Instant::now();
        let answer = c
            .expect(
                Method::GET,
                &format!("{path}/_view/v?group=true"),
                None,
                &[200],
            )
            .await?;
        taken += started.elapsed().as_secs_f64();
        let _ = stop_tx.send(true);
        let series = sampler.await.unwrap_or_default();
        first_series.get_or_insert(series);
        check_rows(&answer.body, expected, &format!("{db}/{name}"))?;
        if builds > 0 {
            let rev = serde_json::from_slice::<Value>(&put.body)
                .ok()
                .and_then(|v| v["rev"].as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = c
                .call(Method::DELETE, &format!("{path}?rev={rev}"), None)
                .await;
        }
        builds += 1;
    }
    if builds > 1 {
        let cleanup = format!("/{db}/_view_cleanup");
        let _ = c
            .call(Method::POST, &cleanup, Some(Bytes::from("{}")))
            .await;
    }
    Ok((taken / f64::from(builds), first_series.unwrap_or_default()))
}

/// Whether `?group=true` rows equal `expected` (key → value).
fn check_rows(body: &[u8], expected: &BTreeMap<String, f64>, what: &str) -> Result<()> {
    let answer: Value = serde_json::from_slice(body)
        .map_err(|_| Error::WrongAnswer(format!("{what}: not JSON")))?;
    let rows = answer["rows"]
        .as_array()
        .ok_or_else(|| Error::WrongAnswer(format!("{what}: no rows")))?;
    let got: BTreeMap<String, Option<f64>> = rows
        .iter()
        .map(|r| (r["key"].to_string(), r["value"].as_f64()))
        .collect();
    let same = got.len() == expected.len()
        && got
            .iter()
            .all(|(k, v)| expected.get(k).is_some_and(|e| Some(*e) == *v));
    if !same {
        return Err(Error::WrongAnswer(format!(
            "{what}: {} groups, expected {}, or wrong values",
            got.len(),
            expected.len()
        )));
    }
    Ok(())
}

/// Workload 2 for one document set: the JS reduce and `_sum` over the same documents.
#[allow(clippy::too_many_arguments)]
async fn indexing(
    target: &Target,
    db: &str,
    label: &str,
    n: usize,
    extra_fields: usize,
    seed: u64,
    floor: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Outcome>> {
    let mut c = Conn::open(target).await?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut expected: BTreeMap<String, f64> = BTreeMap::new();
    let docs: Vec<Value> = (0..n)
        .map(|i| {
            let (doc, (y, m), score) = score_doc(i, &mut rng, extra_fields);
            *expected.entry(json!([y, m]).to_string()).or_insert(0.0) += score as f64;
            doc
        })
        .collect();
    progress.set_length(progress.length().unwrap_or(0) + n as u64);
    load(&mut c, db, docs.into_iter(), progress).await?;
    let mut out = Vec::new();
    for (name, reduce) in [("JS sum", JS_SUM), ("_sum", "_sum")] {
        let ddoc = if reduce == "_sum" { "native" } else { "js" };
        let (seconds, series) = time_first_group(
            target,
            db,
            ddoc,
            json!({"map": SCORES_MAP, "reduce": reduce}),
            &expected,
            floor,
        )
        .await?;
        out.push(Outcome {
            workload: format!("{label} indexing, {name}"),
            metrics: vec![
                Metric::cost("build+query s", seconds),
                Metric::rate("docs/s", n as f64 / seconds),
            ],
            failures: 0,
            series,
        });
    }
    let _ = c.call(Method::DELETE, &format!("/{db}"), None).await;
    Ok(out)
}

/// Workload 5: Zipf-distributed words; build times and `group=true` over the built index.
async fn word_count(
    target: &Target,
    n: usize,
    seed: u64,
    floor: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Outcome>> {
    let mut c = Conn::open(target).await?;
    let mut rng = StdRng::seed_from_u64(seed);
    let vocabulary = 5000;
    let cumulative: Vec<f64> = (0..vocabulary)
        .scan(0.0, |acc, i| {
            *acc += 1.0 / (i as f64 + 1.0);
            Some(*acc)
        })
        .collect();
    let total = *cumulative.last().expect("a vocabulary");
    let mut expected: BTreeMap<String, f64> = BTreeMap::new();
    let docs: Vec<Value> = (0..n)
        .map(|i| {
            let x = rng.gen_range(0.0..total);
            let word = format!("w{}", cumulative.partition_point(|&c| c < x));
            *expected.entry(json!(word).to_string()).or_insert(0.0) += 1.0;
            json!({"_id": format!("w{i:08}"), "word": word})
        })
        .collect();
    progress.set_length(progress.length().unwrap_or(0) + n as u64);
    load(&mut c, "bench_words", docs.into_iter(), progress).await?;
    let mut out = Vec::new();
    for (name, reduce) in [("_count", "_count"), ("JS sum", JS_SUM)] {
        let ddoc = if reduce == "_count" { "count" } else { "js" };
        let view = json!({"map": "function(doc){ emit(doc.word, 1); }", "reduce": reduce});
        let (build, _) =
            time_first_group(target, "bench_words", ddoc, view, &expected, floor).await?;
        let mut best = f64::MAX;
        let until = Instant::now() + floor;
        for k in 0.. {
            if k >= 5 && Instant::now() >= until {
                break;
            }
            let started = Instant::now();
            let answer = c
                .expect(
                    Method::GET,
                    &format!("/bench_words/_design/{ddoc}/_view/v?group=true"),
                    None,
                    &[200],
                )
                .await?;
            best = best.min(started.elapsed().as_secs_f64());
            check_rows(&answer.body, &expected, &format!("word count {name}"))?;
        }
        out.push(Outcome {
            workload: format!("word count, {name}"),
            metrics: vec![
                Metric::cost("build s", build),
                Metric::cost("group=true ms", best * 1000.0),
                Metric::rate("groups", expected.len() as f64),
            ],
            failures: 0,
            series: Vec::new(),
        });
    }
    let _ = c.call(Method::DELETE, "/bench_words", None).await;
    Ok(out)
}

/// Runs workloads 2 and 5. A wrong answer is an error: it stops the run.
pub async fn run(target: &Target, params: Params, progress: ProgressBar) -> Result<Vec<Outcome>> {
    progress.set_length(0);
    let floor = Duration::from_secs_f64(params.seconds.max(0.0));
    let mut out = indexing(
        target,
        "bench_scores",
        "score docs",
        params.docs,
        0,
        7,
        floor,
        &progress,
    )
    .await?;
    if params.large_docs > 0 {
        out.extend(
            indexing(
                target,
                "bench_large",
                "large docs",
                params.large_docs,
                100,
                8,
                floor,
                &progress,
            )
            .await?,
        );
    }
    if params.words > 0 {
        out.extend(word_count(target, params.words, 9, floor, &progress).await?);
    }
    progress.finish_and_clear();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_documents_have_the_published_shape() {
        let mut rng = StdRng::seed_from_u64(1);
        let (doc, (y, m), score) = score_doc(3, &mut rng, 0);
        assert_eq!(doc["_id"], "d00000003");
        assert_eq!(doc["metadata"]["docType"], "score");
        assert!(doc["metadata"]["createdAt"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{y}-{m}-")));
        assert_eq!(doc["score"], score);
        assert_eq!(doc["username"].as_str().unwrap().len(), 6);
        let (large, _, _) = score_doc(4, &mut StdRng::seed_from_u64(2), 100);
        assert!(large.as_object().unwrap().len() <= 4 + 100);
    }

    #[test]
    fn rows_must_match_every_group() {
        let expected: BTreeMap<String, f64> = [(json!(["2010", "01"]).to_string(), 5.0)]
            .into_iter()
            .collect();
        assert!(check_rows(
            br#"{"rows":[{"key":["2010","01"],"value":5}]}"#,
            &expected,
            "t"
        )
        .is_ok());
        assert!(check_rows(
            br#"{"rows":[{"key":["2010","01"],"value":6}]}"#,
            &expected,
            "t"
        )
        .is_err());
        assert!(check_rows(br#"{"rows":[]}"#, &expected, "t").is_err());
    }
}
