//! Crash tests: files cut at any offset, or with bytes flipped in their tail, open at
//! exactly the last complete commit before the damage, with that commit's contents, and
//! take further writes. Injected I/O failures fail the commit and leave the store usable.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use settee_store::{
    Action, Durability, Error, FoldLimits, MemBackend, NodeCache, RangeOptions, SizeReduce, Store,
    StoreOptions, TreeSpec,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The state a commit left: where its header ends, the tree's contents, and the metadata.
#[derive(Clone)]
struct Commit {
    end: u64,
    tree: Model,
    meta: Vec<u8>,
}

fn options() -> StoreOptions {
    StoreOptions {
        trees: vec![
            TreeSpec::bytewise(SizeReduce),
            TreeSpec::bytewise(SizeReduce),
        ],
        cache: NodeCache::new(1 << 20),
        node_size: 256,
        ..StoreOptions::default()
    }
}

/// The options with tree 0 logged, folding often and in slices of a few keys.
fn logged_options() -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::logged(SizeReduce), TreeSpec::bytewise(SizeReduce)],
        fold: FoldLimits {
            changes: 40,
            bytes: 1 << 20,
            records: 6,
            grow: 1,
            slice: 8,
        },
        ..options()
    }
}

fn path() -> &'static Path {
    Path::new("crash.settee")
}

/// Runs `commits` random durable updates (puts, deletes, blobs, metadata) and returns the
/// file's bytes and every commit's state, the creating header first.
fn workload(seed: u64, commits: usize, big_values: bool) -> (Vec<u8>, Vec<Commit>) {
    workload_with(options(), seed, commits, big_values, Duration::ZERO)
}

/// [`workload`] with `opts`, pausing for `pause` after every third update.
fn workload_with(
    opts: StoreOptions,
    seed: u64,
    commits: usize,
    big_values: bool,
    pause: Duration,
) -> (Vec<u8>, Vec<Commit>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let backend = MemBackend::new();
    let store = Store::create_backend(Arc::new(backend.clone()), path(), opts).unwrap();
    let mut model = Model::new();
    let mut history = vec![Commit {
        end: store.committed_len(),
        tree: model.clone(),
        meta: Vec::new(),
    }];
    for c in 0..commits {
        let mut actions = Vec::new();
        for _ in 0..rng.gen_range(1..40) {
            let key = format!("k{:03}", rng.gen_range(0..300)).into_bytes();
            if rng.gen_bool(0.2) {
                model.remove(&key);
                actions.push(Action::Delete(key));
            } else {
                let len = if big_values {
                    rng.gen_range(0..3000)
                } else {
                    rng.gen_range(0..40)
                };
                let value: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                model.insert(key.clone(), value.clone());
                actions.push(Action::Put(key, value));
            }
        }
        let meta = format!("commit {c}").into_bytes();
        let blob: Vec<u8> = (0..rng.gen_range(0..2000)).map(|i| (i % 7) as u8).collect();
        let m = meta.clone();
        store
            .update(Durability::Durable, move |txn| -> Result<(), Error> {
                txn.modify(0, &actions)?;
                let r = txn.write_blob(&blob)?;
                txn.modify(1, &[Action::Put(b"blob".to_vec(), r.encode().to_vec())])?;
                txn.set_meta(m);
                Ok(())
            })
            .unwrap();
        history.push(Commit {
            end: store.committed_len(),
            tree: model.clone(),
            meta,
        });
        // Every third update waits: the writer folds slices alone, then with updates.
        if c % 3 == 2 {
            std::thread::sleep(pause);
        }
    }
    drop(store);
    (backend.durable_bytes(), history)
}

fn contents(store: &Store) -> (Model, Vec<u8>) {
    let snap = store.snapshot();
    let tree = snap
        .range(0, RangeOptions::default())
        .unwrap()
        .map(|e| e.map(|e| (e.key().to_vec(), e.value().to_vec())))
        .collect::<Result<Model, _>>()
        .unwrap();
    if let Some(blob) = snap.get(1, b"blob").unwrap() {
        let r = settee_store::BlobRef::decode(blob.value()).unwrap();
        let bytes = snap.read_blob(&r).unwrap();
        assert!(
            bytes.iter().enumerate().all(|(i, b)| *b == (i % 7) as u8),
            "blob intact"
        );
    }
    (tree, snap.meta().to_vec())
}

/// The last commit wholly inside the first `len` bytes.
fn expected_at(history: &[Commit], len: u64) -> &Commit {
    history
        .iter()
        .rev()
        .find(|c| c.end <= len)
        .expect("the creating header is first")
}

/// Opens `bytes`, checks it shows `want`, writes once more and checks that survives.
fn check_opens_at(bytes: Vec<u8>, want: &Commit, what: &str) {
    check_opens_within(options(), bytes, &[want], what);
}

/// Opens `bytes` with `opts`, checks it shows one of `wants`, writes once more and checks
/// that survives.
fn check_opens_within(opts: StoreOptions, bytes: Vec<u8>, wants: &[&Commit], what: &str) {
    let backend = MemBackend::from_bytes(bytes);
    let store = Store::open_backend(Arc::new(backend.clone()), path(), opts.clone())
        .unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
    let (tree, meta) = contents(&store);
    let want = wants.iter().find(|w| w.meta == meta).unwrap_or_else(|| {
        panic!(
            "{what}: opened at the wrong commit (meta {:?})",
            String::from_utf8_lossy(&meta)
        )
    });
    assert!(
        tree == want.tree,
        "{what}: the tree of {:?} is not what that commit left",
        String::from_utf8_lossy(&meta)
    );
    store
        .update(Durability::Durable, |txn| {
            txn.modify(0, &[Action::Put(b"after".to_vec(), b"crash".to_vec())])
        })
        .unwrap();
    drop(store);
    let store = Store::open_backend(
        Arc::new(MemBackend::from_bytes(backend.durable_bytes())),
        path(),
        opts,
    )
    .unwrap();
    let (tree, _) = contents(&store);
    assert_eq!(
        tree.get(&b"after"[..]).map(Vec::as_slice),
        Some(&b"crash"[..]),
        "{what}: write after recovery lost"
    );
    assert_eq!(
        tree.len(),
        want.tree.len() + usize::from(!want.tree.contains_key(&b"after"[..])),
        "{what}"
    );
}

#[test]
fn cut_at_every_offset_opens_at_last_complete_commit() {
    let (bytes, history) = workload(1, 12, false);
    assert!(
        history.len() == 13 && bytes.len() > 40_000,
        "a workload of many small commits"
    );
    let first = history[0].end as usize;
    // Past the last commit lie only the zeros reserved ahead of appends: a sample of cuts.
    let last = history[history.len() - 1].end as usize;
    assert!(
        bytes[last..].iter().all(|&b| b == 0),
        "only zeros follow the last commit"
    );
    for cut in (first..=last)
        .chain((last..bytes.len()).step_by(509).skip(1))
        .chain([bytes.len()])
    {
        check_opens_at(
            bytes[..cut].to_vec(),
            expected_at(&history, cut as u64),
            &format!("cut at {cut}"),
        );
    }
}

/// A logged tree whose folds go in slices, committed by the writer between updates: a cut
/// anywhere opens at the last update wholly before it, or at the update just after it when
/// the cut falls between that update's own commit and the later slice commit whose end
/// the workload saw. Either way with exactly that update's contents.
#[test]
fn logged_tree_folded_in_slices_cut_at_every_offset_opens_at_a_complete_commit() {
    let commits = Arc::new(AtomicUsize::new(0));
    let counted = commits.clone();
    let opts = StoreOptions {
        on_commit: Some(Arc::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        })),
        ..logged_options()
    };
    let (bytes, history) = workload_with(opts, 8, 24, false, Duration::from_millis(5));
    // The writer committed slices of its own besides the 24 updates.
    assert!(
        commits.load(Ordering::Relaxed) > 24,
        "no slice was committed"
    );
    let (first, last) = (history[0].end as usize, history[24].end as usize);
    // Every eleventh offset, and every offset near the ends the workload saw.
    let near_ends = history.iter().flat_map(|c| {
        (c.end as usize).saturating_sub(64).max(first)..=(c.end as usize + 64).min(last)
    });
    for cut in (first..=last)
        .step_by(11)
        .chain(near_ends)
        .chain([bytes.len()])
    {
        let k = history
            .iter()
            .rposition(|c| c.end <= cut as u64)
            .expect("the creating header is first");
        let wants: Vec<&Commit> = history[k..].iter().take(2).collect();
        check_opens_within(
            logged_options(),
            bytes[..cut].to_vec(),
            &wants,
            &format!("cut at {cut}"),
        );
    }
}

#[test]
fn cut_before_first_header_is_a_clear_error() {
    let (bytes, history) = workload(2, 2, false);
    for cut in 0..history[0].end as usize {
        let r = Store::open_backend(
            Arc::new(MemBackend::from_bytes(bytes[..cut].to_vec())),
            path(),
            options(),
        );
        assert!(
            matches!(
                r,
                Err(Error::NotAStore { .. }) | Err(Error::Corrupted { .. })
            ),
            "cut at {cut}"
        );
    }
    let mut damaged = bytes.clone();
    damaged[20] ^= 0x40;
    let r = Store::open_backend(Arc::new(MemBackend::from_bytes(damaged)), path(), options());
    assert!(
        matches!(r, Err(Error::Corrupted { offset: 0, .. })),
        "damaged first header"
    );
    let r = Store::open_backend(
        Arc::new(MemBackend::from_bytes(
            b"{\"not\": \"a store\"}".repeat(500),
        )),
        path(),
        options(),
    );
    assert!(matches!(r, Err(Error::NotAStore { .. })), "a foreign file");
}

#[test]
fn cut_big_file_at_random_offsets() {
    let (bytes, history) = workload(3, 60, true);
    assert!(bytes.len() > 1_000_000, "a big file: {}", bytes.len());
    let mut rng = StdRng::seed_from_u64(33);
    let first = history[0].end;
    for _ in 0..1500 {
        let cut = rng.gen_range(first..=bytes.len() as u64);
        check_opens_at(
            bytes[..cut as usize].to_vec(),
            expected_at(&history, cut),
            &format!("cut at {cut}"),
        );
    }
    // Every commit boundary exactly, and one byte short of it.
    for c in &history[1..] {
        check_opens_at(bytes[..c.end as usize].to_vec(), c, "at a commit end");
        check_opens_at(
            bytes[..c.end as usize - 1].to_vec(),
            expected_at(&history, c.end - 1),
            "one byte short",
        );
    }
}

#[test]
fn flipped_bytes_in_the_tail_fall_back_to_the_last_intact_commit() {
    for (seed, big) in [(4, false), (5, true)] {
        let (bytes, history) = workload(seed, 30, big);
        let mut rng = StdRng::seed_from_u64(seed * 100);
        for _ in 0..800 {
            let cut = rng.gen_range(history[1].end..=bytes.len() as u64);
            let last = history.iter().rposition(|c| c.end <= cut).unwrap();
            if last == 0 {
                continue;
            }
            // Damage anywhere from the start of the last complete commit's region to the cut.
            let region_start = history[last - 1].end;
            let mut damaged = bytes[..cut as usize].to_vec();
            let flips: Vec<u64> = (0..rng.gen_range(1..4))
                .map(|_| rng.gen_range(region_start..cut))
                .collect();
            for &p in &flips {
                damaged[p as usize] ^= 1 << rng.gen_range(0..8);
            }
            let hit_last = flips.iter().any(|&p| p < history[last].end);
            let want = if hit_last {
                &history[last - 1]
            } else {
                &history[last]
            };
            check_opens_at(damaged, want, &format!("cut {cut}, flips {flips:?}"));
        }
    }
}

#[test]
fn corruption_in_old_data_is_an_error_not_a_panic() {
    let (bytes, history) = workload(6, 20, false);
    let mut rng = StdRng::seed_from_u64(66);
    let committed_end = history.last().unwrap().end as usize;
    for _ in 0..300 {
        let mut damaged = bytes.clone();
        let p = rng.gen_range(history[0].end as usize..committed_end);
        damaged[p] ^= 0xff;
        // Opening may pick an older commit or the newest; reading must never panic and must
        // either succeed or report corruption.
        if let Ok(store) =
            Store::open_backend(Arc::new(MemBackend::from_bytes(damaged)), path(), options())
        {
            let snap = store.snapshot();
            for e in snap.range(0, RangeOptions::default()).unwrap() {
                if let Err(err) = e {
                    assert!(matches!(err, Error::Corrupted { .. }), "{err}");
                    break;
                }
            }
        }
    }
}

#[test]
fn real_file_cut_and_reopened() {
    let (bytes, history) = workload(7, 10, false);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cut.settee");
    let mut rng = StdRng::seed_from_u64(77);
    for _ in 0..60 {
        let cut = rng.gen_range(history[0].end as usize..=bytes.len());
        std::fs::write(&file, &bytes[..cut]).unwrap();
        let store = Store::open(&file, options()).unwrap();
        let want = expected_at(&history, cut as u64);
        assert!(contents(&store).0 == want.tree);
        store
            .update(Durability::Durable, |txn| {
                txn.modify(0, &[Action::Put(b"x".to_vec(), b"y".to_vec())])
            })
            .unwrap();
        drop(store);
        let store = Store::open(&file, options()).unwrap();
        assert_eq!(
            contents(&store).0.get(&b"x"[..]).map(Vec::as_slice),
            Some(&b"y"[..])
        );
    }
}
