//! What can go wrong running JavaScript.

use std::time::Duration;

/// An error from compiling or running design document JavaScript.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// The source is not a function (CouchDB's `compilation_error`).
    #[error("compilation error: {0}")]
    Compile(String),
    /// The call ran past the time limit and was stopped.
    #[error("the function ran longer than {0:?}")]
    Timeout(Duration),
    /// The call needed more memory than the engine may hold.
    #[error("the function ran out of memory")]
    OutOfMemory,
    /// The function threw; `error` is the CouchDB error name it carried, if any.
    #[error("{error}: {reason}")]
    Raised {
        /// CouchDB error name (an exception's `name`, such as `TypeError`, or
        /// `unnamed_error` for another thrown value).
        error: String,
        /// The exception's message.
        reason: String,
    },
    /// The engine itself failed (could not start, lost its worker, ...).
    #[error("JavaScript engine: {0}")]
    Engine(String),
}

/// Result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
