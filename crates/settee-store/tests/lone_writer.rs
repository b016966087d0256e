//! A durable update whose caller finds the writer idle is applied and committed on the
//! caller's own thread (`Store::run_or_submit_with`); one that finds anything queued or a
//! commit under way waits its turn on the writer thread, so no update overtakes another.

use std::path::Path;
use std::sync::{Arc, Barrier, Mutex};
use std::thread::ThreadId;

use settee_store::{
    Action, CallerTurn, Durability, Error, MemBackend, NodeCache, RangeOptions, Store,
    StoreOptions, TreeSpec, Txn,
};

fn options() -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::default()],
        cache: NodeCache::new(1 << 20),
        node_size: 512,
        ..StoreOptions::default()
    }
}

fn put(txn: &mut Txn, key: &str, value: &str) -> Result<(), Error> {
    txn.modify(0, &[Action::Put(key.into(), value.into())])
        .map(drop)
}

fn read(txn: &Txn, key: &str) -> Option<String> {
    txn.get(0, key.as_bytes())
        .unwrap()
        .map(|e| String::from_utf8(e.value().to_vec()).unwrap())
}

fn keys(store: &Store) -> Vec<String> {
    let snap = store.snapshot();
    snap.range(0, RangeOptions::default())
        .unwrap()
        .map(|e| String::from_utf8(e.unwrap().key().to_vec()).unwrap())
        .collect()
}

/// Where an update ran and what it answered, as seen from outside.
#[derive(Default)]
struct Seen {
    ran_on: Option<ThreadId>,
    saw: Option<String>,
    answer: Option<Result<(), Error>>,
}

/// Runs `run_or_submit_with` for an update that records its thread and the value of `k`
/// it found, then writes `k = value`.
fn run_recorded(store: &Store, durability: Durability, value: &'static str) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (in_job, in_done) = (seen.clone(), seen.clone());
    store.run_or_submit_with(
        durability,
        move |txn: &mut Txn| {
            let mut s = in_job.lock().unwrap();
            s.ran_on = Some(std::thread::current().id());
            s.saw = read(txn, "k");
            put(txn, "k", value)
        },
        move |answer: Result<(), Error>| in_done.lock().unwrap().answer = Some(answer),
    );
    seen
}

fn wait_answered(seen: &Mutex<Seen>) -> Result<(), Error> {
    for _ in 0..2000 {
        if let Some(answer) = seen.lock().unwrap().answer.take() {
            return answer;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("no answer after 10 s");
}

#[test]
fn an_idle_writer_lets_the_caller_commit_its_own_update() {
    let backend = MemBackend::new();
    let store =
        Store::create_backend(Arc::new(backend.clone()), Path::new("f"), options()).unwrap();
    let seen = run_recorded(&store, Durability::Durable, "1");
    let s = seen.lock().unwrap();
    assert_eq!(
        s.ran_on,
        Some(std::thread::current().id()),
        "the update ran on the caller's thread"
    );
    assert!(
        matches!(s.answer, Some(Ok(()))),
        "answered before returning"
    );
    assert_eq!(keys(&store), ["k"], "committed and published");
    let durable = Store::open_backend(
        Arc::new(MemBackend::from_bytes(backend.durable_bytes())),
        Path::new("f"),
        options(),
    )
    .unwrap();
    assert_eq!(keys(&durable), ["k"], "synced before the answer");
}

#[test]
fn a_turn_that_is_never_free_sends_every_update_to_the_writer() {
    let options = StoreOptions {
        caller_turn: CallerTurn::never(),
        ..options()
    };
    let store =
        Store::create_backend(Arc::new(MemBackend::new()), Path::new("f"), options).unwrap();
    for value in ["1", "2"] {
        let seen = run_recorded(&store, Durability::Durable, value);
        wait_answered(&seen).unwrap();
        let ran_on = seen.lock().unwrap().ran_on;
        assert!(ran_on.is_some(), "the update ran");
        assert_ne!(
            ran_on,
            Some(std::thread::current().id()),
            "the writer thread ran it, with the writer idle"
        );
    }
    assert_eq!(keys(&store), ["k"]);
}

#[test]
fn a_caller_waits_behind_a_commit_under_way() {
    let store =
        Store::create_backend(Arc::new(MemBackend::new()), Path::new("f"), options()).unwrap();
    let (started, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let (s, r) = (started.clone(), release.clone());
    let first = store.submit(Durability::Durable, move |txn: &mut Txn| {
        s.wait();
        r.wait();
        put(txn, "k", "1")
    });
    started.wait();
    let seen = run_recorded(&store, Durability::Durable, "2");
    let answered_at_once = seen.lock().unwrap().answer.is_some();
    release.wait();
    assert!(!answered_at_once, "queued, not run, while the writer works");
    first.wait().unwrap();
    wait_answered(&seen).unwrap();
    let s = seen.lock().unwrap();
    assert_ne!(
        s.ran_on,
        Some(std::thread::current().id()),
        "the writer thread ran it"
    );
    assert_eq!(s.saw.as_deref(), Some("1"), "after the update before it");
}

/// The writer thread is held before its loop starts, so a request sent to it stays queued
/// with the writer's state free: a caller must still not run ahead of it.
#[test]
fn a_caller_never_overtakes_a_queued_update() {
    let gate = Arc::new(Barrier::new(2));
    let g = gate.clone();
    let hold = move || {
        g.wait();
    };
    let options = StoreOptions {
        on_writer_start: Some(Arc::new(hold)),
        ..options()
    };
    let store =
        Store::create_backend(Arc::new(MemBackend::new()), Path::new("f"), options).unwrap();
    let first = store.submit(Durability::Durable, |txn: &mut Txn| put(txn, "k", "1"));
    let seen = run_recorded(&store, Durability::Durable, "2");
    let answered_at_once = seen.lock().unwrap().answer.is_some();
    // Released before any assertion, or a failure would hang dropping the store.
    gate.wait();
    assert!(!answered_at_once, "queued behind the first update");
    first.wait().unwrap();
    wait_answered(&seen).unwrap();
    assert_eq!(
        seen.lock().unwrap().saw.as_deref(),
        Some("1"),
        "applied after the update sent before it"
    );
}

#[test]
fn batched_updates_always_go_to_the_writer_thread() {
    let store =
        Store::create_backend(Arc::new(MemBackend::new()), Path::new("f"), options()).unwrap();
    let seen = run_recorded(&store, Durability::Batch, "1");
    wait_answered(&seen).unwrap();
    assert_ne!(
        seen.lock().unwrap().ran_on,
        Some(std::thread::current().id())
    );
}

#[test]
fn a_callers_failed_sync_fails_its_update_and_the_writer_goes_on() {
    let backend = MemBackend::new();
    let store =
        Store::create_backend(Arc::new(backend.clone()), Path::new("f"), options()).unwrap();
    backend.fail_syncs(1);
    let seen = run_recorded(&store, Durability::Durable, "1");
    let answer = seen
        .lock()
        .unwrap()
        .answer
        .take()
        .expect("answered before returning");
    assert!(
        matches!(answer, Err(Error::Io { op: "sync", .. })),
        "{answer:?}"
    );
    assert_eq!(
        seen.lock().unwrap().ran_on,
        Some(std::thread::current().id())
    );
    assert!(
        keys(&store).is_empty(),
        "the failed commit is not published"
    );
    store
        .update(Durability::Durable, |txn: &mut Txn| put(txn, "j", "2"))
        .unwrap();
    let seen = run_recorded(&store, Durability::Durable, "3");
    assert!(matches!(seen.lock().unwrap().answer, Some(Ok(()))));
    assert_eq!(keys(&store), ["j", "k"]);
}

#[test]
fn a_panicking_update_run_by_its_caller_is_rolled_back() {
    let store =
        Store::create_backend(Arc::new(MemBackend::new()), Path::new("f"), options()).unwrap();
    let answered = Arc::new(Mutex::new(false));
    let a = answered.clone();
    store.run_or_submit_with(
        Durability::Durable,
        |txn: &mut Txn| -> Result<(), Error> {
            put(txn, "lost", "x")?;
            panic!("a planned panic");
        },
        move |_: Result<(), Error>| *a.lock().unwrap() = true,
    );
    assert!(
        !*answered.lock().unwrap(),
        "a panicked update is not answered"
    );
    let seen = run_recorded(&store, Durability::Durable, "1");
    assert!(matches!(seen.lock().unwrap().answer, Some(Ok(()))));
    assert_eq!(
        keys(&store),
        ["k"],
        "the panicked update left nothing behind"
    );
}

/// Stores opened with clones of one set of options share one turn: while a caller commits
/// its own update in one of them, a caller of another queues for that store's writer. A
/// store with options of its own is not held up.
#[test]
fn stores_sharing_options_take_turns_at_caller_commits() {
    let shared = options();
    let a = Arc::new(
        Store::create_backend(Arc::new(MemBackend::new()), Path::new("a"), shared.clone()).unwrap(),
    );
    let b = Store::create_backend(Arc::new(MemBackend::new()), Path::new("b"), shared).unwrap();
    let c = Store::create_backend(Arc::new(MemBackend::new()), Path::new("c"), options()).unwrap();
    let (inside, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let (i, r, store) = (inside.clone(), release.clone(), a.clone());
    let holder = std::thread::spawn(move || {
        let ran_on = Arc::new(Mutex::new(None));
        let seen = ran_on.clone();
        store.run_or_submit_with(
            Durability::Durable,
            move |txn: &mut Txn| {
                *seen.lock().unwrap() = Some(std::thread::current().id());
                i.wait();
                r.wait();
                put(txn, "k", "a")
            },
            |answer: Result<(), Error>| answer.unwrap(),
        );
        let ran_on = *ran_on.lock().unwrap();
        ran_on == Some(std::thread::current().id())
    });
    inside.wait();
    let in_b = run_recorded(&b, Durability::Durable, "b");
    let b_waited = wait_answered(&in_b);
    let in_c = run_recorded(&c, Durability::Durable, "c");
    release.wait();
    assert!(
        holder.join().unwrap(),
        "the first caller committed on its own thread"
    );
    b_waited.unwrap();
    assert_ne!(
        in_b.lock().unwrap().ran_on,
        Some(std::thread::current().id()),
        "b's writer thread ran it"
    );
    assert_eq!(
        in_c.lock().unwrap().ran_on,
        Some(std::thread::current().id()),
        "c has a turn of its own"
    );
    assert_eq!(keys(&b), ["k"]);
}
