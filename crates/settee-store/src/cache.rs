//! A bounded cache of decoded nodes, shared by every store of a process.
//!
//! Nodes are immutable once written, so a node is identified for ever by its file and offset;
//! a cache entry never goes stale, it only ages out. Each open file gets a fresh id.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use crate::node::Node;

/// Default budget: 1 GiB of decoded nodes.
pub const DEFAULT_CACHE_BYTES: u64 = 1 << 30;

#[derive(Clone)]
struct NodeWeight;

impl Weighter<(u64, u64), Arc<Node>> for NodeWeight {
    fn weight(&self, _key: &(u64, u64), node: &Arc<Node>) -> u64 {
        node.weight()
    }
}

/// Decoded nodes of any number of files, bounded by total bytes. Cheap to clone.
#[derive(Clone)]
pub struct NodeCache {
    inner: Arc<Cache<(u64, u64), Arc<Node>, NodeWeight>>,
}

static NEXT_FILE_ID: AtomicU64 = AtomicU64::new(1);

impl NodeCache {
    /// A cache holding at most about `bytes` bytes of nodes.
    pub fn new(bytes: u64) -> NodeCache {
        let estimated_items = (bytes / 4096).clamp(16, 1 << 22) as usize;
        NodeCache {
            inner: Arc::new(Cache::with_weighter(estimated_items, bytes, NodeWeight)),
        }
    }

    pub(crate) fn get(&self, file: u64, offset: u64) -> Option<Arc<Node>> {
        self.inner.get(&(file, offset))
    }

    pub(crate) fn insert(&self, file: u64, offset: u64, node: Arc<Node>) {
        self.inner.insert((file, offset), node);
    }

    /// Drops a node the newest commit no longer reaches, so that the space goes to live
    /// ones; a reader of an older snapshot that still wants it reads it again.
    pub(crate) fn remove(&self, file: u64, offset: u64) {
        self.inner.remove(&(file, offset));
    }

    /// Bytes currently held.
    pub fn weight(&self) -> u64 {
        self.inner.weight()
    }

    /// A process-unique id for a newly opened file.
    pub(crate) fn new_file_id() -> u64 {
        NEXT_FILE_ID.fetch_add(1, Ordering::Relaxed)
    }
}

impl Default for NodeCache {
    fn default() -> NodeCache {
        NodeCache::new(DEFAULT_CACHE_BYTES)
    }
}
