//! Small modifications are held until their group commits (src/held.rs). Against a
//! `BTreeMap` model: many updates queued behind a busy writer, so that they share one group,
//! some small and held, some large and applied at once, some reading their tree (point reads
//! through what is held, ranges and counts that apply it first), some failing after they
//! changed things, some asking for the replaced values (`modify`) and some not (`apply`).
//! Every value returned and every read inside an update, and the contents after the group
//! and after reopening, equal the model's. The same holds when the whole group is one
//! update made of attempts (`Txn::attempt`), some failing or panicking.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Barrier, Mutex};

use proptest::prelude::*;
use settee_store::{
    Action, Durability, Error, MemBackend, NodeCache, RangeOptions, SizeReduce, Store,
    StoreOptions, TreeSpec,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Read {
    Get(u8),
    Range,
    Count,
}

#[derive(Debug, Clone)]
struct Update {
    /// Key and new value (None: delete). More than 16 actions are applied at once.
    actions: Vec<(u8, Option<u8>)>,
    read: Option<Read>,
    /// Fails after modifying and reading, so that its changes must be undone.
    fails: bool,
    /// Asks for the replaced values (`modify`) or not (`apply`).
    wants_old: bool,
}

/// What an update closure returns when it fails on purpose.
#[derive(Debug)]
enum Outcome {
    Store(Error),
    Planned,
}

impl From<Error> for Outcome {
    fn from(e: Error) -> Outcome {
        Outcome::Store(e)
    }
}

fn key(k: u8) -> Vec<u8> {
    vec![b'k', k]
}

fn update() -> impl Strategy<Value = Update> {
    let actions = prop_oneof![
        4 => proptest::collection::vec((0u8..24, proptest::option::of(any::<u8>())), 1..5),
        1 => proptest::collection::vec((0u8..24, proptest::option::of(any::<u8>())), 17..40),
    ];
    let read = proptest::option::of(prop_oneof![
        (0u8..24).prop_map(Read::Get),
        Just(Read::Range),
        Just(Read::Count)
    ]);
    (actions, read, proptest::bool::weighted(0.2), any::<bool>()).prop_map(
        |(actions, read, fails, wants_old)| Update {
            actions,
            read,
            fails,
            wants_old,
        },
    )
}

fn options() -> StoreOptions {
    StoreOptions {
        trees: vec![TreeSpec::bytewise(SizeReduce)],
        cache: NodeCache::new(1 << 20),
        node_size: 256,
        ..StoreOptions::default()
    }
}

fn contents(store: &Store) -> Model {
    store
        .snapshot()
        .range(0, RangeOptions::default())
        .unwrap()
        .map(|e| e.map(|e| (e.key().to_vec(), e.value().to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}

/// What `read` answers on `model`, as text.
fn expected_read(read: &Read, model: &Model) -> String {
    match read {
        Read::Get(k) => format!("{:?}", model.get(&key(*k))),
        Read::Range => format!("{:?}", model.iter().collect::<Vec<_>>()),
        Read::Count => model.len().to_string(),
    }
}

/// The values keys had before each action, and a read's answer as text.
type Answer = (Vec<Option<Vec<u8>>>, String);

/// Runs `u` inside an update.
fn run(t: &mut settee_store::Txn, u: &Update) -> Result<Answer, Outcome> {
    let actions: Vec<Action> = u
        .actions
        .iter()
        .map(|&(k, v)| match v {
            Some(v) => Action::Put(key(k), vec![v]),
            None => Action::Delete(key(k)),
        })
        .collect();
    let old = if u.wants_old {
        t.modify(0, &actions)?
    } else {
        t.apply(0, &actions)?;
        Vec::new()
    };
    let read = match &u.read {
        None => String::new(),
        Some(Read::Get(k)) => format!(
            "{:?}",
            t.get(0, &key(*k))?.map(|e| e.value().to_vec()).as_ref()
        ),
        Some(Read::Range) => {
            let rows: Vec<(Vec<u8>, Vec<u8>)> = t
                .range(0, RangeOptions::default())?
                .map(|e| e.map(|e| (e.key().to_vec(), e.value().to_vec())))
                .collect::<Result<_, _>>()?;
            format!("{:?}", rows.iter().map(|(k, v)| (k, v)).collect::<Vec<_>>())
        }
        Some(Read::Count) => t.count(0)?.to_string(),
    };
    if u.fails {
        return Err(Outcome::Planned);
    }
    Ok((old, read))
}

/// What `u` returns when run on `model`; `model` takes its changes unless it fails.
fn expected(model: &mut Model, u: &Update) -> Answer {
    let mut after = model.clone();
    let old: Vec<Option<Vec<u8>>> = u
        .actions
        .iter()
        .map(|&(k, v)| {
            let was = after.get(&key(k)).cloned();
            match v {
                Some(v) => after.insert(key(k), vec![v]),
                None => after.remove(&key(k)),
            };
            was
        })
        .collect();
    let read = u
        .read
        .as_ref()
        .map_or(String::new(), |r| expected_read(r, &after));
    if !u.fails {
        *model = after;
    }
    (if u.wants_old { old } else { Vec::new() }, read)
}

/// A store that has committed `before` (so that a group starts from a tree with some
/// depth), its memory, and its contents.
fn store_after(before: Vec<Update>) -> (Arc<Store>, MemBackend, Model) {
    let backend = MemBackend::new();
    let store = Arc::new(
        Store::create_backend(Arc::new(backend.clone()), Path::new("held"), options()).unwrap(),
    );
    for u in before.into_iter().filter(|u| !u.fails) {
        store
            .update(Durability::Durable, move |t| run(t, &u).map(drop))
            .unwrap();
    }
    let model = contents(&store);
    (store, backend, model)
}

/// The contents after the group, and after reopening the durable bytes.
fn check_contents(store: Arc<Store>, backend: &MemBackend, model: &Model) {
    assert_eq!(&contents(&store), model, "after the group");
    drop(store);
    let reopened = Store::open_backend(
        Arc::new(MemBackend::from_bytes(backend.durable_bytes())),
        Path::new("held"),
        options(),
    )
    .unwrap();
    assert_eq!(&contents(&reopened), model, "after reopening");
}

fn check_group(before: Vec<Update>, group: Vec<Update>) {
    let (store, backend, mut model) = store_after(before);

    let (gate, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let (g, r) = (gate.clone(), release.clone());
    let blocker = store.submit(Durability::Durable, move |_| -> Result<(), Error> {
        g.wait();
        r.wait();
        Ok(())
    });
    gate.wait();
    let answers = Arc::new(Mutex::new(Vec::new()));
    let mut pending = Vec::new();
    let mut wanted = Vec::new();
    for (i, u) in group.into_iter().enumerate() {
        let (old, read) = expected(&mut model, &u);
        wanted.push((i, u.fails, old, read));
        let answers = answers.clone();
        pending.push(store.submit(Durability::Durable, move |t| {
            let outcome = run(t, &u);
            if let Ok(got) = &outcome {
                answers.lock().unwrap().push((i, got.clone()));
            }
            outcome.map(drop)
        }));
    }
    release.wait();
    blocker.wait().unwrap();
    for (p, (i, fails, ..)) in pending.into_iter().zip(&wanted) {
        match p.wait() {
            Ok(()) => assert!(!fails, "update {i} should have failed"),
            Err(Outcome::Planned) => assert!(fails, "update {i} failed unplanned"),
            Err(Outcome::Store(e)) => panic!("update {i}: {e}"),
        }
    }
    let answers = answers.lock().unwrap();
    for (i, got) in answers.iter() {
        let (_, _, old, read) = &wanted[*i];
        assert_eq!(&got.0, old, "old values returned to update {i}");
        assert_eq!(&got.1, read, "read inside update {i}");
    }
    check_contents(store, &backend, &model);
}

/// The whole group as one update, each of its updates an attempt (as gathered requests
/// are applied): a failing one returns an error or panics, and must leave no trace while
/// the attempts after it go on.
fn check_attempts(before: Vec<Update>, group: Vec<(Update, bool)>) {
    let (store, backend, mut model) = store_after(before);
    let wanted: Vec<(bool, bool, Answer)> = group
        .iter()
        .map(|(u, panics)| (u.fails, *panics, expected(&mut model, u)))
        .collect();
    let got = store
        .update(Durability::Durable, move |t| -> Result<Vec<_>, Error> {
            Ok(group
                .iter()
                .map(|(u, panics)| {
                    t.attempt(|t| {
                        let outcome = run(t, u);
                        if u.fails && *panics {
                            panic!("a planned panic");
                        }
                        outcome
                    })
                })
                .collect())
        })
        .unwrap();
    for (i, (outcome, (fails, panics, answer))) in got.into_iter().zip(&wanted).enumerate() {
        match outcome {
            Ok(Ok(got)) => {
                assert!(!fails, "attempt {i} should have failed");
                assert_eq!(&got, answer, "old values and read of attempt {i}");
            }
            Ok(Err(Outcome::Planned)) => assert!(*fails && !panics, "attempt {i} failed unplanned"),
            Ok(Err(Outcome::Store(e))) => panic!("attempt {i}: {e}"),
            Err(message) => assert!(
                *fails && *panics && message == "a planned panic",
                "attempt {i} panicked: {message}"
            ),
        }
    }
    check_contents(store, &backend, &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_group_of_held_and_applied_updates_equals_the_model(
        before in proptest::collection::vec(update(), 0..6),
        group in proptest::collection::vec(update(), 1..100),
    ) {
        check_group(before, group);
    }

    #[test]
    fn attempts_inside_one_update_fail_alone(
        before in proptest::collection::vec(update(), 0..6),
        group in proptest::collection::vec((update(), any::<bool>()), 1..60),
    ) {
        check_attempts(before, group);
    }
}
