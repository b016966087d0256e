//! Writes small, valid store files into a folder, as seeds for the `open_file` fuzz target:
//! `cargo run -p settee-store --example fuzz_seeds -- fuzz/corpus/open_file`.

use std::path::PathBuf;

use settee_store::{
    Action, Durability, Error, NodeCache, SizeReduce, Store, StoreOptions, TreeSpec,
};

fn main() -> Result<(), Error> {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: fuzz_seeds DIR"));
    std::fs::create_dir_all(&out).map_err(|e| Error::Io {
        op: "create seed dir",
        source: e,
    })?;
    for (n, (entries, node_size)) in [(3usize, 64usize), (40, 64), (200, 128), (30, 4096)]
        .into_iter()
        .enumerate()
    {
        let path = out.join(format!("seed-{n}.settee"));
        let _ = std::fs::remove_file(&path);
        let trees = vec![TreeSpec::bytewise(SizeReduce), TreeSpec::default()];
        let opts = StoreOptions {
            trees,
            cache: NodeCache::new(1 << 20),
            node_size,
            ..StoreOptions::default()
        };
        let store = Store::create(&path, opts)?;
        for round in 0..2 {
            store.update(Durability::Durable, move |t| -> Result<(), Error> {
                let actions: Vec<Action> = (0..entries)
                    .map(|i| {
                        Action::Put(
                            format!("k{i:04}").into_bytes(),
                            format!("v{round}-{i}").into_bytes(),
                        )
                    })
                    .collect();
                t.modify(0, &actions)?;
                let blob = t.write_blob(&b"blob ".repeat(40))?;
                t.modify(1, &[Action::Put(b"blob".to_vec(), blob.encode().to_vec())])?;
                t.set_meta(b"meta".to_vec());
                Ok(())
            })?;
        }
    }
    Ok(())
}
