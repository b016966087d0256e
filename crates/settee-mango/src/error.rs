//! The crate's one error type: a query refused (with CouchDB's error name) or the database
//! failing under it.

/// Why a Mango query was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A selector that is not one (CouchDB answers these 400 `bad_request`).
    #[error("{0}")]
    Selector(String),
    /// A query refused with CouchDB's error name (`invalid_key`, `no_usable_index`, ...);
    /// all are answered 400.
    #[error("{reason}")]
    Query {
        /// CouchDB's error name.
        error: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A refusal CouchDB answers with another status than 400 (503 for an index type this
    /// server does not have, 500 where CouchDB fails saving a design document).
    #[error("{reason}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// CouchDB's error name.
        error: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The database failed while the query read it.
    #[error(transparent)]
    Db(#[from] settee_db::Error),
    /// An index failed to open, update or read.
    #[error(transparent)]
    Views(#[from] settee_views::Error),
    /// A text index failed to open, update or read.
    #[error(transparent)]
    Search(#[from] settee_search::Error),
}

impl Error {
    /// A refusal named `error` by CouchDB.
    pub(crate) fn query(error: &'static str, reason: impl Into<String>) -> Error {
        Error::Query {
            error,
            reason: reason.into(),
        }
    }
}

/// A Mango result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
