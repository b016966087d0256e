//! Search index definitions as design documents hold them: `indexes` (for `_search`) and
//! `nouveau` (for `_nouveau`), and the signature that names an index's files.

use md5::{Digest, Md5};
use serde_json::Value;

use crate::analyzer::{AnalyzerSpec, Flavor};
use crate::error::{Error, Result};

/// Bumped when what an index holds for the same definition changes, so old files are
/// rebuilt rather than misread.
const FORMAT: &str = "settee-search-4";

/// One search index of a design document.
#[derive(Clone, Debug)]
pub struct IndexDef {
    /// `_design/…`.
    pub ddoc_id: String,
    /// The index's name in the design document.
    pub name: String,
    /// `indexes` or `nouveau`.
    pub flavor: Flavor,
    /// The index function's source (empty for a native index).
    pub source: String,
    /// A Mango text index's definition (the `index` object of a `query` design document),
    /// indexed natively by the server's [`crate::NativeIndexer`] rather than by JavaScript.
    pub native: Option<Value>,
    /// Its analyzers.
    pub analyzer: AnalyzerSpec,
    /// The design document as JSON, for `require`.
    pub ddoc_json: String,
    /// Whether the index is partitioned (its queries name a partition).
    pub partitioned: bool,
    /// Whether adjacent terms are also indexed as pairs (`"index_phrases": true`, a Settee
    /// option): exact phrases then cost one term's postings, for a larger, slower-built index.
    pub pairs: bool,
    signature: String,
}

impl IndexDef {
    /// Index `name` of `flavor` in design document `ddoc` (`db_partitioned` gives the
    /// default of `options.partitioned`).
    pub fn find(
        ddoc_id: &str,
        ddoc: &Value,
        name: &str,
        flavor: Flavor,
        db_partitioned: bool,
    ) -> Result<IndexDef> {
        let member = member(flavor);
        let def = ddoc
            .get(member)
            .and_then(|i| i.get(name))
            .ok_or_else(|| Error::NotFound(missing_reason(name)))?;
        IndexDef::parse(ddoc_id, ddoc, name, def, flavor, db_partitioned)
    }

    /// Every index of `flavor` in `ddoc` that parses.
    pub fn all(ddoc_id: &str, ddoc: &Value, flavor: Flavor, db_partitioned: bool) -> Vec<IndexDef> {
        let Some(indexes) = ddoc.get(member(flavor)).and_then(Value::as_object) else {
            return Vec::new();
        };
        indexes
            .iter()
            .filter_map(|(name, def)| {
                IndexDef::parse(ddoc_id, ddoc, name, def, flavor, db_partitioned).ok()
            })
            .collect()
    }

    fn parse(
        ddoc_id: &str,
        ddoc: &Value,
        name: &str,
        def: &Value,
        flavor: Flavor,
        db_partitioned: bool,
    ) -> Result<IndexDef> {
        let query_language = ddoc.get("language").and_then(Value::as_str) == Some("query");
        let (source, native) = match def.get("index") {
            Some(Value::String(s)) => (s.as_str(), None),
            Some(o @ Value::Object(_)) if query_language && flavor == Flavor::Search => {
                ("", Some(o.clone()))
            }
            _ => {
                return Err(Error::InvalidDesignDoc(format!(
                    "index `{name}` must have parameter `index`"
                )))
            }
        };
        let native_json = native.as_ref().map(Value::to_string).unwrap_or_default();
        let (analyzer, analyzer_json) = match flavor {
            Flavor::Search => {
                let a = def.get("analyzer");
                (
                    AnalyzerSpec::parse(a, flavor)?,
                    a.cloned().unwrap_or(Value::Null),
                )
            }
            Flavor::Nouveau => {
                let (d, f) = (def.get("default_analyzer"), def.get("field_analyzers"));
                let json = serde_json::json!([d, f]);
                (AnalyzerSpec::parse_nouveau(d, f)?, json)
            }
        };
        let partitioned = ddoc
            .pointer("/options/partitioned")
            .and_then(Value::as_bool)
            .unwrap_or(db_partitioned);
        let pairs = def
            .get("index_phrases")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut h = Md5::new();
        for part in [
            FORMAT,
            member(flavor),
            &analyzer_json.to_string(),
            source,
            &native_json,
            if partitioned { "p" } else { "-" },
            if pairs { "pairs" } else { "-" },
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        let signature = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Ok(IndexDef {
            ddoc_id: ddoc_id.to_string(),
            name: name.to_string(),
            flavor,
            source: source.to_string(),
            native,
            analyzer,
            ddoc_json: ddoc.to_string(),
            partitioned,
            pairs,
            signature,
        })
    }

    /// What names the index's files: the same for every design document with the same
    /// function, analyzer and partitioning.
    pub fn signature(&self) -> &str {
        &self.signature
    }
}

/// The design document member holding indexes of `flavor`.
pub fn member(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Search => "indexes",
        Flavor::Nouveau => "nouveau",
    }
}

fn missing_reason(name: &str) -> String {
    format!("{name} not found.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signatures_follow_function_and_analyzer() {
        let d = |a: Value| json!({"indexes": {"i": {"index": "function(d){}", "analyzer": a}}});
        let sig = |doc: &Value| {
            IndexDef::find("_design/x", doc, "i", Flavor::Search, false)
                .unwrap()
                .signature()
                .to_string()
        };
        assert_eq!(sig(&d(json!("standard"))), sig(&d(json!("standard"))));
        assert_ne!(sig(&d(json!("standard"))), sig(&d(json!("english"))));
        let e = IndexDef::find("_design/x", &d(json!("x")), "j", Flavor::Search, false);
        assert!(matches!(e, Err(Error::NotFound(_))));
        let e = IndexDef::find("_design/x", &d(json!("x")), "i", Flavor::Search, false);
        assert!(matches!(e, Err(Error::UnknownAnalyzer(_))));
    }
}
