//! Text indexes (`"type": "text"`): a search index of a `query` design document whose
//! `index` member is a definition rather than a function. Every field of a document (or the
//! fields the definition names) is indexed natively under a name that holds its path and
//! type, strings also under `$default` for `$text`, as CouchDB's text indexes hold them.
//! This reads and writes the definitions; `text_doc` indexes documents and `text_query`
//! turns selectors into queries.

use serde_json::{json, Map, Value};

use crate::def::{add_index_member, query_member, Partitioning};
use crate::{erl, Error, Result, Selector};

/// The design document member holding text indexes.
pub const MEMBER: &str = "indexes";

/// One text index of a `query` design document.
#[derive(Debug, Clone, PartialEq)]
pub struct TextIndex {
    /// The design document, `_design/…`.
    pub ddoc: String,
    /// The index's name.
    pub name: String,
    /// The definition as stored, with CouchDB's defaults filled in.
    pub def: Value,
    /// Whether the index holds one partition's documents per query.
    pub partitioned: bool,
}

/// A field a text index names: its dotted name and type (`string`, `number`, `boolean`).
pub type TextField = (String, String);

impl TextIndex {
    /// Reads an index creation request's `index` member, answering CouchDB's errors, as
    /// the definition stored: every option, in CouchDB's order, with its default.
    pub fn parse_def(index: &Value) -> Result<Value> {
        let Value::Object(given) = index else {
            return Err(Error::query(
                "invalid_index_text",
                format!("Text indexes must be an object, not: {}", erl::w(index)),
            ));
        };
        const KEYS: &[&str] = &[
            "default_analyzer",
            "default_field",
            "partial_filter_selector",
            "selector",
            "fields",
            "index_array_lengths",
        ];
        if let Some(k) = given.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(Error::query(
                "invalid_key",
                format!("Invalid key {k} for this request."),
            ));
        }
        let mut def = Map::new();
        let take = |k: &str, default: Value| given.get(k).cloned().unwrap_or(default);
        def.insert(
            "default_analyzer".into(),
            take("default_analyzer", json!("keyword")),
        );
        def.insert("default_field".into(), take("default_field", json!({})));
        for k in ["partial_filter_selector", "selector"] {
            let v = take(k, json!({}));
            match &v {
                Value::Object(m) if m.is_empty() => {}
                Value::Object(_) => {
                    Selector::parse(&v)?;
                }
                _ => {
                    return Err(Error::query(
                        "invalid_selector_json",
                        format!("Selector must be a JSON object, not: {v}"),
                    ))
                }
            }
            def.insert(k.into(), v);
        }
        let fields = take("fields", json!([]));
        def.insert("fields".into(), fields_def(&fields)?);
        let lengths = take("index_array_lengths", json!(true));
        if !lengths.is_boolean() {
            return Err(Error::query(
                "invalid_bool",
                format!("Invalid boolean value: {}", erl::p(&lengths)),
            ));
        }
        def.insert("index_array_lengths".into(), lengths);
        let def = Value::Object(def);
        settee_search::analyzer::AnalyzerSpec::parse(
            Some(&analyzer(&def)),
            settee_search::analyzer::Flavor::Search,
        )
        .map_err(|e| Error::query("invalid_index", e.to_string()))?;
        Ok(def)
    }

    /// The text indexes of design document `id` (body `doc`), by name; none unless its
    /// language is `query`. Definitions that do not read are skipped, as CouchDB skips them.
    pub fn from_ddoc(id: &str, doc: &Value, db_partitioned: bool) -> Vec<TextIndex> {
        let Some((indexes, partitioned)) = query_member(doc, MEMBER, db_partitioned) else {
            return Vec::new();
        };
        let mut out: Vec<TextIndex> = indexes
            .iter()
            .filter_map(|(name, entry)| {
                let def = entry.get("index").filter(|d| d.is_object())?;
                Some(TextIndex {
                    ddoc: id.to_string(),
                    name: name.clone(),
                    def: TextIndex::parse_def(def).ok()?,
                    partitioned,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The index's entry in `GET /{db}/_index`: `fields` as `[{name: type}]` (`[]` for all
    /// fields), the partial filter only when there is one.
    pub fn to_json(&self) -> Value {
        let mut def = Map::new();
        for (k, v) in self.def.as_object().into_iter().flatten() {
            match (k.as_str(), v) {
                ("partial_filter_selector", Value::Object(m)) if m.is_empty() => {}
                ("fields", _) => {
                    let fields: Vec<Value> = self
                        .fields()
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(n, t)| json!({ n: t }))
                        .collect();
                    def.insert(k.clone(), Value::Array(fields));
                }
                _ => {
                    def.insert(k.clone(), v.clone());
                }
            }
        }
        json!({"ddoc": self.ddoc, "name": self.name, "type": "text",
            "partitioned": self.partitioned, "def": def})
    }

    /// The fields the index names; `None` when it indexes every field.
    pub fn fields(&self) -> Option<Vec<TextField>> {
        named_fields(&self.def)
    }

    /// What the index can answer, as CouchDB's planner compares it with a selector's
    /// fields: `$default` (when enabled) and `name:type` of each field; `None` for all.
    pub fn columns(&self) -> Option<Vec<String>> {
        let fields = self.fields()?;
        let mut out = Vec::new();
        if default_field(&self.def).0 {
            out.push(crate::selector::DEFAULT_FIELD.to_string());
        }
        out.extend(fields.into_iter().map(|(n, t)| format!("{n}:{t}")));
        Some(out)
    }

    /// Documents must match this to be indexed, when not `{}`.
    pub fn partial(&self) -> Option<&Value> {
        partial_filter(&self.def)
    }

    /// The design document member for the index: the definition and its analyzer.
    fn entry(&self) -> Value {
        json!({"index": self.def, "analyzer": analyzer(&self.def)})
    }
}

/// Whether `$default` is indexed, and with which analyzer (CouchDB's `default_field`: a
/// boolean or `{"enabled", "analyzer"}`, enabled with `standard` by default).
pub(crate) fn default_field(def: &Value) -> (bool, Value) {
    match def.get("default_field") {
        Some(Value::Bool(b)) => (*b, json!("standard")),
        Some(Value::Object(o)) => (
            o.get("enabled").and_then(Value::as_bool).unwrap_or(true),
            o.get("analyzer").cloned().unwrap_or(json!("standard")),
        ),
        _ => (true, json!("standard")),
    }
}

/// The partial filter of a definition (`partial_filter_selector`, or the older `selector`).
pub(crate) fn partial_filter(def: &Value) -> Option<&Value> {
    ["partial_filter_selector", "selector"]
        .into_iter()
        .filter_map(|k| def.get(k))
        .find(|v| v.as_object().is_some_and(|m| !m.is_empty()))
}

/// The fields of a stored definition; `None` for all of them.
pub(crate) fn named_fields(def: &Value) -> Option<Vec<TextField>> {
    def.get("fields")?
        .as_array()?
        .iter()
        .map(|f| {
            let name = f.get("name")?.as_str()?;
            let ty = f.get("type")?.as_str()?;
            Some((name.to_string(), ty.to_string()))
        })
        .collect()
}

/// The analyzer CouchDB gives a text index: `keyword` for named fields, and the default
/// field's analyzer for `$default` when it is enabled.
fn analyzer(def: &Value) -> Value {
    let (enabled, default) = default_field(def);
    let named = def
        .get("default_analyzer")
        .cloned()
        .unwrap_or(json!("keyword"));
    if !enabled {
        return json!("keyword");
    }
    json!({"name": "perfield", "default": named, "fields": {"$default": default}})
}

/// `fields` read as CouchDB reads it: `[]` (or `"all_fields"`) for every field, else a
/// list of `{"name": non-empty, "type": "string"|"number"|"boolean"}`.
fn fields_def(fields: &Value) -> Result<Value> {
    let bad = || {
        Error::query(
            "invalid_index_fields_definition",
            format!(
                "Text Index field definitions must be of the form {{\"name\": \"non-empty fieldname\", \"type\": \"boolean,number, or string\"}}. Def: {}",
                erl::p(fields)
            ),
        )
    };
    match fields {
        Value::String(s) if s == "all_fields" => Ok(json!("all_fields")),
        Value::Array(list) if list.is_empty() => Ok(json!("all_fields")),
        Value::Array(list) => {
            for f in list {
                let Some(o) = f.as_object().filter(|o| o.len() == 2) else {
                    return Err(bad());
                };
                let name_ok = o
                    .get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty());
                let type_ok = matches!(
                    o.get("type").and_then(Value::as_str),
                    Some("string" | "number" | "boolean")
                );
                if !name_ok || !type_ok {
                    return Err(bad());
                }
            }
            Ok(fields.clone())
        }
        _ => Err(bad()),
    }
}

/// A design document body with text index `index` added (or replaced).
pub fn add_to_ddoc(
    body: Option<&Value>,
    index: &TextIndex,
    partitioned: Option<bool>,
) -> Result<Value> {
    let target = Partitioning {
        ddoc: &index.ddoc,
        requested: partitioned,
    };
    add_index_member(body, target, MEMBER, &index.name, index.entry())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_get_couchdb_defaults_and_refusals() {
        let def = TextIndex::parse_def(&json!({})).unwrap();
        assert_eq!(
            def,
            json!({"default_analyzer": "keyword", "default_field": {},
                "partial_filter_selector": {}, "selector": {}, "fields": "all_fields",
                "index_array_lengths": true})
        );
        assert_eq!(
            analyzer(&def),
            json!({"name": "perfield", "default": "keyword", "fields": {"$default": "standard"}})
        );
        let off = TextIndex::parse_def(&json!({"default_field": false})).unwrap();
        assert_eq!(analyzer(&off), json!("keyword"));
        let named = json!({"fields": [{"name": "a.b", "type": "number"}]});
        let i = TextIndex {
            ddoc: "_design/d".into(),
            name: "n".into(),
            def: TextIndex::parse_def(&named).unwrap(),
            partitioned: false,
        };
        assert_eq!(
            i.columns(),
            Some(vec!["$default".to_string(), "a.b:number".to_string()])
        );
        assert_eq!(i.to_json()["def"]["fields"], json!([{"a.b": "number"}]));
        let code = |v: Value| match TextIndex::parse_def(&v) {
            Err(Error::Query { error, .. }) => error,
            other => panic!("{other:?}"),
        };
        assert_eq!(code(json!([])), "invalid_index_text");
        assert_eq!(code(json!({"analyzer": "x"})), "invalid_key");
        assert_eq!(
            code(json!({"fields": [{"name": "", "type": "string"}]})),
            "invalid_index_fields_definition"
        );
        assert_eq!(
            code(json!({"fields": [{"name": "a", "type": "date"}]})),
            "invalid_index_fields_definition"
        );
        assert_eq!(code(json!({"index_array_lengths": 1})), "invalid_bool");
        assert_eq!(
            code(json!({"default_analyzer": "klingon"})),
            "invalid_index"
        );
    }
}
