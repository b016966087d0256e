//! A view query's parameters checked against its view in CouchDB's order of checks: which
//! view, reduce or map rows, grouping, keys and ranges, whether the index is brought up to
//! date first, and how the rows' documents are shown. The caller reads the parameters (an
//! HTTP edge from the query string and body) through [`Params`], keeping its own errors for
//! values it cannot read.

use serde_json::Value;
use settee_db::DocOptions;
use settee_json::viewkey;

use crate::{DesignDoc, Error, Grouping, ViewQuery};

/// When a query brings the index up to date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// Before answering (the default).
    Now,
    /// Not at all (`update=false`, `stale=ok`).
    Never,
    /// After answering (`update=lazy`, `stale=update_after`).
    After,
}

/// A checked view query.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The view's position in its design document.
    pub view: usize,
    /// Range, keys, paging and grouping.
    pub query: ViewQuery,
    /// Whether rows are reduced.
    pub reduce: bool,
    /// Whether map rows carry their documents.
    pub include_docs: bool,
    /// How those documents are shown.
    pub doc: DocOptions,
    /// Whether the answer carries the index's `update_seq`.
    pub update_seq: bool,
    /// When the index is brought up to date.
    pub update: Update,
}

/// The range parameters: `key`, `start_key`/`startkey`, `end_key`/`endkey` and the document
/// ids at either end.
#[derive(Clone, Debug, Default)]
pub struct KeyRange {
    /// First key.
    pub start_key: Option<Value>,
    /// Last key.
    pub end_key: Option<Value>,
    /// Document id at the first key.
    pub start_docid: Option<String>,
    /// Document id at the last key.
    pub end_docid: Option<String>,
}

/// A view query's parameters as the caller reads them. A value that cannot be read fails
/// with the caller's error; [`plan`] fails with [`Error`] converted into it.
pub trait Params {
    /// The caller's error.
    type Error: From<Error>;
    /// The raw text of parameter `name`.
    fn text(&self, name: &str) -> Option<&str>;
    /// A boolean parameter, if given.
    fn bool(&self, name: &str) -> Result<Option<bool>, Self::Error>;
    /// A boolean parameter, false when not given.
    fn flag(&self, name: &str) -> Result<bool, Self::Error>;
    /// A non-negative integer parameter, if given.
    fn u64(&self, name: &str) -> Result<Option<u64>, Self::Error>;
    /// A JSON parameter, if given.
    fn json(&self, name: &str) -> Result<Option<Value>, Self::Error>;
    /// The range parameters.
    fn key_range(&self) -> Result<KeyRange, Self::Error>;
}

fn qpe<E: From<Error>>(reason: &str) -> E {
    Error::QueryParse(reason.to_string()).into()
}

/// Reads and checks a query's parameters against view `view` of `ddoc`, in CouchDB's order
/// of checks; `body_keys` are `keys` given in a request body.
pub fn plan<P: Params>(
    ddoc: &DesignDoc,
    view: &str,
    q: &P,
    body_keys: Option<Value>,
) -> Result<Plan, P::Error> {
    let (index, def) = ddoc
        .view(view)
        .ok_or(Error::NotFound("missing_named_view"))?;
    let has_reduce = def.reduce.is_some();
    let reduce_param = q.bool("reduce")?;
    if reduce_param == Some(true) && !has_reduce {
        return Err(qpe("Reduce is invalid for map-only views."));
    }
    let reduce = has_reduce && reduce_param != Some(false);
    let grouping = grouping(q, reduce)?;
    let include_docs = q.bool("include_docs")?;
    if reduce && include_docs == Some(true) {
        return Err(qpe("`include_docs` is invalid for reduce"));
    }
    let conflicts = q.bool("conflicts")?;
    if reduce && conflicts.is_some() {
        return Err(qpe("`conflicts` is invalid for reduce views."));
    }
    let keys = match body_keys.or(q.json("keys")?) {
        None => None,
        Some(Value::Array(k)) => Some(k),
        Some(_) => return Err(qpe("`keys` must be an array of strings.")),
    };
    let range = q.key_range()?;
    if keys.as_ref().is_some_and(|k| !k.is_empty())
        && (range.start_key.is_some() || range.end_key.is_some())
    {
        return Err(qpe(
            "`keys` is incompatible with `key`, `start_key` and `end_key`",
        ));
    }
    if reduce && keys.is_some() && grouping != Grouping::Exact {
        return Err(qpe(
            "Multi-key fetches for reduce views must use `group=true`",
        ));
    }
    let query = ViewQuery {
        start_key: range.start_key,
        start_docid: range.start_docid,
        end_key: range.end_key,
        end_docid: range.end_docid,
        inclusive_end: q.bool("inclusive_end")?.unwrap_or(true),
        descending: q.flag("descending")?,
        skip: q.u64("skip")?.unwrap_or(0),
        limit: q.u64("limit")?,
        keys,
        grouping,
        partition: None,
    };
    check_range(&query, def.collation)?;
    let update = update_mode(q)?;
    q.bool("sorted")
        .map_err(|_| qpe::<P::Error>("Invalid value for `sorted`."))?;
    let query = ViewQuery {
        partition: partition(ddoc, q)?,
        ..query
    };
    let doc = DocOptions {
        conflicts: conflicts.unwrap_or(false),
        attachments: q.flag("attachments")?,
        att_encoding_info: q.flag("att_encoding_info")?,
        ..DocOptions::default()
    };
    Ok(Plan {
        view: index,
        query,
        reduce,
        include_docs: include_docs.unwrap_or(false),
        doc,
        update_seq: q.flag("update_seq")?,
        update,
    })
}

/// The partition a query reads: one is named exactly when the design document is
/// partitioned.
fn partition<P: Params>(ddoc: &DesignDoc, q: &P) -> Result<Option<String>, P::Error> {
    let partition = match q.text("partition") {
        None => None,
        Some("") => return Err(qpe("Invalid value for `partition`.")),
        Some(p) => Some(p.to_string()),
    };
    match (ddoc.options.partitioned, &partition) {
        (true, None) => Err(qpe(
            "`partition` parameter is mandatory for queries to this view.",
        )),
        (false, Some(_)) => Err(qpe(
            "`partition` parameter is not supported in this design doc",
        )),
        _ => Ok(partition),
    }
}

/// `group` and `group_level`, which only reduce views take.
fn grouping<P: Params>(q: &P, reduce: bool) -> Result<Grouping, P::Error> {
    let group = q.bool("group")?;
    let group_level = q.u64("group_level")?;
    let grouping = match (group, group_level) {
        (Some(false), Some(n)) if n > 0 => {
            return Err(qpe(
                "Can't specify group=false and group_level>0 at the same time",
            ))
        }
        (_, Some(0)) => Grouping::All,
        (_, Some(n)) => Grouping::Level(n as usize),
        (Some(true), None) => Grouping::Exact,
        _ => Grouping::All,
    };
    if !reduce && (group == Some(true) || group_level.is_some_and(|n| n > 0)) {
        return Err(qpe("Invalid use of grouping on a map view."));
    }
    Ok(grouping)
}

/// `stale`, then `update` (which wins), and `stable`.
fn update_mode<P: Params>(q: &P) -> Result<Update, P::Error> {
    let mut mode = match q.text("stale") {
        None => Update::Now,
        Some("ok") => Update::Never,
        Some("update_after") => Update::After,
        Some(_) => return Err(qpe("Invalid value for `stale`.")),
    };
    match q.text("update") {
        None => {}
        Some("true") => mode = Update::Now,
        Some("false") => mode = Update::Never,
        Some("lazy") => mode = Update::After,
        Some(_) => return Err(qpe("Invalid value for `update`.")),
    }
    if !matches!(q.text("stable"), None | Some("true") | Some("false")) {
        return Err(qpe("Invalid value for `stable`."));
    }
    Ok(mode)
}

/// CouchDB refuses a range that cannot hold rows in the walk direction.
fn check_range(q: &ViewQuery, c: viewkey::Collation) -> Result<(), Error> {
    let (Some(s), Some(e)) = (&q.start_key, &q.end_key) else {
        return Ok(());
    };
    // Different keys decide the order by themselves (encodings are prefix-free); equal keys
    // never make an empty range here.
    let (start_key, end_key) = (viewkey::encoded(s, c), viewkey::encoded(e, c));
    if start_key == end_key {
        return Ok(());
    }
    let flip = match (q.descending, start_key.cmp(&end_key)) {
        (false, std::cmp::Ordering::Greater) => "true",
        (true, std::cmp::Ordering::Less) => "false",
        _ => return Ok(()),
    };
    Err(Error::QueryParse(format!(
        "No rows can match your key range, reverse your start_key and end_key or set descending={flip}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    /// Parameters as JSON texts, failing as `Error::QueryParse` on unreadable values.
    struct Texts(HashMap<&'static str, &'static str>);

    impl Params for Texts {
        type Error = Error;
        fn text(&self, name: &str) -> Option<&str> {
            self.0.get(name).copied()
        }
        fn bool(&self, name: &str) -> Result<Option<bool>, Error> {
            self.text(name)
                .map(|t| {
                    t.parse()
                        .map_err(|_| Error::QueryParse(format!("bad {name}")))
                })
                .transpose()
        }
        fn flag(&self, name: &str) -> Result<bool, Error> {
            Ok(self.bool(name)?.unwrap_or(false))
        }
        fn u64(&self, name: &str) -> Result<Option<u64>, Error> {
            self.text(name)
                .map(|t| {
                    t.parse()
                        .map_err(|_| Error::QueryParse(format!("bad {name}")))
                })
                .transpose()
        }
        fn json(&self, name: &str) -> Result<Option<Value>, Error> {
            self.text(name)
                .map(|t| serde_json::from_str(t).map_err(|_| Error::QueryParse(name.into())))
                .transpose()
        }
        fn key_range(&self) -> Result<KeyRange, Error> {
            Ok(KeyRange {
                start_key: self.json("start_key")?,
                end_key: self.json("end_key")?,
                ..KeyRange::default()
            })
        }
    }

    fn ddoc() -> DesignDoc {
        let doc = json!({"_id": "_design/d", "views": {
            "map": {"map": "function(doc) { emit(doc._id, 1); }"},
            "sum": {"map": "function(doc) { emit(doc._id, 1); }", "reduce": "_sum"}}});
        DesignDoc::parse("_design/d", &doc, false).unwrap()
    }

    fn try_plan(view: &str, params: &[(&'static str, &'static str)]) -> Result<Plan, String> {
        let q = Texts(params.iter().copied().collect());
        plan(&ddoc(), view, &q, None).map_err(|e| e.to_string())
    }

    #[test]
    fn parameters_are_checked_against_the_view() {
        let p = try_plan("sum", &[]).unwrap();
        assert!(p.reduce && p.query.grouping == Grouping::All && p.update == Update::Now);
        let p = try_plan("sum", &[("group", "true"), ("keys", "[1, 2]")]).unwrap();
        assert_eq!(p.query.grouping, Grouping::Exact);
        let p = try_plan("map", &[("include_docs", "true"), ("stale", "ok")]).unwrap();
        assert!(!p.reduce && p.include_docs && p.update == Update::Never);
        let lazy = try_plan("map", &[("stale", "ok"), ("update", "lazy")]).unwrap();
        assert_eq!(lazy.update, Update::After, "`update` wins over `stale`");
        let refused = |view, params: &[(&'static str, &'static str)], reason: &str| {
            assert_eq!(try_plan(view, params).unwrap_err(), reason, "{params:?}");
        };
        refused("nope", &[], "not found: missing_named_view");
        refused(
            "map",
            &[("reduce", "true")],
            "Reduce is invalid for map-only views.",
        );
        refused(
            "map",
            &[("group", "true")],
            "Invalid use of grouping on a map view.",
        );
        refused(
            "sum",
            &[("include_docs", "true")],
            "`include_docs` is invalid for reduce",
        );
        refused(
            "sum",
            &[("keys", "[1]")],
            "Multi-key fetches for reduce views must use `group=true`",
        );
        refused(
            "map",
            &[("keys", "[1]"), ("start_key", "0")],
            "`keys` is incompatible with `key`, `start_key` and `end_key`",
        );
        refused(
            "map",
            &[("start_key", "\"b\""), ("end_key", "\"a\"")],
            "No rows can match your key range, reverse your start_key and end_key or set descending=true",
        );
        refused("map", &[("update", "soon")], "Invalid value for `update`.");
        // The first failing check wins: `reduce` is read before `group`.
        refused(
            "map",
            &[("reduce", "true"), ("group", "x")],
            "Reduce is invalid for map-only views.",
        );
        refused("map", &[("sorted", "maybe")], "Invalid value for `sorted`.");
    }
}
