//! Crash test with real processes: a child makes durable writes (printing each one once it
//! is acknowledged) while compacting in a loop, and is killed with SIGKILL at random
//! moments. After every kill the store opens cleanly and holds every acknowledged write.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use settee_store::{Action, Durability, NoBlobs, NodeCache, Store, StoreOptions, TreeSpec};

const CHILD_ENV: &str = "SETTEE_STORE_KILL_CHILD";

fn options() -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::default()],
        cache: NodeCache::new(8 << 20),
        ..StoreOptions::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("doc{i:08}").into_bytes()
}

/// The child's body, run only by `acknowledged_writes_survive_sigkill` (as an ignored test
/// of this binary, which it then kills).
#[test]
#[ignore = "the body of the process acknowledged_writes_survive_sigkill kills"]
fn kill_child_process() {
    let path = std::env::var(CHILD_ENV).expect("started by acknowledged_writes_survive_sigkill");
    let store = Arc::new(Store::open_or_create(Path::new(&path), options()).unwrap());
    let start = store.snapshot().count(0).unwrap();
    let compactor = store.clone();
    std::thread::spawn(move || loop {
        compactor.compact(Arc::new(NoBlobs), &|_, _| {}).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    });
    let mut out = std::io::stdout().lock();
    for i in start.. {
        // A few bulk values so that compaction has real work to copy.
        let actions = vec![Action::Put(
            key(i),
            format!("value {i} {}", "x".repeat((i % 200) as usize)).into_bytes(),
        )];
        store
            .update(Durability::Durable, move |t| {
                t.modify(0, &actions).map(drop)
            })
            .unwrap();
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.settee");
    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
    let mut acked_total = 0;
    let mut killed_mid_compaction = 0;
    for round in 0..20 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "kill_child_process",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(150..600)));
        child.kill().unwrap();
        child.wait().unwrap();
        let acked: Vec<u64> = BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| l.strip_prefix("ack ").and_then(|n| n.parse().ok()))
            .collect();
        let mid_compaction = std::fs::read_dir(dir.path()).unwrap().flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("killed.settee.compact")
        });
        killed_mid_compaction += usize::from(mid_compaction);
        let store = Store::open(&path, options())
            .unwrap_or_else(|e| panic!("round {round}: open after kill: {e}"));
        let snap = store.snapshot();
        for &i in &acked {
            let e = snap.get(0, &key(i)).unwrap();
            assert!(e.is_some(), "round {round}: acknowledged write {i} lost");
        }
        let count = snap.count(0).unwrap();
        assert!(
            acked.last().is_none_or(|&last| count > last),
            "round {round}: count {count}"
        );
        assert!(
            !std::fs::read_dir(dir.path()).unwrap().flatten().any(|e| e
                .file_name()
                .to_string_lossy()
                .starts_with("killed.settee.compact")),
            "stray compaction file removed on open"
        );
        eprintln!("round {round}: {} acknowledged, {count} stored, killed mid-compaction: {mid_compaction}", acked.len());
        acked_total += acked.len();
    }
    assert!(
        acked_total > 100,
        "the child made progress: {acked_total} acknowledged writes"
    );
    assert!(
        killed_mid_compaction > 0,
        "some kills should land during a compaction"
    );
}
