//! The changes between two versions of one tree in the same file.
//!
//! Copy-on-write means an unchanged subtree keeps its pointer, so two versions share every
//! node that no change touched. Only inner nodes are read to learn which nodes each version
//! has; only leaves that one version has and the other lacks are read for entries.

use std::collections::{BTreeMap, HashSet};

use super::Action;
use crate::error::Result;
use crate::file::NodeSource;
use crate::format::{Ptr, Root};

/// The actions that turn `old` into `new`, in bytewise key order.
pub(crate) fn diff<S: NodeSource>(src: &S, old: Option<&Root>, new: Option<&Root>) -> Result<Vec<Action>> {
    let old_nodes = node_set(src, old)?;
    let new_nodes = node_set(src, new)?;
    let mut gone = BTreeMap::new();
    let mut came = BTreeMap::new();
    if let Some(r) = old {
        unshared_entries(src, r.ptr, &new_nodes, &mut gone)?;
    }
    if let Some(r) = new {
        unshared_entries(src, r.ptr, &old_nodes, &mut came)?;
    }
    let mut actions = Vec::new();
    for (k, v) in &came {
        if gone.get(k) != Some(v) {
            actions.push(Action::Put(k.clone(), v.clone()));
        }
    }
    for k in gone.keys() {
        if !came.contains_key(k) {
            actions.push(Action::Delete(k.clone()));
        }
    }
    actions.sort_by(|a, b| a.key().cmp(b.key()));
    Ok(actions)
}

/// Offsets of every node of a tree, found by reading its inner nodes only.
fn node_set<S: NodeSource>(src: &S, root: Option<&Root>) -> Result<HashSet<u64>> {
    let mut set = HashSet::new();
    let Some(root) = root else { return Ok(set) };
    set.insert(root.ptr.offset);
    let mut level = vec![root.ptr];
    // Depth is the same along every path, so one node tells whether a level is leaves.
    while !src.node(level[0])?.is_leaf() {
        let mut next = Vec::new();
        for ptr in level {
            let node = src.node(ptr)?;
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
fn unshared_entries<S: NodeSource>(src: &S, ptr: Ptr, other: &HashSet<u64>, out: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Result<()> {
    if other.contains(&ptr.offset) {
        return Ok(());
    }
    let node = src.node(ptr)?;
    if node.is_leaf() {
        for i in 0..node.len() {
            out.insert(node.key(i).to_vec(), node.value(i).to_vec());
        }
        return Ok(());
    }
    for i in 0..node.len() {
        unshared_entries(src, node.child_ptr(i), other, out)?;
    }
    Ok(())
}
