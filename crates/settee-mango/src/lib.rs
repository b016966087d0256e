//! Mango, CouchDB's declarative queries: selectors, parsed once and matched against
//! documents exactly as CouchDB matches them (also used by `_changes?filter=_selector` and
//! the replicator), JSON indexes (views of `query` design documents, mapped natively), the
//! planner that chooses among them, and `_find`/`_explain` run on the chosen index.
//!
//! This crate reads databases through `settee-db` snapshots and indexes through
//! `settee-views`; it knows nothing of HTTP.

#![deny(missing_docs)]

mod create;
mod def;
mod erl;
mod error;
mod explain;
mod find;
mod index;
mod native;
mod plan;
mod project;
mod query;
mod scan;
mod selector;
mod text;
mod text_doc;
mod text_query;

pub use create::{Kind as NewKind, NewIndex};
pub use def::{add_to_ddoc, ddoc_id, from_ddoc, index_names, remove_from_ddoc, JsonIndex};
pub use erl::w as erl_w;
pub use error::{Error, Result};
pub use find::{explain, find, prepare, Engines, FindSettings, Found, Prepared, Summary};
pub use index::{all_docs_json, indexes, json_indexes};
pub use native::native_languages;
pub use plan::{Candidate, Chosen, Plan};
pub use query::{Bookmark, FindQuery};
pub use selector::{dotted, field, field_path, Range, Selector};
pub use text::TextIndex;
pub use text_doc::text_fields;
pub use text_query::TextQuery;
