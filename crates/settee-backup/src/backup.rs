//! Reading a database into a backup file: the changes feed page by page (`style=all_docs`,
//! so every leaf revision, deleted or not), each page's revisions fetched with their
//! history and attachments and written as one line.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use settee_replicator::endpoint::{ChangesRequest, Endpoint, Filter, Revision, Wanted};

use crate::error::{file_error, Error, Result};
use crate::file::{self, Checkpoint, LogState};
use crate::progress;

/// What to back up, and where.
#[derive(Clone, Debug)]
pub struct BackupOptions {
    /// The server (credentials may be in it).
    pub url: String,
    /// The database.
    pub db: String,
    /// The backup file; standard output when `None` (a backup there cannot be resumed).
    pub output: Option<PathBuf>,
    /// Go on from where an interrupted backup to `output` stopped.
    pub resume: bool,
    /// Changes read (documents backed up) per line.
    pub batch_size: usize,
}

/// What a backup did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BackupSummary {
    /// Revisions written (those of an earlier run that was resumed included).
    pub revisions: u64,
    /// Bytes of the backup.
    pub bytes: u64,
    /// Whether there was nothing to do: the backup resumed had finished.
    pub already_complete: bool,
}

/// Where the lines go: a file with its resume log, or standard output.
enum Sink {
    File {
        file: File,
        path: PathBuf,
        log: File,
        log_path: PathBuf,
    },
    Stdout(std::io::Stdout),
}

impl Sink {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            Sink::File { file, path, .. } => file.write_all(bytes).map_err(file_error(path)),
            Sink::Stdout(out) => out
                .write_all(bytes)
                .map_err(file_error(Path::new("standard output"))),
        }
    }

    /// Makes everything written so far durable, then logs `line` (a file's only).
    fn checkpoint(&mut self, line: &str) -> Result<()> {
        match self {
            Sink::File {
                file,
                path,
                log,
                log_path,
            } => {
                file.sync_data().map_err(file_error(path))?;
                log.write_all(line.as_bytes())
                    .and_then(|()| log.sync_data())
                    .map_err(file_error(log_path))
            }
            Sink::Stdout(out) => out
                .flush()
                .map_err(file_error(Path::new("standard output"))),
        }
    }
}

/// Backs up a database. Fails without writing anything when the database does not exist.
pub async fn backup(opts: &BackupOptions) -> Result<BackupSummary> {
    if opts.batch_size == 0 {
        return Err(Error::Usage("the batch size must be at least 1".into()));
    }
    if opts.resume && opts.output.is_none() {
        return Err(Error::Usage(
            "only a backup to a file (--output) can be resumed".into(),
        ));
    }
    let db = crate::open(&opts.url, &opts.db)?;
    let info = db.info().await?;
    let (mut sink, start) = match (&opts.output, opts.resume) {
        (None, _) => {
            let mut sink = Sink::Stdout(std::io::stdout());
            let meta = file::metadata_line();
            sink.write(meta.as_bytes())?;
            (sink, fresh(meta.len() as u64))
        }
        (Some(path), false) => create(path)?,
        (Some(path), true) => match reopen(path)? {
            Some(found) => found,
            None => {
                return Ok(BackupSummary {
                    already_complete: true,
                    ..BackupSummary::default()
                })
            }
        },
    };
    let total = progress::seq_number(&info.update_seq).unwrap_or(0);
    let bar = progress::bar(total, "backup", false);
    let at = copy(&db, &mut sink, start, opts.batch_size, &bar).await?;
    sink.checkpoint(file::COMPLETE_LINE)?;
    bar.finish_and_clear();
    Ok(BackupSummary {
        revisions: at.revisions,
        bytes: at.offset,
        already_complete: false,
    })
}

/// Where a new backup starts: the feed's beginning, after a metadata line of `len` bytes.
fn fresh(len: u64) -> Checkpoint {
    Checkpoint {
        seq: json!(0),
        offset: len,
        revisions: 0,
    }
}

/// A new backup file (replacing one there) with its metadata, and a new log.
fn create(path: &Path) -> Result<(Sink, Checkpoint)> {
    let mut file = File::create(path).map_err(file_error(path))?;
    let meta = file::metadata_line();
    file.write_all(meta.as_bytes()).map_err(file_error(path))?;
    let log_path = file::log_path(path);
    let log = File::create(&log_path).map_err(file_error(&log_path))?;
    let sink = Sink::File {
        file,
        path: path.to_path_buf(),
        log,
        log_path,
    };
    Ok((sink, fresh(meta.len() as u64)))
}

/// An interrupted backup file, cut back to its last checkpoint, and that checkpoint;
/// `None` when the backup had finished.
fn reopen(path: &Path) -> Result<Option<(Sink, Checkpoint)>> {
    let log_path = file::log_path(path);
    let text = std::fs::read_to_string(&log_path).map_err(file_error(&log_path))?;
    let LogState { last, complete } = file::read_log(&text)?;
    if complete {
        return Ok(None);
    }
    let mut file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(file_error(path))?;
    let start = match last {
        Some(c) => {
            let len = file.metadata().map_err(file_error(path))?.len();
            if len < c.offset {
                return Err(Error::Format(format!(
                    "{} is shorter than its log says: it cannot be resumed",
                    path.display()
                )));
            }
            file.set_len(c.offset).map_err(file_error(path))?;
            file.seek(SeekFrom::Start(c.offset))
                .map_err(file_error(path))?;
            c
        }
        None => {
            // Nothing was logged: the backup starts again.
            let meta = file::metadata_line();
            file.set_len(0).map_err(file_error(path))?;
            file.write_all(meta.as_bytes()).map_err(file_error(path))?;
            fresh(meta.len() as u64)
        }
    };
    // A last log line cut short is cut off, so the next line stands alone.
    let whole = text.rfind('\n').map_or(0, |end| end + 1) as u64;
    let mut log = OpenOptions::new()
        .write(true)
        .open(&log_path)
        .map_err(file_error(&log_path))?;
    log.set_len(whole)
        .and_then(|()| log.seek(SeekFrom::Start(whole)))
        .map_err(file_error(&log_path))?;
    let sink = Sink::File {
        file,
        path: path.to_path_buf(),
        log,
        log_path,
    };
    Ok(Some((sink, start)))
}

/// Copies the changes after `at.seq`, one line per page, until the feed is read.
async fn copy(
    db: &impl Endpoint,
    sink: &mut Sink,
    mut at: Checkpoint,
    batch: usize,
    bar: &indicatif::ProgressBar,
) -> Result<Checkpoint> {
    bar.set_position(progress::seq_number(&at.seq).unwrap_or(0));
    loop {
        let page = db
            .changes(ChangesRequest {
                since: &at.seq,
                limit: batch as u64,
                filter: &Filter::All,
                wait: None,
                winning_only: false,
            })
            .await?;
        let last_page = page.rows.len() < batch;
        if !page.rows.is_empty() {
            let wanted = page
                .rows
                .into_iter()
                .map(|c| Wanted {
                    id: c.id,
                    revs: c.revs,
                    atts_since: Vec::new(),
                })
                .collect();
            let revisions = db.fetch(wanted).await?;
            let line = batch_line(&revisions);
            sink.write(&line)?;
            at.offset += line.len() as u64;
            at.revisions += revisions.len() as u64;
        }
        at.seq = page.last_seq;
        sink.checkpoint(&at.line())?;
        bar.set_position(progress::seq_number(&at.seq).unwrap_or(bar.position()));
        bar.set_message(format!("{} revisions", at.revisions));
        if last_page || at.seq == Value::Null {
            return Ok(at);
        }
    }
}

/// One line of the backup: the revisions as a JSON array.
fn batch_line(revisions: &[Revision]) -> Vec<u8> {
    let size: usize = revisions.iter().map(|r| r.json.get().len() + 1).sum();
    let mut line = Vec::with_capacity(size + 2);
    line.push(b'[');
    for (n, r) in revisions.iter().enumerate() {
        if n > 0 {
            line.push(b',');
        }
        match file::with_both_type_names(r.json.get()) {
            Some(json) => line.extend_from_slice(json.as_bytes()),
            None => line.extend_from_slice(r.json.get().as_bytes()),
        }
    }
    line.extend_from_slice(b"]\n");
    line
}
