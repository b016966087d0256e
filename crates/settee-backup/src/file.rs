//! The backup file and its resume log.
//!
//! A backup file's first line is its metadata (`name`, `version`, `mode`, `attachments`);
//! each later line is a JSON array of document revisions, each with `_revisions` and its
//! attachments inline. `couchbackup` also writes `{"marker": "@cloudant/couchbackup:resume"}`
//! lines where it resumed; they are skipped.
//!
//! The log, a file beside the backup, gets one line per batch once the batch is on disk:
//! the changes-feed sequence read up to, the size the backup file had then, and the
//! revisions written so far; and a last `{"complete": true}` line. A resumed backup cuts the
//! file back to the last size logged and reads the feed on from that sequence.

use std::path::{Path, PathBuf};

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::error::{Error, Result};

/// `couchbackup`'s marker line where a backup was resumed.
const RESUME_MARKER: &str = "@cloudant/couchbackup:resume";

/// The first line of a backup this tool writes (ending in a newline).
pub fn metadata_line() -> String {
    let meta = json!({
        "name": "settee",
        "version": env!("CARGO_PKG_VERSION"),
        "mode": "full",
        "attachments": true,
    });
    format!("{meta}\n")
}

/// One line of a backup file, read.
#[derive(Debug)]
pub enum Line {
    /// The metadata of the first line.
    Metadata(Value),
    /// A line with nothing to restore (blank, or a resume marker).
    Nothing,
    /// Document revisions.
    Docs(Vec<Box<RawValue>>),
}

/// Reads line `number` (counted from 1) of a backup file, as `couchbackup` reads it: an
/// array of documents, metadata on the first line, or nothing to restore.
pub fn parse_line(number: u64, text: &str) -> Result<Line> {
    let text = text.trim_end_matches(['\n', '\r']);
    if text.trim().is_empty() {
        return Ok(Line::Nothing);
    }
    let bad = |why: &str| Error::Format(format!("line {number} of the backup {why}"));
    if text.starts_with('[') {
        let docs: Vec<Box<RawValue>> =
            serde_json::from_str(text).map_err(|e| bad(&format!("is not JSON: {e}")))?;
        return Ok(Line::Docs(docs));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| bad(&format!("is not JSON: {e}")))?;
    let has = |k: &str| value.get(k).is_some_and(|v| !v.is_null());
    if number == 1 && has("name") && has("version") && has("mode") {
        if value["mode"] != "full" && value["mode"] != "shallow" {
            return Err(bad("names an unknown mode"));
        }
        return Ok(Line::Metadata(value));
    }
    if value.get("marker").and_then(Value::as_str) == Some(RESUME_MARKER) {
        return Ok(Line::Nothing);
    }
    Err(bad("is neither a list of documents nor metadata"))
}

/// `couchbackup` names an attachment's type `contentType` (and reads only that name back):
/// a revision as written to a backup carries both names, so either tool restores the type.
pub fn with_both_type_names(json: &str) -> Option<String> {
    rename_types(json, "content_type", "contentType", false)
}

/// A revision from a backup as servers take it: `couchbackup`'s `contentType` becomes
/// `content_type` (kept when both are there). `None` when there is nothing to change.
pub fn with_couchdb_type_names(json: &str) -> Option<String> {
    rename_types(json, "contentType", "content_type", true)
}

/// Copies (or, with `remove`, moves) each attachment's `from` member to `to` where `to` is
/// missing; `None` when the revision has no such member.
fn rename_types(json: &str, from: &str, to: &str, remove: bool) -> Option<String> {
    if !json.contains(from) {
        return None;
    }
    let mut doc: Value = serde_json::from_str(json).ok()?;
    let atts = doc.get_mut("_attachments")?.as_object_mut()?;
    let mut changed = false;
    for att in atts.values_mut().filter_map(Value::as_object_mut) {
        let value = if remove {
            att.remove(from)
        } else {
            att.get(from).cloned()
        };
        if let Some(value) = value {
            att.entry(to).or_insert(value);
            changed = true;
        }
    }
    changed.then(|| doc.to_string())
}

/// Where the resume log of the backup file `output` is kept.
pub fn log_path(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_os_string();
    name.push(".log");
    PathBuf::from(name)
}

/// How far a backup got: what one line of its log says.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// The changes-feed sequence every logged batch was read up to.
    pub seq: Value,
    /// The size of the backup file after those batches.
    pub offset: u64,
    /// Revisions written so far.
    pub revisions: u64,
}

impl Checkpoint {
    /// The log line for this checkpoint (ending in a newline).
    pub fn line(&self) -> String {
        let line = json!({"seq": self.seq, "offset": self.offset, "revisions": self.revisions});
        format!("{line}\n")
    }
}

/// The log line that ends a finished backup.
pub const COMPLETE_LINE: &str = "{\"complete\":true}\n";

/// What a backup's log says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogState {
    /// The last checkpoint written whole, if any.
    pub last: Option<Checkpoint>,
    /// Whether the backup finished.
    pub complete: bool,
}

/// Reads a log's text; a last line cut short (the backup was stopped while writing it) is
/// ignored, as the batch it would have recorded is then not counted as written.
pub fn read_log(text: &str) -> Result<LogState> {
    let mut state = LogState::default();
    let whole = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    for (n, line) in whole.lines().enumerate() {
        let bad = || {
            Error::Format(format!(
                "line {} of the backup log is not understood",
                n + 1
            ))
        };
        let value: Value = serde_json::from_str(line).map_err(|_| bad())?;
        if value.get("complete") == Some(&Value::Bool(true)) {
            state.complete = true;
            continue;
        }
        let number = |k: &str| value.get(k).and_then(Value::as_u64).ok_or_else(bad);
        state.last = Some(Checkpoint {
            seq: value.get("seq").cloned().ok_or_else(bad)?,
            offset: number("offset")?,
            revisions: number("revisions")?,
        });
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_as_couchbackup_reads_them() {
        let meta = metadata_line();
        assert!(matches!(parse_line(1, &meta), Ok(Line::Metadata(m)) if m["attachments"] == true));
        let docs = parse_line(2, "[{\"_id\":\"a\",\"_rev\":\"1-x\"},{\"_id\":\"b\"}]\n").unwrap();
        assert!(matches!(docs, Line::Docs(d) if d.len() == 2));
        assert!(matches!(parse_line(3, "\n"), Ok(Line::Nothing)));
        let marker = "{\"marker\":\"@cloudant/couchbackup:resume\"}";
        assert!(matches!(parse_line(4, marker), Ok(Line::Nothing)));
        // Metadata anywhere but the first line, broken JSON, other objects: refused.
        assert!(parse_line(2, &meta).is_err());
        assert!(parse_line(2, "[{\"_id\":").is_err());
        assert!(parse_line(2, "{\"_id\":\"a\"}").is_err());
        assert!(parse_line(1, "{\"name\":\"x\",\"version\":\"1\",\"mode\":\"odd\"}").is_err());
    }

    #[test]
    fn the_log_gives_the_last_whole_checkpoint() {
        let a = Checkpoint {
            seq: json!("3-abc"),
            offset: 100,
            revisions: 3,
        };
        let b = Checkpoint {
            seq: json!(7),
            offset: 250,
            revisions: 9,
        };
        let text = format!("{}{}", a.line(), b.line());
        let state = read_log(&text).unwrap();
        assert_eq!(state.last.as_ref(), Some(&b));
        assert!(!state.complete);
        // A line cut short is not counted.
        let cut = format!("{}{}", a.line(), &b.line()[..10]);
        assert_eq!(read_log(&cut).unwrap().last, Some(a.clone()));
        let done = format!("{}{COMPLETE_LINE}", a.line());
        assert!(read_log(&done).unwrap().complete);
        assert_eq!(read_log("").unwrap(), LogState::default());
        assert!(read_log("nonsense\n").is_err());
    }

    #[test]
    fn attachment_types_carry_both_names() {
        let ours = r#"{"_id":"a","_attachments":{"x":{"content_type":"text/plain","data":""}}}"#;
        let both = with_both_type_names(ours).unwrap();
        let v: Value = serde_json::from_str(&both).unwrap();
        assert_eq!(v["_attachments"]["x"]["contentType"], "text/plain");
        assert_eq!(v["_attachments"]["x"]["content_type"], "text/plain");
        let back: Value = serde_json::from_str(&with_couchdb_type_names(&both).unwrap()).unwrap();
        assert_eq!(
            back["_attachments"]["x"],
            json!({"content_type": "text/plain", "data": ""})
        );
        let theirs = r#"{"_id":"a","_attachments":{"x":{"contentType":"image/png","data":""}}}"#;
        let fixed: Value = serde_json::from_str(&with_couchdb_type_names(theirs).unwrap()).unwrap();
        assert_eq!(
            fixed["_attachments"]["x"],
            json!({"content_type": "image/png", "data": ""})
        );
        assert_eq!(with_couchdb_type_names(r#"{"_id":"a"}"#), None);
        assert_eq!(with_both_type_names(r#"{"_id":"a","n":1}"#), None);
    }

    #[test]
    fn the_log_sits_beside_the_backup() {
        assert_eq!(
            log_path(Path::new("/tmp/db.ndjson")),
            PathBuf::from("/tmp/db.ndjson.log")
        );
    }
}
