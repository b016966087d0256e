//! Mango, CouchDB's declarative queries. For now: selectors, parsed once and matched against
//! documents exactly as CouchDB matches them (used by `_changes?filter=_selector`); indexes,
//! `_find` and the query planner come with their issue.
//!
//! This crate knows JSON documents and CouchDB's collation; it knows nothing of storage or
//! HTTP.

#![deny(missing_docs)]

mod selector;

pub use selector::{field, field_path, Error, Selector};
