//! The search indexes of every open database, and the updates that bring them up to date.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use settee_db::{Database, WaitError};
use settee_js::Pool;

use crate::analyzer::Flavor;
use crate::def::{member, IndexDef};
use crate::error::{Error, Result};
use crate::index::{Indexed, SearchIndex};
use crate::indexer;

/// The open search indexes of one database, kept with the database so they close with it.
#[derive(Default)]
struct DbSearch {
    open: Mutex<HashMap<(Flavor, String), Arc<SearchIndex>>>,
    /// Indexes by design document, index name and flavor, with the design document's
    /// sequence when it was read: a query finds its index without reading the design
    /// document again until it changes.
    named: Mutex<HashMap<NameKey, (u64, Arc<SearchIndex>)>>,
}

/// A design document id, an index name and the flavor.
type NameKey = (String, String, Flavor);

/// What indexes a document natively for an index with a native definition (Mango's text
/// indexes): given the definition and the document, the fields to index. Registered by the
/// layer that knows the definition's meaning, so search never depends on it.
pub type NativeIndexer = Arc<dyn Fn(&Value, &Value) -> Vec<Indexed> + Send + Sync>;

/// Search indexes for the whole server; index functions run on the views' engine pool.
pub struct Search {
    pool: Arc<Pool>,
    native: Option<NativeIndexer>,
}

impl Search {
    /// Search over `pool`'s JavaScript engines.
    pub fn new(pool: Arc<Pool>) -> Search {
        Search { pool, native: None }
    }

    /// The same, indexing native definitions with `native`.
    pub fn with_native(mut self, native: NativeIndexer) -> Search {
        self.native = Some(native);
        self
    }

    /// The index for `def` in `db`, opened on first use and shared by every design document
    /// with the same signature.
    pub fn index(&self, db: &Arc<Database>, def: IndexDef) -> Result<Arc<SearchIndex>> {
        let indexes = db.extension(DbSearch::default);
        let mut open = indexes.open.lock().expect("search indexes lock");
        let key = (def.flavor, def.signature().to_string());
        if let Some(index) = open.get(&key) {
            return Ok(index.clone());
        }
        if db.is_deleted() {
            return Err(Error::Db(settee_db::Error::NoDatabase));
        }
        let root = db.dir().join(member(def.flavor));
        let index = Arc::new(SearchIndex::open(&root, def, db.q())?);
        open.insert(key, index.clone());
        Ok(index)
    }

    /// The index named `name` in design document `ddoc_id`, if it was looked up while the
    /// design document was at sequence `seq`.
    pub fn named(
        &self,
        db: &Database,
        ddoc_id: &str,
        seq: u64,
        name: &str,
        flavor: Flavor,
    ) -> Option<Arc<SearchIndex>> {
        let d = db.existing_extension::<DbSearch>()?;
        let named = d.named.lock().expect("search names lock");
        let key = (ddoc_id.to_string(), name.to_string(), flavor);
        named
            .get(&key)
            .filter(|(s, _)| *s == seq)
            .map(|(_, ix)| ix.clone())
    }

    /// Remembers that index `name` of `ddoc_id` at sequence `seq` is `index`.
    pub fn remember(&self, db: &Database, seq: u64, index: &Arc<SearchIndex>) {
        let d = db.extension(DbSearch::default);
        let def = index.def();
        let key = (def.ddoc_id.clone(), def.name.clone(), def.flavor);
        d.named
            .lock()
            .expect("search names lock")
            .insert(key, (seq, index.clone()));
    }

    /// The search indexes of `db` opened so far.
    pub fn open_indexes(db: &Database) -> Vec<Arc<SearchIndex>> {
        db.existing_extension::<DbSearch>()
            .map(|d| {
                d.open
                    .lock()
                    .expect("search indexes lock")
                    .values()
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Starts an update of `index` unless one is running; returns the update's number.
    pub fn refresh_in_background(&self, db: &Arc<Database>, index: &Arc<SearchIndex>) -> u64 {
        let (db, ix, pool) = (db.clone(), index.clone(), self.pool.clone());
        let native = self.native.clone();
        index.updates.start("settee-search", move || {
            let result = indexer::update(&ix, &db, &pool, native.as_ref());
            if let Err(e) = &result {
                let ddoc = &ix.def().ddoc_id;
                tracing::warn!(db = db.name(), ddoc, "search index update failed: {e}");
            }
            result
        })
    }

    /// After writes to `db`: starts an update of each of its open search indexes.
    pub fn kick(&self, db: &Arc<Database>) {
        for index in Search::open_indexes(db) {
            self.refresh_in_background(db, &index);
        }
    }

    /// Waits until `index` holds every change `db` had when this was called, sharing the
    /// update with every other client waiting for the same index.
    pub async fn refresh(&self, db: &Arc<Database>, index: &Arc<SearchIndex>) -> Result<()> {
        let snap = db.snapshot();
        let (target, purged) = (snap.seq()?, snap.purge_seq()?.total());
        // Purges change no sequence: an index is current when it has both.
        let current = || {
            let meta = index.meta();
            Ok(meta.seq.covers(&target) && meta.purge_seq >= purged)
        };
        let start = || self.refresh_in_background(db, index);
        index
            .updates
            .wait(current, start)
            .await
            .map_err(|e| match e {
                WaitError::Failed(e) => Error::Shared(e),
                WaitError::Check(e) => e,
            })
    }

    /// Deletes the `flavor` index directories of `db` whose signature is not in `keep`,
    /// closing the indexes open on them first (an update running on one stops at its next
    /// batch and is waited for).
    pub fn cleanup(db: &Database, flavor: Flavor, keep: &HashSet<String>) -> Result<usize> {
        let mut closing = Vec::new();
        if let Some(d) = db.existing_extension::<DbSearch>() {
            let mut open = d.open.lock().expect("search indexes lock");
            open.retain(|(f, sig), ix| {
                let stays = *f != flavor || keep.contains(sig);
                if !stays {
                    closing.push(ix.clone());
                }
                stays
            });
            let mut named = d.named.lock().expect("search names lock");
            named.retain(|_, (_, ix)| ix.flavor() != flavor || keep.contains(ix.def().signature()));
        }
        for ix in &closing {
            ix.close();
            let waited = std::time::Instant::now();
            while ix.updating() && waited.elapsed() < std::time::Duration::from_secs(30) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        let Ok(dir) = std::fs::read_dir(db.dir().join(member(flavor))) else {
            return Ok(0);
        };
        let mut removed = 0;
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !keep.contains(&name) {
                std::fs::remove_dir_all(entry.path()).map_err(|source| Error::Io {
                    op: "remove an unused search index",
                    source,
                })?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}
