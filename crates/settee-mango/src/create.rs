//! `POST /{db}/_index`: the request read with CouchDB's rules, the index it defines, and the
//! name CouchDB would give it when the request names none.

use serde_json::{Map, Value};
use settee_json::Term;
use sha1::{Digest, Sha1};

use crate::def::{ddoc_id, Fields, JsonIndex};
use crate::erl;
use crate::text::TextIndex;
use crate::{Error, Result, Selector};

/// The keys a `POST /{db}/_index` body may have.
const INDEX_KEYS: &[&str] = &["index", "type", "name", "ddoc", "w", "partitioned"];

/// A parsed index creation request.
#[derive(Debug, Clone)]
pub struct NewIndex {
    /// The index.
    pub index: Kind,
    /// The definition as given (`options.def` of a JSON index's view).
    pub def: Value,
    /// `partitioned`, when the request set it.
    pub partitioned: Option<bool>,
}

/// The index a request creates.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A JSON index (a view).
    Json(JsonIndex),
    /// A text index.
    Text(TextIndex),
}

impl NewIndex {
    /// The design document the index goes into.
    pub fn ddoc(&self) -> &str {
        match &self.index {
            Kind::Json(i) => &i.ddoc,
            Kind::Text(i) => &i.ddoc,
        }
    }

    /// The index's name.
    pub fn name(&self) -> &str {
        match &self.index {
            Kind::Json(i) => &i.name,
            Kind::Text(i) => &i.name,
        }
    }

    /// Design document `body` (`None`: a new one) with the index added.
    pub fn add_to(&self, body: Option<&Value>) -> Result<Value> {
        match &self.index {
            Kind::Json(i) => crate::def::add_to_ddoc(body, i, &self.def, self.partitioned),
            Kind::Text(i) => crate::text::add_to_ddoc(body, i, self.partitioned),
        }
    }
}

impl NewIndex {
    /// Reads a request body; `db_partitioned` is the database's default.
    pub fn parse(body: &Map<String, Value>, db_partitioned: bool) -> Result<NewIndex> {
        if let Some(k) = body.keys().find(|k| !INDEX_KEYS.contains(&k.as_str())) {
            return Err(Error::query(
                "invalid_key",
                format!("Invalid key {k} for this request."),
            ));
        }
        let def = body
            .get("index")
            .ok_or_else(|| Error::query("missing_required_key", "Missing required key: index"))?;
        let text = match body.get("type") {
            None => false,
            Some(Value::String(t)) if t == "json" => false,
            Some(Value::String(t)) if t == "text" => true,
            Some(Value::String(t)) if t == "nouveau" => {
                return Err(Error::Status {
                    status: 503,
                    error: "required index service unavailable",
                    reason: t.clone(),
                })
            }
            Some(Value::String(t)) => {
                return Err(Error::query(
                    "invalid_index",
                    format!("Invalid type for index: {t}"),
                ))
            }
            Some(v) => return Err(not_string(v)),
        };
        let text_def = if text {
            Some(TextIndex::parse_def(def)?)
        } else {
            None
        };
        let def_map = match def {
            _ if text => None,
            Value::Object(m) => Some(m),
            _ => {
                return Err(Error::query(
                    "invalid_index",
                    format!("JSON indexes must be an object, not: {}", erl::w(def)),
                ))
            }
        };
        let string = |key: &str| match body.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(Value::String(_)) => Err(Error::query(
                "invalid_empty_string",
                "Index name or ddoc cannot be empty string",
            )),
            Some(v) => Err(not_string(v)),
        };
        let (name, ddoc) = (string("name")?, string("ddoc")?);
        if let Some(w) = body.get("w") {
            if w.as_u64().is_none_or(|w| w == 0) {
                return Err(Error::query(
                    "invalid_pos_integer",
                    format!("{} is not an integer greater than zero", erl::w(w)),
                ));
            }
        }
        let partitioned = match body.get("partitioned") {
            None => None,
            Some(Value::Bool(true)) if !db_partitioned => {
                return Err(Error::Status {
                    status: 500,
                    error: "error_saving_ddoc",
                    reason: "Unknown error while saving the design document: invalid_design_doc"
                        .into(),
                })
            }
            Some(Value::Bool(b)) => Some(*b),
            Some(v) => {
                return Err(Error::query(
                    "invalid_partitioned_value",
                    format!("Invalid partitioned value: {v}"),
                ))
            }
        };
        let auto = auto_name(def, body);
        let ddoc = ddoc_id(ddoc.as_deref().unwrap_or(&auto));
        let name = name.unwrap_or(auto);
        let index = match text_def {
            Some(def) => Kind::Text(TextIndex {
                ddoc,
                name,
                def,
                partitioned: partitioned.unwrap_or(db_partitioned),
            }),
            None => {
                let (fields, partial) = definition(def_map.expect("an object, checked above"))?;
                Kind::Json(JsonIndex {
                    ddoc,
                    name,
                    fields,
                    partial,
                    partitioned: partitioned.unwrap_or(db_partitioned),
                })
            }
        };
        Ok(NewIndex {
            index,
            def: def.clone(),
            partitioned,
        })
    }
}

fn not_string(v: &Value) -> Error {
    Error::query("invalid_string", format!("Invalid string: {}", erl::w(v)))
}

/// `index`'s fields (sort specs, one direction for all) and partial filter.
fn definition(def: &Map<String, Value>) -> Result<(Fields, Option<Value>)> {
    if let Some(k) = def.keys().find(|k| {
        !matches!(
            k.as_str(),
            "fields" | "partial_filter_selector" | "selector"
        )
    }) {
        return Err(Error::query(
            "invalid_key",
            format!("Invalid key {k} for this request."),
        ));
    }
    let fields = def
        .get("fields")
        .ok_or_else(|| Error::query("missing_required_key", "Missing required key: fields"))?;
    // `[]` is accepted, as CouchDB accepts it: an index of every document.
    let fields = crate::query::sort_specs(fields)?;
    let partial = match def
        .get("partial_filter_selector")
        .or_else(|| def.get("selector"))
    {
        None => None,
        Some(Value::Object(m)) if m.is_empty() => None,
        Some(p @ Value::Object(_)) => Some(Selector::parse(p)?.to_json()),
        Some(v) => {
            return Err(Error::query(
                "invalid_selector_json",
                format!("Selector must be a JSON object, not: {v}"),
            ))
        }
    };
    Ok((fields, partial))
}

/// The name CouchDB derives for an index (and its design document) the request does not
/// name: the hex SHA-1 of `term_to_binary({Def, Opts})`, `Opts` being the request's options
/// with their defaults, sorted. Equal requests get equal names on both servers, so an
/// application creating its indexes on start finds them `exists` after a replication.
fn auto_name(def: &Value, body: &Map<String, Value>) -> String {
    let atom = |a: &str| Term::Atom(a.to_string());
    let given = |key: &str, default: Term| body.get(key).map_or(default, |v| Term::Json(v.clone()));
    // Sorted by option name, as `lists:usort` leaves them.
    let opts = [
        ("ddoc", given("ddoc", atom("auto_name"))),
        ("def", Term::Json(def.clone())),
        ("name", given("name", atom("auto_name"))),
        ("partitioned", given("partitioned", atom("db_default"))),
        (
            "type",
            given("type", Term::Json(Value::String("json".into()))),
        ),
        ("w", given("w", Term::Int(2))),
    ];
    let opts = opts
        .into_iter()
        .map(|(k, v)| Term::Tuple(vec![atom(k), v]))
        .collect();
    let term = Term::Tuple(vec![Term::Json(def.clone()), Term::List(opts)]);
    let digest = Sha1::digest(term.to_binary());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: Value) -> Result<JsonIndexRequest> {
        NewIndex::parse(body.as_object().unwrap(), false).map(|n| match n.index {
            Kind::Json(index) => JsonIndexRequest { index },
            Kind::Text(_) => panic!("a text index"),
        })
    }

    struct JsonIndexRequest {
        index: JsonIndex,
    }

    #[test]
    fn text_indexes_are_named_and_defined_as_couchdb_does() {
        let n = NewIndex::parse(
            json!({"index": {}, "type": "text", "name": "t", "ddoc": "d"})
                .as_object()
                .unwrap(),
            false,
        )
        .unwrap();
        assert_eq!((n.ddoc(), n.name()), ("_design/d", "t"));
        let doc = n.add_to(None).unwrap();
        assert_eq!(doc["language"], "query");
        assert_eq!(doc["indexes"]["t"]["index"]["fields"], "all_fields");
        assert_eq!(doc["indexes"]["t"]["analyzer"]["name"], "perfield");
    }

    #[test]
    fn unnamed_indexes_get_the_names_couchdb_gives_them() {
        let i = parse(json!({"index": {"fields": ["foo"]}})).unwrap().index;
        assert_eq!(i.name, "a138cce43c361000dcca40cb1fbb8c6776e04ba0");
        assert_eq!(i.ddoc, "_design/a138cce43c361000dcca40cb1fbb8c6776e04ba0");
        let i = parse(json!({"index": {"fields": ["foo", "bar"]}}))
            .unwrap()
            .index;
        assert_eq!(i.name, "971942d23dced916c0af06d6197ed4156ffc21e0");
        let i = parse(json!({"index": {"fields": [{"foo": "desc"}]}}))
            .unwrap()
            .index;
        assert_eq!(i.name, "e5cbb09901111370181d5bdea1f8845837b10c96");
        assert_eq!(i.fields, vec![("foo".to_string(), true)]);
        let i = parse(json!({"index": {"fields": ["bar"]}, "ddoc": "myddoc"}))
            .unwrap()
            .index;
        assert_eq!(
            (i.ddoc.as_str(), i.name.as_str()),
            ("_design/myddoc", "ea31ca2030bcfaed6d66f838f49e3ffc9f4e2785")
        );
        let i = parse(json!({"index": {"fields": ["qux"]}, "name": "quxidx"}))
            .unwrap()
            .index;
        assert_eq!(i.ddoc, "_design/a4fc66754c1ab612071e33f56f513f4ef894bca9");
        let i = parse(json!({"index": {"fields": ["t1"]}, "type": "json", "ddoc": "typedd"}))
            .unwrap()
            .index;
        assert_eq!(i.name, "63db65c3a4a98393916b553e596a92b4b1a8c9a9");
        let i = parse(json!({"index": {"fields": ["p2"]}, "partitioned": false, "ddoc": "pfdd"}))
            .unwrap()
            .index;
        assert_eq!(i.name, "d00cde1bc16e74bcdfd64fda2ec94288946ef2c7");
    }
}
