//! A store named by a bare relative file name (its own test binary: it changes directory).

use std::path::Path;
use std::sync::Arc;

use settee_store::{Action, Durability, NoBlobs, Store, StoreOptions};

#[test]
fn bare_file_names_create_and_compact() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let store = Store::create(Path::new("bare.settee"), StoreOptions::default()).unwrap();
    store
        .update(Durability::Durable, |t| {
            t.modify(0, &[Action::Put(b"k".to_vec(), b"v".to_vec())])
                .map(drop)
        })
        .unwrap();
    store.compact(Arc::new(NoBlobs), &|_, _| {}).unwrap();
    store
        .update(Durability::Durable, |t| {
            t.modify(0, &[Action::Put(b"k2".to_vec(), b"v".to_vec())])
                .map(drop)
        })
        .unwrap();
    drop(store);
    let store = Store::open(Path::new("bare.settee"), StoreOptions::default()).unwrap();
    assert_eq!(store.snapshot().count(0).unwrap(), 2);
}
