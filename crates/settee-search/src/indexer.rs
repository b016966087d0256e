//! Bringing a search index up to date: read the database's changes since the index's
//! position, run the index function on the engine pool (a batch cut into parts, one per
//! engine, each part analyzed on the engine's thread too), and add the documents while the
//! next batch runs. Commits carry the position reached, every few seconds and at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use settee_db::{partition_of, ChangesOptions, Database, DbSnapshot, SeqVector, DESIGN_PREFIX};
use settee_js::Pool;
use tantivy::TantivyDocument;

use crate::analyzer::Flavor;
use crate::error::{Error, Result};
use crate::index::{build_doc, IndexMeta, Indexed, SearchIndex};
use crate::registry::NativeIndexer;

/// Most documents in one batch.
const BATCH_DOCS: usize = 1000;
/// Most document bytes in one batch.
const BATCH_BYTES: usize = 8 << 20;
/// Longest an update runs between commits.
const COMMIT_EVERY: Duration = Duration::from_secs(5);

/// A document read from the changes feed: its id, and its JSON unless it leaves the index.
struct Change {
    id: String,
    doc: Option<Vec<u8>>,
}

/// Documents ready for the index: `None` leaves (or keeps) a document out.
type Ready = Vec<(String, Option<TantivyDocument>)>;

/// Runs one update of `index` to the database's current position.
pub(crate) fn update(
    index: &Arc<SearchIndex>,
    db: &Arc<Database>,
    pool: &Arc<Pool>,
    native: Option<&NativeIndexer>,
) -> Result<()> {
    let snap = db.snapshot();
    let start = index.meta();
    let target = snap.seq()?;
    let purge_seq = snap.purge_seq()?.total();
    if purge_seq != start.purge_seq {
        drop_purged(
            index,
            &snap,
            IndexMeta {
                seq: start.seq.clone(),
                purge_seq,
            },
        )?;
    }
    if start.seq.covers(&target) {
        return Ok(());
    }
    let def = index.def();
    let total = snap.pending(&start.seq)?;
    let task = db
        .tasks()
        .start_for("search_indexer", db.name(), Some(&def.ddoc_id), total);
    let mut changes = snap.changes(
        &start.seq,
        ChangesOptions {
            include_docs: true,
            ..ChangesOptions::default()
        },
    )?;
    let native = match (&def.native, native) {
        (None, _) => None,
        (Some(_), Some(n)) => Some(n.clone()),
        (Some(_), None) => return Err(Error::Corrupted("no native indexer for a native index")),
    };
    // Design documents are indexed only by index functions of global indexes, as CouchDB
    // indexes them.
    let skip_design = def.flavor == Flavor::Nouveau || snap.partitioned() || native.is_some();
    let mut running: Option<(Vec<Running>, SeqVector, u64)> = None;
    let (mut done, mut last_commit, mut uncommitted) = (0u64, Instant::now(), false);
    loop {
        if index.is_closed() {
            return Ok(());
        }
        let batch = next_batch(&mut changes, skip_design)?;
        let next = (!batch.is_empty()).then(|| {
            let n = batch.len() as u64;
            (
                start_batch(pool, index, batch, native.as_ref()),
                changes.position().clone(),
                n,
            )
        });
        if let Some((parts, position, n)) = running.take() {
            let mut ready = Vec::new();
            for part in parts {
                ready.extend(settee_js::wait(part)??);
            }
            index.add(ready)?;
            uncommitted = true;
            done += n;
            task.update(done, total.max(done));
            if last_commit.elapsed() >= COMMIT_EVERY {
                index.commit(IndexMeta {
                    seq: position,
                    purge_seq,
                })?;
                last_commit = Instant::now();
                uncommitted = false;
            }
        }
        running = next;
        if running.is_none() {
            break;
        }
    }
    if uncommitted || !index.meta().seq.covers(&target) {
        let seq = changes.position().clone();
        index.commit(IndexMeta {
            seq: if seq.covers(&target) { seq } else { target },
            purge_seq,
        })?;
    }
    Ok(())
}

/// A part of a batch on the engine pool.
type Running = std::sync::mpsc::Receiver<settee_js::Result<Result<Ready>>>;

fn next_batch(changes: &mut settee_db::Changes, skip_design: bool) -> Result<Vec<Change>> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    for row in changes.by_ref() {
        let row = row?;
        let design = skip_design && row.id.starts_with(DESIGN_PREFIX);
        let indexed = !row.deleted && !design;
        let doc = if indexed { row.doc } else { None };
        bytes += doc.as_ref().map_or(0, Vec::len);
        batch.push(Change { id: row.id, doc });
        if batch.len() >= BATCH_DOCS || bytes >= BATCH_BYTES {
            break;
        }
    }
    Ok(batch)
}

/// Queues a batch on the pool, cut into one part per engine.
fn start_batch(
    pool: &Arc<Pool>,
    index: &Arc<SearchIndex>,
    batch: Vec<Change>,
    native: Option<&NativeIndexer>,
) -> Vec<Running> {
    let per = batch.len().div_ceil(pool.workers().max(1)).max(1);
    let mut batch = batch.into_iter().peekable();
    let mut parts = Vec::new();
    while batch.peek().is_some() {
        let part: Vec<Change> = batch.by_ref().take(per).collect();
        let index = index.clone();
        if let Some(native) = native {
            let native = native.clone();
            parts.push(pool.submit(move |_| Ok(Ok(index_natively(&index, &native, part)))));
            continue;
        }
        parts.push(pool.submit(move |engine| {
            let def = index.def();
            let key = format!("search:{}", def.signature());
            engine.load_indexer(
                &key,
                &def.source,
                &def.ddoc_json,
                def.flavor == Flavor::Nouveau,
            )?;
            let mut json = String::from("[");
            for c in part.iter().filter_map(|c| c.doc.as_deref()) {
                if json.len() > 1 {
                    json.push(',');
                }
                match std::str::from_utf8(c) {
                    Ok(text) => json.push_str(text),
                    Err(_) => json.push_str(&String::from_utf8_lossy(c)),
                }
            }
            json.push(']');
            let out = engine.index_docs(&key, json)?;
            Ok(Ok(prepare(&index, part, out)))
        }));
    }
    parts
}

/// Index documents for `part` from the native indexer.
fn index_natively(index: &SearchIndex, native: &NativeIndexer, part: Vec<Change>) -> Ready {
    let def = index.def().native.as_ref().expect("a native index");
    part.into_iter()
        .map(|c| {
            let doc = c
                .doc
                .as_deref()
                .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
                .map(|doc| native(def, &doc))
                .filter(|fields| !fields.is_empty())
                .map(|fields| {
                    let partition = index
                        .def()
                        .partitioned
                        .then(|| partition_of(&c.id))
                        .flatten();
                    build_doc(index.fields(), &c.id, partition, &fields)
                });
            (c.id, doc)
        })
        .collect()
}

/// Turns the index function's output for `part` into index documents.
fn prepare(index: &SearchIndex, part: Vec<Change>, out: Vec<Option<Vec<Value>>>) -> Ready {
    let mut results = out.into_iter();
    let partitioned = index.def().partitioned;
    let mut ready = Vec::with_capacity(part.len());
    for c in part {
        if c.doc.is_none() {
            ready.push((c.id, None));
            continue;
        }
        let fields: Vec<Indexed> = match results.next() {
            Some(Some(fields)) => fields.iter().filter_map(Indexed::from_json).collect(),
            _ => Vec::new(),
        };
        let doc = (!fields.is_empty()).then(|| {
            let partition = if partitioned {
                partition_of(&c.id)
            } else {
                None
            };
            build_doc(index.fields(), &c.id, partition, &fields)
        });
        ready.push((c.id, doc));
    }
    ready
}

/// Removes documents purged from the database (purges leave no change behind).
fn drop_purged(index: &SearchIndex, snap: &DbSnapshot, meta: IndexMeta) -> Result<()> {
    let mut gone = Vec::new();
    for id in index.ids()? {
        if snap.record(&id)?.is_none() {
            gone.push((id, None));
        }
    }
    index.add(gone)?;
    index.commit(meta)
}
