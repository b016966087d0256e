//! One search index on disk: a tantivy index whose commits carry the database position
//! they reached, so an index and its position are always written together.
//!
//! Every field of every document goes into one fixed schema, whatever its name:
//! * `terms`: analyzed terms as `name \0 term`, with positions (phrases, BM25);
//! * `facets`: exact values of facet and `string` fields as `name \0 value` (drilldown);
//! * `fast`: a columnar object `{name: value}` of numbers and short strings (numeric
//!   queries and ranges, sorting, counts);
//! * `stored`: the stored fields as JSON; `id` and `part` (the partition).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use settee_db::SeqVector;
use tantivy::schema::{
    Field, IndexRecordOption, JsonObjectOptions, OwnedValue, Schema, TextFieldIndexing,
    TextOptions, FAST, STORED, STRING,
};

use tantivy::columnar::StrColumn;
use tantivy::index::SegmentId;
use tantivy::{
    DocId, IndexReader, IndexWriter, ReloadPolicy, SegmentReader, TantivyDocument, Term,
};

use crate::analyzer::{FieldTokenizer, Flavor};
use crate::def::IndexDef;
use crate::error::{Error, Result};

/// Strings longer than this are searchable but not sortable or counted (unless a facet).
pub const MAX_SORT_STRING: usize = 256;
/// Memory the writer buffers before it writes a segment.
const WRITER_MEMORY: usize = 64 << 20;

/// The name the index's [`FieldTokenizer`] is registered under.
const TOKENIZER: &str = "settee";

/// The separator between a field's name and its term.
pub const SEP: char = '\0';

/// The fields of the fixed schema.
#[derive(Clone, Copy, Debug)]
pub struct Fields {
    /// Document id (exact, stored, columnar).
    pub id: Field,
    /// The partition of a partitioned database's document.
    pub part: Field,
    /// Analyzed terms with positions.
    pub terms: Field,
    /// Exact facet values.
    pub facets: Field,
    /// Numbers and short strings by field name (columnar).
    pub fast: Field,
    /// Stored fields as JSON.
    pub stored: Field,
}

impl Fields {
    fn schema() -> (Schema, Fields) {
        let mut b = Schema::builder();
        let terms = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let fields = Fields {
            id: b.add_text_field("id", STRING | FAST),
            part: b.add_text_field("part", STRING),
            terms: b.add_text_field("terms", terms),
            facets: b.add_text_field("facets", STRING),
            fast: b.add_json_field("fast", JsonObjectOptions::default().set_fast(Some("raw"))),
            stored: b.add_text_field("stored", STORED),
        };
        (b.build(), fields)
    }

    /// The column name of field `name` in `fast`.
    pub fn column(name: &str) -> String {
        let mut out = String::from("fast.");
        for c in name.chars() {
            if c == '.' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out
    }
}

/// Where an index has got to in its database.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexMeta {
    /// Per-shard sequence reached.
    pub seq: SeqVector,
    /// Purge sequence reached.
    pub purge_seq: u64,
}

/// One field of one document, as the index function gave it.
#[derive(Clone, Debug, PartialEq)]
pub struct Indexed {
    /// `auto` (search indexes), or nouveau's `text`, `string`, `double`, `stored`.
    pub kind: String,
    /// The field's name.
    pub name: String,
    /// A string, number or boolean.
    pub value: Value,
    /// Keep the value to return it (`fields`, highlights).
    pub store: bool,
    /// Keep exact values for counts, ranges and drilldown.
    pub facet: bool,
    /// Analyze the value (false: `index: false`, or the keyword analyzer for
    /// `not_analyzed`).
    pub analyzed: Option<bool>,
}

impl Indexed {
    /// Reads `[type, name, value, options]` from an index function's output.
    pub fn from_json(v: &Value) -> Option<Indexed> {
        let [kind, name, value, opts] = v.as_array()?.as_slice() else {
            return None;
        };
        let flag = |k: &str| match opts.get(k) {
            Some(Value::Bool(b)) => Some(*b),
            Some(Value::String(s)) => Some(matches!(s.as_str(), "yes" | "true")),
            _ => None,
        };
        let analyzed = match opts.get("index") {
            Some(Value::Bool(false)) => Some(false),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("no") => Some(false),
            Some(Value::String(s)) if s.to_ascii_lowercase().starts_with("not_analyzed") => None,
            _ => Some(true),
        };
        Some(Indexed {
            kind: kind.as_str()?.to_string(),
            name: name.as_str()?.to_string(),
            value: value.clone(),
            store: flag("store").unwrap_or(false),
            facet: flag("facet").unwrap_or(false),
            analyzed,
        })
    }
}

/// Builds the tantivy document for document `id` with `values` (the index's
/// [`FieldTokenizer`] analyzes them as tantivy indexes the document).
pub fn build_doc(
    f: &Fields,
    id: &str,
    partition: Option<&str>,
    values: &[Indexed],
) -> TantivyDocument {
    let mut doc = TantivyDocument::new();
    doc.add_text(f.id, id);
    if let Some(p) = partition {
        doc.add_text(f.part, p);
    }
    let mut fast: BTreeMap<String, Vec<OwnedValue>> = BTreeMap::new();
    let mut stored = serde_json::Map::new();
    for v in values {
        if v.store || v.kind == "stored" {
            store(&mut stored, &v.name, v.value.clone());
        }
        match (&v.value, v.kind.as_str()) {
            (_, "stored") => {}
            (Value::Number(n), _) => {
                let x = n.as_f64().unwrap_or(0.0);
                fast.entry(v.name.clone())
                    .or_default()
                    .push(OwnedValue::F64(x));
            }
            (Value::String(_) | Value::Bool(_), kind) => {
                let text = match &v.value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let exact = kind == "string" || v.analyzed.is_none() || v.value.is_boolean();
                if v.analyzed != Some(false) {
                    doc.add_text(f.terms, FieldTokenizer::encode(exact, &v.name, &text));
                }
                if v.facet || kind == "string" {
                    doc.add_text(f.facets, format!("{}{SEP}{}", v.name, text));
                }
                if v.facet || kind == "string" || text.len() <= MAX_SORT_STRING {
                    fast.entry(v.name.clone())
                        .or_default()
                        .push(OwnedValue::Str(text));
                }
            }
            _ => {}
        }
    }
    if !fast.is_empty() {
        let object = fast
            .into_iter()
            .map(|(k, mut vs)| {
                let v = if vs.len() == 1 {
                    vs.pop().expect("one value")
                } else {
                    OwnedValue::Array(vs)
                };
                (k, v)
            })
            .collect();
        doc.add_object(f.fast, object);
    }
    if !stored.is_empty() {
        doc.add_text(f.stored, Value::Object(stored).to_string());
    }
    doc
}

/// Adds a stored value; a name stored twice holds an array, latest first, as CouchDB
/// returns it.
fn store(stored: &mut serde_json::Map<String, Value>, name: &str, value: Value) {
    match stored.get_mut(name) {
        None => {
            stored.insert(name.to_string(), value);
        }
        Some(Value::Array(a)) => a.insert(0, value),
        Some(first) => {
            let old = first.take();
            *first = Value::Array(vec![value, old]);
        }
    }
}

/// The term for `text` in field `name` of `terms` (or of `facets`).
pub fn term(field: Field, name: &str, text: &str) -> Term {
    Term::from_field_text(field, &format!("{name}{SEP}{text}"))
}

/// One search index: its definition, files, reader, writer and position.
pub struct SearchIndex {
    def: IndexDef,
    analyzer: crate::analyzer::Analyzer,
    dir: PathBuf,
    index: tantivy::Index,
    reader: IndexReader,
    writer: Mutex<Option<IndexWriter<TantivyDocument>>>,
    meta: Mutex<IndexMeta>,
    /// Whether any document ever stored a field (else hits need no stored document).
    stored: std::sync::atomic::AtomicBool,
    fields: Fields,
    /// Its updates, shared by the clients waiting for them.
    pub(crate) updates: settee_db::Updates<Error>,
    /// Set when the index's files are being removed: updates stop, nothing more is written.
    closed: std::sync::atomic::AtomicBool,
    /// Each open segment's document ids by ordinal (see [`SearchIndex::segment_ids`]).
    ids: Mutex<HashMap<SegmentId, Arc<SegmentIds>>>,
}

/// A segment's document ids: the `id` column (document to ordinal) and every id by
/// ordinal. Reading an id from the column alone decodes part of a dictionary block, which
/// cost a third of a one-term query's time; segments never change, so this is read once.
pub struct SegmentIds {
    column: Option<StrColumn>,
    by_ord: Vec<Box<str>>,
}

impl SegmentIds {
    fn read(seg: &SegmentReader) -> Result<SegmentIds> {
        let column = seg.fast_fields().str("id")?;
        let mut by_ord = Vec::new();
        if let Some(c) = &column {
            let mut terms = c.dictionary().stream().map_err(|source| Error::Io {
                op: "read a search index",
                source,
            })?;
            while terms.advance() {
                by_ord.push(String::from_utf8_lossy(terms.key()).into());
            }
        }
        Ok(SegmentIds { column, by_ord })
    }

    /// The id of document `doc` of the segment.
    pub fn get(&self, doc: DocId) -> Option<&str> {
        let ord = self.column.as_ref()?.term_ords(doc).next()?;
        self.by_ord.get(ord as usize).map(|s| &**s)
    }
}

impl SearchIndex {
    /// Opens (or creates) the index of `def` under `root`, for a database of `q` shards.
    pub fn open(root: &Path, def: IndexDef, q: usize) -> Result<SearchIndex> {
        let dir = root.join(def.signature());
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            op: "create a search index directory",
            source,
        })?;
        let (schema, fields) = Fields::schema();
        let directory = tantivy::directory::MmapDirectory::open(&dir)
            .map_err(|e| Error::Index(tantivy::TantivyError::from(e)))?;
        let index = tantivy::Index::open_or_create(directory, schema)?;
        index
            .tokenizers()
            .register(TOKENIZER, FieldTokenizer::new(&def.analyzer, def.pairs));
        let (meta, stored) = read_meta(&index, q)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(SearchIndex {
            analyzer: def.analyzer.build(),
            def,
            dir,
            index,
            reader,
            writer: Mutex::new(None),
            meta: Mutex::new(meta),
            stored: std::sync::atomic::AtomicBool::new(stored),
            fields,
            updates: settee_db::Updates::default(),
            closed: std::sync::atomic::AtomicBool::new(false),
            ids: Mutex::new(HashMap::new()),
        })
    }

    /// The document ids of segment `seg` of `searcher`, read once per segment; segments the
    /// searcher no longer has are forgotten.
    pub fn segment_ids(
        &self,
        searcher: &tantivy::Searcher,
        seg: &SegmentReader,
    ) -> Result<Arc<SegmentIds>> {
        let id = seg.segment_id();
        if let Some(ids) = self.ids.lock().expect("ids lock").get(&id) {
            return Ok(ids.clone());
        }
        let ids = Arc::new(SegmentIds::read(seg)?);
        let mut cache = self.ids.lock().expect("ids lock");
        let live: HashSet<SegmentId> = searcher
            .segment_readers()
            .iter()
            .map(|s| s.segment_id())
            .collect();
        cache.retain(|k, _| live.contains(k));
        cache.insert(id, ids.clone());
        Ok(ids)
    }

    /// The definition it was opened with.
    pub fn def(&self) -> &IndexDef {
        &self.def
    }

    /// The index's analyzers (clone to run them).
    pub fn analyzer(&self) -> &crate::analyzer::Analyzer {
        &self.analyzer
    }

    /// The schema's fields.
    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    /// Where the index has got to.
    pub fn meta(&self) -> IndexMeta {
        self.meta.lock().expect("meta lock").clone()
    }

    /// A searcher over the last commit.
    pub fn searcher(&self) -> tantivy::Searcher {
        self.reader.searcher()
    }

    /// Adds a batch of `(id, document)` pairs (no document: the id leaves the index); they
    /// are searchable and durable after the next [`SearchIndex::commit`].
    pub fn add(&self, batch: Vec<(String, Option<TantivyDocument>)>) -> Result<()> {
        let mut guard = self.writer.lock().expect("writer lock");
        let writer = self.writer_in(&mut guard)?;
        for (id, doc) in batch {
            writer.delete_term(Term::from_field_text(self.fields.id, &id));
            if let Some(doc) = doc {
                if doc.get_first(self.fields.stored).is_some() {
                    self.stored
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                writer.add_document(doc)?;
            }
        }
        Ok(())
    }

    /// Makes everything added durable and searchable, with the position `meta`.
    pub fn commit(&self, meta: IndexMeta) -> Result<()> {
        let mut guard = self.writer.lock().expect("writer lock");
        let writer = self.writer_in(&mut guard)?;
        let payload = json!({
            "seq": meta.seq.0,
            "purge_seq": meta.purge_seq,
            "stored": self.has_stored(),
        })
        .to_string();
        let mut commit = writer.prepare_commit()?;
        commit.set_payload(&payload);
        commit.commit()?;
        self.reader.reload()?;
        *self.meta.lock().expect("meta lock") = meta;
        Ok(())
    }

    fn writer_in<'g>(
        &self,
        guard: &'g mut Option<IndexWriter<TantivyDocument>>,
    ) -> Result<&'g mut IndexWriter<TantivyDocument>> {
        if self.is_closed() {
            return Err(Error::NotFound("the index was removed".into()));
        }
        if guard.is_none() {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
            *guard = Some(
                self.index
                    .writer_with_num_threads(threads, WRITER_MEMORY * threads)?,
            );
        }
        Ok(guard.as_mut().expect("a writer"))
    }

    /// Stops writing the index for good: updates end at their next batch and the writer,
    /// with its merges, is finished, so the index's files can be removed.
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        let writer = self.writer.lock().expect("writer lock").take();
        if let Some(w) = writer {
            let _ = w.wait_merging_threads();
        }
    }

    /// Whether [`SearchIndex::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether any document has stored a field.
    pub fn has_stored(&self) -> bool {
        self.stored.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every document id the index holds.
    pub fn ids(&self) -> Result<Vec<String>> {
        let searcher = self.searcher();
        let mut out = Vec::new();
        for seg in searcher.segment_readers() {
            let ids = self.segment_ids(&searcher, seg)?;
            out.extend(
                seg.doc_ids_alive()
                    .filter_map(|d| ids.get(d).map(str::to_string)),
            );
        }
        Ok(out)
    }

    /// Bytes of the index's files.
    pub fn disk_size(&self) -> u64 {
        std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Live documents in the last commit.
    pub fn doc_count(&self) -> u64 {
        self.searcher().num_docs()
    }

    /// Whether an update or compaction holds the writer now.
    pub fn updating(&self) -> bool {
        self.updates.running()
    }

    /// Whether the index belongs to `_search` or `_nouveau`.
    pub fn flavor(&self) -> Flavor {
        self.def.flavor
    }
}

/// The position of the last commit, and whether any document stored fields.
fn read_meta(index: &tantivy::Index, q: usize) -> Result<(IndexMeta, bool)> {
    let metas = index.load_metas()?;
    let Some(payload) = metas.payload else {
        let meta = IndexMeta {
            seq: SeqVector::zero(q),
            purge_seq: 0,
        };
        return Ok((meta, false));
    };
    let v: Value =
        serde_json::from_str(&payload).map_err(|_| Error::Corrupted("search index position"))?;
    let seq: Vec<u64> = v
        .get("seq")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .ok_or(Error::Corrupted("search index position"))?;
    if seq.len() != q {
        return Err(Error::Corrupted("search index position"));
    }
    let meta = IndexMeta {
        seq: SeqVector(seq),
        purge_seq: v.get("purge_seq").and_then(Value::as_u64).unwrap_or(0),
    };
    Ok((
        meta,
        v.get("stored").and_then(Value::as_bool).unwrap_or(true),
    ))
}
