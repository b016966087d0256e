//! The indexes of every open database, and the updates that bring them up to date.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use settee_db::{Database, DbSnapshot, DocOptions, WaitError};
use settee_js::{Limits, Pool};
use settee_queryserver::QueryServers;
use settee_store::{NoBlobs, StoreOptions};

use crate::ddoc::DesignDoc;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::indexer;
use crate::native::NativeLanguages;
use crate::reduce::{Runner, ViewReducer};

/// How views run.
#[derive(Clone)]
pub struct ViewsConfig {
    /// JavaScript engines mapping in parallel (one per core is right).
    pub workers: usize,
    /// Time and memory limits of every JavaScript call.
    pub limits: Limits,
    /// CouchDB's `[query_server_config] reduce_limit`.
    pub reduce_limit: bool,
    /// Options for index files (their node cache is shared with the databases').
    pub store: StoreOptions,
    /// External query servers, for design documents in other languages.
    pub servers: Arc<QueryServers>,
    /// Languages mapped natively (Mango's `query`).
    pub natives: NativeLanguages,
}

/// The open indexes of one database, kept with the database so they close with it.
#[derive(Default)]
struct DbIndexes {
    open: Mutex<HashMap<String, Arc<Index>>>,
}

/// Views for the whole server.
pub struct Views {
    pool: Arc<Pool>,
    servers: Arc<QueryServers>,
    natives: Arc<NativeLanguages>,
    store: StoreOptions,
    reduce_limit: AtomicBool,
}

impl Views {
    /// Starts the engine pool.
    pub fn new(config: ViewsConfig) -> Views {
        Views {
            pool: Arc::new(Pool::new(config.workers, config.limits)),
            servers: config.servers,
            natives: Arc::new(config.natives),
            store: config.store,
            reduce_limit: AtomicBool::new(config.reduce_limit),
        }
    }

    /// The external query servers.
    pub fn servers(&self) -> &Arc<QueryServers> {
        &self.servers
    }

    /// The JavaScript engine pool (also used by filters and validation functions).
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Changes CouchDB's `reduce_limit` for indexes opened from now on.
    pub fn set_reduce_limit(&self, on: bool) {
        self.reduce_limit.store(on, Ordering::Relaxed);
    }

    /// Reads design document `_design/{name}` from a database snapshot.
    pub fn design_doc(snap: &DbSnapshot, name: &str) -> Result<DesignDoc> {
        let id = format!("_design/{name}");
        let body = snap.open_doc(&id, None, &DocOptions::default())?;
        let doc: serde_json::Value = settee_json::deep::from_slice(&body)
            .map_err(|_| Error::Corrupted("stored design document"))?;
        DesignDoc::parse(&id, &doc, snap.partitioned())
    }

    /// The index for `ddoc`'s views in `db`, opened on first use and shared by every design
    /// document with the same signature.
    pub fn index(&self, db: &Arc<Database>, ddoc: &DesignDoc) -> Result<Arc<Index>> {
        let runner = if ddoc.language == "javascript" || self.natives.contains_key(&ddoc.language) {
            let pool = self.pool.clone();
            Runner::Js(Arc::new(move || pool.limits()))
        } else if self.servers.has(&ddoc.language) {
            Runner::External {
                servers: self.servers.clone(),
                language: ddoc.language.clone(),
            }
        } else {
            return Err(Error::UnknownLanguage(ddoc.language.clone()));
        };
        let indexes = db.extension(DbIndexes::default);
        let mut open = indexes.open.lock().expect("indexes lock");
        let signature = ddoc.signature();
        if let Some(index) = open.get(&signature) {
            return Ok(index.clone());
        }
        // A handle taken before its database was deleted opens no index: the directory is on
        // its way out, and its name may already be another database's.
        if db.is_deleted() {
            return Err(Error::Db(settee_db::Error::NoDatabase));
        }
        let reduce_limit = self.reduce_limit.load(Ordering::Relaxed);
        let reducers = ddoc
            .views
            .iter()
            .map(|v| {
                v.reduce.clone().map(|r| {
                    Arc::new(ViewReducer::new(
                        r,
                        v.collation,
                        runner.clone(),
                        reduce_limit,
                    ))
                })
            })
            .collect();
        let index = Arc::new(Index::open(
            &db.dir().join("views"),
            ddoc.clone(),
            db.q(),
            reducers,
            &self.store,
        )?);
        open.insert(signature, index.clone());
        Ok(index)
    }

    /// The indexes of `db` opened so far.
    pub fn open_indexes(db: &Database) -> Vec<Arc<Index>> {
        db.extension(DbIndexes::default)
            .open
            .lock()
            .expect("indexes lock")
            .values()
            .cloned()
            .collect()
    }

    /// Starts an update of `index` unless one is running; returns the update's number.
    pub fn refresh_in_background(&self, db: &Arc<Database>, index: &Arc<Index>) -> u64 {
        let (db, ix, pool, servers, natives) = (
            db.clone(),
            index.clone(),
            self.pool.clone(),
            self.servers.clone(),
            self.natives.clone(),
        );
        index.updates.start("settee-indexer", move || {
            let mappers = indexer::Mappers {
                pool: &pool,
                servers: &servers,
                natives: &natives,
            };
            let result = indexer::update(&ix, &db, &mappers);
            if let Err(e) = &result {
                let ddoc = &ix.ddoc().id;
                tracing::warn!(db = db.name(), ddoc, "index update failed: {e}");
            }
            result
        })
    }

    /// After writes to `db`: starts an update of each of its open indexes that is not
    /// already updating, so indexes keep up in the background (CouchDB's `ken`).
    pub fn kick(&self, db: &Arc<Database>) {
        let Some(indexes) = db.existing_extension::<DbIndexes>() else {
            return;
        };
        let open: Vec<Arc<Index>> = indexes
            .open
            .lock()
            .expect("indexes lock")
            .values()
            .cloned()
            .collect();
        for index in open {
            self.refresh_in_background(db, &index);
        }
    }

    /// Waits until `index` holds every change `db` had when this was called, sharing the
    /// update with every other client waiting for the same index.
    pub async fn refresh(&self, db: &Arc<Database>, index: &Arc<Index>) -> Result<()> {
        let snap = db.snapshot();
        let (target, purged) = (snap.seq()?, snap.purge_seq()?.total());
        // Purges change no sequence: an index is current when it has both.
        let current = || {
            let meta = index.meta()?;
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

    /// Compacts an index in the background; false if a compaction is already running.
    pub fn compact(&self, db: &Arc<Database>, index: &Arc<Index>) -> bool {
        use std::sync::atomic::Ordering;
        if index.compacting.swap(true, Ordering::SeqCst) {
            return false;
        }
        let task = db
            .tasks()
            .start_for("view_compaction", db.name(), Some(&index.ddoc().id), 0);
        let index = index.clone();
        std::thread::spawn(move || {
            if let Err(e) = index
                .store()
                .compact(Arc::new(NoBlobs), &|done, total| task.update(done, total))
            {
                tracing::warn!("view compaction failed: {e}");
            }
            index.compacting.store(false, Ordering::SeqCst);
        });
        true
    }

    /// Deletes the index files of `db` that no design document in `keep` (signatures) uses.
    pub fn cleanup(db: &Database, keep: &HashSet<String>) -> Result<usize> {
        let indexes = db.extension(DbIndexes::default);
        let mut open = indexes.open.lock().expect("indexes lock");
        open.retain(|sig, _| keep.contains(sig));
        let mut removed = 0;
        let Ok(dir) = std::fs::read_dir(db.dir().join("views")) else {
            return Ok(0);
        };
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(sig) = name.strip_suffix(".view") else {
                continue;
            };
            if !keep.contains(sig) {
                std::fs::remove_file(entry.path()).map_err(|source| Error::Io {
                    op: "remove an unused index",
                    source,
                })?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}
