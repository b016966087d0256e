//! When a logged tree folds its changes into its nodes: after `changes` of them in a small
//! tree, and after up to `grow` times as many in a large one, whose changes spread over more
//! leaves. Whatever the tree's size, every change reads back, before and after a reopen.
//! A fold of more changes than a slice goes in slices on the writer thread, after the
//! commit that reached the limit.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
            slice: usize::MAX,
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

/// The overlay memory each commit left, in order, as the commit hook sees it.
type Seen = Arc<Mutex<Vec<u64>>>;

fn watched(budget: &OverlayBudget, seen: &Seen) -> StoreOptions {
    let (counted, seen) = (budget.clone(), seen.clone());
    StoreOptions {
        fold: FoldLimits {
            changes: 4000,
            bytes: 1 << 30,
            records: 1 << 20,
            grow: 1,
            slice: 10,
        },
        on_commit: Some(Arc::new(move || seen.lock().unwrap().push(counted.used()))),
        ..options(budget, 1)
    }
}

/// The commit that brings the changes to the limit folds none of them; the writer then
/// folds them a slice at a time over several commits of its own, every key reading back,
/// and writes the log again without them, so that reopening replays nothing.
#[test]
fn a_large_fold_goes_in_slices_after_the_commit_that_reached_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slices");
    let (budget, seen) = (OverlayBudget::new(1 << 30), Seen::default());
    let opts = watched(&budget, &seen);
    let store = Store::create(&path, opts.clone()).unwrap();
    // Written straight to the nodes (an empty tree), then 4,000 changes logged 50 a commit.
    put(&store, 0..2000);
    for start in (2000..6000).step_by(50) {
        put(&store, start..start + 50);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().last() != Some(&0) {
        assert!(
            Instant::now() < deadline,
            "the fold never ended: {:?}",
            seen.lock()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let seen = seen.lock().unwrap().clone();
    // The direct commit holds nothing logged; each of the 80 logged commits holds more,
    // the one that reached the limit included.
    assert_eq!(seen[0], 0);
    let logged = &seen[1..81];
    assert!(logged.windows(2).all(|w| w[0] < w[1]), "{logged:?}");
    // Then the slices: each commit of them holds less, down to nothing, over several.
    let slices = &seen[80..];
    assert!(slices.windows(2).all(|w| w[0] > w[1]), "{slices:?}");
    assert!(slices.len() > 2, "folded in one go: {slices:?}");
    check(&store, 6000);
    drop(store);
    // Nothing left to replay: the log went with the last slice.
    let reopened = Store::open(&path, opts).unwrap();
    assert_eq!(budget.used(), 0);
    check(&reopened, 6000);
}
