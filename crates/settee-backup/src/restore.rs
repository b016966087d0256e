//! Writing a backup file into a database: each line's revisions as they are
//! (`new_edits=false`), a few lines in flight at once. Restoring is idempotent: revisions
//! the database has already are left as they are, so a restore that was stopped is resumed
//! by running it again.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Map;
use settee_replicator::endpoint::{Endpoint, Revision, WriteFailure};
use settee_replicator::remote::RemoteDb;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::error::{file_error, Error, Result};
use crate::file::{self, Line};
use crate::progress;

/// What to restore, and where.
#[derive(Clone, Debug)]
pub struct RestoreOptions {
    /// The server (credentials may be in it).
    pub url: String,
    /// The database, made when it does not exist.
    pub db: String,
    /// The backup file; standard input when `None`.
    pub input: Option<PathBuf>,
    /// Lines written at once.
    pub parallelism: usize,
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RestoreSummary {
    /// Revisions sent.
    pub revisions: u64,
    /// Revisions the database refused (a validation function, say), the first hundred.
    pub refused: Vec<WriteFailure>,
    /// How many were refused in all.
    pub refused_count: u64,
}

/// Refusals kept to report.
const REFUSALS_KEPT: usize = 100;

/// One line read, with how far into the input it ends.
type ReadLine = std::io::Result<(u64, String, u64)>;

/// Restores a backup into a database.
pub async fn restore(opts: &RestoreOptions) -> Result<RestoreSummary> {
    let (reader, size, name): (Box<dyn Read + Send>, u64, String) = match &opts.input {
        Some(path) => {
            let f = std::fs::File::open(path).map_err(file_error(path))?;
            let size = f.metadata().map_err(file_error(path))?.len();
            (Box::new(f), size, path.display().to_string())
        }
        None => (Box::new(std::io::stdin()), 0, "standard input".into()),
    };
    let db = Arc::new(crate::open(&opts.url, &opts.db)?);
    db.create(&Map::new()).await?;
    let bar = progress::bar(size, "restore", true);
    let mut lines = read_lines(reader, opts.parallelism.max(1) * 2);
    let mut writes: JoinSet<Result<(u64, Vec<WriteFailure>)>> = JoinSet::new();
    let mut summary = RestoreSummary::default();
    while let Some(read) = lines.recv().await {
        let (number, text, at) = read.map_err(|source| Error::File {
            path: name.clone(),
            source,
        })?;
        let Line::Docs(docs) = file::parse_line(number, &text)? else {
            continue;
        };
        let revisions = docs.into_iter().map(revision).collect::<Result<Vec<_>>>()?;
        while writes.len() >= opts.parallelism.max(1) {
            finish(&mut writes, &mut summary).await?;
        }
        let db = db.clone();
        writes.spawn(async move { write(&db, revisions).await });
        bar.set_position(at);
    }
    while !writes.is_empty() {
        finish(&mut writes, &mut summary).await?;
    }
    bar.finish_and_clear();
    Ok(summary)
}

/// A revision of a backup line, its attachments' types named as servers name them.
fn revision(raw: Box<RawValue>) -> Result<Revision> {
    let raw = match file::with_couchdb_type_names(raw.get()) {
        Some(json) => RawValue::from_string(json).map_err(|e| Error::Format(e.to_string()))?,
        None => raw,
    };
    Ok(Revision::new(raw)?)
}

/// Writes one line's revisions; how many, and those refused.
async fn write(db: &RemoteDb, revisions: Vec<Revision>) -> Result<(u64, Vec<WriteFailure>)> {
    let count = revisions.len() as u64;
    Ok((count, db.write(revisions).await?))
}

/// Waits for one write and counts what it did.
async fn finish(
    writes: &mut JoinSet<Result<(u64, Vec<WriteFailure>)>>,
    summary: &mut RestoreSummary,
) -> Result<()> {
    let Some(done) = writes.join_next().await else {
        return Ok(());
    };
    let (count, refused) = done.map_err(|e| Error::Usage(format!("a write stopped: {e}")))??;
    summary.revisions += count;
    summary.refused_count += refused.len() as u64;
    let room = REFUSALS_KEPT.saturating_sub(summary.refused.len());
    summary.refused.extend(refused.into_iter().take(room));
    Ok(())
}

/// Reads `reader` line by line on a thread of its own (a slow pipe never holds up the
/// writes in flight), at most `ahead` lines ahead of their use.
fn read_lines(reader: Box<dyn Read + Send>, ahead: usize) -> mpsc::Receiver<ReadLine> {
    let (tx, rx) = mpsc::channel(ahead);
    std::thread::spawn(move || {
        let mut reader = BufReader::with_capacity(1 << 20, reader);
        let (mut number, mut at) = (0u64, 0u64);
        loop {
            let mut text = String::new();
            let read = reader.read_line(&mut text);
            let item = match read {
                Ok(0) => return,
                Ok(n) => {
                    number += 1;
                    at += n as u64;
                    Ok((number, text, at))
                }
                Err(e) => Err(e),
            };
            let failed = item.is_err();
            if tx.blocking_send(item).is_err() || failed {
                return;
            }
        }
    });
    rx
}
