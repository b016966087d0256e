//! B+tree nodes: their payload encoding and their decoded, immutable in-memory form.
//!
//! ```text
//! Leaf payload:  varint n, then n times: varint key length, key, varint value length, value
//! Inner payload: varint n, then n times: varint key length, key (the child's largest key),
//!                varint child offset, varint child record length, varint child entry count,
//!                varint reduction length, reduction (the reducer's value over the child)
//! ```
//!
//! A decoded node keeps its payload in one buffer and spans into it, so decoding allocates
//! the same few times however many entries there are, and reading an entry copies nothing.

use std::sync::{Arc, OnceLock, Weak};

use crate::error::{Error, Result};
use crate::file::NodeSource;
use crate::format::{put_varint, varint_len, Ptr, Reader, RecordKind};

/// A span (start, length) into a node's buffer.
type Span = (u32, u32);

/// A decoded node. Immutable: a node once written is never modified.
///
/// An inner node also remembers its children once they are loaded (`pinned`), so that
/// descents, which every query makes, skip the shared cache: inner children for good, leaves
/// only while something else (the cache, a reader) keeps them, since leaves are the bulk of
/// the data and stay under the cache's budget.
#[derive(Debug)]
pub(crate) struct Node {
    buf: Box<[u8]>,
    /// Each entry's key prefix ([`key_prefix`]), packed together so that a bytewise search
    /// touches few cache lines and decides most probes without the key bytes.
    prefixes: Box<[u64]>,
    body: Body,
    pinned: Box<[OnceLock<Pin>]>,
}

/// What an inner node remembers of a loaded child.
#[derive(Debug, Clone)]
enum Pin {
    Inner(Arc<Node>),
    /// Dead once the cache has let the leaf go and no reader holds it; the slot then stays
    /// dead and the leaf is found through the cache again.
    Leaf(Weak<Node>, LeafTables),
}

/// Where a pinned leaf keeps its key prefixes and entry table, so that a descent can start
/// loading them together with the leaf itself: three cache misses that would otherwise
/// follow one another. Only ever a prefetch hint, never read through, since the leaf may be
/// gone.
#[derive(Debug, Clone, Copy)]
struct LeafTables {
    prefixes: usize,
    slots: usize,
    len: usize,
}

impl LeafTables {
    fn of(leaf: &Node) -> LeafTables {
        let slots = match &leaf.body {
            Body::Leaf(slots) => slots.as_ptr() as usize,
            Body::Inner(_) => 0,
        };
        LeafTables {
            prefixes: leaf.prefixes.as_ptr() as usize,
            slots,
            len: leaf.prefixes.len(),
        }
    }

    /// Hints the CPU to load the leaf at `leaf` and its tables.
    fn prefetch(&self, leaf: *const Node) {
        self.prefetch_for_search(leaf);
        prefetch(
            self.slots as *const u8,
            self.len * std::mem::size_of::<Slot>(),
        );
    }

    /// Hints the CPU to load the leaf at `leaf` and its key prefixes: what a search reads
    /// before it knows which entry it wants.
    fn prefetch_for_search(&self, leaf: *const Node) {
        // From the reference counts just before the node, which taking hold of it reads.
        prefetch(
            leaf.cast::<u8>().wrapping_sub(16),
            std::mem::size_of::<Node>() + 16,
        );
        prefetch(
            self.prefixes as *const u8,
            self.len * std::mem::size_of::<u64>(),
        );
    }
}

/// What a batched descent learns of an inner node's child without waiting for memory it
/// has not asked for yet.
pub(crate) enum Peek<'a> {
    /// A pinned inner child.
    Inner(&'a Node),
    /// A pinned leaf, perhaps gone since: it and its key prefixes are on their way into the
    /// CPU cache.
    Leaf,
    /// Not loaded through this parent yet.
    Unpinned,
}

/// A child reached from an inner node: borrowed if pinned, else owned.
pub(crate) enum ChildNode<'a> {
    /// A pinned inner child, borrowed from its parent.
    Inner(&'a Node),
    /// A leaf from its parent's pin, the cache or the disk.
    Leaf(Arc<Node>),
}

#[derive(Debug)]
enum Body {
    Leaf(Vec<Slot>),
    Inner(Vec<Child>),
}

/// One leaf entry.
#[derive(Debug, Clone, Copy)]
struct Slot {
    key: Span,
    value: Span,
}

/// Nodes with at most this many entries are searched by counting prefixes, not bisecting:
/// the prefixes of a leaf, or of an inner node of the default size, span up to 32 cache
/// lines, which a count loads in parallel where a bisection waits for one after another.
const SCAN_ENTRIES: usize = 256;

/// Hints the CPU to bring the `len` bytes at `start` into its cache, one line at a time;
/// does nothing on targets without a prefetch instruction. The address need not be valid:
/// nothing is read through it.
fn prefetch(start: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if len > 0 {
        // From the line holding the first byte to the line holding the last.
        let lines = ((start as usize % 64) + len).div_ceil(64);
        let first = start.wrapping_sub(start as usize % 64);
        for line in 0..lines {
            // SAFETY: a prefetch never faults, whatever the address, and changes nothing
            // observable; `wrapping_add` makes no claim that the address is in bounds.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    first.wrapping_add(line * 64).cast(),
                )
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
}

/// How many of `prefixes` are below `want`: the heart of a node search, and worth the
/// CPU's wide compares where it has them.
#[inline]
fn count_below(prefixes: &[u64], want: u64) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has just been found to support AVX2.
        return unsafe { count_below_avx2(prefixes, want) };
    }
    prefixes.iter().filter(|&&p| p < want).count()
}

/// [`count_below`], compiled for AVX2, whose wide compares the compiler can use for the count.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn count_below_avx2(prefixes: &[u64], want: u64) -> usize {
    prefixes.iter().filter(|&&p| p < want).count()
}

/// The first eight bytes of `key` as a big-endian number, zero-padded. Two keys whose
/// prefixes differ are ordered bytewise as their prefixes are.
#[inline]
pub(crate) fn key_prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// One child pointer of an inner node, as stored.
#[derive(Debug, Clone, Copy)]
struct Child {
    /// The child's whole encoding within the payload, copied verbatim when a rewritten
    /// parent keeps this child unchanged.
    enc: Span,
    key: Span,
    ptr: Ptr,
    count: u64,
    red: Span,
}

/// An owned child entry, used while building inner nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChildEntry {
    /// Largest key in the child's subtree.
    pub key: Vec<u8>,
    /// Where the child is stored.
    pub ptr: Ptr,
    /// Entries in the child's subtree.
    pub count: u64,
    /// Reduction over the child's subtree.
    pub red: Vec<u8>,
}

impl ChildEntry {
    /// Bytes this entry adds to an inner node's payload.
    pub fn encoded_len(&self) -> usize {
        varint_len(self.key.len() as u64)
            + self.key.len()
            + varint_len(self.ptr.offset)
            + varint_len(u64::from(self.ptr.len))
            + varint_len(self.count)
            + varint_len(self.red.len() as u64)
            + self.red.len()
    }
}

/// Bytes a leaf entry adds to a leaf's payload.
pub(crate) fn leaf_entry_len(key: &[u8], value: &[u8]) -> usize {
    varint_len(key.len() as u64) + key.len() + varint_len(value.len() as u64) + value.len()
}

/// Encodes a leaf payload.
#[cfg(test)]
pub(crate) fn encode_leaf(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
    Node::build_leaf(entries).buf.into_vec()
}

/// Encodes an inner payload.
#[cfg(test)]
pub(crate) fn encode_inner(children: &[ChildEntry]) -> Vec<u8> {
    let pieces: Vec<ChildPiece> = children.iter().map(ChildPiece::New).collect();
    Node::build_inner(&pieces).buf.into_vec()
}

/// Appends a varint length and the bytes; returns where the bytes are. Spans past 4 GiB
/// wrap, but a node that large is refused before it is stored or read.
fn put_span(out: &mut Vec<u8>, b: &[u8]) -> Span {
    put_varint(out, b.len() as u64);
    let start = out.len() as u32;
    out.extend_from_slice(b);
    (start, b.len() as u32)
}

/// A child of an inner node being built: an unchanged child of an existing node (its
/// encoding is copied as it is), or a new entry.
#[derive(Clone, Copy)]
pub(crate) enum ChildPiece<'a> {
    /// Child `i` of a decoded inner node.
    Kept(&'a Node, usize),
    /// A new or changed child.
    New(&'a ChildEntry),
}

impl ChildPiece<'_> {
    /// Bytes this child adds to an inner payload.
    pub fn encoded_len(&self) -> usize {
        match self {
            ChildPiece::Kept(n, i) => n.stored_child(*i).enc.1 as usize,
            ChildPiece::New(c) => c.encoded_len(),
        }
    }
    /// The child's largest key.
    pub fn key(&self) -> &[u8] {
        match self {
            ChildPiece::Kept(n, i) => n.key(*i),
            ChildPiece::New(c) => &c.key,
        }
    }
    /// Entries in the child's subtree.
    pub fn count(&self) -> u64 {
        match self {
            ChildPiece::Kept(n, i) => n.child_count(*i),
            ChildPiece::New(c) => c.count,
        }
    }
    /// The child's reduction.
    pub fn red(&self) -> &[u8] {
        match self {
            ChildPiece::Kept(n, i) => n.child_red(*i),
            ChildPiece::New(c) => &c.red,
        }
    }
}

impl Node {
    /// A leaf holding `entries` (non-empty, in order). The entries' places are noted while
    /// they are encoded, so a node just built is never decoded.
    pub fn build_leaf(entries: &[(&[u8], &[u8])]) -> Node {
        let size: usize = entries.iter().map(|(k, v)| leaf_entry_len(k, v)).sum();
        let mut out = Vec::with_capacity(varint_len(entries.len() as u64) + size);
        put_varint(&mut out, entries.len() as u64);
        let slots = entries
            .iter()
            .map(|(k, v)| {
                let key = put_span(&mut out, k);
                Slot {
                    key,
                    value: put_span(&mut out, v),
                }
            })
            .collect();
        let prefixes = entries.iter().map(|(k, _)| key_prefix(k)).collect();
        Node {
            buf: out.into_boxed_slice(),
            prefixes,
            body: Body::Leaf(slots),
            pinned: Box::default(),
        }
    }

    /// An inner node over `children` (non-empty, in order). Kept children's encodings are
    /// copied as they are, and so are their pinned nodes.
    pub fn build_inner(children: &[ChildPiece]) -> Node {
        let size: usize = children.iter().map(ChildPiece::encoded_len).sum();
        let mut out = Vec::with_capacity(varint_len(children.len() as u64) + size);
        put_varint(&mut out, children.len() as u64);
        let mut stored = Vec::with_capacity(children.len());
        let mut pinned = Vec::with_capacity(children.len());
        let mut prefixes = Vec::with_capacity(children.len());
        for piece in children {
            let start = out.len() as u32;
            match piece {
                ChildPiece::Kept(n, i) => {
                    let c = *n.stored_child(*i);
                    out.extend_from_slice(n.span(c.enc));
                    let moved = |s: Span| (s.0 - c.enc.0 + start, s.1);
                    stored.push(Child {
                        enc: (start, c.enc.1),
                        key: moved(c.key),
                        red: moved(c.red),
                        ..c
                    });
                    pinned.push(
                        n.pinned[*i]
                            .get()
                            .cloned()
                            .map_or_else(OnceLock::new, OnceLock::from),
                    );
                    prefixes.push(n.prefixes[*i]);
                }
                ChildPiece::New(c) => {
                    let key = put_span(&mut out, &c.key);
                    put_varint(&mut out, c.ptr.offset);
                    put_varint(&mut out, u64::from(c.ptr.len));
                    put_varint(&mut out, c.count);
                    let red = put_span(&mut out, &c.red);
                    let enc = (start, out.len() as u32 - start);
                    stored.push(Child {
                        enc,
                        key,
                        ptr: c.ptr,
                        count: c.count,
                        red,
                    });
                    pinned.push(OnceLock::new());
                    prefixes.push(key_prefix(&c.key));
                }
            }
        }
        Node {
            buf: out.into_boxed_slice(),
            prefixes: prefixes.into_boxed_slice(),
            body: Body::Inner(stored),
            pinned: pinned.into_boxed_slice(),
        }
    }

    /// Decodes a node payload read from the record at `offset`. Never panics on any input.
    pub fn decode(kind: RecordKind, payload: &[u8], offset: u64) -> Result<Node> {
        let buf: Box<[u8]> = payload.into();
        let mut r = Reader::new(&buf, offset);
        let n = r.varint()?;
        // Every entry takes at least two bytes, which bounds the allocation below.
        if n == 0 || n > buf.len() as u64 / 2 {
            return Err(Error::corrupted(offset, format!("node claims {n} entries")));
        }
        let mut prefixes = Vec::with_capacity(n as usize);
        let body = match kind {
            RecordKind::Leaf => {
                let mut entries = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let (key, value) = (r.span()?, r.span()?);
                    prefixes.push(key_prefix(&buf[key.0 as usize..(key.0 + key.1) as usize]));
                    entries.push(Slot { key, value });
                }
                Body::Leaf(entries)
            }
            RecordKind::Inner => {
                let mut children = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let start = r.pos();
                    let key = r.span()?;
                    let child_offset = r.varint()?;
                    let len = u32::try_from(r.varint()?)
                        .map_err(|_| Error::corrupted(offset, "child length too large"))?;
                    if child_offset
                        .checked_add(u64::from(len))
                        .is_none_or(|end| end > offset)
                    {
                        return Err(Error::corrupted(
                            offset,
                            "child pointer does not point back",
                        ));
                    }
                    let count = r.varint()?;
                    let red = r.span()?;
                    prefixes.push(key_prefix(&buf[key.0 as usize..(key.0 + key.1) as usize]));
                    let enc = (start as u32, (r.pos() - start) as u32);
                    children.push(Child {
                        enc,
                        key,
                        ptr: Ptr {
                            offset: child_offset,
                            len,
                        },
                        count,
                        red,
                    });
                }
                Body::Inner(children)
            }
            _ => return Err(Error::corrupted(offset, "record is a blob, not a node")),
        };
        if !r.is_empty() {
            return Err(Error::corrupted(
                offset,
                "trailing bytes after node entries",
            ));
        }
        let pinned = match &body {
            Body::Inner(c) => (0..c.len()).map(|_| OnceLock::new()).collect(),
            Body::Leaf(_) => Box::default(),
        };
        Ok(Node {
            buf,
            prefixes: prefixes.into_boxed_slice(),
            body,
            pinned,
        })
    }

    fn span(&self, s: Span) -> &[u8] {
        &self.buf[s.0 as usize..(s.0 + s.1) as usize]
    }

    /// The node's payload as stored.
    pub fn payload(&self) -> &[u8] {
        &self.buf
    }

    /// True for leaves.
    pub fn is_leaf(&self) -> bool {
        matches!(self.body, Body::Leaf(_))
    }

    /// Number of entries (leaf) or children (inner).
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Leaf(e) => e.len(),
            Body::Inner(c) => c.len(),
        }
    }

    /// Key of entry `i`: a leaf's key, or an inner child's largest key.
    pub fn key(&self, i: usize) -> &[u8] {
        match &self.body {
            Body::Leaf(e) => self.span(e[i].key),
            Body::Inner(c) => self.span(c[i].key),
        }
    }

    /// Value of leaf entry `i`.
    pub fn value(&self, i: usize) -> &[u8] {
        match &self.body {
            Body::Leaf(e) => self.span(e[i].value),
            Body::Inner(_) => panic!("value() on an inner node"),
        }
    }

    /// Starts loading a leaf's key prefixes and entry table into the CPU cache without
    /// waiting for them. A lookup calls this before it searches the leaf, so that the cache
    /// misses of the search and of the entry it finds overlap instead of following one
    /// another. (A leaf reached through its parent's pin is already on its way.)
    pub fn prefetch_tables(&self) {
        prefetch(
            self.prefixes.as_ptr().cast(),
            std::mem::size_of_val(&self.prefixes[..]),
        );
        if let Body::Leaf(slots) = &self.body {
            prefetch(slots.as_ptr().cast(), std::mem::size_of_val(&slots[..]));
        }
    }

    /// Starts loading what [`Node::child_ref`] reads first of child `i`: the parent's pin.
    pub fn prefetch_pin(&self, i: usize) {
        if let Some(p) = self.pinned.get(i) {
            prefetch(
                (p as *const OnceLock<Pin>).cast(),
                std::mem::size_of::<OnceLock<Pin>>(),
            );
        }
    }

    /// Child `i` as far as its pin tells without touching the child itself; for a pinned
    /// leaf, starts loading the leaf and its key prefixes.
    pub fn peek_child(&self, i: usize) -> Peek<'_> {
        match self.pinned.get(i).and_then(OnceLock::get) {
            Some(Pin::Inner(n)) => Peek::Inner(n),
            Some(Pin::Leaf(leaf, tables)) => {
                tables.prefetch_for_search(leaf.as_ptr());
                Peek::Leaf
            }
            None => Peek::Unpinned,
        }
    }

    /// Where a bytewise search for `key` lands in this leaf, judged by key prefixes alone:
    /// the first entry whose prefix is not below the key's.
    pub fn landing(&self, key: &[u8]) -> usize {
        count_below(&self.prefixes, key_prefix(key))
    }

    /// Starts loading leaf entry `i`'s place in the entry table.
    pub fn prefetch_slot(&self, i: usize) {
        if let Body::Leaf(slots) = &self.body {
            if let Some(s) = slots.get(i) {
                prefetch((s as *const Slot).cast(), std::mem::size_of::<Slot>());
            }
        }
    }

    /// Starts loading leaf entry `i`'s key and value bytes.
    pub fn prefetch_entry(&self, i: usize) {
        if let Body::Leaf(slots) = &self.body {
            if let Some(s) = slots.get(i) {
                let (start, end) = (s.key.0 as usize, (s.value.0 + s.value.1) as usize);
                prefetch(
                    self.buf.as_ptr().wrapping_add(start),
                    end.saturating_sub(start),
                );
            }
        }
    }

    /// In bytewise order, the index of the first key not less than `key` (`len()` if none).
    pub fn lower_bound_bytewise(&self, key: &[u8]) -> usize {
        let want = key_prefix(key);
        let prefixes = &self.prefixes[..];
        if prefixes.len() > SCAN_ENTRIES {
            let probe = |i: usize| match prefixes[i].cmp(&want) {
                std::cmp::Ordering::Equal => crate::tree::bytewise(self.key(i), key).is_lt(),
                o => o.is_lt(),
            };
            return crate::tree::partition(prefixes.len(), probe);
        }
        // Counting every prefix loads the whole array at once rather than one line per
        // probe.
        self.lower_bound_from_landing(count_below(prefixes, want), key)
    }

    /// [`Node::lower_bound_bytewise`], from where the search lands by key prefixes
    /// ([`Node::landing`]): only keys whose prefix equals the wanted one are read in full.
    pub fn lower_bound_from_landing(&self, below: usize, key: &[u8]) -> usize {
        let want = key_prefix(key);
        let equal = self.prefixes[below..]
            .iter()
            .take_while(|&&p| p == want)
            .count();
        below
            + crate::tree::partition(equal, |j| {
                crate::tree::bytewise(self.key(below + j), key).is_lt()
            })
    }

    /// Pointer to inner child `i`.
    pub fn child_ptr(&self, i: usize) -> Ptr {
        self.stored_child(i).ptr
    }

    /// Entry count of inner child `i`'s subtree.
    pub fn child_count(&self, i: usize) -> u64 {
        self.stored_child(i).count
    }

    /// Reduction of inner child `i`'s subtree.
    pub fn child_red(&self, i: usize) -> &[u8] {
        self.span(self.stored_child(i).red)
    }

    fn stored_child(&self, i: usize) -> &Child {
        match &self.body {
            Body::Inner(c) => &c[i],
            Body::Leaf(_) => panic!("child() on a leaf"),
        }
    }

    /// Inner child `i`'s node, pinned here once loaded.
    pub fn child<S: NodeSource + ?Sized>(&self, i: usize, src: &S) -> Result<Arc<Node>> {
        match self.pinned[i].get() {
            Some(Pin::Inner(n)) => return Ok(n.clone()),
            Some(Pin::Leaf(leaf, _)) => {
                if let Some(n) = leaf.upgrade() {
                    return Ok(n);
                }
            }
            None => {}
        }
        let n = src.node(self.child_ptr(i))?;
        let _ = self.pinned[i].set(if n.is_leaf() {
            Pin::Leaf(Arc::downgrade(&n), LeafTables::of(&n))
        } else {
            Pin::Inner(n.clone())
        });
        Ok(n)
    }

    /// Inner child `i`'s node, borrowed without touching reference counts when it is a
    /// pinned inner node.
    pub fn child_ref<S: NodeSource + ?Sized>(&self, i: usize, src: &S) -> Result<ChildNode<'_>> {
        match self.pinned[i].get() {
            Some(Pin::Inner(n)) => return Ok(ChildNode::Inner(n)),
            Some(Pin::Leaf(leaf, tables)) => tables.prefetch(leaf.as_ptr()),
            None => {}
        }
        let n = self.child(i, src)?;
        Ok(match self.pinned[i].get() {
            Some(Pin::Inner(pinned)) => ChildNode::Inner(pinned),
            _ => ChildNode::Leaf(n),
        })
    }

    /// Inner child `i` as an owned entry.
    pub fn child_entry(&self, i: usize) -> ChildEntry {
        ChildEntry {
            key: self.key(i).to_vec(),
            ptr: self.child_ptr(i),
            count: self.child_count(i),
            red: self.child_red(i).to_vec(),
        }
    }

    /// Memory this node holds, for the cache's budget: a leaf pinned here may outlive its
    /// contents as a bare `Node` the pin keeps allocated, counted as if it always did.
    pub fn weight(&self) -> u64 {
        let spans = match &self.body {
            Body::Leaf(e) => e.len() * std::mem::size_of::<Slot>(),
            Body::Inner(c) => c.len() * std::mem::size_of::<Child>(),
        };
        let pins = self.pinned.len()
            * (std::mem::size_of::<OnceLock<Pin>>() + std::mem::size_of::<Node>() + 16);
        (self.buf.len() + spans + self.prefixes.len() * 8 + pins + 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_and_inner_round_trip() {
        let leaf = encode_leaf(&[(b"a", b"1"), (b"bb", b"")]);
        let n = Node::decode(RecordKind::Leaf, &leaf, 100).unwrap();
        assert!(n.is_leaf());
        assert_eq!((n.len(), n.key(1), n.value(0)), (2, &b"bb"[..], &b"1"[..]));

        let child = ChildEntry {
            key: b"k".to_vec(),
            ptr: Ptr { offset: 5, len: 20 },
            count: 9,
            red: vec![3],
        };
        let inner = encode_inner(std::slice::from_ref(&child));
        assert_eq!(inner.len(), 1 + child.encoded_len());
        let n = Node::decode(RecordKind::Inner, &inner, 100).unwrap();
        assert_eq!(n.child_entry(0), child);
    }

    #[test]
    fn built_nodes_match_their_decoded_payloads() {
        let entries: Vec<(&[u8], &[u8])> =
            vec![(b"", b"x"), (b"abcdefghij", b""), (b"b", &[7; 300])];
        let built = Node::build_leaf(&entries);
        let decoded = Node::decode(RecordKind::Leaf, built.payload(), 0).unwrap();
        for (i, (k, v)) in entries.iter().enumerate() {
            assert_eq!((built.key(i), built.value(i)), (*k, *v));
            assert_eq!((decoded.key(i), decoded.value(i)), (*k, *v));
        }
        let child = |k: &[u8], n: u64| ChildEntry {
            key: k.to_vec(),
            ptr: Ptr {
                offset: n * 1000,
                len: 300,
            },
            count: n,
            red: vec![n as u8; n as usize],
        };
        let first: Vec<ChildEntry> = (1..5)
            .map(|n| child(format!("key{n}").as_bytes(), n))
            .collect();
        let old = Node::decode(RecordKind::Inner, &encode_inner(&first), u64::MAX).unwrap();
        let fresh = child(b"key2a", 200);
        let pieces = [
            ChildPiece::Kept(&old, 0),
            ChildPiece::Kept(&old, 1),
            ChildPiece::New(&fresh),
            ChildPiece::Kept(&old, 3),
        ];
        let built = Node::build_inner(&pieces);
        let decoded = Node::decode(RecordKind::Inner, built.payload(), u64::MAX).unwrap();
        let want = [&first[0], &first[1], &fresh, &first[3]];
        for (i, c) in want.iter().enumerate() {
            assert_eq!(&built.child_entry(i), *c);
            assert_eq!(&decoded.child_entry(i), *c);
            assert_eq!(built.lower_bound_bytewise(&c.key), i);
        }
    }

    /// Leaves by offset, counting loads; dropping one stands for the cache letting it go.
    struct Leaves(std::sync::Mutex<(std::collections::HashMap<u64, Arc<Node>>, usize)>);

    impl NodeSource for Leaves {
        fn node(&self, ptr: Ptr) -> Result<Arc<Node>> {
            let mut g = self.0.lock().unwrap();
            g.1 += 1;
            let leaf = Node::build_leaf(&[(&ptr.offset.to_be_bytes()[..], b"v")]);
            Ok(g.0
                .entry(ptr.offset)
                .or_insert_with(|| Arc::new(leaf))
                .clone())
        }
    }

    #[test]
    fn leaves_are_pinned_only_while_held_elsewhere() {
        let child = |offset: u64| ChildEntry {
            key: offset.to_be_bytes().to_vec(),
            ptr: Ptr { offset, len: 9 },
            count: 1,
            red: vec![],
        };
        let inner = Node::decode(
            RecordKind::Inner,
            &encode_inner(&[child(10), child(20)]),
            u64::MAX,
        )
        .unwrap();
        let src = Leaves(std::sync::Mutex::new((Default::default(), 0)));
        let loads = || src.0.lock().unwrap().1;
        let first = inner.child(0, &src).unwrap();
        assert_eq!(
            (inner.child(0, &src).unwrap().key(0), loads()),
            (&10u64.to_be_bytes()[..], 1),
            "second descent uses the pin"
        );
        assert!(matches!(
            inner.child_ref(1, &src).unwrap(),
            ChildNode::Leaf(_)
        ));
        assert_eq!(loads(), 2);
        // The source lets leaf 10 go and no one else holds it: the pin is dead and the
        // leaf is loaded again.
        src.0.lock().unwrap().0.remove(&10);
        drop(first);
        assert_eq!(
            inner.child(0, &src).unwrap().key(0),
            &10u64.to_be_bytes()[..]
        );
        assert_eq!(loads(), 3);
    }

    #[test]
    fn bytewise_lower_bound_agrees_with_plain_search() {
        let keys: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"ab".to_vec(),
            b"ab\0".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefghi".to_vec(),
            b"abcdefgi".to_vec(),
            b"b".to_vec(),
            vec![0xff; 12],
        ];
        let mut probes = keys.clone();
        probes.extend([
            b"aa".to_vec(),
            b"abcdefgh\x01".to_vec(),
            b"c".to_vec(),
            vec![0xff; 13],
            vec![0],
        ]);
        check_lower_bound(&keys, &probes);
        // Past SCAN_ENTRIES the node is bisected: many keys, long runs sharing a prefix.
        let mut many: Vec<Vec<u8>> = (0..300u32)
            .map(|i| format!("doc-{:03}{}", i / 40, "x".repeat(i as usize % 40)).into_bytes())
            .collect();
        many.sort();
        let mut probes = many.clone();
        probes.extend([
            b"doc-".to_vec(),
            b"doc-003".to_vec(),
            b"doc-003xy".to_vec(),
            b"doc-9".to_vec(),
            b"".to_vec(),
        ]);
        check_lower_bound(&many, &probes);
    }

    #[test]
    fn prefix_counts_are_unsigned_at_every_length() {
        // Wide compares are signed where the CPU has them; prefixes with the top bit set
        // must still count as large, whatever the length left over for the scalar tail.
        let values = [
            0,
            1,
            0x7fff_ffff_ffff_ffff,
            0x8000_0000_0000_0000,
            0xff00_0000_0000_0000,
            u64::MAX,
        ];
        for len in 0..=70 {
            let prefixes: Vec<u64> = (0..len).map(|i| values[i % values.len()]).collect();
            for want in values {
                assert_eq!(
                    count_below(&prefixes, want),
                    prefixes.iter().filter(|&&p| p < want).count(),
                    "{prefixes:x?} {want:x}"
                );
            }
        }
    }

    fn check_lower_bound(keys: &[Vec<u8>], probes: &[Vec<u8>]) {
        assert!(
            keys.windows(2).all(|w| w[0] < w[1]),
            "keys are sorted and distinct"
        );
        let entries: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (k.as_slice(), &b"v"[..])).collect();
        let n = Node::decode(RecordKind::Leaf, Node::build_leaf(&entries).payload(), 0).unwrap();
        for p in probes {
            let want = keys
                .iter()
                .position(|k| k.as_slice() >= p.as_slice())
                .unwrap_or(keys.len());
            assert_eq!(n.lower_bound_bytewise(p), want, "{p:?}");
        }
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        for bytes in [&b""[..], &[0], &[5, 1], &[1, 0x80], &[1, 1, b'a', 9, 0]] {
            assert!(Node::decode(RecordKind::Leaf, bytes, 0).is_err());
            assert!(Node::decode(RecordKind::Inner, bytes, 0).is_err());
        }
        let forward = encode_inner(&[ChildEntry {
            key: vec![1],
            ptr: Ptr { offset: 50, len: 9 },
            count: 1,
            red: vec![],
        }]);
        assert!(
            Node::decode(RecordKind::Inner, &forward, 10).is_err(),
            "pointer must point backwards"
        );
    }
}
