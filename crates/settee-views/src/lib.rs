//! Map/reduce views with CouchDB's semantics: design documents, incremental indexes built
//! from the databases' change sequences, builtin and JavaScript reducers, view queries.
//!
//! * [`DesignDoc`]: the views of a design document and the signature that decides which
//!   index file they share.
//! * [`Index`]: one index file: view rows in collation order with reductions in the tree,
//!   and a document-id tree for incremental updates.
//! * [`Views`]: opens indexes per database, brings them up to date (one shared update per
//!   index, mapping on a pool of JavaScript engines), and removes unused ones.
//! * [`query`]: ranges, keys, paging and grouped reductions.

#![deny(missing_docs)]

mod ddoc;
mod error;
mod filter;
mod hll;
mod index;
mod indexer;
mod native;
pub mod partition;
pub mod plan;
mod projection;
pub mod query;
mod reduce;
mod registry;
mod row;

pub use ddoc::{DesignDoc, IndexOptions, ViewDef, QUERY_LANGUAGE};
pub use error::{Error, Result};
pub use filter::Filter;
pub use index::{Index, IndexMeta};
pub use native::{NativeLanguage, NativeLanguages, NativeMap};
pub use query::{Grouping, MapRow, ReduceRow, ViewQuery};
pub use reduce::{Reduce, ViewReducer};
pub use registry::{Views, ViewsConfig};
