//! One index file: the rows of every view of a design document signature, plus the
//! document-id tree that says which rows each document emitted (to remove them when the
//! document changes), and how far through the database's changes the index has got.
//!
//! Trees: 0 is the id tree (`doc id -> indexed rev, [(view, row key)]`); `1 + i` holds view
//! `i`'s rows in collation order (byte order of [`settee_json::viewkey`] keys), each inner
//! node carrying the view's reduction. The header metadata holds the database position.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use settee_db::SeqVector;
use settee_json::viewkey;
use settee_store::format::{put_bytes, put_varint, Reader};
use settee_store::{
    Action, Durability, NoReduce, Pending, Snapshot, Store, StoreOptions, TreeSpec,
};

use crate::ddoc::DesignDoc;
use crate::error::{Error, Result};
use crate::reduce::ViewReducer;
use crate::row;

/// The id tree's slot.
pub const ID_TREE: usize = 0;
/// The header's layout: 2 adds the view-key version the index was built under.
const META_VERSION: u8 = 2;

/// What a document emitted into one view.
#[derive(Clone, Debug, PartialEq)]
pub struct Emitted {
    /// Collation-encoded key.
    pub key: Vec<u8>,
    /// The key's JSON text.
    pub key_json: String,
    /// The value's JSON text.
    pub value_json: String,
}

/// One document's new state for the index: its rows per view, or `None` to drop it.
#[derive(Debug)]
pub struct Mapped {
    /// Document id.
    pub id: String,
    /// Rows per view, in view order; `None` when the document is deleted or not indexed.
    pub rows: Option<Vec<Vec<Emitted>>>,
}

/// How far an index has got through its database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexMeta {
    /// The database position indexed up to.
    pub seq: SeqVector,
    /// The database's purge count at that position.
    pub purge_seq: u64,
}

impl IndexMeta {
    /// The header, naming the view-key version (`key_version`) it is written under.
    fn encode(&self, key_version: &str) -> Vec<u8> {
        let mut out = vec![META_VERSION];
        put_varint(&mut out, self.seq.0.len() as u64);
        for s in &self.seq.0 {
            put_varint(&mut out, *s);
        }
        put_varint(&mut out, self.purge_seq);
        put_bytes(&mut out, key_version.as_bytes());
        out
    }

    /// The view-key version a header names; `None` for an empty header or one written before
    /// versions were (by this encoding's first version, so current).
    fn key_version(bytes: &[u8]) -> Result<Option<String>> {
        let bad = |_| Error::Corrupted("index header");
        let mut r = Reader::new(bytes, 0);
        if bytes.is_empty() || r.u8().map_err(bad)? == 1 {
            return Ok(None);
        }
        let n = r.varint().map_err(bad)?;
        for _ in 0..=n {
            r.varint().map_err(bad)?;
        }
        let text = r.bytes().map_err(bad)?;
        Ok(Some(String::from_utf8_lossy(text).into_owned()))
    }

    fn decode(bytes: &[u8], q: usize) -> Result<IndexMeta> {
        if bytes.is_empty() {
            return Ok(IndexMeta {
                seq: SeqVector::zero(q),
                purge_seq: 0,
            });
        }
        let bad = |_| Error::Corrupted("index header");
        let mut r = Reader::new(bytes, 0);
        if !matches!(r.u8().map_err(bad)?, 1 | META_VERSION) {
            return Err(Error::Corrupted("index header version"));
        }
        let n = r.varint().map_err(bad)? as usize;
        if n != q {
            return Err(Error::Corrupted(
                "index of a database with another shard count",
            ));
        }
        let seq = (0..n)
            .map(|_| r.varint().map_err(bad))
            .collect::<Result<Vec<_>>>()?;
        Ok(IndexMeta {
            seq: SeqVector(seq),
            purge_seq: r.varint().map_err(bad)?,
        })
    }
}

/// An open index.
pub struct Index {
    ddoc: DesignDoc,
    signature: String,
    path: PathBuf,
    q: usize,
    store: Store,
    /// The view-key version this index writes under.
    key_version: String,
    reducers: Vec<Option<Arc<ViewReducer>>>,
    /// Its updates, shared by the clients waiting for them.
    pub(crate) updates: settee_db::Updates<Error>,
    /// Whether a compaction of the index runs.
    pub(crate) compacting: std::sync::atomic::AtomicBool,
}

impl Index {
    /// Opens (or creates) the index of `ddoc` for a database of `q` shards, in `dir`.
    pub fn open(
        dir: &Path,
        ddoc: DesignDoc,
        q: usize,
        reducers: Vec<Option<Arc<ViewReducer>>>,
        options: &StoreOptions,
    ) -> Result<Index> {
        let version = settee_json::viewkey::stored_key_version();
        Index::open_under(dir, ddoc, q, reducers, options, version)
    }

    /// [`Index::open`] with keys of version `key_version`: a file built under another is
    /// emptied and built again.
    fn open_under(
        dir: &Path,
        ddoc: DesignDoc,
        q: usize,
        reducers: Vec<Option<Arc<ViewReducer>>>,
        options: &StoreOptions,
        key_version: &str,
    ) -> Result<Index> {
        // Only the index directory itself is made: the database's must exist (one deleted
        // meanwhile is not made again by its last readers).
        match std::fs::create_dir(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(Error::Io {
                    op: "create the index directory",
                    source: e,
                })
            }
            _ => {}
        }
        let signature = ddoc.signature();
        let path = dir.join(format!("{signature}.view"));
        let mut trees = vec![TreeSpec::bytewise(NoReduce)];
        for r in &reducers {
            trees.push(match r {
                Some(r) => TreeSpec::bytewise(SharedReducer(r.clone())),
                None => TreeSpec::bytewise(NoReduce),
            });
        }
        let options = StoreOptions {
            trees,
            on_commit: None,
            ..options.clone()
        };
        let mut store = Store::open_or_create(&path, options.clone())?;
        let built_under = IndexMeta::key_version(store.snapshot().meta())?;
        if built_under.as_deref().is_some_and(|v| v != key_version) {
            tracing::info!(index = %path.display(), "rebuilding an index made under another collation or key encoding");
            drop(store);
            std::fs::remove_file(&path).map_err(|source| Error::Io {
                op: "remove an index of another key version",
                source,
            })?;
            store = Store::open_or_create(&path, options)?;
        }
        let index = Index {
            ddoc,
            signature,
            path,
            q,
            store,
            key_version: key_version.to_string(),
            reducers,
            updates: settee_db::Updates::default(),
            compacting: std::sync::atomic::AtomicBool::new(false),
        };
        index.meta()?;
        Ok(index)
    }

    /// The design document the index was opened for.
    pub fn ddoc(&self) -> &DesignDoc {
        &self.ddoc
    }

    /// The signature (file name) of the index.
    pub fn signature(&self) -> &str {
        &self.signature
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The reducer of view `i`, if it has one.
    pub fn reducer(&self, view: usize) -> Option<&Arc<ViewReducer>> {
        self.reducers.get(view).and_then(Option::as_ref)
    }

    /// A consistent view of the index as last committed.
    pub fn snapshot(&self) -> Snapshot {
        self.store.snapshot()
    }

    /// The position the committed index has reached.
    pub fn meta(&self) -> Result<IndexMeta> {
        IndexMeta::decode(self.store.snapshot().meta(), self.q)
    }

    /// Position decoded from a snapshot of this index.
    pub fn meta_of(&self, snap: &Snapshot) -> Result<IndexMeta> {
        IndexMeta::decode(snap.meta(), self.q)
    }

    /// Whether an update runs, how many clients wait for it, and whether a compaction runs.
    pub fn state(&self) -> (bool, u64, bool) {
        let compacting = self.compacting.load(std::sync::atomic::Ordering::Relaxed);
        (self.updates.running(), self.updates.waiting(), compacting)
    }

    /// The store, for compaction.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Queues one batch of documents' new rows and the position they bring the index to.
    pub fn submit(&self, batch: Vec<Mapped>, meta: IndexMeta) -> Pending<(), Error> {
        let mapped = batch.iter().filter_map(|d| d.rows.as_ref());
        let (docs, emits) = mapped.fold((0u64, 0u64), |(d, e), rows| {
            (d + 1, e + rows.iter().map(|r| r.len() as u64).sum::<u64>())
        });
        settee_metrics::add(settee_metrics::Metric::MrviewMapDoc, docs);
        settee_metrics::add(settee_metrics::Metric::MrviewEmits, emits);
        let views = self.reducers.len();
        let key_version = self.key_version.clone();
        let partitioned = self.ddoc.options.partitioned;
        self.store
            .submit(Durability::Durable, move |txn| -> Result<()> {
                let mut per_view: Vec<Vec<Action>> = vec![Vec::new(); views];
                let mut ids = Vec::with_capacity(batch.len());
                for doc in batch {
                    if let Some(old) = txn.get(ID_TREE, doc.id.as_bytes())? {
                        for (view, key) in decode_id_entry(old.value())? {
                            per_view
                                .get_mut(view)
                                .ok_or(Error::Corrupted("id tree view number"))?
                                .push(Action::Delete(key));
                        }
                    }
                    // A partitioned index keeps rows of partitioned documents only.
                    let prefix = match settee_db::partition_of(&doc.id) {
                        Some(p) if partitioned => Some(crate::partition::prefix(p)),
                        _ => None,
                    };
                    let rows = doc.rows.filter(|rows| {
                        rows.iter().any(|r| !r.is_empty()) && (prefix.is_some() || !partitioned)
                    });
                    match rows {
                        Some(rows) => {
                            let mut entry = Vec::new();
                            for (view, emitted) in rows.into_iter().enumerate().take(views) {
                                for (key, value) in row_actions(&doc.id, emitted, &prefix) {
                                    put_varint(&mut entry, view as u64);
                                    put_bytes(&mut entry, &key);
                                    per_view[view].push(Action::Put(key, value));
                                }
                            }
                            ids.push(Action::Put(doc.id.into_bytes(), entry));
                        }
                        None => ids.push(Action::Delete(doc.id.into_bytes())),
                    }
                }
                txn.apply(ID_TREE, &ids)?;
                for (view, actions) in per_view.iter().enumerate() {
                    if !actions.is_empty() {
                        txn.apply(1 + view, actions)?;
                    }
                }
                txn.set_meta(meta.encode(&key_version));
                Ok(())
            })
    }
}

/// Row keys and stored values for one document's emits into one view; a key emitted more
/// than once gets a running number so every emit is its own row.
/// In a partitioned index each key starts with the document's partition `prefix`.
fn row_actions(
    id: &str,
    mut emitted: Vec<Emitted>,
    prefix: &Option<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    // Equal keys in value order (Erlang term order), as CouchDB sorts a document's rows.
    emitted.sort_by(|a, b| a.key.cmp(&b.key).then_with(|| by_value(a, b)));
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(emitted.len());
    let mut dup = 0u32;
    for (i, e) in emitted.iter().enumerate() {
        dup = if i > 0 && emitted[i - 1].key == e.key {
            dup + 1
        } else {
            0
        };
        let prefix = prefix.as_deref().unwrap_or_default();
        let mut key = Vec::with_capacity(prefix.len() + e.key.len() + id.len() + 2);
        key.extend_from_slice(prefix);
        key.extend_from_slice(&e.key);
        viewkey::push_doc_id(&mut key, id, dup);
        out.push((key, row::encode_value(&e.key_json, &e.value_json)));
    }
    out
}

fn by_value(a: &Emitted, b: &Emitted) -> std::cmp::Ordering {
    let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
    match (parse(&a.value_json), parse(&b.value_json)) {
        (Some(x), Some(y)) => settee_json::collate::raw(&x, &y),
        _ => std::cmp::Ordering::Equal,
    }
}

fn decode_id_entry(bytes: &[u8]) -> Result<Vec<(usize, Vec<u8>)>> {
    let bad = |_| Error::Corrupted("id tree entry");
    let mut r = Reader::new(bytes, 0);
    let mut out = Vec::new();
    while !r.is_empty() {
        let view = r.varint().map_err(bad)? as usize;
        out.push((view, r.bytes().map_err(bad)?.to_vec()));
    }
    Ok(out)
}

/// A view reducer shared between the index and the tree spec.
struct SharedReducer(Arc<ViewReducer>);

impl settee_store::Reducer for SharedReducer {
    fn reduce(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<u8>, String> {
        self.0.reduce(entries)
    }
    fn rereduce(&self, reductions: &[&[u8]]) -> Result<Vec<u8>, String> {
        self.0.rereduce(reductions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path, ddoc: &DesignDoc, key_version: &str) -> Index {
        let options = StoreOptions::default();
        Index::open_under(dir, ddoc.clone(), 1, vec![None], &options, key_version).unwrap()
    }

    fn one_row(index: &Index, seq: u64) {
        let row = Emitted {
            key: settee_json::viewkey::encoded(&serde_json::json!("k"), Default::default()),
            key_json: "\"k\"".into(),
            value_json: "1".into(),
        };
        let mapped = Mapped {
            id: "doc".into(),
            rows: Some(vec![vec![row]]),
        };
        let meta = IndexMeta {
            seq: SeqVector(vec![seq]),
            purge_seq: 0,
        };
        index.submit(vec![mapped], meta).wait().unwrap();
    }

    #[test]
    fn an_index_made_under_another_key_version_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let ddoc = DesignDoc::parse(
            "_design/d",
            &serde_json::json!({"views": {"v": {"map": "function(doc){ emit(1) }"}}}),
            false,
        )
        .unwrap();
        let old = open(dir.path(), &ddoc, "0-older-collator");
        one_row(&old, 7);
        drop(old);
        // Opened under the version it was built under, it is kept.
        let same = open(dir.path(), &ddoc, "0-older-collator");
        assert_eq!(same.meta().unwrap().seq, SeqVector(vec![7]));
        assert_eq!(same.snapshot().count(1).unwrap(), 1);
        drop(same);
        // Under this build's version it is emptied, to be built again from the start.
        let now = Index::open(
            dir.path(),
            ddoc.clone(),
            1,
            vec![None],
            &StoreOptions::default(),
        )
        .unwrap();
        assert_eq!(now.meta().unwrap().seq, SeqVector::zero(1));
        assert_eq!(now.snapshot().count(1).unwrap(), 0);
        one_row(&now, 3);
        drop(now);
        let again = Index::open(dir.path(), ddoc, 1, vec![None], &StoreOptions::default()).unwrap();
        assert_eq!(
            again.meta().unwrap().seq,
            SeqVector(vec![3]),
            "kept once current"
        );
    }

    #[test]
    fn headers_written_before_versions_are_read_as_current() {
        let mut v1 = vec![1u8];
        for n in [1u64, 5, 0] {
            put_varint(&mut v1, n);
        }
        assert_eq!(IndexMeta::key_version(&v1).unwrap(), None);
        assert_eq!(IndexMeta::decode(&v1, 1).unwrap().seq, SeqVector(vec![5]));
        let meta = IndexMeta {
            seq: SeqVector(vec![5]),
            purge_seq: 2,
        };
        let v2 = meta.encode("1-abc");
        assert_eq!(
            IndexMeta::key_version(&v2).unwrap().as_deref(),
            Some("1-abc")
        );
        assert_eq!(IndexMeta::decode(&v2, 1).unwrap(), meta);
    }
}
