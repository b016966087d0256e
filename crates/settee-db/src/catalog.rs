//! The databases of one data directory: names, creation, deletion, and a bounded set of open
//! databases (`[couchdb] max_dbs_open`), closed least-recently-used first and reopened on
//! demand, so tens of thousands of small databases need bounded memory and descriptors.
//!
//! Layout: `DIR/dbs/<name>/shard-<i>.settee`, with `/` in names written as `%2F`. A database
//! is built under a temporary name and renamed into place, so it exists whole or not at all;
//! deletion renames it into `DIR/trash` before removing it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use settee_store::{sync_dir, StoreOptions};

use crate::database::Database;
use crate::error::{Error, Result};
use crate::tasks::Tasks;

/// Names of system databases, exempt from the leading-letter rule.
pub const SYSTEM_DATABASES: [&str; 6] = [
    "_dbs",
    "_global_changes",
    "_metadata",
    "_nodes",
    "_replicator",
    "_users",
];

/// What happened to a database, for a listener of the whole catalog (`_db_updates`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DbEvent {
    /// It was created.
    Created,
    /// Documents were written or purged.
    Updated,
    /// It was deleted.
    Deleted,
}

/// Told of every database event, by database name; called on the writing thread, so it
/// must be quick.
pub type DbEvents = Arc<dyn Fn(&str, DbEvent) + Send + Sync>;

/// How databases are created and kept open.
#[derive(Clone)]
pub struct CatalogOptions {
    /// Default number of shards of a new database (`[cluster] q`).
    pub q: usize,
    /// Most databases kept open at once (`[couchdb] max_dbs_open`).
    pub max_dbs_open: usize,
    /// Options for every shard file (the node cache is shared through them).
    pub store: StoreOptions,
    /// Told when a database is created, written or deleted.
    pub events: Option<DbEvents>,
}

impl Default for CatalogOptions {
    fn default() -> CatalogOptions {
        CatalogOptions {
            q: 2,
            max_dbs_open: 500,
            store: StoreOptions::default(),
            events: None,
        }
    }
}

/// How one database is created.
#[derive(Clone, Debug, Default)]
pub struct Creation {
    /// Number of shards (the catalog's default when `None`).
    pub q: Option<usize>,
    /// Whether it is partitioned (`?partitioned=true`).
    pub partitioned: bool,
    /// Its security object (JSON text), on disk before the database is visible.
    pub security: Option<Vec<u8>>,
}

/// The databases of a data directory.
pub struct Catalog {
    root: PathBuf,
    trash: PathBuf,
    options: CatalogOptions,
    /// Open databases and when each was last used (a tick of `clock`).
    open: RwLock<HashMap<String, Opened>>,
    clock: AtomicU64,
    /// Whose turn it is to open, create, delete or close each name.
    turns: Turns,
    /// Background work of every database.
    tasks: Arc<Tasks>,
}

/// An open database and when it was last used.
struct Opened {
    db: Arc<Database>,
    used: AtomicU64,
}

/// The life of a name: absent, or present on disk and then perhaps open. Every step that
/// changes it (opening, creating, deleting, closing) holds the name's turn from the check of
/// what is there to the end of the step, so steps on one name happen one after another, each
/// seeing what the one before left, and the open set never holds a database whose files were
/// deleted or an older copy of one reopened. Lookups of open databases take no turn. Steps on
/// different names never wait for each other.
#[derive(Default)]
struct Turns {
    busy: Mutex<HashSet<String>>,
    freed: Condvar,
}

/// A name's turn, given back when dropped.
struct Turn<'a> {
    turns: &'a Turns,
    name: String,
}

impl Turns {
    /// Waits for the name's turn.
    fn take(&self, name: &str) -> Turn<'_> {
        let mut busy = self.busy.lock().expect("turns lock");
        while busy.contains(name) {
            busy = self.freed.wait(busy).expect("turns lock");
        }
        busy.insert(name.to_string());
        Turn {
            turns: self,
            name: name.to_string(),
        }
    }

    /// The name's turn if nobody has it.
    fn try_take(&self, name: &str) -> Option<Turn<'_>> {
        let mut busy = self.busy.lock().expect("turns lock");
        busy.insert(name.to_string()).then(|| Turn {
            turns: self,
            name: name.to_string(),
        })
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.turns
            .busy
            .lock()
            .expect("turns lock")
            .remove(&self.name);
        self.turns.freed.notify_all();
    }
}

/// A database leaving the open set, closed (its writers stopped, batched writes flushed)
/// before its name's turn is given back: the field order is the drop order.
struct Closing<'a> {
    _db: Arc<Database>,
    _turn: Turn<'a>,
}

/// Checks a database name by CouchDB's rules.
pub fn validate_name(name: &str) -> Result<()> {
    let bad = || Err(Error::IllegalDatabaseName(name.to_string()));
    if SYSTEM_DATABASES.contains(&name) {
        return Ok(());
    }
    let mut chars = name.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_lowercase()) {
        return bad();
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_$()+-/".contains(c)) {
        return bad();
    }
    if name.len() > 238 {
        return bad();
    }
    Ok(())
}

/// Where the database `name` of the data directory `data_dir` keeps its files.
pub fn database_dir(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join("dbs").join(dir_name(name))
}

fn dir_name(name: &str) -> String {
    name.replace('/', "%2F")
}

fn db_name(dir: &str) -> String {
    dir.replace("%2F", "/")
}

impl Catalog {
    /// Opens (creating if needed) the catalog in `data_dir`, clearing leftovers of interrupted
    /// creations and deletions.
    pub fn open(data_dir: &Path, options: CatalogOptions) -> Result<Catalog> {
        let root = data_dir.join("dbs");
        let trash = data_dir.join("trash");
        std::fs::create_dir_all(&root).map_err(Error::io("create data directory"))?;
        if trash.exists() {
            std::fs::remove_dir_all(&trash).map_err(Error::io("clear trash"))?;
        }
        std::fs::create_dir_all(&trash).map_err(Error::io("create trash directory"))?;
        for entry in std::fs::read_dir(&root).map_err(Error::io("list databases"))? {
            let entry = entry.map_err(Error::io("list databases"))?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                std::fs::remove_dir_all(entry.path())
                    .map_err(Error::io("remove unfinished database"))?;
            }
        }
        Ok(Catalog {
            root,
            trash,
            options,
            open: RwLock::default(),
            clock: AtomicU64::new(0),
            turns: Turns::default(),
            tasks: Arc::default(),
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(dir_name(name))
    }

    /// Creates a database with `q` shards (the default when `None`) and no security object.
    pub fn create(&self, name: &str, q: Option<usize>) -> Result<Arc<Database>> {
        self.create_with(
            name,
            Creation {
                q,
                ..Creation::default()
            },
        )
    }

    /// Creates a database whose security object (JSON text) is `security` from its first
    /// moment: it becomes visible under its name only once the object is on disk.
    pub fn create_secured(
        &self,
        name: &str,
        q: Option<usize>,
        security: Vec<u8>,
    ) -> Result<Arc<Database>> {
        let (partitioned, security) = (false, Some(security));
        self.create_with(
            name,
            Creation {
                q,
                partitioned,
                security,
            },
        )
    }

    /// Creates a database as `how` says; it becomes visible under its name only once all of
    /// it is on disk.
    pub fn create_with(&self, name: &str, how: Creation) -> Result<Arc<Database>> {
        validate_name(name)?;
        let turn = self.turns.take(name);
        let path = self.path(name);
        if path.exists() {
            return Err(Error::DatabaseExists);
        }
        let stamp = self.clock.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .root
            .join(format!(".new-{}-{stamp}", std::process::id()));
        std::fs::create_dir(&tmp).map_err(Error::io("create database"))?;
        let security = how.security.unwrap_or_default();
        let built = Database::create(
            &tmp,
            name,
            how.q.unwrap_or(self.options.q).max(1),
            how.partitioned,
            &self.options.store,
            &self.tasks,
        )
        .and_then(|db| {
            if security.is_empty() {
                Ok(db)
            } else {
                db.set_security_now(security).map(|()| db)
            }
        });
        let db = match built {
            Ok(db) => db,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        drop(db);
        std::fs::rename(&tmp, &path).map_err(Error::io("create database"))?;
        sync_dir(&self.root).map_err(Error::io("create database"))?;
        let db = self.open_now(&turn, &path)?;
        self.tell(name, DbEvent::Created);
        Ok(db)
    }

    /// Tells the listener of database events, if there is one.
    fn tell(&self, name: &str, event: DbEvent) {
        if let Some(events) = &self.options.events {
            events(name, event);
        }
    }

    /// Deletes a database. Readers holding it keep their snapshots; writes through a handle
    /// taken before the deletion fail from now on as writes to a missing database.
    pub fn delete(&self, name: &str) -> Result<()> {
        validate_name(name)?;
        let _turn = self.turns.take(name);
        let path = self.path(name);
        if !path.is_dir() {
            return Err(Error::NoDatabase);
        }
        let stamp = self.clock.fetch_add(1, Ordering::Relaxed);
        let doomed = self.trash.join(format!("{}-{stamp}", dir_name(name)));
        std::fs::rename(&path, &doomed).map_err(Error::io("delete database"))?;
        let closed = self.open.write().expect("open lock").remove(name);
        if let Some(opened) = closed {
            opened.db.retire();
        }
        sync_dir(&self.root).map_err(Error::io("delete database"))?;
        std::thread::spawn(move || std::fs::remove_dir_all(doomed));
        self.tell(name, DbEvent::Deleted);
        Ok(())
    }

    /// An open database, opening it if needed.
    pub fn get(&self, name: &str) -> Result<Arc<Database>> {
        if let Some(db) = self.lookup(name) {
            return Ok(db);
        }
        validate_name(name).map_err(|_| Error::NoDatabase)?;
        let turn = self.turns.take(name);
        // Whoever had the turn before may have opened it.
        if let Some(db) = self.lookup(name) {
            return Ok(db);
        }
        let path = self.path(name);
        if !path.is_dir() {
            return Err(Error::NoDatabase);
        }
        self.open_now(&turn, &path)
    }

    /// The database if it is open (without waiting for anything), marked as used now.
    pub fn get_open(&self, name: &str) -> Option<Arc<Database>> {
        self.lookup(name)
    }

    /// The database if it is open, marked as used now.
    fn lookup(&self, name: &str) -> Option<Arc<Database>> {
        let open = self.open.read().expect("open lock");
        let opened = open.get(name)?;
        // Readers only write the tick when it moved, so a busy database's entry is not
        // written on every request.
        let now = self.clock.load(Ordering::Relaxed);
        if opened.used.load(Ordering::Relaxed) != now {
            opened.used.store(now, Ordering::Relaxed);
        }
        Some(opened.db.clone())
    }

    /// Opens the database at `path` during its name's turn and adds it to the open set,
    /// closing the least recently used ones beyond the limit.
    fn open_now(&self, turn: &Turn<'_>, path: &Path) -> Result<Arc<Database>> {
        let timer = settee_metrics::Timer::start(settee_metrics::Metric::DbOpenTime);
        let db = Arc::new(Database::open(
            path,
            &turn.name,
            &self.options.store,
            &self.tasks,
            self.options.events.clone(),
        )?);
        drop(timer);
        let used = AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed) + 1);
        let closing = {
            let mut open = self.open.write().expect("open lock");
            open.insert(
                turn.name.clone(),
                Opened {
                    db: db.clone(),
                    used,
                },
            );
            self.evict(&mut open)
        };
        // Closed outside the lock, each during its own name's turn.
        drop(closing);
        Ok(db)
    }

    /// Takes out of the open set the least recently used databases that nobody is using (no
    /// handle or snapshot outside the catalog) and whose names are not in another step, down
    /// to the limit.
    fn evict(&self, open: &mut HashMap<String, Opened>) -> Vec<Closing<'_>> {
        let mut closing = Vec::new();
        if open.len() <= self.options.max_dbs_open {
            return closing;
        }
        let mut idle: Vec<(u64, &String)> = open
            .iter()
            .filter(|(_, o)| Arc::strong_count(&o.db) == 1 && !o.db.in_use())
            .map(|(n, o)| (o.used.load(Ordering::Relaxed), n))
            .collect();
        idle.sort_unstable();
        let idle: Vec<String> = idle.into_iter().map(|(_, n)| n.clone()).collect();
        for name in idle {
            if open.len() <= self.options.max_dbs_open {
                break;
            }
            if let Some(turn) = self.turns.try_take(&name) {
                let opened = open.remove(&name).expect("listed as open");
                closing.push(Closing {
                    _db: opened.db,
                    _turn: turn,
                });
            }
        }
        closing
    }

    /// The options every store is opened with (and the node cache they share).
    pub fn store_options(&self) -> &StoreOptions {
        &self.options.store
    }

    /// Running background tasks (`/_active_tasks`).
    pub fn tasks(&self) -> &Arc<Tasks> {
        &self.tasks
    }

    /// The databases open now (for background work that follows what is in use).
    pub fn open_databases(&self) -> Vec<Arc<Database>> {
        self.open
            .read()
            .expect("open lock")
            .values()
            .map(|o| o.db.clone())
            .collect()
    }

    /// Number of databases currently open.
    pub fn open_count(&self) -> usize {
        self.open.read().expect("open lock").len()
    }

    /// Every database name, sorted.
    pub fn list(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.root).map_err(Error::io("list databases"))? {
            let entry = entry.map_err(Error::io("list databases"))?;
            let file = entry.file_name().to_string_lossy().into_owned();
            if !file.starts_with('.') {
                names.push(db_name(&file));
            }
        }
        names.sort();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_follow_couchdb_rules() {
        for ok in ["a", "abc-1_$()+-/x", "_users", "_replicator"] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "A", "1a", "_private", "a b", "a.b", "é"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }
}
