//! Regression tests, one per defect found in review of the storage engine.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use settee_store::format::{Header, HEADER_HEAD};
use settee_store::{
    Action, BlobCopier, BlobRef, Durability, Error, MemBackend, NoBlobs, NodeCache, RangeOptions,
    Store, StoreOptions, TreeSpec, ValueRewriter,
};

fn options() -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::default()],
        cache: NodeCache::new(1 << 20),
        compress_blobs: false,
        ..StoreOptions::default()
    }
}

fn keys(store: &Store) -> Vec<Vec<u8>> {
    store
        .snapshot()
        .range(0, RangeOptions::default())
        .unwrap()
        .map(|e| e.unwrap().key().to_vec())
        .collect()
}

/// A header-shaped byte string: `version` in the version field, a valid checksum.
fn fake_header(version: u32, salt: [u8; 16]) -> Vec<u8> {
    let h = Header {
        salt,
        flags: 0,
        generation: 99,
        data_start: 0,
        region_crc: 0,
        roots: vec![None],
        meta: vec![],
        log: None,
    };
    let mut bytes = h.encode();
    bytes[HEADER_HEAD + 16..HEADER_HEAD + 20].copy_from_slice(&version.to_le_bytes());
    let crc = crc32fast::hash(&bytes[HEADER_HEAD..]);
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Stored bytes that look like a header at a block boundary, in a torn tail, must not stop
/// the file from opening at its last real commit.
#[test]
fn header_lookalike_in_a_torn_tail_is_ignored() {
    for fake in [fake_header(7, [1; 16]), fake_header(1, [2; 16])] {
        let backend = MemBackend::new();
        let store =
            Store::create_backend(Arc::new(backend.clone()), Path::new("f"), options()).unwrap();
        store
            .update(Durability::Durable, |t| {
                t.modify(0, &[Action::Put(b"real".to_vec(), b"1".to_vec())])
                    .map(drop)
            })
            .unwrap();
        let committed = store.committed_len();
        let f = fake.clone();
        store
            .update(Durability::Durable, move |t| -> Result<(), Error> {
                // A filler blob puts the next blob's bytes exactly on a block boundary.
                let first = t.write_blob(b"x")?;
                let next = first.offset + u64::from(first.stored_len);
                let filler = (4096 - (next + 18) % 4096) % 4096;
                let filled = t.write_blob(&vec![0u8; filler as usize])?;
                let fake_at = t.write_blob(&f)?.offset + 9;
                assert_eq!(fake_at % 4096, 0, "{filled:?}");
                Ok(())
            })
            .unwrap();
        let second = store.committed_len() as usize;
        drop(store);
        // Crash before the second commit's header: the tail holds the lookalike.
        let bytes = backend.durable_bytes();
        let tail_end = second - 100;
        let reopened = Store::open_backend(
            Arc::new(MemBackend::from_bytes(bytes[..tail_end].to_vec())),
            Path::new("f"),
            options(),
        )
        .unwrap();
        assert_eq!(keys(&reopened), [b"real".to_vec()]);
        assert!(committed <= tail_end as u64);
    }
}

/// Compaction must continue the commit numbering, never restart it.
#[test]
fn generation_keeps_growing_across_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(&dir.path().join("g.settee"), options()).unwrap();
    for i in 0..5u8 {
        store
            .update(Durability::Durable, move |t| {
                t.modify(0, &[Action::Put(vec![i], vec![i])]).map(drop)
            })
            .unwrap();
    }
    let before = store.snapshot().generation();
    store.compact(Arc::new(NoBlobs), &|_, _| {}).unwrap();
    assert!(store.snapshot().generation() > before);
}

fn case_insensitive(a: &[u8], b: &[u8]) -> Ordering {
    a.to_ascii_lowercase().cmp(&b.to_ascii_lowercase())
}

/// A rewriter that, while the first snapshot is being copied, replaces key "a" by the
/// equal-comparing "A", so that the catch-up must carry a changed key spelling.
struct RespellDuringCopy {
    store: Mutex<Option<Arc<Store>>>,
}

impl ValueRewriter for RespellDuringCopy {
    fn rewrite(
        &self,
        _: usize,
        _: &[u8],
        _: &[u8],
        _: &mut BlobCopier<'_>,
    ) -> settee_store::Result<Option<Vec<u8>>> {
        if let Some(store) = self.store.lock().unwrap().take() {
            store.update(Durability::Durable, |t| {
                t.modify(0, &[Action::Put(b"A".to_vec(), b"new".to_vec())])
                    .map(drop)
            })?;
        }
        Ok(None)
    }
}

#[test]
fn catch_up_keeps_keys_that_compare_equal_but_differ_in_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        trees: vec![TreeSpec::new(case_insensitive, settee_store::NoReduce)],
        ..options()
    };
    let store = Arc::new(Store::create(&dir.path().join("ci.settee"), opts).unwrap());
    store
        .update(Durability::Durable, |t| {
            t.modify(0, &[Action::Put(b"a".to_vec(), b"old".to_vec())])
                .map(drop)
        })
        .unwrap();
    assert_eq!(keys(&store), [b"a".to_vec()]);
    let rewriter = Arc::new(RespellDuringCopy {
        store: Mutex::new(Some(store.clone())),
    });
    store.compact(rewriter, &|_, _| {}).unwrap();
    let snap = store.snapshot();
    let e = snap
        .get(0, b"a")
        .unwrap()
        .expect("the entry survives compaction");
    assert_eq!((e.key(), e.value()), (&b"A"[..], &b"new"[..]));
}

#[test]
fn modify_keeps_the_key_bytes_of_the_last_put() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        trees: vec![TreeSpec::new(case_insensitive, settee_store::NoReduce)],
        ..options()
    };
    let store = Store::create(&dir.path().join("k.settee"), opts).unwrap();
    let actions = vec![
        Action::Delete(b"x".to_vec()),
        Action::Put(b"X".to_vec(), b"1".to_vec()),
    ];
    store
        .update(Durability::Durable, move |t| {
            t.modify(0, &actions).map(drop)
        })
        .unwrap();
    assert_eq!(keys(&store), [b"X".to_vec()]);
}

/// A loose blob whose bytes were thrown away by a failed commit must not be adopted.
#[test]
fn loose_blob_is_stale_after_a_failed_commit() {
    let backend = MemBackend::new();
    let store =
        Store::create_backend(Arc::new(backend.clone()), Path::new("f"), options()).unwrap();
    let loose = store.append_blob(b"chunk one".to_vec()).unwrap();
    backend.fail_syncs(1);
    store.flush().unwrap_err();
    let r = store.update(Durability::Durable, move |t| t.adopt(&loose));
    assert!(matches!(r, Err(Error::StaleBlob)), "{r:?}");
    // A fresh one works, and reads back after the commit that adopts it.
    let loose = store.append_blob(b"chunk two".to_vec()).unwrap();
    let blob = store
        .update(Durability::Durable, move |t| -> Result<_, Error> {
            let b = t.adopt(&loose)?;
            t.modify(0, &[Action::Put(b"att".to_vec(), b.encode().to_vec())])?;
            Ok(b)
        })
        .unwrap();
    assert_eq!(store.snapshot().read_blob(&blob).unwrap(), b"chunk two");
}

/// A loose blob written before a compaction moved the store to a new file is still adopted
/// (copied into the new file), however many compactions pass meanwhile (issue 26: an
/// attachment upload during `_compact` answered 500).
#[test]
fn loose_blob_outlives_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lb.settee");
    let store = Store::create(&path, options()).unwrap();
    let first = store.append_blob(b"chunk".to_vec()).unwrap();
    store.compact(Arc::new(NoBlobs), &|_, _| {}).unwrap();
    let second = store.append_blob(vec![7u8; 100_000]).unwrap();
    store.compact(Arc::new(NoBlobs), &|_, _| {}).unwrap();
    store.compact(Arc::new(NoBlobs), &|_, _| {}).unwrap();
    let blobs = store
        .update(Durability::Durable, move |t| -> Result<_, Error> {
            let (a, b) = (t.adopt(&first)?, t.adopt(&second)?);
            t.modify(
                0,
                &[
                    Action::Put(b"a".to_vec(), a.encode().to_vec()),
                    Action::Put(b"b".to_vec(), b.encode().to_vec()),
                ],
            )?;
            Ok((a, b))
        })
        .unwrap();
    assert_eq!(store.snapshot().read_blob(&blobs.0).unwrap(), b"chunk");
    assert_eq!(
        store.snapshot().read_blob(&blobs.1).unwrap(),
        vec![7u8; 100_000]
    );
    drop(store);
    let store = Store::open(&path, options()).unwrap();
    let snap = store.snapshot();
    let stored = snap
        .get(0, b"b")
        .unwrap()
        .expect("the adopting commit is durable");
    assert_eq!(
        snap.read_blob(&BlobRef::decode(stored.value()).unwrap())
            .unwrap(),
        vec![7u8; 100_000]
    );
}

/// Steady batched traffic must not postpone the batch commit for ever.
#[test]
fn batched_updates_commit_under_steady_traffic() {
    let opts = StoreOptions {
        batch_delay: Duration::from_millis(30),
        ..options()
    };
    let store = Store::create_backend(Arc::new(MemBackend::new()), Path::new("f"), opts).unwrap();
    let start = Instant::now();
    let mut i = 0u32;
    while store.snapshot().generation() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no commit after {i} batched updates"
        );
        let a = vec![Action::Put(i.to_be_bytes().to_vec(), vec![])];
        store
            .update(Durability::Batch, move |t| t.modify(0, &a).map(drop))
            .unwrap();
        i += 1;
    }
}

#[test]
fn a_store_file_is_opened_by_one_writer_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock.settee");
    let store = Store::create(&path, options()).unwrap();
    let second = Store::open(&path, options());
    assert!(
        matches!(&second, Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::ResourceBusy)
    );
    drop(store);
    Store::open(&path, options()).unwrap();
}

/// An early commit (memory bound reached) that fails must fail the durable update it
/// covered, never answer it as committed.
#[test]
fn failed_early_commit_fails_the_update_it_covered() {
    let backend = MemBackend::new();
    let opts = StoreOptions {
        max_uncommitted_bytes: 1024,
        ..options()
    };
    let store = Store::create_backend(Arc::new(backend.clone()), Path::new("f"), opts).unwrap();
    backend.fail_syncs(1);
    let big: Vec<Action> = (0..200u32)
        .map(|i| Action::Put(i.to_be_bytes().to_vec(), vec![7; 50]))
        .collect();
    let r = store.update(Durability::Durable, move |t| t.modify(0, &big).map(drop));
    assert!(matches!(r, Err(Error::Io { op: "sync", .. })), "{r:?}");
    assert!(keys(&store).is_empty());
    store
        .update(Durability::Durable, |t| {
            t.modify(0, &[Action::Put(b"next".to_vec(), b"1".to_vec())])
                .map(drop)
        })
        .unwrap();
    drop(store);
    let reopened = Store::open_backend(
        Arc::new(MemBackend::from_bytes(backend.durable_bytes())),
        Path::new("f"),
        options(),
    )
    .unwrap();
    assert_eq!(keys(&reopened), [b"next".to_vec()]);
}

/// A store whose file was moved away (its database deleted) and replaced by another store's
/// file under the same name must not rename its compacted copy over that other file.
#[test]
fn compaction_leaves_a_file_put_in_its_place_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard.settee");
    let put = |store: &Store, key: &[u8]| {
        let actions = vec![Action::Put(key.to_vec(), b"v".to_vec())];
        store
            .update(Durability::Durable, move |t| t.apply(0, &actions))
            .unwrap();
    };
    let old = Store::create(&path, options()).unwrap();
    put(&old, b"old");
    std::fs::rename(&path, dir.path().join("trash.settee")).unwrap();
    let new = Store::create(&path, options()).unwrap();
    put(&new, b"new");
    assert!(
        old.compact(Arc::new(NoBlobs), &|_, _| {}).is_err(),
        "the compaction notices its file is gone"
    );
    assert_eq!(
        keys(&old),
        [b"old".to_vec()],
        "and keeps serving its own file"
    );
    drop(new);
    let reopened = Store::open(&path, options()).unwrap();
    assert_eq!(
        keys(&reopened),
        [b"new".to_vec()],
        "the file now at the path is untouched"
    );
    assert!(
        !std::fs::read_dir(dir.path()).unwrap().flatten().any(|e| e
            .file_name()
            .to_string_lossy()
            .starts_with("shard.settee.compact")),
        "no copy is left behind"
    );
}

/// A logged key whose changes net to nothing (removed while absent, or put and removed
/// again) must still stop a large ordered modification from writing that key straight to
/// the nodes: opening replays the log's removal over the nodes and would lose the key.
/// Found by `logged_tree_matches_model` in CI.
#[test]
fn a_logged_change_that_nets_to_nothing_still_shadows_its_key() {
    let logged = || StoreOptions {
        trees: vec![TreeSpec::logged(settee_store::SizeReduce)],
        ..options()
    };
    for first in [
        vec![Action::Delete(b"k050".to_vec())],
        vec![
            Action::Put(b"k050".to_vec(), b"x".to_vec()),
            Action::Delete(b"k050".to_vec()),
        ],
    ] {
        let backend = MemBackend::new();
        let store =
            Store::create_backend(Arc::new(backend.clone()), Path::new("f"), logged()).unwrap();
        store
            .update(Durability::Durable, move |t| t.modify(0, &first).map(drop))
            .unwrap();
        // An ordered load into an empty tree: the kind that may go straight to the nodes.
        let load: Vec<Action> = (0..100u32)
            .map(|i| Action::Put(format!("k{i:03}").into_bytes(), b"v".to_vec()))
            .collect();
        store
            .update(Durability::Durable, move |t| t.modify(0, &load).map(drop))
            .unwrap();
        assert_eq!(store.snapshot().count(0).unwrap(), 100);
        drop(store);
        let reopened = Store::open_backend(
            Arc::new(MemBackend::from_bytes(backend.durable_bytes())),
            Path::new("f"),
            logged(),
        )
        .unwrap();
        let snap = reopened.snapshot();
        assert_eq!(snap.count(0).unwrap(), 100);
        assert!(
            snap.get(0, b"k050").unwrap().is_some(),
            "the key put after its removal was logged survives a reopen"
        );
        assert_eq!(keys(&reopened).len(), 100);
    }
}
