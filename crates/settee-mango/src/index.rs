//! The indexes of a database as Mango sees them: CouchDB's special `_all_docs` index, and
//! the JSON indexes of every `query` design document.

use serde_json::{json, Value};
use settee_db::{AllDocsOptions, DbSnapshot, DocOptions, DESIGN_PREFIX};

use crate::def::{from_ddoc, JsonIndex};
use crate::query::Bookmark;
use crate::text::TextIndex;
use crate::{FindQuery, Result};

/// Candidate documents for a query, in an index's order: each document's id and body
/// (`None` for a design document, which is read but never a result).
pub type Cursor<'a> = Box<dyn Iterator<Item = Result<(String, Option<Value>)>> + 'a>;

/// `_all_docs` as `GET /{db}/_index` lists it.
pub fn all_docs_json() -> Value {
    json!({"ddoc": null, "name": "_all_docs", "type": "special",
        "def": {"fields": [{"_id": "asc"}]}})
}

/// The Mango indexes of one design document: its JSON indexes, then its text indexes.
pub type DesignIndexes = (Vec<JsonIndex>, Vec<TextIndex>);

/// The Mango indexes of every design document of the database, in id order.
fn design_indexes(snap: &DbSnapshot) -> Result<Vec<DesignIndexes>> {
    let opts = AllDocsOptions {
        start: Some(DESIGN_PREFIX.to_string()),
        end: Some("_design0".to_string()),
        inclusive_end: false,
        include_docs: true,
        ..AllDocsOptions::default()
    };
    let mut out = Vec::new();
    for row in snap.all_docs(opts)? {
        let row = row?;
        let Some(doc) = row.doc else { continue };
        let Ok(doc) = parse(&doc) else { continue };
        let json = from_ddoc(&row.id, &doc, snap.partitioned());
        let text = TextIndex::from_ddoc(&row.id, &doc, snap.partitioned());
        out.push((json, text));
    }
    Ok(out)
}

/// The JSON and text indexes of the database, by design document and then name.
pub fn all_indexes(snap: &DbSnapshot) -> Result<DesignIndexes> {
    let (mut json, mut text) = (Vec::new(), Vec::new());
    for (j, t) in design_indexes(snap)? {
        json.extend(j);
        text.extend(t);
    }
    Ok((json, text))
}

/// The JSON indexes of the database, by design document and then name.
pub fn json_indexes(snap: &DbSnapshot) -> Result<Vec<JsonIndex>> {
    Ok(all_indexes(snap)?.0)
}

/// Every index, as `GET /{db}/_index` lists them: `_all_docs` first, then each design
/// document's JSON and text indexes.
pub fn indexes(snap: &DbSnapshot) -> Result<Vec<Value>> {
    let mut out = vec![all_docs_json()];
    for (json, text) in design_indexes(snap)? {
        out.extend(json.iter().map(JsonIndex::to_json));
        out.extend(text.iter().map(TextIndex::to_json));
    }
    Ok(out)
}

/// Candidate documents for `query` from `_all_docs`: every document by id (reversed when
/// descending; of its partition only for a partition query), after the query's bookmark.
pub(crate) fn all_docs_cursor<'a>(snap: &'a DbSnapshot, query: &FindQuery) -> Result<Cursor<'a>> {
    let after = query.after.as_ref().map(|b: &Bookmark| b.id.clone());
    // A partition query reads that partition's ids only.
    let (start, end) = match query.partition.as_str() {
        "" => (after.clone(), None),
        p => {
            let (low, high) = settee_db::partition_range(p);
            let (first, last) = if query.descending {
                (high, low)
            } else {
                (low, high)
            };
            (Some(after.clone().unwrap_or(first)), Some(last))
        }
    };
    let opts = AllDocsOptions {
        start,
        end,
        inclusive_end: query.descending,
        include_docs: true,
        descending: query.descending,
        doc: DocOptions {
            conflicts: query.conflicts,
            ..DocOptions::default()
        },
        ..AllDocsOptions::default()
    };
    let rows = snap.all_docs(opts)?;
    Ok(Box::new(rows.filter_map(move |row| {
        let row = match row {
            Ok(row) => row,
            Err(e) => return Some(Err(e.into())),
        };
        if after.as_deref() == Some(row.id.as_str()) {
            return None;
        }
        if row.id.starts_with(DESIGN_PREFIX) {
            return Some(Ok((row.id, None)));
        }
        let bytes = row.doc?;
        Some(parse(&bytes).map(|doc| (row.id, Some(doc))))
    })))
}

/// A stored document as JSON.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value> {
    settee_json::deep::from_slice(bytes)
        .map_err(|_| settee_db::Error::Corrupted("a stored document is not valid JSON").into())
}
