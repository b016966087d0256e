//! Errors of this crate.

/// Why a revision string or JSON input was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A revision string that is not `<pos>-<id>` (CouchDB's "Invalid rev format").
    #[error("Invalid rev format")]
    BadRev,
}
