//! Snapshots: a committed header and the file it belongs to, readable from any thread.
//!
//! Reading never takes a lock the writer holds and never waits for a write or a sync: nodes
//! come from the shared cache or from a positional read of bytes that are immutable once
//! committed.

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::file::{blob_bytes, BlobRef, NodeSource, StoreFile};
use crate::format::{Header, Ptr, Root};
use crate::node::Node;
use crate::overlay::Overlay;
use crate::tree::cursor::{lookup, lookup_many, Entry, Range};
use crate::tree::reduce::{fold_groups, reduce_range, Group, GroupBy, KeyRange};
use crate::tree::{Action, Bound, RangeOptions, Reduction, TreeSpec};

pub(crate) struct SnapState {
    pub file: Arc<StoreFile>,
    pub header: Header,
    pub schema: Arc<[TreeSpec]>,
    /// Each tree's root node, loaded once per snapshot.
    roots: Box<[OnceLock<Arc<Node>>]>,
    /// Each tree's logged changes not yet in its nodes.
    pub overlays: Vec<Overlay>,
    /// Each logged tree's count and reduction with its changes, found once per snapshot.
    totals: Box<[OnceLock<Reduction>]>,
}

impl SnapState {
    pub fn new(
        file: Arc<StoreFile>,
        header: Header,
        schema: Arc<[TreeSpec]>,
        overlays: Vec<Overlay>,
    ) -> SnapState {
        let roots = (0..header.roots.len()).map(|_| OnceLock::new()).collect();
        let totals = (0..overlays.len()).map(|_| OnceLock::new()).collect();
        SnapState {
            file,
            header,
            schema,
            roots,
            overlays,
            totals,
        }
    }
}

/// Entries of a tree that could not be read: the subtree of a damaged node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lost {
    /// Where the node was.
    pub offset: u64,
    /// Its keys are after this one (`None`: from the first key).
    pub after: Option<Vec<u8>>,
    /// And up to this one, included (`None`: to the last key).
    pub up_to: Option<Vec<u8>>,
    /// How many entries its parent counted under it.
    pub entries: u64,
    /// What was wrong with it.
    pub what: String,
}

/// A consistent, read-only view of a store as of one commit. Cheap to clone and to send to
/// other threads; it keeps its file open even after a compaction replaced it.
#[derive(Clone)]
pub struct Snapshot {
    pub(crate) state: Arc<SnapState>,
}

impl NodeSource for Snapshot {
    fn node(&self, ptr: Ptr) -> Result<Arc<Node>> {
        self.state.file.node(ptr)
    }
}

impl Snapshot {
    fn tree(&self, tree: usize) -> Result<(&TreeSpec, Option<&Root>)> {
        let spec = self.state.schema.get(tree).ok_or(Error::NoSuchTree(tree))?;
        Ok((
            spec,
            self.state.header.roots.get(tree).and_then(Option::as_ref),
        ))
    }

    /// `tree`'s logged changes (none for a tree that is not logged).
    fn overlay(&self, tree: usize) -> Option<&Overlay> {
        self.state.overlays.get(tree).filter(|o| !o.is_empty())
    }

    /// The commit number of this snapshot (0 for a new, empty file).
    pub fn generation(&self) -> u64 {
        self.state.header.generation
    }

    /// Names this commit of this file: the file's random salt, chosen when the file is made
    /// (a compaction makes a new file), with the commit number. Snapshots with the same id
    /// hold the same data; a file deleted and made again never repeats one.
    pub fn commit_id(&self) -> ([u8; 16], u64) {
        (self.state.header.salt, self.state.header.generation)
    }

    /// The caller's metadata as of this commit.
    pub fn meta(&self) -> &[u8] {
        &self.state.header.meta
    }

    /// Number of entries in `tree`.
    pub fn count(&self, tree: usize) -> Result<u64> {
        if self.overlay(tree).is_some() {
            return Ok(self.total(tree)?.count);
        }
        Ok(self.tree(tree)?.1.map_or(0, |r| r.count))
    }

    /// Count and reduction of the whole of `tree`, without reading any node.
    pub fn total(&self, tree: usize) -> Result<Reduction> {
        let (spec, root) = self.tree(tree)?;
        let nodes = match root {
            Some(r) => Reduction {
                count: r.count,
                value: r.reduction.clone(),
            },
            None => Reduction {
                count: 0,
                value: spec.reducer.reduce(&[]).map_err(Error::Reduce)?,
            },
        };
        let Some(overlay) = self.overlay(tree) else {
            return Ok(nodes);
        };
        if let Some(total) = self.state.totals[tree].get() {
            return Ok(total.clone());
        }
        let total = overlay.adjust(spec, nodes, &Bound::Unbounded, &Bound::Unbounded)?;
        Ok(self.state.totals[tree].get_or_init(|| total).clone())
    }

    /// Number of trees in the store.
    pub fn tree_count(&self) -> usize {
        self.state.schema.len()
    }

    /// Bytes `tree`'s nodes take in the file, record framing included, plus the key and
    /// value bytes of its logged changes not yet in them: with the blobs its values
    /// reference, about what a compaction keeps of it. Reads the inner nodes only.
    pub fn tree_bytes(&self, tree: usize) -> Result<u64> {
        let logged = self.overlay(tree).map_or(0, Overlay::bytes);
        match self.tree(tree)?.1 {
            Some(root) => Ok(crate::tree::size::tree_bytes(self, root.ptr)?.saturating_add(logged)),
            None => Ok(logged),
        }
    }

    /// Bytes every tree's nodes take in the file ([`Snapshot::tree_bytes`] summed).
    pub fn nodes_bytes(&self) -> Result<u64> {
        (0..self.tree_count()).try_fold(0u64, |total, tree| {
            Ok(total.saturating_add(self.tree_bytes(tree)?))
        })
    }

    /// Every entry of `tree` that can still be read, in key order, with its logged changes;
    /// what cannot be read (a damaged node's subtree, named by the key range its parent
    /// gives it) is reported to `lost` and passed over. For salvaging a damaged file.
    pub fn readable_entries(
        &self,
        tree: usize,
        lost: &mut dyn FnMut(Lost),
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut entries = std::collections::BTreeMap::new();
        if let Some(root) = self.tree(tree)?.1 {
            self.walk_readable(root.ptr, (None, None), root.count, &mut entries, lost);
        }
        if let Some(overlay) = self.overlay(tree) {
            for action in overlay.actions() {
                match action {
                    Action::Put(k, v) => entries.insert(k, v),
                    Action::Delete(k) => entries.remove(&k),
                };
            }
        }
        Ok(entries.into_iter().collect())
    }

    fn walk_readable(
        &self,
        ptr: Ptr,
        range: (Option<&[u8]>, Option<&[u8]>),
        count: u64,
        out: &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
        lost: &mut dyn FnMut(Lost),
    ) {
        let node = match self.state.file.node(ptr) {
            Ok(node) => node,
            Err(e) => {
                let (after, up_to) = (range.0.map(<[u8]>::to_vec), range.1.map(<[u8]>::to_vec));
                return lost(Lost {
                    offset: ptr.offset,
                    after,
                    up_to,
                    entries: count,
                    what: e.to_string(),
                });
            }
        };
        for i in 0..node.len() {
            if node.is_leaf() {
                out.insert(node.key(i).to_vec(), node.value(i).to_vec());
            } else {
                let after = if i == 0 {
                    range.0
                } else {
                    Some(node.key(i - 1))
                };
                self.walk_readable(
                    node.child_ptr(i),
                    (after, Some(node.key(i))),
                    node.child_count(i),
                    out,
                    lost,
                );
            }
        }
    }

    /// The root node of `tree`, if the tree has entries.
    fn root_node(&self, tree: usize) -> Result<Option<&Arc<Node>>> {
        let Some(root) = self.tree(tree)?.1 else {
            return Ok(None);
        };
        let slot = &self.state.roots[tree];
        if let Some(node) = slot.get() {
            return Ok(Some(node));
        }
        let node = self.state.file.node(root.ptr)?;
        Ok(Some(slot.get_or_init(|| node)))
    }

    /// The entry for `key`.
    pub fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Entry>> {
        let spec = self.tree(tree)?.0;
        if let Some(entry) = self.overlay(tree).and_then(|o| o.entry(key)) {
            return Ok(entry);
        }
        match self.root_node(tree)? {
            Some(root) => lookup(self, spec, root, key),
            None => Ok(None),
        }
    }

    /// The entries for many keys, in the order asked. Several descents take turns, so
    /// that their waits for memory overlap: faster than one [`Snapshot::get`] after another
    /// once the tree outgrows the CPU's caches.
    pub fn get_many<K: AsRef<[u8]>>(&self, tree: usize, keys: &[K]) -> Result<Vec<Option<Entry>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let spec = self.tree(tree)?.0;
        let mut found = match self.root_node(tree)? {
            Some(root) => lookup_many(self, spec, root, keys)?,
            None => keys.iter().map(|_| None).collect(),
        };
        if let Some(overlay) = self.overlay(tree) {
            for (slot, key) in found.iter_mut().zip(keys) {
                if let Some(entry) = overlay.entry(key.as_ref()) {
                    *slot = entry;
                }
            }
        }
        Ok(found)
    }

    /// Entries of a range, in either direction, with skip and limit.
    pub fn range(&self, tree: usize, opts: RangeOptions) -> Result<Range<'static>> {
        let (spec, root) = self.tree(tree)?;
        match self.overlay(tree) {
            Some(overlay) => Range::merged(Box::new(self.clone()), spec, root, opts, overlay),
            None => Range::new(Box::new(self.clone()), spec, root, opts),
        }
    }

    /// Count and reduction of the entries between `lo` and `hi` in ascending key order.
    pub fn reduce(&self, tree: usize, lo: &Bound, hi: &Bound) -> Result<Reduction> {
        let (spec, root) = self.tree(tree)?;
        let nodes = reduce_range(self, spec, root, &KeyRange { lo, hi })?;
        match self.overlay(tree) {
            Some(overlay) => overlay.adjust(spec, nodes, lo, hi),
            None => Ok(nodes),
        }
    }

    /// Reductions of each group of keys in the range of `opts` (its skip and limit are not
    /// used), in walk order; `emit` returns false to stop. Not for a logged tree holding
    /// changes.
    pub fn fold_groups(
        &self,
        tree: usize,
        opts: &RangeOptions,
        group_by: &dyn GroupBy,
        emit: &mut dyn FnMut(Group) -> Result<bool>,
    ) -> Result<()> {
        let (spec, root) = self.tree(tree)?;
        if self.overlay(tree).is_some() {
            return Err(Error::Reduce(
                "grouped reductions are not offered for logged trees".into(),
            ));
        }
        let range = KeyRange::from_walk(&opts.start, &opts.end, opts.direction);
        fold_groups(self, spec, root, &range, opts.direction, group_by, emit)
    }

    /// Reads a blob.
    pub fn read_blob(&self, blob: &BlobRef) -> Result<Vec<u8>> {
        let (kind, payload) = self.state.file.read_record(blob.ptr())?;
        blob_bytes(kind, payload, blob)
    }

    /// Reads a large blob stored as a list of chunks, one chunk at a time.
    pub fn read_chunks<'a>(
        &'a self,
        chunks: &'a [BlobRef],
    ) -> impl Iterator<Item = Result<Vec<u8>>> + 'a {
        chunks.iter().map(move |c| self.read_blob(c))
    }
}
