//! The database layer end to end on real files: edits, conflicts, history, feeds, reopening.

use std::collections::HashSet;

use serde_json::{json, Value};
use settee_db::{
    AllDocsOptions, Catalog, CatalogOptions, ChangesOptions, DocLimits, DocOptions, Durability,
    EditMode, Error, NewDoc, SeqVector,
};
use settee_json::Rev;

fn doc(v: Value) -> NewDoc {
    NewDoc::from_json(v, None, || "generated".into(), &DocLimits::default()).unwrap()
}

async fn put(db: &settee_db::Database, v: Value) -> Result<Rev, Error> {
    db.update(vec![doc(v)], EditMode::Interactive, Durability::Durable)
        .await
        .unwrap()
        .pop()
        .unwrap()
}

fn get(db: &settee_db::Database, id: &str) -> Result<Value, Error> {
    db.snapshot()
        .open_doc(id, None, &DocOptions::default())
        .map(|b| serde_json::from_slice(&b).unwrap())
}

#[tokio::test]
async fn edits_follow_couchdb_revision_rules() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.create("people", None).unwrap();
    assert!(matches!(
        catalog.create("people", None),
        Err(Error::DatabaseExists)
    ));

    let r1 = put(&db, json!({"_id": "ann", "age": 30})).await.unwrap();
    assert_eq!(r1.pos, 1);
    assert_eq!(
        get(&db, "ann").unwrap(),
        json!({"_id": "ann", "_rev": r1.to_string(), "age": 30})
    );
    assert!(
        matches!(
            put(&db, json!({"_id": "ann", "age": 31})).await,
            Err(Error::Conflict)
        ),
        "no rev on a live doc"
    );
    let r2 = put(
        &db,
        json!({"_id": "ann", "_rev": r1.to_string(), "age": 31}),
    )
    .await
    .unwrap();
    assert_eq!(r2.pos, 2);
    assert!(
        matches!(
            put(
                &db,
                json!({"_id": "ann", "_rev": r1.to_string(), "age": 32})
            )
            .await,
            Err(Error::Conflict)
        ),
        "stale rev"
    );
    // The same edit on the same parent gives the same revision id.
    let other = catalog.create("other", None).unwrap();
    assert_eq!(
        put(&other, json!({"_id": "ann", "age": 30})).await.unwrap(),
        r1
    );

    let r3 = put(
        &db,
        json!({"_id": "ann", "_rev": r2.to_string(), "_deleted": true}),
    )
    .await
    .unwrap();
    assert!(matches!(get(&db, "ann"), Err(Error::NotFound("deleted"))));
    let tomb: Value = serde_json::from_slice(
        &db.snapshot()
            .open_doc("ann", Some(&r3), &DocOptions::default())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(tomb["_deleted"], true);
    // Recreating a deleted document continues its history.
    let r4 = put(&db, json!({"_id": "ann", "back": true})).await.unwrap();
    assert_eq!(r4.pos, 4);
    let with_revs: Value = serde_json::from_slice(
        &db.snapshot()
            .open_doc(
                "ann",
                None,
                &DocOptions {
                    revs: true,
                    revs_info: true,
                    ..Default::default()
                },
            )
            .unwrap(),
    )
    .unwrap();
    assert_eq!(with_revs["_revisions"]["start"], 4);
    assert_eq!(with_revs["_revisions"]["ids"].as_array().unwrap().len(), 4);
    assert_eq!(with_revs["_revs_info"][1]["status"], "deleted");
    assert!(matches!(
        get(&db, "nobody"),
        Err(Error::NotFound("missing"))
    ));
}

#[tokio::test]
async fn replicated_edits_make_conflicts_and_a_deterministic_winner() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.create("r", Some(1)).unwrap();
    let base = put(&db, json!({"_id": "d", "v": 0})).await.unwrap();
    let branch = |id: &str, v: i64| {
        doc(
            json!({"_id": "d", "v": v, "_revisions": {"start": 2, "ids": [id, base.id.to_string()]}}),
        )
    };
    let results = db
        .update(
            vec![branch("aaaa", 1), branch("bbbb", 2), branch("aaaa", 1)],
            EditMode::Replicated,
            Durability::Durable,
        )
        .await
        .unwrap();
    assert!(results.iter().all(Result::is_ok));
    let doc: Value = serde_json::from_slice(
        &db.snapshot()
            .open_doc(
                "d",
                None,
                &DocOptions {
                    conflicts: true,
                    ..Default::default()
                },
            )
            .unwrap(),
    )
    .unwrap();
    assert_eq!(doc["_rev"], "2-bbbb", "the higher revision id wins");
    assert_eq!(doc["_conflicts"], json!(["2-aaaa"]));
    // Deleting the winner lets the other branch win.
    put(&db, json!({"_id": "d", "_rev": "2-bbbb", "_deleted": true}))
        .await
        .unwrap();
    assert_eq!(get(&db, "d").unwrap()["_rev"], "2-aaaa");
    let seq = db.snapshot().seq().unwrap();
    assert_eq!(
        seq.total(),
        4,
        "create, two branches, delete: the repeated branch took no sequence"
    );
}

#[tokio::test]
async fn all_docs_and_changes_merge_shards_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.create("many", Some(3)).unwrap();
    let docs: Vec<NewDoc> = (0..200)
        .map(|i| doc(json!({"_id": format!("doc{i:03}"), "i": i})))
        .collect();
    let results = db
        .update(docs, EditMode::Interactive, Durability::Durable)
        .await
        .unwrap();
    assert!(results.iter().all(Result::is_ok));
    put(&db, json!({"_id": "doc005", "_rev": results[5].as_ref().unwrap().to_string(), "_deleted": true})).await.unwrap();

    let snap = db.snapshot();
    assert_eq!(snap.counts().unwrap().live, 199);
    let ids: Vec<String> = snap
        .all_docs(AllDocsOptions::default())
        .unwrap()
        .map(|r| r.unwrap().id)
        .collect();
    let mut want: Vec<String> = (0..200)
        .filter(|&i| i != 5)
        .map(|i| format!("doc{i:03}"))
        .collect();
    assert_eq!(ids, want);
    let page: Vec<String> = snap
        .all_docs(AllDocsOptions {
            start: Some("doc010".into()),
            end: Some("doc003".into()),
            descending: true,
            skip: 2,
            limit: Some(3),
            inclusive_end: true,
            ..Default::default()
        })
        .unwrap()
        .map(|r| r.unwrap().id)
        .collect();
    assert_eq!(page, ["doc008", "doc007", "doc006"]);
    assert_eq!(snap.offset_of(Some("doc010"), false).unwrap(), 9);
    assert_eq!(
        snap.live_between("doc000", "doc010").unwrap(),
        9,
        "doc005 is deleted"
    );
    assert_eq!(snap.live_between("doc1", "doc2").unwrap(), 100);
    assert_eq!(snap.live_between("_design/", "_design0").unwrap(), 0);

    // Changes: every document once, latest edit last; resuming from any row's seq.
    let all: Vec<_> = snap
        .changes(&SeqVector::zero(3), ChangesOptions::default())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(all.len(), 200);
    assert!(all.iter().any(|r| r.id == "doc005" && r.deleted));
    for cut in [0, 17, 150, 199] {
        let rest: HashSet<String> = snap
            .changes(&all[cut].seq, ChangesOptions::default())
            .unwrap()
            .map(|r| r.unwrap().id)
            .collect();
        let want: HashSet<String> = all[cut + 1..].iter().map(|r| r.id.clone()).collect();
        assert_eq!(rest, want, "resume after row {cut}");
        let encoded = SeqVector::parse(&all[cut].seq.encode(), 3).unwrap();
        assert_eq!(encoded, all[cut].seq);
    }
    assert_eq!(snap.pending(&all[150].seq).unwrap(), 49);
    let only: Vec<_> = snap
        .changes(
            &SeqVector::zero(3),
            ChangesOptions {
                doc_ids: Some(["doc001".to_string()].into()),
                include_docs: true,
                ..Default::default()
            },
        )
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(only.len(), 1);
    assert_eq!(
        serde_json::from_slice::<Value>(only[0].doc.as_ref().unwrap()).unwrap()["i"],
        1
    );

    // Everything survives a reopen.
    let seq = snap.seq().unwrap();
    drop((snap, db, catalog));
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.get("many").unwrap();
    assert_eq!(db.snapshot().seq().unwrap(), seq);
    want.truncate(3);
    let ids: Vec<String> = db
        .snapshot()
        .all_docs(AllDocsOptions {
            limit: Some(3),
            ..Default::default()
        })
        .unwrap()
        .map(|r| r.unwrap().id)
        .collect();
    assert_eq!(ids, want);
}

#[tokio::test]
async fn local_documents_count_their_writes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.create("l", None).unwrap();
    let r = put(&db, json!({"_id": "_local/cp", "seq": 1}))
        .await
        .unwrap();
    assert_eq!(r.to_string(), "0-1");
    // Local documents never conflict: no revision counts as 0, so this writes 0-1 again.
    let r = put(&db, json!({"_id": "_local/cp", "seq": 9}))
        .await
        .unwrap();
    assert_eq!(r.to_string(), "0-1");
    assert_eq!(
        db.snapshot().local("_local/cp").unwrap().unwrap(),
        (1, br#"{"seq":9}"#.to_vec())
    );
    let r = put(&db, json!({"_id": "_local/cp", "_rev": "0-1", "seq": 2}))
        .await
        .unwrap();
    assert_eq!(r.to_string(), "0-2");
    assert_eq!(
        db.snapshot().local("_local/cp").unwrap().unwrap(),
        (2, br#"{"seq":2}"#.to_vec())
    );
    assert_eq!(
        db.snapshot().seq().unwrap().total(),
        0,
        "local docs take no sequence"
    );
    let r = put(
        &db,
        json!({"_id": "_local/cp", "_rev": "0-2", "_deleted": true}),
    )
    .await
    .unwrap();
    assert_eq!(r.to_string(), "0-0");
    assert!(db.snapshot().local("_local/cp").unwrap().is_none());
}

#[tokio::test]
async fn catalog_lists_deletes_and_bounds_open_databases() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(
        dir.path(),
        CatalogOptions {
            max_dbs_open: 3,
            ..Default::default()
        },
    )
    .unwrap();
    for i in 0..10 {
        let db = catalog.create(&format!("db{i}/x"), Some(1)).unwrap();
        put(&db, json!({"_id": "a"})).await.unwrap();
    }
    assert!(catalog.open_count() <= 3, "{} open", catalog.open_count());
    assert_eq!(catalog.list().unwrap().len(), 10);
    assert_eq!(catalog.list().unwrap()[0], "db0/x");
    let db = catalog.get("db0/x").unwrap();
    assert!(get(&db, "a").is_ok(), "reopened transparently");
    catalog.delete("db3/x").unwrap();
    assert!(matches!(catalog.get("db3/x"), Err(Error::NoDatabase)));
    assert!(matches!(catalog.delete("db3/x"), Err(Error::NoDatabase)));
    assert!(matches!(
        catalog.create("Bad", None),
        Err(Error::IllegalDatabaseName(_))
    ));
    assert_eq!(catalog.list().unwrap().len(), 9);
}

#[tokio::test]
async fn attachments_are_stored_stubbed_and_carried_forward() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.create("a", None).unwrap();
    let text = "hello world ".repeat(50);
    let b64 = settee_json_b64(text.as_bytes());
    let r1 = put(&db, json!({"_id": "d", "_attachments": {"t.txt": {"content_type": "text/plain", "data": b64}, "b.bin": {"content_type": "image/png", "data": "AAEC"}}})).await.unwrap();
    let doc = get(&db, "d").unwrap();
    let t = &doc["_attachments"]["t.txt"];
    assert_eq!(
        (t["stub"].clone(), t["revpos"].clone(), t["length"].clone()),
        (json!(true), json!(1), json!(text.len()))
    );
    assert!(t["digest"].as_str().unwrap().starts_with("md5-"));
    // A stub keeps the attachment and its revpos; data replaces it.
    let r2 = put(&db, json!({"_id": "d", "_rev": r1.to_string(), "x": 1, "_attachments": {"t.txt": {"stub": true}, "b.bin": {"content_type": "image/png", "data": "AwQ="}}})).await.unwrap();
    let doc = get(&db, "d").unwrap();
    assert_eq!(doc["_attachments"]["t.txt"]["revpos"], 1);
    assert_eq!(doc["_attachments"]["b.bin"]["revpos"], 2);
    let snap = db.snapshot();
    let att = snap.attachment("d", None, "t.txt").unwrap();
    assert_eq!(
        att.encoding,
        settee_db::Encoding::Gzip,
        "text is stored compressed"
    );
    assert_eq!(snap.attachment_bytes("d", &att).unwrap(), text.as_bytes());
    let full: Value = serde_json::from_slice(
        &snap
            .open_doc(
                "d",
                None,
                &DocOptions {
                    attachments: true,
                    ..Default::default()
                },
            )
            .unwrap(),
    )
    .unwrap();
    assert_eq!(full["_attachments"]["b.bin"]["data"], "AwQ=");
    assert_eq!(full["_attachments"]["t.txt"]["data"], b64);
    let since: Value = serde_json::from_slice(
        &snap
            .open_doc(
                "d",
                None,
                &DocOptions {
                    attachments: true,
                    atts_since: Some(vec![r1.clone()]),
                    ..Default::default()
                },
            )
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        since["_attachments"]["t.txt"]["stub"], true,
        "unchanged since r1"
    );
    assert_eq!(since["_attachments"]["b.bin"]["data"], "AwQ=");
    // The old revision still has its own attachment bytes.
    let old = snap.attachment("d", Some(&r1), "b.bin").unwrap();
    assert_eq!(snap.attachment_bytes("d", &old).unwrap(), [0, 1, 2]);
    // A stub for something the parent lacks is refused; an edit without _attachments drops them.
    assert!(matches!(
        put(
            &db,
            json!({"_id": "d", "_rev": r2.to_string(), "_attachments": {"nope": {"stub": true}}})
        )
        .await,
        Err(Error::MissingStub(..))
    ));
    put(&db, json!({"_id": "d", "_rev": r2.to_string()}))
        .await
        .unwrap();
    assert!(get(&db, "d").unwrap().get("_attachments").is_none());
    // Compaction copies the attachments of current revisions.
    let keep = put(&db, json!({"_id": "k", "_attachments": {"big": {"content_type": "image/png", "data": settee_json_b64(&vec![5u8; 3 << 20])}}})).await.unwrap();
    assert!(db.start_compaction());
    while db.compact_running() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let snap = db.snapshot();
    let att = snap.attachment("k", Some(&keep), "big").unwrap();
    assert_eq!(att.chunks.len(), 3);
    assert_eq!(
        snap.attachment_bytes("k", &att).unwrap(),
        vec![5u8; 3 << 20]
    );
    // Attachments change the revision id.
    let plain = put(&db, json!({"_id": "e"})).await.unwrap();
    let with = put(
        &db,
        json!({"_id": "f", "_attachments": {"a": {"data": "AA=="}}}),
    )
    .await
    .unwrap();
    assert_ne!(plain.id, with.id);
}

fn settee_json_b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A document updated many times keeps every superseded body readable by revision until
/// compaction, but its record holds only pointers to them, so reading and updating it stays
/// cheap however long its history.
#[tokio::test]
async fn superseded_bodies_leave_the_record_but_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.create("h", Some(1)).unwrap();
    let text = "x".repeat(500);
    let mut revs = vec![put(&db, json!({"_id": "d", "n": 0, "text": text}))
        .await
        .unwrap()];
    for n in 1..60 {
        revs.push(
            put(
                &db,
                json!({"_id": "d", "_rev": revs.last().unwrap().to_string(), "n": n, "text": text}),
            )
            .await
            .unwrap(),
        );
    }
    let snap = db.snapshot();
    let record = snap.record("d").unwrap().unwrap();
    assert_eq!(record.tree.nodes.len(), 60);
    let inline: Vec<usize> = (0..60)
        .filter(|&i| {
            matches!(
                record.tree.nodes[i].info.as_ref().map(|i| &i.body),
                Some(settee_db::Body::Inline(_))
            )
        })
        .collect();
    assert_eq!(
        inline,
        [record.tree.winner().unwrap()],
        "only the current revision's body is inline"
    );
    assert!(
        record.encode().len() < 60 * 100,
        "the record holds pointers, not 60 bodies: {} bytes",
        record.encode().len()
    );
    for (n, rev) in revs.iter().enumerate() {
        let old: Value = serde_json::from_slice(
            &snap
                .open_doc("d", Some(rev), &DocOptions::default())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            (old["n"].as_u64(), old["text"].as_str()),
            (Some(n as u64), Some(text.as_str()))
        );
    }
    assert_eq!(get(&db, "d").unwrap()["n"], 59);
    // Compaction drops the superseded bodies, as in CouchDB.
    assert!(db.start_compaction());
    while db.compact_running() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(matches!(
        db.snapshot()
            .open_doc("d", Some(&revs[3]), &DocOptions::default()),
        Err(Error::NotFound("missing"))
    ));
    assert_eq!(get(&db, "d").unwrap()["n"], 59);
}

/// Revision ids worked out ahead of the writer are the ones it would work out itself,
/// including when the writer edits another parent than the client named (a deleted
/// document made again) and when the edit has attachments.
#[tokio::test]
async fn revisions_worked_out_ahead_are_the_writers() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let (ahead, plain) = (
        catalog.create("ahead", None).unwrap(),
        catalog.create("plain", None).unwrap(),
    );
    let both = |v: Value| {
        let (ahead, plain) = (&ahead, &plain);
        async move {
            let mut early = doc(v.clone());
            early.presume_rev();
            let a = ahead
                .update(vec![early], EditMode::Interactive, Durability::Durable)
                .await
                .unwrap()
                .pop()
                .unwrap();
            let p = plain
                .update(vec![doc(v)], EditMode::Interactive, Durability::Durable)
                .await
                .unwrap()
                .pop()
                .unwrap();
            match (a, p) {
                (Ok(a), Ok(p)) => {
                    assert_eq!(a, p);
                    Some(a.to_string())
                }
                (Err(Error::Conflict), Err(Error::Conflict)) => None,
                (a, p) => panic!("{a:?} against {p:?}"),
            }
        }
    };
    let r1 = both(json!({"_id": "d", "n": 1})).await.unwrap();
    let r2 = both(json!({"_id": "d", "_rev": r1, "n": 2})).await.unwrap();
    assert_eq!(
        both(json!({"_id": "d", "_rev": r1, "n": 3})).await,
        None,
        "a stale parent"
    );
    let r3 = both(json!({"_id": "d", "_rev": r2, "_deleted": true}))
        .await
        .unwrap();
    let r4 = both(json!({"_id": "d", "n": 4})).await.unwrap();
    assert!(
        r4.starts_with("4-"),
        "made again on top of its tombstone {r3}: {r4}"
    );
    let r5 = both(json!({"_id": "d", "_rev": r4, "_attachments": {"a.txt": {"content_type": "text/plain", "data": "aGk="}}})).await.unwrap();
    both(json!({"_id": "d", "_rev": r5, "_attachments": {"a.txt": {"stub": true}}, "n": 6}))
        .await
        .unwrap();
}

/// Batches written with their new documents' records worked out ahead store what batches
/// written without them store, byte for byte, in every case the writer meets: new ids, ids
/// that exist, ids made again after deletion, an id twice in one batch, tombstones, design
/// documents, bodies too big to keep inline.
#[tokio::test]
async fn new_documents_worked_out_ahead_store_what_the_writer_would() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let (ahead, plain) = (
        catalog.create("ahead", None).unwrap(),
        catalog.create("plain", None).unwrap(),
    );
    let batch = |docs: Vec<Value>| {
        let (ahead, plain) = (&ahead, &plain);
        async move {
            let early = docs.iter().map(|v| {
                let mut d = doc(v.clone());
                d.presume_rev();
                // Worked out ahead exactly for a new id's small body without attachments.
                let eligible = v.get("_rev").is_none()
                    && v.get("_attachments").is_none()
                    && d.body.len() <= 768;
                assert_eq!(d.worked_out_ahead(), eligible, "{v}");
                d
            });
            let a = ahead
                .update(early.collect(), EditMode::Interactive, Durability::Durable)
                .await
                .unwrap();
            let p = plain
                .update(
                    docs.into_iter().map(doc).collect(),
                    EditMode::Interactive,
                    Durability::Durable,
                )
                .await
                .unwrap();
            let show = |r: Vec<Result<Rev, Error>>| {
                r.into_iter()
                    .map(|r| r.map(|r| r.to_string()).map_err(|e| format!("{e:?}")))
                    .collect::<Vec<_>>()
            };
            let (a, p) = (show(a), show(p));
            assert_eq!(a, p);
            a
        }
    };
    let big = "x".repeat(2000);
    let first = batch(vec![
        json!({"_id": "a", "n": 1}),
        json!({"_id": "b"}),
        json!({"_id": "_design/d", "views": {}}),
        json!({"_id": "gone", "_deleted": true}),
        json!({"_id": "big", "text": big}),
    ])
    .await;
    assert!(first.iter().all(Result::is_ok), "{first:?}");
    let a1 = first[0].clone().unwrap();
    // The same new id twice in a batch, then edited within it; an existing id without a rev.
    let second = batch(vec![
        json!({"_id": "c", "n": 1}),
        json!({"_id": "c", "n": 2}),
        json!({"_id": "a", "n": 9}),
        json!({"_id": "e", "n": 1}),
    ])
    .await;
    assert!(
        second[0].is_ok() && second[1].is_err() && second[2].is_err() && second[3].is_ok(),
        "{second:?}"
    );
    let c1 = second[0].clone().unwrap();
    let third = batch(vec![
        json!({"_id": "f"}),
        json!({"_id": "c", "_rev": c1, "n": 3}),
        json!({"_id": "a", "_rev": a1, "_deleted": true}),
        json!({"_id": "f", "_rev": "1-x"}),
    ])
    .await;
    assert!(
        third[0].is_ok() && third[1].is_ok() && third[2].is_ok() && third[3].is_err(),
        "{third:?}"
    );
    let fourth = batch(vec![
        json!({"_id": "a", "back": true}),
        json!({"_id": "gone", "back": true}),
    ])
    .await;
    assert!(
        fourth.iter().all(|r| r
            .as_ref()
            .is_ok_and(|r| r.starts_with("3-") || r.starts_with("2-"))),
        "made again on their tombstones: {fourth:?}"
    );
    // In one batch: a new id edited on top of its first revision, deleted, made again; a
    // failed edit of an id before its first revision; bodies at the inline limit and past
    // it; an attachment. The first revision's id comes from a scratch database.
    let scratch = catalog.create("scratch", None).unwrap();
    let h1 = put(&scratch, json!({"_id": "h"}))
        .await
        .unwrap()
        .to_string();
    for db in [&ahead, &plain] {
        db.update_meta(|m| m.revs_limit = 1).await.unwrap();
    }
    let at_limit = |id: &str, n: usize| json!({"_id": id, "t": "x".repeat(n)});
    let fifth = batch(vec![
        json!({"_id": "h"}),
        json!({"_id": "h", "_rev": h1, "n": 2}),
        json!({"_id": "g", "_rev": "1-x"}),
        json!({"_id": "g"}),
        at_limit("inline", 768 - 8),
        at_limit("blob", 769 - 8),
        json!({"_id": "att", "_attachments": {"a.txt": {"content_type": "text/plain", "data": "aGk="}}}),
    ])
    .await;
    assert!(
        fifth[0].is_ok()
            && fifth[1].as_ref().is_ok_and(|r| r.starts_with("2-"))
            && fifth[2].is_err()
            && fifth[3..].iter().all(Result::is_ok),
        "{fifth:?}"
    );
    let h2 = fifth[1].clone().unwrap();
    let sixth = batch(vec![
        json!({"_id": "h", "_rev": h2, "_deleted": true}),
        json!({"_id": "h", "again": true}),
        json!({"_id": "k", "_deleted": true}),
    ])
    .await;
    assert!(sixth.iter().all(Result::is_ok), "{sixth:?}");

    let (sa, sp) = (ahead.snapshot(), plain.snapshot());
    for id in [
        "a",
        "b",
        "c",
        "e",
        "f",
        "gone",
        "big",
        "_design/d",
        "h",
        "g",
        "inline",
        "blob",
        "att",
        "k",
    ] {
        assert_eq!(sa.record(id).unwrap(), sp.record(id).unwrap(), "{id}");
    }
    assert_eq!(sa.counts().unwrap(), sp.counts().unwrap());
    assert_eq!(sa.design_changes().unwrap(), sp.design_changes().unwrap());
    let rows = |s: &settee_db::DbSnapshot| {
        s.changes(&SeqVector::zero(2), ChangesOptions::default())
            .unwrap()
            .map(|r| r.map(|r| (r.id, r.revs, r.deleted, r.seq)))
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    };
    assert_eq!(rows(&sa), rows(&sp));
    assert_eq!(rows(&sa).len(), 14);
}

/// The design-change count moves with every edit or purge of a design document, whatever
/// the shard and the kind of write, and with nothing else; compaction and reopening keep it.
#[tokio::test]
async fn design_changes_move_only_with_design_documents() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.create("dd", Some(2)).unwrap();
    let changes =
        |db: &settee_db::Database| db.snapshot().design_changes().unwrap().iter().sum::<u64>();
    assert_eq!(changes(&db), 0);
    for i in 0..20 {
        put(&db, json!({"_id": format!("doc{i}")})).await.unwrap();
    }
    put(&db, json!({"_id": "_local/checkpoint", "seq": 1}))
        .await
        .unwrap();
    assert_eq!(
        changes(&db),
        0,
        "normal and local documents are not design documents"
    );

    let a1 = put(&db, json!({"_id": "_design/a", "views": {}}))
        .await
        .unwrap();
    assert_eq!(changes(&db), 1);
    let a2 = put(
        &db,
        json!({"_id": "_design/a", "_rev": a1.to_string(), "language": "javascript"}),
    )
    .await
    .unwrap();
    assert_eq!(changes(&db), 2);
    assert!(matches!(
        put(&db, json!({"_id": "_design/a", "_rev": a1.to_string()})).await,
        Err(Error::Conflict)
    ));
    assert_eq!(changes(&db), 2, "a refused edit changes nothing");
    // Other design documents may live on the other shard; replicated writes count too.
    let replicated = (0..4)
        .map(|i| doc(json!({"_id": format!("_design/r{i}"), "_rev": "1-abc"})))
        .collect();
    db.update(replicated, EditMode::Replicated, Durability::Durable)
        .await
        .unwrap();
    assert_eq!(changes(&db), 6);
    let shards: HashSet<usize> = (0..4)
        .map(|i| db.shard_for(&format!("_design/r{i}")))
        .collect();
    assert_eq!(shards.len(), 2, "the design documents span both shards");
    let per_shard = db.snapshot().design_changes().unwrap();
    let on = |shard: usize| {
        ["_design/a", "_design/a"]
            .iter()
            .chain(&["_design/r0", "_design/r1", "_design/r2", "_design/r3"])
            .filter(|id| db.shard_for(id) == shard)
            .count() as u64
    };
    assert_eq!(per_shard, vec![on(0), on(1)], "each shard counts its own");
    db.purge(vec![(
        "doc3".into(),
        vec![Rev::parse(get(&db, "doc3").unwrap()["_rev"].as_str().unwrap()).unwrap()],
    )])
    .await
    .unwrap();
    assert_eq!(changes(&db), 6, "purging a normal document");
    db.purge(vec![(
        "_design/r1".into(),
        vec![Rev::parse("1-abc").unwrap()],
    )])
    .await
    .unwrap();
    assert_eq!(changes(&db), 7, "purging a design document");
    put(
        &db,
        json!({"_id": "_design/a", "_rev": a2.to_string(), "_deleted": true}),
    )
    .await
    .unwrap();
    assert_eq!(changes(&db), 8, "deleting a design document");

    assert!(db.start_compaction());
    while db.compact_running() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(changes(&db), 8, "compaction keeps the count");
    drop(db);
    drop(catalog);
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.get("dd").unwrap();
    assert_eq!(changes(&db), 8, "reopening keeps the count");
    put(&db, json!({"_id": "_design/a", "again": true}))
        .await
        .unwrap();
    assert_eq!(changes(&db), 9);
}

/// Requests that arrive while the writer is busy are applied together, in the order they
/// came, each answered with its own results: a later edit of the same document sees the
/// earlier one, and a bad edit fails only its own request.
#[tokio::test]
async fn edits_queued_behind_a_busy_writer_are_applied_in_order_and_answered_apart() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = std::sync::Arc::new(catalog.create("q", Some(1)).unwrap());
    let base = put(&db, json!({"_id": "shared", "v": 0})).await.unwrap();
    let store_before = db.shards()[0].snapshot().generation();

    // Hold the writer until every request below is queued.
    let gate = std::sync::Arc::new(std::sync::Barrier::new(2));
    let (g, release) = (
        gate.clone(),
        std::sync::Arc::new(std::sync::Barrier::new(2)),
    );
    let r = release.clone();
    let blocker = db.shards()[0].store().submit(
        Durability::Durable,
        move |_| -> Result<(), settee_store::Error> {
            g.wait();
            r.wait();
            Ok(())
        },
    );
    gate.wait();

    let mut requests = Vec::new();
    for i in 0..10 {
        let docs = vec![
            doc(json!({"_id": format!("a{i}"), "i": i})),
            doc(json!({"_id": format!("b{i}"), "i": i})),
        ];
        let db = db.clone();
        requests.push(tokio::spawn(async move {
            db.update(docs, EditMode::Interactive, Durability::Durable)
                .await
        }));
    }
    for v in [1, 2] {
        let d = doc(json!({"_id": "shared", "_rev": base.to_string(), "v": v}));
        let db = db.clone();
        requests.push(tokio::spawn(async move {
            db.update(vec![d], EditMode::Interactive, Durability::Durable)
                .await
        }));
    }
    for d in [
        json!({"_id": "_local/bad", "_rev": "0-x"}),
        json!({"_id": "_local/good", "n": 1}),
    ] {
        let (d, db) = (doc(d), db.clone());
        requests.push(tokio::spawn(async move {
            db.update(vec![d], EditMode::Interactive, Durability::Durable)
                .await
        }));
    }
    // Let every request queue its edits, then free the writer.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    release.wait();
    blocker.await.unwrap();

    let mut answers = Vec::new();
    for r in requests {
        answers.push(r.await.unwrap().expect("the job as a whole succeeds"));
    }
    for (i, answer) in answers[..10].iter().enumerate() {
        assert_eq!(answer.len(), 2, "request {i} gets its own two results");
        assert!(
            answer
                .iter()
                .all(|r| r.as_ref().is_ok_and(|rev| rev.pos == 1)),
            "{answer:?}"
        );
        assert_eq!(get(&db, &format!("b{i}")).unwrap()["i"], i);
    }
    let first = answers[10][0]
        .as_ref()
        .expect("the first edit of the shared document wins");
    assert_eq!(first.pos, 2);
    assert!(
        matches!(answers[11][0], Err(Error::Conflict)),
        "the second sees the first: {:?}",
        answers[11]
    );
    assert_eq!(get(&db, "shared").unwrap()["v"], 1);
    assert!(
        matches!(answers[12][0], Err(Error::BadRequest(_))),
        "{:?}",
        answers[12]
    );
    assert_eq!(
        answers[13][0].as_ref().unwrap().to_string(),
        "0-1",
        "a bad local edit fails alone"
    );
    assert_eq!(db.snapshot().counts().unwrap().live, 21);
    let commits = db.shards()[0].snapshot().generation() - store_before;
    assert!(
        commits <= 2,
        "the queued edits were committed together ({commits} commits)"
    );
}

#[tokio::test]
async fn design_documents_are_listed_and_counted_in_id_order() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.create("d", Some(2)).unwrap();
    for id in [
        "_design/b",
        "plain",
        "_design/a",
        "Zebra",
        "~tilde",
        "_design/gone",
    ] {
        put(&db, json!({ "_id": id })).await.unwrap();
    }
    let rev = get(&db, "_design/gone").unwrap()["_rev"].clone();
    put(
        &db,
        json!({"_id": "_design/gone", "_rev": rev, "_deleted": true}),
    )
    .await
    .unwrap();
    let snap = db.snapshot();
    let ids: Vec<String> = snap.design_docs().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(ids, ["_design/a", "_design/b"]);
    assert_eq!(snap.design_doc_count().unwrap(), 2);
}

/// A write of many edits across every shard, local documents among them, answers each
/// edit in its own place: its conflict, its local revision or its new revision, whichever
/// shard or group applied it, and every edit applied as answered.
#[tokio::test]
async fn a_large_mixed_write_answers_each_edit_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    let db = catalog.create("mixed", Some(4)).unwrap();
    let taken = put(&db, json!({"_id": "d0050", "v": "before"}))
        .await
        .unwrap();
    let docs: Vec<NewDoc> = (0..200)
        .map(|i| match i % 7 {
            3 => doc(json!({"_id": format!("_local/l{i:04}"), "v": i})),
            _ => doc(json!({"_id": format!("d{i:04}"), "v": i})),
        })
        .collect();
    let results = db
        .update(docs, EditMode::Interactive, Durability::Durable)
        .await
        .unwrap();
    assert_eq!(results.len(), 200);
    for (i, result) in results.into_iter().enumerate() {
        match (i, i % 7, result) {
            (50, _, Err(Error::Conflict)) => {}
            (50, _, other) => panic!("d0050 exists: {other:?}"),
            (_, 3, Ok(rev)) => assert_eq!(rev.to_string(), "0-1", "_local/l{i:04}"),
            (_, _, Ok(rev)) => {
                assert_eq!(rev.pos, 1, "d{i:04}");
                let body = get(&db, &format!("d{i:04}")).unwrap();
                assert_eq!(body["v"], i, "d{i:04}");
                assert_eq!(body["_rev"], rev.to_string(), "d{i:04}");
            }
            (_, _, Err(e)) => panic!("edit {i}: {e:?}"),
        }
    }
    assert_eq!(get(&db, "d0050").unwrap()["_rev"], taken.to_string());
    assert_eq!(
        db.snapshot().local("_local/l0010").unwrap().unwrap(),
        (1, br#"{"v":10}"#.to_vec())
    );
}
