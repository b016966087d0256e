//! Concurrency: readers on many threads always see consistent snapshots while a writer
//! commits and compactions swap files; group commit batches concurrent durable writers;
//! compaction loses nothing and keeps old snapshots readable.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use settee_store::{
    Action, BlobCopier, BlobRef, Bound, Durability, Error, FoldLimits, NoBlobs, NodeCache,
    RangeOptions, SizeReduce, Store, StoreOptions, TreeSpec, ValueRewriter,
};

const KEYS: u64 = 2000;

fn options(cache: u64) -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::bytewise(SizeReduce)],
        cache: NodeCache::new(cache),
        node_size: 1024,
        ..StoreOptions::default()
    }
}

/// A logged tree that folds its changes every few commits.
fn logged_options(cache: u64) -> StoreOptions {
    let fold = FoldLimits {
        changes: 400,
        bytes: 1 << 20,
        records: 5,
        grow: 4,
        // Most folds go in slices, while the readers read.
        slice: 50,
    };
    StoreOptions {
        trees: vec![TreeSpec::logged(SizeReduce)],
        fold,
        ..options(cache)
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Every commit rewrites a random slice of keys to version `v` and records `v` in the
/// metadata; a consistent snapshot's values are all ≤ its metadata version, its entry count
/// is KEYS, and the stored reduction equals the sum of the sizes read.
fn check_snapshot(store: &Store) -> u64 {
    let snap = store.snapshot();
    let meta_version: u64 = if snap.meta().is_empty() {
        0
    } else {
        String::from_utf8_lossy(snap.meta()).parse().unwrap()
    };
    let mut n = 0;
    let mut size = 0;
    for e in snap.range(0, RangeOptions::default()).unwrap() {
        let e = e.unwrap();
        let v: u64 = String::from_utf8_lossy(e.value())
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            v <= meta_version,
            "value from the future: {v} > {meta_version}"
        );
        n += 1;
        size += (e.key().len() + e.value().len()) as u64;
    }
    assert_eq!(n, KEYS, "count at version {meta_version}");
    assert_eq!(snap.total(0).unwrap().count, KEYS);
    assert_eq!(
        SizeReduce::decode(&snap.total(0).unwrap().value),
        size,
        "reduction matches the entries"
    );
    let half = snap
        .reduce(0, &Bound::Unbounded, &Bound::Excluded(key(KEYS / 2)))
        .unwrap();
    assert_eq!(half.count, KEYS / 2);
    meta_version
}

#[test]
fn readers_see_consistent_snapshots_during_writes_and_compaction() {
    consistent_snapshots_during_writes_and_compaction(options);
}

#[test]
fn readers_of_a_logged_tree_see_consistent_snapshots_during_writes_and_compaction() {
    consistent_snapshots_during_writes_and_compaction(logged_options);
}

fn consistent_snapshots_during_writes_and_compaction(options: fn(u64) -> StoreOptions) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.settee");
    let store = Arc::new(Store::create(&path, options(256 << 10)).unwrap());
    let all: Vec<Action> = (0..KEYS)
        .map(|i| Action::Put(key(i), b"0:init".to_vec()))
        .collect();
    store
        .update(Durability::Durable, move |t| t.modify(0, &all).map(drop))
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let version = Arc::new(AtomicU64::new(0));
    let writer = {
        let (store, stop, version) = (store.clone(), stop.clone(), version.clone());
        std::thread::spawn(move || {
            let mut v = 0u64;
            while !stop.load(Ordering::Relaxed) {
                v += 1;
                let start = (v * 37) % KEYS;
                let actions: Vec<Action> = (start..(start + 50).min(KEYS))
                    .map(|i| {
                        Action::Put(
                            key(i),
                            format!("{v}:{}", "x".repeat((v % 13) as usize)).into_bytes(),
                        )
                    })
                    .collect();
                store
                    .update(Durability::Durable, move |t| -> Result<(), Error> {
                        t.modify(0, &actions)?;
                        t.set_meta(v.to_string().into_bytes());
                        Ok(())
                    })
                    .unwrap();
                version.store(v, Ordering::SeqCst);
            }
        })
    };
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = 0;
                let mut checks = 0;
                while !stop.load(Ordering::Relaxed) {
                    let v = check_snapshot(&store);
                    assert!(v >= seen, "snapshots went back in time");
                    seen = v;
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    let compactions = {
        let store = store.clone();
        std::thread::spawn(move || {
            let mut stats = Vec::new();
            for _ in 0..3 {
                std::thread::sleep(Duration::from_millis(150));
                stats.push(store.compact(Arc::new(NoBlobs), &|_, _| {}).unwrap());
            }
            stats
        })
    };
    let stats = compactions.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(stats.len(), 3);
    assert!(stats.iter().all(|s| s.copied >= KEYS), "{stats:?}");
    let last = version.load(Ordering::SeqCst);
    assert_eq!(
        check_snapshot(&store),
        last,
        "the newest commit is visible after compactions"
    );
    drop(store);
    let store = Store::open(&path, options(1 << 20)).unwrap();
    assert_eq!(
        check_snapshot(&store),
        last,
        "nothing acknowledged was lost across compactions"
    );
    assert!(!std::fs::read_dir(dir.path()).unwrap().flatten().any(|e| e
        .file_name()
        .to_string_lossy()
        .starts_with("c.settee.compact")));
}

#[test]
fn group_commit_batches_concurrent_durable_writers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::create(&dir.path().join("g.settee"), options(1 << 20)).unwrap());
    let writers = 64;
    let per_writer = 20;
    let start_gen = store.snapshot().generation();
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..per_writer {
                    let a = vec![Action::Put(
                        format!("w{w:02}-{i:03}").into_bytes(),
                        b"v".to_vec(),
                    )];
                    store
                        .update(Durability::Durable, move |t| t.modify(0, &a).map(drop))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let snap = store.snapshot();
    assert_eq!(snap.count(0).unwrap(), (writers * per_writer) as u64);
    let commits = snap.generation() - start_gen;
    assert!(
        commits < (writers * per_writer) as u64 / 2,
        "{commits} commits for {} updates: not grouped",
        writers * per_writer
    );
}

#[test]
fn old_snapshots_keep_reading_after_compaction_swapped_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.settee");
    let store = Store::create(&path, options(0)).unwrap();
    for round in 0..5 {
        let a: Vec<Action> = (0..500)
            .map(|i| Action::Put(key(i), format!("{round}").into_bytes()))
            .collect();
        store
            .update(Durability::Durable, move |t| t.modify(0, &a).map(drop))
            .unwrap();
    }
    let old = store.snapshot();
    let size_before = std::fs::metadata(&path).unwrap().len();
    let stats = store.compact(Arc::new(NoBlobs), &|_, _| {}).unwrap();
    assert!(
        stats.new_size < size_before,
        "compaction shrank the file: {stats:?}"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), stats.new_size);
    let a = vec![Action::Put(key(0), b"new".to_vec())];
    store
        .update(Durability::Durable, move |t| t.modify(0, &a).map(drop))
        .unwrap();
    // The old snapshot reads the replaced file (no cache: every node comes from disk).
    let values: Vec<Vec<u8>> = old
        .range(0, RangeOptions::default())
        .unwrap()
        .map(|e| e.unwrap().value().to_vec())
        .collect();
    assert_eq!(values.len(), 500);
    assert!(values.iter().all(|v| v == b"4"));
    assert_eq!(
        store.snapshot().get(0, &key(0)).unwrap().unwrap().value(),
        b"new"
    );
}

/// Values are encoded blob references; compaction must copy the blobs.
struct BlobValues;

impl ValueRewriter for BlobValues {
    fn rewrite(
        &self,
        _: usize,
        _: &[u8],
        value: &[u8],
        blobs: &mut BlobCopier<'_>,
    ) -> settee_store::Result<Option<Vec<u8>>> {
        let r = BlobRef::decode(value).expect("a blob reference");
        Ok(Some(blobs.copy(&r)?.encode().to_vec()))
    }
}

#[test]
fn compaction_copies_blobs_and_drops_garbage() {
    compaction_copies_live_blobs_once(options);
}

#[test]
fn compaction_of_a_logged_tree_copies_blobs_and_drops_garbage() {
    compaction_copies_live_blobs_once(logged_options);
}

fn compaction_copies_live_blobs_once(options: fn(u64) -> StoreOptions) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.settee");
    let store = Store::create(&path, options(1 << 20)).unwrap();
    // Incompressible bodies, so that the superseded blobs dominate the old file.
    let body = |i: u64, round: u64| {
        let mut x = i * 1_000_003 + round * 7_919 + 1;
        (0..1000)
            .map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (x >> 56) as u8
            })
            .collect::<Vec<u8>>()
    };
    for round in 0..4 {
        store
            .update(Durability::Durable, move |t| -> Result<(), Error> {
                for i in 0..100 {
                    let r = t.write_blob(&body(i, round))?;
                    t.modify(0, &[Action::Put(key(i), r.encode().to_vec())])?;
                }
                Ok(())
            })
            .unwrap();
    }
    let stats = store.compact(Arc::new(BlobValues), &|_, _| {}).unwrap();
    assert!(stats.new_size * 3 < stats.old_size, "{stats:?}");
    // The live bodies are 100 KB: each copied once, with the tree and a header or two.
    assert!(stats.new_size < 100_000 + 24_000, "{stats:?}");
    drop(store);
    let store = Store::open(&path, options(1 << 20)).unwrap();
    let snap = store.snapshot();
    for i in 0..100 {
        let r = BlobRef::decode(snap.get(0, &key(i)).unwrap().unwrap().value()).unwrap();
        assert_eq!(snap.read_blob(&r).unwrap(), body(i, 3));
    }
}

#[test]
fn only_one_compaction_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::create(&dir.path().join("one.settee"), options(1 << 20)).unwrap());
    let a: Vec<Action> = (0..20_000)
        .map(|i| Action::Put(key(i), vec![b'v'; 100]))
        .collect();
    store
        .update(Durability::Durable, move |t| t.modify(0, &a).map(drop))
        .unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let (s, st) = (store.clone(), started.clone());
    let first = std::thread::spawn(move || {
        s.compact(Arc::new(NoBlobs), &|_, _| {
            st.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
        })
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while !started.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline);
        std::thread::yield_now();
    }
    assert!(matches!(
        store.compact(Arc::new(NoBlobs), &|_, _| {}),
        Err(Error::CompactionRunning)
    ));
    first.join().unwrap().unwrap();
    assert_eq!(store.snapshot().count(0).unwrap(), 20_000);
}

/// Updates queued while the writer is busy share one commit, and a path they all rewrite is
/// written once, not once per update.
#[test]
fn a_group_commit_writes_each_rewritten_node_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("once.settee");
    let store = Arc::new(Store::create(&path, options(1 << 20)).unwrap());
    let a: Vec<Action> = (0..KEYS)
        .map(|i| Action::Put(key(i), b"0".to_vec()))
        .collect();
    store
        .update(Durability::Durable, move |t| t.modify(0, &a).map(drop))
        .unwrap();
    let before = store.committed_len();
    let gen_before = store.snapshot().generation();
    let gate = Arc::new(std::sync::Barrier::new(2));
    let g = gate.clone();
    let blocker = store.submit(Durability::Durable, move |_| -> Result<(), Error> {
        g.wait();
        std::thread::sleep(Duration::from_millis(300));
        Ok(())
    });
    gate.wait();
    let pending: Vec<_> = (0..200u32)
        .map(|n| {
            store.submit(Durability::Durable, move |t| {
                t.modify(0, &[Action::Put(key(7), n.to_string().into_bytes())])
                    .map(drop)
            })
        })
        .collect();
    blocker.wait().unwrap();
    for p in pending {
        p.wait().unwrap();
    }
    let snap = store.snapshot();
    assert_eq!(snap.get(0, &key(7)).unwrap().unwrap().value(), b"199");
    assert!(
        snap.generation() - gen_before <= 2,
        "one group commit (plus the blocker's)"
    );
    let grown = store.committed_len() - before;
    // One root-to-leaf path of 1 KiB nodes, a header and padding: far below 200 paths.
    assert!(grown < 16 * 1024, "the commit wrote {grown} bytes");
}

/// Each commit rewrites a root-to-leaf path; the nodes it replaces are unreachable from then
/// on and leave the shared cache, which holds the live tree rather than every past version
/// of its busiest path. An old snapshot still reads them (from the file). The cache learns
/// of a commit once its callers are answered, before the writer takes its next request: a
/// flush waits for that.
#[test]
fn nodes_a_commit_replaces_leave_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = NodeCache::new(1 << 30);
    let options = StoreOptions {
        cache: cache.clone(),
        ..options(0)
    };
    let store = Store::create(&dir.path().join("cache.settee"), options).unwrap();
    let a: Vec<Action> = (0..KEYS)
        .map(|i| Action::Put(key(i), b"0".to_vec()))
        .collect();
    store
        .update(Durability::Durable, move |t| t.modify(0, &a).map(drop))
        .unwrap();
    store.flush().unwrap();
    let old = store.snapshot();
    let live = cache.weight();
    assert!(live > 0, "the nodes of an answered commit are cached");
    for n in 0..500u64 {
        let put = [Action::Put(key(n * 7 % KEYS), n.to_string().into_bytes())];
        store
            .update(Durability::Durable, move |t| t.modify(0, &put).map(drop))
            .unwrap();
    }
    store.flush().unwrap();
    let snap = store.snapshot();
    assert_eq!(snap.count(0).unwrap(), KEYS);
    assert_eq!(
        snap.get(0, &key(499 * 7 % KEYS)).unwrap().unwrap().value(),
        b"499"
    );
    // 500 replaced paths of 1 KiB nodes would be megabytes; the live tree is a few dozen nodes.
    assert!(
        cache.weight() < 2 * live + (64 << 10),
        "cache holds {} bytes, the live tree {live}",
        cache.weight()
    );
    assert!(
        cache.weight() > live / 2,
        "the live tree stays cached: {} of {live} bytes",
        cache.weight()
    );
    assert_eq!(
        old.get(0, &key(7)).unwrap().unwrap().value(),
        b"0",
        "the old snapshot reads its own version"
    );
}
