//! Workload 4, C10K (from "Help CouchDB break the C10K barrier"): for each step, open that
//! many keep-alive connections and hold them all open while each sends a few requests (and
//! goes on until the step's time floor has passed), alternating `GET /` and a document GET;
//! report per step the rate, errors and latencies. Connects only to the URL given; every
//! step is bounded in time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Method;
use indicatif::ProgressBar;
use serde_json::Value;
use tokio::sync::{Barrier, Semaphore};
use tokio::time::timeout_at;

use crate::client::{Conn, Target};
use crate::error::Result;
use crate::report::{quantile_ms, Metric, Outcome};
use crate::workloads::reads::{is_gizmo, setup};

/// The workload's size.
#[derive(Clone, Debug)]
pub struct Params {
    /// Concurrent connections at each step (published: 1,000, 5,000, 10,000).
    pub steps: Vec<usize>,
    /// Requests each connection sends per step, at least.
    pub requests: usize,
    /// Seconds each step's requests go on for at least (every connection keeps sending
    /// until then), so that a fast server is measured long enough; 0 sends `requests` alone.
    pub seconds: f64,
    /// The most a step may take, connecting included; what is unfinished then is an error.
    pub step_limit: Duration,
}

impl Params {
    /// The published steps, each connection sending a few requests (two of each kind).
    pub fn published() -> Params {
        Params {
            steps: vec![1000, 5000, 10_000],
            requests: 4,
            seconds: 3.0,
            step_limit: Duration::from_secs(120),
        }
    }
}

/// Connection attempts in flight at once (a listen backlog is finite).
const CONNECTING: usize = 256;

/// What one connection saw in a step.
#[derive(Default)]
struct Seen {
    latencies: Vec<Duration>,
    errors: u64,
    connect_error: bool,
    /// When this connection was let go, so the step's time runs from the first start.
    began: Option<Instant>,
}

/// Whether `body` is a CouchDB welcome: a JSON object with a `version`.
fn is_welcome(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|v| v["version"].is_string())
}

/// One connection: connect (a few at a time), wait for all the others, send `requests`
/// and go on until `seconds` have passed since all were connected. The connection is
/// returned so it stays open until the whole step is over.
async fn connection(
    target: Target,
    (requests, seconds): (usize, f64),
    gate: Arc<Semaphore>,
    start: Arc<Barrier>,
    deadline: tokio::time::Instant,
    progress: ProgressBar,
) -> (Seen, Option<Conn>) {
    let mut seen = Seen::default();
    let conn = match gate.acquire().await {
        Ok(_permit) => timeout_at(deadline, Conn::open(&target))
            .await
            .ok()
            .and_then(|c| c.ok()),
        Err(_) => None,
    };
    start.wait().await;
    seen.began = Some(Instant::now());
    let Some(mut conn) = conn else {
        seen.connect_error = true;
        seen.errors += requests as u64;
        progress.inc(requests as u64);
        return (seen, None);
    };
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let mut k = 0;
    while k < requests || Instant::now() < until {
        let (path, check): (&str, fn(&[u8]) -> bool) = if k % 2 == 0 {
            ("/", is_welcome)
        } else {
            ("/animals/cat", is_gizmo)
        };
        let started = Instant::now();
        match timeout_at(deadline, conn.call(Method::GET, path, None)).await {
            Ok(Ok(a)) if a.status == 200 && check(&a.body) => {
                seen.latencies.push(started.elapsed())
            }
            Ok(Ok(_)) => seen.errors += 1,
            Ok(Err(_)) | Err(_) => {
                let left = requests.saturating_sub(k).max(1) as u64;
                seen.errors += left;
                progress.inc(left);
                return (seen, None);
            }
        }
        progress.inc(1);
        k += 1;
    }
    (seen, Some(conn))
}

/// One step with `n` connections.
async fn step(target: &Target, n: usize, params: &Params, progress: &ProgressBar) -> Outcome {
    let deadline = tokio::time::Instant::now() + params.step_limit;
    let gate = Arc::new(Semaphore::new(CONNECTING));
    let start = Arc::new(Barrier::new(n + 1));
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            tokio::spawn(connection(
                target.clone(),
                (params.requests, params.seconds),
                gate.clone(),
                start.clone(),
                deadline,
                progress.clone(),
            ))
        })
        .collect();
    start.wait().await;
    let mut started = Instant::now();
    let mut latencies = Vec::with_capacity(n * params.requests);
    let (mut errors, mut connect_errors) = (0, 0);
    let mut open = Vec::with_capacity(n);
    for t in tasks {
        let Ok((seen, conn)) = t.await else {
            errors += params.requests as u64;
            continue;
        };
        latencies.extend(seen.latencies);
        started = seen.began.map_or(started, |b| b.min(started));
        errors += seen.errors;
        connect_errors += u64::from(seen.connect_error);
        open.extend(conn);
    }
    let elapsed = started.elapsed().as_secs_f64();
    drop(open);
    latencies.sort_unstable();
    Outcome {
        workload: format!("C10K, {n} connections"),
        metrics: vec![
            Metric::cost("elapsed s", elapsed),
            Metric::rate("requests/s", latencies.len() as f64 / elapsed),
            Metric::cost("p50 ms", quantile_ms(&latencies, 0.5)),
            Metric::cost("p99 ms", quantile_ms(&latencies, 0.99)),
            Metric::cost("connect errors", connect_errors as f64),
        ],
        failures: errors,
        series: Vec::new(),
    }
}

/// Runs the steps in order. Errors (refused connections, wrong or late answers) are
/// counted per step as failures rather than stopping the run.
pub async fn run(target: &Target, params: &Params, progress: ProgressBar) -> Result<Vec<Outcome>> {
    setup(target).await?;
    progress.set_length((params.steps.iter().sum::<usize>() * params.requests) as u64);
    let mut out = Vec::new();
    for &n in &params.steps {
        out.push(step(target, n, params, &progress).await);
        // Let the closed connections leave the server before the next, larger step.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    progress.finish_and_clear();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welcomes_are_json_objects_with_a_version() {
        assert!(is_welcome(br#"{"couchdb":"Welcome","version":"3.3.3"}"#));
        assert!(!is_welcome(br#"{"couchdb":"Welcome"}"#));
        assert!(!is_welcome(b"<html>"));
    }
}
