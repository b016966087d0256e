//! What can go wrong talking to a query server; mapped to CouchDB's JSON errors at the HTTP edge.

use std::time::Duration;

/// An error from an external query server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No query server is configured for the language.
    #[error("unknown query language {0}")]
    UnknownLanguage(String),
    /// The configured command could not be started.
    #[error("cannot start query server `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The process did not answer within `os_process_timeout`; it has been killed.
    #[error("OS process timed out after {0:?}")]
    Timeout(Duration),
    /// The process ended or broke the protocol; it has been killed.
    #[error("OS process error: {0}")]
    Process(String),
    /// The process answered a command with an error (`["error", id, reason]` or
    /// `{"error": …, "reason": …}`), such as a function that does not compile.
    #[error("{error}: {reason}")]
    Raised {
        /// The error's name as the query server gave it.
        error: String,
        /// Why.
        reason: String,
    },
}

/// Result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
