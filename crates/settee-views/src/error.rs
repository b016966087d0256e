//! What can go wrong with views; mapped to CouchDB's JSON errors at the HTTP edge.

/// An error from defining, building or querying a view.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database layer failed.
    #[error(transparent)]
    Db(#[from] settee_db::Error),
    /// The index file failed.
    #[error(transparent)]
    Store(#[from] settee_store::Error),
    /// Design document JavaScript failed as a whole (did not compile, timed out, ...).
    #[error(transparent)]
    Js(#[from] settee_js::Error),
    /// An external query server failed (could not start, timed out, raised an error).
    #[error(transparent)]
    QueryServer(#[from] settee_queryserver::Error),
    /// No such design document or view; the reason is CouchDB's (`missing`, `deleted`,
    /// `missing_named_view`).
    #[error("not found: {0}")]
    NotFound(&'static str),
    /// A malformed request of a view's or filter's (`bad_request`).
    #[error("{0}")]
    BadRequest(String),
    /// A design document lacks the member a request names (`not_found`, `missing json key`).
    #[error("missing json key: {0}")]
    MissingKey(String),
    /// A query parameter is invalid or does not fit the view (`query_parse_error`).
    #[error("{0}")]
    QueryParse(String),
    /// A design document's views are malformed.
    #[error("{0}")]
    InvalidDesignDoc(String),
    /// The design document's language has no query server.
    #[error("unknown query language {0}")]
    UnknownLanguage(String),
    /// A reduce function failed on the rows it was given (`builtin_reduce_error`, a JS
    /// reduce's own error, `reduce_overflow_error`).
    #[error("{error}: {reason}")]
    Reduce {
        /// CouchDB's error name.
        error: String,
        /// Why.
        reason: String,
    },
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
    /// Bytes in an index file are not what this version writes.
    #[error("corrupted index: {0}")]
    Corrupted(&'static str),
}

impl Error {
    /// The error itself, looking through [`Error::Shared`].
    pub fn root(&self) -> &Error {
        match self {
            Error::Shared(e) => e.root(),
            other => other,
        }
    }
}

/// Result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
