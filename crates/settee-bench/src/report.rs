//! Results: named metrics per workload, printed as a table (with ratios when two servers ran
//! side by side) or as JSON.

use std::time::Duration;

use serde_json::{json, Value};

/// One measured number.
#[derive(Clone, Debug)]
pub struct Metric {
    /// What was measured, e.g. `requests/s`.
    pub name: String,
    /// The value.
    pub value: f64,
    /// Whether a larger value is better (for the ratio's direction).
    pub higher_is_better: bool,
}

impl Metric {
    /// A metric where more is better (rates).
    pub fn rate(name: &str, value: f64) -> Metric {
        Metric {
            name: name.into(),
            value,
            higher_is_better: true,
        }
    }

    /// A metric where less is better (times, failures).
    pub fn cost(name: &str, value: f64) -> Metric {
        Metric {
            name: name.into(),
            value,
            higher_is_better: false,
        }
    }
}

/// The metrics of one workload against one server.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The workload's name.
    pub workload: String,
    /// Its metrics, in report order.
    pub metrics: Vec<Metric>,
    /// Answers that were wrong or failed (a fast wrong answer is a failure, not a result).
    pub failures: u64,
    /// A time series sampled while it ran, as `(seconds, value)` (e.g. indexer changes/s).
    pub series: Vec<(f64, f64)>,
}

/// Several rounds' outcomes of one server as one: each metric the median of its rounds (the
/// mean of the middle two for an even count), failures summed, the first round's series.
/// Rounds run the same workloads in the same order; a metric missing from a round is left
/// out of that metric's median.
pub fn medians(rounds: &[Vec<Outcome>]) -> Vec<Outcome> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let same = || rounds.iter().filter_map(|r| r.get(i));
            debug_assert!(same().all(|r| r.workload == o.workload), "rounds differ");
            let metrics = o
                .metrics
                .iter()
                .map(|m| {
                    let mut values: Vec<f64> = same()
                        .filter_map(|r| r.metrics.iter().find(|x| x.name == m.name))
                        .map(|x| x.value)
                        .collect();
                    Metric {
                        value: median(&mut values),
                        ..m.clone()
                    }
                })
                .collect();
            Outcome {
                workload: o.workload.clone(),
                metrics,
                failures: same().map(|r| r.failures).sum(),
                series: o.series.clone(),
            }
        })
        .collect()
}

/// The median of `values` (sorted in place); 0 for none.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The latency at quantile `q` (0..=1) of sorted latencies, in milliseconds.
pub fn quantile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

fn fmt(v: f64) -> String {
    if v >= 100.0 || v == v.trunc() {
        format!("{:.0}", v)
    } else {
        format!("{v:.2}")
    }
}

/// How many times better `a` is than `b` for this metric.
fn ratio(m: &Metric, b: f64) -> Option<f64> {
    if m.value == 0.0 || b == 0.0 {
        return None;
    }
    Some(if m.higher_is_better {
        m.value / b
    } else {
        b / m.value
    })
}

/// A text table: one row per metric; with `compare`, the second server's value and the
/// ratio (how many times better the first server is).
pub fn table(names: (&str, Option<&str>), a: &[Outcome], compare: Option<&[Outcome]>) -> String {
    let mut rows = vec![vec![
        "workload".to_string(),
        "metric".to_string(),
        names.0.to_string(),
    ]];
    if let Some(b) = names.1 {
        rows[0].push(b.to_string());
        rows[0].push("ratio".to_string());
    }
    for (i, o) in a.iter().enumerate() {
        let other = compare.and_then(|c| c.get(i));
        let mut metrics: Vec<(Metric, Option<f64>)> = o
            .metrics
            .iter()
            .map(|m| {
                (
                    m.clone(),
                    other
                        .and_then(|b| b.metrics.iter().find(|x| x.name == m.name))
                        .map(|x| x.value),
                )
            })
            .collect();
        metrics.push((
            Metric::cost("failures", o.failures as f64),
            other.map(|b| b.failures as f64),
        ));
        for (m, b) in metrics {
            let mut row = vec![o.workload.clone(), m.name.clone(), fmt(m.value)];
            if compare.is_some() {
                row.push(b.map_or("-".into(), fmt));
                row.push(
                    b.and_then(|b| ratio(&m, b))
                        .map_or("-".into(), |r| format!("{r:.1}x")),
                );
            }
            rows.push(row);
        }
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The same as JSON: `{"servers": [...], "results": [{"workload", "server", "failures", metrics...}]}`.
pub fn json(names: (&str, Option<&str>), a: &[Outcome], compare: Option<&[Outcome]>) -> Value {
    let rows = |server: &str, outcomes: &[Outcome]| -> Vec<Value> {
        outcomes
            .iter()
            .map(|o| {
                let mut v =
                    json!({"workload": o.workload, "server": server, "failures": o.failures});
                if !o.series.is_empty() {
                    v["series"] = json!(o.series);
                }
                for m in &o.metrics {
                    v[m.name.as_str()] = json!(m.value);
                }
                v
            })
            .collect()
    };
    let mut results = rows(names.0, a);
    if let (Some(name), Some(b)) = (names.1, compare) {
        results.extend(rows(name, b));
    }
    let servers: Vec<&str> = std::iter::once(names.0).chain(names.1).collect();
    json!({"servers": servers, "results": results})
}

/// [`table`] of each server's [`medians`].
pub fn table_of_rounds(
    names: (&str, Option<&str>),
    a: &[Vec<Outcome>],
    compare: Option<&[Vec<Outcome>]>,
) -> String {
    let other = compare.map(medians);
    table(names, &medians(a), other.as_deref())
}

/// [`json`] of each server's [`medians`], with each round's own results under `rounds`
/// (a list of `results` lists) when there was more than one.
pub fn json_of_rounds(
    names: (&str, Option<&str>),
    a: &[Vec<Outcome>],
    compare: Option<&[Vec<Outcome>]>,
) -> Value {
    let other = compare.map(medians);
    let mut out = json(names, &medians(a), other.as_deref());
    if a.len() > 1 {
        let each: Vec<Value> = a
            .iter()
            .enumerate()
            .map(|(i, round)| {
                let other = compare.and_then(|b| b.get(i)).map(Vec::as_slice);
                json(names, round, other)["results"].take()
            })
            .collect();
        out["rounds"] = json!(each);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_sorted_latencies() {
        let l: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile_ms(&l, 0.5), 50.0);
        assert_eq!(quantile_ms(&l, 0.99), 99.0);
        assert_eq!(quantile_ms(&l, 1.0), 100.0);
        assert_eq!(quantile_ms(&[], 0.5), 0.0);
    }

    #[test]
    fn tables_show_ratios_in_the_better_direction() {
        let a = vec![Outcome {
            workload: "reads".into(),
            metrics: vec![
                Metric::rate("requests/s", 1000.0),
                Metric::cost("p99 ms", 2.0),
            ],
            failures: 0,
            series: vec![],
        }];
        let b = vec![Outcome {
            workload: "reads".into(),
            metrics: vec![
                Metric::rate("requests/s", 100.0),
                Metric::cost("p99 ms", 50.0),
            ],
            failures: 3,
            series: vec![],
        }];
        let t = table(("A", Some("B")), &a, Some(&b));
        assert!(t.contains("requests/s  1000  100  10.0x"), "{t}");
        assert!(t.contains("p99 ms      2     50   25.0x"), "{t}");
        assert!(t.contains("failures    0     3"), "{t}");
        let j = json(("A", Some("B")), &a, Some(&b));
        assert_eq!(j["results"][1]["failures"], 3);
        assert_eq!(j["results"][0]["requests/s"], 1000.0);
    }

    /// One round's outcome of one workload with these numbers.
    fn round(rate: f64, p99: f64, failures: u64) -> Vec<Outcome> {
        vec![Outcome {
            workload: "writes".into(),
            metrics: vec![Metric::rate("docs/s", rate), Metric::cost("p99 ms", p99)],
            failures,
            series: vec![(0.0, rate)],
        }]
    }

    #[test]
    fn rounds_become_medians_with_failures_summed() {
        let odd = medians(&[
            round(300.0, 9.0, 0),
            round(100.0, 1.0, 2),
            round(200.0, 4.0, 1),
        ]);
        assert_eq!(odd[0].metrics[0].value, 200.0);
        assert_eq!(odd[0].metrics[1].value, 4.0);
        assert!(!odd[0].metrics[1].higher_is_better);
        assert_eq!(odd[0].failures, 3);
        assert_eq!(odd[0].series, vec![(0.0, 300.0)]);
        let even = medians(&[round(400.0, 2.0, 0), round(100.0, 8.0, 0)]);
        assert_eq!(even[0].metrics[0].value, 250.0);
        assert_eq!(even[0].metrics[1].value, 5.0);
        assert_eq!(medians(&[round(7.0, 1.0, 0)])[0].metrics[0].value, 7.0);
        assert!(medians(&[]).is_empty());
    }

    #[test]
    fn json_of_rounds_has_the_medians_and_each_round() {
        let a = [
            round(300.0, 9.0, 0),
            round(100.0, 1.0, 2),
            round(200.0, 4.0, 1),
        ];
        let b = [
            round(10.0, 90.0, 0),
            round(30.0, 10.0, 0),
            round(20.0, 40.0, 0),
        ];
        let j = json_of_rounds(("A", Some("B")), &a, Some(&b));
        assert_eq!(j["results"][0]["docs/s"], 200.0);
        assert_eq!(j["results"][0]["failures"], 3);
        assert_eq!(j["results"][1]["docs/s"], 20.0);
        let rounds = j["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 3);
        assert_eq!(rounds[1][0]["docs/s"], 100.0);
        assert_eq!(rounds[1][1]["docs/s"], 30.0);
        assert_eq!(rounds[1][1]["server"], "B");
        let one = json_of_rounds(("A", None), &a[..1], None);
        assert!(one.get("rounds").is_none(), "{one}");
        assert_eq!(one["results"][0]["docs/s"], 300.0);
    }
}
