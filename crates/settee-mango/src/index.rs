//! The seam between a query and the indexes that can answer it: an [`Index`] says what it is
//! (as `GET /{db}/_index` lists it), whether it can serve a query, and gives a cursor over
//! candidate documents in its order. CouchDB's special `_all_docs` index is the first; JSON
//! indexes come behind the same seam.

use serde_json::{json, Value};
use settee_db::{AllDocsOptions, DbSnapshot, DocOptions, DESIGN_PREFIX};

use crate::{FindQuery, Result};

/// Candidate documents for a query, in the index's order: each document's id and body.
pub type Cursor<'a> = Box<dyn Iterator<Item = Result<(String, Value)>> + 'a>;

/// An index a query can run on.
pub trait Index: Send + Sync {
    /// The index's entry in `GET /{db}/_index`.
    fn definition(&self) -> Value;

    /// Candidate documents for `query` from `snap`: a superset of those its selector
    /// matches, in the index's order (reversed when the query is descending), starting after
    /// its bookmark. Design documents are never candidates.
    fn cursor<'a>(&self, snap: &'a DbSnapshot, query: &FindQuery) -> Result<Cursor<'a>>;
}

/// The indexes of a database, in the order `GET /{db}/_index` lists them.
pub fn indexes(_snap: &DbSnapshot) -> Vec<Box<dyn Index>> {
    vec![Box::new(AllDocs)]
}

/// CouchDB's special index: every document by id.
pub struct AllDocs;

impl Index for AllDocs {
    fn definition(&self) -> Value {
        json!({"ddoc": null, "name": "_all_docs", "type": "special",
            "def": {"fields": [{"_id": "asc"}]}})
    }

    fn cursor<'a>(&self, snap: &'a DbSnapshot, query: &FindQuery) -> Result<Cursor<'a>> {
        let opts = AllDocsOptions {
            start: query.after.clone(),
            include_docs: true,
            descending: query.descending,
            doc: DocOptions {
                conflicts: query.conflicts,
                ..DocOptions::default()
            },
            ..AllDocsOptions::default()
        };
        let after = query.after.clone();
        let rows = snap.all_docs(opts)?;
        Ok(Box::new(rows.filter_map(move |row| {
            let row = match row {
                Ok(row) => row,
                Err(e) => return Some(Err(e.into())),
            };
            if row.id.starts_with(DESIGN_PREFIX) || after.as_deref() == Some(row.id.as_str()) {
                return None;
            }
            let bytes = row.doc?;
            Some(parse(&bytes).map(|doc| (row.id, doc)))
        })))
    }
}

/// A stored document as JSON.
fn parse(bytes: &[u8]) -> Result<Value> {
    settee_json::deep::from_slice(bytes)
        .map_err(|_| settee_db::Error::Corrupted("a stored document is not valid JSON").into())
}
