//! What can go wrong in the security model.

/// An error from checking credentials or user documents.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A write the rules refuse: `forbidden` (403) in CouchDB's terms.
    #[error("{0}")]
    Forbidden(String),
    /// A write or request that needs authentication: `unauthorized` (401).
    #[error("{0}")]
    Unauthorized(String),
}

/// Result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
