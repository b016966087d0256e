//! What can go wrong in a backup or a restore.

/// One error of a backup or restore.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command was asked for something it cannot do.
    #[error("{0}")]
    Usage(String),
    /// The server refused a request, could not be reached, or answered nonsense.
    #[error(transparent)]
    Server(#[from] settee_replicator::Error),
    /// A local file could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A backup file or its log is not what this tool or `couchbackup` writes.
    #[error("{0}")]
    Format(String),
}

/// Results of backups and restores.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An I/O error on `path`.
pub(crate) fn file_error(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::File {
        path: path.display().to_string(),
        source,
    }
}
