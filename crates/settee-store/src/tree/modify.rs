//! Batched copy-on-write modification (CouchDB's `query_modify`): one pass down the paths
//! the batch touches, rewriting only those nodes, and reporting the values it replaced.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{too_deep, Action, TreeSpec, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::file::NodeSource;
use crate::format::{Ptr, Root};
use crate::node::{leaf_entry_len, ChildEntry, ChildPiece, Node};

/// Where new nodes go: the writer's pending region. Nodes written must be readable back
/// through the same value as a [`NodeSource`].
pub(crate) trait NodeSink: NodeSource {
    /// Takes a new node and returns the pointer that refers to it until the next commit.
    fn write_node(&mut self, node: Node) -> Result<Ptr>;
    /// Target node payload size in bytes.
    fn node_size(&self) -> usize;
    /// Hears of a node that the tree being built no longer reaches.
    fn superseded(&mut self, ptr: Ptr);
}

/// An action with its position in the caller's batch.
type Indexed<'a> = (usize, &'a Action);

/// Per action of a batch, the value its key had just before it.
pub(crate) type Replaced = Vec<Option<Vec<u8>>>;

/// Applies `actions` to the tree at `root`; same-key actions apply in batch order. Returns the
/// new root and, per action, the value its key had just before it.
pub(crate) fn modify<S: NodeSink>(
    sink: &mut S,
    spec: &TreeSpec,
    root: Option<&Root>,
    actions: &[Action],
) -> Result<(Option<Root>, Replaced)> {
    let mut sorted: Vec<Indexed> = actions.iter().enumerate().collect();
    sorted.sort_by(|a, b| spec.cmp(a.1.key(), b.1.key()));
    let mut old = vec![None; actions.len()];
    let Some(root) = root else {
        let merged = modify_leaf(spec, None, &sorted, &mut old);
        let children = write_leaves(sink, spec, &merged.entries)?;
        return Ok((build_root(sink, spec, children)?, old));
    };
    if sorted.is_empty() {
        return Ok((Some(root.clone()), old));
    }
    let root_node = sink.node(root.ptr)?;
    let children = modify_subtree(sink, spec, root_node, None, &sorted, &mut old, 0)?;
    note_superseded(sink, root.ptr, &children);
    Ok((build_root(sink, spec, children)?, old))
}

/// Rewrites the subtree at `node` under `actions` (all of which belong to it) and returns the
/// entries that replace its one entry in the parent (`slot`: the parent and the node's
/// position there; None at the root): none, one, or several after a split.
fn modify_subtree<S: NodeSink>(
    sink: &mut S,
    spec: &TreeSpec,
    node: Arc<Node>,
    slot: Option<(&Node, usize)>,
    actions: &[Indexed],
    old: &mut [Option<Vec<u8>>],
    depth: usize,
) -> Result<Vec<ChildEntry>> {
    if depth > MAX_DEPTH {
        return Err(too_deep(Ptr { offset: 0, len: 0 }));
    }
    if node.is_leaf() {
        let merged = modify_leaf(spec, Some(&node), actions, old);
        return write_leaf(sink, spec, slot, merged);
    }
    // Rewritten children, by position; every other child is kept as it is encoded.
    let mut replaced: Vec<(usize, Vec<ChildEntry>)> = Vec::new();
    let mut rest = actions;
    while let Some((_, first)) = rest.first() {
        // The child whose key range holds the first action (keys past the last child's
        // largest key go to the last child), and every following action that belongs to it.
        let i = spec.lower_bound(&node, first.key()).min(node.len() - 1);
        let take = if i + 1 == node.len() {
            rest.len()
        } else {
            rest.partition_point(|(_, a)| spec.cmp(a.key(), node.key(i)) != Ordering::Greater)
        };
        let (mine, after) = rest.split_at(take);
        rest = after;
        let child = node.child(i, &*sink)?;
        let entries = modify_subtree(sink, spec, child, Some((&node, i)), mine, old, depth + 1)?;
        note_superseded(sink, node.child_ptr(i), &entries);
        replaced.push((i, entries));
    }
    let mut pieces = Vec::with_capacity(node.len() + 2);
    let mut next = replaced.iter().peekable();
    for i in 0..node.len() {
        match next.peek() {
            Some((at, entries)) if *at == i => {
                pieces.extend(entries.iter().map(ChildPiece::New));
                next.next();
            }
            _ => pieces.push(ChildPiece::Kept(&node, i)),
        }
    }
    write_inners(sink, spec, &pieces)
}

/// Tells the sink that the node at `old` is gone unless it is among the `entries` that
/// replace it (a full leaf that only had entries appended is kept as it is).
fn note_superseded<S: NodeSink>(sink: &mut S, old: Ptr, entries: &[ChildEntry]) {
    if entries.iter().all(|e| e.ptr != old) {
        sink.superseded(old);
    }
}

/// A leaf's entries merged with the actions for its key range.
struct Merged<'a> {
    entries: Vec<(&'a [u8], &'a [u8])>,
    /// Positions in `entries` of the entries added, when the leaf only grew (every entry it
    /// had is still there unchanged); None when any was replaced or removed.
    added: Option<Vec<usize>>,
}

/// Merges a leaf's entries with the actions for its key range.
fn modify_leaf<'a>(
    spec: &TreeSpec,
    leaf: Option<&'a Arc<Node>>,
    actions: &[Indexed<'a>],
    old: &mut [Option<Vec<u8>>],
) -> Merged<'a> {
    let n = leaf.map_or(0, |l| l.len());
    let entry = |i: usize| {
        let l = leaf.expect("entries exist only in a leaf");
        (l.key(i), l.value(i))
    };
    let mut out = Vec::with_capacity(n + actions.len());
    let mut added = Some(Vec::new());
    let (mut i, mut j) = (0, 0);
    while j < actions.len() {
        let key = actions[j].1.key();
        while i < n && spec.cmp(entry(i).0, key) == Ordering::Less {
            out.push(entry(i));
            i += 1;
        }
        // The entry for this key as it stands: (key bytes, value). Keys may compare equal
        // while differing in bytes; the bytes of whatever put the final value are kept.
        let mut current = None;
        if i < n && spec.cmp(entry(i).0, key) == Ordering::Equal {
            current = Some(entry(i));
            added = None;
            i += 1;
        }
        while j < actions.len() && spec.cmp(actions[j].1.key(), key) == Ordering::Equal {
            let (idx, action) = actions[j];
            old[idx] = current.map(|(_, v)| v.to_vec());
            current = match action {
                Action::Put(k, v) => Some((k.as_slice(), v.as_slice())),
                Action::Delete(_) => None,
            };
            j += 1;
        }
        if let (Some(added), Some(_)) = (added.as_mut(), current) {
            added.push(out.len());
        }
        out.extend(current);
    }
    out.extend((i..n).map(entry));
    Merged {
        entries: out,
        added,
    }
}

/// Writes a modified leaf that sits at `slot` in its parent. A leaf that only grew is
/// written without reducing its old entries again: the new reduction combines the stored one
/// with the added entries' (which reduce and rereduce must allow, as CouchDB's do). When such
/// a leaf overflows and everything added sorts after its old entries (appends, such as
/// sequence numbers or ids that only increase), the old leaf stays as it is and the added
/// entries start new leaves. Anything else is rewritten and reduced in full.
fn write_leaf<S: NodeSink>(
    sink: &mut S,
    spec: &TreeSpec,
    slot: Option<(&Node, usize)>,
    merged: Merged,
) -> Result<Vec<ChildEntry>> {
    let (Some((parent, i)), Some(added)) = (slot, merged.added.filter(|a| !a.is_empty())) else {
        return write_leaves(sink, spec, &merged.entries);
    };
    let (entries, stored) = (&merged.entries, parent.child_red(i));
    if !spec.reducer.extends(stored) {
        return write_leaves(sink, spec, entries);
    }
    let size: usize = entries.iter().map(|(k, v)| leaf_entry_len(k, v)).sum();
    if size <= sink.node_size() {
        let new: Vec<(&[u8], &[u8])> = added.iter().map(|&at| entries[at]).collect();
        let new_red = spec.reducer.reduce(&new).map_err(Error::Reduce)?;
        let red = spec
            .reducer
            .rereduce(&[stored, &new_red])
            .map_err(Error::Reduce)?;
        return Ok(vec![write_leaf_node(sink, entries, red)?]);
    }
    let kept = entries.len() - added.len();
    let appended = added[0] == kept;
    if appended
        && entries[..kept]
            .iter()
            .map(|(k, v)| leaf_entry_len(k, v))
            .sum::<usize>()
            * 2
            >= sink.node_size()
    {
        let mut out = vec![parent.child_entry(i)];
        out.extend(write_leaves(sink, spec, &entries[kept..])?);
        return Ok(out);
    }
    write_leaves(sink, spec, entries)
}

/// Writes leaf entries as leaves of about the node size.
pub(crate) fn write_leaves<S: NodeSink>(
    sink: &mut S,
    spec: &TreeSpec,
    entries: &[(&[u8], &[u8])],
) -> Result<Vec<ChildEntry>> {
    let ranges = split(
        entries.iter().map(|(k, v)| leaf_entry_len(k, v)),
        sink.node_size(),
        1,
        entries.len(),
    );
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let chunk = &entries[r];
        let red = spec.reducer.reduce(chunk).map_err(Error::Reduce)?;
        out.push(write_leaf_node(sink, chunk, red)?);
    }
    Ok(out)
}

/// Writes one leaf of `entries` (non-empty) whose reduction is `red`; its entry for the parent.
fn write_leaf_node<S: NodeSink>(
    sink: &mut S,
    entries: &[(&[u8], &[u8])],
    red: Vec<u8>,
) -> Result<ChildEntry> {
    let ptr = sink.write_node(Node::build_leaf(entries))?;
    let key = entries.last().expect("leaves are non-empty").0.to_vec();
    Ok(ChildEntry {
        key,
        ptr,
        count: entries.len() as u64,
        red,
    })
}

/// Writes children as inner nodes of about the node size.
fn write_inners<S: NodeSink>(
    sink: &mut S,
    spec: &TreeSpec,
    children: &[ChildPiece],
) -> Result<Vec<ChildEntry>> {
    let ranges = split(
        children.iter().map(ChildPiece::encoded_len),
        sink.node_size(),
        2,
        children.len(),
    );
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let chunk = &children[r];
        let reds: Vec<&[u8]> = chunk.iter().map(ChildPiece::red).collect();
        let red = spec.reducer.rereduce(&reds).map_err(Error::Reduce)?;
        let ptr = sink.write_node(Node::build_inner(chunk))?;
        let key = chunk.last().expect("chunks are non-empty").key().to_vec();
        let count = chunk.iter().fold(0u64, |n, c| n.saturating_add(c.count()));
        out.push(ChildEntry {
            key,
            ptr,
            count,
            red,
        });
    }
    Ok(out)
}

/// Greedy split of `len` items by encoded size; every run but possibly the last has at least
/// `min` items.
fn split(
    sizes: impl Iterator<Item = usize>,
    limit: usize,
    min: usize,
    len: usize,
) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, s) in sizes.enumerate() {
        if i - start >= min && size + s > limit {
            out.push(start..i);
            start = i;
            size = 0;
        }
        size += s;
    }
    if start < len {
        out.push(start..len);
    }
    out
}

/// Stacks levels of inner nodes on `children` until one root remains.
pub(crate) fn build_root<S: NodeSink>(
    sink: &mut S,
    spec: &TreeSpec,
    mut children: Vec<ChildEntry>,
) -> Result<Option<Root>> {
    while children.len() > 1 {
        let pieces: Vec<ChildPiece> = children.iter().map(ChildPiece::New).collect();
        children = write_inners(sink, spec, &pieces)?;
    }
    let Some(mut top) = children.pop() else {
        return Ok(None);
    };
    // A root with a single child adds a level for nothing: the child becomes the root.
    for _ in 0..=MAX_DEPTH {
        let node = sink.node(top.ptr)?;
        if node.is_leaf() || node.len() > 1 {
            break;
        }
        top = node.child_entry(0);
    }
    Ok(Some(Root {
        ptr: top.ptr,
        count: top.count,
        reduction: top.red,
    }))
}
