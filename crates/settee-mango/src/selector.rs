//! Selectors: `{"field": value}`, `{"field": {"$op": arg}}`, `{"$and": [...]}` and the rest
//! of CouchDB's operators, normalised into a tree once and then matched against documents.
//! Comparisons use CouchDB's collation (`_id` compares raw), and a field that is missing
//! matches nothing except `{"$exists": false}`, as in CouchDB.

use std::cmp::Ordering;

use serde_json::{Map, Value};
use settee_json::collate;

use crate::Error;

fn bad<T>(msg: impl Into<String>) -> Result<T, Error> {
    Err(Error::Selector(msg.into()))
}

/// CouchDB's refusal of an operator's argument.
fn bad_arg<T>(op: &str, arg: &Value) -> Result<T, Error> {
    Err(Error::query(
        "bad_arg",
        format!("Bad argument for operator {op}: {}", crate::erl::w(arg)),
    ))
}

/// CouchDB's refusal of an operator it does not know.
fn bad_op<T>(op: &str) -> Result<T, Error> {
    Err(Error::query(
        "invalid_operator",
        format!("Invalid operator: {op}"),
    ))
}

/// A parsed selector.
#[derive(Debug, Clone)]
pub struct Selector(Node);

#[derive(Debug, Clone)]
enum Node {
    All(Vec<Node>),
    Any(Vec<Node>),
    Field(Vec<String>, Cond),
}

#[derive(Debug, Clone)]
enum Cond {
    Cmp(Ordering, bool, Value),
    Ne(Value),
    Exists(bool),
    Type(&'static str),
    In(Vec<Value>),
    Nin(Vec<Value>),
    Size(u64),
    Mod(i64, i64),
    Regex(regex::Regex),
    BeginsWith(String),
    AllOf(Vec<Value>),
    ElemMatch(Box<Node>),
    AllMatch(Box<Node>),
    KeyMapMatch(Box<Node>),
    Not(Box<Cond>),
    Both(Vec<Cond>),
    Either(Vec<Cond>),
    /// `$text`: a text index's query on its default field; documents it returns match.
    Text(Value),
}

/// The field a text index's `$text` searches (CouchDB's name for it).
pub const DEFAULT_FIELD: &str = "$default";

impl Selector {
    /// Parses a selector object.
    pub fn parse(v: &Value) -> Result<Selector, Error> {
        match v {
            Value::Object(m) => Ok(Selector(object(m, &mut Vec::new(), false)?)),
            _ => bad("Selector must be a JSON object"),
        }
    }

    /// Whether a document matches.
    pub fn matches(&self, doc: &Value) -> bool {
        node_matches(&self.0, doc)
    }
}

/// Splits a field name on unescaped dots (`a\.b` is one name), as CouchDB names fields in
/// selectors and in `_find`'s `fields`.
pub fn field_path(name: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.last_mut().expect("non-empty").extend(chars.next()),
            '.' => out.push(String::new()),
            c => out.last_mut().expect("non-empty").push(c),
        }
    }
    out
}

/// A selector object under `prefix`: every member must hold. `elem` allows bare operators
/// (they apply to an array element itself, inside `$elemMatch` and its kin).
/// The path is one vector grown and shrunk on the way down (a copy per level would make
/// deeply nested selectors cost the square of their depth), and deep recursion moves to
/// new stack segments.
fn object(m: &Map<String, Value>, prefix: &mut Vec<String>, elem: bool) -> Result<Node, Error> {
    settee_json::deep::grow(|| {
        let mut parts = Vec::with_capacity(m.len());
        for (k, v) in m {
            parts.push(member(k, v, prefix, elem)?);
        }
        Ok(if parts.len() == 1 {
            parts.pop().expect("one")
        } else {
            Node::All(parts)
        })
    })
}

fn list(v: &Value, op: &str, prefix: &mut Vec<String>, elem: bool) -> Result<Vec<Node>, Error> {
    let Value::Array(items) = v else {
        return bad_arg(op, v);
    };
    items
        .iter()
        .map(|i| match i {
            Value::Object(m) => object(m, prefix, elem),
            _ => bad_arg(op, v),
        })
        .collect()
}

fn member(k: &str, v: &Value, prefix: &mut Vec<String>, elem: bool) -> Result<Node, Error> {
    match k {
        // An explicit empty `$and` or `$nor` matches nothing, as in CouchDB (only `{}` matches
        // everything).
        "$not" | "$nor" if mentions_text(v) => bad_arg(k, v),
        "$and" | "$nor" if v.as_array().is_some_and(Vec::is_empty) => Ok(Node::Any(Vec::new())),
        "$and" => Ok(Node::All(list(v, k, prefix, elem)?)),
        "$or" => Ok(Node::Any(list(v, k, prefix, elem)?)),
        // Negations are pushed down to the fields as CouchDB normalises them.
        "$nor" => Ok(Node::All(
            list(v, k, prefix, elem)?.into_iter().map(negate).collect(),
        )),
        "$text" | DEFAULT_FIELD if prefix.is_empty() && !elem => text(k, v),
        "$not" => match v {
            Value::Object(m) => Ok(negate(object(m, prefix, elem)?)),
            _ => bad_arg("$not", v),
        },
        op if op.starts_with('$') && prefix.is_empty() && !elem => bad_op(op),
        op if op.starts_with('$') => Ok(Node::Field(prefix.to_vec(), cond(op, v)?)),
        name => {
            let len = prefix.len();
            prefix.extend(field_path(name));
            let node = named(v, prefix);
            prefix.truncate(len);
            node
        }
    }
}

/// `{"$text": q}`, or its normal form `{"$default": {"$text": q}}`: a text query, only at
/// the top of a selector (through `$and` and `$or`), as CouchDB takes it.
fn text(k: &str, v: &Value) -> Result<Node, Error> {
    let arg = match (k, v) {
        ("$text", arg) => arg,
        (_, Value::Object(m)) if m.len() == 1 && m.contains_key("$text") => &m["$text"],
        _ => return bad_op(k),
    };
    match arg {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(Node::Field(
            vec![DEFAULT_FIELD.to_string()],
            Cond::Text(arg.clone()),
        )),
        _ => bad_arg("$text", arg),
    }
}

/// Whether a selector's part names `$text` anywhere (CouchDB refuses to negate it).
fn mentions_text(v: &Value) -> bool {
    match v {
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| k == "$text" || k == DEFAULT_FIELD || mentions_text(v)),
        Value::Array(items) => items.iter().any(mentions_text),
        _ => false,
    }
}

/// The condition on the field at `path`: operators, a nested selector, or a value.
fn named(v: &Value, path: &mut Vec<String>) -> Result<Node, Error> {
    match v {
        Value::Object(m) if m.keys().any(|k| k.starts_with('$')) => {
            let conds = m
                .iter()
                .map(|(op, arg)| cond(op, arg))
                .collect::<Result<Vec<_>, _>>()?;
            let c = if conds.len() == 1 {
                conds.into_iter().next().expect("one")
            } else {
                Cond::Both(conds)
            };
            Ok(Node::Field(path.clone(), c))
        }
        Value::Object(m) if !m.is_empty() => object(m, path, false),
        other => Ok(Node::Field(
            path.clone(),
            Cond::Cmp(Ordering::Equal, true, other.clone()),
        )),
    }
}

fn cond(op: &str, arg: &Value) -> Result<Cond, Error> {
    let values = |what: &str| match arg {
        Value::Array(a) => Ok(a.clone()),
        _ => bad_arg(what, arg),
    };
    let sub = |what: &str| match arg {
        Value::Object(m) => Ok(Box::new(object(m, &mut Vec::new(), true)?)),
        _ => bad_arg(what, arg),
    };
    let conds = |what: &str| match arg {
        Value::Array(a) => a
            .iter()
            .map(|c| match c {
                Value::Object(m) if m.len() == 1 => {
                    let (op, v) = m.iter().next().expect("one");
                    cond(op, v)
                }
                _ => bad_arg(what, arg),
            })
            .collect::<Result<Vec<_>, _>>(),
        _ => bad_arg(what, arg),
    };
    Ok(match op {
        "$eq" => Cond::Cmp(Ordering::Equal, true, arg.clone()),
        "$ne" => Cond::Ne(arg.clone()),
        "$lt" => Cond::Cmp(Ordering::Less, false, arg.clone()),
        "$lte" => Cond::Cmp(Ordering::Less, true, arg.clone()),
        "$gt" => Cond::Cmp(Ordering::Greater, false, arg.clone()),
        "$gte" => Cond::Cmp(Ordering::Greater, true, arg.clone()),
        "$exists" => Cond::Exists(arg.as_bool().map_or_else(|| bad_arg("$exists", arg), Ok)?),
        "$type" => Cond::Type(match arg.as_str() {
            Some("null") => "null",
            Some("boolean") => "boolean",
            Some("number") => "number",
            Some("string") => "string",
            Some("array") => "array",
            Some("object") => "object",
            // Any other name is accepted, as CouchDB accepts it, and matches nothing.
            Some(_) => "",
            None => return bad_arg("$type", arg),
        }),
        "$in" => Cond::In(values("$in")?),
        "$nin" => Cond::Nin(values("$nin")?),
        "$all" => Cond::AllOf(values("$all")?),
        "$size" => Cond::Size(arg.as_u64().map_or_else(|| bad_arg("$size", arg), Ok)?),
        "$mod" => match arg.as_array().map(Vec::as_slice) {
            Some([d, r]) => match (d.as_i64(), r.as_i64()) {
                // A divisor of 0 is accepted, as CouchDB accepts it, and matches nothing.
                (Some(d), Some(r)) => Cond::Mod(d, r),
                _ => return bad_arg("$mod", arg),
            },
            _ => return bad_arg("$mod", arg),
        },
        "$regex" => match arg.as_str().map(regex::Regex::new) {
            Some(Ok(re)) => Cond::Regex(re),
            _ => return bad_arg("$regex", arg),
        },
        "$beginsWith" => Cond::BeginsWith(
            arg.as_str()
                .map_or_else(|| bad_op("$beginsWith"), Ok)?
                .to_string(),
        ),
        "$elemMatch" => Cond::ElemMatch(sub("$elemMatch")?),
        "$allMatch" => Cond::AllMatch(sub("$allMatch")?),
        "$keyMapMatch" => Cond::KeyMapMatch(sub("$keyMapMatch")?),
        "$not" => match arg {
            Value::Object(m) if m.len() == 1 => {
                let (op, v) = m.iter().next().expect("one");
                negate_cond(cond(op, v)?)
            }
            _ => return bad_arg("$not", arg),
        },
        "$and" => Cond::Both(conds("$and")?),
        "$or" => Cond::Either(conds("$or")?),
        "$nor" => Cond::Both(conds("$nor")?.into_iter().map(negate_cond).collect()),
        other => return bad_op(other),
    })
}

/// Where a selector confines one field, as far as an index scan can use it: bounds
/// (inclusive or not) from `$eq`, `$lt`…`$gte` and `$beginsWith` at the top of the selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Range {
    /// The lowest value, and whether it is included.
    pub low: Option<(Value, bool)>,
    /// The highest value, and whether it is included.
    pub high: Option<(Value, bool)>,
}

impl Range {
    /// Whether the field is held to one value (`$eq`).
    pub fn is_constant(&self) -> bool {
        matches!((&self.low, &self.high), (Some((l, true)), Some((h, true)))
            if collate::compare(l, h) == Ordering::Equal)
    }

    fn narrow_low(&mut self, v: &Value, inclusive: bool) {
        let replace = match &self.low {
            None => true,
            Some((old, old_inc)) => match collate::compare(v, old) {
                Ordering::Greater => true,
                Ordering::Equal => *old_inc && !inclusive,
                Ordering::Less => false,
            },
        };
        if replace {
            self.low = Some((v.clone(), inclusive));
        }
    }

    fn narrow_high(&mut self, v: &Value, inclusive: bool) {
        let replace = match &self.high {
            None => true,
            Some((old, old_inc)) => match collate::compare(v, old) {
                Ordering::Less => true,
                Ordering::Equal => *old_inc && !inclusive,
                Ordering::Greater => false,
            },
        };
        if replace {
            self.high = Some((v.clone(), inclusive));
        }
    }
}

/// The character that collates above every other (ICU gives U+FFFF the highest primary
/// weight), ending the range of strings that begin with a prefix, as CouchDB bounds
/// `$beginsWith`.
const LAST_CHAR: char = '\u{FFFF}';

impl Selector {
    /// Whether the selector can match nothing (an empty `$or`, `$and` or `$nor`).
    pub fn matches_nothing(&self) -> bool {
        matches!(&self.0, Node::Any(parts) if parts.is_empty())
    }

    /// Whether the selector has a `$text` query (only a text index can answer it).
    pub fn has_text(&self) -> bool {
        self.fields().iter().any(|f| f == DEFAULT_FIELD)
    }

    /// Whether the selector is `{}`.
    pub fn is_empty(&self) -> bool {
        matches!(&self.0, Node::All(parts) if parts.is_empty())
    }

    /// The conditions at the top of the selector (through `$and`), by field.
    fn top_fields(&self) -> Vec<(&[String], &Cond)> {
        fn walk<'a>(n: &'a Node, out: &mut Vec<(&'a [String], &'a Cond)>) {
            match n {
                Node::All(parts) => parts.iter().for_each(|p| walk(p, out)),
                Node::Field(path, c) => out.push((path, c)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.0, &mut out);
        out
    }

    /// Whether every document the selector matches has `field` (CouchDB's
    /// `has_required_fields`): a condition on it other than `$exists: false` at the top, or
    /// in every branch of an `$or`.
    pub fn requires(&self, field: &[String]) -> bool {
        node_requires(&self.0, field)
    }

    /// The range the selector's top-level conditions confine `field` to, `None` when none
    /// of them is one an index scan can use.
    pub fn range(&self, field: &[String]) -> Option<Range> {
        let mut range = Range::default();
        let mut any = false;
        for (path, c) in self.top_fields() {
            if path == field {
                any |= narrow(&mut range, c);
            }
        }
        any.then_some(range)
    }

    /// How many fields the selector gives a range (CouchDB's `field_ranges`).
    pub fn ranged_fields(&self) -> usize {
        let mut seen: Vec<&[String]> = Vec::new();
        for (path, c) in self.top_fields() {
            if narrow(&mut Range::default(), c) && !seen.contains(&path) {
                seen.push(path);
            }
        }
        seen.len()
    }

    /// The fields an index could narrow (conditions at the top of the selector by a
    /// comparison, `$beginsWith` or `$exists`) and the others, each sorted, as `_explain`'s
    /// `selector_hints` name them.
    pub fn field_hints(&self) -> (Vec<String>, Vec<String>) {
        let mut indexable: Vec<String> = self
            .top_fields()
            .into_iter()
            .filter(|(_, c)| narrow(&mut Range::default(), c) || matches!(c, Cond::Exists(_)))
            .map(|(path, _)| dotted(path))
            .collect();
        indexable.sort();
        indexable.dedup();
        let mut others: Vec<String> = self
            .fields()
            .into_iter()
            .filter(|f| !indexable.contains(f))
            .collect();
        others.sort();
        (indexable, others)
    }

    /// Every field the selector reads, dotted (`$elemMatch` and its kin read the whole
    /// array field).
    pub fn fields(&self) -> Vec<String> {
        fn walk(n: &Node, out: &mut Vec<String>) {
            match n {
                Node::All(p) | Node::Any(p) => p.iter().for_each(|p| walk(p, out)),
                Node::Field(path, _) => {
                    let name = dotted(path);
                    if !out.contains(&name) {
                        out.push(name);
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.0, &mut out);
        out
    }

    /// The selector normalised as CouchDB shows it in `_explain`: every condition as
    /// `{"field": {"$op": arg}}`, several joined with `$and`.
    pub fn to_json(&self) -> Value {
        node_json(&self.0)
    }
}

/// A field path written back as a selector names it (dots inside names escaped).
pub fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|p| p.replace('.', "\\."))
        .collect::<Vec<_>>()
        .join(".")
}

fn node_requires(n: &Node, field: &[String]) -> bool {
    match n {
        Node::All(parts) => parts.iter().any(|p| node_requires(p, field)),
        Node::Any(parts) => !parts.is_empty() && parts.iter().all(|p| node_requires(p, field)),
        Node::Field(path, c) => path == field && cond_requires(c),
    }
}

fn cond_requires(c: &Cond) -> bool {
    match c {
        Cond::Exists(want) => *want,
        Cond::Both(cs) => cs.iter().any(cond_requires),
        Cond::Either(cs) => !cs.is_empty() && cs.iter().all(cond_requires),
        _ => true,
    }
}

/// Narrows `r` by `c`; whether `c` is a condition CouchDB gives the field a range for.
fn narrow(r: &mut Range, c: &Cond) -> bool {
    match c {
        Cond::Cmp(Ordering::Equal, _, v) => {
            r.narrow_low(v, true);
            r.narrow_high(v, true);
            true
        }
        Cond::Cmp(Ordering::Less, inc, v) => {
            r.narrow_high(v, *inc);
            true
        }
        Cond::Cmp(Ordering::Greater, inc, v) => {
            r.narrow_low(v, *inc);
            true
        }
        Cond::BeginsWith(p) => {
            r.narrow_low(&Value::String(p.clone()), true);
            r.narrow_high(&Value::String(format!("{p}{LAST_CHAR}")), true);
            true
        }
        // A range over every value: the index is read whole, but it counts as narrowing
        // the field when CouchDB weighs indexes against each other.
        Cond::Exists(true) => true,
        Cond::Both(cs) => cs.iter().fold(false, |any, c| narrow(r, c) | any),
        _ => false,
    }
}

fn node_json(n: &Node) -> Value {
    let list = |parts: &[Node]| Value::Array(parts.iter().map(node_json).collect());
    let one = |k: &str, v: Value| Value::Object(Map::from_iter([(k.to_string(), v)]));
    match n {
        Node::All(parts) if parts.len() == 1 => node_json(&parts[0]),
        Node::All(parts) if parts.is_empty() => Value::Object(Map::new()),
        Node::All(parts) => one("$and", list(parts)),
        Node::Any(parts) => one("$or", list(parts)),
        // Conditions on an array element itself are shown under an empty field name, as
        // CouchDB shows them.
        Node::Field(path, Cond::Both(cs)) => one(
            "$and",
            Value::Array(
                cs.iter()
                    .map(|c| one(&dotted(path), cond_json(c)))
                    .collect(),
            ),
        ),
        Node::Field(path, c) => one(&dotted(path), cond_json(c)),
    }
}

fn cond_json(c: &Cond) -> Value {
    let one = |k: &str, v: Value| Value::Object(Map::from_iter([(k.to_string(), v)]));
    let conds = |cs: &[Cond]| Value::Array(cs.iter().map(cond_json).collect());
    match c {
        Cond::Cmp(Ordering::Equal, _, v) => one("$eq", v.clone()),
        Cond::Cmp(Ordering::Less, false, v) => one("$lt", v.clone()),
        Cond::Cmp(Ordering::Less, true, v) => one("$lte", v.clone()),
        Cond::Cmp(Ordering::Greater, false, v) => one("$gt", v.clone()),
        Cond::Cmp(Ordering::Greater, true, v) => one("$gte", v.clone()),
        Cond::Ne(v) => one("$ne", v.clone()),
        Cond::Exists(b) => one("$exists", Value::Bool(*b)),
        Cond::Type(t) => one("$type", Value::String(t.to_string())),
        Cond::In(vs) => one("$in", Value::Array(vs.clone())),
        Cond::Nin(vs) => one("$nin", Value::Array(vs.clone())),
        Cond::Size(n) => one("$size", Value::from(*n)),
        Cond::Mod(d, r) => one("$mod", Value::from(vec![*d, *r])),
        Cond::Regex(re) => one("$regex", Value::String(re.as_str().to_string())),
        Cond::BeginsWith(p) => one("$beginsWith", Value::String(p.clone())),
        Cond::AllOf(vs) => one("$all", Value::Array(vs.clone())),
        Cond::ElemMatch(n) => one("$elemMatch", node_json(n)),
        Cond::AllMatch(n) => one("$allMatch", node_json(n)),
        Cond::KeyMapMatch(n) => one("$keyMapMatch", node_json(n)),
        Cond::Not(inner) => one("$not", cond_json(inner)),
        Cond::Both(cs) => one("$and", conds(cs)),
        Cond::Either(cs) => one("$or", conds(cs)),
        Cond::Text(q) => one("$text", q.clone()),
    }
}

fn node_matches(node: &Node, doc: &Value) -> bool {
    match node {
        Node::All(parts) => parts.iter().all(|p| node_matches(p, doc)),
        Node::Any(parts) => parts.iter().any(|p| node_matches(p, doc)),
        Node::Field(path, c) => match field(doc, path) {
            Some(at) => cond_matches(c, at, path.len() == 1 && path[0] == "_id"),
            None => missing_matches(c),
        },
    }
}

/// Whether a condition holds of a missing field: only `$exists: false` does.
fn missing_matches(c: &Cond) -> bool {
    match c {
        Cond::Exists(want) => !want,
        Cond::Both(cs) => cs.iter().all(missing_matches),
        Cond::Either(cs) => cs.iter().any(missing_matches),
        // The text index chose the document.
        Cond::Text(_) => true,
        _ => false,
    }
}

/// The negation of a selector, as CouchDB normalises `$not` and `$nor`: De Morgan through
/// `$and` and `$or`, down to each field's condition.
fn negate(n: Node) -> Node {
    match n {
        Node::All(parts) => Node::Any(parts.into_iter().map(negate).collect()),
        Node::Any(parts) => Node::All(parts.into_iter().map(negate).collect()),
        Node::Field(path, c) => Node::Field(path, negate_cond(c)),
    }
}

/// The negation of a field's condition: comparisons, `$in`/`$nin` and `$exists` turned
/// around, any other operator kept under `$not` (which, like every condition but
/// `$exists: false`, needs the field).
fn negate_cond(c: Cond) -> Cond {
    match c {
        Cond::Cmp(Ordering::Equal, _, v) => Cond::Ne(v),
        Cond::Ne(v) => Cond::Cmp(Ordering::Equal, true, v),
        Cond::Cmp(Ordering::Less, inclusive, v) => Cond::Cmp(Ordering::Greater, !inclusive, v),
        Cond::Cmp(Ordering::Greater, inclusive, v) => Cond::Cmp(Ordering::Less, !inclusive, v),
        Cond::In(vs) => Cond::Nin(vs),
        Cond::Nin(vs) => Cond::In(vs),
        Cond::Exists(want) => Cond::Exists(!want),
        Cond::Not(inner) => *inner,
        Cond::Both(cs) => Cond::Either(cs.into_iter().map(negate_cond).collect()),
        Cond::Either(cs) => Cond::Both(cs.into_iter().map(negate_cond).collect()),
        other => Cond::Not(Box::new(other)),
    }
}

/// The value at a field path: object members by name, array elements by index, as CouchDB's
/// `mango_doc:get_field` finds them.
pub fn field<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |at, key| match at {
        Value::Object(m) => m.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

fn cmp(a: &Value, b: &Value, raw: bool) -> Ordering {
    if raw {
        collate::raw(a, b)
    } else {
        collate::compare(a, b)
    }
}

fn cond_matches(c: &Cond, v: &Value, raw: bool) -> bool {
    match c {
        Cond::Cmp(dir, or_equal, arg) => {
            let o = cmp(v, arg, raw);
            o == *dir && *dir != Ordering::Equal || (*or_equal && o == Ordering::Equal)
        }
        Cond::Ne(arg) => cmp(v, arg, raw) != Ordering::Equal,
        Cond::Exists(want) => *want,
        Cond::Type(t) => *t == type_name(v),
        Cond::In(args) => match v {
            Value::Array(items) => items
                .iter()
                .any(|i| args.iter().any(|a| cmp(i, a, raw) == Ordering::Equal)),
            _ => args.iter().any(|a| cmp(v, a, raw) == Ordering::Equal),
        },
        Cond::Nin(args) => !cond_matches(&Cond::In(args.clone()), v, raw),
        Cond::Size(n) => v.as_array().is_some_and(|a| a.len() as u64 == *n),
        Cond::Mod(d, r) => v
            .as_i64()
            .and_then(|x| x.checked_rem(*d))
            .is_some_and(|m| m == *r),
        Cond::Regex(re) => v.as_str().is_some_and(|s| re.is_match(s)),
        Cond::BeginsWith(p) => v.as_str().is_some_and(|s| s.starts_with(p.as_str())),
        // `$all: []` matches nothing, as in CouchDB.
        Cond::AllOf(args) => {
            !args.is_empty()
                && v.as_array().is_some_and(|items| {
                    args.iter()
                        .all(|a| items.iter().any(|i| cmp(i, a, raw) == Ordering::Equal))
                })
        }
        Cond::ElemMatch(sel) => v.as_array().is_some_and(|items| {
            items
                .iter()
                .any(|i| node_matches(sel, i) || elem_cond(sel, i))
        }),
        Cond::AllMatch(sel) => v.as_array().is_some_and(|items| {
            !items.is_empty()
                && items
                    .iter()
                    .all(|i| node_matches(sel, i) || elem_cond(sel, i))
        }),
        Cond::KeyMapMatch(sel) => v
            .as_object()
            .is_some_and(|m| m.keys().any(|k| elem_cond(sel, &Value::String(k.clone())))),
        Cond::Not(inner) => !cond_matches(inner, v, raw),
        Cond::Both(cs) => cs.iter().all(|c| cond_matches(c, v, raw)),
        Cond::Either(cs) => cs.iter().any(|c| cond_matches(c, v, raw)),
        Cond::Text(_) => true,
    }
}

/// Inside `$elemMatch`/`$allMatch`/`$keyMapMatch`, operators with no field apply to the
/// element itself (`{"$gt": 5}`): they were parsed as fields with an empty path.
fn elem_cond(sel: &Node, item: &Value) -> bool {
    match sel {
        Node::Field(path, c) if path.is_empty() => cond_matches(c, item, false),
        Node::All(parts) => parts.iter().all(|p| elem_cond(p, item)),
        Node::Any(parts) => parts.iter().any(|p| elem_cond(p, item)),
        _ => false,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(sel: Value, doc: Value) -> bool {
        Selector::parse(&sel).unwrap().matches(&doc)
    }

    #[test]
    fn equality_ranges_and_missing_fields() {
        let doc = json!({"_id": "x", "n": 5, "s": "abc", "o": {"p": [1, 2, 3]}, "z": null});
        assert!(m(json!({"n": 5}), doc.clone()));
        assert!(
            m(json!({"n": 5.0}), doc.clone()),
            "numbers compare by value"
        );
        assert!(m(json!({"n": {"$gt": 4, "$lte": 5}}), doc.clone()));
        assert!(!m(json!({"n": {"$lt": 5}}), doc.clone()));
        assert!(
            m(json!({"n": {"$lt": "a"}}), doc.clone()),
            "numbers sort before strings"
        );
        assert!(m(json!({"o.p": {"$size": 3}}), doc.clone()));
        assert!(m(json!({"o": {"p": {"$all": [3, 1]}}}), doc.clone()));
        assert!(m(json!({"missing": {"$exists": false}}), doc.clone()));
        assert!(
            !m(json!({"missing": {"$ne": 1}}), doc.clone()),
            "a missing field matches nothing else"
        );
        assert!(m(json!({"z": null}), doc.clone()));
        assert!(m(json!({"z": {"$type": "null"}}), doc.clone()));
    }

    #[test]
    fn combinators_and_array_operators() {
        let doc =
            json!({"tags": ["a", "b"], "scores": [3, 8], "map": {"k1": 1}, "name": "Ann", "n": 7});
        assert!(m(
            json!({"$or": [{"name": "Bob"}, {"name": "Ann"}]}),
            doc.clone()
        ));
        assert!(!m(json!({"$nor": [{"name": "Ann"}]}), doc.clone()));
        assert!(m(json!({"$not": {"name": "Bob"}}), doc.clone()));
        assert!(m(json!({"tags": {"$in": ["b", "c"]}}), doc.clone()));
        assert!(m(json!({"name": {"$nin": ["Bob"]}}), doc.clone()));
        assert!(m(
            json!({"scores": {"$elemMatch": {"$gt": 7}}}),
            doc.clone()
        ));
        assert!(!m(
            json!({"scores": {"$allMatch": {"$gt": 4}}}),
            doc.clone()
        ));
        assert!(m(
            json!({"map": {"$keyMapMatch": {"$eq": "k1"}}}),
            doc.clone()
        ));
        assert!(m(json!({"name": {"$regex": "^A"}}), doc.clone()));
        assert!(m(json!({"name": {"$beginsWith": "An"}}), doc.clone()));
        assert!(m(json!({"n": {"$mod": [4, 3]}}), doc.clone()));
        assert!(
            !m(json!({"n": {"$mod": [-1, 0]}}), json!({"n": i64::MIN})),
            "no overflow"
        );
        assert!(
            m(json!({"tags.1": "b"}), json!({"tags": ["a", "b"]})),
            "array elements by index"
        );
        assert!(m(json!({"n": {"$not": {"$lt": 5}}}), doc.clone()));
        assert!(m(
            json!({"n": {"$or": [{"$lt": 0}, {"$gt": 6}]}}),
            doc.clone()
        ));
        assert!(
            m(json!({"a\\.b": 1}), json!({"a.b": 1})),
            "escaped dots name one field"
        );
    }

    #[test]
    fn negation_and_empty_lists_as_couchdb_reads_them() {
        // Checked against CouchDB 3.5 with documents `has` {a: 1, t: [1, 2]}, `other`
        // {a: 2, t: []} and `none` {b: 1, t: "x"}.
        let docs = [
            ("has", json!({"a": 1, "t": [1, 2]})),
            ("other", json!({"a": 2, "t": []})),
            ("none", json!({"b": 1, "t": "x"})),
        ];
        let found = |sel: Value| -> Vec<&str> {
            let s = Selector::parse(&sel).unwrap();
            docs.iter()
                .filter(|(_, d)| s.matches(d))
                .map(|(id, _)| *id)
                .collect()
        };
        assert_eq!(found(json!({"$not": {"a": 1}})), ["other"]);
        assert_eq!(found(json!({"$nor": [{"a": 1}]})), ["other"]);
        assert!(found(json!({"$or": []})).is_empty());
        assert!(found(json!({"$and": []})).is_empty());
        assert!(found(json!({"$nor": []})).is_empty());
        assert!(found(json!({"t": {"$all": []}})).is_empty());
        assert_eq!(found(json!({"a": {"$not": {"$eq": 1}}})), ["other"]);
        assert_eq!(found(json!({"$not": {"a": {"$exists": true}}})), ["none"]);
        assert_eq!(found(json!({"a": {"$not": {"$exists": true}}})), ["none"]);
        assert_eq!(found(json!({"a": {"$nin": [1]}})), ["other"]);
        assert!(found(json!({"$not": {"$or": [{"a": 1}, {"b": 1}]}})).is_empty());
        assert_eq!(found(json!({"$or": [{"a": 1}, {"b": 1}]})), ["has", "none"]);
        assert_eq!(
            found(json!({})).len(),
            3,
            "an empty selector matches everything"
        );
    }

    #[test]
    fn bad_selectors_are_refused() {
        for bad in [
            json!([1]),
            json!({"$foo": 1}),
            json!({"a": {"$foo": 1}}),
            json!({"a": {"$in": 5}}),
            json!({"a": {"$regex": "("}}),
            json!({"a": {"$mod": [2]}}),
            json!({"$and": 3}),
        ] {
            assert!(Selector::parse(&bad).is_err(), "{bad}");
        }
        let named = |sel: Value| match Selector::parse(&sel) {
            Err(Error::Query { error, reason }) => (error, reason),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            named(json!({"a": {"$size": "x"}})),
            ("bad_arg", "Bad argument for operator $size: <<120>>".into())
        );
        assert_eq!(
            named(json!({"a": {"$beginsWith": 5}})).0,
            "invalid_operator"
        );
        // What CouchDB accepts and matches nothing with.
        for odd in [json!({"a": {"$mod": [0, 1]}}), json!({"a": {"$type": "x"}})] {
            assert!(!Selector::parse(&odd).unwrap().matches(&json!({"a": 1})));
        }
    }
}
