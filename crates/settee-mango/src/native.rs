//! JSON indexes mapped natively: for each document, the values of the index's fields as
//! the row key (and `null` as the value), as CouchDB's Mango map does. A document is left
//! out when any field is missing, when it fails the partial filter, and when it is a design
//! document.

use std::sync::Arc;

use serde_json::Value;
use settee_db::DESIGN_PREFIX;
use settee_views::{NativeLanguage, NativeLanguages, NativeMap, QUERY_LANGUAGE};

use crate::def::read_map;
use crate::{field, field_path, Selector};

/// The native languages Mango brings: `query`.
pub fn native_languages() -> NativeLanguages {
    let mut out = NativeLanguages::new();
    out.insert(
        QUERY_LANGUAGE.to_string(),
        Arc::new(QueryLanguage) as Arc<dyn NativeLanguage>,
    );
    out
}

/// Mango's `query` language.
struct QueryLanguage;

impl NativeLanguage for QueryLanguage {
    fn compile(&self, maps: &[&str]) -> Arc<dyn NativeMap> {
        let views = maps
            .iter()
            .map(|text| {
                let def = settee_json::deep::from_slice::<Value>(text.as_bytes()).ok()?;
                let (fields, partial) = read_map(&def)?;
                Some(JsonMap {
                    fields: fields.iter().map(|(f, _)| field_path(f)).collect(),
                    partial: partial.and_then(|p| Selector::parse(&p).ok()),
                })
            })
            .collect();
        Arc::new(QueryMaps(views))
    }
}

/// One JSON index's map; `None` for a view that is not a JSON index (it indexes nothing).
struct QueryMaps(Vec<Option<JsonMap>>);

struct JsonMap {
    fields: Vec<Vec<String>>,
    partial: Option<Selector>,
}

impl JsonMap {
    fn key(&self, doc: &Value) -> Option<Value> {
        if let Some(p) = &self.partial {
            if !p.matches(doc) {
                return None;
            }
        }
        let values = self
            .fields
            .iter()
            .map(|path| field(doc, path).cloned())
            .collect::<Option<Vec<_>>>()?;
        Some(Value::Array(values))
    }
}

impl NativeMap for QueryMaps {
    fn map(&self, doc: &Value) -> Vec<Vec<(Value, Value)>> {
        let design = doc
            .get("_id")
            .and_then(Value::as_str)
            .is_some_and(|id| id.starts_with(DESIGN_PREFIX));
        self.0
            .iter()
            .map(|view| match view {
                Some(m) if !design => m.key(doc).map(|k| (k, Value::Null)).into_iter().collect(),
                _ => Vec::new(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rows(map: Value, doc: Value) -> Vec<Vec<(Value, Value)>> {
        let lang = QueryLanguage;
        lang.compile(&[&map.to_string()]).map(&doc)
    }

    #[test]
    fn fields_become_the_key_and_missing_fields_leave_the_document_out() {
        let map = json!({"fields": {"a": "asc", "b.c": "asc"}, "partial_filter_selector": {}});
        assert_eq!(
            rows(map.clone(), json!({"_id": "x", "a": 1, "b": {"c": [2]}})),
            vec![vec![(json!([1, [2]]), Value::Null)]]
        );
        assert_eq!(rows(map.clone(), json!({"_id": "x", "a": 1})), vec![vec![]]);
        assert_eq!(
            rows(
                map.clone(),
                json!({"_id": "x", "a": null, "b": {"c": null}})
            ),
            vec![vec![(json!([null, null]), Value::Null)]],
            "null is a value"
        );
        assert_eq!(
            rows(map, json!({"_id": "_design/x", "a": 1, "b": {"c": 1}})),
            vec![vec![]],
            "design documents are never indexed"
        );
    }

    #[test]
    fn partial_filters_and_unreadable_definitions() {
        let map = json!({"fields": {"a": "asc"}, "partial_filter_selector": {"t": "x"}});
        assert_eq!(rows(map.clone(), json!({"a": 1, "t": "y"})), vec![vec![]]);
        assert_eq!(
            rows(map, json!({"a": 1, "t": "x"})),
            vec![vec![(json!([1]), Value::Null)]]
        );
        assert_eq!(
            rows(json!({"fields": ["a"]}), json!({"a": 1})),
            vec![vec![]]
        );
    }
}
