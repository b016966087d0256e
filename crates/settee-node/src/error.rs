//! The node's one error type: what a node operation refused or failed with, in terms the
//! HTTP edge (or a replicator, or a cluster coordinator) maps to its own answers.

use std::sync::Arc;

/// Why a node operation was refused or failed. Cloneable, so one failure can answer every
/// document of a batch.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The database layer failed.
    #[error(transparent)]
    Db(Arc<settee_db::Error>),
    /// Defining, building or querying a view failed.
    #[error(transparent)]
    Views(Arc<settee_views::Error>),
    /// An external query server failed.
    #[error(transparent)]
    QueryServer(Arc<settee_queryserver::Error>),
    /// A Mango index request was refused, or a query failed.
    #[error(transparent)]
    Mango(Arc<settee_mango::Error>),
    /// The caller must authenticate (CouchDB's `unauthorized`).
    #[error("{0}")]
    Unauthorized(String),
    /// The caller may not do this (CouchDB's `forbidden`).
    #[error("{0}")]
    Forbidden(String),
    /// Nothing the caller may see is there (CouchDB's `not_found`).
    #[error("{0}")]
    NotFound(String),
    /// The input is malformed (CouchDB's `bad_request`).
    #[error("{0}")]
    BadRequest(String),
    /// A design document's function does not compile (CouchDB's `compilation_error`).
    #[error("{0}")]
    Compilation(String),
    /// A validation function refused a write with an error name of its own.
    #[error("{error}: {reason}")]
    Refused {
        /// The error name the function threw.
        error: String,
        /// Its reason.
        reason: String,
    },
    /// Work that did not finish: a function that failed to run, a task that panicked.
    #[error("{0}")]
    Failed(String),
}

/// A node operation's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<settee_db::Error> for Error {
    fn from(e: settee_db::Error) -> Error {
        Error::Db(Arc::new(e))
    }
}

impl From<settee_views::Error> for Error {
    fn from(e: settee_views::Error) -> Error {
        Error::Views(Arc::new(e))
    }
}

impl From<settee_mango::Error> for Error {
    fn from(e: settee_mango::Error) -> Error {
        Error::Mango(Arc::new(e))
    }
}

impl From<settee_queryserver::Error> for Error {
    fn from(e: settee_queryserver::Error) -> Error {
        Error::QueryServer(Arc::new(e))
    }
}

impl From<settee_auth::Denied> for Error {
    fn from(d: settee_auth::Denied) -> Error {
        match d {
            settee_auth::Denied::Unauthorized(reason) => Error::Unauthorized(reason.into()),
            settee_auth::Denied::Forbidden(reason) => Error::Forbidden(reason.into()),
        }
    }
}

/// A blocking task that did not finish.
pub(crate) fn join_error(_: tokio::task::JoinError) -> Error {
    Error::Failed("the operation failed".into())
}
