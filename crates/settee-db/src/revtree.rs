//! Revision trees, kept exactly as CouchDB keeps them.
//!
//! A document's history is a forest of revisions: each edit adds a child to a leaf, conflicting
//! edits (or replicated histories) add siblings, and stemming at `revs_limit` cuts old
//! ancestors off, turning their descendants into new roots. The tree is stored flat: each node
//! names its parent by index, so a tree encodes and decodes without recursion.
//!
//! Invariants: revisions are unique within a tree; a node's parent is one position shallower
//! and appears earlier in `nodes`.

use settee_json::Rev;

/// One revision in a tree.
#[derive(Clone, Debug, PartialEq)]
pub struct RevNode<I> {
    /// The revision.
    pub rev: Rev,
    /// Index of the parent revision, if it is known (not stemmed away, not a root).
    pub parent: Option<usize>,
    /// Whether this revision is a deletion (a tombstone).
    pub deleted: bool,
    /// What is stored for this revision; `None` when only its id is known ("missing", as for
    /// ancestors received by replication or bodies dropped by compaction).
    pub info: Option<I>,
}

/// A document's revision forest with per-revision payloads `I`.
#[derive(Clone, Debug, PartialEq)]
pub struct RevTree<I> {
    /// Nodes, parents before children.
    pub nodes: Vec<RevNode<I>>,
}

impl<I> Default for RevTree<I> {
    fn default() -> Self {
        RevTree { nodes: Vec::new() }
    }
}

/// What merging a replicated path did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merged {
    /// The leaf revision was already present: nothing changed.
    Exists,
    /// New revisions were added; the index of the path's leaf.
    Added(usize),
}

impl<I> RevTree<I> {
    /// Index of a revision, if present.
    pub fn find(&self, rev: &Rev) -> Option<usize> {
        self.nodes.iter().position(|n| n.rev == *rev)
    }

    /// How many children each node has, by index.
    pub(crate) fn child_counts(&self) -> Vec<u32> {
        let mut counts = vec![0u32; self.nodes.len()];
        for n in &self.nodes {
            if let Some(p) = n.parent {
                counts[p] += 1;
            }
        }
        counts
    }

    /// Indices of the leaves (revisions without children), in CouchDB's ranking: live before
    /// deleted, then deepest first, then by revision id descending. The first is the winner.
    pub fn leaves(&self) -> Vec<usize> {
        if self.nodes.len() == 1 {
            return vec![0]; // most documents: one revision, no tables to build
        }
        let counts = self.child_counts();
        let mut leaves: Vec<usize> = (0..self.nodes.len()).filter(|&i| counts[i] == 0).collect();
        leaves.sort_by(|&a, &b| self.rank(b).cmp(&self.rank(a)));
        leaves
    }

    fn rank(&self, i: usize) -> (bool, &Rev) {
        (!self.nodes[i].deleted, &self.nodes[i].rev)
    }

    /// The leaves descending from `i` (just `i` when it is a leaf), in ranking order.
    pub fn leaves_below(&self, i: usize) -> Vec<usize> {
        self.leaves()
            .into_iter()
            .filter(|&l| self.path(l).contains(&i))
            .collect()
    }

    /// Whether `i` is a leaf.
    pub fn is_leaf(&self, i: usize) -> bool {
        !self.nodes.iter().any(|n| n.parent == Some(i))
    }

    /// The winning revision: the best-ranked leaf.
    pub fn winner(&self) -> Option<usize> {
        if self.nodes.len() <= 1 {
            return self.nodes.first().map(|_| 0);
        }
        let counts = self.child_counts();
        (0..self.nodes.len())
            .filter(|&i| counts[i] == 0)
            .max_by(|&a, &b| self.rank(a).cmp(&self.rank(b)))
    }

    /// The path from `i` to its oldest known ancestor, `i` first.
    pub fn path(&self, i: usize) -> Vec<usize> {
        let mut out = vec![i];
        let mut at = i;
        while let Some(p) = self.nodes[at].parent {
            out.push(p);
            at = p;
        }
        out
    }

    /// Adds a child to `parent` (or a new root at depth 1 when `None`). The caller has checked
    /// that `parent` is a leaf, as an interactive edit requires.
    pub fn add_child(
        &mut self,
        parent: Option<usize>,
        id: settee_json::RevId,
        deleted: bool,
        info: I,
    ) -> usize {
        let pos = parent.map_or(1, |p| self.nodes[p].rev.pos + 1);
        self.nodes.push(RevNode {
            rev: Rev { pos, id },
            parent,
            deleted,
            info: Some(info),
        });
        self.nodes.len() - 1
    }

    /// Merges a replicated history, `path[0]` being the new leaf and each next entry its
    /// parent (CouchDB's `new_edits=false`). Unknown ancestors are added without payload;
    /// a stemmed root found on the path is reattached to the ancestors the path names.
    pub fn merge_path(&mut self, path: &[Rev], deleted: bool, info: I) -> Merged {
        let Some(leaf) = path.first() else {
            return Merged::Exists;
        };
        if self.find(leaf).is_some() {
            return Merged::Exists;
        }
        let mut prev: Option<usize> = None;
        let mut reordered = false;
        for rev in path.iter().skip(1).rev() {
            prev = Some(match self.find(rev) {
                Some(i) => {
                    if self.nodes[i].parent.is_none() && prev.is_some() {
                        // A stemmed root found on the path: hang it under the path's ancestor.
                        self.nodes[i].parent = prev;
                        reordered |= prev.is_some_and(|p| p > i);
                    }
                    i
                }
                None => {
                    self.nodes.push(RevNode {
                        rev: rev.clone(),
                        parent: prev,
                        deleted: false,
                        info: None,
                    });
                    self.nodes.len() - 1
                }
            });
        }
        self.nodes.push(RevNode {
            rev: leaf.clone(),
            parent: prev,
            deleted,
            info: Some(info),
        });
        if reordered {
            self.reorder();
            return Merged::Added(self.find(leaf).expect("just added"));
        }
        Merged::Added(self.nodes.len() - 1)
    }

    /// Restores parents-before-children order (a stable topological sort by depth).
    fn reorder(&mut self) {
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&i| self.depth_in_tree(i));
        self.permute(&order);
    }

    fn depth_in_tree(&self, i: usize) -> usize {
        let mut d = 0;
        let mut at = i;
        while let Some(p) = self.nodes[at].parent {
            d += 1;
            at = p;
            if d > self.nodes.len() {
                break;
            }
        }
        d
    }

    /// Keeps only `order` (old indices, parents first), renumbering parents; a parent that is
    /// not kept leaves its child a root.
    fn permute(&mut self, order: &[usize]) {
        let mut new_index = vec![usize::MAX; self.nodes.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let mut old: Vec<Option<RevNode<I>>> = std::mem::take(&mut self.nodes)
            .into_iter()
            .map(Some)
            .collect();
        self.nodes = order
            .iter()
            .map(|&o| {
                let mut n = old[o].take().expect("each node kept once");
                n.parent = n.parent.map(|p| new_index[p]).filter(|&p| p != usize::MAX);
                n
            })
            .collect();
    }

    /// Keeps at most `limit` revisions on each leaf's path (CouchDB's stemming); cut-off
    /// ancestors are dropped and their surviving descendants become roots.
    pub fn stem(&mut self, limit: usize) {
        let limit = limit.max(1);
        if self.nodes.len() <= limit {
            return; // no path is longer than the tree is big
        }
        let mut keep = vec![false; self.nodes.len()];
        for leaf in self.leaves() {
            for &i in self.path(leaf).iter().take(limit) {
                keep[i] = true;
            }
        }
        if keep.iter().all(|&k| k) {
            return;
        }
        let order: Vec<usize> = (0..self.nodes.len()).filter(|&i| keep[i]).collect();
        self.permute(&order);
    }

    /// Whether the document is deleted: its winner is a tombstone (or it has no revisions).
    pub fn is_deleted(&self) -> bool {
        self.winner().is_none_or(|w| self.nodes[w].deleted)
    }

    /// Removes the given leaf revisions and the ancestors only they had (CouchDB's purge);
    /// returns the revisions removed among those asked for. Revisions that are not leaves
    /// are left alone.
    pub fn purge(&mut self, revs: &[Rev]) -> Vec<Rev> {
        let mut removed = vec![false; self.nodes.len()];
        let mut children = self.child_counts();
        let mut purged = Vec::new();
        for rev in revs {
            let Some(leaf) = self.find(rev).filter(|&i| children[i] == 0 && !removed[i]) else {
                continue;
            };
            purged.push(rev.clone());
            let mut at = Some(leaf);
            while let Some(i) = at.filter(|&i| children[i] == 0 && !removed[i]) {
                removed[i] = true;
                at = self.nodes[i].parent;
                if let Some(p) = at {
                    children[p] -= 1;
                }
            }
        }
        let order: Vec<usize> = (0..self.nodes.len()).filter(|&i| !removed[i]).collect();
        self.permute(&order);
        purged
    }

    /// Revisions in `revs` that the tree does not hold.
    pub fn missing<'a>(&self, revs: &'a [Rev]) -> Vec<&'a Rev> {
        revs.iter().filter(|r| self.find(r).is_none()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_json::RevId;

    fn rev(pos: u64, id: &str) -> Rev {
        Rev {
            pos,
            id: RevId::Text(id.into()),
        }
    }

    #[test]
    fn winner_prefers_live_then_depth_then_id() {
        let mut t = RevTree::default();
        let a = t.add_child(None, RevId::Text("a".into()), false, ());
        let b = t.add_child(Some(a), RevId::Text("b".into()), false, ());
        let c = t.add_child(Some(a), RevId::Text("c".into()), false, ());
        assert_eq!(t.winner(), Some(c), "same depth: the higher id wins");
        let d = t.add_child(Some(c), RevId::Text("d".into()), true, ());
        assert_eq!(t.winner(), Some(b), "a live leaf beats a deeper tombstone");
        assert_eq!(t.leaves(), vec![b, d]);
        assert_eq!(t.leaves_below(a), vec![b, d]);
        assert_eq!(t.leaves_below(c), vec![d]);
        let e = t.add_child(Some(b), RevId::Text("0".into()), true, ());
        assert_eq!(
            t.winner(),
            Some(d),
            "all deleted, same depth: the higher id wins"
        );
        assert_eq!(t.leaves(), vec![d, e]);
        assert!(t.is_deleted());
    }

    #[test]
    fn merge_adds_missing_ancestors_and_reattaches_stemmed_roots() {
        let mut t: RevTree<()> = RevTree::default();
        assert_eq!(t.merge_path(&[rev(3, "c")], false, ()), Merged::Added(0));
        assert_eq!(t.nodes[0].parent, None);
        let Merged::Added(d) = t.merge_path(
            &[rev(4, "d"), rev(3, "c"), rev(2, "b"), rev(1, "a")],
            false,
            (),
        ) else {
            panic!("d is new")
        };
        assert_eq!(
            t.path(d)
                .iter()
                .map(|&i| t.nodes[i].rev.pos)
                .collect::<Vec<_>>(),
            [4, 3, 2, 1]
        );
        assert!(
            t.nodes[t.find(&rev(2, "b")).unwrap()].info.is_none(),
            "ancestors arrive without payload"
        );
        assert_eq!(t.merge_path(&[rev(4, "d")], false, ()), Merged::Exists);
        for (i, n) in t.nodes.iter().enumerate() {
            assert!(n.parent.is_none_or(|p| p < i), "parents come first");
        }
    }

    #[test]
    fn purging_removes_a_branch_back_to_where_it_forked() {
        let mut t = RevTree::default();
        let a = t.add_child(None, RevId::Text("a".into()), false, ());
        let b = t.add_child(Some(a), RevId::Text("b".into()), false, ());
        let c = t.add_child(Some(b), RevId::Text("c".into()), false, ());
        let x = t.add_child(Some(a), RevId::Text("x".into()), false, ());
        let (rb, rc, rx) = (
            t.nodes[b].rev.clone(),
            t.nodes[c].rev.clone(),
            t.nodes[x].rev.clone(),
        );
        assert_eq!(t.purge(std::slice::from_ref(&rb)), vec![], "not a leaf");
        assert_eq!(t.purge(&[rc.clone(), rc.clone()]), vec![rc]);
        let left: Vec<&str> = t
            .nodes
            .iter()
            .map(|n| {
                if let RevId::Text(s) = &n.rev.id {
                    &**s
                } else {
                    ""
                }
            })
            .collect();
        assert_eq!(left, ["a", "x"], "b went with c; a stays for x");
        assert_eq!(t.purge(&[rx]).len(), 1);
        assert!(t.nodes.is_empty(), "purging the last leaf empties the tree");
    }

    #[test]
    fn stemming_keeps_leaves_and_their_recent_ancestors() {
        let mut t = RevTree::default();
        let mut at = None;
        for i in 0..10 {
            at = Some(t.add_child(at, RevId::Text(format!("r{i}").into()), false, ()));
        }
        t.add_child(Some(2), RevId::Text("x".into()), false, ());
        t.stem(3);
        let revs: Vec<u64> = t.nodes.iter().map(|n| n.rev.pos).collect();
        assert_eq!(revs, [2, 3, 8, 9, 10, 4]);
        assert_eq!(t.leaves().len(), 2);
        assert!(t.nodes.iter().filter(|n| n.parent.is_none()).count() == 2);
    }
}
