//! What can go wrong while benchmarking.

/// A benchmark failure: the server could not be reached, or it answered wrongly (a fast wrong
/// answer is a failure, not a result).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URL is not one this tool can use.
    #[error("bad URL {0}: {1}")]
    Url(String, &'static str),
    /// Connecting or talking to the server failed.
    #[error("{0}")]
    Io(String),
    /// The workload cannot run with these parameters.
    #[error("{0}")]
    Usage(&'static str),
    /// The server answered, but not what the workload expects.
    #[error("wrong answer: {0}")]
    WrongAnswer(String),
}

impl Error {
    /// The same error, saying which workload met it.
    pub fn context(self, workload: &str) -> Error {
        match self {
            Error::Io(m) => Error::Io(format!("{workload}: {m}")),
            Error::WrongAnswer(m) => Error::WrongAnswer(format!("{workload}: {m}")),
            other => other,
        }
    }
}

/// Result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
