//! A `_find` request's body, read with CouchDB's defaults and refused with its errors.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{Map, Value};
use settee_db::DESIGN_PREFIX;

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

/// A parsed `_find` body.
pub struct FindQuery {
    /// Which documents.
    pub selector: Selector,
    /// At most this many (`limit`).
    pub limit: u64,
    /// After passing over this many matches (`skip`).
    pub skip: u64,
    /// Only these fields of each document (dotted paths), when given.
    pub fields: Option<Vec<String>>,
    /// In descending order of the index.
    pub descending: bool,
    /// The id of the last document an earlier page returned (its `bookmark`).
    pub after: Option<String>,
    /// The bookmark given, answered again by a page that moves nothing (`nil` for none).
    pub bookmark: String,
    /// With each document's `_conflicts`.
    pub conflicts: bool,
    /// Whether the answer reports `execution_stats`.
    pub execution_stats: bool,
    /// The warning about a `use_index` that could not be followed, if any.
    pub use_index_warning: Option<String>,
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
        let flag = |key: &str| match body.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(Error::query(
                "invalid_boolean",
                format!("Invalid boolean value: {v}"),
            )),
        };
        for key in ["update", "stable"] {
            flag(key)?;
        }
        let raw = body.get("selector").ok_or_else(|| {
            Error::query("missing_required_key", "Missing required key: selector")
        })?;
        if !raw.is_object() {
            return Err(Error::query(
                "invalid_selector_json",
                format!("Selector must be a JSON object, not: {raw}"),
            ));
        }
        let selector =
            Selector::parse(raw).map_err(|e| Error::Selector(format!("Invalid selector: {e}")))?;
        let count = |key: &str, default: u64| match body.get(key) {
            None => Ok(default),
            Some(v) => v.as_u64().ok_or_else(|| {
                Error::query(
                    "invalid_non_neg_integer",
                    format!("{v} is not an integer greater than or equal to zero"),
                )
            }),
        };
        let fields = match body.get("fields") {
            None => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|f| f.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| Error::query("invalid_field", "Fields must be strings"))?,
            ),
            Some(_) => {
                return Err(Error::query(
                    "invalid_fields",
                    "Fields must be a list of strings",
                ))
            }
        };
        let bad_bookmark =
            |b: &Value| Error::query("invalid_bookmark", format!("Invalid bookmark value: {b}"));
        let after = match body.get("bookmark") {
            None | Some(Value::Null) => None,
            Some(Value::String(b)) if b.is_empty() || b == "nil" => None,
            Some(v @ Value::String(b)) => Some(decode_bookmark(b).ok_or_else(|| bad_bookmark(v))?),
            Some(other) => return Err(bad_bookmark(other)),
        };
        Ok(FindQuery {
            limit: count("limit", default_limit)?,
            skip: count("skip", 0)?,
            fields,
            descending: sort_descending(body.get("sort"), raw)?,
            selector,
            after,
            conflicts: flag("conflicts")?,
            execution_stats: flag("execution_stats")?,
            bookmark: body
                .get("bookmark")
                .and_then(Value::as_str)
                .filter(|b| !b.is_empty())
                .unwrap_or("nil")
                .to_string(),
            use_index_warning: use_index_warning(body.get("use_index")),
        })
    }
}

/// CouchDB's warning for a `use_index` that names an index other than `_all_docs`.
fn use_index_warning(use_index: Option<&Value>) -> Option<String> {
    let ddoc = |d: &str| {
        if d.starts_with(DESIGN_PREFIX) {
            d.to_string()
        } else {
            format!("{DESIGN_PREFIX}{d}")
        }
    };
    match use_index? {
        Value::String(d) if !d.is_empty() => Some(format!(
            "{} was not used because it does not contain a valid index for this query.",
            ddoc(d)
        )),
        Value::Array(a) => match a.as_slice() {
            [Value::String(d)] => Some(format!(
                "{} was not used because it does not contain a valid index for this query.",
                ddoc(d)
            )),
            [Value::String(d), Value::String(v)] => Some(format!(
                "{}, {v} was not used because it is not a valid index for this query.",
                ddoc(d)
            )),
            _ => None,
        },
        _ => None,
    }
}

/// The direction a `sort` asks for. Without indexes only `_id` can be sorted by, and only
/// when the selector bounds `_id` (CouchDB's special index is usable then alone).
fn sort_descending(sort: Option<&Value>, selector: &Value) -> Result<bool> {
    let no_index = || {
        Error::query(
            "no_usable_index",
            "No index exists for this sort, try indexing by the sort fields.",
        )
    };
    let Some(sort) = sort else { return Ok(false) };
    let Value::Array(fields) = sort else {
        return Err(Error::query(
            "invalid_sort_json",
            format!("Sort must be an array of sort specs, not: {sort}"),
        ));
    };
    let mut descending = None;
    for field in fields {
        let bad_field =
            || Error::query("invalid_sort_field", format!("Invalid sort field: {field}"));
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
        if descending.is_some_and(|d| d != desc) {
            return Err(Error::query(
                "unsupported_mixed_sort",
                "Sorts currently only support a single direction for all fields.",
            ));
        }
        if name != "_id" {
            return Err(no_index());
        }
        descending = Some(desc);
    }
    if descending.is_some() && !bounds_id(selector) {
        return Err(no_index());
    }
    Ok(descending.unwrap_or(false))
}

/// Whether a selector bounds `_id` where CouchDB's special index can use it: at its top or
/// in a top-level `$and`, by equality or a range operator.
fn bounds_id(selector: &Value) -> bool {
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

/// The id a bookmark of ours carries.
pub(crate) fn decode_bookmark(b: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(b).ok()?;
    match serde_json::from_slice::<Value>(&bytes).ok()? {
        Value::Array(a) if a.len() == 1 => a[0].as_str().map(str::to_string),
        _ => None,
    }
}

/// The bookmark of a page whose last returned document was `id`.
pub(crate) fn encode_bookmark(id: &str) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&serde_json::json!([id])).expect("json"))
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
    fn only_id_sorts_without_an_index() {
        let by_id = json!({"_id": {"$gt": null}});
        assert!(!sort_descending(None, &json!({})).unwrap());
        assert!(sort_descending(Some(&json!([{"_id": "desc"}])), &by_id).unwrap());
        assert!(!sort_descending(Some(&json!(["_id"])), &json!({"$and": [{"_id": "x"}]})).unwrap());
        let error = |sort: Value, selector: &Value| {
            named(sort_descending(Some(&sort), selector).unwrap_err()).0
        };
        assert_eq!(
            error(json!(["_id"]), &json!({"n": 1})),
            "no_usable_index",
            "the selector must bound _id"
        );
        assert_eq!(error(json!(["age"]), &by_id), "no_usable_index");
        assert_eq!(
            error(json!([{"_id": "sideways"}]), &by_id),
            "invalid_sort_field"
        );
        assert_eq!(
            error(json!(["_id", {"_id": "desc"}]), &by_id),
            "unsupported_mixed_sort"
        );
        assert_eq!(error(json!("_id"), &by_id), "invalid_sort_json");
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
            use_index_warning(Some(&json!(["d", "v"]))).unwrap(),
            "_design/d, v was not used because it is not a valid index for this query."
        );
    }

    #[test]
    fn bookmarks_round_trip_and_refuse_anything_else() {
        let b = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json!(["doc7"])).unwrap());
        assert_eq!(decode_bookmark(&b).as_deref(), Some("doc7"));
        assert_eq!(decode_bookmark("!!"), None);
        assert_eq!(decode_bookmark(&URL_SAFE_NO_PAD.encode(b"{}")), None);
    }
}
