//! Every older file format this build claims to open (`format::OLDEST_VERSION` up), opened
//! from a small fixture file made under it: its contents read back whole, and it takes new
//! commits (written in the current format) and opens again.
//!
//! `tests/fixtures/format-v1.store` was made by `write_the_v1_fixture` (ignored; run it with
//! `--ignored` to make the fixture again): a store written by this build, every header then
//! rewritten as version 1 wrote them (version 1, no log pointer), which is byte for byte
//! what version 1 wrote for a store without logged trees.

use std::path::{Path, PathBuf};

use settee_store::format::{parse_header_head, BLOCK, HEADER_HEAD, OLDEST_VERSION};
use settee_store::{Action, Durability, NodeCache, Store, StoreOptions, TreeSpec};

fn options() -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::default(), TreeSpec::default()],
        cache: NodeCache::new(1 << 20),
        ..StoreOptions::default()
    }
}

fn fixture(version: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/format-v{version}.store"))
}

/// Keys and values of one tree.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// What the fixtures hold: 300 keys in tree 0 over three commits (the last deleting every
/// tenth), 5 in tree 1, and the caller's metadata.
fn expected() -> (Pairs, Pairs) {
    let first = (0..300u32)
        .filter(|i| i % 10 != 0)
        .map(|i| {
            (
                format!("key{i:05}").into_bytes(),
                format!("value {i}").repeat(3).into_bytes(),
            )
        })
        .collect();
    let second = (0..5u32)
        .map(|i| (format!("s{i}").into_bytes(), vec![i as u8; 40]))
        .collect();
    (first, second)
}

fn write_contents(store: &Store) {
    for part in 0..3u32 {
        let actions: Vec<Action> = (part * 100..part * 100 + 100)
            .map(|i| {
                let value = format!("value {i}").repeat(3).into_bytes();
                Action::Put(format!("key{i:05}").into_bytes(), value)
            })
            .collect();
        store
            .update(Durability::Durable, move |t| {
                t.modify(0, &actions).map(drop)
            })
            .unwrap();
    }
    let deletes: Vec<Action> = (0..300u32)
        .step_by(10)
        .map(|i| Action::Delete(format!("key{i:05}").into_bytes()))
        .collect();
    let second: Vec<Action> = (0..5u32)
        .map(|i| Action::Put(format!("s{i}").into_bytes(), vec![i as u8; 40]))
        .collect();
    store
        .update(Durability::Durable, move |t| {
            t.modify(0, &deletes)?;
            t.modify(1, &second)?;
            t.set_meta(b"the caller's metadata".to_vec());
            Ok::<(), settee_store::Error>(())
        })
        .unwrap();
}

fn assert_contents(store: &Store) {
    let snap = store.snapshot();
    let (first, second) = expected();
    for (tree, want) in [(0, first), (1, second)] {
        assert_eq!(snap.count(tree).unwrap(), want.len() as u64, "tree {tree}");
        for (k, v) in want {
            let got = snap.get(tree, &k).unwrap().expect("every key is there");
            assert_eq!(got.value(), &v[..]);
        }
    }
    assert_eq!(snap.meta(), b"the caller's metadata");
}

#[test]
fn every_older_format_opens_reads_and_takes_new_commits() {
    for version in OLDEST_VERSION..settee_store::format::FORMAT_VERSION {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.store");
        std::fs::copy(fixture(version), &path)
            .unwrap_or_else(|e| panic!("fixture v{version}: {e}"));
        let store = Store::open_or_create(&path, options()).unwrap();
        assert_contents(&store);
        store
            .update(Durability::Durable, |t| {
                t.modify(1, &[Action::Put(b"later".to_vec(), b"v".to_vec())])
                    .map(drop)
            })
            .unwrap();
        drop(store);
        let again = Store::open_or_create(&path, options()).unwrap();
        assert_eq!(
            again.snapshot().get(1, b"later").unwrap().unwrap().value(),
            b"v"
        );
        assert_eq!(
            again.snapshot().count(0).unwrap(),
            expected().0.len() as u64
        );
    }
}

/// Makes `tests/fixtures/format-v1.store` (see the module's documentation).
#[test]
#[ignore = "makes the version 1 fixture again"]
fn write_the_v1_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.store");
    let store = Store::open_or_create(&path, options()).unwrap();
    write_contents(&store);
    drop(store);
    let mut bytes = std::fs::read(&path).unwrap();
    let mut headers = 0;
    let mut at = 0usize;
    while at + HEADER_HEAD <= bytes.len() {
        if let Some((len, crc)) = parse_header_head(&bytes[at..at + HEADER_HEAD]) {
            let body = at + HEADER_HEAD..at + HEADER_HEAD + len;
            assert_eq!(crc32(&bytes[body.clone()]), crc, "a whole header");
            assert_eq!(
                bytes[body.end - 1],
                0,
                "no log pointer: the store has no logged trees"
            );
            // Version 1: the version field says 1, and the body ends after the metadata.
            bytes[body.start + 16..body.start + 20].copy_from_slice(&1u32.to_le_bytes());
            let v1 = body.start..body.end - 1;
            let new_crc = crc32(&bytes[v1.clone()]);
            bytes[at + 8..at + 12].copy_from_slice(&((len - 1) as u32).to_le_bytes());
            bytes[at + 12..at + 16].copy_from_slice(&new_crc.to_le_bytes());
            headers += 1;
        }
        at += BLOCK as usize;
    }
    assert!(headers >= 4, "{headers} headers");
    std::fs::create_dir_all(fixture(1).parent().unwrap()).unwrap();
    std::fs::write(fixture(1), &bytes).unwrap();
    let check = dir.path().join("check.store");
    std::fs::copy(fixture(1), &check).unwrap();
    assert_contents(&Store::open_or_create(&check, options()).unwrap());
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(bytes);
    h.finalize()
}
