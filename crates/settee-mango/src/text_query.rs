//! Selectors as text index queries, as CouchDB translates them: each condition a query on
//! the field its path and type name (`{"age": {"$gt": 5}}` is `age:number` above 5),
//! `$exists` a search of `$fieldnames`, `$text` a phrase on `$default`. A translation finds
//! every document the selector can match (and perhaps more): the documents found are
//! matched against the selector again. The query is also written in Lucene's syntax, as
//! CouchDB writes it for `_explain`.

use serde_json::{Number, Value};
use settee_search::lucene::{Occur, Query};
use settee_search::SortKey;

use crate::selector::DEFAULT_FIELD;
use crate::text_doc::{escape_user, field_name, FIELD_NAMES};
use crate::{field_path, Error, FindQuery, Result};

/// The highest string a string range reaches (CouchDB writes the bound `u0x10FFFF`).
const TOP: &str = "\u{10FFFF}";

/// A value a field is compared with.
#[derive(Debug, Clone, PartialEq)]
enum Term {
    Str(String),
    Num(Number),
    Bool(bool),
}

/// A translated selector.
#[derive(Debug, Clone, PartialEq)]
enum Tq {
    And(Vec<Tq>),
    Or(Vec<Tq>),
    /// The field exists (first) and the second does not hold.
    Not(Box<Tq>, Box<Tq>),
    /// The field (its existence query) is missing.
    Missing(Box<Tq>),
    /// The value at a path, of a type (`length` for an array's length).
    Eq(Vec<String>, &'static str, Term),
    /// A range of values at a path: a bound and whether it is included, each side.
    Range(Vec<String>, Option<(Term, bool)>, Option<(Term, bool)>),
    /// Strings at a path that begin with a prefix.
    Prefix(Vec<String>, String),
    /// Field names under a path: `path:…` (true) or `path.…` (false).
    Names(Vec<String>, bool),
    /// A field of a type at a path exists (`$regex` for strings, `$mod` for numbers).
    HasType(Vec<String>, &'static str, bool),
    /// `$text`.
    Text(String),
}

/// A selector (normalised, as [`crate::Selector::to_json`] gives it) as a text query.
#[derive(Debug, Clone)]
pub struct TextQuery(Tq);

impl TextQuery {
    /// Translates `selector`; an operator a text index cannot answer is refused.
    pub fn new(selector: &Value) -> Result<TextQuery> {
        Ok(TextQuery(convert(&[], selector)?))
    }

    /// The query in Lucene's syntax, as CouchDB writes it (empty for `{}`).
    pub fn lucene(&self) -> String {
        lucene(&self.0)
    }

    /// The query to run.
    pub fn query(&self) -> Query {
        ast(&self.0).unwrap_or(Query::Bool(Vec::new()))
    }

    /// The `name:type` fields (and `$default`) a text index must hold to answer the
    /// selector, as CouchDB's planner lists them.
    pub fn indexable_fields(&self) -> Vec<String> {
        let mut out = Vec::new();
        indexable(&self.0, &mut out);
        let mut seen = std::collections::HashSet::new();
        out.retain(|f| seen.insert(f.clone()));
        out
    }
}

fn invalid(op: &str) -> Error {
    Error::query("invalid_operator", format!("Invalid text operator: {op}"))
}

fn with(path: &[String], part: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(part.to_string());
    p
}

fn exists(path: &[String]) -> Tq {
    Tq::Or(vec![
        Tq::Names(path.to_vec(), true),
        Tq::Names(path.to_vec(), false),
    ])
}

fn term(v: &Value) -> Option<(&'static str, Term)> {
    Some(match v {
        Value::String(s) => ("string", Term::Str(s.clone())),
        Value::Number(n) => ("number", Term::Num(n.clone())),
        Value::Bool(b) => ("boolean", Term::Bool(*b)),
        Value::Null => ("null", Term::Bool(true)),
        _ => return None,
    })
}

fn eq(path: &[String], v: &Value) -> Result<Tq> {
    match v {
        Value::Array(items) => {
            let inner = with(path, "[]");
            let len = Term::Num(Number::from(items.len()));
            let mut parts = vec![Tq::Eq(inner.clone(), "length", len)];
            for item in items {
                parts.push(eq(&inner, item)?);
            }
            Ok(Tq::And(parts))
        }
        Value::Object(_) => convert(path, v),
        _ => {
            let (ty, t) = term(v).expect("a scalar");
            Ok(Tq::Eq(path.to_vec(), ty, t))
        }
    }
}

fn convert(path: &[String], sel: &Value) -> Result<Tq> {
    let Value::Object(m) = sel else {
        return eq(path, sel);
    };
    if m.is_empty() {
        return Ok(Tq::And(Vec::new()));
    }
    if m.len() > 1 {
        let parts = m
            .iter()
            .map(|(k, v)| {
                convert(
                    path,
                    &Value::Object([(k.clone(), v.clone())].into_iter().collect()),
                )
            })
            .collect::<Result<_>>()?;
        return Ok(Tq::And(parts));
    }
    let (k, arg) = m.iter().next().expect("one member");
    let list = |arg: &Value| -> Result<Vec<Tq>> {
        arg.as_array()
            .map(|a| a.iter().map(|s| convert(path, s)).collect())
            .unwrap_or_else(|| Ok(vec![convert(path, arg)?]))
    };
    Ok(match k.as_str() {
        "$and" => Tq::And(list(arg)?),
        "$or" => Tq::Or(list(arg)?),
        "$not" => Tq::Not(Box::new(exists(path)), Box::new(convert(path, arg)?)),
        DEFAULT_FIELD | "$text" => match (k.as_str(), arg) {
            ("$text", Value::String(q)) if path.is_empty() => Tq::Text(q.clone()),
            ("$text", Value::String(q)) => Tq::Eq(path.to_vec(), "string", Term::Str(q.clone())),
            (DEFAULT_FIELD, Value::Object(inner)) => match inner.get("$text") {
                Some(Value::String(q)) => Tq::Text(q.clone()),
                _ => return Err(invalid("$text")),
            },
            _ => return Err(invalid("$text")),
        },
        "$all" => match arg.as_array().map(Vec::as_slice) {
            Some([inner @ Value::Array(_)]) => {
                Tq::Or(vec![eq(path, inner)?, eq(&with(path, "[]"), inner)?])
            }
            Some(items) => Tq::And(
                items
                    .iter()
                    .map(|i| eq(&with(path, "[]"), i))
                    .collect::<Result<_>>()?,
            ),
            None => return Err(invalid("$all")),
        },
        "$elemMatch" | "$allMatch" => convert(&with(path, "[]"), arg)?,
        "$lt" | "$lte" | "$gt" | "$gte" => match term(arg) {
            Some((ty, t)) if ty != "null" => range(path, k, t),
            _ => exists(path),
        },
        "$eq" => eq(path, arg)?,
        "$ne" => Tq::Not(Box::new(exists(path)), Box::new(eq(path, arg)?)),
        "$in" => Tq::Or(any_of(path, arg)?),
        "$nin" => Tq::Not(Box::new(exists(path)), Box::new(Tq::Or(any_of(path, arg)?))),
        "$exists" if arg == &Value::Bool(false) => Tq::Missing(Box::new(exists(path))),
        "$exists" | "$type" => exists(path),
        "$beginsWith" => match arg {
            Value::String(p) => Tq::Prefix(path.to_vec(), p.clone()),
            _ => return Err(invalid(k)),
        },
        "$mod" => Tq::HasType(path.to_vec(), "number", false),
        "$regex" => Tq::HasType(path.to_vec(), "string", true),
        "$size" => match arg {
            Value::Number(n) => Tq::Eq(with(path, "[]"), "length", Term::Num(n.clone())),
            _ => return Err(invalid(k)),
        },
        op if op.starts_with('$') => return Err(invalid(op)),
        name => field(path, name, arg)?,
    })
}

/// A field name met on the way down: its parts added to the path. A part that is an array
/// position also reads as any element (`a.0.b` as `a.[].b` too).
fn field(path: &[String], name: &str, cond: &Value) -> Result<Tq> {
    let parts: Vec<String> = field_path(name)
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
    let positional = parts.iter().any(|p| p.parse::<i64>().is_ok());
    let mut plain = path.to_vec();
    plain.extend(parts.iter().cloned());
    if !positional {
        return convert(&plain, cond);
    }
    let mut elements = path.to_vec();
    elements.extend(parts.iter().map(|p| {
        if p.parse::<i64>().is_ok() {
            "[]".to_string()
        } else {
            p.clone()
        }
    }));
    Ok(Tq::Or(vec![
        convert(&plain, cond)?,
        convert(&elements, cond)?,
    ]))
}

/// `$lt`, `$lte`, `$gt` or `$gte` of `t` at `path` (its type is its bound's).
fn range(path: &[String], op: &str, t: Term) -> Tq {
    let p = path.to_vec();
    match op {
        "$lt" => Tq::Range(p, None, Some((t, false))),
        "$lte" => Tq::Range(p, None, Some((t, true))),
        "$gt" => Tq::Range(p, Some((t, false)), None),
        _ => Tq::Range(p, Some((t, true)), None),
    }
}

/// `$in`: each value at the path itself or as an element of an array there.
fn any_of(path: &[String], arg: &Value) -> Result<Vec<Tq>> {
    let Value::Array(items) = arg else {
        return Err(invalid("$in"));
    };
    let inner = with(path, "[]");
    items
        .iter()
        .map(|item| match item {
            Value::Object(m) => Ok(Tq::Or(
                m.iter()
                    .map(|(k, v)| {
                        let one = Value::Object([(k.clone(), v.clone())].into_iter().collect());
                        Ok(Tq::Or(vec![convert(path, &one)?, convert(&inner, &one)?]))
                    })
                    .collect::<Result<_>>()?,
            )),
            v => Ok(Tq::Or(vec![eq(path, v)?, eq(&inner, v)?])),
        })
        .collect()
}

/// The type a range is over: its bounds'.
fn range_type(lo: &Option<(Term, bool)>, hi: &Option<(Term, bool)>) -> &'static str {
    match lo.as_ref().or(hi.as_ref()) {
        Some((Term::Num(_), _)) => "number",
        Some((Term::Bool(_), _)) => "boolean",
        _ => "string",
    }
}

/// A value as CouchDB writes it in a query: strings quoted (escaped unless they hold a
/// number), integers as they are, other numbers as Erlang prints floats.
fn value_str(t: &Term) -> String {
    match t {
        Term::Str(s) if looks_numeric(s) && !s.contains(['"', '\\']) => format!("\"{s}\""),
        Term::Str(s) => format!("\"{}\"", escape_value(s)),
        Term::Num(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Term::Num(n) => erlang_float(n.as_f64().unwrap_or(0.0)),
        Term::Bool(b) => b.to_string(),
    }
}

/// Whether a string holds a number somewhere (CouchDB's unanchored test).
fn looks_numeric(s: &str) -> bool {
    s.chars().any(|c| c.is_numeric()) || s.contains("NaN") || s.contains("Infinity")
}

/// Lucene's special characters and white space escaped with `\`.
fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if (c == '&' || c == '|') && chars.peek() == Some(&c) {
            chars.next();
            out.push('\\');
            out.push(c);
            out.push(c);
            continue;
        }
        if "+-(){}[]!^~*?:/\\\" \t\r\n".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A float as Erlang's `float_to_binary/1` writes it: 20 digits after the point, and a
/// signed exponent of at least two digits.
fn erlang_float(x: f64) -> String {
    let s = format!("{x:.20e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

fn join(parts: &[Tq], sep: &str) -> String {
    let inner: Vec<String> = parts.iter().map(lucene).filter(|q| !q.is_empty()).collect();
    if inner.is_empty() {
        String::new()
    } else {
        format!("({})", inner.join(sep))
    }
}

fn lucene(q: &Tq) -> String {
    match q {
        Tq::And(parts) => join(parts, " AND "),
        Tq::Or(parts) => join(parts, " OR "),
        Tq::Not(exists, inner) => match lucene(inner) {
            i if i.is_empty() => format!("({})", lucene(exists)),
            i => format!("({} AND NOT ({i}))", lucene(exists)),
        },
        Tq::Missing(exists) => format!("({FIELD_NAMES}:/.*/  AND NOT ({}))", lucene(exists)),
        Tq::Eq(path, ty, t) => format!("({}:{})", field_name(path, ty), value_str(t)),
        Tq::Range(path, lo, hi) => {
            let ty = range_type(lo, hi);
            let (low, high) = if ty == "number" {
                ("*", "*")
            } else {
                ("\"\"", "u0x10FFFF")
            };
            let bound = |b: &Option<(Term, bool)>, open: &str| {
                b.as_ref().map_or(open.to_string(), |(t, _)| value_str(t))
            };
            let open = if lo.as_ref().is_some_and(|(_, inc)| !inc) {
                "{"
            } else {
                "["
            };
            let close = if hi.as_ref().is_some_and(|(_, inc)| !inc) {
                "}"
            } else {
                "]"
            };
            format!(
                "({}:{open}{} TO {}{close})",
                field_name(path, ty),
                bound(lo, low),
                bound(hi, high)
            )
        }
        Tq::Prefix(path, p) => format!("({}:{}*)", field_name(path, "string"), escape_value(p)),
        Tq::Names(path, true) => format!("({FIELD_NAMES}:{}*)", field_name(path, "")),
        Tq::Names(path, false) => format!("({FIELD_NAMES}:{}.*)", names_path(path)),
        Tq::HasType(path, ty, _) => format!("({FIELD_NAMES}:{})", field_name(path, ty)),
        Tq::Text(text) => format!("({DEFAULT_FIELD}:{})", value_str(&Term::Str(text.clone()))),
    }
}

/// The escaped path alone (no type), as `$fieldnames` prefixes name it.
fn names_path(path: &[String]) -> String {
    let dotted: Vec<String> = path.iter().map(|p| p.replace('.', "\\.")).collect();
    escape_user(&dotted.join("."))
}

fn bool_of(parts: Vec<(Occur, Query)>) -> Option<Query> {
    (!parts.is_empty()).then_some(Query::Bool(parts))
}

fn ast(q: &Tq) -> Option<Query> {
    let all =
        |parts: &[Tq], o: Occur| bool_of(parts.iter().filter_map(ast).map(|q| (o, q)).collect());
    match q {
        Tq::And(parts) => all(parts, Occur::Must),
        Tq::Or(parts) => all(parts, Occur::Should),
        Tq::Not(exists, inner) => {
            let mut parts = vec![(Occur::Must, ast(exists)?)];
            parts.extend(ast(inner).map(|i| (Occur::MustNot, i)));
            bool_of(parts)
        }
        Tq::Missing(exists) => bool_of(vec![
            (
                Occur::Must,
                Query::Regex {
                    field: FIELD_NAMES.into(),
                    pattern: ".*".into(),
                },
            ),
            (Occur::MustNot, ast(exists)?),
        ]),
        Tq::Eq(path, ty, t) => Some(exact(field_name(path, ty), t)),
        Tq::Range(path, lo, hi) => {
            let ty = range_type(lo, hi);
            let text = |t: &Term| match t {
                Term::Str(s) => s.clone(),
                Term::Num(n) => n.to_string(),
                Term::Bool(b) => b.to_string(),
            };
            let (lower, upper) = if ty == "number" {
                (
                    lo.as_ref().map(|(t, _)| text(t)),
                    hi.as_ref().map(|(t, _)| text(t)),
                )
            } else {
                // String bounds are never read as numbers: both are given.
                (
                    Some(lo.as_ref().map_or(String::new(), |(t, _)| text(t))),
                    Some(hi.as_ref().map_or(TOP.to_string(), |(t, _)| text(t))),
                )
            };
            Some(Query::Range {
                field: field_name(path, ty),
                lower,
                upper,
                incl_lower: lo.as_ref().is_none_or(|(_, inc)| *inc),
                incl_upper: hi.as_ref().is_none_or(|(_, inc)| *inc),
            })
        }
        Tq::Prefix(path, p) => Some(Query::Regex {
            field: field_name(path, "string"),
            pattern: format!("{}.*", regex::escape(p)),
        }),
        Tq::Names(path, typed) => {
            let prefix = if *typed {
                field_name(path, "")
            } else {
                format!("{}.", names_path(path))
            };
            Some(Query::Regex {
                field: FIELD_NAMES.into(),
                pattern: format!("{}.*", regex::escape(&prefix)),
            })
        }
        Tq::HasType(path, ty, _) => Some(Query::Term {
            field: FIELD_NAMES.into(),
            text: field_name(path, ty),
        }),
        Tq::Text(text) => Some(Query::Phrase {
            field: DEFAULT_FIELD.into(),
            text: text.clone(),
            slop: 0,
        }),
    }
}

/// An exact value of a field: a string through the field's analyzer, a number as a number.
fn exact(field: String, t: &Term) -> Query {
    match t {
        Term::Str(s) => Query::Phrase {
            field,
            text: s.clone(),
            slop: 0,
        },
        Term::Num(n) => Query::Range {
            field,
            lower: Some(n.to_string()),
            upper: Some(n.to_string()),
            incl_lower: true,
            incl_upper: true,
        },
        Term::Bool(b) => Query::Term {
            field,
            text: b.to_string(),
        },
    }
}

fn indexable(q: &Tq, out: &mut Vec<String>) {
    let plain = |path: &[String], ty: &str| {
        let mut p: Vec<String> = path.iter().filter(|p| !p.is_empty()).cloned().collect();
        match p.last_mut() {
            Some(l) => l.push_str(&format!(":{ty}")),
            None => p.push(format!(":{ty}")),
        }
        p.join(".")
    };
    match q {
        // A value or an array element: only the value's field counts (an index names
        // the field once).
        Tq::Or(parts) if matches!(parts.as_slice(), [Tq::Eq(..), Tq::Eq(p, ..)] if p.iter().any(|x| x == "[]")) => {
            indexable(&parts[0], out)
        }
        Tq::And(parts) | Tq::Or(parts) => parts.iter().for_each(|p| indexable(p, out)),
        Tq::Not(exists, inner) => {
            indexable(exists, out);
            indexable(inner, out);
        }
        // `$exists: false` can be answered by any index, as CouchDB decides.
        Tq::Missing(_) => out.clear(),
        Tq::Eq(_, "length" | "null", _) => {}
        Tq::Eq(path, ty, _) => out.push(plain(path, ty)),
        Tq::Range(path, lo, hi) => out.push(plain(path, range_type(lo, hi))),
        Tq::Prefix(path, _) => out.push(plain(path, "string")),
        Tq::Names(..) => {}
        Tq::HasType(path, ty, true) => out.push(plain(path, ty)),
        Tq::HasType(_, _, false) => {}
        Tq::Text(_) => out.push(DEFAULT_FIELD.to_string()),
    }
}

/// The sort of a query on a text index: each field with its type, from a `:string` or
/// `:number` suffix or else from the values the selector compares it with (one type only).
/// Relevance when the query has no sort.
pub fn sort(q: &FindQuery) -> Result<Vec<SortKey>> {
    q.sort
        .iter()
        .map(|raw| {
            let name = escape_user(raw);
            let string = if name.ends_with("_3astring") {
                true
            } else if name.ends_with("_3anumber") {
                false
            } else {
                let mut types = Vec::new();
                sort_types(raw, &q.selector_json, &mut types);
                types.sort_unstable();
                types.dedup();
                match types.as_slice() {
                    [t] => *t,
                    _ => {
                        return Err(Error::query(
                            "text_sort_error",
                            format!(
                                "Unspecified or ambiguous sort type. Try appending :number or :string to the sort field. {raw}"
                            ),
                        ))
                    }
                }
            };
            let name = if name.ends_with("_3astring") || name.ends_with("_3anumber") {
                name
            } else if string {
                format!("{name}_3astring")
            } else {
                format!("{name}_3anumber")
            };
            Ok(SortKey::Field {
                name,
                desc: q.descending,
                string,
            })
        })
        .collect()
}

/// The types (true: string) of the values `field` is compared with by an operator.
fn sort_types(field: &str, sel: &Value, out: &mut Vec<bool>) {
    match sel {
        Value::Object(m) => {
            for (k, v) in m {
                if k == field {
                    if let Value::Object(ops) = v {
                        for (op, arg) in ops {
                            match arg {
                                Value::String(_) if op.starts_with('$') => out.push(true),
                                Value::Number(_) if op.starts_with('$') => out.push(false),
                                _ => {}
                            }
                        }
                    } else {
                        match v {
                            Value::String(_) => out.push(true),
                            Value::Number(_) => out.push(false),
                            _ => {}
                        }
                    }
                } else {
                    sort_types(field, v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| sort_types(field, i, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn q(sel: Value) -> String {
        let s = crate::Selector::parse(&sel).unwrap().to_json();
        TextQuery::new(&s).unwrap().lucene()
    }

    #[test]
    fn selectors_read_as_couchdb_writes_them() {
        assert_eq!(q(json!({"name": "Bob"})), "(name_3astring:\"Bob\")");
        assert_eq!(q(json!({"age": 5})), "(age_3anumber:5)");
        assert_eq!(q(json!({"ok": true})), "(ok_3aboolean:true)");
        assert_eq!(q(json!({"x": null})), "(x_3anull:true)");
        assert_eq!(q(json!({"age": {"$gt": 5}})), "(age_3anumber:{5 TO *])");
        assert_eq!(q(json!({"age": {"$lte": 5}})), "(age_3anumber:[* TO 5])");
        assert_eq!(
            q(json!({"n": {"$gt": "abc"}})),
            "(n_3astring:{\"abc\" TO u0x10FFFF])"
        );
        assert_eq!(
            q(json!({"n": {"$lt": "abc"}})),
            "(n_3astring:[\"\" TO \"abc\"})"
        );
        assert_eq!(
            q(json!({"f": 1.5})),
            "(f_3anumber:1.50000000000000000000e+00)"
        );
        assert_eq!(
            q(json!({"name": {"$exists": true}})),
            "(($fieldnames:name_3a*) OR ($fieldnames:name.*))"
        );
        assert_eq!(
            q(json!({"name": {"$exists": false}})),
            "($fieldnames:/.*/  AND NOT ((($fieldnames:name_3a*) OR ($fieldnames:name.*))))"
        );
        assert_eq!(
            q(json!({"name": {"$ne": "x"}})),
            "((($fieldnames:name_3a*) OR ($fieldnames:name.*)) AND NOT ((name_3astring:\"x\")))"
        );
        assert_eq!(
            q(json!({"$text": "hello world"})),
            "($default:\"hello\\ world\")"
        );
        assert_eq!(
            q(json!({"a": "x", "b": {"$size": 2}})),
            "((a_3astring:\"x\") AND (b._5b_5d_3alength:2))"
        );
        assert_eq!(
            q(json!({"tags": {"$in": ["a"]}})),
            "(((tags_3astring:\"a\") OR (tags._5b_5d_3astring:\"a\")))"
        );
        assert_eq!(
            q(json!({"r": {"$regex": "^a"}})),
            "($fieldnames:r_3astring)"
        );
        assert_eq!(
            q(json!({"n": {"$beginsWith": "a b"}})),
            "(n_3astring:a\\ b*)"
        );
    }

    #[test]
    fn indexable_fields_and_sorts() {
        let f = |sel: Value| {
            let s = crate::Selector::parse(&sel).unwrap().to_json();
            let mut v = TextQuery::new(&s).unwrap().indexable_fields();
            v.sort();
            v
        };
        assert_eq!(
            f(json!({"$text": "t", "a": true, "b": 42, "c": {"$regex": ".*"}})),
            vec!["$default", "a:boolean", "b:number", "c:string"]
        );
        assert_eq!(f(json!({"tags": {"$in": ["x"]}})), vec!["tags:string"]);
        assert!(f(json!({"a": {"$exists": true}})).is_empty());
        let e = TextQuery::new(&json!({"a": {"$where": 1}})).unwrap_err();
        assert!(e.to_string().contains("Invalid text operator: $where"));
    }
}
