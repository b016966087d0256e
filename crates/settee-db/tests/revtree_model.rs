//! Revision-tree merges checked against a naive model: the set of revisions received and the
//! parent links the received paths stated; a leaf is a received revision that no received
//! path names as a parent.

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;
use settee_db::{Merged, RevTree};
use settee_json::{Rev, RevId};

/// A random consistent history: node k's parent is an earlier node (or none).
fn universe() -> impl Strategy<Value = Vec<Option<usize>>> {
    prop::collection::vec(any::<prop::sample::Index>(), 1..40).prop_map(|picks| {
        picks
            .iter()
            .enumerate()
            .map(|(k, p)| {
                if k == 0 || p.index(k + 1) == k {
                    None
                } else {
                    Some(p.index(k))
                }
            })
            .collect()
    })
}

fn revs_of(parents: &[Option<usize>]) -> Vec<Rev> {
    let mut revs: Vec<Rev> = Vec::new();
    for (k, p) in parents.iter().enumerate() {
        let pos = p.map_or(1, |p| revs[p].pos + 1);
        revs.push(Rev {
            pos,
            id: RevId::Text(format!("r{k}").into()),
        });
    }
    revs
}

fn path_of(parents: &[Option<usize>], k: usize) -> Vec<usize> {
    let mut path = vec![k];
    while let Some(p) = parents[*path.last().unwrap()] {
        path.push(p);
    }
    path
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn merges_agree_with_the_model(parents in universe(), ops in prop::collection::vec((any::<prop::sample::Index>(), 1usize..6, any::<bool>()), 1..30), limit in 1usize..8) {
        let revs = revs_of(&parents);
        let mut tree: RevTree<()> = RevTree::default();
        let mut received: BTreeSet<usize> = BTreeSet::new();
        let mut edges: HashMap<usize, usize> = HashMap::new();
        for (pick, len, deleted) in ops {
            let k = pick.index(parents.len());
            let path: Vec<usize> = path_of(&parents, k).into_iter().take(len).collect();
            let before = received.contains(&k);
            let outcome = tree.merge_path(&path.iter().map(|&i| revs[i].clone()).collect::<Vec<_>>(), deleted, ());
            prop_assert_eq!(outcome == Merged::Exists, before);
            if before {
                continue; // a known revision is a no-op, whatever ancestors come with it
            }
            for pair in path.windows(2) {
                edges.insert(pair[0], pair[1]);
            }
            received.extend(path);
            for (i, n) in tree.nodes.iter().enumerate() {
                prop_assert!(n.parent.is_none_or(|p| p < i), "parents come first");
                if let Some(p) = n.parent {
                    prop_assert_eq!(n.rev.pos, tree.nodes[p].rev.pos + 1);
                }
            }
        }
        // Unstemmed: exactly the received revisions, each under the parent a path named.
        let index: HashMap<&Rev, usize> = revs.iter().enumerate().map(|(i, r)| (r, i)).collect();
        let held: BTreeSet<usize> = tree.nodes.iter().map(|n| index[&n.rev]).collect();
        prop_assert_eq!(&held, &received);
        for n in &tree.nodes {
            let k = index[&n.rev];
            let want = edges.get(&k).copied();
            prop_assert_eq!(n.parent.map(|p| index[&tree.nodes[p].rev]), want);
        }
        let model_leaves: BTreeSet<usize> = received.iter().copied().filter(|k| !edges.values().any(|p| p == k)).collect();
        let leaves: BTreeSet<usize> = tree.leaves().into_iter().map(|i| index[&tree.nodes[i].rev]).collect();
        prop_assert_eq!(&leaves, &model_leaves);
        // The winner ranks first among the leaves.
        let w = tree.winner().unwrap();
        for l in tree.leaves() {
            let (a, b) = (&tree.nodes[w], &tree.nodes[l]);
            prop_assert!((!a.deleted, &a.rev) >= (!b.deleted, &b.rev));
        }
        // Stemming keeps every leaf with the newest `limit` revisions of its path, and only
        // revisions within `limit` of some leaf (a shared ancestor kept for a short branch may
        // make a longer branch's path exceed `limit`, as in CouchDB).
        let mut stemmed = tree.clone();
        stemmed.stem(limit);
        let kept: BTreeSet<usize> = stemmed.leaves().into_iter().map(|i| index[&stemmed.nodes[i].rev]).collect();
        prop_assert_eq!(&kept, &model_leaves);
        let revs_of_path = |t: &RevTree<()>, i: usize| t.path(i).into_iter().map(|p| t.nodes[p].rev.clone()).collect::<Vec<_>>();
        let mut near: BTreeSet<Rev> = BTreeSet::new();
        for l in stemmed.leaves() {
            let full = revs_of_path(&tree, tree.find(&stemmed.nodes[l].rev).unwrap());
            let now = revs_of_path(&stemmed, l);
            let keep = full.len().min(limit);
            prop_assert_eq!(&now[..keep.min(now.len())], &full[..keep]);
            near.extend(full.into_iter().take(limit));
        }
        for n in &stemmed.nodes {
            prop_assert!(near.contains(&n.rev), "{} is not within {} of a leaf", n.rev, limit);
        }
    }
}
