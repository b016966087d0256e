//! How many bytes of its file a tree takes, for callers that report how much of a file is
//! live (a database's `sizes.active`) and so how much a compaction would give back.

use crate::error::{Error, Result};
use crate::file::NodeSource;
use crate::format::Ptr;
use crate::node::{ChildNode, Node};

/// Bytes of every node record of the tree whose root is at `root`, the root's own and
/// record framing included. Reads the inner nodes only (about one node in a hundred): each
/// knows its children's record lengths, and every path has the same depth, so the leaves'
/// level is found once, down the leftmost path.
pub(crate) fn tree_bytes<S: NodeSource>(src: &S, root: Ptr) -> Result<u64> {
    let node = src.node(root)?;
    let mut height = 0;
    let mut leftmost = node.clone();
    while !leftmost.is_leaf() {
        if height == super::MAX_DEPTH {
            return Err(super::too_deep(root));
        }
        leftmost = leftmost.child(0, src)?;
        height += 1;
    }
    let under = if height == 0 {
        0
    } else {
        below(src, &node, height, root)?
    };
    Ok(u64::from(root.len).saturating_add(under))
}

/// Bytes of the records under `node`, which stands `height` levels above the leaves.
fn below<S: NodeSource>(src: &S, node: &Node, height: usize, at: Ptr) -> Result<u64> {
    let mut total = 0u64;
    for i in 0..node.len() {
        total = total.saturating_add(u64::from(node.child_ptr(i).len));
        if height > 1 {
            let bytes = match node.child_ref(i, src)? {
                ChildNode::Inner(child) => below(src, child, height - 1, node.child_ptr(i))?,
                ChildNode::Leaf(_) => {
                    return Err(Error::corrupted(
                        at.offset,
                        "a leaf above the leaves' level",
                    ))
                }
            };
            total = total.saturating_add(bytes);
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::{Action, Durability, MemBackend, Store, StoreOptions, TreeSpec};

    /// Every node's record length, leaves included, each node loaded to see what it is.
    fn every_record(src: &crate::Snapshot, ptr: Ptr) -> u64 {
        let node = src.node(ptr).unwrap();
        let children: u64 = if node.is_leaf() {
            0
        } else {
            (0..node.len())
                .map(|i| every_record(src, node.child_ptr(i)))
                .sum()
        };
        u64::from(ptr.len) + children
    }

    #[test]
    fn tree_bytes_counts_every_node_record() {
        let options = StoreOptions {
            trees: vec![TreeSpec::default(), TreeSpec::default()],
            node_size: 256,
            ..StoreOptions::default()
        };
        let store = Store::create_backend(
            Arc::new(MemBackend::new()),
            Path::new("size.settee"),
            options,
        )
        .unwrap();
        assert_eq!(
            store.snapshot().tree_bytes(0).unwrap(),
            0,
            "an empty tree takes nothing"
        );
        let put = |from: u32, to: u32, tree: usize| {
            let actions: Vec<Action> = (from..to)
                .map(|i| Action::Put(i.to_be_bytes().to_vec(), vec![7; (i % 50) as usize]))
                .collect();
            store
                .update(Durability::Durable, move |t| t.apply(tree, &actions))
                .unwrap();
        };
        put(0, 3, 0);
        let snap = store.snapshot();
        let root = snap.state.header.roots[0].as_ref().unwrap().ptr;
        assert_eq!(
            snap.tree_bytes(0).unwrap(),
            u64::from(root.len),
            "a one-leaf tree is its root"
        );
        for round in 0..6 {
            put(round * 3000, round * 3000 + 3000, 0);
            put(round * 100, round * 100 + 100, 1);
        }
        let snap = store.snapshot();
        for tree in 0..2 {
            let root = snap.state.header.roots[tree].as_ref().unwrap().ptr;
            assert_eq!(
                snap.tree_bytes(tree).unwrap(),
                every_record(&snap, root),
                "tree {tree}"
            );
        }
        let mut depth = 0;
        let mut node = snap
            .node(snap.state.header.roots[0].as_ref().unwrap().ptr)
            .unwrap();
        while !node.is_leaf() {
            node = node.child(0, &snap).unwrap();
            depth += 1;
        }
        assert!(
            depth >= 3,
            "the test reaches below the second level ({depth})"
        );
    }
}
