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
//! closures queued during a commit's sync are committed together (group commit).
//!
//! # FORMAT
//!
//! Append-only: nothing written is ever modified. Records (nodes, blobs) carry a length and
//! a CRC-32; a commit appends its records, pads to a 4 KiB boundary and appends a header
//! holding the tree roots, the metadata, the file's random salt and a CRC-32 of the whole
//! region the commit appended; then one `fdatasync`. Opening scans 4 KiB boundaries
//! backwards for the newest header whose checksum, salt and region checksum hold, and cuts
//! off anything after it. The byte layouts are in the `format` and `node` modules.
//!
//! # Durability and errors
//!
//! A [`Durability::Durable`] update is answered only after its commit is synced. Any I/O
//! failure during a commit fails every update of that commit, cuts the file back to the
//! previous commit and leaves the writer usable. Damaged bytes are reported as
//! [`Error::Corrupted`], never as a panic.

#![deny(missing_docs)]

mod backend;
mod cache;
mod compact;
mod error;
mod file;
pub mod format;
mod node;
mod snapshot;
mod store;
mod tree;
mod txn;

pub use backend::{sync_dir, Backend, FileBackend, MemBackend};
pub use cache::{NodeCache, DEFAULT_CACHE_BYTES};
pub use compact::{BlobCopier, CompactStats, NoBlobs, ValueRewriter};
pub use error::{Error, Result};
pub use file::BlobRef;
pub use snapshot::Snapshot;
pub use store::{Durability, Pending, Store, StoreOptions, DEFAULT_NODE_SIZE};
pub use tree::cursor::{Entry, Range};
pub use tree::reduce::{Group, GroupBy};
pub use tree::{Action, Bound, Bytewise, Comparator, Direction, NoReduce, RangeOptions, Reducer, Reduction, SizeReduce, TreeSpec};
pub use txn::Txn;

/// Decodes one node record's payload as the engine would, for fuzzing the decoder.
/// Returns whether it decoded; must never panic whatever the bytes.
pub fn fuzz_decode(bytes: &[u8]) -> bool {
    let Some((&kind, payload)) = bytes.split_first() else { return false };
    let kind = if kind & 1 == 0 { format::RecordKind::Leaf } else { format::RecordKind::Inner };
    let ok_record = format::decode_record(bytes, 0).is_ok();
    let ok_node = node::Node::decode(kind, payload, u64::MAX).map(|n| {
        for i in 0..n.len() {
            let _ = n.key(i);
            if n.is_leaf() { let _ = n.value(i); } else { let _ = n.child_red(i); }
        }
    }).is_ok();
    let ok_header = format::parse_header_head(bytes).is_some() | format::Header::decode_body(bytes, 0).is_ok();
    ok_record | ok_node | ok_header
}
