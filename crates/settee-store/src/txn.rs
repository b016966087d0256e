//! The writer's state and the transaction that update closures work on.
//!
//! Appended bytes collect in a buffer (flushed to the file, unsynced, past 1 MiB) with a
//! running checksum of everything since the last commit. Tree nodes built since the last
//! commit stay in memory under virtual offsets; a commit appends the ones its roots reach
//! and, once its callers are answered, moves them into the shared cache, so that a freshly
//! written node is seldom read back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::file::{blob_bytes, BlobRef, NodeSource, StoreFile};
use crate::format::{encode_record, Header, Ptr, RecordKind, Root, BLOCK, RECORD_HEAD};
use crate::held::{latest_in, Held, HeldMark, HOLD_MAX_ACTIONS, HOLD_MAX_PER_TREE};
use crate::node::{ChildPiece, Node};
use crate::overlay::{Charge, FoldLimits, LogBuf, LogRecord, Overlay};
use crate::snapshot::SnapState;
use crate::tree::cursor::{lookup, lookup_many, Entry, Range};
use crate::tree::modify::{modify, NodeSink};
use crate::tree::reduce::{reduce_range, KeyRange};
use crate::tree::{Action, Bound, RangeOptions, Reduction, TreeSpec};

static NEXT_INCARNATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_incarnation() -> u64 {
    NEXT_INCARNATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A blob appended by [`crate::Store::append_blob`] ahead of the update that refers to it.
/// Only [`Txn::adopt`] turns it into a [`BlobRef`], checking that it still exists. It keeps
/// the file it was written to open, so that a compaction that moves the store to a new file
/// before the blob is adopted does not lose it.
#[derive(Clone)]
pub struct LooseBlob {
    blob: BlobRef,
    incarnation: u64,
    file: Arc<StoreFile>,
}

impl std::fmt::Debug for LooseBlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LooseBlob")
            .field("blob", &self.blob)
            .field("incarnation", &self.incarnation)
            .finish()
    }
}

impl PartialEq for LooseBlob {
    fn eq(&self, other: &LooseBlob) -> bool {
        (self.blob, self.incarnation) == (other.blob, other.incarnation)
    }
}

impl Eq for LooseBlob {}

/// Unsynced appended bytes are written to the file once the buffer holds this many.
const FLUSH_BYTES: usize = 1 << 20;
/// Zeros for padding and for the reserve, written from here rather than from new buffers.
static ZEROS: [u8; 256 << 10] = [0; 256 << 10];

/// Bounds of the zeros written ahead of the appends: an eighth of the file, so that a busy
/// database extends its file rarely, but never more than the file already holds, so that
/// a small one stays small (an empty database takes 12 KiB a file, not 72).
const MIN_RESERVE: u64 = 64 << 10;
pub(crate) const MAX_RESERVE: u64 = 8 << 20;

/// How many zeros to write ahead of a file that ends at `end`.
fn reserve_len(end: u64) -> u64 {
    (end / 8)
        .clamp(MIN_RESERVE, MAX_RESERVE)
        .min(end.max(BLOCK))
}

/// Blobs are stored compressed only when that saves at least 1/8 of their size.
fn worth_compressing(raw: usize, compressed: usize) -> bool {
    compressed + raw / 8 <= raw
}

/// The append position of a file: what has been appended since the last commit.
pub(crate) struct Appender {
    pub file: Arc<StoreFile>,
    /// Changes whenever appended-but-uncommitted bytes are thrown away, so that references
    /// to them can be recognised as stale. Unique across files too.
    pub incarnation: u64,
    committed_end: u64,
    /// End of the zeros written ahead of the appends ([`Appender::reserve`]).
    reserved_end: u64,
    buf: Vec<u8>,
    buf_start: u64,
    crc: crc32fast::Hasher,
}

impl Appender {
    /// Appends after `committed_end`; the file holds only zeros from there to
    /// `reserved_end`.
    pub fn new(file: Arc<StoreFile>, committed_end: u64, reserved_end: u64) -> Appender {
        Appender {
            file,
            incarnation: next_incarnation(),
            committed_end,
            reserved_end: reserved_end.max(committed_end),
            buf: Vec::new(),
            buf_start: committed_end,
            crc: crc32fast::Hasher::new(),
        }
    }

    fn end(&self) -> u64 {
        self.buf_start + self.buf.len() as u64
    }

    /// Bytes appended since the last commit.
    pub fn appended(&self) -> u64 {
        self.end() - self.committed_end
    }

    /// Checksums what was added to the buffer from `start` on and writes the buffer out
    /// once it is big enough.
    fn pushed_from(&mut self, start: usize) -> Result<()> {
        self.crc.update(&self.buf[start..]);
        if self.buf.len() >= FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .backend
                .write_all_at(&self.buf, self.buf_start)
                .map_err(Error::io("append"))?;
            self.buf_start += self.buf.len() as u64;
            self.buf.clear();
            if self.buf_start > self.reserved_end {
                self.reserve();
            }
        }
        Ok(())
    }

    /// Writes zeros past the end of the file, so that the commits that follow overwrite
    /// blocks the file already has: their syncs then record no new file size or extent,
    /// which would cost the file system a journal commit each. The zeros are synced with
    /// the commit that wrote them; a file opened with a zero tail keeps it. Best effort: a
    /// full disk leaves the zeros unwritten and the appends going as before.
    fn reserve(&mut self) {
        let end = self.buf_start;
        let target = (end + reserve_len(end)).next_multiple_of(BLOCK);
        self.reserved_end = match self.write_zeros(end, target) {
            Ok(()) => target,
            Err(_) => end,
        };
    }

    /// Writes zeros over `[from, to)` from one shared block of zeros: a fresh buffer as big
    /// as a reserve would cost a page fault per page each time.
    fn write_zeros(&self, from: u64, to: u64) -> std::io::Result<()> {
        let mut at = from;
        while at < to {
            let n = (to - at).min(ZEROS.len() as u64);
            self.file.backend.write_all_at(&ZEROS[..n as usize], at)?;
            at += n;
        }
        Ok(())
    }

    /// Cuts the reserved zeros off the file (a compacted file is handed over as small as
    /// it can be). Best effort: a zero tail is harmless.
    pub fn release_reserve(&mut self) {
        if self.reserved_end > self.end()
            && self.buf.is_empty()
            && self.file.backend.truncate(self.end()).is_ok()
        {
            self.reserved_end = self.end();
        }
    }

    /// Appends one record and returns where it is.
    pub fn append(&mut self, kind: RecordKind, payload: &[u8]) -> Result<Ptr> {
        if payload.len() > (u32::MAX as usize) - RECORD_HEAD {
            return Err(Error::TooLarge {
                len: payload.len() as u64,
            });
        }
        let (offset, start) = (self.end(), self.buf.len());
        encode_record(&mut self.buf, kind, payload);
        let len = (self.buf.len() - start) as u32;
        self.pushed_from(start)?;
        Ok(Ptr { offset, len })
    }

    /// Reads a record, whether committed, flushed-but-uncommitted or still buffered.
    pub fn read_record(&self, ptr: Ptr) -> Result<(RecordKind, Vec<u8>)> {
        if ptr.offset < self.buf_start {
            return self.file.read_record_below(ptr, self.buf_start);
        }
        let start = (ptr.offset - self.buf_start) as usize;
        let bytes = start
            .checked_add(ptr.len as usize)
            .and_then(|end| self.buf.get(start..end))
            .ok_or_else(|| Error::corrupted(ptr.offset, "pointer past the end of the file"))?;
        let (kind, payload) = crate::format::decode_record(bytes, ptr.offset)?;
        Ok((kind, payload.to_vec()))
    }

    /// Writes padding and `header`, filling in its region fields, and syncs.
    pub fn commit(&mut self, header: &mut Header) -> Result<u64> {
        let (pad, start) = ((BLOCK - self.end() % BLOCK) % BLOCK, self.buf.len());
        self.buf.extend_from_slice(&ZEROS[..pad as usize]);
        self.pushed_from(start)?;
        header.data_start = self.committed_end;
        header.region_crc = std::mem::take(&mut self.crc).finalize();
        let bytes = header.encode();
        self.buf.extend_from_slice(&bytes);
        self.flush()?;
        let synced = std::time::Instant::now();
        self.file.backend.sync().map_err(Error::io("sync"))?;
        let micros = synced.elapsed().as_secs_f64() * 1e6;
        settee_metrics::inc(settee_metrics::Metric::FsyncCount);
        settee_metrics::observe(settee_metrics::Metric::FsyncTime, micros);
        settee_metrics::inc(settee_metrics::Metric::Commits);
        self.committed_end = self.end();
        self.file.set_committed(self.committed_end);
        Ok(self.committed_end)
    }

    /// Gives back the buffer's room.
    fn shrink(&mut self) {
        self.buf.shrink_to_fit();
    }

    /// Forgets everything appended since the last commit and cuts it off the file.
    pub fn rollback(&mut self) {
        self.incarnation = next_incarnation();
        self.buf.clear();
        self.buf_start = self.committed_end;
        self.reserved_end = self.committed_end;
        self.crc = crc32fast::Hasher::new();
        // Best effort, synced so that a commit reported as failed cannot reappear after a
        // crash. If this fails, recovery still checks the tail, and the next commit
        // overwrites it.
        if self.file.backend.truncate(self.committed_end).is_ok() {
            let _ = self.file.backend.sync();
        }
    }
}

/// Where a fold made in slices has got to: the logged tree it is in, and the last key of
/// that tree folded.
#[derive(Clone, Debug, Default)]
struct Sweep {
    tree: usize,
    after: Option<Vec<u8>>,
}

/// A store whose fold meets damage logs its changes until they take this many times the
/// bytes a fold would begin at; then it refuses writes until salvaged.
const BLOCKED_LOG_FACTOR: u64 = 8;

/// Nodes built since the last commit live only in memory, under offsets from here up, so
/// that a commit writes only the nodes its roots still reach (a group of updates that all
/// rewrite one path writes it once).
const VIRTUAL_BASE: u64 = 1 << 62;

fn is_virtual(ptr: Ptr) -> bool {
    ptr.offset >= VIRTUAL_BASE
}

/// What reads of one logged tree found in its nodes, by key.
type NodeReads = HashMap<Box<[u8]>, Option<Entry>>;

/// The part of a commit that readers do not need, left until its callers are answered:
/// readers find a node the cache lacks in the file, and runs not yet merged read the same.
#[derive(Default)]
struct AfterCommit {
    /// The file the commit wrote, whose node cache entries these are.
    file: Option<Arc<StoreFile>>,
    /// Nodes the commit wrote, by offset, for the node cache.
    written: Vec<(u64, Arc<Node>)>,
    /// Offsets of nodes the commit superseded, to leave the node cache.
    superseded: Vec<u64>,
    /// The overlays' runs are to be merged.
    merge: bool,
    /// The state snapshots saw before the commit: it may hold the last references to runs
    /// merged since (the writer's own overlays as of then share them), which take a while
    /// to free.
    seen: Option<Arc<SnapState>>,
}

/// Everything the single writer of a file owns.
pub(crate) struct WriterState {
    pub app: Appender,
    /// Nodes built since the last commit, by virtual offset.
    virtual_nodes: HashMap<u64, Arc<Node>>,
    next_virtual: u64,
    virtual_bytes: u64,
    pub schema: Arc<[TreeSpec]>,
    pub header: Header,
    pub roots: Vec<Option<Root>>,
    pub meta: Vec<u8>,
    pub node_size: usize,
    pub compress_blobs: bool,
    pub dirty: bool,
    /// Small modifications not yet applied to their trees (see [`crate::held`]).
    pub held: Held,
    /// A file renamed into place whose directory entry is not yet known to be durable.
    pub unsynced_rename: Option<std::path::PathBuf>,
    /// Offsets of written nodes that the pending changes replace: once they are committed,
    /// nothing reaches them from the newest roots, and they leave the node cache.
    superseded: Vec<u64>,
    /// What the last commit left for after its answer ([`WriterState::finish_commit`]).
    after: AfterCommit,
    /// Each tree's logged changes not yet folded into its nodes (see [`crate::overlay`]);
    /// empty for trees that are not logged.
    pub overlays: Vec<Overlay>,
    /// The overlays as of the last commit, which its snapshots show.
    pub committed_overlays: Vec<Overlay>,
    /// The changes to logged trees since the last commit, for its log record.
    log: LogBuf,
    /// Log records chained back from the last commit's header.
    log_records: u64,
    /// Logged trees are written straight to their nodes (a compaction's copy).
    pub direct: bool,
    /// When logged changes are folded into the nodes.
    pub fold: FoldLimits,
    /// The next commit folds the logged changes whatever their size (a quiet store's).
    fold_asked: bool,
    /// A fold met a damaged node: changes stay logged from then on (until the file is
    /// salvaged), since every fold would meet it again.
    fold_blocked: bool,
    /// Where a fold made in slices has got to (see [`FoldLimits::slice`]).
    sweep: Option<Sweep>,
    /// A fold in slices went through every tree: the next commit writes the log again
    /// from the changes left.
    relog: bool,
    /// A sync failed and the file has not yet been read again (see `Store`'s commit).
    pub reopen_needed: bool,
    /// This store's share of the process's budget for logged changes, if it has one.
    pub charge: Option<Charge>,
    /// When the store last committed or tried to.
    quiet_since: std::time::Instant,
    /// How long after `quiet_since` the store tidies up (see [`crate::StoreOptions::quiet_after`]).
    pub quiet_after: std::time::Duration,
    /// The store has tidied up since its last commit.
    tidy: bool,
    /// What reads of logged trees found in their nodes since the last commit, per tree: a
    /// change of a key just read (an update reads a document before writing it) remembers
    /// the nodes' value from here instead of descending again, and does not search the
    /// overlay, which had no change of the key when it was read (a read is taken out here
    /// as its key changes). Forgotten whenever a logged tree's nodes change
    /// ([`WriterState::modify_now`]) or go back ([`WriterState::rollback_to`],
    /// [`WriterState::abandon`]), and at each commit, which bounds it.
    node_reads: Mutex<Vec<NodeReads>>,
}

impl WriterState {
    pub fn new(
        app: Appender,
        schema: Arc<[TreeSpec]>,
        header: Header,
        node_size: usize,
        compress_blobs: bool,
    ) -> WriterState {
        let mut roots = header.roots.clone();
        if roots.len() < schema.len() {
            roots.resize(schema.len(), None);
        }
        let meta = header.meta.clone();
        let schema_len = schema.len();
        WriterState {
            app,
            virtual_nodes: HashMap::new(),
            next_virtual: VIRTUAL_BASE,
            virtual_bytes: 0,
            schema,
            header,
            roots,
            meta,
            node_size,
            compress_blobs,
            dirty: false,
            held: Held::default(),
            unsynced_rename: None,
            superseded: Vec::new(),
            after: AfterCommit::default(),
            overlays: vec![Overlay::default(); schema_len],
            committed_overlays: vec![Overlay::default(); schema_len],
            log: LogBuf::default(),
            log_records: 0,
            direct: false,
            fold: FoldLimits::default(),
            fold_asked: false,
            fold_blocked: false,
            sweep: None,
            relog: false,
            reopen_needed: false,
            charge: None,
            quiet_since: std::time::Instant::now(),
            quiet_after: std::time::Duration::from_secs(10),
            tidy: false,
            node_reads: Mutex::new(vec![HashMap::new(); schema_len]),
        }
    }

    /// Reads the file again from its newest valid header, as opening does, cutting off what
    /// follows it, and starts over from there: after a failed sync, when neither the file's
    /// tail nor this state can be trusted.
    pub fn reopen(&mut self, path: &std::path::Path) -> Result<()> {
        let backend = self.app.file.backend.clone();
        let found = crate::file::recover(backend.as_ref(), path)?;
        // The file must still hold every commit acknowledged: one that went back would
        // lose them, and is refused (writes stay refused until it can be read right).
        if found.header.generation < self.header.generation {
            return Err(Error::corrupted(
                found.end,
                "read again after a failed sync, the file ends before its last acknowledged commit",
            ));
        }
        if backend.len().map_err(Error::io("file length"))? > found.end {
            backend
                .truncate(found.end)
                .map_err(Error::io("cut off what a failed sync left"))?;
            backend.sync().map_err(Error::io("sync"))?;
        }
        self.app.file.set_committed(found.end);
        let app = Appender::new(self.app.file.clone(), found.end, found.end);
        let mut fresh = WriterState::new(
            app,
            self.schema.clone(),
            found.header,
            self.node_size,
            self.compress_blobs,
        );
        (fresh.fold, fresh.quiet_after) = (self.fold, self.quiet_after);
        fresh.replay_log(path)?;
        fresh.unsynced_rename = self.unsynced_rename.take();
        fresh.charge = self.charge.take();
        fresh.charge_overlays();
        *self = fresh;
        Ok(())
    }

    /// Replays the log records chained from the header into the overlays: the logged
    /// changes committed since their trees were last folded. A damaged record costs only its
    /// own changes: it is noted, and the chain goes on from the record the commit before it
    /// named (see [`crate::file::log_before`]).
    pub fn replay_log(&mut self, path: &std::path::Path) -> Result<()> {
        let mut records = Vec::new();
        let mut next = self.header.log;
        while let Some(ptr) = next {
            match self.read_log_record(ptr) {
                Ok(record) => {
                    // Each record points strictly backwards, so the walk ends.
                    next = record.prev;
                    records.push((ptr, record));
                }
                Err(e @ Error::Corrupted { .. }) => {
                    self.app.file.note_damage(&e);
                    let file = self.app.file.clone();
                    next = crate::file::log_before(
                        file.backend.as_ref(),
                        ptr.offset,
                        self.header.salt,
                        path,
                        &|e| file.note_damage(&e),
                    )?;
                }
                Err(e) => return Err(e),
            }
        }
        self.log_records = records.first().map_or(0, |(_, r)| r.records);
        for (ptr, record) in records.into_iter().rev() {
            for (tree, action) in &record.changes {
                if !self.spec(*tree)?.is_logged() {
                    return Err(Error::corrupted(
                        ptr.offset,
                        "a log record changes a tree that is not logged",
                    ));
                }
                self.record_replayed(*tree, action)?;
            }
        }
        self.keep_overlays();
        Ok(())
    }

    fn read_log_record(&self, ptr: Ptr) -> Result<LogRecord> {
        let (kind, payload) = self.app.read_record(ptr)?;
        if kind != RecordKind::Log {
            return Err(Error::corrupted(
                ptr.offset,
                "the log pointer names a record that is not a log record",
            ));
        }
        LogRecord::decode(&payload, ptr.offset)
    }

    pub fn spec(&self, tree: usize) -> Result<&TreeSpec> {
        self.schema.get(tree).ok_or(Error::NoSuchTree(tree))
    }

    /// Bytes a commit now would write, at most (appended blobs plus in-memory nodes).
    pub fn uncommitted_bytes(&self) -> u64 {
        self.app.appended() + self.virtual_bytes + self.held.bytes() + self.log.len() as u64
    }

    /// Commits all pending changes with `flags`; on failure the state returns to the last
    /// commit and the error is returned.
    pub fn commit(&mut self, flags: u32) -> Result<Header> {
        (self.quiet_since, self.tidy) = (std::time::Instant::now(), false);
        self.finish_commit();
        let relog = self.relog;
        let mut written = Vec::new();
        self.forget_node_reads();
        // Held modifications run the reducer here rather than in their updates: a panic
        // in it must fail this commit, not end the writer.
        let held = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.apply_all_held().and_then(|()| self.log_or_fold())
        }))
        .unwrap_or_else(|_| {
            Err(Error::Panicked(
                "applying the group's modifications panicked; the group was dropped".into(),
            ))
        });
        let result = held.and_then(|(log, log_records)| {
            let roots = self.write_reachable(&mut written)?;
            let mut header = Header {
                salt: self.header.salt,
                flags,
                generation: self.header.generation + 1,
                data_start: 0,
                region_crc: 0,
                roots,
                meta: self.meta.clone(),
                log,
            };
            self.app.commit(&mut header)?;
            self.sync_rename()?;
            Ok((header, log_records))
        });
        match result {
            Ok((header, log_records)) => {
                std::mem::swap(&mut self.superseded, &mut self.after.superseded);
                self.after.written = written;
                self.after.file = Some(self.app.file.clone());
                self.after.merge = true;
                self.header = header.clone();
                self.roots = header.roots.clone();
                self.roots
                    .resize(self.roots.len().max(self.schema.len()), None);
                self.clear_virtual();
                self.dirty = false;
                self.log_records = log_records;
                self.keep_overlays();
                self.fold_asked = false;
                self.charge_overlays();
                Ok(header)
            }
            Err(e) => {
                self.fold_asked = false;
                self.abandon();
                // The log was not written again: the next commit does it.
                self.relog = relog;
                Err(e)
            }
        }
    }

    /// Makes the overlays as they are now the ones snapshots show, their recent changes
    /// frozen so that the two share them (merged after the answer).
    fn keep_overlays(&mut self) {
        self.overlays.iter_mut().for_each(Overlay::freeze);
        self.committed_overlays = self.overlays.clone();
    }

    /// Holds the state snapshots saw before the last commit until the commit is finished
    /// ([`WriterState::finish_commit`]): letting it go may free large runs.
    pub fn retire(&mut self, seen: Arc<SnapState>) {
        self.after.seen = Some(seen);
    }

    /// Does what the last commit left for after its callers are answered, if anything: the
    /// node cache learns the nodes it wrote and forgets those it superseded, what
    /// snapshots saw before it is let go, and the overlays' runs are merged. A writer calls
    /// this once it has answered, and every commit calls it first, so at most one commit's
    /// share waits. True when runs were merged and nothing has changed since the commit:
    /// the overlays snapshots show are then the merged ones, for the caller to publish, so
    /// that the runs merged away are not kept beside them.
    pub fn finish_commit(&mut self) -> bool {
        let after = &mut self.after;
        if let Some(file) = after.file.take() {
            for offset in after.superseded.drain(..) {
                file.cache.remove(file.cache_id, offset);
            }
            for (offset, node) in std::mem::take(&mut after.written) {
                file.cache.insert(file.cache_id, offset, node);
            }
        }
        after.seen = None;
        if !std::mem::take(&mut after.merge) {
            return false;
        }
        let mut merged = false;
        for overlay in &mut self.overlays {
            merged |= overlay.merge_runs();
        }
        if !merged || self.dirty {
            return false;
        }
        // Nothing applied since the commit: its overlays, merged, are still what it made.
        self.committed_overlays = self.overlays.clone();
        true
    }

    /// Charges the overlays' memory to the budget.
    pub fn charge_overlays(&mut self) {
        if let Some(charge) = &mut self.charge {
            charge.set(self.overlays.iter().map(Overlay::memory).sum());
        }
    }

    /// When this store will have been quiet long enough to tidy up, unless it has since
    /// its last commit.
    pub fn tidy_at(&self) -> Option<std::time::Instant> {
        // A spell too long to reach (`Duration::MAX` for never) never ends.
        (!self.tidy)
            .then(|| self.quiet_since.checked_add(self.quiet_after))
            .flatten()
    }

    /// Whether the store has tidied up since its last commit.
    pub fn has_tidied(&self) -> bool {
        self.tidy
    }

    /// Records that the store has tidied up (until it commits again, there is nothing to
    /// do), and gives back the room its buffers and tables kept from its largest commits:
    /// a quiet store should hold none of it, however many are open.
    pub fn tidied(&mut self) {
        self.tidy = true;
        self.app.shrink();
        self.virtual_nodes.shrink_to_fit();
        self.superseded.shrink_to_fit();
        self.after.superseded.shrink_to_fit();
        self.log.shrink();
        self.held.shrink();
        self.node_reads()
            .iter_mut()
            .for_each(HashMap::shrink_to_fit);
    }

    /// Makes the next commit fold the logged changes, if there are any.
    pub fn ask_fold(&mut self) {
        if self.overlays.iter().any(|o| !o.is_empty()) {
            self.fold_asked = true;
            self.dirty = true;
        }
    }

    /// Folds the logged changes into the nodes if enough have gathered, or else appends
    /// this commit's log record; returns the header's log pointer and the records chained
    /// from it.
    fn log_or_fold(&mut self) -> Result<(Option<Ptr>, u64)> {
        if self.log.is_empty() && !self.fold_asked && !self.relog {
            return Ok((self.header.log, self.log_records));
        }
        let bytes: u64 = self.overlays.iter().map(Overlay::bytes).sum();
        let changes: usize = self.overlays.iter().map(Overlay::len).sum();
        let limits = self.fold;
        let due = self.log_records >= limits.records || self.gathered(bytes, 1);
        // Slices that fall behind the changes coming in give way to a whole fold.
        let behind = self.sweep.is_some()
            && (self.log_records >= limits.records.saturating_mul(4) || self.gathered(bytes, 2));
        let fold = !self.fold_blocked
            && (self.fold_asked
                || (due && changes <= limits.slice)
                || behind
                || self.charge.as_ref().is_some_and(Charge::over));
        if !fold && due && !self.fold_blocked && self.sweep.is_none() && !self.relog {
            self.sweep = Some(Sweep::default());
        }
        if fold {
            (self.sweep, self.relog) = (None, false);
            // A fold that meets a damaged node is undone and the changes stay logged: the
            // store keeps taking writes (its log grows until the damage is salvaged).
            let saved = self.savepoint();
            match self.fold() {
                Ok(()) => return Ok((None, 0)),
                Err(e @ Error::Corrupted { .. }) => {
                    self.fold_met_damage(&e, saved);
                    if self.log.is_empty() {
                        return Ok((self.header.log, self.log_records));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if self.fold_blocked && bytes >= limits.bytes.saturating_mul(BLOCKED_LOG_FACTOR) {
            return Err(Error::corrupted(self.header.log.map_or(0, |p| p.offset), "the file is damaged where its logged changes must be folded, and its log is full: salvage it"));
        }
        if self.relog {
            return self.relog_changes();
        }
        let records = self.log_records + 1;
        let payload = self.log.take_record(self.header.log, records);
        Ok((Some(self.app.append(RecordKind::Log, &payload)?), records))
    }

    /// Writes the log again as one record of the changes left, once a fold in slices has
    /// gone through every tree: the records before named changes now in the nodes (and
    /// kept the nodes from changing under them otherwise). None left, no log at all.
    fn relog_changes(&mut self) -> Result<(Option<Ptr>, u64)> {
        self.relog = false;
        self.log.truncate(0);
        self.overlays.iter_mut().for_each(Overlay::relogged);
        if self.overlays.iter().all(Overlay::is_empty) {
            return Ok((None, 0));
        }
        let mut log = LogBuf::default();
        for (tree, overlay) in self.overlays.iter().enumerate() {
            for action in overlay.actions() {
                log.push(tree, &action);
            }
        }
        let payload = log.take_record(None, 1);
        Ok((Some(self.app.append(RecordKind::Log, &payload)?), 1))
    }

    /// Undoes a fold (whole or a slice) that met a damaged node, back to `saved`: the
    /// changes stay logged from then on, and no longer count against the budget other
    /// stores share (they would make every other store fold at each commit).
    fn fold_met_damage(&mut self, e: &Error, saved: Savepoint) {
        self.app.file.note_damage(e);
        self.rollback_to(saved);
        (self.fold_asked, self.fold_blocked, self.charge) = (false, true, None);
    }

    /// Whether a fold in slices is under way ([`WriterState::fold_slice`]).
    pub fn sweeping(&self) -> bool {
        self.sweep.is_some()
    }

    /// Folds the next slice of a fold made in slices (at most [`FoldLimits::slice`]
    /// changes, in key order from where the last one stopped) into the nodes, for the next
    /// commit. Once every tree is done, that commit writes the log again.
    pub fn fold_slice(&mut self) -> Result<()> {
        let Some(mut sweep) = self.sweep.take() else {
            return Ok(());
        };
        let mut left = self.fold.slice.max(1);
        while left > 0 && sweep.tree < self.overlays.len() {
            let slice = self.overlays[sweep.tree].slice(sweep.after.as_deref(), left);
            let actions = &slice.actions;
            let Some(last) = actions.last() else {
                sweep = Sweep {
                    tree: sweep.tree + 1,
                    after: None,
                };
                continue;
            };
            let saved = self.savepoint();
            match self.modify_now(sweep.tree, actions) {
                Ok(_) => {}
                Err(e @ Error::Corrupted { .. }) => {
                    self.fold_met_damage(&e, saved);
                    return Ok(());
                }
                Err(e) => {
                    self.rollback_to(saved);
                    return Err(e);
                }
            }
            sweep.after = Some(last.key().to_vec());
            self.overlays[sweep.tree].folded(&slice);
            left = left.saturating_sub(actions.len());
        }
        if sweep.tree < self.overlays.len() {
            self.sweep = Some(sweep);
        } else {
            // Even with nothing folded by this call, a commit must write the log again.
            (self.relog, self.dirty) = (true, true);
        }
        self.charge_overlays();
        Ok(())
    }

    /// Whether the logged changes, `bytes` of them, have reached `times` the fold limits,
    /// each tree's scaled to its size in the nodes ([`FoldLimits::scale`]).
    fn gathered(&self, bytes: u64, times: u64) -> bool {
        let limits = self.fold;
        let mut widest = 1;
        for (t, overlay) in self.overlays.iter().enumerate() {
            let root = self.roots.get(t).and_then(Option::as_ref);
            let scale = limits
                .scale(root.map_or(0, |r| r.count))
                .saturating_mul(times);
            if overlay.len() as u64 >= (limits.changes as u64).saturating_mul(scale) {
                return true;
            }
            widest = widest.max(scale);
        }
        bytes >= limits.bytes.saturating_mul(widest)
    }

    /// Applies every logged change to its tree's nodes, in one pass per tree.
    fn fold(&mut self) -> Result<()> {
        for tree in 0..self.overlays.len() {
            // Taken even when it holds no change: what it knows of the log goes with it.
            let actions = std::mem::take(&mut self.overlays[tree]).actions();
            if !actions.is_empty() {
                self.modify_now(tree, &actions)?;
            }
        }
        self.log.truncate(0);
        Ok(())
    }

    /// Appends every in-memory node the roots reach, children first, and returns the roots
    /// with real pointers. `written` collects the new nodes for the cache.
    fn write_reachable(
        &mut self,
        written: &mut Vec<(u64, Arc<Node>)>,
    ) -> Result<Vec<Option<Root>>> {
        let mut done = HashMap::new();
        let mut roots = self.roots.clone();
        for root in roots.iter_mut().flatten() {
            root.ptr = self.write_node_tree(root.ptr, &mut done, written)?;
        }
        Ok(roots)
    }

    fn write_node_tree(
        &mut self,
        ptr: Ptr,
        done: &mut HashMap<u64, Ptr>,
        written: &mut Vec<(u64, Arc<Node>)>,
    ) -> Result<Ptr> {
        if !is_virtual(ptr) {
            return Ok(ptr);
        }
        if let Some(real) = done.get(&ptr.offset) {
            return Ok(*real);
        }
        let node = self
            .virtual_nodes
            .get(&ptr.offset)
            .cloned()
            .ok_or_else(|| Error::corrupted(ptr.offset, "in-memory node missing"))?;
        let (real, stored) = if node.is_leaf() {
            let real = self.app.append(RecordKind::Leaf, node.payload())?;
            (real, node)
        } else {
            let mut rewritten = Vec::new();
            for i in 0..node.len() {
                if is_virtual(node.child_ptr(i)) {
                    let mut c = node.child_entry(i);
                    c.ptr = self.write_node_tree(c.ptr, done, written)?;
                    rewritten.push((i, c));
                }
            }
            let mut next = rewritten.iter().peekable();
            let pieces: Vec<ChildPiece> = (0..node.len())
                .map(|i| match next.peek() {
                    Some((at, c)) if *at == i => {
                        next.next();
                        ChildPiece::New(c)
                    }
                    _ => ChildPiece::Kept(&node, i),
                })
                .collect();
            let built = Node::build_inner(&pieces);
            let real = self.app.append(RecordKind::Inner, built.payload())?;
            (real, Arc::new(built))
        };
        done.insert(ptr.offset, real);
        written.push((real.offset, stored));
        Ok(real)
    }

    /// Forgets every in-memory node; only valid when no root refers to one.
    pub fn clear_virtual(&mut self) {
        self.virtual_nodes.clear();
        self.next_virtual = VIRTUAL_BASE;
        self.virtual_bytes = 0;
    }

    /// Makes a pending rename of this file durable.
    pub fn sync_rename(&mut self) -> Result<()> {
        if let Some(path) = &self.unsynced_rename {
            crate::backend::sync_parent(path)
                .map_err(Error::io("sync directory after compaction"))?;
            self.unsynced_rename = None;
        }
        Ok(())
    }

    /// Drops every change since the last commit.
    pub fn abandon(&mut self) {
        self.app.rollback();
        // Slices folded since the last commit are back in the overlays: start again.
        self.sweep = None;
        self.clear_virtual();
        self.held.clear();
        self.overlays = self.committed_overlays.clone();
        self.forget_node_reads();
        self.log.truncate(0);
        self.superseded.clear();
        self.roots = self.header.roots.clone();
        self.roots
            .resize(self.roots.len().max(self.schema.len()), None);
        self.meta = self.header.meta.clone();
        self.dirty = false;
    }

    pub fn write_blob(&mut self, data: &[u8]) -> Result<BlobRef> {
        let compressed = self.compress_blobs.then(|| lz4_flex::block::compress(data));
        let ptr = match compressed {
            Some(c) if worth_compressing(data.len(), c.len()) => {
                self.app.append(RecordKind::BlobLz4, &c)?
            }
            _ => self.app.append(RecordKind::Blob, data)?,
        };
        self.dirty = true;
        Ok(BlobRef {
            offset: ptr.offset,
            stored_len: ptr.len,
            len: data.len() as u64,
        })
    }

    /// Appends a blob record exactly as stored elsewhere (compaction's copy).
    pub fn append_raw_blob(
        &mut self,
        kind: RecordKind,
        payload: &[u8],
        len: u64,
    ) -> Result<BlobRef> {
        let ptr = self.app.append(kind, payload)?;
        self.dirty = true;
        Ok(BlobRef {
            offset: ptr.offset,
            stored_len: ptr.len,
            len,
        })
    }

    /// Modifies `tree`: a small modification is held until the commit (or until something
    /// needs the tree), a larger one applied at once after what the tree holds. Returns,
    /// per action, the value its key had just before it.
    pub fn modify(&mut self, tree: usize, actions: &[Action]) -> Result<Vec<Option<Vec<u8>>>> {
        if self.logs(tree)? && !self.dense(tree, actions)? {
            return actions.iter().map(|a| self.log_change(tree, a)).collect();
        }
        if !self.holds(tree, actions)? {
            self.apply_held(tree)?;
            return self.modify_now(tree, actions);
        }
        let old = (0..actions.len())
            .map(|i| self.value_before(tree, actions[i].key(), &actions[..i]))
            .collect::<Result<Vec<_>>>()?;
        self.hold(tree, actions);
        Ok(old)
    }

    /// Modifies `tree` as [`WriterState::modify`] does, without finding the values the keys
    /// had: a held modification then costs no lookups.
    pub fn apply(&mut self, tree: usize, actions: &[Action]) -> Result<()> {
        if self.logs(tree)? && !self.dense(tree, actions)? {
            return actions
                .iter()
                .try_for_each(|a| self.log_change(tree, a).map(drop));
        }
        if self.holds(tree, actions)? {
            self.hold(tree, actions);
            return Ok(());
        }
        self.apply_held(tree)?;
        self.modify_now(tree, actions).map(drop)
    }

    /// Forgets what every logged tree's nodes were read to hold: they may hold something
    /// else now, or their keys may have changed.
    fn forget_node_reads(&self) {
        self.node_reads().iter_mut().for_each(HashMap::clear);
    }

    /// What reads of logged trees found in their nodes since the last commit.
    fn node_reads(&self) -> std::sync::MutexGuard<'_, Vec<NodeReads>> {
        self.node_reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `tree`'s changes go to its log and overlay.
    fn logs(&self, tree: usize) -> Result<bool> {
        Ok(self.spec(tree)?.is_logged() && !self.direct)
    }

    /// Whether a modification of a logged tree is better written straight to its nodes: a
    /// large one whose keys fall close together there (an ordered load: few leaves for
    /// many keys), and that no logged change shadows.
    fn dense(&self, tree: usize, actions: &[Action]) -> Result<bool> {
        const MIN_ACTIONS: usize = 64;
        // A modification that goes to the nodes is never held (held ones are read past by
        // `get` on logged trees), which only this keeps true.
        const _: () = assert!(MIN_ACTIONS > HOLD_MAX_ACTIONS);
        /// Entries already in the keys' span, per key: below this, the leaves the
        /// modification rewrites hold mostly its own keys.
        const SPAN_PER_KEY: u64 = 4;
        if actions.len() < MIN_ACTIONS {
            return Ok(false);
        }
        let span = actions
            .iter()
            .fold((actions[0].key(), actions[0].key()), |(lo, hi), a| {
                (lo.min(a.key()), hi.max(a.key()))
            });
        let (lo, hi) = (
            Bound::Included(span.0.to_vec()),
            Bound::Included(span.1.to_vec()),
        );
        let spec = self.spec(tree)?;
        let in_span = reduce_range(
            self,
            spec,
            self.roots[tree].as_ref(),
            &KeyRange { lo: &lo, hi: &hi },
        )?
        .count;
        if in_span > SPAN_PER_KEY * actions.len() as u64 {
            return Ok(false);
        }
        Ok(!self.overlays[tree].shadows(span, actions))
    }

    /// Logs `action` on a logged tree and records it in its overlay; returns the key's
    /// value just before.
    fn log_change(&mut self, tree: usize, action: &Action) -> Result<Option<Vec<u8>>> {
        let before = self.record(tree, action)?;
        self.log.push(tree, action);
        self.dirty = true;
        Ok(before)
    }

    /// Records `action` in `tree`'s overlay.
    fn record(&mut self, tree: usize, action: &Action) -> Result<Option<Vec<u8>>> {
        // A key read from the nodes since it last changed has no change (see
        // `WriterState::get`): the overlay need not be searched for one.
        let read = self.node_reads()[tree].remove(action.key());
        if let Some(read) = read {
            let before = read.map(|e| e.value().to_vec());
            return Ok(self.overlays[tree].record_unchanged(action, before));
        }
        let mut overlay = std::mem::take(&mut self.overlays[tree]);
        let before = overlay.record(action, |k| {
            Ok(self.lookup_applied(tree, k)?.map(|e| e.value().to_vec()))
        });
        self.overlays[tree] = overlay;
        before
    }

    /// Like [`WriterState::record`], for a change replayed at opening: a key whose node is
    /// damaged counts as absent from the nodes (and the damage is noted), so that the change
    /// itself is still served.
    fn record_replayed(&mut self, tree: usize, action: &Action) -> Result<()> {
        let mut overlay = std::mem::take(&mut self.overlays[tree]);
        let file = self.app.file.clone();
        let recorded = overlay.record(action, |k| match self.lookup_applied(tree, k) {
            Ok(entry) => Ok(entry.map(|e| e.value().to_vec())),
            Err(e @ Error::Corrupted { .. }) => {
                file.note_damage(&e);
                Ok(None)
            }
            Err(e) => Err(e),
        });
        self.overlays[tree] = overlay;
        recorded.map(drop)
    }

    /// Count and reduction of `tree` between `lo` and `hi`, logged changes included.
    pub fn reduce(&self, tree: usize, lo: &Bound, hi: &Bound) -> Result<Reduction> {
        let spec = self.spec(tree)?;
        let nodes = reduce_range(self, spec, self.roots[tree].as_ref(), &KeyRange { lo, hi })?;
        self.overlays[tree].adjust(spec, nodes, lo, hi)
    }

    /// Whether `actions` are few enough to hold for `tree`.
    fn holds(&self, tree: usize, actions: &[Action]) -> Result<bool> {
        self.spec(tree)?;
        Ok(actions.len() <= HOLD_MAX_ACTIONS
            && self.held.len(tree) + actions.len() <= HOLD_MAX_PER_TREE)
    }

    fn hold(&mut self, tree: usize, actions: &[Action]) {
        self.held.push(tree, actions);
        self.dirty = true;
    }

    /// The value of `key` in `tree` with what is held and then `before` applied.
    fn value_before(&self, tree: usize, key: &[u8], before: &[Action]) -> Result<Option<Vec<u8>>> {
        let spec = self.spec(tree)?;
        Ok(
            match latest_in(before, spec, key).or_else(|| self.held.latest(spec, tree, key)) {
                Some(Action::Put(_, v)) => Some(v.clone()),
                Some(Action::Delete(_)) => None,
                None => self.lookup_applied(tree, key)?.map(|e| e.value().to_vec()),
            },
        )
    }

    /// The entry for `key` in `tree` as applied, not counting held actions.
    fn lookup_applied(&self, tree: usize, key: &[u8]) -> Result<Option<Entry>> {
        let spec = self.spec(tree)?;
        match &self.roots[tree] {
            Some(root) => lookup(self, spec, &self.node(root.ptr)?, key),
            None => Ok(None),
        }
    }

    /// The entries for many keys of `tree` as applied, in the order asked, the descents
    /// taking turns (see [`lookup_many`]) when there are enough of them to gain from it.
    fn lookup_applied_many(&self, tree: usize, keys: &[&[u8]]) -> Result<Vec<Option<Entry>>> {
        /// Fewer keys are looked up one after another: a few descents in turn cost more
        /// than they overlap.
        const IN_TURNS_FROM: usize = 32;
        let spec = self.spec(tree)?;
        match &self.roots[tree] {
            Some(root) if keys.len() >= IN_TURNS_FROM => {
                lookup_many(self, spec, &self.node(root.ptr)?, keys)
            }
            Some(root) => {
                let root = self.node(root.ptr)?;
                keys.iter().map(|k| lookup(self, spec, &root, k)).collect()
            }
            None => Ok(keys.iter().map(|_| None).collect()),
        }
    }

    /// What `key`'s entry in `tree` is without reading the nodes: its latest change in the
    /// overlay (a logged tree) or among the held actions (any other); `None` when only the
    /// nodes know.
    fn known(&self, spec: &TreeSpec, logs: bool, tree: usize, key: &[u8]) -> Option<Option<Entry>> {
        if let Some(entry) = self.overlays[tree].entry(key) {
            return Some(entry);
        }
        if logs {
            return None;
        }
        match self.held.latest(spec, tree, key)? {
            Action::Put(k, v) => Some(Some(Entry::new(Arc::new(Node::build_leaf(&[(k, v)])), 0))),
            Action::Delete(_) => Some(None),
        }
    }

    /// The entry for `key` in `tree`, held actions included.
    pub fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Entry>> {
        let (spec, logs) = (self.spec(tree)?, self.logs(tree)?);
        if let Some(entry) = self.known(spec, logs, tree, key) {
            return Ok(entry);
        }
        let entry = self.lookup_applied(tree, key)?;
        if logs {
            self.node_reads()[tree].insert(key.into(), entry.clone());
        }
        Ok(entry)
    }

    /// The entries for many keys of `tree`, held actions included, in the order asked: what
    /// [`WriterState::get`] gives for each, with the descents into the nodes taking turns so
    /// that their waits for memory overlap. A logged tree remembers what its nodes held, for
    /// the change that follows.
    pub fn get_many<K: AsRef<[u8]>>(&self, tree: usize, keys: &[K]) -> Result<Vec<Option<Entry>>> {
        let spec = self.spec(tree)?;
        let logs = self.logs(tree)?;
        let known: Vec<Option<Option<Entry>>> = keys
            .iter()
            .map(|k| self.known(spec, logs, tree, k.as_ref()))
            .collect();
        let unknown: Vec<&[u8]> = known
            .iter()
            .zip(keys)
            .filter(|(k, _)| k.is_none())
            .map(|(_, key)| key.as_ref())
            .collect();
        let mut applied = self.lookup_applied_many(tree, &unknown)?.into_iter();
        let mut reads = logs.then(|| self.node_reads());
        let mut found = Vec::with_capacity(keys.len());
        for (known, key) in known.into_iter().zip(keys) {
            let entry = match known {
                Some(entry) => entry,
                None => {
                    // One answer per key asked: a missing one must not pass for an absent key.
                    let entry = applied
                        .next()
                        .ok_or_else(|| Error::corrupted(0, "a lookup without answer"))?;
                    if let Some(reads) = reads.as_mut() {
                        reads[tree].insert(key.as_ref().into(), entry.clone());
                    }
                    entry
                }
            };
            found.push(entry);
        }
        Ok(found)
    }

    /// What an update, or a part of one, may change besides appending: roots, metadata,
    /// whether anything is uncommitted, and what is held.
    pub fn savepoint(&self) -> Savepoint {
        Savepoint {
            roots: self.roots.clone(),
            meta: self.meta.clone(),
            dirty: self.dirty,
            held: self.held.mark(),
            superseded: self.superseded.len(),
            overlays: self.overlays.clone(),
            logged: self.log.len(),
        }
    }

    /// Goes back to `saved` after a failure. Bytes appended since stay in the file
    /// unreferenced, as after any failed update.
    pub fn rollback_to(&mut self, saved: Savepoint) {
        (self.roots, self.meta, self.dirty) = (saved.roots, saved.meta, saved.dirty);
        self.held.undo_to(&saved.held);
        self.superseded.truncate(saved.superseded);
        self.overlays = saved.overlays;
        self.log.truncate(saved.logged);
        // The roots went back: node values read since may no longer be the nodes'.
        self.forget_node_reads();
    }

    /// Applies what `tree` holds.
    pub fn apply_held(&mut self, tree: usize) -> Result<()> {
        if self.held.len(tree) == 0 {
            return Ok(());
        }
        let actions = self.held.take(tree);
        let applied = self.modify_now(tree, &actions).map(drop);
        self.held.applied_during_update(tree, actions);
        applied
    }

    fn apply_all_held(&mut self) -> Result<()> {
        for tree in 0..self.schema.len() {
            self.apply_held(tree)?;
        }
        self.held.update_done();
        Ok(())
    }

    fn modify_now(&mut self, tree: usize, actions: &[Action]) -> Result<Vec<Option<Vec<u8>>>> {
        let spec = self.spec(tree)?.clone();
        if spec.is_logged() {
            self.node_reads()[tree].clear();
        }
        let root = self.roots[tree].clone();
        let (new_root, old) = modify(self, &spec, root.as_ref(), actions)?;
        self.roots[tree] = new_root;
        self.dirty = true;
        Ok(old)
    }
}

impl NodeSource for WriterState {
    fn node(&self, ptr: Ptr) -> Result<Arc<Node>> {
        if is_virtual(ptr) {
            return self
                .virtual_nodes
                .get(&ptr.offset)
                .cloned()
                .ok_or_else(|| Error::corrupted(ptr.offset, "in-memory node missing"));
        }
        self.app.file.node(ptr)
    }
}

impl NodeSink for WriterState {
    fn write_node(&mut self, node: Node) -> Result<Ptr> {
        let len = (node.payload().len() + RECORD_HEAD) as u64;
        if len > u64::from(u32::MAX) {
            return Err(Error::TooLarge { len });
        }
        let ptr = Ptr {
            offset: self.next_virtual,
            len: len as u32,
        };
        self.virtual_nodes.insert(ptr.offset, Arc::new(node));
        self.next_virtual += len;
        self.virtual_bytes += len;
        Ok(ptr)
    }

    fn node_size(&self) -> usize {
        self.node_size
    }

    fn superseded(&mut self, ptr: Ptr) {
        // An in-memory node was never cached; it is dropped with the others at the commit.
        if !is_virtual(ptr) {
            self.superseded.push(ptr.offset);
        }
    }
}

/// The state a failed update, or a failed part of one, is rolled back to.
pub(crate) struct Savepoint {
    roots: Vec<Option<Root>>,
    meta: Vec<u8>,
    dirty: bool,
    held: HeldMark,
    superseded: usize,
    overlays: Vec<Overlay>,
    logged: usize,
}

/// The view of a store that an update closure gets: reads see the closure's own changes
/// and those of closures before it in the same group commit.
pub struct Txn<'a> {
    pub(crate) state: &'a mut WriterState,
}

impl Txn<'_> {
    /// Runs `f` as a part of this update that fails alone: if it returns an error or
    /// panics, what it changed is undone and the update goes on from where it was, so that
    /// one update can apply several callers' changes and still fail only the one at fault.
    /// The outer `Err` is a panic's message.
    pub fn attempt<T, E>(
        &mut self,
        f: impl FnOnce(&mut Txn) -> std::result::Result<T, E>,
    ) -> std::result::Result<std::result::Result<T, E>, String> {
        let saved = self.state.savepoint();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f(&mut Txn {
                state: &mut *self.state,
            })
        })) {
            Ok(Ok(value)) => Ok(Ok(value)),
            Ok(Err(e)) => {
                self.state.rollback_to(saved);
                Ok(Err(e))
            }
            Err(panic) => {
                self.state.rollback_to(saved);
                Err(panic_message(panic.as_ref()))
            }
        }
    }

    /// Inserts, replaces and removes many keys of `tree` in one pass. Returns, per action,
    /// the value the key had just before that action.
    pub fn modify(&mut self, tree: usize, actions: &[Action]) -> Result<Vec<Option<Vec<u8>>>> {
        self.state.modify(tree, actions)
    }

    /// Inserts, replaces and removes many keys of `tree` as [`Txn::modify`] does, for a
    /// caller that does not need the replaced values: small modifications, held until the
    /// commit, then cost no lookups.
    pub fn apply(&mut self, tree: usize, actions: &[Action]) -> Result<()> {
        self.state.apply(tree, actions)
    }

    /// The entry for `key` in `tree`.
    pub fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Entry>> {
        self.state.get(tree, key)
    }

    /// The entries for many keys of `tree`, in the order asked: faster than one
    /// [`Txn::get`] after another once the tree outgrows the CPU's caches, since the
    /// descents take turns and their waits for memory overlap.
    pub fn get_many<K: AsRef<[u8]>>(&self, tree: usize, keys: &[K]) -> Result<Vec<Option<Entry>>> {
        self.state.get_many(tree, keys)
    }

    /// Entries of `tree` in a range, seeing this transaction's changes.
    pub fn range(&mut self, tree: usize, opts: RangeOptions) -> Result<Range<'_>> {
        self.state.apply_held(tree)?;
        let spec = self.state.spec(tree)?;
        Range::merged(
            Box::new(&*self.state),
            spec,
            self.state.roots[tree].as_ref(),
            opts,
            &self.state.overlays[tree],
        )
    }

    /// Count and reduction of `tree` between `lo` and `hi` (ascending key order).
    pub fn reduce(&mut self, tree: usize, lo: &Bound, hi: &Bound) -> Result<Reduction> {
        self.state.apply_held(tree)?;
        self.state.reduce(tree, lo, hi)
    }

    /// Appends a blob (lz4-compressed if the store compresses blobs and it pays).
    pub fn write_blob(&mut self, data: &[u8]) -> Result<BlobRef> {
        self.state.write_blob(data)
    }

    /// The reference to a blob appended earlier with [`crate::Store::append_blob`]. A blob
    /// written before a compaction moved the store to a new file is copied into it; one
    /// whose bytes a failed commit threw away is [`Error::StaleBlob`].
    pub fn adopt(&mut self, loose: &LooseBlob) -> Result<BlobRef> {
        if loose.incarnation == self.state.app.incarnation {
            return Ok(loose.blob);
        }
        if !loose.file.retired_intact(loose.incarnation) {
            return Err(Error::StaleBlob);
        }
        let (kind, payload) = loose.file.read_record(loose.blob.ptr())?;
        self.state.append_raw_blob(kind, &payload, loose.blob.len)
    }

    /// Appends a blob that will be adopted by a later update.
    pub(crate) fn write_loose_blob(&mut self, data: &[u8]) -> Result<LooseBlob> {
        let blob = self.state.write_blob(data)?;
        Ok(LooseBlob {
            blob,
            incarnation: self.state.app.incarnation,
            file: self.state.app.file.clone(),
        })
    }

    /// Reads a blob back, including one written earlier in this transaction.
    pub fn read_blob(&self, blob: &BlobRef) -> Result<Vec<u8>> {
        let (kind, payload) = self.state.app.read_record(blob.ptr())?;
        blob_bytes(kind, payload, blob)
    }

    /// The caller's metadata as this transaction sees it.
    pub fn meta(&self) -> &[u8] {
        &self.state.meta
    }

    /// Replaces the caller's metadata.
    pub fn set_meta(&mut self, meta: Vec<u8>) {
        self.state.meta = meta;
        self.state.dirty = true;
    }

    /// Number of entries in `tree`.
    pub fn count(&mut self, tree: usize) -> Result<u64> {
        self.state.apply_held(tree)?;
        Ok(self
            .state
            .reduce(tree, &Bound::Unbounded, &Bound::Unbounded)?
            .count)
    }
}

/// The text a panic was raised with.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_file_reserves_what_it_holds_and_a_large_one_an_eighth() {
        assert_eq!(
            reserve_len(2 * BLOCK),
            2 * BLOCK,
            "never more than the file"
        );
        assert_eq!(reserve_len(100), BLOCK, "at least a block");
        assert_eq!(reserve_len(40 << 10), 40 << 10);
        assert_eq!(reserve_len(100 << 10), MIN_RESERVE);
        assert_eq!(reserve_len(8 << 20), 1 << 20);
        assert_eq!(reserve_len(1 << 30), MAX_RESERVE);
    }
}
