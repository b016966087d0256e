//! The decoders and the open path never panic on hostile bytes: random byte strings, and
//! valid files with random damage (the same entry points the fuzz targets drive).

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use settee_store::{Action, Durability, Error, MemBackend, Store, StoreOptions};

fn valid_file() -> Vec<u8> {
    let backend = MemBackend::new();
    let store = Store::create_backend(
        Arc::new(backend.clone()),
        Path::new("f"),
        StoreOptions {
            node_size: 64,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    for round in 0..3u8 {
        store
            .update(Durability::Durable, move |t| -> Result<(), Error> {
                let actions: Vec<Action> = (0..60u8)
                    .map(|i| Action::Put(vec![b'k', i], vec![round; 9]))
                    .collect();
                t.modify(0, &actions)?;
                t.write_blob(&[round; 300])?;
                Ok(())
            })
            .unwrap();
    }
    drop(store);
    backend.durable_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_the_decoders(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        settee_store::fuzz_decode(&bytes);
        settee_store::fuzz_open(&bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn damaged_files_never_panic(cut in 0.0f64..=1.0, flips in prop::collection::vec((0.0f64..1.0, any::<u8>()), 0..12)) {
        let mut bytes = valid_file();
        bytes.truncate((bytes.len() as f64 * cut) as usize);
        let len = bytes.len();
        for (at, mask) in flips {
            if len > 0 {
                bytes[((len - 1) as f64 * at) as usize] ^= mask;
            }
        }
        settee_store::fuzz_open(&bytes);
    }
}
