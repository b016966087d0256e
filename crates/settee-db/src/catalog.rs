//! The databases of one data directory: names, creation, deletion, and a bounded set of open
//! databases (`[couchdb] max_dbs_open`), closed least-recently-used first and reopened on
//! demand, so tens of thousands of small databases need bounded memory and descriptors.
//!
//! Layout: `DIR/dbs/<name>/shard-<i>.settee`, with `/` in names written as `%2F`. A database
//! is built under a temporary name and renamed into place, so it exists whole or not at all;
//! deletion renames it into `DIR/trash` before removing it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use settee_store::{sync_dir, StoreOptions};

use crate::database::Database;
use crate::error::{Error, Result};
use crate::tasks::Tasks;

/// Names of system databases, exempt from the leading-letter rule.
pub const SYSTEM_DATABASES: [&str; 6] = ["_dbs", "_global_changes", "_metadata", "_nodes", "_replicator", "_users"];

/// How databases are created and kept open.
#[derive(Clone)]
pub struct CatalogOptions {
    /// Default number of shards of a new database (`[cluster] q`).
    pub q: usize,
    /// Most databases kept open at once (`[couchdb] max_dbs_open`).
    pub max_dbs_open: usize,
    /// Options for every shard file (the node cache is shared through them).
    pub store: StoreOptions,
}

impl Default for CatalogOptions {
    fn default() -> CatalogOptions {
        CatalogOptions { q: 2, max_dbs_open: 500, store: StoreOptions::default() }
    }
}

/// The databases of a data directory.
pub struct Catalog {
    root: PathBuf,
    trash: PathBuf,
    options: CatalogOptions,
    /// Open databases and when each was last used (a tick of `clock`).
    open: RwLock<HashMap<String, (Arc<Database>, AtomicU64)>>,
    clock: AtomicU64,
    /// Serialises creation and deletion.
    ddl: Mutex<()>,
    /// Background work of every database.
    tasks: Arc<Tasks>,
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
                std::fs::remove_dir_all(entry.path()).map_err(Error::io("remove unfinished database"))?;
            }
        }
        Ok(Catalog { root, trash, options, open: RwLock::new(HashMap::new()), clock: AtomicU64::new(0), ddl: Mutex::new(()), tasks: Arc::default() })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(dir_name(name))
    }

    /// Creates a database with `q` shards (the default when `None`) and no security object.
    pub fn create(&self, name: &str, q: Option<usize>) -> Result<Arc<Database>> {
        self.create_secured(name, q, Vec::new())
    }

    /// Creates a database whose security object (JSON text) is `security` from its first
    /// moment: it becomes visible under its name only once the object is on disk.
    pub fn create_secured(&self, name: &str, q: Option<usize>, security: Vec<u8>) -> Result<Arc<Database>> {
        validate_name(name)?;
        let _ddl = self.ddl.lock().expect("ddl lock");
        let path = self.path(name);
        if path.exists() {
            return Err(Error::DatabaseExists);
        }
        let stamp = self.clock.fetch_add(1, Ordering::Relaxed);
        let tmp = self.root.join(format!(".new-{}-{stamp}", std::process::id()));
        std::fs::create_dir(&tmp).map_err(Error::io("create database"))?;
        let built = Database::create(&tmp, name, q.unwrap_or(self.options.q).max(1), &self.options.store, &self.tasks)
            .and_then(|db| if security.is_empty() { Ok(db) } else { db.set_security_now(security).map(|()| db) });
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
        self.get(name)
    }

    /// Deletes a database. Readers holding it keep their snapshots.
    pub fn delete(&self, name: &str) -> Result<()> {
        validate_name(name)?;
        let _ddl = self.ddl.lock().expect("ddl lock");
        let path = self.path(name);
        if !path.is_dir() {
            return Err(Error::NoDatabase);
        }
        self.open.write().expect("open lock").remove(name);
        let stamp = self.clock.fetch_add(1, Ordering::Relaxed);
        let doomed = self.trash.join(format!("{}-{stamp}", dir_name(name)));
        std::fs::rename(&path, &doomed).map_err(Error::io("delete database"))?;
        sync_dir(&self.root).map_err(Error::io("delete database"))?;
        std::thread::spawn(move || std::fs::remove_dir_all(doomed));
        Ok(())
    }

    /// An open database, opening it if needed.
    pub fn get(&self, name: &str) -> Result<Arc<Database>> {
        if let Some((db, used)) = self.open.read().expect("open lock").get(name) {
            // Readers only write the tick when it moved, so a busy database's entry is not
            // written on every request.
            let now = self.clock.load(Ordering::Relaxed);
            if used.load(Ordering::Relaxed) != now {
                used.store(now, Ordering::Relaxed);
            }
            return Ok(db.clone());
        }
        let now = self.clock.fetch_add(1, Ordering::Relaxed) + 1;
        validate_name(name).map_err(|_| Error::NoDatabase)?;
        let path = self.path(name);
        if !path.is_dir() {
            return Err(Error::NoDatabase);
        }
        let db = Arc::new(Database::open(&path, name, &self.options.store, &self.tasks)?);
        let mut open = self.open.write().expect("open lock");
        let db = open.entry(name.to_string()).or_insert((db, AtomicU64::new(now))).0.clone();
        self.evict(&mut open);
        Ok(db)
    }

    /// Closes the least recently used databases nobody is using, down to the limit.
    fn evict(&self, open: &mut HashMap<String, (Arc<Database>, AtomicU64)>) {
        while open.len() > self.options.max_dbs_open {
            let victim = open.iter().filter(|(_, (db, _))| Arc::strong_count(db) == 1).min_by_key(|(_, (_, used))| used.load(Ordering::Relaxed)).map(|(n, _)| n.clone());
            match victim {
                Some(name) => drop(open.remove(&name)),
                None => break,
            }
        }
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
        self.open.read().expect("open lock").values().map(|(db, _)| db.clone()).collect()
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
