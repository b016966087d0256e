//! Workload 1, single-document reads (from "High Performance Erlang"): database `animals`,
//! document `cat` = `{"name":"gizmo"}`, many keep-alive clients each reading it in a loop,
//! for at least a set number of reads each and at least a set time.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use indicatif::ProgressBar;

use crate::client::{Conn, Target};
use crate::error::{Error, Result};
use crate::report::{quantile_ms, Metric, Outcome};

/// The workload's size.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Concurrent keep-alive clients (published: 120).
    pub clients: usize,
    /// GETs per client at least (published: 400).
    pub requests: usize,
    /// Seconds the clients keep reading at least (0: exactly `requests` each).
    pub seconds: f64,
}

impl Params {
    /// The published parameters.
    pub const PUBLISHED: Params = Params {
        clients: 120,
        requests: 400,
        seconds: 0.0,
    };
}

/// Creates `animals/cat` (keeping it if it is already right).
pub(crate) async fn setup(target: &Target) -> Result<()> {
    let mut c = Conn::open(target).await?;
    c.expect(Method::PUT, "/animals", None, &[201, 202, 412])
        .await?;
    let current = c.call(Method::GET, "/animals/cat", None).await?;
    if current.status == 200 && is_gizmo(&current.body) {
        return Ok(());
    }
    let rev = serde_json::from_slice::<serde_json::Value>(&current.body)
        .ok()
        .and_then(|d| d.get("_rev").and_then(|r| r.as_str()).map(str::to_string));
    let body = match rev {
        Some(rev) => serde_json::json!({"name": "gizmo", "_rev": rev}),
        None => serde_json::json!({"name": "gizmo"}),
    };
    c.expect(
        Method::PUT,
        "/animals/cat",
        Some(Bytes::from(body.to_string())),
        &[201, 202],
    )
    .await?;
    Ok(())
}

pub(crate) fn is_gizmo(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|d| {
        d.get("name").and_then(|n| n.as_str()) == Some("gizmo")
            && d.get("_id").and_then(|i| i.as_str()) == Some("cat")
    })
}

/// One client: its latencies and failures.
async fn client(
    target: Target,
    requests: usize,
    until: Instant,
    progress: ProgressBar,
) -> (Vec<Duration>, u64) {
    let mut latencies = Vec::with_capacity(requests);
    let mut failures = 0u64;
    let mut conn = None;
    while latencies.len() < requests || Instant::now() < until {
        let started = Instant::now();
        if conn.is_none() {
            conn = Conn::open(&target).await.ok();
        }
        let ok = match conn.as_mut() {
            Some(c) => match c.call(Method::GET, "/animals/cat", None).await {
                Ok(a) => a.status == 200 && is_gizmo(&a.body),
                Err(_) => {
                    conn = None;
                    false
                }
            },
            None => false,
        };
        latencies.push(started.elapsed());
        if !ok {
            failures += 1;
        }
        progress.inc(1);
    }
    (latencies, failures)
}

/// Runs the workload.
pub async fn run(target: &Target, params: Params, progress: ProgressBar) -> Result<Outcome> {
    setup(target).await?;
    progress.set_length((params.clients * params.requests) as u64);
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(params.seconds.max(0.0));
    let tasks: Vec<_> = (0..params.clients)
        .map(|_| {
            let (t, p) = (target.clone(), progress.clone());
            tokio::spawn(client(t, params.requests, until, p))
        })
        .collect();
    let mut latencies = Vec::with_capacity(params.clients * params.requests);
    let mut failures = 0;
    for t in tasks {
        let (l, f) = t.await.map_err(|e| Error::Io(e.to_string()))?;
        latencies.extend(l);
        failures += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    progress.finish_and_clear();
    latencies.sort_unstable();
    let total = latencies.len() as f64;
    Ok(Outcome {
        workload: "single-doc reads".into(),
        metrics: vec![
            Metric::cost("elapsed s", elapsed),
            Metric::rate("requests/s", (total - failures as f64) / elapsed),
            Metric::cost("p50 ms", quantile_ms(&latencies, 0.5)),
            Metric::cost("p90 ms", quantile_ms(&latencies, 0.9)),
            Metric::cost("p99 ms", quantile_ms(&latencies, 0.99)),
            Metric::cost(
                "max ms",
                latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
            ),
        ],
        failures,
        series: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_document_counts() {
        assert!(is_gizmo(br#"{"_id":"cat","_rev":"1-a","name":"gizmo"}"#));
        assert!(!is_gizmo(br#"{"_id":"cat","name":"tom"}"#));
        assert!(!is_gizmo(b"not json"));
    }
}
