//! Design documents as the indexer sees them: the views, their options and the signature
//! that decides which index they share.

use md5::{Digest, Md5};
use serde_json::{json, Value};
use settee_json::viewkey::Collation;

use crate::error::{Error, Result};
use crate::reduce::Reduce;

/// Options of a design document that change what its index holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexOptions {
    /// Map design documents too (`options.include_design`).
    pub include_design: bool,
    /// Give map functions `_local_seq` (`options.local_seq`).
    pub local_seq: bool,
    /// Rows kept per partition, queried one partition at a time: the design document's
    /// `options.partitioned`, which defaults to whether its database is partitioned.
    pub partitioned: bool,
}

/// One view of a design document.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewDef {
    /// The view's name.
    pub name: String,
    /// Map function source; for the `query` language, the map object as JSON text.
    pub map: String,
    /// Reduce function, if the view has one.
    pub reduce: Option<Reduce>,
    /// Key order: the view's own `options.collation` (`"raw"` or the default), as CouchDB
    /// reads it; a design document's `options` has none.
    pub collation: Collation,
}

/// The views of one design document.
#[derive(Clone, Debug, PartialEq)]
pub struct DesignDoc {
    /// `_design/…`.
    pub id: String,
    /// `language` (`javascript` when absent).
    pub language: String,
    /// Options that change the index.
    pub options: IndexOptions,
    /// The views, by name.
    pub views: Vec<ViewDef>,
    /// `views.lib`: CommonJS modules for map functions.
    pub lib: Value,
}

impl DesignDoc {
    /// Reads the views of design document `id` from its JSON body, in a database that is
    /// partitioned or not (`partitioned_db`); errors name what is malformed, as CouchDB does
    /// when such a document is saved.
    pub fn parse(id: &str, doc: &Value, partitioned_db: bool) -> Result<DesignDoc> {
        let bad = |m: &str| Error::InvalidDesignDoc(m.to_string());
        let language = match doc.get("language") {
            None | Some(Value::Null) => "javascript".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(bad("`language` must be a string")),
        };
        let options = parse_options(doc.get("options"), partitioned_db)?;
        let mut views = Vec::new();
        let mut lib = Value::Null;
        match doc.get("views") {
            None | Some(Value::Null) => {}
            Some(Value::Object(members)) => {
                for (name, view) in members {
                    // `lib` holds CommonJS modules, except among Mango's indexes.
                    if name == "lib" && language != QUERY_LANGUAGE {
                        if !view.is_object() {
                            return Err(bad("`views.lib` field must have object type"));
                        }
                        lib = view.clone();
                        continue;
                    }
                    views.push(parse_view(name, view, &language)?);
                }
            }
            Some(_) => return Err(bad("`views` field must have object type")),
        }
        views.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(DesignDoc {
            id: id.to_string(),
            language,
            options,
            views,
            lib,
        })
    }

    /// The view named `name`, with its position.
    pub fn view(&self, name: &str) -> Option<(usize, &ViewDef)> {
        self.views.iter().enumerate().find(|(_, v)| v.name == name)
    }

    /// The index signature: equal for design documents whose views would index the same
    /// rows, so they share one index file.
    pub fn signature(&self) -> String {
        let views: Vec<Value> = self
            .views
            .iter()
            .map(|v| {
                let mut view = json!([v.name, v.map, v.reduce.as_ref().map(Reduce::source)]);
                if v.collation == Collation::Raw {
                    view.as_array_mut().expect("an array").push(json!("raw"));
                }
                view
            })
            .collect();
        let o = &self.options;
        // The `false` stands where a design-wide collation once was, so that the signatures
        // of indexes built before stay as they were.
        let mut canonical = json!([
            self.language,
            o.include_design,
            o.local_seq,
            false,
            self.lib,
            views
        ]);
        // Partitioned rows are laid out differently; other signatures stay as they were.
        if o.partitioned {
            canonical
                .as_array_mut()
                .expect("an array")
                .push(json!("partitioned"));
        }
        let digest = Md5::digest(canonical.to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn parse_options(options: Option<&Value>, partitioned_db: bool) -> Result<IndexOptions> {
    let Some(options) = options.filter(|o| !o.is_null()) else {
        return Ok(IndexOptions {
            partitioned: partitioned_db,
            ..IndexOptions::default()
        });
    };
    let Some(options) = options.as_object() else {
        return Err(Error::InvalidDesignDoc(
            "`options` must be an object".into(),
        ));
    };
    let flag = |name: &str| options.get(name).and_then(Value::as_bool).unwrap_or(false);
    let partitioned = match options.get("partitioned") {
        None => partitioned_db,
        Some(Value::Bool(p)) => *p,
        Some(_) => {
            return Err(Error::InvalidDesignDoc(
                "`options.partitioned` field must have boolean type".into(),
            ))
        }
    };
    if partitioned && !partitioned_db {
        return Err(Error::InvalidDesignDoc(
            "partitioned option cannot be true in a non-partitioned database.".into(),
        ));
    }
    Ok(IndexOptions {
        include_design: flag("include_design"),
        local_seq: flag("local_seq"),
        partitioned,
    })
}

/// The language whose map members are JSON objects (Mango's indexes), not source text.
pub const QUERY_LANGUAGE: &str = "query";

fn parse_view(name: &str, view: &Value, language: &str) -> Result<ViewDef> {
    let bad = |m: String| Error::InvalidDesignDoc(m);
    let Some(view) = view.as_object() else {
        return Err(bad(format!("`views.{name}` field must have object type")));
    };
    let map = match view.get("map") {
        Some(Value::Object(def)) if language == QUERY_LANGUAGE => {
            serde_json::to_string(def).expect("JSON")
        }
        Some(Value::String(s)) if language != QUERY_LANGUAGE => s.clone(),
        Some(_) => {
            let kind = if language == QUERY_LANGUAGE {
                "object"
            } else {
                "string"
            };
            return Err(bad(format!(
                "`views.{name}.map` field must have {kind} type"
            )));
        }
        None => return Err(bad(format!("View `{name}` must contain map function"))),
    };
    let reduce = match view.get("reduce") {
        None => None,
        Some(Value::String(s)) => Some(Reduce::parse(s).map_err(bad)?),
        Some(_) => {
            return Err(bad(format!(
                "`views.{name}.reduce` field must have string type"
            )))
        }
    };
    let collation = match view.get("options").and_then(|o| o.get("collation")) {
        // Mango's indexes are always in CouchDB's default order, whatever their options say.
        Some(Value::String(c)) if c == "raw" && language != QUERY_LANGUAGE => Collation::Raw,
        _ => Collation::Unicode,
    };
    Ok(ViewDef {
        name: name.to_string(),
        map,
        reduce,
        collation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_options_and_lib_are_read() {
        let doc = json!({
            "views": {
                "b": {"map": "function(doc){}", "reduce": "_sum", "options": {"collation": "raw"}},
                "a": {"map": "function(doc){ emit(1) }"},
                "lib": {"util": "exports.x = 1;"}
            },
            "options": {"collation": "raw", "include_design": true}
        });
        let d = DesignDoc::parse("_design/x", &doc, false).unwrap();
        assert_eq!(
            d.views.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(d.views[1].reduce, Some(Reduce::Sum));
        assert_eq!(d.lib, json!({"util": "exports.x = 1;"}));
        assert_eq!(
            d.options,
            IndexOptions {
                include_design: true,
                local_seq: false,
                partitioned: false,
            }
        );
        // Collation is each view's own option, as CouchDB reads it.
        let collations: Vec<_> = d.views.iter().map(|v| v.collation).collect();
        assert_eq!(collations, [Collation::Unicode, Collation::Raw]);
        assert_eq!(d.language, "javascript");
        assert_eq!(d.view("b").map(|(i, _)| i), Some(1));
    }

    #[test]
    fn signatures_follow_the_view_code_only() {
        let a = json!({"views": {"v": {"map": "function(doc){ emit(1) }"}}, "other": 1});
        let b = json!({"views": {"v": {"map": "function(doc){ emit(1) }"}}, "validate_doc_update": "x"});
        let c = json!({"views": {"v": {"map": "function(doc){ emit(2) }"}}});
        let sig = |id: &str, d: &Value| DesignDoc::parse(id, d, false).unwrap().signature();
        assert_eq!(sig("_design/a", &a), sig("_design/b", &b));
        assert_ne!(sig("_design/a", &a), sig("_design/a", &c));
        let raw = json!({"views": {"v": {"map": "function(doc){ emit(1) }", "options": {"collation": "raw"}}}});
        assert_ne!(sig("_design/a", &a), sig("_design/a", &raw));
        // A design-wide collation is not CouchDB's: it changes nothing.
        let design_wide = json!({"views": {"v": {"map": "function(doc){ emit(1) }"}}, "options": {"collation": "raw"}});
        assert_eq!(sig("_design/a", &a), sig("_design/a", &design_wide));
    }

    #[test]
    fn malformed_views_are_refused() {
        for doc in [
            json!({"views": []}),
            json!({"views": {"v": {"map": 1}}}),
            json!({"views": {"v": {}}}),
            json!({"views": {"v": {"map": "f", "reduce": 3}}}),
            json!({"views": {"v": {"map": "f", "reduce": "_nonsense"}}}),
            json!({"views": {"v": "f"}}),
        ] {
            assert!(
                matches!(
                    DesignDoc::parse("_design/x", &doc, false),
                    Err(Error::InvalidDesignDoc(_))
                ),
                "{doc}"
            );
        }
    }

    #[test]
    fn partitioned_follows_the_database_unless_the_options_say() {
        let plain = json!({"views": {"v": {"map": "function(doc){ emit(1) }"}}});
        let global = json!({"views": {"v": {"map": "function(doc){ emit(1) }"}}, "options": {"partitioned": false}});
        let parse = |d: &Value, db: bool| DesignDoc::parse("_design/x", d, db);
        assert!(parse(&plain, true).unwrap().options.partitioned);
        assert!(!parse(&plain, false).unwrap().options.partitioned);
        assert!(!parse(&global, true).unwrap().options.partitioned);
        // Partitioned rows are another index; a global one in either database is the same.
        let sig = |d: &Value, db: bool| parse(d, db).unwrap().signature();
        assert_ne!(sig(&plain, true), sig(&plain, false));
        assert_eq!(sig(&global, true), sig(&plain, false));
        let refused = |d: Value, db: bool, reason: &str| {
            assert!(
                matches!(parse(&d, db), Err(Error::InvalidDesignDoc(r)) if r == reason),
                "{d}"
            )
        };
        refused(
            json!({"options": {"partitioned": true}}),
            false,
            "partitioned option cannot be true in a non-partitioned database.",
        );
        refused(
            json!({"options": {"partitioned": "yes"}}),
            true,
            "`options.partitioned` field must have boolean type",
        );
    }
}
