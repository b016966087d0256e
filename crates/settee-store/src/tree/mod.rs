//! Copy-on-write B+trees over byte keys and values, with reductions kept in inner nodes.
//!
//! A tree is a root pointer plus its [`TreeSpec`]: how keys compare and how values reduce.
//! Every inner node stores, per child, the child's largest key, its entry count and its
//! reduction, so counts, range reductions and grouped reductions read O(log n) nodes per
//! range end and per group instead of scanning. Depth is the same along every path.

pub(crate) mod cursor;
pub(crate) mod diff;
pub(crate) mod modify;
pub(crate) mod reduce;
pub(crate) mod size;

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// No tree is deeper than this: with at least two children per inner node it would hold
/// more than 2^64 entries. A deeper chain of nodes is a damaged (or hostile) file.
pub(crate) const MAX_DEPTH: usize = 64;

pub(crate) fn too_deep(ptr: crate::format::Ptr) -> crate::error::Error {
    crate::error::Error::corrupted(ptr.offset, "tree deeper than any valid tree")
}

/// Orders keys. Documents use bytewise order; views plug in CouchDB's collation.
pub trait Comparator: Send + Sync + 'static {
    /// Compares two keys.
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering;
}

/// Plain byte-string order.
#[derive(Debug, Default, Clone, Copy)]
pub struct Bytewise;

impl Comparator for Bytewise {
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        bytewise(a, b)
    }
}

impl<F: Fn(&[u8], &[u8]) -> Ordering + Send + Sync + 'static> Comparator for F {
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        self(a, b)
    }
}

/// Combines values into a reduction stored beside each child pointer (CouchDB's reduce and
/// rereduce). The tree always keeps an entry count besides; a reducer adds whatever else the
/// caller needs. Errors abort the modification that needed the value.
pub trait Reducer: Send + Sync + 'static {
    /// Reduces the entries of one leaf (or of part of one, for range queries).
    fn reduce(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<u8>, String>;
    /// Combines reductions of adjacent key ranges.
    fn rereduce(&self, reductions: &[&[u8]]) -> Result<Vec<u8>, String>;
    /// Whether a stored leaf reduction may be combined with the reduction of entries added
    /// to that leaf, instead of the whole leaf being reduced again. A reducer whose stored
    /// values can stand for a passing failure (worth computing again) says no for those.
    fn extends(&self, _reduction: &[u8]) -> bool {
        true
    }
    /// `whole` without `part`, a reduction of some of the entries `whole` covers, for
    /// reductions that can be taken apart (counts, sums); `None` if these cannot. Logged
    /// trees need it: their counts and reductions are the nodes' less what the logged
    /// changes replace.
    fn subtract(&self, _whole: &[u8], _part: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// A reducer that keeps nothing beyond the tree's own entry count.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoReduce;

impl Reducer for NoReduce {
    fn reduce(&self, _: &[(&[u8], &[u8])]) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }
    fn rereduce(&self, _: &[&[u8]]) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }
    fn subtract(&self, _: &[u8], _: &[u8]) -> Option<Vec<u8>> {
        Some(Vec::new())
    }
}

/// The built-in reducer for document trees: total bytes of keys plus values, as a
/// little-endian u64 (the count comes with every tree). [`SizeReduce::decode`] reads it.
#[derive(Debug, Default, Clone, Copy)]
pub struct SizeReduce;

impl SizeReduce {
    /// The total size stored in a reduction made by this reducer.
    pub fn decode(reduction: &[u8]) -> u64 {
        reduction.try_into().map(u64::from_le_bytes).unwrap_or(0)
    }
}

impl Reducer for SizeReduce {
    fn reduce(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<u8>, String> {
        let total = entries.iter().fold(0u64, |t, (k, v)| {
            t.saturating_add((k.len() + v.len()) as u64)
        });
        Ok(total.to_le_bytes().to_vec())
    }
    fn rereduce(&self, reductions: &[&[u8]]) -> Result<Vec<u8>, String> {
        // Saturating: reductions read from a damaged file may hold any value.
        let total = reductions
            .iter()
            .fold(0u64, |t, r| t.saturating_add(SizeReduce::decode(r)));
        Ok(total.to_le_bytes().to_vec())
    }
    fn subtract(&self, whole: &[u8], part: &[u8]) -> Option<Vec<u8>> {
        Some(
            SizeReduce::decode(whole)
                .saturating_sub(SizeReduce::decode(part))
                .to_le_bytes()
                .to_vec(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_reduce_saturates_on_damaged_values() {
        let max = u64::MAX.to_le_bytes();
        let r = SizeReduce
            .rereduce(&[&max, &max, &5u64.to_le_bytes()])
            .unwrap();
        assert_eq!(SizeReduce::decode(&r), u64::MAX);
        let r = SizeReduce
            .rereduce(&[&3u64.to_le_bytes(), &4u64.to_le_bytes(), b"short"])
            .unwrap();
        assert_eq!(
            SizeReduce::decode(&r),
            7,
            "a malformed reduction counts as zero"
        );
    }
}

/// How one tree of a store orders and reduces. Cheap to clone.
#[derive(Clone)]
pub struct TreeSpec {
    /// Key order; `None` is bytewise order, compared inline on the hot paths.
    comparator: Option<Arc<dyn Comparator>>,
    /// Reduction kept in inner nodes.
    pub(crate) reducer: Arc<dyn Reducer>,
    /// Whether changes are logged in front of the nodes (see [`crate::overlay`]).
    logged: bool,
}

impl TreeSpec {
    /// A tree in bytewise key order with the given reducer.
    pub fn bytewise(reducer: impl Reducer) -> TreeSpec {
        TreeSpec {
            comparator: None,
            reducer: Arc::new(reducer),
            logged: false,
        }
    }

    /// A tree in bytewise key order whose changes are logged and kept in memory until
    /// enough have gathered to fold them into its nodes at once: for trees whose commits
    /// touch few keys each, or keys spread over the whole tree. Its reducer must be able to
    /// take reductions apart ([`Reducer::subtract`]); grouped reductions
    /// ([`crate::Snapshot::fold_groups`]) are not offered for it.
    pub fn logged(reducer: impl Reducer) -> TreeSpec {
        TreeSpec {
            comparator: None,
            reducer: Arc::new(reducer),
            logged: true,
        }
    }

    /// A tree with a custom comparator and reducer.
    pub fn new(comparator: impl Comparator, reducer: impl Reducer) -> TreeSpec {
        TreeSpec {
            comparator: Some(Arc::new(comparator)),
            reducer: Arc::new(reducer),
            logged: false,
        }
    }

    /// Whether the tree's changes are logged in front of its nodes.
    pub fn is_logged(&self) -> bool {
        self.logged
    }

    /// The tree's reducer.
    pub fn reducer(&self) -> &Arc<dyn Reducer> {
        &self.reducer
    }

    /// True for trees in plain bytewise order.
    #[inline]
    pub(crate) fn is_bytewise(&self) -> bool {
        self.comparator.is_none()
    }

    /// The index of the first key of `node` not less than `key` (`node.len()` if none).
    pub(crate) fn lower_bound(&self, node: &crate::node::Node, key: &[u8]) -> usize {
        if self.is_bytewise() {
            node.lower_bound_bytewise(key)
        } else {
            partition(node.len(), |i| self.cmp(node.key(i), key) == Ordering::Less)
        }
    }

    /// Compares two keys in the tree's order.
    #[inline]
    pub fn cmp(&self, a: &[u8], b: &[u8]) -> Ordering {
        match &self.comparator {
            None => bytewise(a, b),
            Some(c) => c.compare(a, b),
        }
    }
}

/// Bytewise order without a library call: keys are short, and a call to `memcmp` costs
/// more than comparing them eight bytes at a time.
#[inline]
pub(crate) fn bytewise(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut x, mut y) = (&a[..n], &b[..n]);
    while x.len() >= 8 {
        let (xa, xr) = x.split_at(8);
        let (ya, yr) = y.split_at(8);
        let (p, q) = (
            u64::from_be_bytes(xa.try_into().expect("8 bytes")),
            u64::from_be_bytes(ya.try_into().expect("8 bytes")),
        );
        if p != q {
            return p.cmp(&q);
        }
        (x, y) = (xr, yr);
    }
    for (p, q) in x.iter().zip(y) {
        if p != q {
            return p.cmp(q);
        }
    }
    a.len().cmp(&b.len())
}

impl fmt::Debug for TreeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TreeSpec")
    }
}

impl Default for TreeSpec {
    fn default() -> TreeSpec {
        TreeSpec::bytewise(NoReduce)
    }
}

/// One change in a batched modification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Insert or replace the value of a key.
    Put(Vec<u8>, Vec<u8>),
    /// Remove a key (nothing happens if it is absent).
    Delete(Vec<u8>),
}

impl Action {
    /// The key this action touches.
    pub fn key(&self) -> &[u8] {
        match self {
            Action::Put(k, _) | Action::Delete(k) => k,
        }
    }
}

/// One end of a key range.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Bound {
    /// No limit on this side.
    #[default]
    Unbounded,
    /// Up to and including this key.
    Included(Vec<u8>),
    /// Up to but excluding this key.
    Excluded(Vec<u8>),
}

/// Which way a fold walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Direction {
    /// Ascending key order.
    #[default]
    Forward,
    /// Descending key order.
    Backward,
}

/// What a range fold returns: `start` is where the fold begins in its direction (the upper
/// end when walking backward), like CouchDB's `startkey` with `descending=true`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RangeOptions {
    /// Where to begin.
    pub start: Bound,
    /// Where to stop.
    pub end: Bound,
    /// Walk direction.
    pub direction: Direction,
    /// Entries to pass over first; whole subtrees are skipped by their counts.
    pub skip: u64,
    /// Most entries to return.
    pub limit: Option<u64>,
}

impl RangeOptions {
    /// Every entry from `start` to `end`, walking backward (from the upper end) when
    /// `backward`.
    pub fn between(start: Bound, end: Bound, backward: bool) -> RangeOptions {
        RangeOptions {
            start,
            end,
            direction: if backward {
                Direction::Backward
            } else {
                Direction::Forward
            },
            skip: 0,
            limit: None,
        }
    }
}

/// A count and a reducer value over some entries.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Reduction {
    /// How many entries.
    pub count: u64,
    /// The reducer's value over them.
    pub value: Vec<u8>,
}

/// Number of leading indices in `0..len` for which `pred` holds (it must hold for a
/// prefix of them): binary search over a node's entries.
pub(crate) fn partition(len: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Whether `key` lies on the allowed side of a range's end `bound`, for walks in `dir`.
pub(crate) fn within_end(spec: &TreeSpec, key: &[u8], bound: &Bound, dir: Direction) -> bool {
    let (b, inclusive) = match bound {
        Bound::Unbounded => return true,
        Bound::Included(b) => (b, true),
        Bound::Excluded(b) => (b, false),
    };
    match (spec.cmp(key, b), dir) {
        (Ordering::Equal, _) => inclusive,
        (Ordering::Less, Direction::Forward) | (Ordering::Greater, Direction::Backward) => true,
        _ => false,
    }
}
