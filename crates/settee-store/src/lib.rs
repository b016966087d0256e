//! Settee's storage engine: append-only files holding copy-on-write B+trees with
//! reductions, blobs, snapshots for lock-free parallel reads, a single writer with group
//! commit, and online compaction.
//!
//! It knows nothing of JSON, documents or CouchDB: keys, values, blobs and the header's
//! metadata are opaque bytes, and key order and reductions are supplied by the caller
//! ([`Comparator`], [`Reducer`]). The database and view layers build on it.
//!
//! # Model
//!
//! A [`Store`] is one file with a fixed number of tree slots (its schema: one [`TreeSpec`]
//! per slot) and a metadata blob. Readers take a [`Snapshot`] (a committed header) and read
//! through it from any thread with positional reads; they never wait for the writer.
//! Writers submit closures that run on the store's writer thread against a [`Txn`];
//! closures queued during a commit's sync are committed together (group commit); their small
//! modifications are held and applied to each tree in one pass at the commit. A caller that
//! finds the writer idle may run its durable closure and commit it on its own thread
//! ([`Store::run_or_submit_with`]). Nodes a commit replaces leave the node cache. A caller
//! about to wait on several stores' writers at once steers where each wakes
//! ([`place_fan_out`]), so that they run side by side.
//!
//! A tree may be *logged* ([`TreeSpec::logged`]): its commits append their changes as one
//! log record and keep them in memory (sorted runs that later commits merge, which every
//! snapshot shares), where reads merge them with the nodes, and fold them into the nodes in
//! one pass once enough have gathered ([`FoldLimits`]; a large tree gathers more, up to
//! [`FoldLimits::grow`] times the limits, since its changes spread over more leaves). A
//! commit of a few keys, or of keys spread over a large tree, then writes a record instead
//! of a leaf and a path per key. Opening replays the records since the last fold. A fold of
//! more than [`FoldLimits::slice`] changes goes in slices, in key order, that the writer
//! thread folds and commits between requests; the log is then written again as one record
//! of the changes left. Two
//! things bound the memory that unfolded changes take in a process with many stores open:
//! stores opened with clones of one [`OverlayBudget`] fold at their next commit while
//! together they hold more than it allows, and a store that has not committed for
//! [`StoreOptions::quiet_after`] folds on its writer thread, gives back the room its
//! buffers kept, and runs [`StoreOptions::on_writer_quiet`], once per quiet spell.
//!
//! # FORMAT
//!
//! Append-only: nothing written is ever modified. Records (nodes, blobs) carry a length and
//! a CRC-32; a commit appends its records, pads to a 4 KiB boundary and appends a header
//! holding the tree roots, the metadata, the file's random salt and a CRC-32 of the whole
//! region the commit appended; then one `fdatasync`. The writer keeps zeros written ahead of
//! its appends, so that most syncs record no new file size. Opening scans 4 KiB boundaries
//! backwards for the newest header whose checksum, salt and region checksum hold, keeps an
//! all-zero tail no longer than a reserve, and cuts off anything else after it. The header
//! also points at the newest log record of the logged trees, each record at the one before,
//! back to the last fold. The byte layouts are in the `format` and `node` modules.
//!
//! # Durability and errors
//!
//! A [`Durability::Durable`] update is answered only after its commit is synced. Any I/O
//! failure during a commit fails every update of that commit, cuts the file back to the
//! previous commit and leaves the writer usable; after a failed sync the writer first reads
//! the file again from its newest valid header, and refuses writes until it can. Damaged
//! bytes are reported as [`Error::Corrupted`], never as a panic, and cost only what is
//! reached through them: a damaged log record loses its own changes, a damaged node what is
//! under it ([`Store::damage`] lists what was met; [`scan_file`] checks a whole file). The
//! crate README's "Durability" section says what each failure costs.

#![deny(missing_docs)]

mod backend;
mod cache;
mod compact;
mod error;
mod file;
pub mod format;
mod held;
mod node;
mod overlay;
mod placement;
mod runs;
mod scan;
mod snapshot;
mod store;
mod tree;
mod txn;

pub use backend::{sync_dir, sync_parent, Backend, FileBackend, MemBackend};
pub use cache::{NodeCache, DEFAULT_CACHE_BYTES};
pub use compact::{BlobCopier, CompactStats, NoBlobs, ValueRewriter};
pub use error::{Error, Result};
pub use file::{BlobRef, Damaged};
pub use overlay::{FoldLimits, OverlayBudget};
pub use placement::{place_fan_out, Place};
pub use scan::{scan, scan_file, FileScan, ScannedHeader, ScannedRecord};
pub use snapshot::{Lost, Snapshot};
pub use store::{CallerTurn, Durability, Pending, Store, StoreOptions, DEFAULT_NODE_SIZE};
pub use tree::cursor::{Entry, Range};
pub use tree::reduce::{Group, GroupBy};
pub use tree::{
    Action, Bound, Bytewise, Comparator, Direction, NoReduce, RangeOptions, Reducer, Reduction,
    SizeReduce, TreeSpec,
};
pub use txn::{LooseBlob, Txn};

/// Decodes arbitrary bytes as a record, a node and a header, as the engine would; returns
/// whether any decoded. For the fuzz targets: it must never panic, whatever the bytes.
#[doc(hidden)]
pub fn fuzz_decode(bytes: &[u8]) -> bool {
    let Some((&kind, payload)) = bytes.split_first() else {
        return false;
    };
    let kind = if kind & 1 == 0 {
        format::RecordKind::Leaf
    } else {
        format::RecordKind::Inner
    };
    let ok_record = format::decode_record(bytes, 0).is_ok();
    let ok_node = node::Node::decode(kind, payload, u64::MAX)
        .map(|n| {
            for i in 0..n.len() {
                let _ = n.key(i);
                if n.is_leaf() {
                    let _ = n.value(i);
                } else {
                    let _ = n.child_red(i);
                }
            }
        })
        .is_ok();
    let ok_header =
        format::parse_header_head(bytes).is_some() | format::Header::decode_body(bytes, 0).is_ok();
    ok_record | ok_node | ok_header
}

/// Opens arbitrary bytes as a store and reads all of it (ranges both ways, reductions,
/// groups, blobs named by values). For the fuzz targets: errors are fine, panics are not.
#[doc(hidden)]
pub fn fuzz_open(bytes: &[u8]) {
    let backend = std::sync::Arc::new(MemBackend::from_bytes(bytes.to_vec()));
    let trees = vec![TreeSpec::bytewise(SizeReduce), TreeSpec::default()];
    let opts = StoreOptions {
        trees,
        cache: NodeCache::new(1 << 20),
        ..StoreOptions::default()
    };
    let Ok(store) = Store::open_backend(backend, std::path::Path::new("fuzz"), opts) else {
        return;
    };
    let snap = store.snapshot();
    for tree in 0..2 {
        for direction in [Direction::Forward, Direction::Backward] {
            let opts = RangeOptions {
                direction,
                ..RangeOptions::default()
            };
            for entry in snap.range(tree, opts.clone()).into_iter().flatten() {
                let Ok(entry) = entry else { break };
                if let Some(blob) = BlobRef::decode(entry.value()) {
                    let _ = snap.read_blob(&blob);
                }
            }
            let _ = snap.fold_groups(
                tree,
                &opts,
                &|a: &[u8], b: &[u8]| a.first() == b.first(),
                &mut |_| Ok(true),
            );
            let skipped = RangeOptions {
                skip: 3,
                limit: Some(2),
                ..opts
            };
            let _ = snap.range(tree, skipped).map(|r| r.count());
        }
        let _ = snap.reduce(
            tree,
            &Bound::Included(b"a".to_vec()),
            &Bound::Excluded(b"m".to_vec()),
        );
        let _ = snap.get(tree, b"k");
        let _ = snap.get_many(tree, &[&b"a"[..], b"k", b"zz", b""]);
        let _ = snap.tree_bytes(tree);
    }
}
