//! Full-text search indexes with CouchDB's semantics, in-process: design documents'
//! `indexes` (`_search`) and `nouveau` (`_nouveau`) on an embedded tantivy index per
//! index definition.
//!
//! * [`analyzer`]: CouchDB's analyzers (standard, classic, email, simple, whitespace,
//!   keyword, perfield, languages).
//! * [`lucene`] and [`compile`]: Lucene's query syntax, compiled to index queries.
//! * [`IndexDef`], [`SearchIndex`]: an index's definition and its files.

#![deny(missing_docs)]

pub mod analyzer;
pub mod compile;
mod def;
mod error;
mod highlight;
mod index;
mod indexer;
pub mod lucene;
mod one_term;
mod phrase;
mod query;
mod registry;
#[cfg(test)]
mod test_index;

pub use def::{member, IndexDef};
pub use error::{Error, Result};
pub use index::{build_doc, Fields, IndexMeta, Indexed, SearchIndex};
pub use query::bookmark_of;
pub use query::{Group, Grouping, Highlight, Hit, Ranges, SearchRequest, SearchResult, SortKey};
pub use registry::{NativeIndexer, Search};
