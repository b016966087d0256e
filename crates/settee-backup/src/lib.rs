//! `settee backup` and `settee restore`: a database of any CouchDB-compatible server to a
//! newline-delimited JSON file and back, with every revision that is a leaf (conflicts and
//! deletions included), its revision history and its attachments.
//!
//! The file is the one `@cloudant/couchbackup` writes in its full mode with attachments: a
//! first line of metadata, then one JSON array of documents per line. Either tool restores
//! what the other wrote. Documents are read and written through the replicator's remote
//! endpoint, so every request is retried as a replication's would be, attachments travel
//! as replication moves them, and restored revisions keep their ids (`new_edits=false`).
//!
//! Both directions stream: a backup holds one page of the changes feed at a time and a
//! restore a few lines, whatever the database's size. A backup written to a file keeps a
//! log beside it ([`file::log_path`]) of how far it got, from which `--resume` goes on.

#![deny(missing_docs)]

mod backup;
mod error;
pub mod file;
mod progress;
mod restore;

pub use backup::{backup, BackupOptions, BackupSummary};
pub use error::{Error, Result};
pub use restore::{restore, RestoreOptions, RestoreSummary};

use settee_replicator::remote::RemoteDb;
use settee_replicator::spec::{EndpointSpec, Settings};

/// Characters escaped in a database name inside a URL: all but letters, digits, `_`, `-`.
const DB_NAME_ESCAPES: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'_').remove(b'-');

/// The database `db` of the server at `url` (credentials may be in the URL).
fn open(url: &str, db: &str) -> Result<RemoteDb> {
    if db.is_empty() {
        return Err(Error::Usage("a database name is needed (--db)".into()));
    }
    let name = percent_encoding::utf8_percent_encode(db, DB_NAME_ESCAPES);
    let spec = EndpointSpec {
        url: format!("{}/{name}", url.trim_end_matches('/')),
        headers: Default::default(),
        basic: None,
    };
    Ok(RemoteDb::new(&spec, &Settings::default())?)
}
