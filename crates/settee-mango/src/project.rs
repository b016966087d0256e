//! `fields`: each document cut down to the fields asked for.

use serde_json::{Map, Value};

/// A document cut down to `fields` (dotted paths into nested objects), when given.
pub(crate) fn project_one(doc: Value, fields: Option<&[String]>) -> Value {
    let Some(fields) = fields.filter(|f| !f.is_empty()) else {
        return doc;
    };
    let mut out = Value::Object(Map::new());
    for name in fields {
        let path = crate::field_path(name);
        if let Some(v) = crate::field(&doc, &path) {
            put_path(&mut out, &path, v.clone());
        }
    }
    out
}

/// Sets `value` at `path` in `out`, making the objects on the way.
pub(crate) fn put_path(out: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = out;
    for p in parents {
        let Value::Object(map) = at else { return };
        at = map
            .entry(p.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Value::Object(map) = at {
        map.insert(last.clone(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_cut_along_dotted_paths() {
        let doc = json!({"_id": "a", "name": {"first": "Ann", "last": "Lee"}, "age": 3});
        let cut = project_one(
            doc,
            Some(&[
                "_id".to_string(),
                "name.first".to_string(),
                "nope.x".to_string(),
            ]),
        );
        assert_eq!(cut, json!({"_id": "a", "name": {"first": "Ann"}}));
        let cut = project_one(
            json!({"a.b": 1, "t": [5, 6]}),
            Some(&["a\\.b".to_string(), "t.1".to_string()]),
        );
        assert_eq!(cut, json!({"a.b": 1, "t": {"1": 6}}));
    }
}
