//! What a document gives a text index, as CouchDB's text indexes take it: every value at
//! path `a.b` of type `t` under the field `a.b:t` (each path part escaped, arrays adding a
//! `[]` part and, unless turned off, a `[]:length` number), strings also under `$default`,
//! and every field name under `$fieldnames` (which `$exists` searches).

use std::collections::HashSet;

use serde_json::{json, Value};
use settee_db::DESIGN_PREFIX;
use settee_search::Indexed;

use crate::selector::DEFAULT_FIELD;
use crate::text::{default_field, named_fields, partial_filter};
use crate::Selector;

/// The field that lists a document's field names.
pub(crate) const FIELD_NAMES: &str = "$fieldnames";

/// The fields text index definition `def` takes from `doc`: none for a design document or
/// one its partial filter leaves out.
pub fn text_fields(def: &Value, doc: &Value) -> Vec<Indexed> {
    let id = doc.get("_id").and_then(Value::as_str).unwrap_or_default();
    if id.starts_with(DESIGN_PREFIX) {
        return Vec::new();
    }
    if let Some(p) = partial_filter(def) {
        if !Selector::parse(p).is_ok_and(|s| s.matches(doc)) {
            return Vec::new();
        }
    }
    let wanted: Option<HashSet<String>> = named_fields(def).map(|fields| {
        fields
            .iter()
            .map(|(name, ty)| escape_user(&format!("{name}:{ty}")))
            .collect()
    });
    let mut walk = Walk {
        path: Vec::new(),
        lengths: def
            .get("index_array_lengths")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        wanted,
        out: Vec::new(),
    };
    walk.value(doc);
    let mut fields = walk.out;
    if default_field(def).0 {
        let strings: Vec<(String, Value)> = fields
            .iter()
            .filter(|(_, v)| v.is_string())
            .map(|(_, v)| (DEFAULT_FIELD.to_string(), v.clone()))
            .collect();
        fields.extend(strings);
    }
    let mut names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let names: Vec<(String, Value)> = names
        .into_iter()
        .map(|n| (FIELD_NAMES.to_string(), json!(n)))
        .collect();
    fields.extend(names);
    fields
        .into_iter()
        .map(|(name, value)| Indexed {
            kind: "auto".into(),
            name,
            value,
            store: false,
            facet: false,
            analyzed: Some(true),
        })
        .collect()
}

/// A walk over a document, gathering `(field, value)`.
struct Walk {
    path: Vec<String>,
    lengths: bool,
    wanted: Option<HashSet<String>>,
    out: Vec<(String, Value)>,
}

impl Walk {
    fn value(&mut self, v: &Value) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    self.path.push(k.clone());
                    self.value(v);
                    self.path.pop();
                }
            }
            Value::Array(items) => {
                self.path.push("[]".into());
                if self.lengths {
                    // Always indexed: the length is not one of the named fields.
                    let name = field_name(&self.path, "length");
                    self.out.push((name, json!(items.len())));
                }
                for item in items {
                    self.value(item);
                }
                self.path.pop();
            }
            Value::String(_) => self.leaf("string", v.clone()),
            Value::Number(_) => self.leaf("number", v.clone()),
            Value::Bool(_) => self.leaf("boolean", v.clone()),
            Value::Null => self.leaf("null", json!(true)),
        }
    }

    fn leaf(&mut self, ty: &str, value: Value) {
        let name = field_name(&self.path, ty);
        if self.wanted.as_ref().is_none_or(|w| w.contains(&name)) {
            self.out.push((name, value));
        }
    }
}

/// The index field of a value of type `ty` at `path`: the parts (the last with `:ty`)
/// escaped and joined with dots.
pub(crate) fn field_name(path: &[String], ty: &str) -> String {
    let mut parts: Vec<String> = path.iter().filter(|p| !p.is_empty()).cloned().collect();
    match parts.last_mut() {
        Some(last) => {
            last.push(':');
            last.push_str(ty);
        }
        None => parts.push(format!(":{ty}")),
    }
    parts
        .iter()
        .map(|p| escape_field(p))
        .collect::<Vec<_>>()
        .join(".")
}

/// A dotted field name (dots escaped with `\` stay in their part) with each part escaped.
pub(crate) fn escape_user(name: &str) -> String {
    crate::field_path(name)
        .iter()
        .map(|p| escape_field(p))
        .collect::<Vec<_>>()
        .join(".")
}

/// A path part as an index field name part: every byte but ASCII letters and digits as `_`
/// and two hex digits, so that no name holds query syntax.
pub(crate) fn escape_field(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for b in part.bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(b as char);
        } else {
            out.push_str(&format!("_{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(def: Value, doc: Value) -> Vec<(String, Value)> {
        let def = crate::text::TextIndex::parse_def(&def).unwrap();
        let mut out: Vec<(String, Value)> = text_fields(&def, &doc)
            .into_iter()
            .map(|i| (i.name, i.value))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.to_string().cmp(&b.1.to_string())));
        out
    }

    #[test]
    fn documents_give_fields_named_as_couchdb_names_them() {
        let doc = json!({"_id": "d", "name": "Bob Smith", "age": 5, "ok": true, "x": null,
            "tags": ["a"], "address": {"city": "Oslo"}});
        let got = names(json!({}), doc);
        let has = |n: &str, v: Value| got.contains(&(n.to_string(), v));
        assert!(has("_5fid_3astring", json!("d")));
        assert!(has("name_3astring", json!("Bob Smith")));
        assert!(has("age_3anumber", json!(5)));
        assert!(has("ok_3aboolean", json!(true)));
        assert!(has("x_3anull", json!(true)));
        assert!(has("tags._5b_5d_3astring", json!("a")));
        assert!(has("tags._5b_5d_3alength", json!(1)));
        assert!(has("address.city_3astring", json!("Oslo")));
        assert!(has("$default", json!("Bob Smith")));
        assert!(has("$fieldnames", json!("age_3anumber")));
        assert!(has("$fieldnames", json!("$default")));
        assert_eq!(escape_user("a\\.b.c:string"), "a_2eb.c_3astring");
    }

    #[test]
    fn named_fields_partial_filters_and_design_documents() {
        let doc = json!({"_id": "d", "a": "x", "b": 2, "c": [1, 2]});
        let def = json!({"fields": [{"name": "b", "type": "number"}],
            "default_field": false, "index_array_lengths": false});
        let got = names(def, doc.clone());
        assert_eq!(
            got,
            vec![
                ("$fieldnames".to_string(), json!("b_3anumber")),
                ("b_3anumber".to_string(), json!(2))
            ]
        );
        assert!(names(json!({"partial_filter_selector": {"b": 3}}), doc.clone()).is_empty());
        assert!(!names(json!({"partial_filter_selector": {"b": 2}}), doc).is_empty());
        assert!(names(json!({}), json!({"_id": "_design/x", "a": 1})).is_empty());
    }
}
