//! Injected failures: disk full and fsync errors fail the commit with a typed error, leave
//! the file valid at its previous commit and the writer usable; failing or panicking update
//! closures are rolled back without disturbing the rest of their group commit.

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use settee_store::{
    Action, Backend, Durability, Error, MemBackend, NodeCache, RangeOptions, Store, StoreOptions,
    TreeSpec,
};

fn options() -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::default()],
        cache: NodeCache::new(1 << 20),
        node_size: 512,
        ..StoreOptions::default()
    }
}

fn put(store: &Store, key: &str, value: &str) -> Result<(), Error> {
    let a = vec![Action::Put(key.into(), value.into())];
    store.update(Durability::Durable, move |txn| txn.modify(0, &a).map(drop))
}

fn keys(store: &Store) -> Vec<String> {
    let snap = store.snapshot();
    snap.range(0, RangeOptions::default())
        .unwrap()
        .map(|e| String::from_utf8(e.unwrap().key().to_vec()).unwrap())
        .collect()
}

fn reopen(bytes: Vec<u8>) -> Store {
    Store::open_backend(
        Arc::new(MemBackend::from_bytes(bytes)),
        Path::new("f"),
        options(),
    )
    .unwrap()
}

fn new_store() -> (MemBackend, Store) {
    let backend = MemBackend::new();
    let store =
        Store::create_backend(Arc::new(backend.clone()), Path::new("f"), options()).unwrap();
    (backend, store)
}

#[test]
fn disk_full_fails_the_commit_and_the_writer_recovers() {
    let (backend, store) = new_store();
    put(&store, "a", "1").unwrap();
    backend.set_capacity(backend.len().unwrap() + 100);
    // Larger than the zeros the writer reserves past its appends, which need no more disk.
    let big = "x".repeat(200_000);
    let err = put(&store, "b", &big).unwrap_err();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
        "{err}"
    );
    assert_eq!(keys(&store), ["a"], "readers still see the last commit");
    assert_eq!(
        keys(&reopen(backend.live_bytes())),
        ["a"],
        "the file is valid at its previous commit"
    );
    backend.set_capacity(u64::MAX);
    put(&store, "c", "3").unwrap();
    assert_eq!(
        keys(&store),
        ["a", "c"],
        "the failed update is gone, the next one landed"
    );
    drop(store);
    assert_eq!(keys(&reopen(backend.durable_bytes())), ["a", "c"]);
}

/// The zeros a writer lays down ahead of its appends are a convenience: a disk with room
/// for a commit but not for new zeros after it still takes the commit, and the file keeps
/// opening at it.
#[test]
fn disk_too_full_for_the_reserve_still_commits() {
    let (backend, store) = new_store();
    put(&store, "a", "1").unwrap();
    let reserved = backend.len().unwrap();
    assert!(
        reserved > store.committed_len(),
        "the writer reserved zeros past its commit"
    );
    backend.set_capacity(reserved + 20_000);
    let past_reserve = "x".repeat((reserved - store.committed_len()) as usize + 5_000);
    put(&store, "b", &past_reserve).unwrap();
    assert!(
        backend.len().unwrap() < reserved + 20_000,
        "no new zeros fit"
    );
    assert_eq!(keys(&store), ["a", "b"]);
    drop(store);
    assert_eq!(keys(&reopen(backend.durable_bytes())), ["a", "b"]);
}

#[test]
fn fsync_failure_fails_every_update_of_the_commit() {
    let (backend, store) = new_store();
    put(&store, "a", "1").unwrap();
    backend.fail_syncs(1);
    let err = put(&store, "b", "2").unwrap_err();
    assert!(matches!(err, Error::Io { op: "sync", .. }), "{err}");
    assert_eq!(keys(&store), ["a"]);
    assert_eq!(
        keys(&reopen(backend.durable_bytes())),
        ["a"],
        "nothing unacknowledged became durable"
    );
    put(&store, "c", "3").unwrap();
    drop(store);
    assert_eq!(keys(&reopen(backend.durable_bytes())), ["a", "c"]);
}

#[test]
fn failing_and_panicking_closures_are_rolled_back_alone() {
    let (_backend, store) = new_store();
    let store = Arc::new(store);
    // Hold the writer busy so that the next updates queue up and share one commit.
    let gate = Arc::new(Barrier::new(2));
    let g = gate.clone();
    let blocker = store.submit(Durability::Durable, move |txn| -> Result<(), Error> {
        g.wait();
        std::thread::sleep(Duration::from_millis(300));
        txn.modify(0, &[Action::Put(b"first".to_vec(), b"1".to_vec())])
            .map(drop)
    });
    gate.wait();
    let ok = store.submit(Durability::Durable, |txn| {
        txn.modify(0, &[Action::Put(b"ok".to_vec(), b"1".to_vec())])
            .map(drop)
    });
    let failing = store.submit(Durability::Durable, |txn| -> Result<(), Error> {
        txn.modify(0, &[Action::Put(b"failed".to_vec(), b"1".to_vec())])?;
        txn.set_meta(b"should not stay".to_vec());
        Err(Error::Reduce("refused by the caller".into()))
    });
    let panicking = store.submit(Durability::Durable, |txn| -> Result<(), Error> {
        txn.modify(0, &[Action::Put(b"panicked".to_vec(), b"1".to_vec())])?;
        panic!("a bug in one request");
    });
    let after = store.submit(Durability::Durable, |txn| {
        txn.modify(0, &[Action::Put(b"later".to_vec(), b"1".to_vec())])
            .map(drop)
    });
    blocker.wait().unwrap();
    ok.wait().unwrap();
    assert!(matches!(failing.wait(), Err(Error::Reduce(_))));
    assert!(matches!(panicking.wait(), Err(Error::Panicked(_))));
    after.wait().unwrap();
    assert_eq!(keys(&store), ["first", "later", "ok"]);
    assert_eq!(
        store.snapshot().meta(),
        b"",
        "metadata of the failed closure was rolled back"
    );
    put(&store, "still", "works").unwrap();
}

#[test]
fn batched_updates_answer_at_once_and_commit_within_the_delay() {
    let backend = MemBackend::new();
    let opts = StoreOptions {
        batch_delay: Duration::from_millis(300),
        ..options()
    };
    let store = Store::create_backend(Arc::new(backend.clone()), Path::new("f"), opts).unwrap();
    put(&store, "durable", "1").unwrap();
    let before = backend.durable_bytes();
    store
        .update(Durability::Batch, |txn| {
            txn.modify(0, &[Action::Put(b"batched".to_vec(), b"1".to_vec())])
                .map(drop)
        })
        .unwrap();
    assert_eq!(
        keys(&store),
        ["durable"],
        "not yet committed, so not yet visible"
    );
    assert_eq!(
        keys(&reopen(before)),
        ["durable"],
        "a crash now loses the batched update only"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while keys(&store).len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "batched update never committed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        keys(&reopen(backend.durable_bytes())),
        ["batched", "durable"],
        "the timer's commit is durable"
    );
}

#[test]
fn flush_commits_pending_batched_updates() {
    let backend = MemBackend::new();
    let opts = StoreOptions {
        batch_delay: Duration::from_secs(3600),
        ..options()
    };
    let store = Store::create_backend(Arc::new(backend.clone()), Path::new("f"), opts).unwrap();
    store
        .update(Durability::Batch, |txn| {
            txn.modify(0, &[Action::Put(b"b".to_vec(), b"1".to_vec())])
                .map(drop)
        })
        .unwrap();
    store.flush().unwrap();
    assert_eq!(keys(&reopen(backend.durable_bytes())), ["b"]);
}

#[test]
fn closing_the_store_commits_batched_updates() {
    let backend = MemBackend::new();
    let opts = StoreOptions {
        batch_delay: Duration::from_secs(3600),
        ..options()
    };
    let store = Store::create_backend(Arc::new(backend.clone()), Path::new("f"), opts).unwrap();
    store
        .update(Durability::Batch, |txn| {
            txn.modify(0, &[Action::Put(b"b".to_vec(), b"1".to_vec())])
                .map(drop)
        })
        .unwrap();
    drop(store);
    assert_eq!(keys(&reopen(backend.durable_bytes())), ["b"]);
}

#[test]
fn unknown_tree_is_an_error() {
    let (_backend, store) = new_store();
    assert!(matches!(
        store.snapshot().count(5),
        Err(Error::NoSuchTree(5))
    ));
    let r = store.update(Durability::Durable, |txn| {
        txn.modify(9, &[Action::Delete(b"x".to_vec())]).map(drop)
    });
    assert!(matches!(r, Err(Error::NoSuchTree(9))));
}

/// Panics on a value of "boom", like a buggy caller-supplied reducer.
struct PanickyReduce;

impl settee_store::Reducer for PanickyReduce {
    fn reduce(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<u8>, String> {
        assert!(entries.iter().all(|(_, v)| *v != b"boom"), "reducer bug");
        Ok(Vec::new())
    }
    fn rereduce(&self, _: &[&[u8]]) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }
}

/// A small update is held and reduced only at its commit: a reducer that panics then fails
/// that commit's updates, and the writer goes on.
#[test]
fn a_reducer_panicking_at_commit_fails_the_group_not_the_writer() {
    let opts = StoreOptions {
        trees: vec![TreeSpec::bytewise(PanickyReduce)],
        ..options()
    };
    let backend = MemBackend::new();
    let store = Store::create_backend(Arc::new(backend.clone()), Path::new("f"), opts).unwrap();
    put(&store, "a", "1").unwrap();
    let err = put(&store, "b", "boom").unwrap_err();
    assert!(matches!(err, Error::Panicked(_)), "{err}");
    put(&store, "c", "3").unwrap();
    assert_eq!(keys(&store), ["a", "c"]);
}

/// A failed sync is never taken back by a later one: what it should have made durable is
/// gone from the disk (as pages a kernel dropped after a failed write-back), the writer
/// reads the file again from its newest valid header and goes on, and after a crash the
/// file holds every acknowledged commit and nothing of the failed one. While syncs keep
/// failing, no write is acknowledged.
#[test]
fn a_failed_sync_is_not_retried_as_if_it_had_succeeded() {
    let (backend, store) = new_store();
    put(&store, "a", "1").unwrap();
    backend.fail_syncs(1);
    // Larger than what comes after, so that its bytes would outlast the next commit's.
    put(&store, "b", &"x".repeat(300_000)).unwrap_err();
    put(&store, "c", "3").unwrap();
    assert_eq!(keys(&store), ["a", "c"]);
    assert_eq!(
        keys(&reopen(backend.durable_bytes())),
        ["a", "c"],
        "the crash image holds what was acknowledged"
    );
    backend.fail_syncs(u64::MAX);
    for i in 0..5 {
        assert!(
            put(&store, &format!("d{i}"), "4").is_err(),
            "a write while syncs fail is refused"
        );
    }
    backend.fail_syncs(0);
    put(&store, "e", "5").unwrap();
    assert_eq!(keys(&store), ["a", "c", "e"]);
    drop(store);
    assert_eq!(keys(&reopen(backend.durable_bytes())), ["a", "c", "e"]);
}
