//! `_find`: a query run on the index that serves it, matched, skipped, limited, projected,
//! with CouchDB's bookmark, warnings and `execution_stats`.

use std::time::Instant;

use serde_json::{json, Value};
use settee_db::DbSnapshot;

use crate::index::{indexes, Index};
use crate::query::encode_bookmark;
use crate::{FindQuery, Result};

/// What CouchDB says when a query runs on the `_all_docs` index.
const NO_INDEX: &str = "No matching index found, create an index to optimize query time.";

/// What CouchDB adds when a query reads many more documents than it returns.
const SCANNED_MANY: &str =
    "The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.";

/// Settings a query runs under.
#[derive(Debug, Clone, Copy)]
pub struct FindSettings {
    /// Warn when documents examined per document returned exceed this (`[mango]
    /// index_scan_warning_threshold`; 0: never).
    pub scan_warning_threshold: u64,
}

/// A page of results.
#[derive(Debug)]
pub struct Found {
    /// The documents, projected to the query's `fields`.
    pub docs: Vec<Value>,
    /// Where the next page starts.
    pub bookmark: String,
    /// CouchDB's warnings, one a line.
    pub warnings: Vec<String>,
    /// Documents read.
    pub docs_examined: u64,
    /// How long the query ran, in milliseconds.
    pub execution_time_ms: f64,
}

impl Found {
    /// The `_find` answer as CouchDB gives it, with `execution_stats` when `stats`.
    pub fn to_json(&self, stats: bool) -> Value {
        let mut out = json!({"docs": self.docs, "bookmark": self.bookmark,
            "warning": self.warnings.join("\n")});
        if stats {
            out["execution_stats"] = json!({
                "total_keys_examined": 0,
                "total_docs_examined": self.docs_examined,
                "total_quorum_docs_examined": 0,
                "results_returned": self.docs.len(),
                "execution_time_ms": self.execution_time_ms,
            });
        }
        out
    }
}

/// Runs `query` on `snap` (blocking: it reads documents).
pub fn find(snap: &DbSnapshot, query: FindQuery, settings: FindSettings) -> Result<Found> {
    let started = Instant::now();
    let mut warnings: Vec<String> = query.use_index_warning.iter().cloned().collect();
    // Only the special index exists yet; it serves every query a sort has not refused.
    let index = indexes(snap)
        .into_iter()
        .next()
        .expect("the _all_docs index");
    warnings.push(NO_INDEX.to_string());
    let (docs, docs_examined, last) = run(index.as_ref(), snap, &query)?;
    let docs = crate::project::project(docs, query.fields.as_deref());
    let returned = docs.len() as u64;
    let threshold = settings.scan_warning_threshold;
    if threshold > 0 && docs_examined / returned.max(1) > threshold {
        warnings.push(SCANNED_MANY.to_string());
    }
    Ok(Found {
        docs,
        // As CouchDB: a page that moved nothing answers the bookmark it was given.
        bookmark: last.map_or(query.bookmark, |id| encode_bookmark(&id)),
        warnings,
        docs_examined,
        execution_time_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// The documents the selector matches among the index's candidates, after `skip` of them
/// and at most `limit`; how many documents were read, and the id of the last one passed.
fn run(
    index: &dyn Index,
    snap: &DbSnapshot,
    q: &FindQuery,
) -> Result<(Vec<Value>, u64, Option<String>)> {
    let (mut docs, mut examined, mut skipped, mut last) = (Vec::new(), 0u64, 0u64, None);
    if q.limit == 0 {
        return Ok((docs, examined, last));
    }
    for candidate in index.cursor(snap, q)? {
        let (id, doc) = candidate?;
        examined += 1;
        if !q.selector.matches(&doc) {
            continue;
        }
        // Skipped matches move the bookmark too, as in CouchDB.
        last = Some(id);
        if skipped < q.skip {
            skipped += 1;
            continue;
        }
        docs.push(doc);
        if docs.len() as u64 >= q.limit {
            break;
        }
    }
    Ok((docs, examined, last))
}
