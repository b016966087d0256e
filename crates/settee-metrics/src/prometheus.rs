//! `GET /_node/{node}/_prometheus`: the metrics in Prometheus's text format (0.0.4) under the
//! names CouchDB gives them: `couchdb_` and the path joined by `_`, counters ending in
//! `_total`, histograms as summaries in seconds, and CouchDB's renamings (requests by method
//! and status as labels, cache hits as request totals, log messages by level).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::{summary, value, Kind, Metric, DEFS};

/// A sample the node adds from what it knows (uptime, memory).
#[derive(Debug, Clone)]
pub struct Sample {
    /// Its name after `couchdb_`.
    pub name: String,
    /// `gauge` or `counter`.
    pub kind: &'static str,
    /// Its `# HELP` text.
    pub help: String,
    /// Label name and value pairs.
    pub labels: Labels,
    /// Its value.
    pub value: f64,
}

/// Label name and value pairs.
type Labels = Vec<(String, String)>;

/// One metric family: kind, help and its samples (suffix, labels, value).
struct Family {
    kind: &'static str,
    help: String,
    samples: Vec<(String, Labels, f64)>,
}

type Families = BTreeMap<String, Family>;

fn add(out: &mut Families, name: &str, kind: &'static str, help: &str, sample: Sample) {
    let family = out.entry(name.to_string()).or_insert_with(|| Family {
        kind,
        help: help.to_string(),
        samples: Vec::new(),
    });
    family
        .samples
        .push((sample.name, sample.labels, sample.value));
}

fn plain(v: f64) -> Sample {
    labelled(&[], v)
}

fn labelled(labels: &[(&str, &str)], v: f64) -> Sample {
    Sample {
        name: String::new(),
        kind: "",
        help: String::new(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        value: v,
    }
}

fn val(m: Metric) -> f64 {
    value(m) as i64 as f64
}

/// Every metric, then `extra`, in the text format.
pub fn prometheus(extra: &[Sample]) -> String {
    let mut out = Families::new();
    for (i, def) in DEFS.iter().enumerate() {
        convert(
            &mut out,
            crate::catalog::ALL[i],
            def.path,
            def.kind,
            def.desc,
        );
    }
    for s in extra {
        let sample = Sample {
            name: String::new(),
            ..s.clone()
        };
        add(&mut out, &s.name, s.kind, &s.help, sample);
    }
    render(&out)
}

/// CouchDB's renamings, then the general rule for the metric's kind.
fn convert(out: &mut Families, m: Metric, path: &str, kind: Kind, desc: &str) {
    use Metric::*;
    let parts: Vec<&str> = path.split('/').collect();
    let sum = |a: Metric, b: Metric| val(a) + val(b);
    match parts[..] {
        ["couch_log", "level", level] => add(
            out,
            "couch_log_requests_total",
            "counter",
            "number of logged messages",
            labelled(&[("level", level)], val(m)),
        ),
        ["couch_replicator", group @ ("checkpoints" | "responses" | "stream_responses"), outcome] =>
        {
            let (success, failure, help) = match group {
                "checkpoints" => (
                    CouchReplicatorCheckpointsSuccess,
                    CouchReplicatorCheckpointsFailure,
                    "number of checkpoint saves",
                ),
                "responses" => (
                    CouchReplicatorResponsesSuccess,
                    CouchReplicatorResponsesFailure,
                    "number of HTTP responses received by the replicator",
                ),
                _ => (
                    CouchReplicatorStreamResponsesSuccess,
                    CouchReplicatorStreamResponsesFailure,
                    "number of streaming HTTP responses received by the replicator",
                ),
            };
            if outcome == "failure" {
                let name = format!("couch_replicator_{group}_failure_total");
                add(out, &name, "counter", desc, plain(val(failure)));
            } else {
                let name = format!("couch_replicator_{group}_total");
                add(out, &name, "counter", help, plain(sum(success, failure)));
            }
        }
        ["couchdb", "auth_cache_hits"] => add(
            out,
            "auth_cache_requests_total",
            "counter",
            "number of authentication cache requests",
            plain(sum(AuthCacheHits, AuthCacheMisses)),
        ),
        ["couchdb", "httpd_request_methods", method] => add(
            out,
            "httpd_request_methods",
            "counter",
            "number of HTTP requests by method",
            labelled(&[("method", method)], val(m)),
        ),
        ["couchdb", "httpd_status_codes", code] => add(
            out,
            "httpd_status_codes",
            "counter",
            "number of HTTP responses by status code",
            labelled(&[("code", code)], val(m)),
        ),
        ["couchdb", "open_databases" | "open_os_files"]
        | ["couchdb", "httpd", "clients_requesting_changes"] => {
            add(out, &parts[1..].join("_"), "gauge", desc, plain(val(m)))
        }
        ["ddoc_cache", "hit"] => add(
            out,
            "ddoc_cache_requests_total",
            "counter",
            "number of design doc cache requests",
            plain(sum(DdocCacheHit, DdocCacheMiss)),
        ),
        ["ddoc_cache", "miss"] => add(
            out,
            "ddoc_cache_requests_failures_total",
            "counter",
            desc,
            plain(val(m)),
        ),
        ["ddoc_cache", "recovery"] => add(
            out,
            "ddoc_cache_requests_recovery_total",
            "counter",
            desc,
            plain(val(m)),
        ),
        ["fabric", "read_repairs", "failure"] => add(
            out,
            "fabric_read_repairs_failures_total",
            "counter",
            desc,
            plain(val(m)),
        ),
        ["fabric", "read_repairs", "success"] => add(
            out,
            "fabric_read_repairs_total",
            "counter",
            "number of fabric read repairs",
            plain(sum(FabricReadRepairsSuccess, FabricReadRepairsFailure)),
        ),
        // Only this stage becomes a label in CouchDB's output; the others keep their names.
        ["rexi", "streams", "timeout", "init_stream"] => add(
            out,
            "rexi_streams_timeout_total",
            "counter",
            "number of rexi stream timeouts",
            labelled(&[("stage", "init_stream")], val(m)),
        ),
        _ => {
            let rest = if parts[0] == "couchdb" {
                &parts[1..]
            } else {
                &parts[..]
            };
            general(out, m, &rest.join("_"), kind, desc)
        }
    }
}

/// Counters end in `_total`; gauges keep their name; histograms become summaries in seconds
/// (their milliseconds divided by 1,000, as CouchDB divides them).
fn general(out: &mut Families, m: Metric, name: &str, kind: Kind, desc: &str) {
    match kind {
        Kind::Counter => {
            let name = if name.ends_with("_total") {
                name.to_string()
            } else {
                format!("{name}_total")
            };
            add(out, &name, "counter", desc, plain(val(m)));
        }
        Kind::Gauge => add(out, name, "gauge", desc, plain(val(m))),
        Kind::Histogram => {
            let s = summary(m);
            let name = format!("{name}_seconds");
            for (p, v) in &s.percentiles {
                let q = match p {
                    999 => "0.999".to_string(),
                    p => format!("{}", f64::from(*p) / 100.0),
                };
                add(
                    out,
                    &name,
                    "summary",
                    desc,
                    labelled(&[("quantile", &q)], v / 1000.0),
                );
            }
            let total = s.arithmetic_mean * s.n as f64 / 1000.0;
            let sum = Sample {
                name: "_sum".into(),
                ..plain(total)
            };
            add(out, &name, "summary", desc, sum);
            let count = Sample {
                name: "_count".into(),
                ..plain(s.n as f64)
            };
            add(out, &name, "summary", desc, count);
        }
    }
}

fn render(families: &Families) -> String {
    let mut text = String::new();
    for (name, f) in families {
        let help = f.help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(text, "# HELP couchdb_{name} {help}");
        let _ = writeln!(text, "# TYPE couchdb_{name} {}", f.kind);
        for (suffix, labels, v) in &f.samples {
            let _ = write!(text, "couchdb_{name}{suffix}");
            if !labels.is_empty() {
                let inner: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect();
                let _ = write!(text, "{{{}}}", inner.join(","));
            }
            let _ = writeln!(text, " {}", number(*v));
        }
    }
    text
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Whole numbers without a fraction; others as Rust writes them (never an exponent).
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn couchdbs_names_and_renamings() {
        crate::add(Metric::AuthCacheHits, 2);
        crate::add(Metric::AuthCacheMisses, 1);
        crate::inc(Metric::Status404);
        crate::inc(Metric::MethodGet);
        let extra = Sample {
            name: "uptime_seconds".into(),
            kind: "gauge",
            help: "uptime of the node".into(),
            labels: Vec::new(),
            value: 12.0,
        };
        let text = prometheus(&[extra]);
        let has = |line: &str| text.lines().any(|l| l == line);
        assert!(
            has("# TYPE couchdb_auth_cache_requests_total counter"),
            "{text}"
        );
        assert!(text.contains("\ncouchdb_auth_cache_requests_total "));
        assert!(has("# TYPE couchdb_httpd_status_codes counter"));
        assert!(text.contains("couchdb_httpd_status_codes{code=\"404\"} "));
        assert!(text.contains("couchdb_httpd_request_methods{method=\"GET\"} "));
        assert!(has("# TYPE couchdb_open_databases gauge"));
        assert!(has("# TYPE couchdb_request_time_seconds summary"));
        assert!(has("couchdb_request_time_seconds{quantile=\"0.999\"} 0"));
        assert!(text.contains("\ncouchdb_request_time_seconds_count "));
        assert!(has("# TYPE couchdb_document_writes_total counter"));
        assert!(text.contains("\ncouchdb_couch_log_requests_total{level=\"error\"} "));
        // CouchDB's one labelled rexi stage; the other stages keep their names.
        assert!(text.contains("\ncouchdb_rexi_streams_timeout_total{stage=\"init_stream\"} "));
        assert!(has(
            "# TYPE couchdb_rexi_streams_timeout_stream_total counter"
        ));
        assert!(has("couchdb_uptime_seconds 12"));
        // One HELP and one TYPE line per family.
        let types = text
            .lines()
            .filter(|l| l.starts_with("# TYPE couchdb_httpd_status_codes "))
            .count();
        assert_eq!(types, 1);
    }
}
