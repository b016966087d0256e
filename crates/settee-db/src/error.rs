//! Errors of the database layer. The HTTP layer maps each to CouchDB's status and JSON.

/// What went wrong with a database operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database does not exist.
    #[error("Database does not exist.")]
    NoDatabase,
    /// A database of that name exists already.
    #[error("The database could not be created, the file already exists.")]
    DatabaseExists,
    /// The name breaks CouchDB's database name rules.
    #[error("Name: '{0}'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.")]
    IllegalDatabaseName(String),
    /// No such document or revision; the reason is CouchDB's ("missing" or "deleted").
    #[error("{0}")]
    NotFound(&'static str),
    /// The edit does not extend a current leaf revision.
    #[error("Document update conflict.")]
    Conflict,
    /// Malformed input; the reason says what.
    #[error("{0}")]
    BadRequest(String),
    /// A document breaks the document rules (e.g. an unknown `_` member).
    #[error("{0}")]
    DocValidation(String),
    /// An invalid document id.
    #[error("{0}")]
    IllegalDocId(String),
    /// An invalid partition name (of a document id or a `_partition` path).
    #[error("{0}")]
    IllegalPartition(String),
    /// A document body over `max_document_size`; carries the document id.
    #[error("{0}")]
    DocumentTooLarge(String),
    /// An attachment stub names nothing in the revision being edited.
    #[error("Invalid attachment stub in {0} for {1}")]
    MissingStub(String, String),
    /// No such attachment.
    #[error("Document is missing attachment")]
    NoAttachment,
    /// An attachment over the size allowed; carries the document id.
    #[error("{0}")]
    AttachmentTooLarge(String),
    /// A since or other sequence that this server did not issue.
    #[error("Malformed sequence supplied in 'since' parameter.")]
    BadSequence,
    /// A change feed's filter function failed on a document (threw or ran out of time).
    #[error("{}: {}", .0.error, .0.reason)]
    Filter(crate::read::FilterError),
    /// Stored bytes that cannot be decoded.
    #[error("stored data is damaged: {0}")]
    Corrupted(&'static str),
    /// The storage engine failed.
    #[error(transparent)]
    Store(#[from] settee_store::Error),
    /// A file-system operation outside the storage engine failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl Error {
    /// A copy for each of many callers answered with one error (I/O errors keep their kind
    /// and message).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::NoDatabase => Error::NoDatabase,
            Error::DatabaseExists => Error::DatabaseExists,
            Error::IllegalDatabaseName(s) => Error::IllegalDatabaseName(s.clone()),
            Error::NotFound(s) => Error::NotFound(s),
            Error::Conflict => Error::Conflict,
            Error::BadRequest(s) => Error::BadRequest(s.clone()),
            Error::DocValidation(s) => Error::DocValidation(s.clone()),
            Error::IllegalDocId(s) => Error::IllegalDocId(s.clone()),
            Error::IllegalPartition(s) => Error::IllegalPartition(s.clone()),
            Error::DocumentTooLarge(s) => Error::DocumentTooLarge(s.clone()),
            Error::MissingStub(a, b) => Error::MissingStub(a.clone(), b.clone()),
            Error::NoAttachment => Error::NoAttachment,
            Error::AttachmentTooLarge(s) => Error::AttachmentTooLarge(s.clone()),
            Error::BadSequence => Error::BadSequence,
            Error::Filter(f) => Error::Filter(f.clone()),
            Error::Corrupted(s) => Error::Corrupted(s),
            Error::Store(e) => Error::Store(e.duplicate()),
            Error::Io { op, source } => Error::Io {
                op,
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
        }
    }

    /// An I/O error during `op`.
    pub fn io(op: &'static str) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Io { op, source }
    }
}

/// Result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
