//! What can go wrong in a replication, and how CouchDB's scheduler treats it: transient
//! failures (a peer down, a connection cut, a timeout) make a job `crashing` and retried with
//! backoff; permanent ones (a bad document, a missing source) make it `failed`.

use std::sync::Arc;

/// One error of the replicator.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The replication's description is wrong (CouchDB's `bad_request`).
    #[error("{0}")]
    BadRequest(String),
    /// A database of the replication does not exist (and may not be created).
    #[error("could not open {0}")]
    DbNotFound(String),
    /// The peer refused the credentials given, or the user may not use a local database.
    #[error("unauthorized to access or create database {0}")]
    Unauthorized(String),
    /// The peer answered with a CouchDB error of its own.
    #[error("{error}: {reason}")]
    Peer {
        /// The HTTP status.
        status: u16,
        /// CouchDB's error name.
        error: String,
        /// Its reason.
        reason: String,
    },
    /// The peer could not be reached, or the connection broke or timed out.
    #[error("{0}")]
    Unreachable(String),
    /// The peer answered something that is not CouchDB's protocol.
    #[error("{0}")]
    Garbage(String),
    /// This node failed a read or write of a local database.
    #[error(transparent)]
    Node(Arc<settee_node::Error>),
    /// The job was stopped.
    #[error("replication cancelled")]
    Cancelled,
}

/// The replicator's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<settee_node::Error> for Error {
    fn from(e: settee_node::Error) -> Error {
        Error::Node(Arc::new(e))
    }
}

impl From<settee_db::Error> for Error {
    fn from(e: settee_db::Error) -> Error {
        settee_node::Error::from(e).into()
    }
}

impl Error {
    /// Whether retrying later may succeed: CouchDB's scheduler keeps such jobs as `crashing`
    /// and retries them with backoff, and makes the others `failed`.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Unreachable(_) | Error::Garbage(_) | Error::Node(_) => true,
            Error::Peer { status, .. } => *status >= 500 || *status == 429 || *status == 408,
            // A database may be created later; CouchDB retries these too.
            Error::DbNotFound(_) | Error::Unauthorized(_) => true,
            Error::BadRequest(_) | Error::Cancelled => false,
        }
    }

    /// CouchDB's `{"error", "reason"}` pair for this error, and its HTTP status.
    pub fn couch(&self) -> (u16, String, String) {
        match self {
            Error::BadRequest(r) => (400, "bad_request".into(), r.clone()),
            Error::DbNotFound(_) => (404, "db_not_found".into(), self.to_string()),
            Error::Unauthorized(_) => (401, "unauthorized".into(), self.to_string()),
            Error::Peer {
                status,
                error,
                reason,
            } => (*status, error.clone(), reason.clone()),
            Error::Unreachable(r) | Error::Garbage(r) => (500, "error".into(), r.clone()),
            Error::Node(e) => (500, "error".into(), e.to_string()),
            Error::Cancelled => (500, "error".into(), self.to_string()),
        }
    }
}
