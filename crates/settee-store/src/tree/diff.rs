//! The changes between two versions of one tree in the same file.
//!
//! Copy-on-write means an unchanged subtree keeps its pointer, so two versions share every
//! node that no change touched. Only inner nodes are read to learn which nodes each version
//! has; only leaves that one version has and the other lacks are read for entries.

use std::cmp::Ordering;
use std::collections::HashSet;

use super::{too_deep, Action, TreeSpec, MAX_DEPTH};
use crate::error::Result;
use crate::file::NodeSource;
use crate::format::{Ptr, Root};

/// The actions that turn `old` into `new`, in key order: at most one per key.
pub(crate) fn diff<S: NodeSource>(
    src: &S,
    spec: &TreeSpec,
    old: Option<&Root>,
    new: Option<&Root>,
) -> Result<Vec<Action>> {
    let old_nodes = node_set(src, old)?;
    let new_nodes = node_set(src, new)?;
    let (mut gone, mut came) = (Vec::new(), Vec::new());
    if let Some(r) = old {
        unshared_entries(src, r.ptr, &new_nodes, &mut gone, 0)?;
    }
    if let Some(r) = new {
        unshared_entries(src, r.ptr, &old_nodes, &mut came, 0)?;
    }
    // Both lists are in key order: merge them.
    let mut actions = Vec::new();
    let (mut gone, mut came) = (gone.into_iter().peekable(), came.into_iter().peekable());
    loop {
        let order = match (gone.peek(), came.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(g), Some(c)) => spec.cmp(&g.0, &c.0),
        };
        match order {
            Ordering::Less => actions.push(Action::Delete(gone.next().expect("peeked").0)),
            Ordering::Greater => {
                let (k, v) = came.next().expect("peeked");
                actions.push(Action::Put(k, v));
            }
            Ordering::Equal => {
                let old = gone.next().expect("peeked");
                let new = came.next().expect("peeked");
                if old != new {
                    actions.push(Action::Put(new.0, new.1));
                }
            }
        }
    }
    Ok(actions)
}

/// Offsets of every node of a tree, found by reading its inner nodes only.
fn node_set<S: NodeSource>(src: &S, root: Option<&Root>) -> Result<HashSet<u64>> {
    let mut set = HashSet::new();
    let Some(root) = root else { return Ok(set) };
    set.insert(root.ptr.offset);
    let mut level = vec![root.ptr];
    let mut depth = 0;
    // Depth is the same along every path, so one node tells whether a level is leaves.
    while !src.node(level[0])?.is_leaf() {
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(too_deep(level[0]));
        }
        let mut next = Vec::new();
        for ptr in level {
            let node = src.node(ptr)?;
            if node.is_leaf() {
                return Err(crate::error::Error::corrupted(
                    ptr.offset,
                    "leaves at different depths",
                ));
            }
            for i in 0..node.len() {
                let child = node.child_ptr(i);
                if set.insert(child.offset) {
                    next.push(child);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Ok(set)
}

/// Entries of the leaves under `ptr` that are not nodes of the other version.
fn unshared_entries<S: NodeSource>(
    src: &S,
    ptr: Ptr,
    other: &HashSet<u64>,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    depth: usize,
) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep(ptr));
    }
    if other.contains(&ptr.offset) {
        return Ok(());
    }
    let node = src.node(ptr)?;
    if node.is_leaf() {
        for i in 0..node.len() {
            out.push((node.key(i).to_vec(), node.value(i).to_vec()));
        }
        return Ok(());
    }
    for i in 0..node.len() {
        unshared_entries(src, node.child_ptr(i), other, out, depth + 1)?;
    }
    Ok(())
}
