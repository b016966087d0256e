//! The zeros a writer lays down past its appends, so that syncs within them record no new
//! file size: the file keeps them across reopening, cuts anything else after its last
//! commit, and a compacted file is handed over without them.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use settee_store::{
    Action, Durability, NoBlobs, NodeCache, RangeOptions, Store, StoreOptions, TreeSpec,
};

fn options() -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::default()],
        cache: NodeCache::new(1 << 20),
        ..StoreOptions::default()
    }
}

fn put(store: &Store, i: u32) {
    put_many(store, i, 1);
}

/// Puts `n` keys from `from` on in one commit, each with 300 bytes that do not compress.
fn put_many(store: &Store, from: u32, n: u32) {
    let a: Vec<Action> = (from..from + n)
        .map(|i| {
            let mut x = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let value = (0..300)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            Action::Put(format!("k{i:05}").into_bytes(), value)
        })
        .collect();
    store
        .update(Durability::Durable, move |t| t.modify(0, &a).map(drop))
        .unwrap();
}

fn count(store: &Store) -> usize {
    store
        .snapshot()
        .range(0, RangeOptions::default())
        .unwrap()
        .count()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn commits_land_in_zeros_reserved_ahead_and_reopening_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.settee");
    let store = Store::create(&path, options()).unwrap();
    put(&store, 0);
    let (reserved, committed) = (file_len(&path), store.committed_len());
    assert!(
        reserved > committed && reserved - committed <= committed + 4096,
        "a small file reserves no more than it holds, to the next block: \
         {reserved} vs {committed}"
    );
    // Past half a megabyte, the reserve is an eighth of the file and at least 64 KiB.
    put_many(&store, 1, 2000);
    let reserved = file_len(&path);
    let committed = store.committed_len();
    assert!(committed > 512 << 10, "{committed}");
    assert!(
        reserved >= committed + (64 << 10),
        "{reserved} vs {committed}"
    );
    let mut n = 2001;
    while store.committed_len() + (16 << 10) < reserved {
        put(&store, n);
        n += 1;
    }
    assert!(n > 2, "several commits fit in the reserve");
    assert_eq!(
        file_len(&path),
        reserved,
        "small commits fit in the zeros already there"
    );
    let committed = store.committed_len();
    drop(store);
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        bytes[committed as usize..].iter().all(|&b| b == 0),
        "the reserve is zeros"
    );

    let store = Store::open(&path, options()).unwrap();
    assert_eq!(count(&store), n as usize);
    assert_eq!(store.committed_len(), committed);
    assert_eq!(
        file_len(&path),
        reserved,
        "an all-zero tail is kept on opening"
    );
    put(&store, n);
    drop(store);
    assert_eq!(
        count(&Store::open(&path, options()).unwrap()),
        n as usize + 1
    );
}

#[test]
fn anything_but_zeros_after_the_last_commit_is_cut_on_opening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.settee");
    let store = Store::create(&path, options()).unwrap();
    put(&store, 0);
    let committed = store.committed_len();
    drop(store);
    // A torn commit: some bytes of it reached the reserve.
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"torn", committed + 100).unwrap();
    f.flush().unwrap();
    drop(f);

    let store = Store::open(&path, options()).unwrap();
    assert_eq!(count(&store), 1);
    assert_eq!(file_len(&path), committed, "the damaged tail is cut off");
    put(&store, 1);
    drop(store);
    assert_eq!(count(&Store::open(&path, options()).unwrap()), 2);
}

#[test]
fn a_compacted_file_has_no_reserve() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.settee");
    let store = Store::create(&path, options()).unwrap();
    for i in 0..50 {
        put(&store, i);
    }
    store.compact(Arc::new(NoBlobs), &|_, _| {}).unwrap();
    assert_eq!(file_len(&path), store.committed_len());
    assert_eq!(count(&store), 50);
    put(&store, 50);
    assert!(
        file_len(&path) > store.committed_len(),
        "the next commit reserves again"
    );
    drop(store);
    assert_eq!(count(&Store::open(&path, options()).unwrap()), 51);
}
