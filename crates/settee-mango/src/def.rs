//! JSON index definitions: read from design documents in the `query` language (as CouchDB
//! stores them, so indexes replicate both ways), listed as `GET /{db}/_index` shows them,
//! and added to or removed from a design document's body.

use serde_json::{json, Map, Value};
use settee_db::DESIGN_PREFIX;
use settee_views::QUERY_LANGUAGE;

use crate::{field_path, Error, Result, Selector};

/// An index's fields in key order (dotted names), with whether each is `desc`.
pub type Fields = Vec<(String, bool)>;

/// One JSON index: a view of a `query` design document.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonIndex {
    /// The design document, `_design/…`.
    pub ddoc: String,
    /// The view's name.
    pub name: String,
    /// The indexed fields.
    pub fields: Fields,
    /// Documents must match this to be indexed (`partial_filter_selector`), when not `{}`.
    pub partial: Option<Value>,
    /// Whether the index holds one partition's rows per query (partitioned databases).
    pub partitioned: bool,
}

impl JsonIndex {
    /// The indexed fields, as paths.
    pub fn columns(&self) -> Vec<Vec<String>> {
        self.fields.iter().map(|(f, _)| field_path(f)).collect()
    }

    /// The index's entry in `GET /{db}/_index`.
    pub fn to_json(&self) -> Value {
        json!({"ddoc": self.ddoc, "name": self.name, "type": "json",
            "partitioned": self.partitioned, "def": self.def_json()})
    }

    /// `def` as CouchDB shows it: fields as sort specs, a partial filter when there is one.
    pub fn def_json(&self) -> Value {
        let fields: Vec<Value> = self
            .fields
            .iter()
            .map(|(f, desc)| json!({ f: if *desc { "desc" } else { "asc" } }))
            .collect();
        let mut def = json!({ "fields": fields });
        if let Some(p) = &self.partial {
            def["partial_filter_selector"] = p.clone();
        }
        def
    }

    /// The view's `map` member as stored.
    fn map_json(&self) -> Value {
        let mut fields = Map::new();
        for (f, desc) in &self.fields {
            fields.insert(f.clone(), json!(if *desc { "desc" } else { "asc" }));
        }
        json!({"fields": fields,
            "partial_filter_selector": self.partial.clone().unwrap_or_else(|| json!({}))})
    }
}

/// A view's `map` member read as a JSON index: its fields and partial filter, or `None`
/// when it is not one (CouchDB skips such views).
pub fn read_map(map: &Value) -> Option<(Fields, Option<Value>)> {
    let def = map.as_object()?;
    let fields = def
        .get("fields")?
        .as_object()?
        .iter()
        .map(|(f, dir)| match dir.as_str()? {
            "asc" => Some((f.clone(), false)),
            "desc" => Some((f.clone(), true)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let partial = match def.get("partial_filter_selector") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) if m.is_empty() => None,
        Some(p @ Value::Object(_)) => {
            Selector::parse(p).ok()?;
            Some(p.clone())
        }
        Some(_) => return None,
    };
    Some((fields, partial))
}

/// The JSON indexes of design document `id` (body `doc`), in view-name order; none unless
/// its language is `query`. `db_partitioned` is the database's default for indexes whose
/// design document does not say.
pub fn from_ddoc(id: &str, doc: &Value, db_partitioned: bool) -> Vec<JsonIndex> {
    let Some((views, partitioned)) = query_member(doc, "views", db_partitioned) else {
        return Vec::new();
    };
    let mut out: Vec<JsonIndex> = views
        .iter()
        .filter(|(_, v)| v.get("options").is_none_or(Value::is_object))
        .filter_map(|(name, v)| {
            let (fields, partial) = read_map(v.get("map")?)?;
            Some(JsonIndex {
                ddoc: id.to_string(),
                name: name.clone(),
                fields,
                partial,
                partitioned,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Member `member` of a `query` design document, with whether its indexes are partitioned
/// (the design document's `options.partitioned`, else `db_partitioned`); `None` for a design
/// document in another language or without the member.
pub(crate) fn query_member<'a>(
    doc: &'a Value,
    member: &str,
    db_partitioned: bool,
) -> Option<(&'a Map<String, Value>, bool)> {
    if doc.get("language").and_then(Value::as_str) != Some(QUERY_LANGUAGE) {
        return None;
    }
    let partitioned = doc
        .pointer("/options/partitioned")
        .and_then(Value::as_bool)
        .unwrap_or(db_partitioned);
    Some((doc.get(member)?.as_object()?, partitioned))
}

/// `_design/{d}` for a design document named with or without its prefix.
pub fn ddoc_id(name: &str) -> String {
    if name.starts_with(DESIGN_PREFIX) {
        name.to_string()
    } else {
        format!("{DESIGN_PREFIX}{name}")
    }
}

/// A design document body with `index` added (or its view replaced), as CouchDB adds an
/// index: `language` set to `query`, the view's `map`, `reduce: _count` and `options.def`
/// (the definition as the request gave it). `partitioned` is set in the design document's
/// `options` when the request named it.
pub fn add_to_ddoc(
    body: Option<&Value>,
    index: &JsonIndex,
    def: &Value,
    partitioned: Option<bool>,
) -> Result<Value> {
    let view = json!({"map": index.map_json(), "reduce": "_count",
        "options": {"def": def}});
    let target = Partitioning {
        ddoc: &index.ddoc,
        requested: partitioned,
    };
    add_index_member(body, target, "views", &index.name, view)
}

/// The design document an index goes into, and the `partitioned` its request named.
pub(crate) struct Partitioning<'a> {
    pub ddoc: &'a str,
    pub requested: Option<bool>,
}

/// A design document body with `entry` as `member.name`: `language` set to `query` (a
/// design document in another language is refused), and the request's `partitioned`
/// checked against the design document's as CouchDB checks it.
pub(crate) fn add_index_member(
    body: Option<&Value>,
    target: Partitioning,
    member: &str,
    name: &str,
    entry: Value,
) -> Result<Value> {
    let mut doc = match body {
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(Error::query("invalid_ddoc", "Invalid design document")),
        None => Map::new(),
    };
    if let Some(lang) = doc.get("language") {
        if lang.as_str() != Some(QUERY_LANGUAGE) {
            return Err(Error::query(
                "invalid_index_ddoc",
                format!(
                    "Design document {} is not a query design document",
                    target.ddoc
                ),
            ));
        }
    }
    doc.insert("language".into(), json!(QUERY_LANGUAGE));
    let members = doc
        .entry(member)
        .or_insert_with(|| Value::Object(Map::new()));
    if !members.is_object() {
        *members = Value::Object(Map::new());
    }
    members
        .as_object_mut()
        .expect("an object")
        .insert(name.to_string(), entry);
    // As CouchDB: the request's `partitioned` must be what the design document says (both
    // silent counts as agreeing); only a new design document takes it.
    let partitioned = target.requested;
    let stored = doc.get("options").and_then(|o| o.get("partitioned"));
    if stored != partitioned.map(Value::Bool).as_ref() {
        match (body, partitioned) {
            (None, Some(p)) => {
                let options = doc
                    .entry("options")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(o) = options {
                    o.insert("partitioned".into(), json!(p));
                }
            }
            (None, None) => {}
            (Some(_), _) => {
                return Err(Error::query(
                    "invalid_partitioned_option",
                    format!(
                        "Requested partitioned option does not match existing value on design document {}",
                        target.ddoc
                    ),
                ))
            }
        }
    }
    Ok(Value::Object(doc))
}

/// The Mango indexes of a design document, as `(type, name)`: its JSON indexes, then its
/// text indexes.
pub fn index_names(id: &str, doc: &Value) -> Vec<(&'static str, String)> {
    let json = from_ddoc(id, doc, false)
        .into_iter()
        .map(|i| ("json", i.name));
    let text = crate::text::TextIndex::from_ddoc(id, doc, false)
        .into_iter()
        .map(|i| ("text", i.name));
    json.chain(text).collect()
}

/// A design document body without index `name` of type `kind` (`json`: a view, `text`:
/// a text index); `None` when the design document is then empty of everything but its
/// language (CouchDB deletes it then). `Err` when it has no such index.
pub fn remove_from_ddoc(body: &Value, kind: &str, name: &str) -> Result<Option<Value>> {
    let not_found = || Error::query("not_found", "Index not found");
    let member = match kind {
        "json" => "views",
        "text" => crate::text::MEMBER,
        _ => return Err(not_found()),
    };
    let mut doc = body.as_object().cloned().ok_or_else(not_found)?;
    let members = doc
        .get_mut(member)
        .and_then(Value::as_object_mut)
        .ok_or_else(not_found)?;
    members.shift_remove(name).ok_or_else(not_found)?;
    if members.is_empty() {
        doc.shift_remove(member);
    }
    let only_language = doc.keys().all(|k| k == "language" || k.starts_with('_'));
    Ok((!only_language).then_some(Value::Object(doc)))
}
