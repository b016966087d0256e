//! Reduce functions: the builtins (`_sum`, `_count`, `_stats`, `_approx_count_distinct`,
//! `_top_N`, `_bottom_N`, `_first`, `_last`), which never enter JavaScript, and JavaScript
//! `reduce(keys, values, rereduce)`.
//!
//! A view tree stores, beside each child pointer, the reduction of the child's rows, so
//! reductions are bytes: nothing for `_count` (the tree counts rows itself), JSON text for
//! `_sum`, `_stats` and JavaScript, HyperLogLog registers for `_approx_count_distinct`. A
//! reduction that failed is kept as an error marker, so that map queries still work and only
//! reduce queries over the failing rows report the error, as in CouchDB.

use std::sync::Arc;

use serde_json::{Map, Number, Value};
use settee_js::Limits;
use settee_json::viewkey::{self, Collation};
use settee_queryserver::QueryServers;
use settee_store::Reducer;

use crate::error::{Error, Result};
use crate::hll::Hll;
use crate::row;

/// A view's reduce function.
#[derive(Clone, Debug, PartialEq)]
pub enum Reduce {
    /// `_count`.
    Count,
    /// `_sum`.
    Sum,
    /// `_stats`.
    Stats,
    /// `_approx_count_distinct`.
    ApproxCountDistinct,
    /// `_top_N` (`top`) or `_bottom_N`: the N greatest or least distinct values, in that
    /// order, by CouchDB's collation.
    Ranked {
        /// Greatest first (`_top_N`), else least first.
        top: bool,
        /// How many.
        n: usize,
    },
    /// `_first` (`true`) or `_last`: the value of the first or last row in key order.
    Edge(bool),
    /// A function's source, in the design document's language.
    Function(Arc<str>),
}

impl Reduce {
    /// Reads a `reduce` member as CouchDB does: a builtin by the name it starts with
    /// (`"_sum\n"`, `"_sum // total"` and `"_stats2"` are `_sum`, `_sum` and `_stats`);
    /// another name starting with `_` is an error; anything else (`" _count"` included) is a
    /// function.
    pub fn parse(source: &str) -> Result<Reduce, String> {
        const BUILTINS: [(&str, Reduce); 4] = [
            ("_approx_count_distinct", Reduce::ApproxCountDistinct),
            ("_count", Reduce::Count),
            ("_sum", Reduce::Sum),
            ("_stats", Reduce::Stats),
        ];
        if !source.starts_with('_') {
            return Ok(Reduce::Function(source.into()));
        }
        for (prefix, top) in [("_top_", true), ("_bottom_", false)] {
            // CouchDB reads the rest as the whole number, nothing after it.
            if let Some(n) = source.strip_prefix(prefix) {
                return match n.parse::<usize>() {
                    Ok(n) if n > 0 => Ok(Reduce::Ranked { top, n }),
                    _ => Err(format!("`{source}` is not a supported reduce function.")),
                };
            }
        }
        for (prefix, first) in [("_first", true), ("_last", false)] {
            if source.starts_with(prefix) {
                return Ok(Reduce::Edge(first));
            }
        }
        BUILTINS
            .into_iter()
            .find(|(name, _)| source.starts_with(name))
            .map(|(_, r)| r)
            .ok_or_else(|| format!("`{source}` is not a supported reduce function."))
    }

    /// The source text, as the index signature names it.
    pub fn source(&self) -> String {
        match self {
            Reduce::Count => "_count".into(),
            Reduce::Sum => "_sum".into(),
            Reduce::Stats => "_stats".into(),
            Reduce::ApproxCountDistinct => "_approx_count_distinct".into(),
            Reduce::Ranked { top: true, n } => format!("_top_{n}"),
            Reduce::Ranked { top: false, n } => format!("_bottom_{n}"),
            Reduce::Edge(true) => "_first".into(),
            Reduce::Edge(false) => "_last".into(),
            Reduce::Function(s) => s.to_string(),
        }
    }
}

/// Marks a stored reduction as a failure: the marker byte, then `{"error","reason"}` JSON.
const FAILED: u8 = 0xFF;

fn failure(error: &str, reason: &str) -> Vec<u8> {
    let mut out = vec![FAILED];
    out.extend_from_slice(
        serde_json::json!({"error": error, "reason": reason})
            .to_string()
            .as_bytes(),
    );
    out
}

/// The stored failure in a reduction, if it is one.
fn failed(reduction: &[u8]) -> Option<Error> {
    if reduction.first() != Some(&FAILED) {
        return None;
    }
    let v: Value = serde_json::from_slice(&reduction[1..]).unwrap_or(Value::Null);
    let text = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string()
    };
    Some(Error::Reduce {
        error: text("error"),
        reason: text("reason"),
    })
}

/// Where a view's reduce function (one not builtin) runs.
#[derive(Clone)]
pub enum Runner {
    /// In this thread's JavaScript engine, under the limits the closure gives at call time.
    Js(Arc<dyn Fn() -> Limits + Send + Sync>),
    /// In a process of the language's external query server.
    External {
        /// The query servers.
        servers: Arc<QueryServers>,
        /// The design document's language.
        language: String,
    },
}

/// The tree reducer of one view.
pub struct ViewReducer {
    reduce: Reduce,
    collation: Collation,
    runner: Runner,
    /// CouchDB's `[query_server_config] reduce_limit`: JavaScript reductions must shrink.
    reduce_limit: bool,
    /// Whether the function may read its `keys` parameter (else it is given null).
    keys_read: bool,
}

impl ViewReducer {
    /// The reducer for `reduce`, running functions on `runner`.
    pub fn new(
        reduce: Reduce,
        collation: Collation,
        runner: Runner,
        reduce_limit: bool,
    ) -> ViewReducer {
        let keys_read = !matches!(&reduce, Reduce::Function(src) if crate::projection::first_parameter_unused(src));
        ViewReducer {
            reduce,
            collation,
            runner,
            reduce_limit,
            keys_read,
        }
    }

    fn try_reduce(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<u8>> {
        match &self.reduce {
            Reduce::Count => Ok(Vec::new()),
            Reduce::Sum => {
                let texts = entries
                    .iter()
                    .map(|(_, v)| Ok(row::split_value(v)?.1.as_bytes()))
                    .collect::<Result<Vec<_>>>()?;
                if let Some(total) = integer_sum(&texts) {
                    return Ok(total.to_string().into_bytes());
                }
                let values = texts
                    .iter()
                    .map(|t| serde_json::from_slice(t).map_err(|_| Error::Corrupted("row value")))
                    .collect::<Result<Vec<Value>>>()?;
                let input: usize = entries.iter().map(|(_, v)| v.len()).sum();
                Ok(self.sum_limited(sum(values), input))
            }
            Reduce::Stats => {
                let values = entries
                    .iter()
                    .map(|(_, v)| row_value(v))
                    .collect::<Result<Vec<_>>>()?;
                Ok(stats(values)?.to_string().into_bytes())
            }
            Reduce::ApproxCountDistinct => {
                let mut hll = Hll::default();
                for (k, _) in entries {
                    let key = viewkey::value_len(k, self.collation).map_or(*k, |n| &k[..n]);
                    hll.add(key);
                }
                Ok(hll.encode())
            }
            Reduce::Ranked { top, n } => {
                let values = entries.iter().map(|(_, v)| row_value(v));
                Ok(ranked(values.collect::<Result<Vec<_>>>()?, *top, *n))
            }
            Reduce::Edge(first) => {
                let pick = if *first {
                    entries.first()
                } else {
                    entries.last()
                };
                let Some((k, v)) = pick else {
                    return Ok(b"null".to_vec());
                };
                let id = viewkey::split_row_key(k, self.collation)
                    .map(|(_, id)| id)
                    .ok_or(Error::Corrupted("row key"))?;
                let (key, value) = row::split_value(v)?;
                Ok(format!("[{key},{},{value}]", Value::String(id)).into_bytes())
            }
            Reduce::Function(src) => {
                let rows = entries
                    .iter()
                    .map(|(k, v)| Ok((*k, row::split_value(v)?)))
                    .collect::<Result<Vec<_>>>()?;
                self.function(src, Input::Rows(&rows))
            }
        }
    }

    fn try_rereduce(&self, reductions: &[&[u8]]) -> Result<Vec<u8>> {
        match &self.reduce {
            Reduce::Count => Ok(Vec::new()),
            Reduce::Sum => {
                if let Some(total) = integer_sum(reductions) {
                    return Ok(total.to_string().into_bytes());
                }
                let values = parse_all(reductions)?;
                if let Some(failed) = values.iter().find(|v| is_sum_failure(v)) {
                    return Ok(failed.to_string().into_bytes());
                }
                let input: usize = reductions.iter().map(|r| r.len()).sum();
                Ok(self.sum_limited(sum(values), input))
            }
            Reduce::Stats => Ok(stats(parse_all(reductions)?)?.to_string().into_bytes()),
            Reduce::ApproxCountDistinct => {
                let mut hll = Hll::default();
                for r in reductions {
                    hll.merge(
                        &Hll::decode(r)
                            .ok_or(Error::Corrupted("approx_count_distinct reduction"))?,
                    );
                }
                Ok(hll.encode())
            }
            Reduce::Ranked { top, n } => {
                let mut values = Vec::new();
                for r in parse_all(reductions)? {
                    if let Value::Array(items) = r {
                        values.extend(items);
                    }
                }
                Ok(ranked(values, *top, *n))
            }
            Reduce::Edge(first) => {
                // Reductions come in key order too; empty ones (`null`) hold no row.
                let mut held = reductions.iter().filter(|r| r != &&b"null".as_slice());
                let pick = if *first {
                    held.next()
                } else {
                    held.next_back()
                };
                Ok(pick.map_or_else(|| b"null".to_vec(), |r| r.to_vec()))
            }
            Reduce::Function(src) => {
                let values = reductions
                    .iter()
                    .map(|r| std::str::from_utf8(r).map_err(|_| Error::Corrupted("reduction")))
                    .collect::<Result<Vec<_>>>()?;
                self.function(src, Input::Reductions(&values))
            }
        }
    }

    /// A `_sum` result as stored: the sum, or CouchDB's error object in its place when the
    /// values cannot be summed or (with `reduce_limit`) the sum does not shrink.
    fn sum_limited(&self, sum: Result<Value, Value>, input: usize) -> Vec<u8> {
        let text = match sum {
            Ok(v) => v.to_string(),
            Err(culprit) => serde_json::json!({"error": "builtin_reduce_error", "reason": SUM_ERROR, "caused_by": culprit}).to_string(),
        };
        if self.reduce_limit && text.len() > SUM_LIMIT && text.len() * 2 > input {
            let reason = format!(
                "Reduce output must shrink more rapidly: input size: {input} output size: {}",
                text.len()
            );
            return serde_json::json!({"error": "builtin_reduce_error", "reason": reason})
                .to_string()
                .into_bytes();
        }
        text.into_bytes()
    }

    /// Runs a reduce function over rows or, rereducing, over reductions; with `reduce_limit`,
    /// a result that does not shrink is `reduce_overflow_error`. A JavaScript function that
    /// never reads its `keys` parameter is not given the keys.
    fn function(&self, src: &str, input: Input) -> Result<Vec<u8>> {
        let (out, mut input_len, keys_counted) = match &self.runner {
            Runner::Js(limits) => {
                let (keys, values, rereduce) = match input {
                    Input::Rows(rows) => {
                        let keys = if self.keys_read {
                            Some(self.keys_json(rows)?)
                        } else {
                            None
                        };
                        (keys, json_array(rows.iter().map(|(_, (_, v))| *v)), false)
                    }
                    Input::Reductions(values) => (None, json_array(values.iter().copied()), true),
                };
                let (len, keys_counted) = (
                    values.len() + keys.as_ref().map_or(0, String::len),
                    keys.is_some(),
                );
                let out = settee_js::with_local_engine(limits(), |e| {
                    e.load_reduce(src)?;
                    e.reduce(src, keys, values, rereduce)
                })?;
                (out, len, keys_counted)
            }
            Runner::External { servers, language } => {
                let (text, rereduce) = match input {
                    Input::Rows(rows) => (
                        json_array(
                            rows.iter()
                                .zip(self.row_ids(rows)?)
                                .map(|((_, (k, v)), id)| format!("[[{k},{id}],{v}]")),
                        ),
                        false,
                    ),
                    Input::Reductions(values) => (json_array(values.iter().copied()), true),
                };
                let mut process = servers.checkout(language)?;
                let timeout = process.timeout();
                (
                    process.reduce(src, &text, rereduce, timeout)?.to_string(),
                    text.len(),
                    true,
                )
            }
        };
        if self.reduce_limit && out.len() > JS_LIMIT {
            // The limit counts the keys whether or not the function was given them.
            if let (false, Input::Rows(rows)) = (keys_counted, input) {
                input_len += self.keys_json(rows)?.len();
            }
            if out.len() * 2 > input_len {
                return Err(Error::Reduce {
                    error: "reduce_overflow_error".into(),
                    reason: format!("Reduce output must shrink more rapidly: input size: {input_len} output size: {}", out.len()),
                });
            }
        }
        Ok(out.into_bytes())
    }

    /// The JSON array of `[key, doc id]` pairs of `rows`, as a reduce function's `keys`.
    fn keys_json(&self, rows: &[Row]) -> Result<String> {
        Ok(json_array(
            rows.iter()
                .zip(self.row_ids(rows)?)
                .map(|((_, (k, _)), id)| format!("[{k},{id}]")),
        ))
    }

    /// The rows' document ids as JSON text, from their stored keys.
    fn row_ids(&self, rows: &[Row]) -> Result<Vec<String>> {
        rows.iter()
            .map(|(k, _)| {
                let id = viewkey::split_row_key(k, self.collation)
                    .map(|(_, id)| id)
                    .ok_or(Error::Corrupted("row key"))?;
                Ok(Value::String(id).to_string())
            })
            .collect()
    }

    /// The JSON value of a stored reduction over `count` rows, or the failure it holds.
    pub fn finish(&self, reduction: &[u8], count: u64) -> Result<String> {
        if let Some(e) = failed(reduction) {
            return Err(e);
        }
        match &self.reduce {
            Reduce::Count => Ok(count.to_string()),
            Reduce::ApproxCountDistinct => Ok(Hll::decode(reduction)
                .ok_or(Error::Corrupted("approx_count_distinct reduction"))?
                .estimate()
                .to_string()),
            // `[key, id, value]`: the value.
            Reduce::Edge(_) => match serde_json::from_slice::<Value>(reduction) {
                Ok(Value::Array(mut held)) if held.len() == 3 => {
                    Ok(held.swap_remove(2).to_string())
                }
                Ok(Value::Null) => Ok("null".into()),
                _ => Err(Error::Corrupted("first/last reduction")),
            },
            _ => String::from_utf8(reduction.to_vec()).map_err(|_| Error::Corrupted("reduction")),
        }
    }
}

impl Reducer for ViewReducer {
    fn reduce(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<u8>, String> {
        Ok(self.try_reduce(entries).unwrap_or_else(|e| as_failure(&e)))
    }

    fn rereduce(&self, reductions: &[&[u8]]) -> Result<Vec<u8>, String> {
        if let Some(bad) = reductions.iter().find(|r| r.first() == Some(&FAILED)) {
            return Ok(bad.to_vec());
        }
        Ok(self
            .try_rereduce(reductions)
            .unwrap_or_else(|e| as_failure(&e)))
    }

    /// A stored failure is computed again when its leaf changes (it may have been a timeout).
    fn extends(&self, reduction: &[u8]) -> bool {
        reduction.first() != Some(&FAILED)
    }
}

/// A stored row: its key bytes, and its key and value as JSON text.
type Row<'a> = (&'a [u8], (&'a str, &'a str));

/// What a reduce function runs over.
#[derive(Clone, Copy)]
enum Input<'a> {
    /// Rows of the view.
    Rows(&'a [Row<'a>]),
    /// Earlier results, to rereduce.
    Reductions(&'a [&'a str]),
}

/// A JSON array of JSON texts.
fn json_array<S: AsRef<str>>(items: impl Iterator<Item = S>) -> String {
    let mut out = String::from("[");
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item.as_ref());
    }
    out.push(']');
    out
}

fn as_failure(e: &Error) -> Vec<u8> {
    match e {
        Error::Reduce { error, reason } => failure(error, reason),
        Error::Js(settee_js::Error::Raised { error, reason }) => failure(error, reason),
        Error::Js(settee_js::Error::Compile(reason)) => failure("compilation_error", reason),
        Error::Js(settee_js::Error::Timeout(_))
        | Error::QueryServer(settee_queryserver::Error::Timeout(_)) => {
            failure("os_process_error", "timeout")
        }
        Error::QueryServer(settee_queryserver::Error::Raised { error, reason }) => {
            failure(error, reason)
        }
        other => failure("reduce_error", &other.to_string()),
    }
}

/// The `n` greatest (`top`) or least distinct values, in that order, as JSON text.
fn ranked(mut values: Vec<Value>, top: bool, n: usize) -> Vec<u8> {
    use settee_json::collate::compare;
    values.sort_by(|a, b| if top { compare(b, a) } else { compare(a, b) });
    values.dedup_by(|a, b| compare(a, b) == std::cmp::Ordering::Equal);
    values.truncate(n);
    Value::Array(values).to_string().into_bytes()
}

fn row_value(stored: &[u8]) -> Result<Value> {
    let (_, value) = row::split_value(stored)?;
    serde_json::from_str(value).map_err(|_| Error::Corrupted("row value"))
}

fn parse_all(reductions: &[&[u8]]) -> Result<Vec<Value>> {
    reductions
        .iter()
        .map(|r| serde_json::from_slice(r).map_err(|_| Error::Corrupted("reduction")))
        .collect()
}

/// Output size above which a JavaScript reduce must at least halve its input (CouchDB's).
const JS_LIMIT: usize = 4096;
/// The same for `_sum` (CouchDB's `reduce_limit_threshold`).
const SUM_LIMIT: usize = 4906;

/// Whether a `_sum` reduction is the error object that stands in for a failed sum.
fn is_sum_failure(v: &Value) -> bool {
    v.get("error").and_then(Value::as_str) == Some("builtin_reduce_error")
}

const SUM_ERROR: &str = "The _sum function requires that map values be numbers, arrays of numbers, or objects. Objects cannot be mixed with other data structures. Objects can be arbitrarily nested, provided that the values for all fields are themselves numbers, arrays of numbers, or objects.";

/// A number kept exact while it is an integer, as Erlang's arithmetic does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn of(n: &Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(
                n.as_f64()
                    .unwrap_or_else(|| n.to_string().parse().unwrap_or(0.0)),
            ),
        }
    }

    fn f(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn add(self, o: Num) -> Num {
        match (self, o) {
            (Num::Int(a), Num::Int(b)) => a
                .checked_add(b)
                .map_or(Num::Float(a as f64 + b as f64), Num::Int),
            _ => Num::Float(self.f() + o.f()),
        }
    }

    fn mul(self, o: Num) -> Num {
        match (self, o) {
            (Num::Int(a), Num::Int(b)) => a
                .checked_mul(b)
                .map_or(Num::Float(a as f64 * b as f64), Num::Int),
            _ => Num::Float(self.f() * o.f()),
        }
    }

    fn json(self) -> Value {
        match self {
            Num::Int(i) => Value::from(i),
            Num::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        }
    }
}

/// `_sum` over JSON texts that are all integers whose total fits in an `i64`, the common
/// case, without building JSON values; `None` for anything else.
fn integer_sum(texts: &[&[u8]]) -> Option<i64> {
    texts
        .iter()
        .try_fold(0i64, |total, text| total.checked_add(json_integer(text)?))
}

/// A JSON integer literal of at most 18 digits (so that it fits in an `i64`).
fn json_integer(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, text),
    };
    let canonical = matches!(digits, [b'1'..=b'9', ..]) || (digits == b"0" && !negative);
    if !canonical || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
    Some(if negative { -n } else { n })
}

/// `_sum` over values (or partial sums): numbers, arrays of numbers (element-wise; a number
/// counts as a one-element array), objects summed member-wise, recursively. The error is
/// the value that could not be summed.
fn sum(values: Vec<Value>) -> Result<Value, Value> {
    let mut acc = Value::from(0);
    for v in values {
        acc = sum2(acc, v)?;
    }
    Ok(acc)
}

fn sum2(acc: Value, v: Value) -> Result<Value, Value> {
    match (acc, v) {
        (Value::Number(a), Value::Number(b)) => Ok(Num::of(&a).add(Num::of(&b)).json()),
        (Value::Array(a), Value::Array(b)) => sum_arrays(a, b),
        (Value::Array(a), Value::Number(b)) => sum_arrays(a, vec![Value::Number(b)]),
        (Value::Number(a), Value::Array(b)) => sum_arrays(vec![Value::Number(a)], b),
        (Value::Object(a), Value::Object(b)) => sum_objects(a, b),
        (Value::Number(a), Value::Object(b)) if Num::of(&a) == Num::Int(0) => {
            sum_objects(Map::new(), b)
        }
        (_, v) => Err(v),
    }
}

fn sum_arrays(a: Vec<Value>, b: Vec<Value>) -> Result<Value, Value> {
    let n = a.len().max(b.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(match (a.next(), b.next()) {
            (Some(Value::Number(x)), Some(Value::Number(y))) => Num::of(&x).add(Num::of(&y)).json(),
            (Some(x @ Value::Number(_)), None) | (None, Some(x @ Value::Number(_))) => x,
            (Some(x), _) if !x.is_number() => return Err(x),
            (_, Some(y)) => return Err(y),
            (_, None) => return Err(Value::Null),
        });
    }
    Ok(Value::Array(out))
}

fn sum_objects(mut a: Map<String, Value>, b: Map<String, Value>) -> Result<Value, Value> {
    for (k, v) in b {
        let merged = match a.remove(&k) {
            Some(prev) => sum2(prev, v)?,
            None => match v {
                Value::Number(_) | Value::Object(_) => v,
                Value::Array(items) if items.iter().all(Value::is_number) => Value::Array(items),
                other => return Err(other),
            },
        };
        a.insert(k, merged);
    }
    let mut sorted: Vec<(String, Value)> = a.into_iter().collect();
    sorted.sort_by(|x, y| x.0.cmp(&y.0));
    Ok(Value::Object(sorted.into_iter().collect()))
}

/// `_stats` partial result.
#[derive(Clone, Copy)]
struct Stats {
    sum: Num,
    count: Num,
    min: Num,
    max: Num,
    sumsqr: Num,
}

impl Stats {
    fn of(n: Num) -> Stats {
        Stats {
            sum: n,
            count: Num::Int(1),
            min: n,
            max: n,
            sumsqr: n.mul(n),
        }
    }

    fn from_object(o: &Map<String, Value>) -> Option<Stats> {
        let field = |k: &str| o.get(k).and_then(Value::as_number).map(Num::of);
        let count = field("count")?;
        let sum = field("sum")?;
        Some(Stats {
            sum,
            count,
            min: field("min")?,
            max: field("max")?,
            sumsqr: field("sumsqr").unwrap_or(Num::Int(0)),
        })
    }

    fn merge(self, o: Stats) -> Stats {
        let min = if o.min.f() < self.min.f() {
            o.min
        } else {
            self.min
        };
        let max = if o.max.f() > self.max.f() {
            o.max
        } else {
            self.max
        };
        Stats {
            sum: self.sum.add(o.sum),
            count: self.count.add(o.count),
            min,
            max,
            sumsqr: self.sumsqr.add(o.sumsqr),
        }
    }

    fn json(self) -> Value {
        serde_json::json!({"sum": self.sum.json(), "count": self.count.json(), "min": self.min.json(), "max": self.max.json(), "sumsqr": self.sumsqr.json()})
    }
}

fn stats_error(culprit: &Value) -> Error {
    Error::Reduce {
        error: "builtin_reduce_error".into(),
        reason: format!("The _stats function requires that map values be numbers or arrays of numbers, not '{culprit}'"),
    }
}

/// One value's contribution to `_stats`: a number, an array of numbers (element-wise), or a
/// pre-aggregated stats object.
enum StatsPart {
    One(Stats),
    Many(Vec<Stats>),
}

fn stats_part(v: &Value) -> Result<StatsPart> {
    match v {
        Value::Number(n) => Ok(StatsPart::One(Stats::of(Num::of(n)))),
        Value::Object(o) => Stats::from_object(o)
            .map(StatsPart::One)
            .ok_or_else(|| stats_error(v)),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::Number(n) => Ok(Stats::of(Num::of(n))),
                Value::Object(o) => Stats::from_object(o).ok_or_else(|| stats_error(v)),
                _ => Err(stats_error(v)),
            })
            .collect::<Result<Vec<_>>>()
            .map(StatsPart::Many),
        _ => Err(stats_error(v)),
    }
}

fn stats(values: Vec<Value>) -> Result<Value> {
    let mut acc: Option<StatsPart> = None;
    for v in &values {
        let part = stats_part(v)?;
        acc = Some(match (acc, part) {
            (None, p) => p,
            (Some(StatsPart::One(a)), StatsPart::One(b)) => StatsPart::One(a.merge(b)),
            (Some(StatsPart::Many(a)), StatsPart::Many(b)) if a.len() == b.len() => {
                StatsPart::Many(a.into_iter().zip(b).map(|(x, y)| x.merge(y)).collect())
            }
            _ => return Err(stats_error(v)),
        });
    }
    Ok(match acc {
        None => Stats {
            sum: Num::Int(0),
            count: Num::Int(0),
            min: Num::Int(0),
            max: Num::Int(0),
            sumsqr: Num::Int(0),
        }
        .json(),
        Some(StatsPart::One(s)) => s.json(),
        Some(StatsPart::Many(all)) => Value::Array(all.into_iter().map(Stats::json).collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(key: Value, id: &str, value: Value) -> (Vec<u8>, Vec<u8>) {
        let mut k = viewkey::encoded(&key, Collation::Unicode);
        viewkey::push_doc_id(&mut k, id, 0);
        (k, row::encode_value(&key.to_string(), &value.to_string()))
    }

    fn reducer(r: Reduce) -> ViewReducer {
        ViewReducer::new(
            r,
            Collation::Unicode,
            Runner::Js(Arc::new(Limits::default)),
            true,
        )
    }

    fn run(r: &ViewReducer, rows: &[(Value, Value)]) -> Result<String> {
        let owned: Vec<_> = rows
            .iter()
            .enumerate()
            .map(|(i, (k, v))| entry(k.clone(), &format!("d{i}"), v.clone()))
            .collect();
        let entries: Vec<(&[u8], &[u8])> = owned
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        // Reduce in two halves and rereduce, as the tree does across leaves.
        let (a, b) = entries.split_at(entries.len() / 2);
        let parts = [r.reduce(a).unwrap(), r.reduce(b).unwrap()];
        let whole = r.rereduce(&[&parts[0], &parts[1]]).unwrap();
        r.finish(&whole, rows.len() as u64)
    }

    #[test]
    fn sum_handles_numbers_arrays_and_objects() {
        let r = reducer(Reduce::Sum);
        assert_eq!(
            run(
                &r,
                &[
                    (json!(1), json!(1)),
                    (json!(2), json!(2.5)),
                    (json!(3), json!(3))
                ]
            )
            .unwrap(),
            "6.5"
        );
        assert_eq!(
            run(
                &r,
                &[
                    (json!(1), json!([1, 2])),
                    (json!(2), json!([1])),
                    (json!(3), json!(4))
                ]
            )
            .unwrap(),
            "[6,2]"
        );
        assert_eq!(
            run(
                &r,
                &[
                    (json!(1), json!({"b": 1, "a": {"x": 2}})),
                    (json!(2), json!({"b": 2, "c": [1]}))
                ]
            )
            .unwrap(),
            r#"{"a":{"x":2},"b":3,"c":[1]}"#
        );
        let failed: Value = serde_json::from_str(
            &run(
                &r,
                &[
                    (json!(1), json!(1)),
                    (json!(2), json!("x")),
                    (json!(3), json!(2)),
                ],
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            failed["error"], "builtin_reduce_error",
            "the error takes the value's place"
        );
        assert_eq!(failed["caused_by"], "x");
        assert_eq!(failed["reason"], SUM_ERROR);
        assert_eq!(
            run(&r, &[(json!(1), json!(i64::MAX)), (json!(2), json!(1))]).unwrap(),
            "9.223372036854776e+18",
            "overflow goes to floating point"
        );
    }

    #[test]
    fn integer_literals_take_the_short_way_and_nothing_else_does() {
        for (text, n) in [
            ("0", Some(0)),
            ("-17", Some(-17)),
            ("999999999999999999", Some(999_999_999_999_999_999)),
        ] {
            assert_eq!(json_integer(text.as_bytes()), n, "{text}");
        }
        for text in [
            "-0",
            "007",
            "+1",
            "1.0",
            "1e3",
            "",
            "-",
            "1000000000000000000",
            "\"1\"",
            "[1]",
        ] {
            assert_eq!(json_integer(text.as_bytes()), None, "{text}");
        }
        let texts = |items: &[&'static str]| -> Vec<&'static [u8]> {
            items.iter().map(|t| t.as_bytes()).collect()
        };
        assert_eq!(integer_sum(&texts(&["1", "2", "3"])), Some(6));
        assert_eq!(integer_sum(&texts(&["1", "2", "x"])), None);
        assert_eq!(
            integer_sum(&texts(&["999999999999999999"; 10])),
            None,
            "a total past i64 goes the general way"
        );
    }

    proptest::proptest! {
        #[test]
        fn the_integer_sum_agrees_with_the_general_sum(values in proptest::collection::vec(proptest::prop_oneof![9 => -(10i64.pow(17))..10i64.pow(17), 1 => proptest::num::i64::ANY], 0..40)) {
            let texts: Vec<String> = values.iter().map(i64::to_string).collect();
            let slices: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
            let general = sum(values.iter().map(|&v| Value::from(v)).collect()).unwrap().to_string();
            match integer_sum(&slices) {
                Some(total) => proptest::prop_assert_eq!(total.to_string(), general),
                None => {
                    let long = values.iter().any(|v| v.unsigned_abs() >= 1_000_000_000_000_000_000);
                    let overflows = values.iter().try_fold(0i64, |t, &v| t.checked_add(v)).is_none();
                    proptest::prop_assert!(long || overflows, "only 19-digit values or a total past i64 leave the short way");
                }
            }
        }
    }

    #[test]
    fn count_stats_and_distinct() {
        assert_eq!(
            run(
                &reducer(Reduce::Count),
                &[
                    (json!(1), json!(null)),
                    (json!(1), json!(null)),
                    (json!(2), json!(null))
                ]
            )
            .unwrap(),
            "3"
        );
        let stats = run(
            &reducer(Reduce::Stats),
            &[
                (json!(1), json!(1)),
                (json!(2), json!(3)),
                (json!(3), json!(-2)),
                (json!(4), json!(4)),
            ],
        )
        .unwrap();
        assert_eq!(stats, r#"{"sum":6,"count":4,"min":-2,"max":4,"sumsqr":30}"#);
        let arrays = run(
            &reducer(Reduce::Stats),
            &[(json!(1), json!([1, 10])), (json!(2), json!([3, 20]))],
        )
        .unwrap();
        assert_eq!(
            arrays,
            r#"[{"sum":4,"count":2,"min":1,"max":3,"sumsqr":10},{"sum":30,"count":2,"min":10,"max":20,"sumsqr":500}]"#
        );
        assert!(run(
            &reducer(Reduce::Stats),
            &[(json!(1), json!("no")), (json!(2), json!(1))]
        )
        .is_err());
        let rows: Vec<_> = (0..500).map(|i| (json!(i % 37), json!(null))).collect();
        let distinct: i64 = run(&reducer(Reduce::ApproxCountDistinct), &rows)
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (distinct - 37).abs() <= 2,
            "an estimate near 37: {distinct}"
        );
    }

    #[test]
    fn top_bottom_first_and_last_reduce_as_couchdb_does() {
        let rows: Vec<(Value, Value)> = [(1, 5), (2, 3), (3, 9), (4, 3), (5, 7)]
            .iter()
            .map(|(k, v)| (json!(k), json!(v)))
            .collect();
        let parsed = |s: &str| Reduce::parse(s).unwrap();
        // Distinct values, greatest or least first, across a rereduce.
        assert_eq!(run(&reducer(parsed("_top_3")), &rows).unwrap(), "[9,7,5]");
        assert_eq!(run(&reducer(parsed("_bottom_2")), &rows).unwrap(), "[3,5]");
        assert_eq!(
            run(&reducer(parsed("_top_10")), &rows).unwrap(),
            "[9,7,5,3]"
        );
        // The first and last rows in key order, whatever their values.
        assert_eq!(run(&reducer(parsed("_first")), &rows).unwrap(), "5");
        assert_eq!(run(&reducer(parsed("_last")), &rows).unwrap(), "7");
        let mixed = [
            (json!(1), json!("b")),
            (json!(2), json!(null)),
            (json!(3), json!([1])),
        ];
        assert_eq!(
            run(&reducer(parsed("_top_2")), &mixed).unwrap(),
            r#"[[1],"b"]"#
        );
        assert_eq!(parsed("_top_2").source(), "_top_2");
        assert_eq!(parsed("_first whatever"), Reduce::Edge(true));
        for bad in ["_top_0", "_top_x", "_top_2\n", "_bottom_"] {
            assert!(Reduce::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn javascript_reduce_gets_keys_ids_and_rereduce() {
        let r = reducer(Reduce::Function("function(keys, values, rereduce) { if (rereduce) return sum(values); return keys.map(function(k){ return k[1].length + k[0]; }).reduce(function(a, b){ return a + b; }, 0); }".into()));
        // keys 1 and 2 with ids d0, d1: (2 + 1) + (2 + 2)
        assert_eq!(
            run(&r, &[(json!(1), json!(0)), (json!(2), json!(0))]).unwrap(),
            "7"
        );
        let grows = reducer(Reduce::Function(
            "function(k, v) { var s = ''; for (var i = 0; i < 5000; i++) s += 'x'; return s; }"
                .into(),
        ));
        let err = run(&grows, &[(json!(1), json!(0)), (json!(2), json!(0))]).unwrap_err();
        assert!(
            matches!(err, Error::Reduce { ref error, .. } if error == "reduce_overflow_error"),
            "{err}"
        );
    }

    #[test]
    fn a_reduce_that_never_reads_its_keys_answers_the_same_without_them() {
        let body = "var s = ''; for (var i = 0; i < 4100; i++) s += 'x'; return rereduce ? values.length : s;";
        let ignores = reducer(Reduce::Function(
            format!("function(keys, values, rereduce) {{ {body} }}").into(),
        ));
        let reads = reducer(Reduce::Function(
            format!("function(keys, values, rereduce) {{ keys; {body} }}").into(),
        ));
        assert!(!ignores.keys_read && reads.keys_read);
        // The output (4,102 bytes) would not shrink against the values alone, but does against
        // values and long keys: reduce_limit counts the keys even when they are not passed.
        for (key_len, overflows) in [(3000, false), (10, true)] {
            let owned: Vec<_> = (0..3)
                .map(|i| entry(json!("k".repeat(key_len)), &format!("d{i}"), json!(i)))
                .collect();
            let entries: Vec<(&[u8], &[u8])> = owned
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            let (a, b) = (
                ignores.reduce(&entries).unwrap(),
                reads.reduce(&entries).unwrap(),
            );
            assert_eq!(a, b, "keys of length {key_len}");
            assert_eq!(failed(&a).is_some(), overflows, "keys of length {key_len}");
        }
        let sum = reducer(Reduce::Function(
            "function(keys, values, rereduce) { return sum(values); }".into(),
        ));
        assert!(!sum.keys_read);
        assert_eq!(
            run(
                &sum,
                &[
                    (json!(1), json!(2)),
                    (json!(2), json!(3)),
                    (json!(3), json!(4))
                ]
            )
            .unwrap(),
            "9"
        );
    }
}
