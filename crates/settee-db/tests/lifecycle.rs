//! Databases created, deleted, written, read, closed and reopened at once from many threads,
//! every acknowledged write checked against what the steps' times allow, before and after a
//! restart (issue 26: a database deleted while in use came back with its old documents, and
//! writes acknowledged to the "new" one were lost).
//!
//! Each step is timed on one clock (start, end). A write acknowledged at `[s, e]` to a name
//! must be there at the end if every successful deletion of that name ended before `s`, and
//! must be gone if one started after `e`; a write refused must never appear. Reads along the
//! way are checked by the same rule against the deletions begun so far.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use settee_db::{
    AllDocsOptions, Catalog, CatalogOptions, DocLimits, DocOptions, Durability, EditMode, Error,
    NewDoc,
};

const NAMES: [&str; 4] = ["a", "b", "c/d", "e"];
const THREADS: usize = 8;
const STEPS: usize = 600;

/// A deletion: when it started, and when it returned if it has.
struct Deletion {
    token: u64,
    start: u64,
    end: Option<u64>,
}

/// What happened, with times in nanoseconds since the start.
#[derive(Default)]
struct History {
    /// Deletions per name that succeeded or are under way.
    deletes: HashMap<&'static str, Vec<Deletion>>,
    /// Acknowledged writes: name, id, value, start, end.
    writes: Vec<(&'static str, String, u64, u64, u64)>,
    /// Writes refused because the database was missing: name and id.
    refused: Vec<(&'static str, String)>,
}

struct World {
    catalog: Catalog,
    epoch: Instant,
    history: Mutex<History>,
    ids: AtomicU64,
}

impl World {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Whether a write at `[start, end]` must be visible, must be gone, or may be either.
    fn expected(&self, name: &str, start: u64, end: u64) -> Option<bool> {
        self.history.lock().unwrap().expected(name, start, end)
    }
}

impl History {
    /// A write must be gone once a deletion that started after it has returned, and must be
    /// there if every deletion returned before it started.
    fn expected(&self, name: &str, start: u64, end: u64) -> Option<bool> {
        let deletes = self.deletes.get(name).map_or(&[][..], Vec::as_slice);
        if deletes.iter().any(|d| d.start > end && d.end.is_some()) {
            return Some(false);
        }
        if deletes.iter().all(|d| d.end.is_some_and(|e| e < start)) {
            return Some(true);
        }
        None
    }
}

fn new_doc(id: &str, v: u64) -> NewDoc {
    NewDoc::from_json(
        json!({"_id": id, "v": v}),
        None,
        || unreachable!(),
        &DocLimits::default(),
    )
    .unwrap()
}

/// Any error but the ones the step may meet fails the test.
fn allowed(step: &str, e: &Error, ok: &[fn(&Error) -> bool]) {
    assert!(ok.iter().any(|f| f(e)), "{step} failed unexpectedly: {e:?}");
}

fn no_database(e: &Error) -> bool {
    matches!(e, Error::NoDatabase)
}

fn exists(e: &Error) -> bool {
    matches!(e, Error::DatabaseExists)
}

fn create(world: &World, name: &'static str) {
    if let Err(e) = world.catalog.create(name, Some(2)) {
        allowed("create", &e, &[exists]);
    }
}

fn delete(world: &World, name: &'static str) {
    let token = world.ids.fetch_add(1, Ordering::Relaxed);
    // Recorded before it runs, so that reads meanwhile allow for it.
    let start = world.now();
    world
        .history
        .lock()
        .unwrap()
        .deletes
        .entry(name)
        .or_default()
        .push(Deletion {
            token,
            start,
            end: None,
        });
    let result = world.catalog.delete(name);
    let end = world.now();
    let mut h = world.history.lock().unwrap();
    let list = h.deletes.get_mut(name).unwrap();
    match result {
        Ok(()) => list.iter_mut().find(|d| d.token == token).unwrap().end = Some(end),
        Err(e) => {
            allowed("delete", &e, &[no_database]);
            list.retain(|d| d.token != token);
        }
    }
}

fn write(world: &World, rt: &tokio::runtime::Runtime, name: &'static str) {
    let n = world.ids.fetch_add(1, Ordering::Relaxed);
    let id = format!("doc{n:06}");
    let start = world.now();
    let result = world.catalog.get(name).and_then(|db| {
        rt.block_on(db.update(
            vec![new_doc(&id, n)],
            EditMode::Interactive,
            Durability::Durable,
        ))
    });
    let end = world.now();
    match result {
        Ok(mut answers) => {
            answers.pop().unwrap().expect("a new id cannot conflict");
            world
                .history
                .lock()
                .unwrap()
                .writes
                .push((name, id, n, start, end));
        }
        Err(e) => {
            allowed("write", &e, &[no_database]);
            world.history.lock().unwrap().refused.push((name, id));
        }
    }
}

/// Reads a write acknowledged earlier and checks it against the deletions begun so far.
fn read(world: &World, rng: &mut impl Rng, name: &'static str) {
    let Some((id, v, s, e)) = ({
        let h = world.history.lock().unwrap();
        let mine: Vec<_> = h.writes.iter().filter(|w| w.0 == name).collect();
        (!mine.is_empty()).then(|| {
            let w = mine[rng.gen_range(0..mine.len())];
            (w.1.clone(), w.2, w.3, w.4)
        })
    }) else {
        return;
    };
    // Taken before the read, so that a deletion that starts meanwhile makes it uncertain.
    let expect_before = world.expected(name, s, e);
    let found = match world.catalog.get(name) {
        Ok(db) => match db.snapshot().open_doc(&id, None, &DocOptions::default()) {
            Ok(body) => Some(serde_json::from_slice::<Value>(&body).unwrap()),
            Err(Error::NotFound(_)) => None,
            Err(e) => panic!("read failed unexpectedly: {e:?}"),
        },
        Err(e) => {
            allowed("open", &e, &[no_database]);
            None
        }
    };
    let expect_after = world.expected(name, s, e);
    if let Some(body) = &found {
        assert_eq!(body["v"], v, "{name}/{id}");
    }
    if expect_before == Some(true) && expect_after == Some(true) {
        assert!(
            found.is_some(),
            "{name}/{id}, acknowledged and not deleted since, could not be read"
        );
    }
    if expect_before == Some(false) {
        assert!(
            found.is_none(),
            "{name}/{id} was read after its database was deleted"
        );
    }
}

/// Holds a snapshot across other steps, as a streaming reader does, so closing must wait.
fn hold(world: &World, name: &'static str) {
    if let Ok(db) = world.catalog.get(name) {
        let snap = db.snapshot();
        drop(db);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let _ = snap.seq().unwrap();
    }
}

fn run_steps(world: &World, seed: u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for _ in 0..STEPS {
        let name = NAMES[rng.gen_range(0..NAMES.len())];
        match rng.gen_range(0..100) {
            0..=9 => create(world, name),
            10..=15 => delete(world, name),
            16..=65 => write(world, &rt, name),
            66..=90 => read(world, &mut rng, name),
            _ => hold(world, name),
        }
    }
}

/// The documents of every database there now.
fn contents(catalog: &Catalog) -> HashMap<(String, String), Value> {
    let mut out = HashMap::new();
    for name in catalog.list().unwrap() {
        let db = catalog.get(&name).unwrap();
        let rows = db
            .snapshot()
            .all_docs(AllDocsOptions {
                include_docs: true,
                ..Default::default()
            })
            .unwrap();
        for row in rows {
            let row = row.unwrap();
            out.insert(
                (name.clone(), row.id),
                serde_json::from_slice(&row.doc.unwrap()).unwrap(),
            );
        }
    }
    out
}

fn check(world: &World, catalog: &Catalog, when: &str) {
    let found = contents(catalog);
    let h = world.history.lock().unwrap();
    let mut must = 0;
    for (name, id, v, s, e) in &h.writes {
        let here = found.get(&(name.to_string(), id.clone()));
        match h.expected(name, *s, *e) {
            Some(true) => {
                must += 1;
                assert_eq!(
                    here.map(|d| &d["v"]),
                    Some(&json!(v)),
                    "{when}: acknowledged write {name}/{id} lost"
                );
            }
            Some(false) => assert!(
                here.is_none(),
                "{when}: {name}/{id} outlived the deletion of its database"
            ),
            None => {
                if let Some(d) = here {
                    assert_eq!(d["v"], *v);
                }
            }
        }
    }
    for (name, id) in &h.refused {
        assert!(
            !found.contains_key(&(name.to_string(), id.clone())),
            "{when}: refused write {name}/{id} is there"
        );
    }
    let acked: std::collections::HashSet<_> = h
        .writes
        .iter()
        .map(|w| (w.0.to_string(), w.1.clone()))
        .collect();
    for key in found.keys() {
        assert!(acked.contains(key), "{when}: {key:?} was never written");
    }
    assert!(must > 0, "the run should leave writes that must survive");
}

#[test]
fn databases_created_deleted_written_and_closed_at_once_keep_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    // Fewer open databases allowed than names, so the catalog closes and reopens them.
    let options = CatalogOptions {
        max_dbs_open: 2,
        ..Default::default()
    };
    let world = Arc::new(World {
        catalog: Catalog::open(dir.path(), options.clone()).unwrap(),
        epoch: Instant::now(),
        history: Mutex::default(),
        ids: AtomicU64::new(0),
    });
    for name in NAMES {
        world.catalog.create(name, Some(2)).unwrap();
    }
    let threads: Vec<_> = (0..THREADS as u64)
        .map(|t| {
            let world = world.clone();
            std::thread::spawn(move || run_steps(&world, 0x5eed_0000 + t))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Then every name is written once more, after every deletion: these writes must last.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for name in NAMES {
        create(&world, name);
        write(&world, &rt, name);
    }
    check(&world, &world.catalog, "before restart");
    let world = Arc::into_inner(world).expect("every thread is done");
    let World {
        catalog,
        epoch,
        history,
        ids,
    } = world;
    drop(catalog);
    let reopened = Catalog::open(dir.path(), options).unwrap();
    let world = World {
        catalog: reopened,
        epoch,
        history,
        ids,
    };
    check(&world, &world.catalog, "after restart");
}

#[test]
fn concurrent_creations_of_one_name_make_one_database() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Arc::new(
            Catalog::open(
                dir.path(),
                CatalogOptions {
                    max_dbs_open: 1,
                    ..Default::default()
                },
            )
            .unwrap(),
        );
        let name = format!("new{round}");
        let threads: Vec<_> = (0..6)
            .map(|i| {
                let (catalog, name) = (catalog.clone(), name.clone());
                std::thread::spawn(move || {
                    // Half create, half open as soon as it is there: none may see a database
                    // half made or open it twice.
                    if i % 2 == 0 {
                        return catalog.create(&name, None).map(|_| true);
                    }
                    let deadline = Instant::now() + std::time::Duration::from_secs(5);
                    loop {
                        match catalog.get(&name) {
                            Err(Error::NoDatabase) if Instant::now() < deadline => {
                                std::thread::yield_now()
                            }
                            other => return other.map(|_| false),
                        }
                    }
                })
            })
            .collect();
        let mut created = 0;
        for t in threads {
            match t.join().unwrap() {
                Ok(true) => created += 1,
                Ok(false) | Err(Error::DatabaseExists) | Err(Error::NoDatabase) => {}
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert_eq!(created, 1, "exactly one creator succeeds");
        assert!(catalog.get(&name).is_ok());
    }
}

/// A handle taken before its database was deleted neither writes nor compacts, and the
/// database made again under the name knows nothing of it.
#[test]
fn a_handle_to_a_deleted_database_writes_and_compacts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let old = catalog.create("x", Some(1)).unwrap();
    rt.block_on(old.update(
        vec![new_doc("before", 1)],
        EditMode::Interactive,
        Durability::Durable,
    ))
    .unwrap();
    catalog.delete("x").unwrap();
    let new = catalog.create("x", Some(1)).unwrap();
    assert!(old.is_deleted() && !new.is_deleted());
    let late = rt.block_on(old.update(
        vec![new_doc("late", 2)],
        EditMode::Interactive,
        Durability::Durable,
    ));
    assert!(matches!(late, Err(Error::NoDatabase)), "{late:?}");
    assert!(
        !old.start_compaction(),
        "a deleted database does not compact"
    );
    assert!(
        new.snapshot()
            .open_doc("before", None, &DocOptions::default())
            .is_err(),
        "the new database starts empty"
    );
    assert!(new.start_compaction());
}
