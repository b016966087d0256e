//! What bounds the memory of logged trees' unfolded changes beyond each store's own limits:
//! a store that has been quiet for a while folds them (and runs its quiet hook, once per
//! quiet spell), and stores sharing a budget fold at their next commit while together they
//! hold more than it allows.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use settee_store::{
    Action, Durability, NodeCache, OverlayBudget, SizeReduce, Store, StoreOptions, TreeSpec,
};

fn options(budget: &OverlayBudget, idle: Duration) -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::logged(SizeReduce)],
        cache: NodeCache::new(1 << 20),
        quiet_after: idle,
        overlay_budget: budget.clone(),
        ..StoreOptions::default()
    }
}

/// Commits `n` keys from `from` on, each with a 100-byte value, in one durable update.
fn put(store: &Store, from: u32, n: u32) {
    let actions: Vec<Action> = (from..from + n)
        .map(|i| Action::Put(format!("k{i:06}").into_bytes(), vec![b'v'; 100]))
        .collect();
    store
        .update(Durability::Durable, move |t| {
            t.modify(0, &actions).map(drop)
        })
        .unwrap();
}

/// Checks that keys `0..n` read back with their values.
fn check(store: &Store, n: u32) {
    let snap = store.snapshot();
    for i in 0..n {
        let e = snap
            .get(0, format!("k{i:06}").as_bytes())
            .unwrap()
            .unwrap_or_else(|| panic!("key {i} lost"));
        assert_eq!(e.value(), &[b'v'; 100][..]);
    }
    assert_eq!(snap.total(0).unwrap().count, u64::from(n));
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < give_up, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn reopen_holds_no_changes(path: &Path, n: u32) {
    let fresh = OverlayBudget::new(1 << 30);
    let store = Store::open(path, options(&fresh, Duration::from_secs(3600))).unwrap();
    assert_eq!(
        fresh.used(),
        0,
        "opening replayed changes that should have been folded"
    );
    check(&store, n);
}

#[test]
fn a_quiet_store_folds_its_changes_and_reopens_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiet.settee");
    let budget = OverlayBudget::new(1 << 30);
    let hooked = Arc::new(AtomicUsize::new(0));
    let (count, on_writer) = (hooked.clone(), Arc::new(std::sync::Mutex::new(None)));
    let writer_thread = on_writer.clone();
    let quiet_hook = move || {
        count.fetch_add(1, Ordering::SeqCst);
        *writer_thread.lock().unwrap() = std::thread::current().name().map(str::to_string);
    };
    let opts = StoreOptions {
        on_writer_quiet: Some(Arc::new(quiet_hook)),
        ..options(&budget, Duration::from_secs(1))
    };
    let store = Store::create(&path, opts).unwrap();
    // A new store is quiet once, too.
    wait_for("the new store's quiet hook", || {
        hooked.load(Ordering::SeqCst) == 1
    });
    put(&store, 0, 50);
    assert!(
        budget.used() > 50 * 100,
        "the changes are charged: {}",
        budget.used()
    );
    // Commits keep the store from being quiet; each one holds the changes longer.
    for i in 0..5 {
        std::thread::sleep(Duration::from_millis(100));
        put(&store, 50 + i, 1);
        assert!(budget.used() > 0, "folded while still busy");
    }
    wait_for("the quiet store to fold", || budget.used() == 0);
    wait_for("the quiet hook", || hooked.load(Ordering::SeqCst) == 2);
    assert_ne!(
        on_writer.lock().unwrap().as_deref(),
        std::thread::current().name(),
        "the hook runs on the writer thread"
    );
    check(&store, 55);
    // Nothing more happens until the store commits again.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(hooked.load(Ordering::SeqCst), 2, "once per quiet spell");
    put(&store, 55, 1);
    wait_for("the quiet hook after a commit", || {
        hooked.load(Ordering::SeqCst) == 3
    });
    assert_eq!(budget.used(), 0);
    check(&store, 56);
    drop(store);
    reopen_holds_no_changes(&path, 56);
}

/// A lone durable update that finds the writer idle commits on its caller's thread, so the
/// writer, asleep since it tidied up, hears of no commit; it must still time the new quiet
/// spell and fold.
#[test]
fn a_commit_on_the_callers_thread_starts_a_quiet_spell_too() {
    let dir = tempfile::tempdir().unwrap();
    let budget = OverlayBudget::new(1 << 30);
    let hooked = Arc::new(AtomicUsize::new(0));
    let count = hooked.clone();
    let quiet_hook = move || {
        count.fetch_add(1, Ordering::SeqCst);
    };
    let opts = StoreOptions {
        on_writer_quiet: Some(Arc::new(quiet_hook)),
        ..options(&budget, Duration::from_millis(500))
    };
    let store = Store::create(&dir.path().join("lone.settee"), opts).unwrap();
    wait_for("the new store's quiet hook", || {
        hooked.load(Ordering::SeqCst) == 1
    });
    for round in 0..2u32 {
        let (tx, rx) = std::sync::mpsc::channel();
        let actions = vec![Action::Put(
            format!("k{round:06}").into_bytes(),
            vec![b'v'; 100],
        )];
        store.run_or_submit_with(
            Durability::Durable,
            move |t| t.modify(0, &actions).map(drop),
            move |r: Result<(), settee_store::Error>| {
                tx.send((r, std::thread::current().id())).unwrap();
            },
        );
        let (answer, answered_on) = rx.recv().unwrap();
        answer.unwrap();
        assert_eq!(
            answered_on,
            std::thread::current().id(),
            "the commit ran on this thread"
        );
        assert!(budget.used() > 0);
        wait_for("the quiet fold after a caller's commit", || {
            budget.used() == 0
        });
        wait_for("the quiet hook after a caller's commit", || {
            hooked.load(Ordering::SeqCst) == 2 + round as usize
        });
    }
    check(&store, 2);
}

#[test]
fn a_store_without_quiet_folding_keeps_its_changes_across_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.settee");
    let budget = OverlayBudget::new(1 << 30);
    let store = Store::create(&path, options(&budget, Duration::from_secs(3600))).unwrap();
    put(&store, 0, 50);
    std::thread::sleep(Duration::from_millis(300));
    let held = budget.used();
    assert!(held > 0);
    drop(store);
    assert_eq!(budget.used(), 0, "a closed store gives its share back");
    let again = OverlayBudget::new(1 << 30);
    let store = Store::open(&path, options(&again, Duration::from_secs(3600))).unwrap();
    assert_eq!(again.used(), held, "opening replays the same changes");
    check(&store, 50);
}

#[test]
fn stores_over_their_shared_budget_fold_at_their_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let budget = OverlayBudget::new(32 << 10);
    let quiet = Duration::from_secs(3600);
    let a = Store::create(&dir.path().join("a.settee"), options(&budget, quiet)).unwrap();
    let b = Store::create(&dir.path().join("b.settee"), options(&budget, quiet)).unwrap();
    put(&a, 0, 40);
    let a_share = budget.used();
    assert!(a_share > 40 * 100 && a_share < 32 << 10, "{a_share}");
    put(&b, 0, 40);
    put(&b, 40, 10);
    assert!(
        budget.used() > 32 << 10,
        "b's commits were made under the budget and kept: {}",
        budget.used()
    );
    // Over the budget: b's next commit folds everything b holds, its own change included.
    put(&b, 50, 1);
    assert_eq!(
        budget.used(),
        a_share,
        "b folded at its commit over the budget"
    );
    check(&b, 51);
    // Under it again: a's commit is logged as usual.
    put(&a, 40, 1);
    assert!(budget.used() > a_share);
    check(&a, 41);
    drop((a, b));
    assert_eq!(budget.used(), 0);
    reopen_holds_no_changes(&dir.path().join("b.settee"), 51);
}

/// `Duration::MAX` says "never quiet": the writer must not overflow timing it.
#[test]
fn a_store_that_is_never_quiet_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let budget = OverlayBudget::new(1 << 30);
    let store = Store::create(
        &dir.path().join("never.settee"),
        options(&budget, Duration::MAX),
    )
    .unwrap();
    put(&store, 0, 10);
    put(&store, 10, 10);
    check(&store, 20);
    assert!(budget.used() > 0, "nothing folded");
}
