//! Compaction: copy the live contents of a store into a new file while the old one keeps
//! taking writes, catch up on what was written meanwhile, and swap the files atomically.
//!
//! 1. Copy every tree of a snapshot into `<file>.compact`, in key order (values pass through
//!    the caller's [`ValueRewriter`], which copies the blobs they refer to). Headers written
//!    meanwhile carry the "compacting" flag, so they are never opened.
//! 2. Catch up: the difference between the copied snapshot and a newer one is found by
//!    comparing the two trees (unchanged subtrees share pointers) and applied to the copy.
//! 3. On the writer thread, so that nothing commits meanwhile: catch up the last changes,
//!    commit the copy without the flag, sync, rename it over the old file, sync the
//!    directory, and continue writing to the new file.
//!
//! A crash before the rename leaves the old file (the stray copy is deleted on open); after
//! it, the new one, which holds every commit. Snapshots of the old file keep reading it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::backend::FileBackend;
use crate::error::{Error, Result};
use crate::file::NodeSource;
use crate::file::{BlobRef, StoreFile};
use crate::format::{Header, FLAG_COMPACTING};
use crate::overlay::Overlay;
use crate::snapshot::Snapshot;
use crate::store::{init_file, Shared, Store};
use crate::tree::cursor::lookup;
use crate::tree::diff::diff;
use crate::tree::{Action, RangeOptions, TreeSpec};
use crate::txn::{Appender, WriterState};

/// Entries per batched modification while copying.
const COPY_BATCH: usize = 4096;
/// The copy commits (with the compacting flag) once this many bytes wait to be written,
/// which bounds both memory and how much a later open has to verify.
const COPY_COMMIT_BYTES: u64 = 64 << 20;
/// Catch-up rounds outside the writer before the final, exclusive one.
const CATCH_UP_ROUNDS: usize = 8;
/// A catch-up round this small is followed directly by the final one.
const SMALL_DELTA: usize = 1000;

/// Where a copy of `path` is built: a name of its own per compaction, so that two stores of
/// one path (a deleted database's, still in use, and a new one of the same name) never build
/// into the same file.
pub(crate) fn compact_path(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut name = OsString::from(path.as_os_str());
    name.push(format!(
        ".compact.{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    PathBuf::from(name)
}

/// Removes copies that compactions of `path` left behind (a dead process's, or one that gave
/// up); called by the store that holds the file's lock, so none of them is being built.
pub(crate) fn remove_leftover_copies(path: &Path) {
    let (Some(dir), Some(file)) = (path.parent(), path.file_name()) else {
        return;
    };
    let mut prefix = file.to_os_string();
    prefix.push(".compact");
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .as_encoded_bytes()
            .starts_with(prefix.as_encoded_bytes())
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Rewrites values while they are copied, so that blob references point into the new file.
pub trait ValueRewriter: Send + Sync {
    /// The value to store for `key` of `tree` in the new file, or `None` to keep `value`.
    fn rewrite(
        &self,
        tree: usize,
        key: &[u8],
        value: &[u8],
        blobs: &mut BlobCopier<'_>,
    ) -> Result<Option<Vec<u8>>>;
}

/// For stores whose values refer to no blobs.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoBlobs;

impl ValueRewriter for NoBlobs {
    fn rewrite(
        &self,
        _: usize,
        _: &[u8],
        _: &[u8],
        _: &mut BlobCopier<'_>,
    ) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
}

/// Copies blobs from the file being compacted into the new one.
pub struct BlobCopier<'a> {
    from: &'a StoreFile,
    to: &'a mut WriterState,
}

impl BlobCopier<'_> {
    /// Copies one blob as stored (no recompression) and returns its new reference.
    pub fn copy(&mut self, blob: &BlobRef) -> Result<BlobRef> {
        let (kind, payload) = self.from.read_record(blob.ptr())?;
        self.to.append_raw_blob(kind, &payload, blob.len)
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactStats {
    /// Size of the old file when the swap happened.
    pub old_size: u64,
    /// Size of the new file right after the swap.
    pub new_size: u64,
    /// Entries copied from the first snapshot.
    pub copied: u64,
    /// Changes applied while catching up.
    pub caught_up: u64,
}

struct Copy {
    new: WriterState,
    rewriter: Arc<dyn ValueRewriter>,
    stats: CompactStats,
}

impl Copy {
    /// Applies `actions` to `tree` of the copy, rewriting values read from `from`.
    fn apply(&mut self, from: &StoreFile, tree: usize, mut actions: Vec<Action>) -> Result<()> {
        for action in &mut actions {
            if let Action::Put(k, v) = action {
                let mut blobs = BlobCopier {
                    from,
                    to: &mut self.new,
                };
                if let Some(nv) = self.rewriter.rewrite(tree, k, v, &mut blobs)? {
                    *v = nv;
                }
            }
        }
        self.new.apply(tree, &actions)?;
        if self.new.uncommitted_bytes() >= COPY_COMMIT_BYTES {
            self.new.commit(FLAG_COMPACTING)?;
        }
        Ok(())
    }

    /// Copies every entry of `snap`.
    fn copy_all(&mut self, snap: &Snapshot, progress: &dyn Fn(u64, u64)) -> Result<()> {
        let total: u64 = snap
            .state
            .header
            .roots
            .iter()
            .flatten()
            .map(|r| r.count)
            .sum();
        for tree in 0..snap.state.schema.len() {
            let mut batch = Vec::with_capacity(COPY_BATCH);
            for entry in snap.range(tree, RangeOptions::default())? {
                let entry = entry?;
                batch.push(Action::Put(entry.key().to_vec(), entry.value().to_vec()));
                if batch.len() == COPY_BATCH {
                    self.stats.copied += batch.len() as u64;
                    self.apply(&snap.state.file, tree, std::mem::take(&mut batch))?;
                    progress(self.stats.copied, total);
                }
            }
            self.stats.copied += batch.len() as u64;
            self.apply(&snap.state.file, tree, batch)?;
        }
        progress(self.stats.copied, total);
        self.new.meta = snap.meta().to_vec();
        self.new.commit(FLAG_COMPACTING)?;
        Ok(())
    }

    /// Applies the changes between two commits of the old file; returns how many.
    fn catch_up(&mut self, from: &StoreFile, old: Committed, new: Committed) -> Result<usize> {
        let mut changes = 0;
        for tree in 0..self.new.schema.len() {
            let spec = self.new.schema[tree].clone();
            let actions = tree_changes(from, &spec, tree, old, new)?;
            changes += actions.len();
            if !actions.is_empty() {
                self.apply(from, tree, actions)?;
            }
        }
        self.new.meta = new.0.meta.clone();
        self.stats.caught_up += changes as u64;
        Ok(changes)
    }
}

/// A commit of the file being compacted: its header and its trees' logged changes.
type Committed<'a> = (&'a Header, &'a [Overlay]);

/// The actions that turn `tree` as of `old` into `tree` as of `new`, logged changes
/// included: the nodes' differences, with every key either commit holds a change of
/// settled by comparing what the two show (an unchanged key must not be copied again: its
/// value may name a blob).
fn tree_changes(
    from: &StoreFile,
    spec: &TreeSpec,
    tree: usize,
    old: Committed,
    new: Committed,
) -> Result<Vec<Action>> {
    let root = |h: &Header| h.roots.get(tree).cloned().flatten();
    let (old_root, new_root) = (root(old.0), root(new.0));
    let mut actions = diff(from, spec, old_root.as_ref(), new_root.as_ref())?;
    let empty = Overlay::default();
    let (old_changes, new_changes) = (
        old.1.get(tree).unwrap_or(&empty),
        new.1.get(tree).unwrap_or(&empty),
    );
    if old_changes.is_empty() && new_changes.is_empty() {
        return Ok(actions);
    }
    let settle: BTreeSet<Arc<[u8]>> = old_changes.keys().chain(new_changes.keys()).collect();
    actions.retain(|a| !settle.contains(a.key()));
    let node = |r: &Option<crate::format::Root>| r.as_ref().map(|r| from.node(r.ptr)).transpose();
    let (old_node, new_node) = (node(&old_root)?, node(&new_root)?);
    let shown = |changes: &Overlay,
                 node: &Option<Arc<crate::node::Node>>,
                 key: &[u8]|
     -> Result<Option<Vec<u8>>> {
        let entry = match (changes.entry(key), node) {
            (Some(entry), _) => entry,
            (None, Some(node)) => lookup(from, spec, node, key)?,
            (None, None) => None,
        };
        Ok(entry.map(|e| e.value().to_vec()))
    };
    for key in settle {
        let now = shown(new_changes, &new_node, &key)?;
        if now == shown(old_changes, &old_node, &key)? {
            continue;
        }
        actions.push(match now {
            Some(v) => Action::Put(key.to_vec(), v),
            None => Action::Delete(key.to_vec()),
        });
    }
    actions.sort_by(|a, b| spec.cmp(a.key(), b.key()));
    Ok(actions)
}

impl Store {
    /// Compacts the store while it stays readable and writable. `progress` is told entries
    /// copied so far and the total to copy.
    pub fn compact(
        &self,
        rewriter: Arc<dyn ValueRewriter>,
        progress: &dyn Fn(u64, u64),
    ) -> Result<CompactStats> {
        let shared = self.shared().clone();
        if shared.compacting.swap(true, Ordering::SeqCst) {
            return Err(Error::CompactionRunning);
        }
        /// Clears the flag and removes an unfinished copy however the compaction ends.
        struct Guard<'a>(&'a Shared, &'a Path, bool);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                if !self.2 {
                    let _ = std::fs::remove_file(self.1);
                }
                self.0.compacting.store(false, Ordering::SeqCst);
            }
        }
        let target = compact_path(&shared.path);
        let mut guard = Guard(&shared, &target, false);
        let result = self.compact_inner(&shared, &target, rewriter, progress);
        guard.2 = result.is_ok();
        result
    }

    fn compact_inner(
        &self,
        shared: &Arc<Shared>,
        target: &Path,
        rewriter: Arc<dyn ValueRewriter>,
        progress: &dyn Fn(u64, u64),
    ) -> Result<CompactStats> {
        let target = target.to_path_buf();
        let backend =
            Arc::new(FileBackend::create(&target).map_err(Error::io("create compaction file"))?);
        let (header, end) = init_file(backend.as_ref(), shared.schema.len())?;
        let file = Arc::new(StoreFile::new(backend, shared.options.cache.clone(), end));
        let opts = &shared.options;
        let mut new = WriterState::new(
            Appender::new(file, end, end),
            shared.schema.clone(),
            header,
            opts.node_size,
            opts.compress_blobs,
        );
        new.direct = true;
        let mut copy = Copy {
            new,
            rewriter,
            stats: CompactStats::default(),
        };

        let mut last = self.snapshot();
        copy.copy_all(&last, progress)?;
        for _ in 0..CATCH_UP_ROUNDS {
            let now = self.snapshot();
            if now.generation() == last.generation() {
                break;
            }
            let changes = copy.catch_up(
                &now.state.file,
                (&last.state.header, &last.state.overlays),
                (&now.state.header, &now.state.overlays),
            )?;
            copy.new.commit(FLAG_COMPACTING)?;
            last = now;
            if changes < SMALL_DELTA {
                break;
            }
        }

        let (tx, rx) = oneshot::channel();
        self.exclusive(Box::new(move |state, shared| {
            let _ = tx.send(finish(state, shared, copy, &last, &target));
        }))?;
        rx.recv().unwrap_or(Err(Error::Closed))
    }
}

/// The last step, on the writer thread with nothing uncommitted: final catch-up, commit,
/// rename, and switch the writer and new snapshots to the new file.
fn finish(
    state: &mut WriterState,
    shared: &Shared,
    mut copy: Copy,
    last: &Snapshot,
    target: &Path,
) -> Result<CompactStats> {
    let old_file = state.app.file.clone();
    copy.catch_up(
        &old_file,
        (&last.state.header, &last.state.overlays),
        (&state.header, &state.committed_overlays),
    )?;
    // Commit numbers go on from the old file's, so they never repeat.
    copy.new.header.generation = state.header.generation;
    copy.new.commit(0)?;
    copy.new.app.release_reserve();
    copy.stats.old_size = old_file.backend.len().map_err(Error::io("file length"))?;
    copy.stats.new_size = copy
        .new
        .app
        .file
        .backend
        .len()
        .map_err(Error::io("file length"))?;
    // A file moved away meanwhile (its database deleted, and perhaps another made under the
    // same name) must not be replaced by this copy of it.
    if !old_file
        .backend
        .is_at(&shared.path)
        .map_err(Error::io("check the file before renaming"))?
    {
        let _ = std::fs::remove_file(target);
        return Err(Error::io("rename compacted file")(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the file was moved or replaced during compaction",
        )));
    }
    std::fs::rename(target, &shared.path).map_err(Error::io("rename compacted file"))?;
    // From here on the path names the new file: the writer must follow it whatever happens.
    // Until the rename is durable, no commit may be acknowledged (see WriterState::commit).
    let charge = state.charge.take();
    // Everything appended to the old file is committed: loose blobs written there stay
    // adoptable (copied over).
    old_file.retire(state.app.incarnation);
    *state = copy.new;
    state.direct = false;
    state.fold = shared.options.fold;
    state.quiet_after = shared.options.quiet_after;
    state.charge = charge;
    state.charge_overlays();
    state.unsynced_rename = Some(shared.path.clone());
    shared.publish(state);
    state.sync_rename()?;
    Ok(copy.stats)
}
