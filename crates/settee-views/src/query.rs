//! Reading a view: key ranges in collation order (map rows), and reductions over ranges or
//! groups read from the reductions stored in the tree (O(log n) per range end and group).

use serde_json::Value;
use settee_json::viewkey::{self, Collation};
use settee_store::{Bound, Group, RangeOptions, Snapshot};

use crate::error::{Error, Result};
use crate::index::Index;
use crate::row;

/// How reduce rows are grouped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Grouping {
    /// One reduction over the whole range (`group=false`, `group_level=0`).
    #[default]
    All,
    /// One row per distinct key (`group=true`).
    Exact,
    /// One row per distinct array prefix of this length (`group_level=N`).
    Level(usize),
}

/// A view query's range and paging, with CouchDB's parameters already parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewQuery {
    /// `startkey`.
    pub start_key: Option<Value>,
    /// `startkey_docid` (used with `startkey`).
    pub start_docid: Option<String>,
    /// `endkey`.
    pub end_key: Option<Value>,
    /// `endkey_docid` (used with `endkey`).
    pub end_docid: Option<String>,
    /// `inclusive_end`.
    pub inclusive_end: bool,
    /// `descending`.
    pub descending: bool,
    /// `skip`.
    pub skip: u64,
    /// `limit`.
    pub limit: Option<u64>,
    /// `keys` (and `key`, as a single key).
    pub keys: Option<Vec<Value>>,
    /// How reduce rows are grouped.
    pub grouping: Grouping,
    /// The partition read, for a partitioned view (`/{db}/_partition/{p}/…`, `partition`).
    pub partition: Option<String>,
}

impl Default for ViewQuery {
    fn default() -> ViewQuery {
        ViewQuery {
            start_key: None,
            start_docid: None,
            end_key: None,
            end_docid: None,
            inclusive_end: true,
            descending: false,
            skip: 0,
            limit: None,
            keys: None,
            grouping: Grouping::All,
            partition: None,
        }
    }
}

/// One map row.
#[derive(Clone, Debug, PartialEq)]
pub struct MapRow {
    /// The emitting document.
    pub id: String,
    /// The key's JSON text.
    pub key: String,
    /// The value's JSON text.
    pub value: String,
}

/// One reduce row.
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceRow {
    /// The group key's JSON text (`null` without grouping).
    pub key: String,
    /// The reduction's JSON text, or the error (`reduce_overflow_error`) that stands in
    /// for it, as CouchDB reports a reduction that did not shrink.
    pub value: Result<String, (String, String)>,
}

/// A reduction's row value: overflow errors become the row's error, others fail the query.
fn row_value(
    reducer: &crate::reduce::ViewReducer,
    value: &[u8],
    count: u64,
) -> Result<Result<String, (String, String)>> {
    match reducer.finish(value, count) {
        Ok(v) => Ok(Ok(v)),
        Err(Error::Reduce { error, reason }) if error == "reduce_overflow_error" => {
            Ok(Err((error, reason)))
        }
        Err(e) => Err(e),
    }
}

/// The row key that starts a document's rows for `key` (before any of them when `id` is
/// `None`); `after` moves it past them instead.
fn row_bound(key: &Value, id: Option<&str>, c: Collation, after: bool) -> Vec<u8> {
    let mut b = viewkey::encoded(key, c);
    if let Some(id) = id {
        viewkey::push_doc_id(&mut b, id, 0);
    }
    if after {
        b.push(0xFF);
    }
    b
}

/// The tree range for one `[start, end]` pair in walk order.
fn range_of(
    q: &ViewQuery,
    start: Option<&Value>,
    end: Option<&Value>,
    c: Collation,
) -> RangeOptions {
    let back = q.descending;
    let (sid, eid) = (q.start_docid.as_deref(), q.end_docid.as_deref());
    let start = match start {
        None => Bound::Unbounded,
        Some(k) => Bound::Included(row_bound(k, sid, c, back)),
    };
    let end = match (end, q.inclusive_end) {
        (None, _) => Bound::Unbounded,
        (Some(k), true) => Bound::Included(row_bound(k, eid, c, !back)),
        (Some(k), false) => Bound::Excluded(row_bound(k, eid, c, back)),
    };
    crate::partition::range(start, end, back, q.partition.as_deref())
}

/// The ranges a query reads, in order: one per key of `keys`, or the start/end range.
fn ranges(q: &ViewQuery, c: Collation) -> Vec<RangeOptions> {
    match &q.keys {
        Some(keys) => {
            let exact = ViewQuery {
                start_docid: None,
                end_docid: None,
                inclusive_end: true,
                ..q.clone()
            };
            keys.iter()
                .map(|k| range_of(&exact, Some(k), Some(k), c))
                .collect()
        }
        None => vec![range_of(q, q.start_key.as_ref(), q.end_key.as_ref(), c)],
    }
}

/// Rows in view `view` (`total_rows`).
pub fn total_rows(snap: &Snapshot, view: usize) -> Result<u64> {
    Ok(snap.count(1 + view)?)
}

/// Rows before the first row of the range in walk order, plus `skip` (`offset`).
pub fn offset(index: &Index, snap: &Snapshot, view: usize, q: &ViewQuery) -> Result<u64> {
    let c = index.ddoc().views[view].collation;
    let Some(first) = map_ranges(q, c).into_iter().next() else {
        return Ok(q.skip);
    };
    let before = match (&first.start, q.descending) {
        (Bound::Unbounded, _) => 0,
        (Bound::Included(b), false) => {
            snap.reduce(1 + view, &Bound::Unbounded, &Bound::Excluded(b.clone()))?
                .count
        }
        (Bound::Included(b), true) => {
            snap.reduce(1 + view, &Bound::Excluded(b.clone()), &Bound::Unbounded)?
                .count
        }
        (Bound::Excluded(_), _) => 0,
    };
    Ok(before + q.skip)
}

/// The map rows of a query, with skip and limit applied across all its ranges.
pub fn map_rows(
    index: &Index,
    snap: &Snapshot,
    view: usize,
    q: &ViewQuery,
) -> Result<impl Iterator<Item = Result<MapRow>> + Send + 'static> {
    let c = index.ddoc().views[view].collation;
    let partitioned = index.ddoc().options.partitioned;
    let tree = 1 + view;
    let mut parts = Vec::new();
    // One ascending range: let the tree skip whole subtrees by their counts. (Descending,
    // a document's rows of one key are turned back first, so paging counts them after.)
    let in_tree = q.keys.is_none() && !q.descending;
    for mut r in map_ranges(q, c) {
        if in_tree {
            r.skip = q.skip;
            r.limit = q.limit;
        }
        parts.push(snap.range(tree, r)?);
    }
    let (skip, limit) = if in_tree {
        (0, None)
    } else {
        (q.skip as usize, q.limit)
    };
    let rows = parts
        .into_iter()
        .flatten()
        .map(move |entry| map_row(entry?, c, partitioned));
    let rows: Box<dyn Iterator<Item = Result<MapRow>> + Send> = if q.descending {
        Box::new(DupsAscending {
            rows: rows.peekable(),
            ready: Vec::new(),
        })
    } else {
        Box::new(rows)
    };
    let limit = limit.map_or(usize::MAX, |l| l.min(usize::MAX as u64) as usize);
    Ok(rows.skip(skip).take(limit))
}

/// The map rows of view `view` between two bounds on stored row keys (encoded key, then
/// document id), in walk order: `start` is where the walk begins (the high end when
/// `descending`). In a partitioned view the bounds are within `partition`'s rows. For
/// callers that build their own bounds, as Mango does from a selector.
pub fn map_rows_between(
    index: &Index,
    snap: &Snapshot,
    view: usize,
    (start, end): (Bound, Bound),
    descending: bool,
    partition: Option<&str>,
) -> Result<impl Iterator<Item = Result<MapRow>> + Send + 'static> {
    let c = index.ddoc().views[view].collation;
    let partitioned = index.ddoc().options.partitioned;
    let partition = partition.filter(|_| partitioned);
    let range = crate::partition::range(start, end, descending, partition);
    let range = snap.range(1 + view, range)?;
    Ok(range.map(move |entry| map_row(entry?, c, partitioned)))
}

/// A stored row key without the partition prefix a partitioned view gives it.
fn row_key(key: &[u8], partitioned: bool) -> Result<&[u8]> {
    if partitioned {
        crate::partition::strip(key).ok_or(Error::Corrupted("row key"))
    } else {
        Ok(key)
    }
}

/// A stored row as a map row.
fn map_row(entry: settee_store::Entry, c: Collation, partitioned: bool) -> Result<MapRow> {
    let key = row_key(entry.key(), partitioned)?;
    let (_, id) = viewkey::split_row_key(key, c).ok_or(Error::Corrupted("row key"))?;
    let (key, value) = row::split_value(entry.value())?;
    Ok(MapRow {
        id,
        key: key.to_string(),
        value: value.to_string(),
    })
}

/// The ranges map rows are read from, in walk order: CouchDB reads `keys` from the last
/// when descending.
fn map_ranges(q: &ViewQuery, c: Collation) -> Vec<RangeOptions> {
    let mut ranges = ranges(q, c);
    if q.descending && q.keys.is_some() {
        ranges.reverse();
    }
    ranges
}

/// Descending rows with a document's rows of one key in ascending order, as CouchDB gives
/// them in either direction (they are one entry in its index, values sorted).
struct DupsAscending<I: Iterator<Item = Result<MapRow>>> {
    rows: std::iter::Peekable<I>,
    /// The rest of the current run, last first.
    ready: Vec<MapRow>,
}

impl<I: Iterator<Item = Result<MapRow>>> Iterator for DupsAscending<I> {
    type Item = Result<MapRow>;

    fn next(&mut self) -> Option<Result<MapRow>> {
        if let Some(row) = self.ready.pop() {
            return Some(Ok(row));
        }
        let first = match self.rows.next()? {
            Ok(row) => row,
            Err(e) => return Some(Err(e)),
        };
        let mut run = vec![first];
        while let Some(Ok(next)) = self.rows.peek() {
            if next.id != run[0].id || next.key != run[0].key {
                break;
            }
            let Some(Ok(next)) = self.rows.next() else {
                unreachable!("peeked")
            };
            run.push(next);
        }
        // The run came in descending order: its last row is the first to give.
        self.ready = run;
        self.ready.pop().map(Ok)
    }
}

/// The reduce rows of a query.
pub fn reduce_rows(
    index: &Index,
    snap: &Snapshot,
    view: usize,
    q: &ViewQuery,
) -> Result<Vec<ReduceRow>> {
    let reducer = index
        .reducer(view)
        .ok_or_else(|| Error::QueryParse("Reduce is invalid for map-only views.".into()))?;
    let c = index.ddoc().views[view].collation;
    let partitioned = index.ddoc().options.partitioned;
    let tree = 1 + view;
    let limit = q.limit.unwrap_or(u64::MAX);
    let mut skip = q.skip;
    let mut rows = Vec::new();
    let mut q = q.clone();
    if let Some(keys) = q.keys.as_mut() {
        // A key asked twice is answered once.
        let mut seen = std::collections::HashSet::new();
        keys.retain(|k| seen.insert(viewkey::encoded(k, c)));
    }
    let q = &q;
    for r in ranges(q, c) {
        if rows.len() as u64 >= limit {
            break;
        }
        if q.grouping == Grouping::All {
            let (lo, hi) = if q.descending {
                (&r.end, &r.start)
            } else {
                (&r.start, &r.end)
            };
            let red = snap.reduce(tree, lo, hi)?;
            if red.count == 0 && q.keys.is_none() {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            rows.push(ReduceRow {
                key: "null".into(),
                value: row_value(reducer, &red.value, red.count)?,
            });
            continue;
        }
        let same = |a: &[u8], b: &[u8]| {
            let (a, b) = (row_key(a, partitioned).ok(), row_key(b, partitioned).ok());
            a.and_then(|a| group_of(a, q.grouping, c)) == b.and_then(|b| group_of(b, q.grouping, c))
        };
        let mut failed = None;
        snap.fold_groups(tree, &r, &same, &mut |g: Group| {
            if skip > 0 {
                skip -= 1;
                return Ok(true);
            }
            match group_row(reducer, &g, q.grouping) {
                Ok(row) => rows.push(row),
                Err(e) => {
                    failed = Some(e);
                    return Ok(false);
                }
            }
            Ok((rows.len() as u64) < limit)
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    Ok(rows)
}

/// The encoded part of a row key that decides its group.
fn group_of(row_key: &[u8], g: Grouping, c: Collation) -> Option<&[u8]> {
    match g {
        Grouping::Level(n) => viewkey::group_prefix(row_key, n, c),
        _ => viewkey::value_len(row_key, c).map(|n| &row_key[..n]),
    }
}

fn group_row(
    reducer: &crate::reduce::ViewReducer,
    g: &Group,
    grouping: Grouping,
) -> Result<ReduceRow> {
    let (key, _) = row::split_value(g.first.value())?;
    let key = match grouping {
        Grouping::Level(n) => match serde_json::from_str::<Value>(key) {
            Ok(Value::Array(mut items)) => {
                items.truncate(n);
                Value::Array(items).to_string()
            }
            _ => key.to_string(),
        },
        _ => key.to_string(),
    };
    Ok(ReduceRow {
        key,
        value: row_value(reducer, &g.reduction.value, g.reduction.count)?,
    })
}
