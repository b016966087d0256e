//! When a logged tree folds its changes into its nodes: after `changes` of them in a small
//! tree, and after up to `grow` times as many in a large one, whose changes spread over more
//! leaves. Whatever the tree's size, every change reads back, before and after a reopen.

use std::path::Path;

use settee_store::{
    Action, Durability, FoldLimits, NodeCache, OverlayBudget, SizeReduce, Store, StoreOptions,
    TreeSpec,
};

fn options(budget: &OverlayBudget, grow: u64) -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::logged(SizeReduce)],
        cache: NodeCache::new(1 << 20),
        overlay_budget: budget.clone(),
        fold: FoldLimits {
            changes: 100,
            bytes: 1 << 30,
            records: 1 << 20,
            grow,
        },
        ..StoreOptions::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    // Spread over the tree, as random document ids are.
    format!("k{:08}", i.wrapping_mul(2_654_435_761) % 100_000_000).into_bytes()
}

fn put(store: &Store, keys: std::ops::Range<u32>) {
    let mut actions: Vec<Action> = keys.map(|i| Action::Put(key(i), vec![b'v'; 20])).collect();
    actions.sort_by(|a, b| a.key().cmp(b.key()));
    store
        .update(Durability::Durable, move |t| {
            t.modify(0, &actions).map(drop)
        })
        .unwrap();
}

/// Makes a store with `start` keys (committed and folded), then commits one new key at a
/// time; how many commits until its changes were first folded.
fn commits_until_a_fold(path: &Path, start: u32, grow: u64) -> u32 {
    let budget = OverlayBudget::new(1 << 30);
    let store = Store::create(path, options(&budget, grow)).unwrap();
    if start > 0 {
        // A change per key, far over the limit: this commit folds them all.
        put(&store, 0..start);
        assert_eq!(budget.used(), 0, "the first commit should have folded");
    }
    let mut held = 0;
    for n in 1..=1000 {
        put(&store, start + n - 1..start + n);
        let used = budget.used();
        if used < held {
            check(&store, start + n);
            drop(store);
            let reopened = Store::open(path, options(&budget, grow)).unwrap();
            check(&reopened, start + n);
            return n;
        }
        held = used;
    }
    panic!("no fold in 1000 commits");
}

fn check(store: &Store, n: u32) {
    let snap = store.snapshot();
    for i in 0..n {
        assert!(snap.get(0, &key(i)).unwrap().is_some(), "key {i} lost");
    }
    assert_eq!(snap.total(0).unwrap().count, u64::from(n));
}

#[test]
fn a_large_tree_gathers_more_changes_before_it_folds() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    // A small tree folds at the limit, grown or not.
    assert_eq!(commits_until_a_fold(&at("small"), 0, 4), 100);
    // A tree of 2,000 entries would fold after 1,000 changes (one for every two entries);
    // the growth allowed caps it at four times the limit.
    assert_eq!(commits_until_a_fold(&at("large"), 2000, 4), 400);
    assert_eq!(commits_until_a_fold(&at("capped"), 2000, 2), 200);
    assert_eq!(commits_until_a_fold(&at("fixed"), 2000, 1), 100);
    // 600 entries: three times the limit.
    assert_eq!(commits_until_a_fold(&at("between"), 600, 4), 300);
}
