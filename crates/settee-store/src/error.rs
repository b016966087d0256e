//! The one error type of the storage engine.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in the storage engine.
///
/// Callers above map these to their own errors; nothing here knows about HTTP.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O call failed (disk full, permission denied, EIO, ...).
    #[error("I/O error during {op}: {source}")]
    Io {
        /// What the engine was doing.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Bytes on disk failed a checksum or could not be decoded.
    #[error("corrupted data at offset {offset}: {what}")]
    Corrupted {
        /// File offset of the damaged record.
        offset: u64,
        /// What was wrong with it.
        what: String,
    },
    /// The file does not start with a Settee store header.
    #[error("{path}: not a Settee store file")]
    NotAStore {
        /// The file that was opened.
        path: PathBuf,
    },
    /// The file was written by an incompatible format version.
    #[error("{path}: unsupported store format version {version}")]
    UnsupportedVersion {
        /// The file that was opened.
        path: PathBuf,
        /// The version found in its header.
        version: u32,
    },
    /// A record (a value, a node or a blob) larger than the format's 4 GiB limit.
    #[error("record of {len} bytes is larger than a store record may be")]
    TooLarge {
        /// The length asked for.
        len: u64,
    },
    /// A loose blob was appended to a file version that no longer exists (its commit
    /// failed, or a compaction replaced the file); write it again.
    #[error("the blob was lost to a failed commit or a compaction; write it again")]
    StaleBlob,
    /// A caller-supplied reducer failed.
    #[error("reduce failed: {0}")]
    Reduce(String),
    /// A tree slot that the file's schema does not have.
    #[error("no tree number {0} in this store")]
    NoSuchTree(usize),
    /// The writer thread is gone (the store was closed or a previous fatal error).
    #[error("the store is closed")]
    Closed,
    /// A compaction of this store is already running.
    #[error("a compaction is already running")]
    CompactionRunning,
    /// A caller's update closure panicked; its changes were rolled back.
    #[error("update panicked: {0}")]
    Panicked(String),
}

impl Error {
    pub(crate) fn io(op: &'static str) -> impl FnOnce(io::Error) -> Error {
        move |source| Error::Io { op, source }
    }

    pub(crate) fn corrupted(offset: u64, what: impl Into<String>) -> Error {
        Error::Corrupted {
            offset,
            what: what.into(),
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
