//! What can go wrong with search indexes; mapped to CouchDB's JSON errors at the HTTP edge.

/// An error from defining, building or querying a search index.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database layer failed.
    #[error(transparent)]
    Db(#[from] settee_db::Error),
    /// The index function's JavaScript failed as a whole (did not compile, timed out, ...).
    #[error(transparent)]
    Js(#[from] settee_js::Error),
    /// The index files failed.
    #[error("search index: {0}")]
    Index(#[from] tantivy::TantivyError),
    /// No such design document or index (CouchDB's `not_found` with this reason).
    #[error("{0}")]
    NotFound(String),
    /// An analyzer name no analyzer has.
    #[error("{0}")]
    UnknownAnalyzer(String),
    /// A malformed analyzer definition.
    #[error("{0}")]
    BadAnalyzer(String),
    /// A query that does not parse (`q`, a range, a sort field).
    #[error("{0}")]
    QueryParse(String),
    /// A malformed request parameter (`bad_request`).
    #[error("{0}")]
    BadRequest(String),
    /// A design document's indexes are malformed.
    #[error("{0}")]
    InvalidDesignDoc(String),
    /// A file operation on the index directory failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An index update that several clients waited for failed with this error.
    #[error(transparent)]
    Shared(std::sync::Arc<Error>),
    /// Bytes in an index are not what this version writes.
    #[error("corrupted index: {0}")]
    Corrupted(&'static str),
}

/// A result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
