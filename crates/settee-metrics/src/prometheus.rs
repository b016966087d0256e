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

/// Counters CouchDB shows as the total of two: the one shown, the one added to it, the
/// name and the help text.
const TOTALS: &[(Metric, Metric, &str, &str)] = {
    use Metric::*;
    &[
        (
            AuthCacheHits,
            AuthCacheMisses,
            "auth_cache_requests_total",
            "number of authentication cache requests",
        ),
        (
            CouchReplicatorCheckpointsSuccess,
            CouchReplicatorCheckpointsFailure,
            "couch_replicator_checkpoints_total",
            "number of checkpoint saves",
        ),
        (
            CouchReplicatorResponsesSuccess,
            CouchReplicatorResponsesFailure,
            "couch_replicator_responses_total",
            "number of HTTP responses received by the replicator",
        ),
        (
            CouchReplicatorStreamResponsesSuccess,
            CouchReplicatorStreamResponsesFailure,
            "couch_replicator_stream_responses_total",
            "number of streaming HTTP responses received by the replicator",
        ),
        (
            DdocCacheHit,
            DdocCacheMiss,
            "ddoc_cache_requests_total",
            "number of design doc cache requests",
        ),
        (
            FabricReadRepairsSuccess,
            FabricReadRepairsFailure,
            "fabric_read_repairs_total",
            "number of fabric read repairs",
        ),
    ]
};

/// Counters CouchDB names otherwise than by their path.
const RENAMED: &[(&str, &str)] = &[
    ("ddoc_cache/miss", "ddoc_cache_requests_failures_total"),
    ("ddoc_cache/recovery", "ddoc_cache_requests_recovery_total"),
    (
        "fabric/read_repairs/failure",
        "fabric_read_repairs_failures_total",
    ),
];

/// Counters CouchDB shows as one family with a label: path prefix, family, label, help.
const LABELLED: &[(&str, &str, &str, &str)] = &[
    (
        "couch_log/level/",
        "couch_log_requests_total",
        "level",
        "number of logged messages",
    ),
    (
        "couchdb/httpd_request_methods/",
        "httpd_request_methods",
        "method",
        "number of HTTP requests by method",
    ),
    (
        "couchdb/httpd_status_codes/",
        "httpd_status_codes",
        "code",
        "number of HTTP responses by status code",
    ),
    // Only this stage is a label in CouchDB's output; the others keep their names.
    (
        "rexi/streams/timeout/init_",
        "rexi_streams_timeout_total",
        "stage",
        "number of rexi stream timeouts",
    ),
];

/// Counters CouchDB moves down as well as up, which it shows as gauges.
const GAUGES: &[&str] = &[
    "couchdb/open_databases",
    "couchdb/open_os_files",
    "couchdb/httpd/clients_requesting_changes",
];

/// CouchDB's renamings, then the general rule for the metric's kind.
fn convert(out: &mut Families, m: Metric, path: &str, kind: Kind, desc: &str) {
    if let Some((_, other, name, help)) = TOTALS.iter().find(|t| t.0 == m) {
        return add(out, name, "counter", help, plain(val(m) + val(*other)));
    }
    if let Some((_, name)) = RENAMED.iter().find(|r| r.0 == path) {
        return add(out, name, "counter", desc, plain(val(m)));
    }
    for (prefix, name, label, help) in LABELLED {
        if let Some(value) = path.strip_prefix(prefix) {
            let value = if *label == "stage" {
                format!("init_{value}")
            } else {
                value.to_string()
            };
            return add(
                out,
                name,
                "counter",
                help,
                labelled(&[(label, &value)], val(m)),
            );
        }
    }
    let name = path
        .strip_prefix("couchdb/")
        .unwrap_or(path)
        .replace('/', "_");
    let kind = if GAUGES.contains(&path) {
        Kind::Gauge
    } else {
        kind
    };
    general(out, m, &name, kind, desc)
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
