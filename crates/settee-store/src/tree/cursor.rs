//! A position in a tree that walks entries in either direction and skips whole subtrees by
//! their stored counts.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{partition, within_end, Bound, Direction, RangeOptions, TreeSpec};
use crate::error::{Error, Result};
use crate::file::NodeSource;
use crate::format::Root;
use crate::node::{ChildNode, Node, Peek};
use crate::overlay::{Overlay, OverlayWalk};

/// One entry of a tree, borrowed from its (shared, immutable) leaf.
#[derive(Clone)]
pub struct Entry {
    leaf: Arc<Node>,
    idx: usize,
}

impl Entry {
    pub(crate) fn new(leaf: Arc<Node>, idx: usize) -> Entry {
        Entry { leaf, idx }
    }

    /// The entry's key.
    pub fn key(&self) -> &[u8] {
        self.leaf.key(self.idx)
    }
    /// The entry's value.
    pub fn value(&self) -> &[u8] {
        self.leaf.value(self.idx)
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &self.key())
            .field("value", &self.value())
            .finish()
    }
}

/// A path from the root to one leaf entry. Empty stack = past the end.
pub(crate) struct Cursor<S> {
    src: S,
    stack: Vec<(Arc<Node>, usize)>,
}

impl<S: NodeSource> Cursor<S> {
    /// A cursor at the first entry `bound` admits, walking in `dir`.
    pub fn seek(
        src: S,
        spec: &TreeSpec,
        root: Option<&Root>,
        bound: &Bound,
        dir: Direction,
    ) -> Result<Cursor<S>> {
        let mut c = Cursor {
            src,
            stack: Vec::new(),
        };
        let Some(root) = root else { return Ok(c) };
        let mut node = c.src.node(root.ptr)?;
        loop {
            let idx = first_at_or_after(spec, &node, bound, dir);
            if node.is_leaf() {
                return c.settle_leaf(node, idx, dir);
            }
            let Some(idx) = idx else {
                return Ok(Cursor {
                    stack: Vec::new(),
                    ..c
                });
            };
            if c.stack.len() > super::MAX_DEPTH {
                return Err(super::too_deep(root.ptr));
            }
            let child = node.child(idx, &c.src)?;
            c.stack.push((node, idx));
            node = child;
        }
    }

    /// Places the cursor in `leaf` at the candidate index the seek found.
    fn settle_leaf(
        mut self,
        leaf: Arc<Node>,
        idx: Option<usize>,
        dir: Direction,
    ) -> Result<Cursor<S>> {
        match (dir, idx) {
            (_, Some(i)) => {
                self.stack.push((leaf, i));
                Ok(self)
            }
            (Direction::Forward, None) => {
                // Only possible on a rightmost leaf: nothing at or after the bound.
                self.stack.clear();
                Ok(self)
            }
            (Direction::Backward, None) => {
                self.stack.push((leaf, 0));
                self.step_back()?;
                Ok(self)
            }
        }
    }

    /// The entry under the cursor, if any.
    pub fn entry(&self) -> Option<Entry> {
        self.stack.last().map(|(leaf, idx)| Entry {
            leaf: leaf.clone(),
            idx: *idx,
        })
    }

    /// Moves `n` entries in `dir`, skipping whole subtrees by count where it can.
    pub fn skip(&mut self, n: u64, dir: Direction) -> Result<()> {
        match dir {
            Direction::Forward => self.skip_forward(n),
            Direction::Backward => self.skip_backward(n),
        }
    }

    fn skip_forward(&mut self, mut n: u64) -> Result<()> {
        let Some((leaf, idx)) = self.stack.last_mut() else {
            return Ok(());
        };
        let left = (leaf.len() - *idx) as u64;
        if n < left {
            *idx += n as usize;
            return Ok(());
        }
        n -= left;
        self.stack.pop();
        while let Some((node, idx)) = self.stack.last_mut() {
            let mut c = *idx + 1;
            while c < node.len() && node.child_count(c) <= n {
                n -= node.child_count(c);
                c += 1;
            }
            if c < node.len() {
                *idx = c;
                let (ptr, child) = (node.child_ptr(c), node.child(c, &self.src)?);
                return self.descend(ptr, child, n, Direction::Forward);
            }
            self.stack.pop();
        }
        Ok(())
    }

    fn skip_backward(&mut self, mut n: u64) -> Result<()> {
        let Some((_, idx)) = self.stack.last_mut() else {
            return Ok(());
        };
        if n <= *idx as u64 {
            *idx -= n as usize;
            return Ok(());
        }
        n -= *idx as u64 + 1;
        self.stack.pop();
        while let Some((node, idx)) = self.stack.last_mut() {
            let mut c = *idx;
            while c > 0 && node.child_count(c - 1) <= n {
                n -= node.child_count(c - 1);
                c -= 1;
            }
            if c > 0 {
                *idx = c - 1;
                let (ptr, child) = (node.child_ptr(c - 1), node.child(c - 1, &self.src)?);
                return self.descend(ptr, child, n, Direction::Backward);
            }
            self.stack.pop();
        }
        Ok(())
    }

    fn step_back(&mut self) -> Result<()> {
        self.skip_backward(1)
    }

    /// Pushes the path to the entry `n` places from the start (in `dir`) of the subtree.
    fn descend(
        &mut self,
        ptr: crate::format::Ptr,
        mut node: Arc<Node>,
        mut n: u64,
        dir: Direction,
    ) -> Result<()> {
        loop {
            let len = node.len();
            if node.is_leaf() {
                if n >= len as u64 {
                    return Err(Error::corrupted(
                        ptr.offset,
                        "subtree count disagrees with its leaves",
                    ));
                }
                let idx = match dir {
                    Direction::Forward => n as usize,
                    Direction::Backward => len - 1 - n as usize,
                };
                self.stack.push((node, idx));
                return Ok(());
            }
            let order: Box<dyn Iterator<Item = usize>> = match dir {
                Direction::Forward => Box::new(0..len),
                Direction::Backward => Box::new((0..len).rev()),
            };
            let mut chosen = None;
            for c in order {
                let count = node.child_count(c);
                if n < count {
                    chosen = Some(c);
                    break;
                }
                n -= count;
            }
            let c = chosen.ok_or_else(|| {
                Error::corrupted(ptr.offset, "subtree count disagrees with its children")
            })?;
            if self.stack.len() > super::MAX_DEPTH {
                return Err(super::too_deep(ptr));
            }
            let child = node.child(c, &self.src)?;
            self.stack.push((node, c));
            node = child;
        }
    }
}

/// In `node`, the index of the entry (or child) where a walk in `dir` starting at `bound`
/// begins. Forward: the first key at or after the bound. Backward, in a leaf: the last key at
/// or before it; in an inner node: the child that may hold that key. `None` when the walk
/// begins outside this node.
fn first_at_or_after(spec: &TreeSpec, node: &Node, bound: &Bound, dir: Direction) -> Option<usize> {
    let len = node.len();
    let (key, inclusive) = match bound {
        Bound::Unbounded => {
            return match dir {
                Direction::Forward => Some(0),
                Direction::Backward => Some(len - 1),
            }
        }
        Bound::Included(k) => (k.as_slice(), true),
        Bound::Excluded(k) => (k.as_slice(), false),
    };
    // Number of keys strictly before the start (forward) or not after it (backward, leaf).
    let below = |strict: bool| {
        partition(len, |i| match spec.cmp(node.key(i), key) {
            Ordering::Less => true,
            Ordering::Equal => !strict,
            Ordering::Greater => false,
        })
    };
    match dir {
        Direction::Forward => {
            let p = below(inclusive);
            (p < len).then_some(p)
        }
        Direction::Backward if node.is_leaf() => below(!inclusive).checked_sub(1),
        Direction::Backward => Some(below(true).min(len - 1)),
    }
}

/// What a range reads nodes through: an owned snapshot, or a borrowed transaction.
pub(crate) type BoxSource<'a> = Box<dyn NodeSource + Send + Sync + 'a>;

/// The entries of a key range, in walk order. Each item borrows nothing from the caller;
/// a range taken from a snapshot keeps that snapshot alive by itself.
pub struct Range<'a>(Walk<'a>);

enum Walk<'a> {
    Nodes(NodeRange<'a>),
    /// A logged tree's nodes with its changes since the last fold.
    Merged(Box<Merged<'a>>),
}

impl<'a> Range<'a> {
    pub(crate) fn new(
        src: BoxSource<'a>,
        spec: &TreeSpec,
        root: Option<&Root>,
        opts: RangeOptions,
    ) -> Result<Range<'a>> {
        Ok(Range(Walk::Nodes(NodeRange::new(src, spec, root, opts)?)))
    }

    /// The range of a tree's nodes merged with `overlay`'s changes, which shadow them.
    pub(crate) fn merged(
        src: BoxSource<'a>,
        spec: &TreeSpec,
        root: Option<&Root>,
        opts: RangeOptions,
        overlay: &Overlay,
    ) -> Result<Range<'a>> {
        if overlay.is_empty() {
            return Range::new(src, spec, root, opts);
        }
        let changes = overlay.walk(&opts.start, &opts.end, opts.direction);
        let (skip, remaining) = (opts.skip, opts.limit.unwrap_or(u64::MAX));
        let mut nodes = NodeRange::new(
            src,
            spec,
            root,
            RangeOptions {
                skip: 0,
                limit: None,
                ..opts
            },
        )?;
        let changes = changes.peekable();
        let next_node = nodes.advance()?;
        Ok(Range(Walk::Merged(Box::new(Merged {
            nodes,
            next_node,
            changes,
            spec: spec.clone(),
            skip,
            remaining,
        }))))
    }
}

impl Iterator for Range<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        match &mut self.0 {
            Walk::Nodes(r) => r.next(),
            Walk::Merged(m) => m.next(),
        }
    }
}

/// A walk of both a tree's nodes and its logged changes.
struct Merged<'a> {
    nodes: NodeRange<'a>,
    /// The nodes' next entry in the range.
    next_node: Option<Entry>,
    changes: std::iter::Peekable<OverlayWalk>,
    spec: TreeSpec,
    skip: u64,
    remaining: u64,
}

impl Merged<'_> {
    /// The next entry of the merged walk, whether skipped or not.
    fn step(&mut self) -> Result<Option<Entry>> {
        loop {
            let order = match (&self.next_node, self.changes.peek()) {
                (None, None) => return Ok(None),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(n), Some((k, _))) => match self.nodes.dir {
                    Direction::Forward => self.spec.cmp(n.key(), k),
                    Direction::Backward => self.spec.cmp(k, n.key()),
                },
            };
            if order == Ordering::Less {
                let entry = self.next_node.take();
                self.next_node = self.nodes.advance()?;
                return Ok(entry);
            }
            if order == Ordering::Equal {
                // The change shadows the nodes' entry for its key.
                self.next_node = self.nodes.advance()?;
            }
            let (_, change) = self.changes.next().expect("peeked");
            if let Some(leaf) = change.now {
                return Ok(Some(Entry::new(leaf, 0)));
            }
        }
    }

    fn next(&mut self) -> Option<Result<Entry>> {
        while self.remaining > 0 {
            match self.step() {
                Err(e) => {
                    self.remaining = 0;
                    return Some(Err(e));
                }
                Ok(None) => self.remaining = 0,
                Ok(Some(_)) if self.skip > 0 => self.skip -= 1,
                Ok(Some(entry)) => {
                    self.remaining -= 1;
                    return Some(Ok(entry));
                }
            }
        }
        None
    }
}

/// The entries of a key range of a tree's nodes.
pub(crate) struct NodeRange<'a> {
    cursor: Cursor<BoxSource<'a>>,
    spec: TreeSpec,
    end: Bound,
    dir: Direction,
    remaining: u64,
    /// Entries to move past before the next one is read: the skip, then 1 after each entry.
    pending: u64,
    failed: bool,
}

impl<'a> NodeRange<'a> {
    pub(crate) fn new(
        src: BoxSource<'a>,
        spec: &TreeSpec,
        root: Option<&Root>,
        opts: RangeOptions,
    ) -> Result<NodeRange<'a>> {
        let cursor = Cursor::seek(src, spec, root, &opts.start, opts.direction)?;
        Ok(NodeRange {
            cursor,
            spec: spec.clone(),
            end: opts.end,
            dir: opts.direction,
            remaining: opts.limit.unwrap_or(u64::MAX),
            pending: opts.skip,
            failed: false,
        })
    }

    fn advance(&mut self) -> Result<Option<Entry>> {
        if self.remaining == 0 {
            return Ok(None);
        }
        if self.pending > 0 {
            self.cursor
                .skip(std::mem::take(&mut self.pending), self.dir)?;
        }
        let entry = self
            .cursor
            .entry()
            .filter(|e| within_end(&self.spec, e.key(), &self.end, self.dir));
        let Some(entry) = entry else {
            self.remaining = 0;
            return Ok(None);
        };
        self.remaining -= 1;
        self.pending = 1;
        Ok(Some(entry))
    }
}

impl Iterator for NodeRange<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        match self.advance() {
            Ok(e) => e.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// The entry for exactly `key` in `leaf`.
fn in_leaf(spec: &TreeSpec, leaf: Arc<Node>, key: &[u8]) -> Option<Entry> {
    let i = spec.lower_bound(&leaf, key);
    exact(spec, leaf, i, key)
}

/// Entry `i` of `leaf` (the first not below `key`) if it is `key`'s.
fn exact(spec: &TreeSpec, leaf: Arc<Node>, i: usize, key: &[u8]) -> Option<Entry> {
    (i < leaf.len() && spec.cmp(leaf.key(i), key) == Ordering::Equal).then(|| Entry::new(leaf, i))
}

/// `node`, found where its parent keeps a leaf; anything else there is damage.
fn as_leaf(node: Arc<Node>) -> Result<Arc<Node>> {
    if node.is_leaf() {
        Ok(node)
    } else {
        Err(Error::corrupted(0, "a leaf's place holds an inner node"))
    }
}

/// The entry for exactly `key`, found by one descent from `root`. Inner levels are walked
/// by reference through pinned children; the leaf comes from its parent's pin while the
/// cache still holds it, else from the cache.
pub(crate) fn lookup<S: NodeSource>(
    src: &S,
    spec: &TreeSpec,
    root: &Arc<Node>,
    key: &[u8],
) -> Result<Option<Entry>> {
    if root.is_leaf() {
        return Ok(in_leaf(spec, root.clone(), key));
    }
    let mut node: &Node = root;
    for _ in 0..super::MAX_DEPTH {
        let i = spec.lower_bound(node, key);
        if i == node.len() {
            return Ok(None);
        }
        match node.child_ref(i, src)? {
            ChildNode::Inner(child) => node = child,
            ChildNode::Leaf(leaf) => {
                let leaf = as_leaf(leaf)?;
                leaf.prefetch_tables();
                return Ok(in_leaf(spec, leaf, key));
            }
        }
    }
    Err(Error::corrupted(0, "tree deeper than any valid tree"))
}

/// How many lookups [`lookup_many`] keeps in flight: enough to overlap their cache misses,
/// few enough that what they ask the CPU to load stays in its first-level cache.
const IN_FLIGHT: usize = 16;

/// Where one of [`lookup_many`]'s descents stands. Each step mostly reads memory that the
/// step before asked the CPU to load, then asks for what the next step reads.
enum Step<'a> {
    /// Searching an inner node, its key prefixes on their way.
    Search(&'a Node),
    /// Child `i` chosen, the parent's pin on its way.
    Pick(&'a Node, usize),
    /// A pinned leaf (`true`: the leaf and its key prefixes on their way) or a child not
    /// pinned yet: taking hold of it.
    Take(&'a Node, usize, bool),
    /// Where the search lands in a leaf, by key prefixes: that entry's place on its way.
    Locate(Arc<Node>, usize),
    /// Checking the leaf (in bytewise order: from where the search landed, that entry's
    /// bytes on their way).
    Check(Arc<Node>, Option<usize>),
    Done(Option<Entry>),
}

/// The entries for exactly `keys`, in order, as [`lookup`] finds them one by one, but with
/// up to [`IN_FLIGHT`] descents taking turns a step at a time, so that their cache misses
/// overlap instead of following one another.
pub(crate) fn lookup_many<S: NodeSource, K: AsRef<[u8]>>(
    src: &S,
    spec: &TreeSpec,
    root: &Arc<Node>,
    keys: &[K],
) -> Result<Vec<Option<Entry>>> {
    let mut out = Vec::with_capacity(keys.len());
    if root.is_leaf() {
        out.extend(keys.iter().map(|k| in_leaf(spec, root.clone(), k.as_ref())));
        return Ok(out);
    }
    let mut steps: Vec<Step> = Vec::with_capacity(IN_FLIGHT);
    for group in keys.chunks(IN_FLIGHT) {
        steps.clear();
        steps.extend(group.iter().map(|_| Step::Search(root)));
        // A descent takes two steps per inner level (three where a child is not pinned
        // yet) and at most three more at its leaf.
        for _ in 0..3 * super::MAX_DEPTH + 3 {
            let mut busy = false;
            for (step, key) in steps.iter_mut().zip(group) {
                if !matches!(step, Step::Done(_)) {
                    *step = advance(
                        src,
                        spec,
                        std::mem::replace(step, Step::Done(None)),
                        key.as_ref(),
                    )?;
                    busy = true;
                }
            }
            if !busy {
                break;
            }
        }
        for step in steps.drain(..) {
            match step {
                Step::Done(found) => out.push(found),
                _ => return Err(Error::corrupted(0, "tree deeper than any valid tree")),
            }
        }
    }
    Ok(out)
}

/// One step of a batched descent for `key`.
fn advance<'a, S: NodeSource>(
    src: &S,
    spec: &TreeSpec,
    step: Step<'a>,
    key: &[u8],
) -> Result<Step<'a>> {
    // Bytewise leaves are found entry by entry, asking only for the lines each step reads;
    // other orders search the whole leaf.
    let found = |leaf: Arc<Node>| {
        let leaf = as_leaf(leaf)?;
        Ok(if spec.is_bytewise() {
            let at = leaf.landing(key);
            leaf.prefetch_slot(at);
            Step::Locate(leaf, at)
        } else {
            leaf.prefetch_tables();
            Step::Check(leaf, None)
        })
    };
    Ok(match step {
        Step::Search(node) => {
            let i = spec.lower_bound(node, key);
            if i == node.len() {
                return Ok(Step::Done(None));
            }
            node.prefetch_pin(i);
            Step::Pick(node, i)
        }
        Step::Pick(node, i) => match node.peek_child(i) {
            Peek::Inner(child) => {
                child.prefetch_tables();
                Step::Search(child)
            }
            Peek::Leaf => Step::Take(node, i, true),
            Peek::Unpinned => Step::Take(node, i, false),
        },
        Step::Take(node, i, true) => found(node.child(i, src)?)?,
        Step::Take(node, i, false) => match node.child_ref(i, src)? {
            ChildNode::Inner(child) => {
                child.prefetch_tables();
                Step::Search(child)
            }
            ChildNode::Leaf(leaf) => found(leaf)?,
        },
        Step::Locate(leaf, at) => {
            leaf.prefetch_entry(at);
            Step::Check(leaf, Some(at))
        }
        Step::Check(leaf, None) => Step::Done(in_leaf(spec, leaf, key)),
        Step::Check(leaf, Some(at)) => {
            let i = leaf.lower_bound_from_landing(at, key);
            Step::Done(exact(spec, leaf, i, key))
        }
        done @ Step::Done(_) => done,
    })
}
