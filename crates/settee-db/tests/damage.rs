//! A database whose shard file has one byte flipped, at every record of a small database in
//! turn (issue 26: one damaged record made the whole database unusable). Each time the
//! database opens; every document reads as it was written (its latest or an earlier
//! revision) or fails, and no more fail than the damaged record reached; the damage is
//! reported; writes go on, and what they acknowledge survives reopening.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Value};
use settee_db::{
    Catalog, CatalogOptions, DocLimits, DocOptions, Durability, EditMode, Error, NewDoc,
};
use settee_store::format::RecordKind;

fn doc(v: Value) -> NewDoc {
    NewDoc::from_json(v, None, || unreachable!(), &DocLimits::default()).unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Writes the small database: single writes (log records), updates, a bulk load (nodes),
/// large bodies (blobs) and deletions. Returns every body each id had, oldest first, and
/// whether it ends deleted.
fn build(dir: &Path) -> HashMap<String, (Vec<Value>, bool)> {
    let catalog = Catalog::open(dir, CatalogOptions::default()).unwrap();
    let db = catalog.create("small", Some(1)).unwrap();
    let rt = rt();
    let mut written: HashMap<String, (Vec<Value>, bool)> = HashMap::new();
    let mut revs = HashMap::new();
    let put = |id: String, body: Value, rev: Option<String>| {
        let mut v = body.clone();
        v["_id"] = json!(id);
        if let Some(r) = rev {
            v["_rev"] = json!(r);
        }
        rt.block_on(db.update(vec![doc(v)], EditMode::Interactive, Durability::Durable))
            .unwrap()
            .pop()
            .unwrap()
            .unwrap()
            .to_string()
    };
    for i in 0..150 {
        let id = format!("d{i:03}");
        // Some bodies large enough to be stored as blobs, on documents never updated.
        let body = if i % 10 == 3 {
            json!({"n": i, "v": 1, "pad": "x".repeat(2000)})
        } else {
            json!({"n": i, "v": 1})
        };
        revs.insert(id.clone(), put(id.clone(), body.clone(), None));
        written.insert(id, (vec![body], false));
    }
    for i in (0..150).step_by(5) {
        let id = format!("d{i:03}");
        let body = json!({"n": i, "v": 2});
        let rev = put(id.clone(), body.clone(), revs.get(&id).cloned());
        revs.insert(id.clone(), rev);
        written.get_mut(&id).unwrap().0.push(body);
    }
    let bulk: Vec<NewDoc> = (0..100)
        .map(|i| doc(json!({"_id": format!("e{i:03}"), "n": i, "v": 1})))
        .collect();
    for r in rt
        .block_on(db.update(bulk, EditMode::Interactive, Durability::Durable))
        .unwrap()
    {
        r.unwrap();
    }
    for i in 0..100 {
        written.insert(format!("e{i:03}"), (vec![json!({"n": i, "v": 1})], false));
    }
    for i in (1..150).step_by(15) {
        let id = format!("d{i:03}");
        let mut v = json!({"_id": id, "_rev": revs[&id], "_deleted": true});
        v["_deleted"] = json!(true);
        rt.block_on(db.update(vec![doc(v)], EditMode::Interactive, Durability::Durable))
            .unwrap()
            .pop()
            .unwrap()
            .unwrap();
        written.get_mut(&id).unwrap().1 = true;
    }
    db.flush().unwrap();
    written
}

/// Reads every document: how many could not be read as any body they had.
fn lost(
    db: &settee_db::Database,
    written: &HashMap<String, (Vec<Value>, bool)>,
    case: &str,
) -> usize {
    let mut lost = 0;
    for (id, (bodies, deleted)) in written {
        match db.snapshot().open_doc(id, None, &DocOptions::default()) {
            Ok(bytes) => {
                let mut got: Value = serde_json::from_slice(&bytes).unwrap();
                let obj = got.as_object_mut().unwrap();
                obj.remove("_id");
                obj.remove("_rev");
                assert!(
                    bodies.contains(&got),
                    "{case}: {id} read as {got}, which it never was"
                );
            }
            Err(Error::NotFound(_)) if *deleted => {}
            Err(_) => lost += 1,
        }
    }
    lost
}

/// Salvages the damaged database: afterwards every file checks out, whatever could be read
/// before is still there, what is missing was reported lost (by id range or id; the ids
/// of a damaged log record's changes are not known), the change feed lists exactly the
/// documents there are, and writes work.
fn salvage(
    data: &Path,
    written: &HashMap<String, (Vec<Value>, bool)>,
    reached: usize,
    log: bool,
    case: &str,
) {
    let dir = settee_db::database_dir(data, "small");
    let done = settee_db::salvage_database(&dir, &settee_store::StoreOptions::default()).unwrap();
    assert!(
        settee_db::check_database(&dir)
            .unwrap()
            .iter()
            .all(|f| f.scan.intact()),
        "{case}: salvaged files check out"
    );
    let reported: Vec<&settee_db::ShardSalvage> = done
        .iter()
        .filter_map(|(_, s)| match s {
            settee_db::Salvaged::Shard(r) => Some(r),
            settee_db::Salvaged::IndexDropped => None,
        })
        .collect();
    let catalog = Catalog::open(data, CatalogOptions::default()).unwrap();
    let db = catalog
        .get("small")
        .unwrap_or_else(|e| panic!("{case}: the salvaged database opens: {e}"));
    assert!(db.damage().is_empty(), "{case}: no damage left");
    let lost = lost(&db, written, case);
    assert!(lost <= reached, "{case}: {lost} lost after salvage");
    for (id, (_, deleted)) in written {
        if *deleted
            || db
                .snapshot()
                .open_doc(id, None, &DocOptions::default())
                .is_ok()
        {
            continue;
        }
        let listed = reported.iter().any(|r| {
            r.lost_docs.contains(id)
                || r.lost_ranges.iter().any(|(after, up_to, _)| {
                    after.as_ref().is_none_or(|a| a < id) && up_to.as_ref().is_none_or(|u| id <= u)
                })
                || (log && !r.damage.is_empty())
        });
        assert!(listed, "{case}: {id} is missing and was not reported lost");
    }
    let counts = db.snapshot().counts().unwrap();
    let changes = db
        .snapshot()
        .changes(
            &settee_db::SeqVector(vec![0]),
            settee_db::ChangesOptions::default(),
        )
        .unwrap()
        .count() as u64;
    assert_eq!(
        changes,
        counts.live + counts.deleted,
        "{case}: the change feed lists each document once"
    );
    let rt = rt();
    let w = rt
        .block_on(db.update(
            vec![doc(json!({"_id": "after-salvage"}))],
            EditMode::Interactive,
            Durability::Durable,
        ))
        .unwrap();
    assert!(w[0].is_ok(), "{case}: writes work after salvage");
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in walk(from) {
        let target = to.join(entry.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &target).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn one_flipped_byte_costs_only_what_its_record_reached() {
    let pristine = tempfile::tempdir().unwrap();
    let written = build(pristine.path());
    let shard = Path::new("dbs/small/shard-0.settee");
    let scan = settee_store::scan_file(&pristine.path().join(shard)).unwrap();
    assert!(scan.intact(), "the pristine file checks out");
    let kinds: Vec<_> = scan.records.iter().map(|r| r.kind).collect();
    for kind in [
        RecordKind::Leaf,
        RecordKind::Inner,
        RecordKind::Blob,
        RecordKind::Log,
    ] {
        assert!(
            kinds.contains(&Some(kind)),
            "the small database has {kind:?} records"
        );
    }
    let rt = rt();
    let mut cases = 0;
    for record in &scan.records {
        // The record's first byte (its length) and a byte of its payload.
        for at in [record.offset, record.offset + record.len / 2 + 4] {
            cases += 1;
            let case = format!(
                "{:?} record at {} ({} entries), byte {at}",
                record.kind, record.offset, record.entries
            );
            let dir = tempfile::tempdir().unwrap();
            copy_dir(pristine.path(), dir.path());
            let path = dir.path().join(shard);
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[at as usize] ^= 0x5a;
            std::fs::write(&path, &bytes).unwrap();
            assert!(
                !settee_store::scan_file(&path).unwrap().intact(),
                "{case}: the check finds it"
            );

            let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
            let db = catalog
                .get("small")
                .unwrap_or_else(|e| panic!("{case}: the database opens: {e}"));
            let lost = lost(&db, &written, &case);
            let reached = record.entries as usize;
            assert!(lost <= reached, "{case}: {lost} documents lost");
            if lost > 0 {
                assert!(!db.damage().is_empty(), "{case}: the damage is reported");
            }
            // Writes go on: a new document and an update of each kind of document.
            let node = matches!(record.kind, Some(RecordKind::Leaf | RecordKind::Inner));
            let fresh = rt.block_on(db.update(
                vec![doc(json!({"_id": "zz-new", "after": true}))],
                EditMode::Interactive,
                Durability::Durable,
            ));
            let acknowledged = match fresh {
                Ok(mut r) => r.pop().unwrap().is_ok(),
                Err(e) => {
                    assert!(node, "{case}: a write failed: {e}");
                    false
                }
            };
            drop(db);
            drop(catalog);
            let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
            let db = catalog
                .get("small")
                .unwrap_or_else(|e| panic!("{case}: the database opens again: {e}"));
            assert!(
                self::lost(&db, &written, &case) <= reached,
                "{case}: more lost after reopening"
            );
            if acknowledged {
                assert!(
                    db.snapshot()
                        .open_doc("zz-new", None, &DocOptions::default())
                        .is_ok(),
                    "{case}: an acknowledged write survives"
                );
            }
            drop(db);
            drop(catalog);
            salvage(
                dir.path(),
                &written,
                reached,
                record.kind == Some(RecordKind::Log),
                &case,
            );
        }
    }
    assert!(cases > 100, "{cases} cases");
}
