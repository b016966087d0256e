//! A `_find` request's body, read with CouchDB's defaults and refused with its errors.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Map, Value};

use crate::def::ddoc_id;
use crate::erl;
use crate::{Error, Result, Selector};

/// The keys a `_find` body may have, as CouchDB lists them.
const FIND_KEYS: &[&str] = &[
    "selector",
    "use_index",
    "bookmark",
    "limit",
    "skip",
    "sort",
    "fields",
    "partition",
    "r",
    "conflicts",
    "stale",
    "update",
    "stable",
    "execution_stats",
    "allow_fallback",
];

/// `use_index`: a design document, and perhaps an index name.
pub type UseIndex = (String, Option<String>);

/// Where a query resumes: after the row of this key (views) and document id.
#[derive(Debug, Clone, PartialEq)]
pub struct Bookmark {
    /// The row's key in a JSON index; `None` for `_all_docs`.
    pub key: Option<Value>,
    /// The document id.
    pub id: String,
}

/// A parsed `_find` body.
pub struct FindQuery {
    /// Which documents.
    pub selector: Selector,
    /// The selector as given.
    pub selector_json: Value,
    /// At most this many (`limit`).
    pub limit: u64,
    /// After passing over this many matches (`skip`).
    pub skip: u64,
    /// Only these fields of each document (dotted paths), when given.
    pub fields: Option<Vec<String>>,
    /// `sort`: the fields, in order (dotted names).
    pub sort: Vec<String>,
    /// In descending order of the index.
    pub descending: bool,
    /// `use_index`: a design document, and perhaps an index name.
    pub use_index: Option<UseIndex>,
    /// `use_index` as given (`[]` when absent), for `_explain`.
    pub use_index_json: Value,
    /// `allow_fallback`: whether another index may serve a query `use_index` cannot.
    pub allow_fallback: bool,
    /// Where an earlier page ended (its `bookmark`).
    pub after: Option<Bookmark>,
    /// The bookmark given, answered again by a page that moves nothing (`nil` for none).
    pub bookmark: String,
    /// Whether a bookmark was given that is not a JSON index's (a text index's, or none).
    pub foreign_bookmark: bool,
    /// With each document's `_conflicts`.
    pub conflicts: bool,
    /// Whether the answer reports `execution_stats`.
    pub execution_stats: bool,
    /// Whether the index is brought up to date first (`update`, `stale`).
    pub update: bool,
    /// `stable` (`stale: "ok"` implies it).
    pub stable: bool,
    /// `r`, as given (accepted; there is one copy of every document).
    pub r: u64,
    /// `partition`: only this partition's documents (`""` for none).
    pub partition: String,
}

impl FindQuery {
    /// Reads a `_find` body with CouchDB's defaults and errors; `limit` is `default_limit`
    /// when not given (`[mango] default_limit`).
    pub fn parse(body: &Map<String, Value>, default_limit: u64) -> Result<FindQuery> {
        if let Some(k) = body.keys().find(|k| !FIND_KEYS.contains(&k.as_str())) {
            return Err(Error::query(
                "invalid_key",
                format!("Invalid key {k} for this request."),
            ));
        }
        let flag = |key: &str, default: bool| match body.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(Error::query(
                "invalid_boolean",
                format!("Invalid boolean value: {}", erl::w(v)),
            )),
        };
        let raw = body.get("selector").ok_or_else(|| {
            Error::query("missing_required_key", "Missing required key: selector")
        })?;
        if !raw.is_object() {
            return Err(Error::query(
                "invalid_selector_json",
                format!("Selector must be a JSON object, not: {raw}"),
            ));
        }
        let selector = Selector::parse(raw)?;
        let count = |key: &str, default: u64| match body.get(key) {
            None => Ok(default),
            Some(v) => v.as_u64().ok_or_else(|| {
                Error::query(
                    "invalid_non_neg_integer",
                    format!(
                        "{} is not an integer greater than or equal to zero",
                        erl::w(v)
                    ),
                )
            }),
        };
        let fields = match body.get("fields") {
            None => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|f| {
                        f.as_str().map(str::to_string).ok_or_else(|| {
                            Error::query(
                                "invalid_field",
                                format!("Invalid JSON for field spec: {}", erl::w(f)),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>>>()?,
            ),
            Some(v) => {
                return Err(Error::query(
                    "invalid_fields",
                    format!("Fields must be an array of strings, not: {}", erl::w(v)),
                ))
            }
        };
        let bad_bookmark =
            |b: &Value| Error::query("invalid_bookmark", format!("Invalid bookmark value: {b}"));
        let after = match body.get("bookmark") {
            None | Some(Value::Null) => None,
            Some(Value::String(b)) if b.is_empty() => None,
            // Not a JSON index's: perhaps a text index's, known once the query is planned.
            Some(v @ Value::String(b)) if !listed(b) => return Err(bad_bookmark(v)),
            Some(Value::String(b)) => decode_bookmark(b),
            Some(other) => return Err(bad_bookmark(other)),
        };
        let sort = match body.get("sort") {
            None => Vec::new(),
            Some(v) => sort_specs(v)?,
        };
        let stale_ok = match body.get("stale") {
            None => false,
            Some(Value::String(s)) if s == "ok" => true,
            Some(v) => {
                return Err(Error::query(
                    "invalid_stale_value",
                    format!("Invalid stale value: {v}"),
                ))
            }
        };
        let partition = match body.get("partition") {
            None => String::new(),
            Some(Value::String(p)) => p.clone(),
            Some(v) => {
                return Err(Error::query(
                    "invalid_partition",
                    format!("Invalid partition: {v}"),
                ))
            }
        };
        let r = match body.get("r") {
            None => 1,
            Some(v) => v.as_u64().filter(|r| *r > 0).ok_or_else(|| {
                Error::query(
                    "invalid_pos_integer",
                    format!("{} is not an integer greater than zero", erl::w(v)),
                )
            })?,
        };
        let (use_index, use_index_json) = use_index(body.get("use_index"))?;
        let foreign_bookmark = after.is_none()
            && matches!(body.get("bookmark"), Some(Value::String(b)) if !b.is_empty());
        Ok(FindQuery {
            limit: count("limit", default_limit)?,
            skip: count("skip", 0)?,
            fields,
            descending: sort.first().is_some_and(|(_, desc)| *desc),
            sort: sort.into_iter().map(|(f, _)| f).collect(),
            selector,
            selector_json: raw.clone(),
            use_index,
            use_index_json,
            allow_fallback: flag("allow_fallback", true)?,
            after,
            conflicts: flag("conflicts", false)?,
            execution_stats: flag("execution_stats", false)?,
            update: flag("update", true)? && !stale_ok,
            stable: flag("stable", false)? || stale_ok,
            r,
            partition,
            foreign_bookmark,
            bookmark: body
                .get("bookmark")
                .and_then(Value::as_str)
                .filter(|b| !b.is_empty())
                .unwrap_or("nil")
                .to_string(),
        })
    }
}

/// `use_index`: a design document name (with or without `_design/`), or `[ddoc]`, or
/// `[ddoc, index]`; and the value as `_explain` shows it.
fn use_index(v: Option<&Value>) -> Result<(Option<UseIndex>, Value)> {
    let bad = |v: &Value| {
        Error::query(
            "invalid_index_name",
            format!("Invalid index name: {}", erl::w(v)),
        )
    };
    let ddoc = |d: &str| ddoc_id(d);
    match v {
        None => Ok((None, json!([]))),
        Some(Value::String(d)) if d.is_empty() => Ok((None, json!([]))),
        Some(Value::String(d)) => Ok((Some((ddoc(d), None)), json!([d]))),
        Some(v @ Value::Array(a)) => match a.as_slice() {
            [] => Ok((None, json!([]))),
            [Value::String(d)] => Ok((Some((ddoc(d), None)), v.clone())),
            [Value::String(d), Value::String(n)] => {
                Ok((Some((ddoc(d), Some(n.clone()))), v.clone()))
            }
            _ => Err(bad(v)),
        },
        Some(v) => Err(bad(v)),
    }
}

/// A `sort` (or an index's `fields`): names or `{"name": "asc"|"desc"}`, one direction
/// for all, as CouchDB reads them.
pub(crate) fn sort_specs(sort: &Value) -> Result<Vec<(String, bool)>> {
    let Value::Array(fields) = sort else {
        return Err(Error::query(
            "invalid_sort_json",
            format!("Sort must be an array of sort specs, not: {}", erl::p(sort)),
        ));
    };
    let mut out: Vec<(String, bool)> = Vec::with_capacity(fields.len());
    for field in fields {
        let bad_field = || {
            Error::query(
                "invalid_sort_field",
                format!("Invalid sort field: {}", erl::p(field)),
            )
        };
        let (name, desc) = match field {
            Value::String(f) if !f.is_empty() => (f.as_str(), false),
            Value::Object(o) if o.len() == 1 => {
                let (f, dir) = o.iter().next().expect("one member");
                match dir.as_str() {
                    Some("asc") if !f.is_empty() => (f.as_str(), false),
                    Some("desc") if !f.is_empty() => (f.as_str(), true),
                    _ => return Err(bad_field()),
                }
            }
            _ => return Err(bad_field()),
        };
        if out.first().is_some_and(|(_, d)| *d != desc) {
            return Err(Error::query(
                "unsupported_mixed_sort",
                "Sorts currently only support a single direction for all fields.",
            ));
        }
        out.push((name.to_string(), desc));
    }
    Ok(out)
}

/// Whether a selector bounds `_id` where CouchDB's special index can use it: at its top or
/// in a top-level `$and`, by equality or a range operator.
pub(crate) fn bounds_id(selector: &Value) -> bool {
    let Some(m) = selector.as_object() else {
        return false;
    };
    m.iter().any(|(k, v)| match k.as_str() {
        "_id" => match v {
            Value::Object(ops) => ops
                .keys()
                .any(|op| matches!(op.as_str(), "$eq" | "$lt" | "$lte" | "$gt" | "$gte")),
            _ => true,
        },
        "$and" => v
            .as_array()
            .is_some_and(|parts| parts.iter().any(bounds_id)),
        _ => false,
    })
}

/// Whether a bookmark is base64url JSON list, as every index's bookmarks are.
fn listed(b: &str) -> bool {
    URL_SAFE_NO_PAD
        .decode(b.trim_end_matches('='))
        .ok()
        .and_then(|bytes| settee_json::deep::from_slice::<Value>(&bytes).ok())
        .is_some_and(|v| v.is_array())
}

/// Where a bookmark of ours resumes.
pub(crate) fn decode_bookmark(b: &str) -> Option<Bookmark> {
    let bytes = URL_SAFE_NO_PAD.decode(b).ok()?;
    match settee_json::deep::from_slice::<Value>(&bytes).ok()? {
        Value::Array(mut a) if a.len() == 1 => Some(Bookmark {
            key: None,
            id: a.pop()?.as_str()?.to_string(),
        }),
        Value::Array(mut a) if a.len() == 2 => {
            let id = a.pop()?.as_str()?.to_string();
            Some(Bookmark {
                key: Some(a.pop()?),
                id,
            })
        }
        _ => None,
    }
}

/// The bookmark of a page whose last returned row was `at`.
pub(crate) fn encode_bookmark(at: &Bookmark) -> String {
    let v = match &at.key {
        None => json!([at.id]),
        Some(k) => json!([k, at.id]),
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&v).expect("json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// CouchDB's error name and reason of a refusal.
    fn named(e: Error) -> (String, String) {
        match e {
            Error::Query { error, reason } => (error.to_string(), reason),
            other => ("bad_request".to_string(), other.to_string()),
        }
    }

    #[test]
    fn sorts_are_read_as_couchdb_reads_them() {
        assert_eq!(
            sort_specs(&json!(["a", {"b.c": "asc"}])).unwrap(),
            vec![("a".to_string(), false), ("b.c".to_string(), false)]
        );
        assert_eq!(
            sort_specs(&json!([{"a": "desc"}])).unwrap(),
            vec![("a".to_string(), true)]
        );
        let error = |sort: Value| named(sort_specs(&sort).unwrap_err()).0;
        assert_eq!(error(json!([{"_id": "sideways"}])), "invalid_sort_field");
        assert_eq!(
            error(json!(["_id", {"_id": "desc"}])),
            "unsupported_mixed_sort"
        );
        assert_eq!(error(json!("_id")), "invalid_sort_json");
        assert_eq!(error(json!([5])), "invalid_sort_field");
        assert!(bounds_id(&json!({"_id": {"$gt": null}})));
        assert!(bounds_id(&json!({"$and": [{"_id": "x"}]})));
        assert!(!bounds_id(&json!({"n": 1})));
    }

    #[test]
    fn bodies_are_checked_as_couchdb_checks_them() {
        let parse = |v: Value| {
            FindQuery::parse(v.as_object().unwrap(), 25)
                .err()
                .map(named)
        };
        assert_eq!(
            parse(json!({"selector": {}, "limt": 1})),
            Some((
                "invalid_key".into(),
                "Invalid key limt for this request.".into()
            ))
        );
        assert_eq!(
            parse(json!({"selector": []})).unwrap().0,
            "invalid_selector_json"
        );
        assert_eq!(
            parse(json!({"selector": {}, "limit": -1})),
            Some((
                "invalid_non_neg_integer".into(),
                "-1 is not an integer greater than or equal to zero".into()
            ))
        );
        assert_eq!(
            parse(json!({"selector": {}, "conflicts": "true"}))
                .unwrap()
                .0,
            "invalid_boolean"
        );
        assert_eq!(
            parse(json!({"selector": {}, "bookmark": null, "r": 1, "use_index": "x"})),
            None
        );
        assert_eq!(
            use_index(Some(&json!(["d", "v"]))).unwrap().0,
            Some(("_design/d".to_string(), Some("v".to_string())))
        );
        assert_eq!(
            use_index(Some(&json!("_design/d"))).unwrap().0,
            Some(("_design/d".to_string(), None))
        );
        assert_eq!(
            named(use_index(Some(&json!(5))).unwrap_err()).0,
            "invalid_index_name"
        );
    }

    #[test]
    fn bookmarks_round_trip_and_refuse_anything_else() {
        let b = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json!(["doc7"])).unwrap());
        assert_eq!(decode_bookmark(&b).unwrap().id, "doc7");
        let at = Bookmark {
            key: Some(json!([1, "x"])),
            id: "d".into(),
        };
        assert_eq!(decode_bookmark(&encode_bookmark(&at)), Some(at));
        assert_eq!(decode_bookmark("!!"), None);
        assert_eq!(decode_bookmark(&URL_SAFE_NO_PAD.encode(b"{}")), None);
    }
}
