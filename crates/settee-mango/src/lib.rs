//! Mango, CouchDB's declarative queries: selectors, parsed once and matched against
//! documents exactly as CouchDB matches them (also used by `_changes?filter=_selector`), and
//! `_find` run on an index behind the [`Index`] seam (CouchDB's special `_all_docs` index
//! today; JSON indexes come behind the same seam).
//!
//! This crate reads databases through `settee-db` snapshots; it knows nothing of HTTP.

#![deny(missing_docs)]

mod error;
mod find;
mod index;
mod project;
mod query;
mod selector;

pub use error::{Error, Result};
pub use find::{find, FindSettings, Found};
pub use index::{indexes, AllDocs, Cursor, Index};
pub use query::FindQuery;
pub use selector::{field, field_path, Selector};
