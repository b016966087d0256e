//! `_find` and `_explain`: a query planned on the database's indexes, the chosen index
//! brought up to date (unless `update: false`), then its candidates read in order, matched,
//! skipped, limited and projected, each result handed on as it is found, with CouchDB's
//! bookmark, warnings and `execution_stats`.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};
use settee_db::{Database, DbSnapshot, DocOptions};
use settee_search::analyzer::Flavor;
use settee_search::{IndexDef, Search, SearchIndex, SearchRequest, SortKey};
use settee_store::Snapshot;
use settee_views::{Index as ViewIndex, Views};

use crate::def::JsonIndex;
use crate::index::{all_docs_cursor, all_indexes, parse};
use crate::plan::{plan, Chosen, Plan};
use crate::project::{project_one, put_path};
use crate::query::{encode_bookmark, Bookmark};
use crate::selector::Range;
use crate::text::TextIndex;
use crate::text_query::TextQuery;
use crate::{scan, Error, FindQuery, Result};

/// What CouchDB adds when a query reads many more documents than it returns.
const SCANNED_MANY: &str =
    "The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.";

/// Settings a query runs under.
#[derive(Debug, Clone, Copy)]
pub struct FindSettings {
    /// Warn when documents examined per document returned exceed this (`[mango]
    /// index_scan_warning_threshold`; 0: never).
    pub scan_warning_threshold: u64,
}

/// How a query went, for the end of its answer.
#[derive(Debug)]
pub struct Summary {
    /// Where the next page starts.
    pub bookmark: String,
    /// CouchDB's warnings, one a line.
    pub warnings: Vec<String>,
    /// Index rows read.
    pub keys_examined: u64,
    /// Documents read.
    pub docs_examined: u64,
    /// Documents returned.
    pub returned: u64,
    /// How long the query ran, in milliseconds.
    pub execution_time_ms: f64,
    /// The selector can match nothing: CouchDB answers such a query with its `docs` alone.
    pub unsatisfiable: bool,
}

impl Summary {
    /// The members after `docs` in CouchDB's answer, in its order: `bookmark`, then
    /// `execution_stats` when `stats`, then `warning` when there is one.
    pub fn tail(&self, stats: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if self.unsatisfiable {
            return out;
        }
        out.insert("bookmark".into(), json!(self.bookmark));
        if stats {
            out.insert(
                "execution_stats".into(),
                json!({
                    "total_keys_examined": self.keys_examined,
                    "total_docs_examined": self.docs_examined,
                    "total_quorum_docs_examined": 0,
                    "results_returned": self.returned,
                    "execution_time_ms": self.execution_time_ms,
                }),
            );
        }
        if !self.warnings.is_empty() {
            out.insert("warning".into(), json!(self.warnings.join("\n")));
        }
        out
    }
}

/// A page of results, gathered.
#[derive(Debug)]
pub struct Found {
    /// The documents, projected to the query's `fields`.
    pub docs: Vec<Value>,
    /// How the query went.
    pub summary: Summary,
}

impl Found {
    /// The `_find` answer as CouchDB gives it, with `execution_stats` when `stats`.
    pub fn to_json(&self, stats: bool) -> Value {
        let mut out = Map::new();
        out.insert("docs".into(), Value::Array(self.docs.clone()));
        out.extend(self.summary.tail(stats));
        Value::Object(out)
    }
}

/// Most documents a query on a text index returns, and most hits read at once (CouchDB's
/// `[dreyfus] max_limit`).
const TEXT_MAX_LIMIT: u64 = 200;

/// The indexes a query may run on: views for JSON indexes, search for text indexes.
#[derive(Clone, Copy)]
pub struct Engines<'a> {
    /// JSON indexes' views.
    pub views: &'a Views,
    /// Text indexes' search indexes.
    pub search: &'a Search,
}

/// A planned query, its index up to date, ready to run.
pub struct Prepared {
    query: FindQuery,
    plan: Plan,
    snap: DbSnapshot,
    view: Option<(Arc<ViewIndex>, usize, Snapshot)>,
    text: Option<TextRun>,
    settings: FindSettings,
    started: Instant,
}

/// A query on a text index: the index, the query run on it, and its sort.
struct TextRun {
    index: Arc<SearchIndex>,
    query: settee_search::lucene::Query,
    sort: Vec<SortKey>,
}

/// Plans `query` on `db` and brings the chosen index up to date (as the query asks).
pub async fn prepare(
    engines: Engines<'_>,
    db: &Arc<Database>,
    query: FindQuery,
    settings: FindSettings,
) -> Result<Prepared> {
    let started = Instant::now();
    let snap = db.snapshot();
    let (mut query, mut plan) = planned(&snap, query).await?;
    if let Some(refusal) = plan.refusal.take() {
        return Err(refusal);
    }
    if query.foreign_bookmark && !matches!(plan.chosen, Chosen::Text(_)) {
        return Err(Error::query(
            "invalid_bookmark",
            format!("Invalid bookmark value: {}", json!(query.bookmark)),
        ));
    }
    let view = match &plan.chosen {
        Chosen::Json(index, _) => {
            Some(open_view(engines.views, db, &snap, index, query.update).await?)
        }
        _ => None,
    };
    let text = match &plan.chosen {
        Chosen::Text(index) => {
            query.limit = query.limit.min(TEXT_MAX_LIMIT);
            Some(open_text(engines.search, db, &snap, index, &query).await?)
        }
        _ => None,
    };
    Ok(Prepared {
        query,
        plan,
        snap: db.snapshot(),
        view,
        text,
        settings,
        started,
    })
}

/// The search index behind text index `index`, brought up to date when the query asks,
/// with the query and sort to run on it.
async fn open_text(
    search: &Search,
    db: &Arc<Database>,
    snap: &DbSnapshot,
    index: &TextIndex,
    query: &FindQuery,
) -> Result<TextRun> {
    let text = TextQuery::new(&query.selector.to_json())?;
    let sort = crate::text_query::sort(query)?;
    let body = snap.open_doc(&index.ddoc, None, &DocOptions::default())?;
    let ddoc = parse(&body)?;
    let def = IndexDef::find(
        &index.ddoc,
        &ddoc,
        &index.name,
        Flavor::Search,
        snap.partitioned(),
    )?;
    let ix = search.index(db, def)?;
    if query.update {
        search.refresh(db, &ix).await?;
    }
    Ok(TextRun {
        index: ix,
        query: text.query(),
        sort,
    })
}

/// A search failure as Mango reports it: a refused bookmark, CouchDB's `text_search_error`
/// for a query the index refuses, else the failure itself.
fn text_error(e: settee_search::Error, bookmark: &str) -> Error {
    use settee_search::Error as S;
    match e {
        S::BadRequest(m) if m.contains("bookmark") => Error::query(
            "invalid_bookmark",
            format!("Invalid bookmark value: {}", json!(bookmark)),
        ),
        S::BadRequest(m) | S::QueryParse(m) => Error::query("text_search_error", m),
        e => Error::Search(e),
    }
}

/// `query` planned on the indexes of a database as `snap` has them.
async fn planned(snap: &DbSnapshot, query: FindQuery) -> Result<(FindQuery, Plan)> {
    if !query.partition.is_empty() && !snap.partitioned() {
        return Err(Error::query(
            "query_parse_error",
            "`partition` parameter is not supported on this db",
        ));
    }
    let snap = snap.clone();
    tokio::task::spawn_blocking(move || {
        let (indexes, texts) = all_indexes(&snap)?;
        let plan = plan(&indexes, &texts, &query, snap.partitioned())?;
        Ok::<_, Error>((query, plan))
    })
    .await
    .map_err(|_| Error::Db(settee_db::Error::Corrupted("a query planner panicked")))?
}

/// `POST /{db}/_explain`'s answer for `query`.
pub async fn explain(db: &Arc<Database>, query: FindQuery) -> Result<Value> {
    let (query, plan) = planned(&db.snapshot(), query).await?;
    Ok(crate::explain::explain(db, &query, &plan))
}

/// The view behind a JSON index, brought up to date when `update`. Its design document is
/// read from the snapshot the query was planned on, so the index opened is the one planned
/// (one redefined since has another signature, so another index).
async fn open_view(
    views: &Views,
    db: &Arc<Database>,
    snap: &DbSnapshot,
    index: &JsonIndex,
    update: bool,
) -> Result<(Arc<ViewIndex>, usize, Snapshot)> {
    let name = index
        .ddoc
        .strip_prefix(settee_db::DESIGN_PREFIX)
        .unwrap_or(&index.ddoc);
    let ddoc = Views::design_doc(snap, name)?;
    let (view, _) = ddoc
        .view(&index.name)
        .ok_or_else(|| Error::query("no_usable_index", "Index not found"))?;
    let vindex = views.index(db, &ddoc)?;
    if update {
        views.refresh(db, &vindex).await?;
    }
    let snap = vindex.snapshot();
    Ok((vindex, view, snap))
}

/// Plans and runs `query`, gathering the page.
pub async fn find(
    engines: Engines<'_>,
    db: &Arc<Database>,
    query: FindQuery,
    settings: FindSettings,
) -> Result<Found> {
    let prepared = prepare(engines, db, query, settings).await?;
    tokio::task::spawn_blocking(move || {
        let mut docs = Vec::new();
        let summary = prepared.run(&mut |doc| {
            docs.push(doc);
            true
        })?;
        Ok(Found { docs, summary })
    })
    .await
    .map_err(|_| Error::Db(settee_db::Error::Corrupted("a query panicked")))?
}

/// Where a run has got: rows and documents read, matches passed, the last row passed.
#[derive(Default)]
struct Progress {
    keys: u64,
    docs: u64,
    skipped: u64,
    returned: u64,
    evaluated: u64,
    last: Option<Bookmark>,
    /// Where a text index's hits were read to.
    text_bookmark: Option<String>,
}

impl Prepared {
    /// Whether the query asks for `execution_stats`.
    pub fn execution_stats(&self) -> bool {
        self.query.execution_stats
    }

    /// Runs the query (blocking: it reads the index and documents), handing each result to
    /// `emit` in order; `emit` answers false to stop (its client has gone).
    pub fn run(&self, emit: &mut dyn FnMut(Value) -> bool) -> Result<Summary> {
        let mut p = Progress::default();
        let unsatisfiable = self.query.selector.matches_nothing();
        if self.query.limit > 0 && !unsatisfiable {
            match (&self.plan.chosen, &self.view, &self.text) {
                (Chosen::Json(index, ranges), Some((vindex, view, isnap)), _) => {
                    let rows = self.rows(vindex, *view, isnap, ranges)?;
                    self.run_json(index, rows, &mut p, emit)?
                }
                (Chosen::Text(_), _, Some(run)) => self.run_text(run, &mut p, emit)?,
                _ => self.run_all_docs(&mut p, emit)?,
            }
        }
        let mut warnings = self.plan.warnings.clone();
        let threshold = self.settings.scan_warning_threshold;
        let scanned_many = threshold > 0 && p.docs / p.returned.max(1) > threshold;
        if scanned_many {
            warnings.push(SCANNED_MANY.to_string());
        }
        self.count(&p, scanned_many);
        Ok(Summary {
            // As CouchDB: a page that moved nothing answers the bookmark it was given.
            bookmark: match (&p.text_bookmark, &p.last) {
                (Some(b), _) => b.clone(),
                (None, Some(last)) if self.text.is_none() => encode_bookmark(last),
                _ => self.query.bookmark.clone(),
            },
            warnings,
            keys_examined: p.keys,
            docs_examined: p.docs,
            returned: p.returned,
            // Milliseconds to the microsecond, as CouchDB writes them.
            execution_time_ms: (self.started.elapsed().as_secs_f64() * 1e6).round() / 1000.0,
            unsatisfiable,
        })
    }

    /// Counts a finished run in the node's statistics.
    fn count(&self, p: &Progress, scanned_many: bool) {
        use settee_metrics::{add, inc, observe, Metric};
        add(Metric::MangoKeysExamined, p.keys);
        add(Metric::MangoDocsExamined, p.docs);
        add(Metric::MangoResultsReturned, p.returned);
        add(Metric::MangoEvaluateSelector, p.evaluated);
        if self.plan.chosen == Chosen::AllDocs {
            inc(Metric::MangoUnindexedQueries);
        }
        if scanned_many {
            inc(Metric::MangoTooManyDocsScanned);
        }
        // The plan warns of nothing but a missing index and an unusable `use_index`.
        if self
            .plan
            .warnings
            .iter()
            .any(|w| w != crate::plan::NO_INDEX)
        {
            inc(Metric::MangoQueryInvalidIndex);
        }
        observe(
            Metric::MangoQueryTime,
            self.started.elapsed().as_secs_f64() * 1000.0,
        );
    }

    /// Offers a candidate: matched, skipped or emitted; whether to go on.
    fn offer(
        &self,
        doc: Value,
        at: Bookmark,
        p: &mut Progress,
        emit: &mut dyn FnMut(Value) -> bool,
    ) -> bool {
        p.evaluated += 1;
        if !self.query.selector.matches(&doc) {
            return true;
        }
        // Skipped matches move the bookmark too, as in CouchDB.
        p.last = Some(at);
        if p.skipped < self.query.skip {
            p.skipped += 1;
            return true;
        }
        p.returned += 1;
        emit(project_one(doc, self.query.fields.as_deref())) && p.returned < self.query.limit
    }

    /// After a page filled up: CouchDB reads the row after it too, and counts it.
    fn count_one_more<T>(&self, rows: &mut impl Iterator<Item = T>, p: &mut Progress) {
        if p.returned >= self.query.limit && rows.next().is_some() {
            p.keys += 1;
            p.docs += u64::from(!self.plan.covering);
        }
    }

    fn run_all_docs(&self, p: &mut Progress, emit: &mut dyn FnMut(Value) -> bool) -> Result<()> {
        let mut rows = all_docs_cursor(&self.snap, &self.query)?;
        for candidate in rows.by_ref() {
            let (id, doc) = candidate?;
            // Design documents are read and counted, never returned.
            p.keys += 1;
            p.docs += 1;
            let Some(doc) = doc else { continue };
            if !self.offer(doc, Bookmark { key: None, id }, p, emit) {
                break;
            }
        }
        self.count_one_more(&mut rows, p);
        Ok(())
    }

    /// Reads a text index's hits in pages (after the query's bookmark), each hit's document
    /// matched against the selector again; the bookmark moves with every hit read.
    fn run_text(
        &self,
        run: &TextRun,
        p: &mut Progress,
        emit: &mut dyn FnMut(Value) -> bool,
    ) -> Result<()> {
        let q = &self.query;
        let given = Some(q.bookmark.clone()).filter(|b| b != "nil");
        let mut req = SearchRequest {
            query: Some(run.query.clone()),
            limit: (q.limit + q.skip).min(TEXT_MAX_LIMIT) as usize,
            sort: run.sort.clone(),
            bookmark: given,
            partition: Some(q.partition.clone()).filter(|p| !p.is_empty()),
            ..SearchRequest::default()
        };
        let opts = DocOptions {
            conflicts: q.conflicts,
            ..DocOptions::default()
        };
        loop {
            let found = run
                .index
                .search(&req)
                .map_err(|e| text_error(e, &q.bookmark))?;
            p.text_bookmark = Some(found.bookmark.clone());
            if found.hits.is_empty() {
                return Ok(());
            }
            for hit in found.hits {
                let at = settee_search::bookmark_of(&hit.order);
                p.text_bookmark = Some(at.clone());
                req.bookmark = Some(at);
                let doc = match self.snap.open_doc(&hit.id, None, &opts) {
                    Ok(bytes) => parse(&bytes)?,
                    // Gone since the index was updated (`update: false`).
                    Err(settee_db::Error::NotFound(_)) => continue,
                    Err(e) => return Err(e.into()),
                };
                p.docs += 1;
                let at = Bookmark {
                    key: None,
                    id: hit.id,
                };
                if !self.offer(doc, at, p, emit) {
                    return Ok(());
                }
            }
        }
    }

    /// The index rows in the selector's ranges, in the query's order, after its bookmark.
    fn rows(
        &self,
        vindex: &ViewIndex,
        view: usize,
        isnap: &Snapshot,
        ranges: &[Option<Range>],
    ) -> Result<impl Iterator<Item = settee_views::Result<settee_views::MapRow>>> {
        let (low, high) = scan::bounds(ranges);
        let after = self.query.after.as_ref().filter(|b| b.key.is_some());
        let (start, end) = scan::walk(low, high, self.query.descending, after);
        Ok(settee_views::query::map_rows_between(
            vindex,
            isnap,
            view,
            (start, end),
            self.query.descending,
            Some(self.query.partition.as_str()).filter(|p| !p.is_empty()),
        )?)
    }

    fn run_json(
        &self,
        index: &JsonIndex,
        rows: impl Iterator<Item = settee_views::Result<settee_views::MapRow>>,
        p: &mut Progress,
        emit: &mut dyn FnMut(Value) -> bool,
    ) -> Result<()> {
        let columns = index.columns();
        let opts = DocOptions {
            conflicts: self.query.conflicts,
            ..DocOptions::default()
        };
        let mut rows = rows;
        for row in rows.by_ref() {
            let row = row?;
            p.keys += 1;
            let key: Value = settee_json::deep::from_slice(row.key.as_bytes())
                .map_err(|_| settee_db::Error::Corrupted("an index key is not JSON"))?;
            let doc = if self.plan.covering {
                covered(&columns, &key, &row.id)
            } else {
                match self.snap.open_doc(&row.id, None, &opts) {
                    Ok(bytes) => {
                        p.docs += 1;
                        parse(&bytes)?
                    }
                    // Gone since the index was updated (`update: false`).
                    Err(settee_db::Error::NotFound(_)) => continue,
                    Err(e) => return Err(e.into()),
                }
            };
            let at = Bookmark {
                key: Some(key),
                id: row.id,
            };
            if !self.offer(doc, at, p, emit) {
                break;
            }
        }
        self.count_one_more(&mut rows, p);
        Ok(())
    }
}

/// A document made from an index row alone: the indexed fields and `_id`.
fn covered(columns: &[Vec<String>], key: &Value, id: &str) -> Value {
    let mut doc = json!({ "_id": id });
    if let Value::Array(values) = key {
        for (path, v) in columns.iter().zip(values) {
            put_path(&mut doc, path, v.clone());
        }
    }
    doc
}
