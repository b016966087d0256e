//! `GET /_node/{node}/_stats[/{path}]`: every metric in CouchDB's shape, nested by path, each
//! `{"value", "type", "desc"}`.

use serde_json::{json, Map, Value};

use crate::{summary, value, Def, Kind, Metric, Summary, DEFS};

/// Every metric, nested by path.
pub fn stats() -> Value {
    tree(&[])
}

/// The metrics whose paths start with the parts `under`, nested by path from the root (only
/// those are read: a histogram's summary sorts its samples).
fn tree(under: &[&str]) -> Value {
    let mut root = Map::new();
    for (i, def) in DEFS.iter().enumerate() {
        if !def.path.split('/').zip(under).all(|(a, b)| a == *b) {
            continue;
        }
        let mut at = &mut root;
        let mut parts = def.path.split('/').peekable();
        while let Some(part) = parts.next() {
            if parts.peek().is_none() {
                at.insert(part.to_string(), leaf(def, metric(i)));
                break;
            }
            at = at
                .entry(part)
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("groups are objects");
        }
    }
    Value::Object(root)
}

/// What `_stats/{path}` shows: the group or metric at `path` (a metric's members too), or
/// `null` where there is none, as CouchDB answers.
pub fn stats_at(path: &[&str]) -> Value {
    let mut at = tree(path);
    for part in path {
        at = match at {
            Value::Object(mut m) => m.remove(*part).unwrap_or(Value::Null),
            _ => Value::Null,
        };
    }
    at
}

fn metric(i: usize) -> Metric {
    // `DEFS` and `Metric` are made in one order by one macro.
    crate::catalog::ALL[i]
}

fn leaf(def: &Def, m: Metric) -> Value {
    let value = match def.kind {
        Kind::Histogram => summary_json(&summary(m)),
        _ => json!(value(m) as i64),
    };
    json!({"value": value, "type": def.kind.name(), "desc": def.desc})
}

/// A histogram's value as CouchDB shows it.
pub(crate) fn summary_json(s: &Summary) -> Value {
    json!({
        "n": s.n,
        "min": s.min,
        "max": s.max,
        "arithmetic_mean": s.arithmetic_mean,
        "geometric_mean": s.geometric_mean,
        "harmonic_mean": s.harmonic_mean,
        "median": s.median,
        "variance": s.variance,
        "standard_deviation": s.standard_deviation,
        "skewness": s.skewness,
        "kurtosis": s.kurtosis,
        "percentile": s.percentiles.iter().map(|(p, v)| json!([p, v])).collect::<Vec<_>>(),
        "histogram": s.bins.iter().map(|(b, c)| json!([b, c])).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_sit_at_their_paths_with_kind_and_description() {
        crate::add(Metric::DocumentWrites, 3);
        let all = stats();
        let w = &all["couchdb"]["document_writes"];
        assert_eq!(w["type"], "counter");
        assert_eq!(w["desc"], "number of document write operations");
        assert!(w["value"].as_i64().unwrap() >= 3);
        let h = &all["couchdb"]["request_time"];
        assert_eq!(h["type"], "histogram");
        assert!(h["value"]["percentile"].is_array());
        assert_eq!(
            all["couchdb"]["httpd_request_methods"]["GET"]["type"],
            "counter"
        );
        assert_eq!(stats_at(&["couchdb", "document_writes", "type"]), "counter");
        assert_eq!(stats_at(&["couchdb", "nothing"]), Value::Null);
        assert_eq!(stats_at(&["mango"]).as_object().unwrap().len(), 9);
    }
}
