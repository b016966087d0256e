//! Giving map functions only the document members they can read.
//!
//! A map function that only ever uses its document parameter as `doc.name` (never passes
//! the document itself anywhere, indexes it with `[]`, enumerates it, or reaches it through
//! `arguments` or `eval`) observes nothing but those top-level members. For such functions
//! the indexer hands the engine a document holding just those members, so that large
//! documents are not parsed into JavaScript values nobody reads. Any use the analysis does
//! not recognise keeps the whole document.

use std::collections::HashSet;
use std::fmt;

use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Identifiers whose presence anywhere in a function could reach the document indirectly.
const OPAQUE: &[&str] = &["arguments", "eval", "this", "Function", "with"];

/// Member names inherited from `Object.prototype`: reading them says nothing about which
/// members exist (`doc.hasOwnProperty(x)` asks about any member).
const INHERITED: &[&str] = &[
    "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable", "toString", "toLocaleString", "valueOf",
    "constructor", "__proto__", "__defineGetter__", "__defineSetter__", "__lookupGetter__", "__lookupSetter__",
];

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// The top-level members the map functions `sources` can read, or `None` when any of them
/// may read the whole document.
pub fn fields_read(sources: &[&str]) -> Option<HashSet<String>> {
    let mut fields = HashSet::new();
    for src in sources {
        fields.extend(fields_of(src)?);
    }
    Some(fields)
}

fn fields_of(src: &str) -> Option<HashSet<String>> {
    let param = parameter(src)?;
    let bytes = src.as_bytes();
    if OPAQUE.iter().any(|w| word_positions(bytes, w.as_bytes()).next().is_some()) {
        return None;
    }
    let mut fields = HashSet::new();
    for (n, at) in word_positions(bytes, param.as_bytes()).enumerate() {
        if n == 0 {
            continue; // the parameter list itself
        }
        let rest = &src[at + param.len()..];
        let after_dot = rest.trim_start().strip_prefix('.')?.trim_start();
        let name: String = after_dot.bytes().take_while(|&b| is_ident(b)).map(char::from).collect();
        if name.is_empty() || INHERITED.contains(&name.as_str()) {
            return None;
        }
        fields.insert(name);
    }
    Some(fields)
}

/// Whether a function `function [name](param, …) { … }` provably never reads its first
/// parameter: the name appears nowhere but in the parameter list, and nothing reaches the
/// arguments indirectly.
pub fn first_parameter_unused(src: &str) -> bool {
    let Some(param) = parameter(src) else { return false };
    let bytes = src.as_bytes();
    !OPAQUE.iter().any(|w| word_positions(bytes, w.as_bytes()).next().is_some()) && word_positions(bytes, param.as_bytes()).count() == 1
}

/// The first parameter's name of `function [name](param, …)`.
fn parameter(src: &str) -> Option<String> {
    let s = src.trim_start();
    let s = s.strip_prefix("function")?.trim_start();
    let s = s.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$').trim_start();
    let s = s.strip_prefix('(')?.trim_start();
    let name: String = s.bytes().take_while(|&b| is_ident(b)).map(char::from).collect();
    (!name.is_empty() && !name.as_bytes()[0].is_ascii_digit()).then_some(name)
}

/// Positions of `word` as a whole identifier not reached through `.` (a member of
/// something else).
fn word_positions<'a>(hay: &'a [u8], word: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    (0..hay.len().saturating_sub(word.len() - 1)).filter(move |&i| {
        hay[i..].starts_with(word)
            && (i == 0 || (!is_ident(hay[i - 1]) && hay[i - 1] != b'.'))
            && hay.get(i + word.len()).is_none_or(|&b| !is_ident(b))
    })
}

/// The document `doc` (a JSON object) with only the members in `fields`; `None` if it is
/// not an object.
pub fn project(doc: &[u8], fields: &HashSet<String>) -> Option<Vec<u8>> {
    let mut de = serde_json::Deserializer::from_slice(doc);
    let out = de.deserialize_map(Keep { fields, out: Vec::with_capacity(256) }).ok()?;
    Some(out)
}

struct Keep<'a> {
    fields: &'a HashSet<String>,
    out: Vec<u8>,
}

impl<'de> Visitor<'de> for Keep<'_> {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Vec<u8>, A::Error> {
        self.out.push(b'{');
        while let Some(key) = map.next_key::<String>()? {
            if self.fields.contains(&key) {
                let value: &'de RawValue = map.next_value()?;
                if self.out.len() > 1 {
                    self.out.push(b',');
                }
                settee_json::body::write_str(&mut self.out, &key);
                self.out.push(b':');
                self.out.extend_from_slice(value.get().as_bytes());
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        self.out.push(b'}');
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> Option<HashSet<String>> {
        Some(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn member_reads_are_found() {
        let published = "function(doc){ if (doc.metadata && doc.metadata.createdAt) { var p = doc.metadata.createdAt.split(\"-\"); emit([p[0], p[1]], doc.score); } }";
        assert_eq!(fields_read(&[published]), set(&["metadata", "score"]));
        assert_eq!(fields_read(&["function (d) { emit(d._id, d . n); }", "function(x){ emit(x.word, 1) }"]), set(&["_id", "n", "word"]));
        assert_eq!(fields_read(&["function(doc) { emit(1, null); }"]), set(&[]));
    }

    #[test]
    fn an_unread_first_parameter_is_recognised_only_when_provable() {
        assert!(first_parameter_unused("function(keys, values, rereduce) { return sum(values); }"));
        assert!(first_parameter_unused("function named (k, v) { return v.length; }"));
        for src in [
            "function(keys, values) { return keys.length; }",
            "function(k, v) { return arguments[0]; }",
            "function(k, v) { return eval('k'); }",
            "function(k, v) { var f = function(k) { return 1; }; return f(); }",
            "(keys, values) => sum(values)",
            "function() { return 1; }",
        ] {
            assert!(!first_parameter_unused(src), "{src}");
        }
    }

    #[test]
    fn any_other_use_keeps_the_whole_document() {
        for src in [
            "function(doc) { emit(doc._id, doc); }",
            "function(doc) { emit(doc['x'], 1); }",
            "function(doc) { for (var k in doc) emit(k, 1); }",
            "function(doc) { emit(Object.keys(doc), 1); }",
            "function(doc) { emit(arguments[0].x, 1); }",
            "function(doc) { if (doc.hasOwnProperty('x')) emit(1, 1); }",
            "function(doc) { eval('emit(doc.x)'); }",
            "function(doc) { var d = doc; emit(d.x, 1); }",
            "function(doc) { doc = {x: 1}; emit(doc.x); }",
            "function(doc) { emit(JSON.stringify(doc), 1); }",
            "function(doc) { emit(doc?.x, 1); }",
            "function(){ emit(1, 1); }",
            "(function(doc) { emit(doc.x); })",
        ] {
            assert_eq!(fields_read(&[src]), None, "{src}");
        }
    }

    #[test]
    fn projection_keeps_wanted_members_verbatim() {
        let doc = br#"{"_id":"a","big":"xxxxxxxx","n":1.50,"nested":{"a":[1,2]},"esc\"aped":true}"#;
        let out = project(doc, &set(&["n", "nested", "esc\"aped", "absent"]).unwrap()).unwrap();
        assert_eq!(std::str::from_utf8(&out).unwrap(), r#"{"n":1.50,"nested":{"a":[1,2]},"esc\"aped":true}"#);
        assert_eq!(project(b"[1]", &HashSet::new()), None);
    }
}
