//! Full-text search endpoints: `/{db}/_design/{ddoc}/_search/{index}`, `_search_info`,
//! `_search_disk_size`, `_nouveau/{index}`, `_nouveau_info`, `/{db}/_search_cleanup`,
//! `/{db}/_nouveau_cleanup`, `/_search_analyze` and `/_nouveau_analyze`, with CouchDB's
//! parameters, answers and errors (docs/COMPATIBILITY.md).

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use hyper::Method;
use serde_json::{json, Map, Value};
use settee_db::{Database, DbSnapshot, DocOptions};
use settee_search::analyzer::{AnalyzerSpec, Flavor};
use settee_search::compile::NumRange;
use settee_search::{
    Group, Grouping, Highlight, Hit, IndexDef, Ranges, Search, SearchIndex, SearchRequest, SortKey,
};
use tokio::sync::Semaphore;

use crate::db::open;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

/// Request parameters by name, from the query string or a POST body; repeated names kept.
struct Params(Vec<(String, Value)>);

/// Parameters whose query-string values are taken as text, not JSON.
const RAW: &[&str] = &[
    "q",
    "query",
    "bookmark",
    "group_field",
    "group_by",
    "stale",
    "include_docs",
    "partition",
    "update",
    "stable",
    "locale",
];

impl Params {
    async fn read(state: &State, req: &mut Req, json_only: bool) -> HttpResult<Params> {
        match req.method {
            Method::GET | Method::HEAD => Ok(Params(
                req.query
                    .0
                    .iter()
                    .map(|(k, v)| {
                        let value = if RAW.contains(&k.as_str()) {
                            Value::String(v.clone())
                        } else {
                            serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone()))
                        };
                        (k.clone(), value)
                    })
                    .collect(),
            )),
            Method::POST => {
                if json_only {
                    req.require_json()?;
                }
                let body = req.json_object(state.max_request).await?;
                let mut p: Vec<(String, Value)> = body.into_iter().collect();
                if let Some(part) = req.query.get("partition") {
                    p.push(("partition".into(), Value::String(part.to_string())));
                }
                Ok(Params(p))
            }
            _ => Err(HttpError::method_not_allowed(if json_only {
                "GET, POST"
            } else {
                "GET,POST"
            })),
        }
    }

    fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v)
    }

    fn text(&self, name: &str) -> Option<String> {
        self.get(name).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }

    fn bool(&self, name: &str) -> HttpResult<Option<bool>> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" => Ok(Some(true)),
            Some(Value::String(s)) if s == "false" => Ok(Some(false)),
            Some(v) => Err(HttpError::query_parse(format!(
                "Invalid value for {name}: {v}"
            ))),
        }
    }

    /// A positive integer at most `max`, CouchDB's messages otherwise.
    fn positive(&self, name: &str, default: u64, max: Option<u64>) -> HttpResult<u64> {
        let Some(v) = self.get(name) else {
            return Ok(default);
        };
        let n = int(v)
            .ok_or_else(|| HttpError::query_parse(format!("Invalid value for {name}: {v}")))?;
        if n <= 0 {
            return Err(HttpError::query_parse(format!(
                "{name} must be greater than zero"
            )));
        }
        match max {
            Some(max) if n as u64 > max => Err(HttpError::query_parse(format!(
                "Value for {name} is too large, must not exceed {max}"
            ))),
            _ => Ok(n as u64),
        }
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn strings(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// The design document `_design/{ddoc}` of `db` as JSON.
fn design_json(db: &Database, ddoc: &str) -> HttpResult<(String, Value)> {
    let id = format!("_design/{ddoc}");
    let body = db.snapshot().open_doc(&id, None, &DocOptions::default())?;
    let doc = settee_json::deep::from_slice(&body)
        .map_err(|_| HttpError::new(500, "unknown_error", "stored design document"))?;
    Ok((id, doc))
}

/// The index `index` of `flavor` in `_design/{ddoc}`, opened.
fn open_index(
    state: &State,
    db: &Arc<Database>,
    ddoc: &str,
    index: &str,
    flavor: Flavor,
) -> HttpResult<Arc<SearchIndex>> {
    let search = &state.node.search;
    let seq = db
        .snapshot()
        .record(&format!("_design/{ddoc}"))?
        .map(|r| r.seq);
    if let Some(seq) = seq {
        if let Some(ix) = search.named(db, &format!("_design/{ddoc}"), seq, index, flavor) {
            return Ok(ix);
        }
    }
    let (id, doc) = design_json(db, ddoc)?;
    let def = IndexDef::find(&id, &doc, index, flavor, db.partitioned())?;
    let ix = search.index(db, def)?;
    if let Some(seq) = seq {
        search.remember(db, seq, &ix);
    }
    Ok(ix)
}

/// `GET|POST /{db}/_design/{ddoc}/_search/{index}`.
pub async fn search(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    ddoc: &str,
    index: &str,
) -> HttpResult<Response> {
    let db = open(state, name)?;
    let p = Params::read(state, req, false).await?;
    let ix = open_index(state, &db, ddoc, index, Flavor::Search)?;
    let (r, include_docs, update) = search_request(&p, &db, &ix)?;
    // `group_by` alone asks for the older grouped answer.
    let legacy = p.text("group_field").is_none() && p.text("group_by").is_some();
    if update {
        state.node.search.refresh(&db, &ix).await?;
    }
    let result = run(ix, r.clone()).await?;
    let snap = db.snapshot();
    let highlights = r.highlight.is_some();
    let grouped = |g: &Group| {
        let rows = Row::all(&snap, &g.hits, include_docs, highlights);
        serde_json::to_value(rows).expect("rows serialize")
    };
    let body = match &result.groups {
        Some(groups) if legacy => {
            let groups: Vec<Value> = groups
                .iter()
                .map(|g| json!({"by": g.by, "total_hits": g.total, "hits": grouped(g)}))
                .collect();
            let total: u64 = result.groups.iter().flatten().map(|g| g.total).sum();
            json!({"total_hits": result.total, "total_grouped_hits": total, "groups": groups})
        }
        Some(groups) => {
            let groups: Vec<Value> = groups
                .iter()
                .map(|g| json!({"by": g.by, "total_rows": g.total, "rows": grouped(g)}))
                .collect();
            json!({"total_rows": result.total, "groups": groups})
        }
        None => {
            // The common answer is written straight from the hits: building a JSON tree of
            // every row first cost more than finding them.
            let page = Page {
                total_rows: result.total,
                bookmark: &result.bookmark,
                rows: Row::all(&snap, &result.hits, include_docs, highlights),
                counts: result.counts.as_ref(),
                ranges: result.ranges.as_ref(),
            };
            let bytes = serde_json::to_vec(&page).expect("a search answer serializes");
            return Ok(reply::json_bytes(200, bytes));
        }
    };
    Ok(reply::json(200, &body))
}

/// An ungrouped `_search` answer as it is written.
#[derive(serde::Serialize)]
struct Page<'a> {
    total_rows: u64,
    bookmark: &'a str,
    rows: Vec<Row<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counts: Option<&'a Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ranges: Option<&'a Map<String, Value>>,
}

/// One row of a `_search` answer as it is written: the hit, its highlights when asked for,
/// and its document (or why there is none) with `include_docs`.
#[derive(serde::Serialize)]
struct Row<'a> {
    id: &'a str,
    order: &'a [Value],
    fields: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    highlights: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    doc: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

impl<'a> Row<'a> {
    fn all(db: &DbSnapshot, hits: &'a [Hit], include_docs: bool, highlights: bool) -> Vec<Self> {
        hits.iter()
            .map(|h| Row::of(db, h, include_docs, highlights))
            .collect()
    }

    fn of(db: &DbSnapshot, h: &'a Hit, include_docs: bool, highlights: bool) -> Row<'a> {
        let (doc, error) = match include_docs.then(|| doc_of(db, &h.id)) {
            None => (None, None),
            Some(Some(doc)) => (Some(doc), None),
            Some(None) => (None, Some("not_found")),
        };
        Row {
            id: &h.id,
            order: &h.order,
            fields: &h.fields,
            highlights: highlights.then(|| h.highlights.clone().unwrap_or_default()),
            doc,
            error,
        }
    }
}

/// Runs a search off the async threads: a phrase over common words can take milliseconds,
/// which would hold up every request queued behind it there. A quick one (the first page
/// of one term) runs here, where handing it over would cost more than it takes. Searches
/// run two per core at most (so a core is not idle while a search is handed over), the
/// rest waiting their turn in arrival order: sharing the cores among every search at once
/// would stretch each long one by the number of others.
async fn run(ix: Arc<SearchIndex>, r: SearchRequest) -> HttpResult<settee_search::SearchResult> {
    static RUNNING: LazyLock<Semaphore> = LazyLock::new(|| {
        Semaphore::new(2 * std::thread::available_parallelism().map_or(2, |n| n.get()))
    });
    if let Some(quick) = ix.search_if_quick(&r) {
        return quick.map_err(HttpError::from);
    }
    let _turn = RUNNING
        .acquire()
        .await
        .map_err(|_| HttpError::new(500, "unknown_error", "a search failed"))?;
    tokio::task::spawn_blocking(move || ix.search(&r))
        .await
        .map_err(|_| HttpError::new(500, "unknown_error", "a search failed"))?
        .map_err(HttpError::from)
}

/// Reads `_search`'s parameters: the request, `include_docs`, and whether to update first.
fn search_request(
    p: &Params,
    db: &Database,
    ix: &SearchIndex,
) -> HttpResult<(SearchRequest, bool, bool)> {
    let q = p
        .text("q")
        .or_else(|| p.text("query"))
        .ok_or_else(|| HttpError::query_parse("Query must include a 'q' or 'query' argument"))?;
    let partition = partition(p, db, ix)?;
    let (default_limit, max_limit) = if db.partitioned() {
        (2000, 2000)
    } else {
        (25, 200)
    };
    let limit = match p.get("limit") {
        None => default_limit,
        Some(v) => {
            let n = int(v)
                .ok_or_else(|| HttpError::query_parse(format!("Invalid value for limit: {v}")))?;
            if n < 0 {
                return Err(HttpError::query_parse(
                    "limit must be greater than or equal to zero",
                ));
            }
            if n as u64 > max_limit {
                return Err(HttpError::query_parse(format!(
                    "Value for limit is too large, must not exceed {max_limit}"
                )));
            }
            n as u64
        }
    };
    let stale = match p.text("stale").as_deref() {
        None => false,
        Some("ok") => true,
        Some(_) => return Err(HttpError::query_parse("stale only available as stale=ok")),
    };
    let update = !stale && p.bool("update")?.unwrap_or(true);
    let include_docs = p.bool("include_docs")?.unwrap_or(false);
    let list = |name: &str| -> HttpResult<Option<Vec<String>>> {
        p.get(name)
            .map(|v| {
                strings(v).ok_or_else(|| {
                    HttpError::bad_request(format!("{v} is not a valid {name} query"))
                })
            })
            .transpose()
    };
    let group = match p.text("group_field").or_else(|| p.text("group_by")) {
        Some(field) => Some(Grouping {
            field: field.trim_end_matches("<string>").to_string(),
            limit: p.positive("group_limit", 10, Some(200))? as usize,
            sort: sort_keys(p.get("group_sort"))?,
        }),
        None => None,
    };
    if partition.is_some()
        && (p.get("counts").is_some()
            || p.get("ranges").is_some()
            || group.is_some()
            || p.all("drilldown").count() > 0)
    {
        return Err(HttpError::bad_request(
            "`partition` and any of `drilldown`, `ranges`, `group_field`, `group_sort`, \
             `group_limit` or `group_by` are incompatible",
        ));
    }
    let highlight = match list("highlight_fields")? {
        Some(fields) => Some(Highlight {
            fields,
            pre: p.text("highlight_pre_tag").unwrap_or_else(|| "<em>".into()),
            post: p
                .text("highlight_post_tag")
                .unwrap_or_else(|| "</em>".into()),
            number: p.positive("highlight_number", 1, None)? as usize,
            size: p.positive("highlight_size", 100, None)? as usize,
        }),
        None => None,
    };
    let grouped = group.is_some();
    let r = SearchRequest {
        q,
        limit: limit as usize,
        sort: sort_keys(p.get("sort"))?,
        bookmark: if grouped { None } else { bookmark(p) },
        include_fields: list("include_fields")?,
        counts: if grouped { None } else { list("counts")? },
        ranges: if grouped {
            None
        } else {
            p.get("ranges").map(search_ranges).transpose()?
        },
        drilldown: if grouped { Vec::new() } else { drilldown(p)? },
        group,
        highlight,
        partition,
        query: None,
    };
    Ok((r, include_docs, update))
}

/// The partition a query is limited to, checked against the index as CouchDB checks it.
fn partition(p: &Params, db: &Database, ix: &SearchIndex) -> HttpResult<Option<String>> {
    let given = p.text("partition");
    let unsupported = || HttpError::bad_request("`partition` not supported on this index");
    if given.is_some() && !db.partitioned() {
        return Err(unsupported());
    }
    match (ix.def().partitioned, given) {
        (true, None) => Err(HttpError::bad_request(
            "`partition` parameter is mandatory for queries to this index.",
        )),
        (false, Some(_)) => Err(unsupported()),
        (_, given) => Ok(given),
    }
}

/// The bookmark given, if any (an empty one or null is none).
fn bookmark(p: &Params) -> Option<String> {
    match p.get("bookmark") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

fn sort_keys(v: Option<&Value>) -> HttpResult<Vec<SortKey>> {
    let items = match v {
        None => return Ok(Vec::new()),
        Some(Value::String(s)) if s == "relevance" => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(v) => strings(v)
            .ok_or_else(|| HttpError::bad_request(format!("Unrecognized sort parameter: {v}")))?,
    };
    items
        .iter()
        .map(|s| SortKey::parse(s).map_err(HttpError::from))
        .collect()
}

/// `ranges={"field": {"label": "[0 TO 100]", …}}`.
fn search_ranges(v: &Value) -> HttpResult<Ranges> {
    let bad = || HttpError::bad_request(format!("{v} is not a valid ranges query"));
    let mut out = Vec::new();
    for (field, labels) in v.as_object().ok_or_else(bad)? {
        let mut rs = Vec::new();
        for (label, range) in labels.as_object().ok_or_else(bad)? {
            let text = range.as_str().ok_or_else(bad)?;
            let not_range = || {
                HttpError::bad_request(format!("{text} was not a well-formed range specification"))
            };
            let parsed = settee_search::lucene::parse(text, field).map_err(|_| not_range())?;
            let settee_search::lucene::Query::Range {
                lower,
                upper,
                incl_lower,
                incl_upper,
                ..
            } = parsed
            else {
                return Err(not_range());
            };
            let bound = |b: Option<String>, incl: bool| -> HttpResult<std::ops::Bound<f64>> {
                match b.as_deref() {
                    None => Ok(std::ops::Bound::Unbounded),
                    Some(s) => {
                        let x = settee_search::compile::range_number(s).ok_or_else(not_range)?;
                        Ok(if incl {
                            std::ops::Bound::Included(x)
                        } else {
                            std::ops::Bound::Excluded(x)
                        })
                    }
                }
            };
            let (lo, hi) = (bound(lower, incl_lower)?, bound(upper, incl_upper)?);
            rs.push((label.clone(), NumRange::new(field, lo, hi)));
        }
        out.push((field.clone(), rs));
    }
    Ok(out)
}

/// `drilldown=["dim","value",…]`, repeatable, or `[["dim","v"],…]`.
fn drilldown(p: &Params) -> HttpResult<Vec<(String, Vec<String>)>> {
    let bad = || HttpError::bad_request("invalid drilldown query");
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for v in p.all("drilldown") {
        let arr = v.as_array().ok_or_else(bad)?;
        let entries: Vec<&Value> = if arr.iter().all(Value::is_array) && !arr.is_empty() {
            out.clear();
            arr.iter().collect()
        } else {
            vec![v]
        };
        for e in entries {
            let mut items = strings(e).ok_or_else(bad)?;
            if items.len() < 2 {
                return Err(bad());
            }
            let dim = items.remove(0);
            // Values of one dimension are alternatives, however they were given.
            match out.iter_mut().find(|(d, _)| *d == dim) {
                Some((_, values)) => values.extend(items),
                None => out.push((dim, items)),
            }
        }
    }
    Ok(out)
}

/// One `_search` row.
/// Sets a hit's `doc` (or `error` when it is gone) for `include_docs`.
fn add_doc(db: &DbSnapshot, id: &str, row: &mut Value) {
    match doc_of(db, id) {
        Some(doc) => row["doc"] = doc,
        None => row["error"] = json!("not_found"),
    }
}

/// The document `id` as `include_docs` shows it, or `None` when it is gone.
fn doc_of(db: &DbSnapshot, id: &str) -> Option<Value> {
    let body = db.open_doc(id, None, &DocOptions::default()).ok()?;
    Some(serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// `GET|POST /{db}/_design/{ddoc}/_nouveau/{index}`.
pub async fn nouveau(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    ddoc: &str,
    index: &str,
) -> HttpResult<Response> {
    let db = open(state, name)?;
    let p = Params::read(state, req, true).await?;
    let ix = open_index(state, &db, ddoc, index, Flavor::Nouveau)?;
    let q = p
        .text("q")
        .ok_or_else(|| HttpError::query_parse("q parameter is mandatory"))?;
    let limit = match p.get("limit") {
        None => 25,
        Some(v) => match int(v) {
            Some(n) if n > 0 => n as usize,
            Some(_) => {
                return Err(HttpError::query_parse(
                    "limit parameter must be greater than zero",
                ))
            }
            None => return Err(HttpError::query_parse("limit parameter must be an integer")),
        },
    };
    let top_n = p.positive("top_n", 10, Some(1000))? as usize;
    let counts =
        match p.get("counts") {
            None | Some(Value::Null) => None,
            Some(v) => Some(strings(v).ok_or_else(|| {
                HttpError::query_parse("counts parameter must be a list of strings")
            })?),
        };
    let ranges = match p.get("ranges") {
        None | Some(Value::Null) => None,
        Some(v) => Some(nouveau_ranges(v)?),
    };
    let r = SearchRequest {
        q,
        limit,
        sort: nouveau_sort(p.get("sort"))?,
        bookmark: bookmark(&p),
        counts,
        ranges,
        partition: partition(&p, &db, &ix)?,
        ..SearchRequest::default()
    };
    if p.bool("update")?.unwrap_or(true) {
        state.node.search.refresh(&db, &ix).await?;
    }
    let include_docs = p.bool("include_docs")?.unwrap_or(false);
    let sorts = r.sort.clone();
    let result = run(ix, r).await?;
    let snap = db.snapshot();
    let hits: Vec<Value> = result
        .hits
        .iter()
        .map(|h| {
            let mut hit = json!({"id": h.id, "order": typed_order(h, &sorts), "fields": h.fields});
            if include_docs {
                add_doc(&snap, &h.id, &mut hit);
            }
            hit
        })
        .collect();
    let counts = result.counts.map(|c| {
        c.into_iter()
            .map(|(f, values)| (f, top_counts(values, top_n)))
            .collect::<Map<String, Value>>()
    });
    Ok(reply::json(
        200,
        &json!({
            "bookmark": result.bookmark,
            "total_hits": result.total,
            "total_hits_relation": "EQUAL_TO",
            "hits": hits,
            "counts": counts,
            "ranges": result.ranges,
        }),
    ))
}

/// The `n` most frequent values, most frequent first.
fn top_counts(values: Value, n: usize) -> Value {
    let mut v: Vec<(String, Value)> = match values {
        Value::Object(m) => m.into_iter().collect(),
        _ => Vec::new(),
    };
    v.sort_by(|a, b| b.1.as_u64().cmp(&a.1.as_u64()).then(a.0.cmp(&b.0)));
    Value::Object(v.into_iter().take(n).collect())
}

/// Nouveau's `order`: typed values, the document id last.
fn typed_order(h: &Hit, sorts: &[SortKey]) -> Vec<Value> {
    let relevance = [SortKey::Score { desc: true }];
    let keys = if sorts.is_empty() {
        &relevance[..]
    } else {
        sorts
    };
    let mut out: Vec<Value> = keys
        .iter()
        .zip(&h.order)
        .map(|(k, v)| {
            let ty = match k {
                SortKey::Score { .. } => "float",
                SortKey::Field { string: true, .. } => "string",
                _ => "double",
            };
            json!({"@type": ty, "value": v})
        })
        .collect();
    out.push(json!({"@type": "string", "value": h.id}));
    out
}

/// Nouveau's `sort`: `relevance`, or fields with a mandatory `<string>` or `<double>`.
fn nouveau_sort(v: Option<&Value>) -> HttpResult<Vec<SortKey>> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(v) => strings(v)
            .ok_or_else(|| HttpError::query_parse("all items in sort parameter must be strings"))?,
    };
    let mut keys = Vec::new();
    for item in items {
        if item == "relevance" {
            keys.push(SortKey::Score { desc: true });
            continue;
        }
        let body = item.trim_start_matches(['-', '+']);
        let Some((_, ty)) = body.strip_suffix('>').and_then(|b| b.split_once('<')) else {
            return Err(HttpError::bad_request(format!(
                "{item} is not a valid sort parameter"
            )));
        };
        if ty != "string" && ty != "double" {
            return Err(HttpError::bad_request(format!(
                "{ty} is not a valid sort type"
            )));
        }
        let key = SortKey::parse(&item.replace("<double>", "<number>"))?;
        if !matches!(&key, SortKey::Field { name, .. } if name == "_id") {
            keys.push(key);
        }
    }
    Ok(keys)
}

/// Nouveau's `ranges={"field": [{"label", "min", "max", "min_inclusive", "max_inclusive"}]}`.
fn nouveau_ranges(v: &Value) -> HttpResult<Ranges> {
    let obj = v
        .as_object()
        .ok_or_else(|| HttpError::query_parse("range values must be lists of objects"))?;
    let mut out = Vec::new();
    for (field, list) in obj {
        let list = list
            .as_array()
            .ok_or_else(|| HttpError::query_parse("range values must be lists of objects"))?;
        let mut rs = Vec::new();
        for r in list {
            let bad = || HttpError::bad_request(format!("{r} is not a valid range"));
            let label = r.get("label").and_then(Value::as_str).ok_or_else(bad)?;
            let incl = |k: &str| r.get(k).and_then(Value::as_bool).unwrap_or(true);
            let bound = |k: &str, incl: bool| match r.get(k).and_then(Value::as_f64) {
                None => std::ops::Bound::Unbounded,
                Some(x) if incl => std::ops::Bound::Included(x),
                Some(x) => std::ops::Bound::Excluded(x),
            };
            let range = NumRange::new(
                field,
                bound("min", incl("min_inclusive")),
                bound("max", incl("max_inclusive")),
            );
            rs.push((label.to_string(), range));
        }
        out.push((field.clone(), rs));
    }
    Ok(out)
}

/// `GET /{db}/_design/{ddoc}/_search_info/{index}` (and `_search_disk_size`, `_nouveau_info`).
pub fn info(
    state: &State,
    req: &Req,
    name: &str,
    ddoc: &str,
    index: &str,
    what: &str,
) -> HttpResult<Response> {
    if req.method != Method::GET && req.method != Method::HEAD {
        return Err(HttpError::method_not_allowed("GET"));
    }
    let db = open(state, name)?;
    let flavor = if what == "_nouveau_info" {
        Flavor::Nouveau
    } else {
        Flavor::Search
    };
    let ix = open_index(state, &db, ddoc, index, flavor)?;
    let meta = ix.meta();
    let searcher = ix.searcher();
    let deleted: u64 = searcher
        .segment_readers()
        .iter()
        .map(|s| u64::from(s.num_deleted_docs()))
        .sum();
    let full = format!("_design/{ddoc}/{index}");
    let body = match what {
        "_search_disk_size" => json!({"name": full, "search_index": {"disk_size": ix.disk_size()}}),
        "_nouveau_info" => json!({"name": full, "search_index": {
            "update_seq": meta.seq.total(),
            "purge_seq": meta.purge_seq,
            "num_docs": ix.doc_count(),
            "disk_size": ix.disk_size(),
        }}),
        _ => json!({"name": full, "search_index": {
            "pending_seq": db.snapshot().seq()?.total(),
            "doc_del_count": deleted,
            "doc_count": ix.doc_count(),
            "disk_size": ix.disk_size(),
            "committed_seq": meta.seq.total(),
            "signature": ix.def().signature(),
        }}),
    };
    Ok(reply::json(200, &body))
}

/// `POST /{db}/_search_cleanup` and `/{db}/_nouveau_cleanup`: removes index directories no
/// design document uses.
pub async fn cleanup(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    which: &str,
) -> HttpResult<Response> {
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    if which == "_nouveau_cleanup" {
        req.require_json()?;
    }
    let flavor = if which == "_nouveau_cleanup" {
        Flavor::Nouveau
    } else {
        Flavor::Search
    };
    let db = open(state, name)?;
    let snap = db.snapshot();
    let mut keep = HashSet::new();
    for id in snap.design_docs()? {
        let id = id?;
        if let Ok((id, doc)) = design_json(&db, id.trim_start_matches("_design/")) {
            for def in IndexDef::all(&id, &doc, flavor, db.partitioned()) {
                keep.insert(def.signature().to_string());
            }
        }
    }
    tokio::task::spawn_blocking(move || Search::cleanup(&db, flavor, &keep))
        .await
        .map_err(|_| HttpError::new(500, "unknown_error", "cleanup failed"))??;
    Ok(reply::json(202, &json!({"ok": true})))
}

/// `GET|POST /_search_analyze` and `POST /_nouveau_analyze`.
pub async fn analyze(state: &Arc<State>, req: &mut Req, which: &str) -> HttpResult<Response> {
    let nouveau = which == "_nouveau_analyze";
    let (analyzer, text) = match req.method {
        Method::GET | Method::HEAD if !nouveau => (
            req.query
                .get("analyzer")
                .map(|s| Value::String(s.to_string())),
            req.query.get("text").map(|s| Value::String(s.to_string())),
        ),
        Method::POST => {
            req.require_json()?;
            let body = req.json_object(state.max_request).await?;
            (body.get("analyzer").cloned(), body.get("text").cloned())
        }
        _ => {
            return Err(HttpError::method_not_allowed(if nouveau {
                "POST"
            } else {
                "GET,POST"
            }));
        }
    };
    let (analyzer, text) = if nouveau {
        match (analyzer, text) {
            (Some(Value::String(a)), Some(Value::String(t))) if !a.is_empty() => {
                (Value::String(a), t)
            }
            _ => {
                return Err(HttpError::bad_request(
                    "'text' and 'analyzer' fields must be non-empty strings",
                ))
            }
        }
    } else {
        let a =
            analyzer.ok_or_else(|| HttpError::bad_request("analyzer parameter is mandatory"))?;
        if !a.is_string() && !a.is_object() {
            return Err(HttpError::bad_request(
                "analyzer parameter must be a string or an object",
            ));
        }
        let t = text.ok_or_else(|| HttpError::bad_request("text parameter is mandatory"))?;
        let Value::String(t) = t else {
            return Err(HttpError::bad_request("text parameter must be a string"));
        };
        (a, t)
    };
    let flavor = if nouveau {
        Flavor::Nouveau
    } else {
        Flavor::Search
    };
    let spec = AnalyzerSpec::parse(Some(&analyzer), flavor)?;
    let tokens: Vec<String> = spec
        .build()
        .analyze("default", &text)
        .into_iter()
        .map(|t| t.text)
        .collect();
    Ok(reply::json(200, &json!({"tokens": tokens})))
}
