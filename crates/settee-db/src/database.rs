//! A database: `q` shard files, each document in the shard its id hashes to.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use settee_store::{Durability, Store, StoreOptions};
use tokio::sync::watch;

use crate::catalog::{DbEvent, DbEvents};
use crate::doc::{is_local, partition_of, NewDoc};
use crate::edit_queue::{Answering, Edits, EditsPending};
use crate::error::{Error, Result};
use crate::read::DbSnapshot;
use crate::shard::{EditMode, EditResult, Shard, ShardMeta};
use crate::tasks::Tasks;

/// Requests of at least this many edits are large: they free their edits on a thread of
/// their own (see [`free_apart`]), and a durable one learns its results before its commits
/// are synced (see [`Database::update_then`]).
const LARGE_FROM: usize = 64;

/// Frees a large request's edits on a blocking thread once they are applied, so that
/// neither the shard's writer (which would otherwise hold the last reference) nor the
/// request's answer waits for thousands of small frees.
fn free_apart(edits: Option<Arc<Vec<NewDoc>>>) {
    let Some(edits) = edits else {
        return;
    };
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn_blocking(move || drop(edits))),
        Err(_) => drop(edits),
    }
}

/// Store options whose commits bump a new watch channel.
fn notifying(options: &StoreOptions) -> (Arc<watch::Sender<u64>>, StoreOptions) {
    let changed = Arc::new(watch::channel(0u64).0);
    let tx = changed.clone();
    let on_commit: Arc<dyn Fn() + Send + Sync> = Arc::new(move || tx.send_modify(|v| *v += 1));
    (
        changed,
        StoreOptions {
            on_commit: Some(on_commit),
            ..options.clone()
        },
    )
}

/// File name of shard `i`.
fn shard_file(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("shard-{i}.settee"))
}

/// An open database.
pub struct Database {
    name: String,
    shards: Vec<Shard>,
    /// Bumped after every commit of any shard, so change feeds wake without polling.
    changed: Arc<watch::Sender<u64>>,
    /// Set while a compaction runs.
    compacting: Arc<AtomicBool>,
    /// Where background work is listed.
    tasks: Arc<Tasks>,
    /// The database's directory (shard files; index files of the layers above).
    dir: PathBuf,
    /// State that layers above keep per open database (view indexes), one value per type;
    /// it lives exactly as long as this database is open.
    extensions: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    /// Held by every snapshot, so the catalog can tell a database nobody reads.
    lease: Arc<()>,
    /// Set once the database is deleted: writes through handles taken before fail.
    retired: AtomicBool,
    /// Whether the database is partitioned (read from its first shard when opened).
    partitioned: bool,
    /// Told when documents are written or purged.
    events: Option<DbEvents>,
}

impl Database {
    /// Creates the shard files of a new database in the empty directory `dir`.
    pub(crate) fn create(
        dir: &Path,
        name: &str,
        q: usize,
        partitioned: bool,
        options: &StoreOptions,
        tasks: &Arc<Tasks>,
    ) -> Result<Database> {
        let (changed, options) = notifying(options);
        let shards: Vec<Shard> = (0..q)
            .map(|i| Shard::open(&shard_file(dir, i), options.clone(), true))
            .collect::<Result<_>>()?;
        if partitioned {
            for shard in &shards {
                shard.update_meta(|m| m.partitioned = true).wait()?;
            }
        }
        Database::new(dir, name, shards, tasks, changed)
    }

    /// Opens the database stored in `dir`.
    pub(crate) fn open(
        dir: &Path,
        name: &str,
        options: &StoreOptions,
        tasks: &Arc<Tasks>,
        events: Option<DbEvents>,
    ) -> Result<Database> {
        let (changed, options) = notifying(options);
        let mut shards = Vec::new();
        while shard_file(dir, shards.len()).exists() {
            shards.push(Shard::open(
                &shard_file(dir, shards.len()),
                options.clone(),
                false,
            )?);
        }
        if shards.is_empty() {
            return Err(Error::NoDatabase);
        }
        let mut db = Database::new(dir, name, shards, tasks, changed)?;
        db.events = events;
        Ok(db)
    }

    fn new(
        dir: &Path,
        name: &str,
        shards: Vec<Shard>,
        tasks: &Arc<Tasks>,
        changed: Arc<watch::Sender<u64>>,
    ) -> Result<Database> {
        let partitioned = ShardMeta::decode(shards[0].snapshot().meta())?.partitioned;
        let (compacting, tasks) = (Arc::new(AtomicBool::new(false)), tasks.clone());
        let (dir, extensions) = (dir.to_path_buf(), Mutex::new(HashMap::new()));
        let (lease, retired) = (Arc::new(()), AtomicBool::new(false));
        Ok(Database {
            name: name.to_string(),
            shards,
            changed,
            compacting,
            tasks,
            dir,
            extensions,
            lease,
            retired,
            partitioned,
            events: None,
        })
    }

    /// Tells the catalog's listener that documents were written or purged.
    fn tell_updated(&self) {
        if let Some(events) = &self.events {
            events(&self.name, DbEvent::Updated);
        }
    }

    /// The database's directory, where layers above keep their files (view indexes), so
    /// that deleting the database deletes them too.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The registry of background tasks this database reports to.
    pub fn tasks(&self) -> &Arc<Tasks> {
        &self.tasks
    }

    /// The per-database state of type `T`, if a layer above has made it.
    pub fn existing_extension<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let map = self.extensions.lock().expect("extensions lock");
        map.get(&TypeId::of::<T>())
            .cloned()
            .and_then(|v| v.downcast::<T>().ok())
    }

    /// The per-database state of type `T` kept by a layer above, made by `make` on first use.
    pub fn extension<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        let mut map = self.extensions.lock().expect("extensions lock");
        let value = map
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(make()) as Arc<dyn Any + Send + Sync>)
            .clone();
        value.downcast::<T>().expect("one value per type")
    }

    /// The database name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of shards.
    pub fn q(&self) -> usize {
        self.shards.len()
    }

    /// The shards, in order.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// Appends `data` to shard `shard`'s file as a loose blob, durable once this returns,
    /// for an edit to adopt (see [`crate::Uploader`]).
    pub fn append_blob(&self, shard: usize, data: Vec<u8>) -> Result<settee_store::LooseBlob> {
        Ok(self.shards[shard].store().append_blob(data)?)
    }

    /// The bytes the database's files take on disk (CouchDB's `sizes.file`).
    pub fn file_size(&self) -> u64 {
        self.shards
            .iter()
            .filter_map(|s| std::fs::metadata(s.store().path()).ok())
            .map(|m| m.len())
            .sum()
    }

    /// The shard holding `id`: CouchDB's placement, the CRC-32 of the id (of its partition
    /// in a partitioned database) on a ring of `q` equal ranges.
    pub fn shard_for(&self, id: &str) -> usize {
        shard_index(placement(id, self.partitioned), self.shards.len())
    }

    /// Whether the database is partitioned: its documents' ids are `partition:id` and each
    /// partition lives in one shard.
    pub fn partitioned(&self) -> bool {
        self.partitioned
    }

    /// A consistent view of every shard, for reading.
    pub fn snapshot(&self) -> DbSnapshot {
        DbSnapshot::new(
            self.shards.iter().map(Shard::snapshot).collect(),
            self.lease.clone(),
            self.partitioned,
        )
    }

    /// Whether a snapshot of the database is alive (its files must stay open).
    pub(crate) fn in_use(&self) -> bool {
        Arc::strong_count(&self.lease) > 1
    }

    /// Marks the database deleted: from now on its writes fail with [`Error::NoDatabase`].
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    /// Whether the database has been deleted (a handle taken before the deletion).
    pub fn is_deleted(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// Refuses writes to a deleted database.
    fn writable(&self) -> Result<()> {
        if self.is_deleted() {
            return Err(Error::NoDatabase);
        }
        Ok(())
    }

    /// Waits for writes: the value changes after each one.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Applies edits and answers per document, in the order given. Edits of one shard are
    /// applied in one job (one commit at most); shards work in parallel. A lone small
    /// document may be committed on the calling thread, which then waits for its sync (see
    /// [`crate::edit_queue`]).
    pub async fn update(
        &self,
        docs: Vec<NewDoc>,
        mode: EditMode,
        durability: Durability,
    ) -> Result<Vec<EditResult>> {
        self.update_then(docs, mode, durability, |results| results)
            .await
    }

    /// [`Database::update`], giving the results to `then` as soon as every edit is
    /// applied: for a large durable write, while its commits are still being synced, so
    /// that the caller prepares its answer meanwhile. What `then` returns is the answer
    /// once the edits are durable; if a commit fails, its error is.
    pub async fn update_then<T>(
        &self,
        docs: Vec<NewDoc>,
        mode: EditMode,
        durability: Durability,
        then: impl FnOnce(Vec<EditResult>) -> T,
    ) -> Result<T> {
        self.writable()?;
        let kinds = edit_kinds(&docs);
        let Submitted {
            total,
            kept,
            pending,
        } = self.submit(docs, mode, durability);
        let mut results: Vec<Option<EditResult>> = (0..total).map(|_| None).collect();
        let (mut failure, mut durable) = (None, Vec::with_capacity(pending.len()));
        for (slots, mut p) in pending {
            durable.push(p.durable());
            match p.await {
                Ok(answers) => slots
                    .into_iter()
                    .zip(answers)
                    .for_each(|(s, a)| results[s] = Some(a)),
                Err(e) => failure = Some(e),
            }
        }
        // Prepared while the commits are synced, kept only if they all are.
        let prepared = match failure {
            Some(e) => Err(e),
            None => {
                let results: Vec<EditResult> = results
                    .into_iter()
                    .map(|r| r.expect("every slot answered"))
                    .collect();
                let counts = count_writes(&kinds, &results);
                Ok((then(results), counts))
            }
        };
        let mut synced = Ok(());
        for d in durable {
            if let Err(e) = d.wait().await {
                synced = Err(e);
            }
        }
        free_apart(kept);
        let (answer, counts) = prepared?;
        synced?;
        if record_writes(counts) {
            self.tell_updated();
        }
        Ok(answer)
    }

    /// Hands each shard (and each shard's local documents) its share of `docs`.
    fn submit(&self, docs: Vec<NewDoc>, mode: EditMode, durability: Durability) -> Submitted {
        let q = self.shards.len();
        let total = docs.len();
        let answering = if matches!(&docs[..], [doc] if doc.is_small()) {
            Answering::Alone
        } else if total >= LARGE_FROM && durability == Durability::Durable {
            Answering::Staged
        } else {
            Answering::Committed
        };
        let groups = self.group(&docs);
        let all = Arc::new(docs);
        let kept = (total >= LARGE_FROM).then(|| all.clone());
        let stores: Vec<&Store> = groups
            .iter()
            .map(|(g, _)| self.shards[g % q].store())
            .collect();
        // Each shard's writer on a processor of its own, rather than queued behind another.
        settee_store::place_fan_out(&stores);
        let mut pending = Vec::with_capacity(groups.len());
        for (g, slots) in groups {
            let shard = &self.shards[g % q];
            let edits = Edits::picked(all.clone(), slots.clone());
            let p = if g < q {
                shard.update_docs(edits, mode, durability, answering)
            } else {
                shard.update_local(edits, durability, answering)
            };
            pending.push((slots, p));
        }
        Submitted {
            total,
            kept,
            pending,
        }
    }

    /// Splits a write's edits by shard, local documents apart: for each group with edits,
    /// its index (the shards', then their local documents'), and the positions of its
    /// edits in the write.
    fn group(&self, docs: &[NewDoc]) -> Vec<(usize, Vec<usize>)> {
        let q = self.shards.len();
        let share = docs.len().div_ceil(q);
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); q * 2];
        for (i, doc) in docs.iter().enumerate() {
            let g = self.shard_for(&doc.id) + if is_local(&doc.id) { q } else { 0 };
            let slots = &mut groups[g];
            if g < q && slots.capacity() == 0 {
                slots.reserve(share);
            }
            slots.push(i);
        }
        groups
            .into_iter()
            .enumerate()
            .filter(|(_, slots)| !slots.is_empty())
            .collect()
    }

    /// Purges leaf revisions of documents (`_purge`); answers with what was purged per id.
    pub async fn purge(
        &self,
        docs: Vec<(String, Vec<settee_json::Rev>)>,
    ) -> Result<Vec<(String, Vec<settee_json::Rev>)>> {
        self.writable()?;
        let mut by_shard: Vec<Vec<(String, Vec<settee_json::Rev>)>> =
            vec![Vec::new(); self.shards.len()];
        for (id, revs) in docs {
            by_shard[self.shard_for(&id)].push((id, revs));
        }
        let mut out = Vec::new();
        for (shard, docs) in self
            .shards
            .iter()
            .zip(by_shard)
            .filter(|(_, d)| !d.is_empty())
        {
            let ids: Vec<String> = docs.iter().map(|(id, _)| id.clone()).collect();
            let purged = shard.purge(docs).await?;
            out.extend(ids.into_iter().zip(purged));
        }
        use settee_metrics::{add, inc, Metric};
        let done = out.iter().filter(|(_, revs)| !revs.is_empty()).count() as u64;
        inc(Metric::DatabasePurges);
        add(Metric::DocumentPurgesTotal, out.len() as u64);
        add(Metric::DocumentPurgesSuccess, done);
        add(Metric::DocumentPurgesFailure, out.len() as u64 - done);
        if done > 0 {
            self.tell_updated();
        }
        Ok(out)
    }

    /// Sets the security object of every shard, waiting for it to be on disk (for databases
    /// being created).
    pub(crate) fn set_security_now(&self, security: Vec<u8>) -> Result<()> {
        for shard in &self.shards {
            let security = security.clone();
            shard.update_meta(move |m| m.security = security).wait()?;
        }
        Ok(())
    }

    /// Changes the metadata of every shard (security object, revs limit).
    pub async fn update_meta(
        &self,
        f: impl Fn(&mut ShardMeta) + Clone + Send + 'static,
    ) -> Result<()> {
        self.writable()?;
        let pending: Vec<_> = self
            .shards
            .iter()
            .map(|s| s.update_meta(f.clone()))
            .collect();
        for p in pending {
            p.await?;
        }
        Ok(())
    }

    /// Whether a compaction is running.
    pub fn compact_running(&self) -> bool {
        self.compacting.load(Ordering::Acquire)
    }

    /// Starts compacting every shard in the background (dropping the bodies of superseded
    /// revisions); false if one is already running.
    pub fn start_compaction(self: &Arc<Self>) -> bool {
        // A deleted database's files are on their way out (and its name may be another's).
        if self.is_deleted() || self.compacting.swap(true, Ordering::AcqRel) {
            return false;
        }
        let db = self.clone();
        let task = self.tasks.start("database_compaction", &self.name);
        std::thread::spawn(move || {
            let q = db.shards.len() as u64;
            for (i, shard) in db.shards.iter().enumerate() {
                // Progress over all shards: each shard is an equal share.
                let report = |done: u64, total: u64| {
                    task.update(i as u64 * 1000 + done * 1000 / total.max(1), q * 1000)
                };
                if let Err(e) = shard
                    .store()
                    .compact(Arc::new(crate::shard::DocRewriter), &report)
                {
                    eprintln!("compaction of {} failed: {e}", db.name);
                }
            }
            drop(task);
            db.compacting.store(false, Ordering::Release);
        });
        true
    }

    /// The damaged records met so far in the shard files, by shard: reading or writing what
    /// they hold fails; the rest of the database is served (see `settee_store::Store::damage`).
    pub fn damage(&self) -> Vec<(usize, settee_store::Damaged)> {
        self.shards
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.store().damage().into_iter().map(move |d| (i, d)))
            .collect()
    }

    /// Commits batched writes of every shard and waits until they are durable.
    pub fn flush(&self) -> Result<()> {
        self.shards
            .iter()
            .try_for_each(|s| s.store().flush().map_err(Error::from))
    }
}

/// A write handed to its shards' writers.
struct Submitted {
    /// How many edits the write has.
    total: usize,
    /// The request's share of a large write's edits (see [`free_apart`]).
    kept: Option<Arc<Vec<NewDoc>>>,
    /// For each shard's share: the positions of its edits in the write, and their answer.
    pending: Vec<(Vec<usize>, EditsPending)>,
}

/// What each edit is, for the node's statistics: 0 an edit, 1 a creation, 2 local.
fn edit_kinds(docs: &[NewDoc]) -> Vec<u8> {
    docs.iter()
        .map(|d| match (is_local(&d.id), d.revs.is_empty()) {
            (true, _) => 2,
            (false, true) => 1,
            (false, false) => 0,
        })
        .collect()
}

/// The successful edits of one update, by kind (see [`edit_kinds`]).
fn count_writes(kinds: &[u8], results: &[EditResult]) -> [u64; 3] {
    let mut counts = [0u64; 3];
    for (k, r) in kinds.iter().zip(results) {
        if r.is_ok() {
            counts[*k as usize] += 1;
        }
    }
    counts
}

/// Counts one update's successful edits in the node's statistics, once they are durable;
/// whether there were any.
fn record_writes(counts: [u64; 3]) -> bool {
    use settee_metrics::{add, inc, Metric};
    if counts.iter().all(|&c| c == 0) {
        return false;
    }
    inc(Metric::DatabaseWrites);
    add(Metric::DocumentWrites, counts[0] + counts[1]);
    add(Metric::DocumentInserts, counts[1]);
    add(Metric::LocalDocumentWrites, counts[2]);
    true
}

/// What decides where `id` is placed: its partition in a partitioned database (so that a
/// partition is one shard's), the whole id otherwise.
pub(crate) fn placement(id: &str, partitioned: bool) -> &str {
    match partitioned.then(|| partition_of(id)).flatten() {
        Some(p) => p,
        None => id,
    }
}

/// The shard of `q` that holds `id`.
pub fn shard_index(id: &str, q: usize) -> usize {
    let q = q.max(1) as u64;
    let width = (1u64 << 32) / q;
    ((u64::from(crc32fast::hash(id.as_bytes())) / width).min(q - 1)) as usize
}
