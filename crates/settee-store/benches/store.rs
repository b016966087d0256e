//! The storage engine benchmark: `cargo bench -p settee-store --bench store [-- OPTIONS]`.
//!
//! Options: `--entries N` (default 1,000,000), `--seconds S` per timed phase (default 3),
//! `--node-sizes A,B,..` to compare node sizes (default: the engine's default only),
//! `--phases tree,commits,reads,logged` (default: all), `--writers A,B,..` concurrent writers for the
//! commits phase (default 1,16,64; ratios are against the first), `--quick` (100,000
//! entries, 1 s phases). Every phase checks its answers and aborts on a wrong one. Prints a
//! Markdown table. Runs with the server's allocator and the server's writer-thread priority.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use settee_store::{
    Action, Bound, Durability, Error, FoldLimits, NodeCache, OverlayBudget, RangeOptions,
    SizeReduce, Store, StoreOptions, TreeSpec, DEFAULT_NODE_SIZE,
};

/// The allocator the server runs the engine with, so that allocation costs here are the
/// server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Args {
    phases: Vec<String>,
    entries: u64,
    seconds: f64,
    node_sizes: Vec<usize>,
    writers: Vec<usize>,
}

fn args() -> Args {
    let mut a = Args {
        phases: vec![
            "tree".into(),
            "commits".into(),
            "reads".into(),
            "logged".into(),
        ],
        entries: 1_000_000,
        seconds: 3.0,
        node_sizes: vec![DEFAULT_NODE_SIZE],
        writers: vec![1, 16, 64],
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--entries" => a.entries = it.next().and_then(|v| v.parse().ok()).expect("--entries N"),
            "--seconds" => a.seconds = it.next().and_then(|v| v.parse().ok()).expect("--seconds S"),
            "--node-sizes" => {
                a.node_sizes = it
                    .next()
                    .expect("--node-sizes A,B")
                    .split(',')
                    .map(|s| s.parse().expect("a size"))
                    .collect()
            }
            "--writers" => {
                a.writers = it
                    .next()
                    .expect("--writers A,B")
                    .split(',')
                    .map(|s| s.parse().expect("a count"))
                    .collect()
            }
            "--phases" => {
                a.phases = it
                    .next()
                    .expect("--phases tree,commits,reads,logged")
                    .split(',')
                    .map(String::from)
                    .collect()
            }
            "--quick" => {
                a.entries = 100_000;
                a.seconds = 1.0;
            }
            _ => {} // cargo bench passes --bench
        }
    }
    a
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// 100-byte values that name their key, so that every read can be checked.
fn value(i: u64) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.resize(100, (i % 251) as u8);
    v
}

fn check_value(i: u64, v: &[u8]) {
    assert!(
        v.len() == 100 && v[..8] == i.to_le_bytes(),
        "wrong value for key {i}"
    );
}

fn options(node_size: usize) -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::bytewise(SizeReduce)],
        cache: NodeCache::new(2 << 30),
        node_size,
        on_writer_start: Some(Arc::new(lower_priority)),
        ..StoreOptions::default()
    }
}

/// The server runs every store's writer thread at this niceness, so that reads go first
/// when the CPU is short; the benchmark does the same.
const WRITER_NICENESS: i32 = 10;

fn lower_priority() {
    // SAFETY: setpriority on this thread's id only changes its scheduling niceness.
    unsafe {
        libc::setpriority(
            libc::PRIO_PROCESS,
            libc::gettid() as libc::id_t,
            WRITER_NICENESS,
        );
    }
}

fn row(name: &str, value: String, note: &str) {
    println!("| {name} | {value} | {note} |");
    let _ = std::io::stdout().flush();
}

fn per_sec(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn fmt(x: f64) -> String {
    let s = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Runs `f` on `threads` threads for `secs`, each returning its operation count.
fn timed_threads(threads: usize, secs: f64, f: impl Fn(usize, &AtomicBool) -> u64 + Sync) -> f64 {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn({
                    let (f, stop) = (&f, &stop);
                    move || f(t, stop)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    per_sec(total, start.elapsed())
}

/// 1,000 random lookups on `snap`, each answer checked.
fn checked_lookups(snap: &settee_store::Snapshot, rng: &mut rand::rngs::StdRng, n: u64) -> u64 {
    for _ in 0..1000 {
        let i = rng.gen_range(0..n);
        check_value(
            i,
            snap.get(0, &key(i))
                .unwrap()
                .expect("every key is present")
                .value(),
        );
    }
    1000
}

/// Batches of 1,000 random lookups on one snapshot, each answer checked, until told to stop.
fn lookups_many(store: &Store, n: u64, seed: u64, stop: &AtomicBool) -> u64 {
    let snap = store.snapshot();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        let asked: Vec<u64> = (0..1000).map(|_| rng.gen_range(0..n)).collect();
        let keys: Vec<[u8; 8]> = asked.iter().map(|&i| key(i)).collect();
        for (i, e) in asked.iter().zip(snap.get_many(0, &keys).unwrap()) {
            check_value(*i, e.expect("every key is present").value());
        }
        done += 1000;
    }
    done
}

/// Lookups on one snapshot until told to stop.
fn lookups(store: &Store, n: u64, seed: u64, stop: &AtomicBool) -> u64 {
    let snap = store.snapshot();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        done += checked_lookups(&snap, &mut rng, n);
    }
    done
}

fn bench_node_size(dir: &Path, a: &Args, node_size: usize) -> Result<(), Error> {
    let n = a.entries;
    let path = dir.join(format!("bench-{node_size}.settee"));
    let store = Arc::new(Store::create(&path, options(node_size))?);
    println!(
        "\n### node size {node_size} bytes, {} entries (8-byte keys, 100-byte values)\n",
        fmt(n as f64)
    );
    println!("| measure | result | notes |\n|---|---|---|");

    let mut order: Vec<u64> = (0..n).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(1));
    let start = Instant::now();
    for batch in order.chunks(1000) {
        let actions: Vec<Action> = batch
            .iter()
            .map(|&i| Action::Put(key(i).to_vec(), value(i)))
            .collect();
        store.update(Durability::Durable, move |t| t.apply(0, &actions))?;
    }
    let took = start.elapsed();
    assert_eq!(store.snapshot().count(0)?, n);
    row(
        "random inserts, batches of 1,000, durable commit per batch",
        format!("{}/s", fmt(per_sec(n, took))),
        &format!("{:.1} s total", took.as_secs_f64()),
    );
    let file_size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let stats = store.compact(Arc::new(settee_store::NoBlobs), &|_, _| {})?;
    row(
        "file size before / after compaction",
        format!(
            "{:.1} MiB / {:.1} MiB",
            file_size as f64 / 1048576.0,
            stats.new_size as f64 / 1048576.0
        ),
        "",
    );

    // Warm the cache with one full pass, then time random lookups.
    let snap = store.snapshot();
    let mut seen = 0u64;
    for (i, e) in snap.range(0, RangeOptions::default())?.enumerate() {
        let e = e?;
        check_value(i as u64, e.value());
        seen += 1;
    }
    assert_eq!(seen, n);
    let one = timed_threads(1, a.seconds, |t, stop| {
        lookups(&store, n, 10 + t as u64, stop)
    });
    row(
        "point lookups, warm cache, 1 thread",
        format!("{}/s", fmt(one)),
        "",
    );
    let cores = std::thread::available_parallelism().map_or(2, |c| c.get());
    let all = timed_threads(cores, a.seconds, |t, stop| {
        lookups(&store, n, 20 + t as u64, stop)
    });
    row(
        &format!("point lookups, warm cache, {cores} threads"),
        format!("{}/s", fmt(all)),
        &format!("{}/s per core", fmt(all / cores as f64)),
    );
    let one = timed_threads(1, a.seconds, |t, stop| {
        lookups_many(&store, n, 30 + t as u64, stop)
    });
    row(
        "point lookups in batches of 1,000 (`get_many`), warm cache, 1 thread",
        format!("{}/s", fmt(one)),
        "",
    );
    let all = timed_threads(cores, a.seconds, |t, stop| {
        lookups_many(&store, n, 40 + t as u64, stop)
    });
    row(
        &format!("point lookups in batches of 1,000 (`get_many`), warm cache, {cores} threads"),
        format!("{}/s", fmt(all)),
        &format!("{}/s per core", fmt(all / cores as f64)),
    );

    let scan = |dir: settee_store::Direction| {
        let start = Instant::now();
        let mut rows = 0u64;
        let mut last: Option<u64> = None;
        for e in snap
            .range(
                0,
                RangeOptions {
                    direction: dir,
                    ..RangeOptions::default()
                },
            )
            .unwrap()
        {
            let e = e.unwrap();
            let k = u64::from_be_bytes(e.key().try_into().unwrap());
            assert!(
                last.is_none_or(|l| if dir == settee_store::Direction::Forward {
                    k == l + 1
                } else {
                    k + 1 == l
                }),
                "scan order"
            );
            last = Some(k);
            rows += 1;
        }
        assert_eq!(rows, n);
        per_sec(rows, start.elapsed())
    };
    row(
        "range scan, forward, 1 thread",
        format!("{} rows/s", fmt(scan(settee_store::Direction::Forward))),
        "keys checked in order",
    );
    row(
        "range scan, backward, 1 thread",
        format!("{} rows/s", fmt(scan(settee_store::Direction::Backward))),
        "",
    );

    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let reps = 20_000;
    let start = Instant::now();
    for _ in 0..reps {
        let (x, y) = (rng.gen_range(0..n), rng.gen_range(0..n));
        let (lo, hi) = (x.min(y), x.max(y));
        let r = snap.reduce(
            0,
            &Bound::Included(key(lo).to_vec()),
            &Bound::Excluded(key(hi).to_vec()),
        )?;
        assert_eq!(r.count, hi - lo, "reduce count");
        assert_eq!(SizeReduce::decode(&r.value), (hi - lo) * 108, "reduce size");
    }
    row(
        "reduce over a random range",
        format!(
            "{:.1} µs",
            start.elapsed().as_secs_f64() * 1e6 / reps as f64
        ),
        "count and size checked",
    );

    let ranges = 2_000;
    let start = Instant::now();
    let mut groups = 0u64;
    let by_top_bytes = |a: &[u8], b: &[u8]| a[..5] == b[..5];
    for _ in 0..ranges {
        let lo = rng.gen_range(0..n.saturating_sub(100_000).max(1));
        let opts = RangeOptions {
            start: Bound::Included(key(lo).to_vec()),
            end: Bound::Excluded(key(lo + 100_000).to_vec()),
            ..RangeOptions::default()
        };
        let mut count = 0;
        snap.fold_groups(0, &opts, &by_top_bytes, &mut |g| {
            count += g.reduction.count;
            groups += 1;
            Ok(true)
        })?;
        assert_eq!(count, 100_000u64.min(n - lo), "grouped counts add up");
    }
    row(
        "grouped reduce over 100,000 keys, grouped by key prefix",
        format!(
            "{:.1} µs",
            start.elapsed().as_secs_f64() * 1e6 / ranges as f64
        ),
        &format!("{:.1} groups per query", groups as f64 / ranges as f64),
    );
    drop(snap);
    drop(store);
    let _ = std::fs::remove_file(&path);
    Ok(())
}

fn bench_commits(dir: &Path, a: &Args) -> Result<(), Error> {
    println!("\n### durable single-key commits\n");
    println!("| measure | result | notes |\n|---|---|---|");
    for kib in [4usize, 64, 256, 1024] {
        let raw = raw_fsync_rate(dir, a.seconds / 2.0, kib, None);
        row(
            &format!("raw disk: append {kib} KiB + fdatasync"),
            format!("{}/s", fmt(raw)),
            &format!("{:.2} ms each", 1000.0 / raw),
        );
    }
    let raw = raw_fsync_rate(dir, a.seconds / 2.0, 4, Some(16 << 10));
    row(
        "raw disk: overwrite 4 KiB of a written file + fdatasync",
        format!("{}/s", fmt(raw)),
        &format!(
            "{:.2} ms each; no new size or extent to record, as in the store's reserve",
            1000.0 / raw
        ),
    );
    // The disk's speed drifts over seconds on a shared machine, so the writer counts take
    // turns in short slices and each row sums its slices: every row sees the same disk.
    let path = dir.join("commits.settee");
    let _ = std::fs::remove_file(&path);
    let store = Store::create(&path, options(DEFAULT_NODE_SIZE))?;
    let next = AtomicU64::new(0);
    let mut tally = vec![Tally::default(); a.writers.len()];
    for _ in 0..COMMIT_SLICES {
        for (t, &writers) in tally.iter_mut().zip(&a.writers) {
            t.add(commit_slice(
                &store,
                &next,
                writers,
                a.seconds / COMMIT_SLICES as f64,
            )?);
        }
    }
    let first = tally.first().map_or(1.0, Tally::rate);
    for (t, writers) in tally.iter().zip(&a.writers) {
        row(
            &format!("{writers} concurrent writers"),
            format!("{}/s", fmt(t.rate())),
            &format!(
                "{:.1}x the first row; {:.1} updates per fsync",
                t.rate() / first,
                t.per_commit()
            ),
        );
    }
    drop(store);
    let _ = std::fs::remove_file(&path);
    // The same on a file in memory (tmpfs, where a sync costs nothing): what the engine
    // itself spends per update when commits are grouped.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let writers = a.writers.iter().copied().max().unwrap_or(64);
        let path = shm.join(format!(
            "settee-bench-commits-{}.settee",
            std::process::id()
        ));
        let store = Store::create(&path, options(DEFAULT_NODE_SIZE))?;
        let t = commit_slice(&store, &AtomicU64::new(0), writers, a.seconds)?;
        row(
            &format!("{writers} concurrent writers, file in memory (tmpfs)"),
            format!("{}/s", fmt(t.rate())),
            &format!(
                "{:.1} µs per update, all threads; {:.1} updates per commit",
                1e6 / t.rate(),
                t.per_commit()
            ),
        );
        drop(store);
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

/// Turns each writer count takes in the commits phase.
const COMMIT_SLICES: usize = 6;

/// Updates, seconds and commits summed over slices.
#[derive(Clone, Copy, Default)]
struct Tally {
    updates: u64,
    secs: f64,
    commits: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        (self.updates, self.secs, self.commits) = (
            self.updates + other.updates,
            self.secs + other.secs,
            self.commits + other.commits,
        );
    }
    fn rate(&self) -> f64 {
        self.updates as f64 / self.secs
    }
    fn per_commit(&self) -> f64 {
        self.updates as f64 / self.commits.max(1) as f64
    }
}

/// Durable single-key commits by `writers` threads for `seconds`, keys numbered from `next`;
/// checks that every acknowledged one is there.
fn commit_slice(
    store: &Store,
    next: &AtomicU64,
    writers: usize,
    seconds: f64,
) -> Result<Tally, Error> {
    let (n0, gen0) = (next.load(Ordering::Relaxed), store.snapshot().generation());
    let start = Instant::now();
    timed_threads(writers, seconds, |_, stop| {
        let mut done = 0;
        while !stop.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let act = vec![Action::Put(key(i).to_vec(), value(i))];
            store
                .update(Durability::Durable, move |t| t.apply(0, &act))
                .unwrap();
            done += 1;
        }
        done
    });
    let secs = start.elapsed().as_secs_f64();
    let snap = store.snapshot();
    let n = next.load(Ordering::Relaxed);
    assert_eq!(snap.count(0)?, n, "every acknowledged commit is there");
    Ok(Tally {
        updates: n - n0,
        secs,
        commits: snap.generation() - gen0,
    })
}

/// Syncs of `kib` KiB each, appended to a growing file or, with `blocks`, written in turn
/// over that many blocks the file already has (written and synced first): the device's
/// rate with and without file-system metadata to record.
fn raw_fsync_rate(dir: &Path, secs: f64, kib: usize, blocks: Option<u64>) -> f64 {
    let path = dir.join("raw-fsync");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let block = vec![7u8; kib * 1024];
    if let Some(blocks) = blocks {
        f.write_all_at(&vec![0u8; blocks as usize * block.len()], 0)
            .unwrap();
        f.sync_all().unwrap();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        f.write_all_at(&block, blocks.map_or(n, |b| n % b) * block.len() as u64)
            .unwrap();
        f.sync_data().unwrap();
        n += 1;
    }
    let _ = std::fs::remove_file(&path);
    per_sec(n, start.elapsed())
}

fn bench_read_under_write(dir: &Path, a: &Args) -> Result<(), Error> {
    println!("\n### reads while a writer commits continuously\n");
    println!("| measure | result | notes |\n|---|---|---|");
    let n = a.entries.min(200_000);
    let path = dir.join("rw.settee");
    let _ = std::fs::remove_file(&path);
    let store = Store::create(&path, options(DEFAULT_NODE_SIZE))?;
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let actions: Vec<Action> = chunk
            .iter()
            .map(|&i| Action::Put(key(i).to_vec(), value(i)))
            .collect();
        store.update(Durability::Durable, move |t| t.apply(0, &actions))?;
    }
    for readers in [1usize, 2] {
        let read = |t: usize, stop: &AtomicBool| {
            // Each batch of lookups takes a fresh snapshot, so readers follow the writer.
            let mut done = 0;
            while !stop.load(Ordering::Relaxed) {
                done += lookups_batch(&store, n, 40 + t as u64 + done);
            }
            done
        };
        let alone = timed_threads(readers, a.seconds, read);
        let writing = AtomicBool::new(true);
        let written = AtomicU64::new(0);
        let with_writer = std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = n;
                while writing.load(Ordering::Relaxed) {
                    let act = vec![Action::Put(key(i).to_vec(), value(i))];
                    store
                        .update(Durability::Durable, move |t| t.apply(0, &act))
                        .unwrap();
                    i += 1;
                    written.fetch_add(1, Ordering::Relaxed);
                }
            });
            let r = timed_threads(readers, a.seconds, read);
            writing.store(false, Ordering::Relaxed);
            r
        });
        row(
            &format!("{readers} reader thread(s): lookups/s alone → with a durable writer"),
            format!(
                "{} → {} ({:.0}%)",
                fmt(alone),
                fmt(with_writer),
                100.0 * with_writer / alone
            ),
            &format!(
                "writer made {} commits meanwhile",
                fmt(written.load(Ordering::Relaxed) as f64)
            ),
        );
    }
    let _ = std::fs::remove_file(&path);
    Ok(())
}

/// Keys a commit of the logged phase carries: a random-id `_bulk_docs` batch of 1,000
/// documents over a database's two shards.
const LOGGED_BATCH: u64 = 500;

/// A random-looking 32-hex key for entry `i`, as PouchDB makes document ids; distinct for
/// every `i` (each half is a bijection of it).
fn hex_key(i: u64) -> Vec<u8> {
    let mix = |z: u64| {
        let z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    format!("{:016x}{:016x}", mix(i), mix(!i)).into_bytes()
}

/// Random 32-hex keys into a logged tree (as a random-id database's by-id tree), 500 to a
/// durable commit, with folding held off so that every change stays among the logged
/// changes' runs; then lookups of present and absent keys in a snapshot, each checked. On
/// a file in memory where there is one, so that syncs do not hide the engine's own work.
fn bench_logged(dir: &Path, a: &Args) -> Result<(), Error> {
    println!("\n### logged changes (random 32-hex keys, folding held off)\n");
    println!("| measure | result | notes |\n|---|---|---|");
    let n = a.entries.min(500_000).next_multiple_of(LOGGED_BATCH);
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { shm } else { dir };
    let path = dir.join(format!("settee-bench-logged-{}.settee", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let opts = StoreOptions {
        trees: vec![TreeSpec::logged(SizeReduce)],
        fold: FoldLimits {
            changes: n as usize + 1,
            bytes: u64::MAX,
            records: u64::MAX,
            grow: 1,
            ..FoldLimits::default()
        },
        overlay_budget: OverlayBudget::new(u64::MAX),
        ..options(DEFAULT_NODE_SIZE)
    };
    let store = Store::create(&path, opts)?;
    let started = Instant::now();
    for first in (0..n).step_by(LOGGED_BATCH as usize) {
        let actions: Vec<Action> = (first..first + LOGGED_BATCH)
            .map(|i| Action::Put(hex_key(i), value(i)))
            .collect();
        store.update(Durability::Durable, move |t| t.apply(0, &actions))?;
    }
    let took = started.elapsed();
    row(
        &format!("{} keys, {LOGGED_BATCH} to a commit", fmt(n as f64)),
        format!("{}/s", fmt(per_sec(n, took))),
        &format!("{} commits", n / LOGGED_BATCH),
    );
    let snap = store.snapshot();
    let rate = timed_threads(1, a.seconds, |t, stop| {
        let mut rng = rand::rngs::StdRng::seed_from_u64(60 + t as u64);
        let mut done = 0;
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..1000 {
                let i = rng.gen_range(0..n);
                let found = snap
                    .get(0, &hex_key(i))
                    .unwrap()
                    .expect("every key is present");
                check_value(i, found.value());
                let absent = hex_key(n + rng.gen_range(0..n));
                assert!(
                    snap.get(0, &absent).unwrap().is_none(),
                    "an absent key found"
                );
            }
            done += 2000;
        }
        done
    });
    row(
        "lookups in a snapshot, half of them of absent keys",
        format!("{}/s", fmt(rate)),
        "one thread",
    );
    drop((snap, store));
    let _ = std::fs::remove_file(&path);
    Ok(())
}

/// 1,000 lookups on a fresh snapshot, so that readers follow a writer.
fn lookups_batch(store: &Store, n: u64, seed: u64) -> u64 {
    checked_lookups(
        &store.snapshot(),
        &mut rand::rngs::StdRng::seed_from_u64(seed),
        n,
    )
}

/// Average latency of dependent random reads over 512 MiB: the cost of one cache miss to
/// memory on this machine, which bounds lookups whose working set exceeds the CPU caches.
fn memory_latency_ns() -> f64 {
    let n = 64 << 20; // u64 slots: 512 MiB
    let mut next: Vec<u64> = (0..n as u64).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    // Sattolo's shuffle: one cycle through every slot.
    for i in (1..n).rev() {
        let j = rng.gen_range(0..i);
        next.swap(i, j);
    }
    let steps = 5_000_000u64;
    let start = Instant::now();
    let mut at = 0u64;
    for _ in 0..steps {
        at = next[at as usize];
    }
    std::hint::black_box(at);
    start.elapsed().as_nanos() as f64 / steps as f64
}

fn main() -> Result<(), Error> {
    let a = args();
    let dir =
        tempfile::tempdir_in(std::env::var("SETTEE_BENCH_DIR").unwrap_or_else(|_| ".".into()))
            .expect("bench dir");
    println!(
        "## settee-store benchmark\n\n{} cores; {} entries; {} s per timed phase",
        std::thread::available_parallelism().map_or(0, |c| c.get()),
        fmt(a.entries as f64),
        a.seconds
    );
    let run = |p: &str| a.phases.iter().any(|x| x == p);
    if run("tree") {
        println!(
            "\nOne dependent random read from memory (512 MiB working set): {:.0} ns",
            memory_latency_ns()
        );
        for &ns in &a.node_sizes {
            bench_node_size(dir.path(), &a, ns)?;
        }
    }
    if run("commits") {
        bench_commits(dir.path(), &a)?;
    }
    if run("reads") {
        bench_read_under_write(dir.path(), &a)?;
    }
    if run("logged") {
        bench_logged(dir.path(), &a)?;
    }
    Ok(())
}
