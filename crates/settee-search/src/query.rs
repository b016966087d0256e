//! Running a search: the compiled query over every segment, collecting the page of hits
//! after a bookmark in the requested order, the total, `counts` and `ranges` facets and
//! groups in one pass; then ids, stored fields and highlights for the hits on the page.

use std::cmp::Ordering;
use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{json, Map, Value};
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::{Column, StrColumn};
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query as TQuery, TermQuery};
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader, TantivyDocument, Term};

use crate::compile::{Compiled, Compiler, NumRange, Wanted};
use crate::error::{Error, Result};
use crate::highlight;
use crate::index::{Fields, SearchIndex};
use crate::lucene;

/// One key of a sort.
#[derive(Clone, Debug, PartialEq)]
pub enum SortKey {
    /// Relevance; `desc` is the usual order (best first).
    Score {
        /// Best first.
        desc: bool,
    },
    /// Index order (a stable number per document).
    Doc {
        /// Reversed.
        desc: bool,
    },
    /// A field's value.
    Field {
        /// The field.
        name: String,
        /// Largest first.
        desc: bool,
        /// Sorted as strings rather than numbers.
        string: bool,
    },
}

impl SortKey {
    /// Parses one `sort` item of `_search` (`-name<string>`, `<score>`, `<doc>`; a field
    /// without a type is a number).
    pub fn parse(item: &str) -> Result<SortKey> {
        let (desc, rest) = match item.as_bytes().first() {
            Some(b'-') => (true, &item[1..]),
            Some(b'+') => (false, &item[1..]),
            _ => (false, item),
        };
        match rest {
            "<score>" => return Ok(SortKey::Score { desc: !desc }),
            "<doc>" => return Ok(SortKey::Doc { desc }),
            _ => {}
        }
        let (name, ty) = match rest.strip_suffix('>').and_then(|r| r.split_once('<')) {
            Some((name, ty)) => (name, Some(ty)),
            None => (rest, None),
        };
        let word = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        };
        if !word(name) || ty.is_some_and(|t| !word(t)) {
            return Err(Error::BadRequest(format!(
                "Unrecognized sort parameter: {item}"
            )));
        }
        let string = match ty {
            None | Some("number") | Some("double") => false,
            Some("string") => true,
            Some(t) => return Err(Error::BadRequest(format!("Unrecognized type: {t}"))),
        };
        Ok(SortKey::Field {
            name: name.to_string(),
            desc,
            string,
        })
    }
}

/// A `ranges` facet: labels and their numeric ranges, per field.
pub type Ranges = Vec<(String, Vec<(String, NumRange)>)>;

/// Grouping of hits by a string field's value.
#[derive(Clone, Debug)]
pub struct Grouping {
    /// The field.
    pub field: String,
    /// Most groups.
    pub limit: usize,
    /// Order of the groups (by each group's first hit).
    pub sort: Vec<SortKey>,
}

/// Highlighting of hits' stored text.
#[derive(Clone, Debug)]
pub struct Highlight {
    /// Fields highlighted.
    pub fields: Vec<String>,
    /// Put before a match.
    pub pre: String,
    /// Put after a match.
    pub post: String,
    /// Most fragments per field.
    pub number: usize,
    /// Characters per fragment.
    pub size: usize,
}

/// What to search for and what to return.
#[derive(Clone, Debug, Default)]
pub struct SearchRequest {
    /// Lucene query.
    pub q: String,
    /// A query built rather than written, used in place of `q`: its wildcards, fuzzy terms
    /// and ranges are taken as written (Mango's text queries).
    pub query: Option<lucene::Query>,
    /// Most hits (per group when grouping).
    pub limit: usize,
    /// Order; empty is relevance.
    pub sort: Vec<SortKey>,
    /// Hits after this bookmark.
    pub bookmark: Option<String>,
    /// Stored fields returned (all when `None`).
    pub include_fields: Option<Vec<String>>,
    /// Fields whose values are counted.
    pub counts: Option<Vec<String>>,
    /// Numeric ranges counted.
    pub ranges: Option<Ranges>,
    /// Facet values hits must have (values of one field: any of them).
    pub drilldown: Vec<(String, Vec<String>)>,
    /// Group hits by a field.
    pub group: Option<Grouping>,
    /// Highlight stored text.
    pub highlight: Option<Highlight>,
    /// Only this partition's documents.
    pub partition: Option<String>,
}

/// One hit.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// Document id.
    pub id: String,
    /// Its sort values, the last its document number (as CouchDB's).
    pub order: Vec<Value>,
    /// Stored fields.
    pub fields: Map<String, Value>,
    /// Highlighted fragments per field, when asked for.
    pub highlights: Option<Map<String, Value>>,
}

/// One group of hits.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// The field's value (null for hits without one).
    pub by: Value,
    /// Hits in the group.
    pub total: u64,
    /// Its first hits.
    pub hits: Vec<Hit>,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchResult {
    /// Hits in all.
    pub total: u64,
    /// The page of hits.
    pub hits: Vec<Hit>,
    /// Where the next page starts (the last hit's order).
    pub bookmark: String,
    /// Values counted per field.
    pub counts: Option<Map<String, Value>>,
    /// Range counts per field.
    pub ranges: Option<Map<String, Value>>,
    /// Groups, when grouping.
    pub groups: Option<Vec<Group>>,
}

/// A sort value.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Null,
    Num(f64),
    Str(String),
}

impl Val {
    fn cmp(&self, other: &Val) -> Ordering {
        match (self, other) {
            (Val::Num(a), Val::Num(b)) => a.total_cmp(b),
            (Val::Str(a), Val::Str(b)) => a.cmp(b),
            (Val::Null, Val::Null) => Ordering::Equal,
            (Val::Null, _) => Ordering::Less,
            (_, Val::Null) => Ordering::Greater,
            (Val::Num(_), Val::Str(_)) => Ordering::Less,
            (Val::Str(_), Val::Num(_)) => Ordering::Greater,
        }
    }

    fn json(&self) -> Value {
        match self {
            Val::Null => Value::Null,
            Val::Num(x) => json!(x),
            Val::Str(s) => json!(s),
        }
    }

    fn from_json(v: &Value) -> Option<Val> {
        Some(match v {
            Value::Null => Val::Null,
            Value::Number(n) => Val::Num(n.as_f64()?),
            Value::String(s) => Val::Str(s.clone()),
            _ => return None,
        })
    }
}

/// How to compare two hits: the sort keys, then the document number ascending.
#[derive(Clone)]
struct Order {
    keys: Vec<SortKey>,
}

impl Order {
    fn cmp(&self, a: &[Val], b: &[Val]) -> Ordering {
        for (i, key) in self.keys.iter().enumerate() {
            let o = a[i].cmp(&b[i]);
            let desc = match key {
                SortKey::Score { desc } | SortKey::Doc { desc } | SortKey::Field { desc, .. } => {
                    *desc
                }
            };
            let o = if desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        a[self.keys.len()].cmp(&b[self.keys.len()])
    }
}

/// A collected hit: its sort values and where it is.
#[derive(Clone)]
struct Entry {
    vals: Vec<Val>,
    seg: SegmentOrdinal,
    doc: DocId,
}

/// The best `limit` entries seen: a binary max-heap by order, the worst on top.
struct Top {
    limit: usize,
    heap: Vec<Entry>,
}

impl Top {
    fn new(limit: usize) -> Top {
        Top {
            limit,
            heap: Vec::new(),
        }
    }

    /// Whether an entry with these values would make the page now.
    fn wants(&self, vals: &[Val], order: &Order) -> bool {
        self.limit > 0
            && (self.heap.len() < self.limit
                || order.cmp(vals, &self.heap[0].vals) == Ordering::Less)
    }

    fn offer(&mut self, e: Entry, order: &Order) {
        if !self.wants(&e.vals, order) {
            return;
        }
        if self.heap.len() < self.limit {
            self.heap.push(e);
            let mut i = self.heap.len() - 1;
            while i > 0 {
                let parent = (i - 1) / 2;
                if order.cmp(&self.heap[i].vals, &self.heap[parent].vals) != Ordering::Greater {
                    break;
                }
                self.heap.swap(i, parent);
                i = parent;
            }
        } else {
            self.heap[0] = e;
            let mut i = 0;
            loop {
                let (l, r) = (2 * i + 1, 2 * i + 2);
                let mut big = i;
                for c in [l, r] {
                    if c < self.heap.len()
                        && order.cmp(&self.heap[c].vals, &self.heap[big].vals) == Ordering::Greater
                    {
                        big = c;
                    }
                }
                if big == i {
                    break;
                }
                self.heap.swap(i, big);
                i = big;
            }
        }
    }

    fn sorted(mut self, order: &Order) -> Vec<Entry> {
        self.heap.sort_by(|a, b| order.cmp(&a.vals, &b.vals));
        self.heap
    }
}

/// Reads one sort key's value of a document in a segment.
enum KeyReader {
    Score,
    Doc(u32),
    Num(Option<Column<f64>>),
    Str(Option<StrColumn>),
}

impl KeyReader {
    fn open(key: &SortKey, seg: &SegmentReader, base: u32) -> tantivy::Result<KeyReader> {
        let ff = seg.fast_fields();
        Ok(match key {
            SortKey::Score { .. } => KeyReader::Score,
            SortKey::Doc { .. } => KeyReader::Doc(base),
            SortKey::Field {
                name,
                string: false,
                ..
            } => KeyReader::Num(ff.column_opt::<f64>(&Fields::column(name))?),
            SortKey::Field {
                name, string: true, ..
            } => KeyReader::Str(ff.str(&Fields::column(name))?),
        })
    }

    fn read(&self, doc: DocId, score: Score) -> Val {
        match self {
            KeyReader::Score => Val::Num(f64::from(score)),
            KeyReader::Doc(base) => Val::Num(f64::from(base + doc)),
            KeyReader::Num(c) => Val::Num(c.as_ref().and_then(|c| c.first(doc)).unwrap_or(0.0)),
            KeyReader::Str(c) => c
                .as_ref()
                .and_then(|c| str_of(c, doc))
                .map_or(Val::Null, Val::Str),
        }
    }
}

fn str_of(c: &StrColumn, doc: DocId) -> Option<String> {
    let ord = c.term_ords(doc).next()?;
    let mut s = String::new();
    c.ord_to_str(ord, &mut s).ok()?;
    Some(s)
}

/// What every segment's collector needs, shared.
struct Plan {
    order: Order,
    group_order: Option<Order>,
    limit: usize,
    after: Option<Vec<Val>>,
    counts: Vec<String>,
    ranges: Ranges,
    group: Option<Grouping>,
    scoring: bool,
    /// The number of each segment's first document (document numbers are the last key).
    bases: Vec<u32>,
}

/// The collector of one search.
struct Collect(std::sync::Arc<Plan>);

/// One group being collected.
struct GroupAcc {
    total: u64,
    top: Top,
    lead: Option<Entry>,
}

/// A group's findings: hits in all, its best hits, and its lead by the group order.
type GroupFound = (u64, Vec<Entry>, Option<Entry>);

/// What one segment (and, merged, the whole index) found.
#[derive(Default)]
struct Found {
    total: u64,
    top: Vec<Entry>,
    counts: HashMap<String, HashMap<String, u64>>,
    ranges: HashMap<String, Vec<u64>>,
    groups: HashMap<Option<String>, GroupFound>,
}

struct SegCollect {
    plan: std::sync::Arc<Plan>,
    seg: SegmentOrdinal,
    keys: Vec<KeyReader>,
    base: u32,
    group_keys: Vec<KeyReader>,
    top: Top,
    total: u64,
    counts: Vec<(Option<StrColumn>, Vec<u64>)>,
    ranges: Vec<(Option<Column<f64>>, Vec<u64>)>,
    group_col: Option<StrColumn>,
    groups: HashMap<Option<String>, GroupAcc>,
}

impl Collector for Collect {
    type Fruit = Found;
    type Child = SegCollect;

    fn for_segment(
        &self,
        seg: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<SegCollect> {
        let plan = &self.0;
        let ff = reader.fast_fields();
        let base = plan.bases.get(seg as usize).copied().unwrap_or(0);
        let open = |o: &Order| -> tantivy::Result<Vec<KeyReader>> {
            o.keys
                .iter()
                .map(|k| KeyReader::open(k, reader, base))
                .collect()
        };
        let keys = open(&plan.order)?;
        let group_keys = match &plan.group_order {
            Some(o) => open(o)?,
            None => Vec::new(),
        };
        let counts = plan
            .counts
            .iter()
            .map(|f| {
                let col = ff.str(&Fields::column(f))?;
                let n = col.as_ref().map_or(0, |c| c.num_terms());
                Ok((col, vec![0; n]))
            })
            .collect::<tantivy::Result<_>>()?;
        let ranges = plan
            .ranges
            .iter()
            .map(|(f, rs)| Ok((ff.column_opt::<f64>(&Fields::column(f))?, vec![0; rs.len()])))
            .collect::<tantivy::Result<_>>()?;
        let group_col = match &plan.group {
            Some(g) => ff.str(&Fields::column(&g.field))?,
            None => None,
        };
        Ok(SegCollect {
            plan: plan.clone(),
            seg,
            keys,
            base,
            group_keys,
            top: Top::new(if plan.group.is_some() { 0 } else { plan.limit }),
            total: 0,
            counts,
            ranges,
            group_col,
            groups: HashMap::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        self.0.scoring
    }

    fn merge_fruits(&self, fruits: Vec<Found>) -> tantivy::Result<Found> {
        let plan = &self.0;
        let mut all = Found::default();
        let mut top = Top::new(plan.limit);
        for f in fruits {
            all.total += f.total;
            for e in f.top {
                top.offer(e, &plan.order);
            }
            for (field, values) in f.counts {
                let into = all.counts.entry(field).or_default();
                for (v, n) in values {
                    *into.entry(v).or_default() += n;
                }
            }
            for (field, ns) in f.ranges {
                let into = all.ranges.entry(field).or_insert_with(|| vec![0; ns.len()]);
                for (i, n) in ns.into_iter().enumerate() {
                    into[i] += n;
                }
            }
            for (by, (n, hits, lead)) in f.groups {
                let g = all.groups.entry(by).or_insert((0, Vec::new(), None));
                g.0 += n;
                g.1.extend(hits);
                g.2 = better(
                    g.2.take(),
                    lead,
                    plan.group_order.as_ref().unwrap_or(&plan.order),
                );
            }
        }
        all.top = top.sorted(&plan.order);
        for g in all.groups.values_mut() {
            let mut t = Top::new(plan.limit);
            for e in g.1.drain(..) {
                t.offer(e, &plan.order);
            }
            g.1 = t.sorted(&plan.order);
        }
        Ok(all)
    }
}

fn better(a: Option<Entry>, b: Option<Entry>, order: &Order) -> Option<Entry> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if order.cmp(&b.vals, &a.vals) == Ordering::Less {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    }
}

impl SegCollect {
    fn vals(&self, keys: &[KeyReader], doc: DocId, score: Score) -> Vec<Val> {
        let mut v: Vec<Val> = keys.iter().map(|k| k.read(doc, score)).collect();
        v.push(Val::Num(f64::from(self.base + doc)));
        v
    }
}

impl SegCollect {
    /// A quick test on the first key alone: false when the document cannot make the page
    /// (its first key is worse than the page's worst), so most documents cost no values.
    fn may_enter(&self, doc: DocId, score: Score) -> bool {
        let Some(worst) = self.top.heap.first() else {
            return true;
        };
        if self.top.heap.len() < self.top.limit {
            return true;
        }
        let first = self.keys[0].read(doc, score);
        let o = first.cmp(&worst.vals[0]);
        let desc = match &self.plan.order.keys[0] {
            SortKey::Score { desc } | SortKey::Doc { desc } | SortKey::Field { desc, .. } => *desc,
        };
        let o = if desc { o.reverse() } else { o };
        o != Ordering::Greater
    }
}

impl SegmentCollector for SegCollect {
    type Fruit = Found;

    fn collect(&mut self, doc: DocId, score: Score) {
        self.total += 1;
        for (col, counted) in &mut self.counts {
            if let Some(col) = col {
                // A document's ordinals come sorted: count each value once.
                let mut last = None;
                for ord in col.ords().values_for_doc(doc) {
                    if last != Some(ord) {
                        counted[ord as usize] += 1;
                        last = Some(ord);
                    }
                }
            }
        }
        for (i, (col, counted)) in self.ranges.iter_mut().enumerate() {
            if let Some(col) = col {
                let xs: Vec<f64> = col.values_for_doc(doc).collect();
                for (j, (_, range)) in self.plan.ranges[i].1.iter().enumerate() {
                    if xs.iter().any(|x| range.contains(*x)) {
                        counted[j] += 1;
                    }
                }
            }
        }
        if self.plan.group.is_some() {
            let by = self.group_col.as_ref().and_then(|c| str_of(c, doc));
            let vals = self.vals(&self.keys, doc, score);
            let lead_vals = self
                .plan
                .group_order
                .as_ref()
                .map(|_| self.vals(&self.group_keys, doc, score));
            let (seg, limit) = (self.seg, self.plan.limit);
            let acc = self.groups.entry(by).or_insert_with(|| GroupAcc {
                total: 0,
                top: Top::new(limit),
                lead: None,
            });
            acc.total += 1;
            let entry = Entry { vals, seg, doc };
            let lead = Entry {
                vals: lead_vals.unwrap_or_else(|| entry.vals.clone()),
                seg,
                doc,
            };
            let order = self.plan.group_order.as_ref().unwrap_or(&self.plan.order);
            acc.lead = better(acc.lead.take(), Some(lead), order);
            acc.top.offer(entry, &self.plan.order);
            return;
        }
        if self.plan.limit == 0 {
            return;
        }
        if !self.may_enter(doc, score) {
            return;
        }
        let vals = self.vals(&self.keys, doc, score);
        if let Some(after) = &self.plan.after {
            if self.plan.order.cmp(&vals, after) != Ordering::Greater {
                return;
            }
        }
        if self.top.wants(&vals, &self.plan.order) {
            self.top.offer(
                Entry {
                    vals,
                    seg: self.seg,
                    doc,
                },
                &self.plan.order,
            );
        }
    }

    fn harvest(self) -> Found {
        let order = &self.plan.order;
        let mut found = Found {
            total: self.total,
            top: self.top.sorted(order),
            ..Found::default()
        };
        for (i, (col, counted)) in self.counts.into_iter().enumerate() {
            let mut values = HashMap::new();
            if let Some(col) = col {
                let mut s = String::new();
                for (ord, n) in counted.into_iter().enumerate().filter(|(_, n)| *n > 0) {
                    s.clear();
                    if col.ord_to_str(ord as u64, &mut s).unwrap_or(false) {
                        values.insert(s.clone(), n);
                    }
                }
            }
            found.counts.insert(self.plan.counts[i].clone(), values);
        }
        for (i, (_, counted)) in self.ranges.into_iter().enumerate() {
            found.ranges.insert(self.plan.ranges[i].0.clone(), counted);
        }
        for (by, acc) in self.groups {
            found
                .groups
                .insert(by, (acc.total, acc.top.sorted(order), acc.lead));
        }
        found
    }
}

impl SearchRequest {
    /// Whether the request wants hits by relevance and nothing else: no sort, counts,
    /// ranges or groups (the first page of which [`top_by_relevance`] finds fastest).
    fn by_relevance_alone(&self) -> bool {
        self.sort.is_empty()
            && self.counts.is_none()
            && self.ranges.is_none()
            && self.group.is_none()
    }
}

/// Most documents a one-term query may match and still be run on the thread that asked
/// ([`SearchIndex::search_if_quick`]): its first page then takes well under a millisecond.
pub const QUICK_POSTINGS: u64 = 1 << 20;

/// A request's compiled query and what it asks for.
struct Asked {
    query: Compiled,
    wanted: Wanted,
    analyzer: crate::analyzer::Analyzer,
}

impl SearchIndex {
    /// Runs `req` over the index's last commit.
    pub fn search(&self, req: &SearchRequest) -> Result<SearchResult> {
        let asked = self.compile(req)?;
        self.answer(req, asked)
    }

    /// Runs `req` if it is quick to answer, on the caller's thread: the first page by
    /// relevance of one term in at most [`QUICK_POSTINGS`] documents (which costs a fraction
    /// of a millisecond, less than handing it to another thread), or a query that does not
    /// compile. `None` for any other request, to be run with [`SearchIndex::search`] where
    /// a long search holds up nothing else.
    pub fn search_if_quick(&self, req: &SearchRequest) -> Option<Result<SearchResult>> {
        // Partitions and drilldowns would add filters: not one term.
        let plain = req.by_relevance_alone()
            && req.bookmark.is_none()
            && req.highlight.is_none()
            && req.partition.is_none()
            && req.drilldown.is_empty();
        if !plain {
            return None;
        }
        let asked = match self.compile(req) {
            Ok(asked) => asked,
            Err(e) => return Some(Err(e)),
        };
        let term = asked.query.downcast_ref::<TermQuery>()?.term();
        let postings = self.searcher().doc_freq(term).unwrap_or(u64::MAX);
        (postings <= QUICK_POSTINGS).then(|| self.answer(req, asked))
    }

    /// The query of `req`, its filters applied, and what it asks for.
    fn compile(&self, req: &SearchRequest) -> Result<Asked> {
        let mut analyzer = self.analyzer().clone();
        let mut compiler = Compiler::new(self.fields(), &mut analyzer, self.def().pairs);
        let mut query = match &req.query {
            Some(built) => {
                compiler = compiler.exact();
                compiler.compile(built)?
            }
            None => compiler.compile(&lucene::parse(&req.q, "default")?)?,
        };
        let filters = self.filters(req, &compiler);
        let wanted = std::mem::take(&mut compiler.wanted);
        if !filters.is_empty() {
            let mut clauses = vec![(Occur::Must, query)];
            clauses.extend(filters.into_iter().map(|f| (Occur::Must, f)));
            query = Box::new(BooleanQuery::new(clauses));
        }
        Ok(Asked {
            query,
            wanted,
            analyzer,
        })
    }

    /// Runs a compiled request.
    fn answer(&self, req: &SearchRequest, asked: Asked) -> Result<SearchResult> {
        let Asked {
            query,
            wanted,
            mut analyzer,
        } = asked;
        let keys = if req.sort.is_empty() {
            vec![SortKey::Score { desc: true }]
        } else {
            req.sort.clone()
        };
        let order = Order { keys };
        let after = match req.bookmark.as_deref() {
            Some(b) => decode_bookmark(b, order.keys.len())?,
            None => None,
        };
        let group_order = req.group.as_ref().map(|g| Order {
            keys: if g.sort.is_empty() {
                vec![SortKey::Score { desc: true }]
            } else {
                g.sort.clone()
            },
        });
        let uses_score = |o: &Order| o.keys.iter().any(|k| matches!(k, SortKey::Score { .. }));
        let scoring = uses_score(&order) || group_order.as_ref().is_some_and(uses_score);
        let searcher = self.searcher();
        let mut bases = Vec::new();
        let mut next = 0u32;
        for seg in searcher.segment_readers() {
            bases.push(next);
            next += seg.max_doc();
        }
        let plain = req.by_relevance_alone() && after.is_none();
        let found = if plain {
            top_by_relevance(&searcher, &query, req.limit, &bases)?
        } else {
            let plan = Plan {
                order: order.clone(),
                group_order,
                limit: req.limit,
                after,
                counts: req.counts.clone().unwrap_or_default(),
                ranges: req.ranges.clone().unwrap_or_default(),
                group: req.group.clone(),
                scoring,
                bases,
            };
            searcher.search(&query, &Collect(std::sync::Arc::new(plan)))?
        };
        let mut page = Page {
            index: self,
            searcher: &searcher,
            req,
            wanted: &wanted,
            analyzer: &mut analyzer,
        };
        let hits = found
            .top
            .iter()
            .map(|e| page.hit(e))
            .collect::<Result<Vec<_>>>()?;
        let bookmark = match found.top.last() {
            Some(e) => encode_bookmark(&e.vals),
            None => req.bookmark.clone().unwrap_or_else(|| encode_bookmark(&[])),
        };
        let groups = match &req.group {
            Some(g) => Some(page.groups(found.groups, g)?),
            None => None,
        };
        Ok(SearchResult {
            total: found.total,
            hits,
            bookmark,
            counts: req
                .counts
                .as_ref()
                .map(|fields| counts_json(fields, &found.counts)),
            ranges: req.ranges.as_ref().map(|r| ranges_json(r, &found.ranges)),
            groups,
        })
    }

    /// The partition and drilldown filters of a request, scoring nothing.
    fn filters(&self, req: &SearchRequest, compiler: &Compiler) -> Vec<Compiled> {
        let mut out: Vec<Compiled> = Vec::new();
        if let Some(p) = &req.partition {
            let t = Term::from_field_text(self.fields().part, p);
            out.push(Box::new(TermQuery::new(t, IndexRecordOption::Basic)));
        }
        for (field, values) in &req.drilldown {
            out.push(compiler.drilldown(field, values));
        }
        out.into_iter()
            .map(|q| Box::new(ConstScoreQuery::new(q, 0.0)) as Box<dyn TQuery>)
            .collect()
    }
}

/// The first page by relevance, the way an index answers it fastest: the total counted
/// without scoring (from the postings' document counts where it can), the best hits found
/// skipping blocks that cannot make the page (for one term, also those that can only tie
/// it: [`crate::one_term`]). Ties go to the lower document number, as the
/// general collector orders them too.
fn top_by_relevance(
    searcher: &tantivy::Searcher,
    query: &Compiled,
    limit: usize,
    bases: &[u32],
) -> Result<Found> {
    let total = query.count(searcher)? as u64;
    let entry = |score: f32, seg: SegmentOrdinal, doc: DocId| Entry {
        vals: vec![
            Val::Num(f64::from(score)),
            Val::Num(f64::from(bases[seg as usize] + doc)),
        ],
        seg,
        doc,
    };
    let one_term = query.downcast_ref::<TermQuery>();
    let top = if limit == 0 || total == 0 {
        Vec::new()
    } else if let Some(term) = one_term {
        crate::one_term::best_of_term(searcher, term, limit)?
            .into_iter()
            .map(|h| entry(h.score, h.seg, h.doc))
            .collect()
    } else {
        searcher
            .search(query, &tantivy::collector::TopDocs::with_limit(limit))?
            .into_iter()
            .map(|(score, at)| entry(score, at.segment_ord, at.doc_id))
            .collect()
    };
    Ok(Found {
        total,
        top,
        ..Found::default()
    })
}

/// Turns collected entries into hits.
struct Page<'a> {
    index: &'a SearchIndex,
    searcher: &'a tantivy::Searcher,
    req: &'a SearchRequest,
    wanted: &'a Wanted,
    analyzer: &'a mut crate::analyzer::Analyzer,
}

impl Page<'_> {
    fn hit(&mut self, e: &Entry) -> Result<Hit> {
        let f = self.index.fields();
        let seg = self.searcher.segment_reader(e.seg);
        let id = self
            .index
            .segment_ids(self.searcher, seg)?
            .get(e.doc)
            .unwrap_or_default()
            .to_string();
        // Documents are read from the store only when some document stored fields.
        let stored: Map<String, Value> = if self.index.has_stored() {
            let doc: TantivyDocument = self.searcher.doc(DocAddress::new(e.seg, e.doc))?;
            doc.get_first(f.stored)
                .and_then(|v| v.as_str())
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or_default()
        } else {
            Map::new()
        };
        let highlights = self
            .req
            .highlight
            .as_ref()
            .map(|h| highlight::fields(h, &stored, self.wanted, self.analyzer));
        let fields = match &self.req.include_fields {
            None => stored,
            Some(names) => stored
                .into_iter()
                .filter(|(k, _)| names.contains(k))
                .collect(),
        };
        // The document number last, a whole number as CouchDB writes it.
        let mut order: Vec<Value> = e.vals.iter().map(Val::json).collect();
        if let Some(Val::Num(n)) = e.vals.last() {
            order.pop();
            order.push(json!(*n as u64));
        }
        Ok(Hit {
            id,
            order,
            fields,
            highlights,
        })
    }

    fn groups(
        &mut self,
        found: HashMap<Option<String>, GroupFound>,
        g: &Grouping,
    ) -> Result<Vec<Group>> {
        let group_order = if g.sort.is_empty() {
            Order {
                keys: vec![SortKey::Score { desc: true }],
            }
        } else {
            Order {
                keys: g.sort.clone(),
            }
        };
        let mut groups: Vec<(Option<String>, GroupFound)> = found.into_iter().collect();
        groups.sort_by(|a, b| match (&a.1 .2, &b.1 .2) {
            (Some(x), Some(y)) => group_order.cmp(&x.vals, &y.vals),
            _ => Ordering::Equal,
        });
        groups
            .into_iter()
            .take(g.limit)
            .map(|(by, (total, entries, _))| {
                Ok(Group {
                    by: by.map_or(Value::Null, Value::String),
                    total,
                    hits: entries.iter().map(|e| self.hit(e)).collect::<Result<_>>()?,
                })
            })
            .collect()
    }
}

fn counts_json(
    fields: &[String],
    found: &HashMap<String, HashMap<String, u64>>,
) -> Map<String, Value> {
    fields
        .iter()
        .map(|f| {
            let mut values: Vec<(&String, &u64)> =
                found.get(f).map(|m| m.iter().collect()).unwrap_or_default();
            values.sort_by(|a, b| a.0.cmp(b.0));
            let m: Map<String, Value> = values
                .into_iter()
                .map(|(k, n)| (k.clone(), json!(n)))
                .collect();
            (f.clone(), Value::Object(m))
        })
        .collect()
}

fn ranges_json(ranges: &Ranges, found: &HashMap<String, Vec<u64>>) -> Map<String, Value> {
    ranges
        .iter()
        .map(|(f, labels)| {
            let ns = found.get(f);
            let m: Map<String, Value> = labels
                .iter()
                .enumerate()
                .map(|(i, (label, _))| (label.clone(), json!(ns.map_or(0, |n| n[i]))))
                .collect();
            (f.clone(), Value::Object(m))
        })
        .collect()
}

/// The bookmark of a page ending at a hit whose `order` this is: the next page starts
/// after it.
pub fn bookmark_of(order: &[Value]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Value::Array(order.to_vec()).to_string())
}

/// A bookmark: the last hit's sort values as URL-safe base64 JSON.
fn encode_bookmark(vals: &[Val]) -> String {
    bookmark_of(&vals.iter().map(Val::json).collect::<Vec<_>>())
}

/// The sort values a bookmark holds; `None` for the bookmark of an empty page.
fn decode_bookmark(b: &str, keys: usize) -> Result<Option<Vec<Val>>> {
    let bad = || Error::BadRequest("Invalid bookmark parameter supplied".into());
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(b.trim_end_matches('='))
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let vals: Vec<Val> = v
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(Val::from_json)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    if vals.is_empty() {
        return Ok(None);
    }
    if vals.len() != keys + 1 {
        return Err(Error::BadRequest(
            "sort order not compatible with given bookmark".into(),
        ));
    }
    Ok(Some(vals))
}
