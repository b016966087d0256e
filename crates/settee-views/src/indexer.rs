//! Bringing an index up to date: read the database's changes since the index's position,
//! map the documents in batches on the engine pool (one engine per core), and write each
//! batch's rows while the next batch is being mapped; the batch after that is read from the
//! changes meanwhile. One update runs per index at a time;
//! every client waiting for the index waits on that one run.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::value::RawValue;
use settee_db::{ChangesOptions, Database, DocOptions, SeqVector, DESIGN_PREFIX};
use settee_js::Pool;
use settee_json::viewkey;
use settee_queryserver::QueryServers;

use crate::ddoc::DesignDoc;
use crate::error::{Error, Result};
use crate::index::{Emitted, Index, IndexMeta, Mapped};
use crate::native::{NativeLanguages, NativeMap};

/// Most documents in one batch.
const BATCH_DOCS: usize = 2000;
/// Most documents in one batch mapped natively: mapping costs little, and each batch
/// rewrites the tree nodes its rows land in, so fewer, larger batches write far less when
/// keys arrive in random order (measured in docs/PERFORMANCE.md, Mango section).
const NATIVE_BATCH_DOCS: usize = 20_000;
/// Most document bytes in one batch.
const BATCH_BYTES: usize = 16 << 20;
/// Parts a batch is cut into per engine.
const PARTS_PER_ENGINE: usize = 2;

/// One document read from the changes feed.
struct Change {
    id: String,
    doc: Option<Vec<u8>>,
}

/// Where map functions run: JavaScript engines, query server processes, native languages.
pub(crate) struct Mappers<'a> {
    pub pool: &'a Arc<Pool>,
    pub servers: &'a QueryServers,
    pub natives: &'a NativeLanguages,
}

/// Runs one update of `index` to the database's current position.
pub(crate) fn update(index: &Index, db: &Arc<Database>, mappers: &Mappers) -> Result<()> {
    let (pool, servers) = (mappers.pool, mappers.servers);
    let snap = db.snapshot();
    let start = index.meta()?;
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
    let ddoc = index.ddoc().clone();
    let total = snap.pending(&start.seq)?;
    let task = db
        .tasks()
        .start_for("indexer", db.name(), Some(&ddoc.id), total);
    let doc = DocOptions {
        conflicts: true,
        local_seq: ddoc.options.local_seq,
        ..DocOptions::default()
    };
    let mut changes = snap.changes(
        &start.seq,
        ChangesOptions {
            include_docs: true,
            doc,
            ..ChangesOptions::default()
        },
    )?;
    let program = Arc::new(MapProgram::of(&ddoc, index.signature()));
    let native = mappers.natives.get(&ddoc.language).map(|lang| {
        let maps: Vec<&str> = ddoc.views.iter().map(|v| v.map.as_str()).collect();
        lang.compile(&maps)
    });
    let max_docs = if native.is_some() {
        NATIVE_BATCH_DOCS
    } else {
        BATCH_DOCS
    };
    let mut writing: Option<settee_store::Pending<(), Error>> = None;
    let mut mapping: Option<(Mapping, SeqVector, u64)> = None;
    let mut done = 0u64;
    loop {
        // The next batch is read while the engines map the one before it.
        let batch = next_batch(&mut changes, &ddoc, max_docs)?;
        let next = (!batch.is_empty()).then(|| {
            let n = batch.len() as u64;
            let started = if let Some(native) = &native {
                Mapping::Done(map_native(native.as_ref(), pool.workers(), batch))
            } else if ddoc.language == "javascript" {
                Mapping::start(pool, &program, batch)
            } else {
                Mapping::Done(map_external(
                    servers,
                    &ddoc.language,
                    pool.workers(),
                    &program,
                    batch,
                ))
            };
            (started, changes.position().clone(), n)
        });
        if let Some((started, position, n)) = mapping.take() {
            let mapped = started.finish()?;
            if let Some(w) = writing.take() {
                w.wait()?;
                index.updates.moved();
            }
            writing = Some(index.submit(
                mapped,
                IndexMeta {
                    seq: position,
                    purge_seq,
                },
            ));
            done += n;
            task.update(done, total.max(done));
        }
        mapping = next;
        if mapping.is_none() {
            break;
        }
    }
    if let Some(w) = writing.take() {
        w.wait()?;
    }
    // Catch up the position past changes that touched no indexed document.
    let meta = index.meta()?;
    if !meta.seq.covers(&target) {
        index
            .submit(
                Vec::new(),
                IndexMeta {
                    seq: target,
                    purge_seq,
                },
            )
            .wait()?;
    }
    Ok(())
}

/// Removes the rows of documents purged from the database (purges leave no change behind
/// for documents that are gone entirely).
fn drop_purged(index: &Index, snap: &settee_db::DbSnapshot, meta: IndexMeta) -> Result<()> {
    let mut gone = Vec::new();
    for entry in index
        .snapshot()
        .range(crate::index::ID_TREE, settee_store::RangeOptions::default())?
    {
        let entry = entry?;
        let id = String::from_utf8_lossy(entry.key()).into_owned();
        if snap.record(&id)?.is_none() {
            gone.push(Mapped { id, rows: None });
        }
    }
    index.submit(gone, meta).wait()
}

fn next_batch(
    changes: &mut settee_db::Changes,
    ddoc: &DesignDoc,
    max_docs: usize,
) -> Result<Vec<Change>> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    for row in changes.by_ref() {
        let row = row?;
        let indexed =
            !row.deleted && (ddoc.options.include_design || !row.id.starts_with(DESIGN_PREFIX));
        let doc = if indexed { row.doc } else { None };
        bytes += doc.as_ref().map_or(0, Vec::len);
        batch.push(Change { id: row.id, doc });
        if batch.len() >= max_docs || bytes >= BATCH_BYTES {
            break;
        }
    }
    Ok(batch)
}

/// What every engine needs to map documents for one index, made once per update.
struct MapProgram {
    /// The engine's cache key for the compiled functions (the index signature).
    key: String,
    sources: Vec<String>,
    /// `views.lib` as JSON text.
    lib: String,
    /// The only document members the functions read, when that is known.
    fields: Option<HashSet<String>>,
    /// Each view's key order.
    collations: Vec<viewkey::Collation>,
    /// `views.lib` for external query servers.
    lib_value: serde_json::Value,
}

impl MapProgram {
    fn of(ddoc: &DesignDoc, signature: &str) -> MapProgram {
        let sources: Vec<String> = ddoc.views.iter().map(|v| v.map.clone()).collect();
        let fields =
            crate::projection::fields_read(&sources.iter().map(String::as_str).collect::<Vec<_>>());
        MapProgram {
            key: signature.to_string(),
            sources,
            lib: ddoc.lib.to_string(),
            fields,
            collations: ddoc.views.iter().map(|v| v.collation).collect(),
            lib_value: ddoc.lib.clone(),
        }
    }
}

/// A batch cut into at most `workers` parts of nearly equal size, in order.
fn split(batch: Vec<Change>, workers: usize) -> Vec<Vec<Change>> {
    let per_worker = batch.len().div_ceil(workers.max(1)).max(1);
    let mut batch = batch.into_iter().peekable();
    std::iter::from_fn(|| {
        batch
            .peek()
            .is_some()
            .then(|| batch.by_ref().take(per_worker).collect())
    })
    .collect()
}

/// A batch being mapped: its parts queued on the engine pool, or its rows already known.
enum Mapping {
    Js(Vec<std::sync::mpsc::Receiver<settee_js::Result<Result<Vec<Mapped>>>>>),
    Done(Result<Vec<Mapped>>),
}

impl Mapping {
    /// Queues a batch on the pool, cut into parts so that every engine has work while the
    /// next batch is read, and none waits long for the slowest part.
    fn start(pool: &Arc<Pool>, program: &Arc<MapProgram>, batch: Vec<Change>) -> Mapping {
        let pending = split(batch, PARTS_PER_ENGINE * pool.workers())
            .into_iter()
            .map(|part| {
                let program = program.clone();
                pool.submit(move |engine| map_part(engine, &program, part))
            })
            .collect();
        Mapping::Js(pending)
    }

    /// Waits for every part; the rows in the batch's order.
    fn finish(self) -> Result<Vec<Mapped>> {
        match self {
            Mapping::Done(rows) => rows,
            Mapping::Js(pending) => {
                let mut out = Vec::new();
                for p in pending {
                    out.extend(settee_js::wait(p)??);
                }
                Ok(out)
            }
        }
    }
}

/// Maps a batch on processes of the language's query server, `workers` of them at once,
/// one `map_doc` per document as the protocol has it. A document the server refuses to map
/// is skipped (logged), as a JavaScript map function that throws is.
fn map_external(
    servers: &QueryServers,
    language: &str,
    workers: usize,
    program: &MapProgram,
    batch: Vec<Change>,
) -> Result<Vec<Mapped>> {
    let results: Vec<Result<Vec<Mapped>>> = std::thread::scope(|scope| {
        let running: Vec<_> = split(batch, workers)
            .into_iter()
            .map(|part| scope.spawn(move || map_external_part(servers, language, program, part)))
            .collect();
        running
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or(Err(Error::Corrupted("a mapping thread panicked")))
            })
            .collect()
    });
    let mut out = Vec::new();
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

fn map_external_part(
    servers: &QueryServers,
    language: &str,
    program: &MapProgram,
    part: Vec<Change>,
) -> Result<Vec<Mapped>> {
    let mut process = servers.checkout(language)?;
    let timeout = process.timeout();
    let sources: Vec<&str> = program.sources.iter().map(String::as_str).collect();
    let config = process.reset_config();
    process.load(&program.key, &sources, &program.lib_value, &config, timeout)?;
    let nothing = format!("[{}]", vec!["[]"; sources.len()].join(","));
    let answers = process.map_docs(part.iter().filter_map(|c| c.doc.as_deref()), timeout)?;
    let mut out = String::from("[");
    for answer in answers {
        if out.len() > 1 {
            out.push(',');
        }
        match answer {
            Ok(rows) => out.push_str(&rows),
            Err(e) => {
                tracing::info!(language, "map function failed on a document: {e}");
                out.push_str(&nothing);
            }
        }
    }
    out.push(']');
    decode_rows(&out, part, &program.collations)
}

/// Stack of a native mapping thread: documents may nest as deep as
/// [`settee_json::deep::MAX_DEPTH`], and copying an indexed value recurses per level.
const NATIVE_STACK: usize = 64 << 20;

/// Maps a batch with a native program, on up to `workers` threads. A thread that fails
/// fails the update (retried later): its documents are never passed over.
fn map_native(native: &dyn NativeMap, workers: usize, batch: Vec<Change>) -> Result<Vec<Mapped>> {
    let parts = split(batch, workers);
    let failed = || Error::Corrupted("a native mapping thread failed");
    let mapped = std::thread::scope(|scope| {
        let running = parts
            .into_iter()
            .map(|part| {
                std::thread::Builder::new()
                    .name("settee-mapper".into())
                    .stack_size(NATIVE_STACK)
                    .spawn_scoped(scope, move || map_native_part(native, part))
            })
            .collect::<std::io::Result<Vec<_>>>();
        match running {
            Ok(threads) => threads
                .into_iter()
                .map(|t| t.join().map_err(|_| failed()))
                .collect::<Result<Vec<_>>>(),
            Err(_) => Err(failed()),
        }
    })?;
    Ok(mapped.into_iter().flatten().collect())
}

fn map_native_part(native: &dyn NativeMap, part: Vec<Change>) -> Vec<Mapped> {
    part.into_iter()
        .map(|c| {
            let doc = c
                .doc
                .as_deref()
                .and_then(|d| settee_json::deep::from_slice::<serde_json::Value>(d).ok());
            let rows = doc.map(|doc| {
                let rows = native
                    .map(&doc)
                    .into_iter()
                    .map(|rows| {
                        rows.into_iter()
                            .filter_map(|(k, v)| {
                                let row = emitted(&k, &v);
                                settee_json::deep::dispose(k);
                                row
                            })
                            .collect()
                    })
                    .collect();
                // Dropped without recursing, however deep.
                settee_json::deep::dispose(doc);
                rows
            });
            Mapped { id: c.id, rows }
        })
        .collect()
}

/// A native row as the index stores it; `None` for a key too deep to encode.
fn emitted(key: &serde_json::Value, value: &serde_json::Value) -> Option<Emitted> {
    let mut text = Vec::new();
    settee_json::deep::write(&mut text, key);
    let key_json = String::from_utf8(text).ok()?;
    Some(Emitted {
        key: viewkey::encoded_json(&key_json, viewkey::Collation::Unicode)?,
        key_json,
        value_json: value.to_string(),
    })
}

type EmittedJson<'a> = Vec<Vec<(&'a RawValue, &'a RawValue)>>;

/// Runs on a pool thread: maps the documents of `part` and encodes the emitted keys.
/// Only the members the functions read (when known) are given to the engine.
fn map_part(
    engine: &mut settee_js::Engine,
    program: &MapProgram,
    part: Vec<Change>,
) -> settee_js::Result<Result<Vec<Mapped>>> {
    let sources: Vec<&str> = program.sources.iter().map(String::as_str).collect();
    engine.load_map(&program.key, &sources, &program.lib)?;
    let docs: Vec<&Vec<u8>> = part.iter().filter_map(|c| c.doc.as_ref()).collect();
    let out = match engine.map_docs(&program.key, docs_json(program, &docs)?) {
        Ok(out) => out,
        // A batch whose documents the environment could not take in (one too deep for its
        // parser) is mapped one document at a time; a document that fails alone emits
        // nothing, as one whose function throws. Running out of time or memory fails the
        // build, as it fails CouchDB's.
        Err(settee_js::Error::Raised { .. }) => one_by_one(engine, program, &docs)?,
        Err(e) => return Err(e),
    };
    Ok(decode_rows(&out, part, &program.collations))
}

/// The documents as the JSON array the map program takes, each with only the members the
/// functions read (when known).
fn docs_json(program: &MapProgram, docs: &[&Vec<u8>]) -> settee_js::Result<String> {
    let mut out = Vec::with_capacity(64 * docs.len());
    out.push(b'[');
    for (i, doc) in docs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match program
            .fields
            .as_ref()
            .and_then(|f| crate::projection::project(doc, f))
        {
            Some(projected) => out.extend_from_slice(&projected),
            None => out.extend_from_slice(doc),
        }
    }
    out.push(b']');
    String::from_utf8(out)
        .map_err(|_| settee_js::Error::Engine("a stored document is not UTF-8".into()))
}

/// Maps each document alone, joining the answers as one batch's would be.
fn one_by_one(
    engine: &mut settee_js::Engine,
    program: &MapProgram,
    docs: &[&Vec<u8>],
) -> settee_js::Result<String> {
    let nothing = format!("[{}]", vec!["[]"; program.sources.len()].join(","));
    let mut joined = String::from("[");
    for (i, doc) in docs.iter().enumerate() {
        if i > 0 {
            joined.push(',');
        }
        let one = match engine.map_docs(&program.key, docs_json(program, &[doc])?) {
            Ok(out) => out
                .trim()
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .map(str::to_string)
                .unwrap_or_else(|| nothing.clone()),
            Err(e @ settee_js::Error::Raised { .. }) => {
                tracing::info!(target: "settee_js", "a document could not be mapped: {e}");
                nothing.clone()
            }
            Err(e) => return Err(e),
        };
        joined.push_str(&one);
    }
    joined.push(']');
    Ok(joined)
}

fn decode_rows(
    out: &str,
    part: Vec<Change>,
    collations: &[viewkey::Collation],
) -> Result<Vec<Mapped>> {
    let per_doc: Vec<EmittedJson> =
        serde_json::from_str(out).map_err(|_| Error::Corrupted("map output"))?;
    let mut per_doc = per_doc.into_iter();
    part.into_iter()
        .map(|c| {
            if c.doc.is_none() {
                return Ok(Mapped {
                    id: c.id,
                    rows: None,
                });
            }
            let views = per_doc.next().ok_or(Error::Corrupted("map output"))?;
            // A key that cannot be encoded (nested deeper than any document may be) leaves
            // out that row, not the document's others or the batch.
            let rows = views
                .into_iter()
                .zip(collations)
                .map(|(rows, &collation)| {
                    rows.into_iter()
                        .filter_map(|(k, v)| {
                            let key = viewkey::encoded_json(k.get(), collation)?;
                            Some(Emitted {
                                key,
                                key_json: k.get().to_string(),
                                value_json: v.get().to_string(),
                            })
                        })
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>();
            Ok(Mapped {
                id: c.id,
                rows: Some(rows),
            })
        })
        .collect()
}
