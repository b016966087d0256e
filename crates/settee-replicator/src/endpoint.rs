//! One side of a replication. [`Endpoint`] is what the replication protocol asks of a
//! database: the same job code runs against a database of this node
//! ([`crate::local::LocalDb`]) and one on any CouchDB-compatible server
//! ([`crate::remote::RemoteDb`]), in either role.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// What a replication reads of a database before it starts.
#[derive(Clone, Debug)]
pub struct DbInfo {
    /// The database's current update sequence (opaque).
    pub update_seq: Value,
    /// Changes to the database since it was made; restarts of the server do not move it.
    pub instance_start_time: String,
}

/// One row of a changes feed read with `style=all_docs`.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// Its sequence (opaque: given back to the source as `since`).
    pub seq: Value,
    /// The document id.
    pub id: String,
    /// The leaf revisions listed.
    pub revs: Vec<String>,
    /// Whether the winning revision is a deletion.
    pub deleted: bool,
}

/// A page of changes, and where the feed got to.
#[derive(Clone, Debug, Default)]
pub struct ChangesPage {
    /// The rows.
    pub rows: Vec<Change>,
    /// The feed's `last_seq`.
    pub last_seq: Value,
    /// Changes the source still holds after `last_seq`, when it says.
    pub pending: Option<u64>,
}

/// Which documents a replication copies.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Filter {
    /// All of them.
    #[default]
    All,
    /// Those with these ids (`doc_ids`).
    DocIds(Vec<String>),
    /// Those a Mango selector matches (`selector`).
    Selector(Value),
    /// Those a design document's filter function passes (`filter`, `query_params`).
    Design {
        /// `ddoc/name`.
        name: String,
        /// The parameters the function sees as `req.query`.
        query_params: Map<String, Value>,
    },
}

/// How to read one page of changes.
#[derive(Clone, Debug)]
pub struct ChangesRequest<'a> {
    /// Read after this sequence.
    pub since: &'a Value,
    /// Most rows.
    pub limit: u64,
    /// Which documents.
    pub filter: &'a Filter,
    /// Wait this long for a change when none is there (continuous replications).
    pub wait: Option<Duration>,
    /// List only winning revisions (`winning_revs_only`).
    pub winning_only: bool,
}

/// What a target lacks of one document.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Missing {
    /// Revisions it does not have.
    pub missing: Vec<String>,
    /// Its leaves that may be ancestors of those: attachments they hold need not be sent.
    pub possible_ancestors: Vec<String>,
}

/// Revisions to read of one document.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    /// The document id.
    pub id: String,
    /// The revisions.
    pub revs: Vec<String>,
    /// Revisions the target has: attachments unchanged since them come as stubs.
    pub atts_since: Vec<String>,
}

/// A revision as replication moves it: its JSON as the source rendered it (with
/// `_revisions`, attachments inline), kept unparsed between the two endpoints.
#[derive(Clone, Debug)]
pub struct Revision {
    /// The document id.
    pub id: String,
    /// The revision's JSON.
    pub json: Box<RawValue>,
    /// Whether it carries attachment bytes (`data`), not only stubs.
    pub att_data: bool,
}

/// The members of a revision replication looks at; the rest is skipped unread.
#[derive(Deserialize)]
struct Peek {
    #[serde(rename = "_id")]
    id: String,
    #[serde(rename = "_attachments", default)]
    atts: Option<BTreeMap<String, AttPeek>>,
}

#[derive(Deserialize)]
struct AttPeek {
    #[serde(default)]
    data: Option<serde::de::IgnoredAny>,
}

impl Revision {
    /// A revision from its JSON.
    pub fn new(json: Box<RawValue>) -> Result<Revision> {
        let peek: Peek = serde_json::from_str(json.get())
            .map_err(|_| Error::Garbage("a revision without an id".into()))?;
        let att_data = peek
            .atts
            .is_some_and(|atts| atts.values().any(|a| a.data.is_some()));
        Ok(Revision {
            id: peek.id,
            json,
            att_data,
        })
    }
}

/// A revision the target did not take.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteFailure {
    /// The document id.
    pub id: String,
    /// CouchDB's error name (`forbidden`, `unauthorized`, ...).
    pub error: String,
    /// Why.
    pub reason: String,
}

/// A database a replication reads from or writes to.
#[async_trait::async_trait]
pub trait Endpoint: Send + Sync {
    /// How the database is shown in tasks and logs (a URL without its credentials, or a
    /// local database's name).
    fn display(&self) -> String;

    /// The database's information; fails with `DbNotFound` when it does not exist.
    async fn info(&self) -> Result<DbInfo>;

    /// Makes the database, with `params` as `create_target_params` gives them (`q`,
    /// `partitioned`); a database that exists already is no error.
    async fn create(&self, params: &Map<String, Value>) -> Result<()>;

    /// A local (non-replicated) document, `None` when there is none.
    async fn get_local(&self, id: &str) -> Result<Option<Value>>;

    /// Writes a local document (a replication log), replacing what is there.
    async fn put_local(&self, id: &str, doc: &Value) -> Result<()>;

    /// One page of the changes feed, `style=all_docs`.
    async fn changes(&self, req: ChangesRequest<'_>) -> Result<ChangesPage>;

    /// For each document, the revisions listed that the database lacks.
    async fn revs_diff(
        &self,
        revs: BTreeMap<String, Vec<String>>,
    ) -> Result<BTreeMap<String, Missing>>;

    /// The revisions asked for, each as JSON with `_revisions` and its attachments inline
    /// (base64 `data`, or stubs for those unchanged since `atts_since`). Revisions the
    /// database no longer has are left out.
    async fn fetch(&self, wanted: Vec<Wanted>) -> Result<Vec<Revision>>;

    /// Writes replicated revisions (`new_edits=false`); the answer lists those refused.
    async fn write(&self, docs: Vec<Revision>) -> Result<Vec<WriteFailure>>;

    /// Makes what was written durable (every write of Settee is; older CouchDBs need it).
    async fn ensure_full_commit(&self) -> Result<()>;

    /// The source of a design document's filter function (for the replication id).
    async fn filter_code(&self, ddoc: &str, name: &str) -> Result<String>;
}
