//! A remote source's continuous changes feed (`feed=continuous`), kept open between the pages
//! a continuous job asks for: rows arrive as lines as the source writes them, blank lines are
//! heartbeats, and a `last_seq` line means the source ended the feed.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::endpoint::Change;

/// How long a page that has rows waits for more: none, it takes only what has arrived (more
/// arrive meanwhile whenever the workers are busy).
const GATHER: Duration = Duration::ZERO;

/// An open continuous feed.
pub(crate) struct LiveFeed {
    /// The sequence after the last row handed out: the `since` the next page asks for.
    pub position: Value,
    resp: reqwest::Response,
    buf: Vec<u8>,
}

/// Why a feed cannot go on.
pub(crate) enum Broken {
    /// The connection failed.
    Connection(reqwest::Error),
    /// A line was not a change row.
    Garbage,
}

/// One page read from a feed.
pub(crate) struct Page {
    /// The rows.
    pub rows: Vec<Change>,
    /// The feed's `last_seq`, when the source ended it.
    pub ended: Option<Value>,
}

impl LiveFeed {
    /// The feed of `resp`, whose rows start after `position`.
    pub fn new(resp: reqwest::Response, position: Value) -> LiveFeed {
        LiveFeed {
            position,
            resp,
            buf: Vec::new(),
        }
    }

    fn line(&mut self) -> Option<Vec<u8>> {
        let end = self.buf.iter().position(|&b| b == b'\n')?;
        let mut line: Vec<u8> = self.buf.drain(..=end).collect();
        line.pop();
        Some(line)
    }

    /// Up to `limit` rows: waits up to `wait` for the first, then takes those already on
    /// their way.
    pub async fn page(&mut self, limit: usize, wait: Duration) -> Result<Page, Broken> {
        let deadline = Instant::now() + wait;
        let mut rows = Vec::new();
        loop {
            while let Some(line) = self.line() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let v: Value = serde_json::from_slice(&line).map_err(|_| Broken::Garbage)?;
                if v.get("id").is_none() {
                    let ended = v.get("last_seq").cloned().ok_or(Broken::Garbage)?;
                    return Ok(Page {
                        rows,
                        ended: Some(ended),
                    });
                }
                rows.push(crate::remote::parse_row(&v).ok_or(Broken::Garbage)?);
                if rows.len() >= limit {
                    return Ok(Page { rows, ended: None });
                }
            }
            let until = if rows.is_empty() {
                deadline
            } else {
                Instant::now() + GATHER
            };
            match tokio::time::timeout_at(until, self.resp.chunk()).await {
                Err(_) => return Ok(Page { rows, ended: None }),
                Ok(Ok(Some(bytes))) => self.buf.extend_from_slice(&bytes),
                Ok(Ok(None)) => {
                    return Ok(Page {
                        rows,
                        ended: Some(self.position.clone()),
                    })
                }
                Ok(Err(e)) => return Err(Broken::Connection(e)),
            }
        }
    }
}
