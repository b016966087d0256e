//! Giving map functions only the document members they can read.
//!
//! A map function that only ever uses its document parameter as `doc.name` (never passes
//! the document itself anywhere, indexes it with `[]`, enumerates it, or reaches it through
//! `arguments` or `eval`) observes nothing but those top-level members. For such functions
//! the indexer hands the engine a document holding just those members, so that large
//! documents are not parsed into JavaScript values nobody reads. Any use the analysis does
//! not recognise keeps the whole document.

use std::collections::HashSet;

/// Identifiers whose presence anywhere in a function could reach the document indirectly.
const OPAQUE: &[&str] = &["arguments", "eval", "this", "Function", "with"];

/// Member names inherited from `Object.prototype`: reading them says nothing about which
/// members exist (`doc.hasOwnProperty(x)` asks about any member).
const INHERITED: &[&str] = &[
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toString",
    "toLocaleString",
    "valueOf",
    "constructor",
    "__proto__",
    "__defineGetter__",
    "__defineSetter__",
    "__lookupGetter__",
    "__lookupSetter__",
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
    if mentions_opaque(bytes) {
        return None;
    }
    let mut fields = HashSet::new();
    for (n, at) in word_positions(bytes, param.as_bytes()).enumerate() {
        if n == 0 {
            continue; // the parameter list itself
        }
        let rest = &src[at + param.len()..];
        let after_dot = rest.trim_start().strip_prefix('.')?.trim_start();
        let name: String = after_dot
            .bytes()
            .take_while(|&b| is_ident(b))
            .map(char::from)
            .collect();
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
    let Some(param) = parameter(src) else {
        return false;
    };
    let bytes = src.as_bytes();
    !mentions_opaque(bytes) && word_positions(bytes, param.as_bytes()).count() == 1
}

/// Whether the source uses anything that could reach the arguments indirectly.
fn mentions_opaque(src: &[u8]) -> bool {
    OPAQUE
        .iter()
        .any(|w| word_positions(src, w.as_bytes()).next().is_some())
}

/// The first parameter's name of `function [name](param, …)`.
fn parameter(src: &str) -> Option<String> {
    let s = src.trim_start();
    let s = s.strip_prefix("function")?.trim_start();
    let s = s
        .trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        .trim_start();
    let s = s.strip_prefix('(')?.trim_start();
    let name: String = s
        .bytes()
        .take_while(|&b| is_ident(b))
        .map(char::from)
        .collect();
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
/// not an object. Members are copied verbatim; the others are skipped without being parsed
/// (strings by searching for their closing quote), so a large document costs little more
/// than one pass over its bytes. `doc` is trusted to be well-formed JSON, as stored
/// documents are: other text gives `None` or a wrong cut, never a panic.
pub fn project(doc: &[u8], fields: &HashSet<String>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    let mut i = expect(doc, skip_ws(doc, 0), b'{')?;
    i = skip_ws(doc, i);
    if doc.get(i) == Some(&b'}') {
        out.push(b'}');
        return rest_is_blank(doc, i + 1).then_some(out);
    }
    loop {
        let key_end = string_end(doc, i)?;
        let key = member_name(&doc[i..key_end])?;
        let value_start = skip_ws(doc, expect(doc, skip_ws(doc, key_end), b':')?);
        let value_end = value_end(doc, value_start)?;
        if fields.contains(key.as_ref()) {
            if out.len() > 1 {
                out.push(b',');
            }
            settee_json::body::write_str(&mut out, &key);
            out.push(b':');
            out.extend_from_slice(&doc[value_start..value_end]);
        }
        i = skip_ws(doc, value_end);
        match doc.get(i)? {
            b',' => i = skip_ws(doc, i + 1),
            b'}' => {
                out.push(b'}');
                return rest_is_blank(doc, i + 1).then_some(out);
            }
            _ => return None,
        }
    }
}

fn skip_ws(doc: &[u8], mut i: usize) -> usize {
    while doc
        .get(i)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    i
}

fn rest_is_blank(doc: &[u8], i: usize) -> bool {
    skip_ws(doc, i) == doc.len()
}

/// The position after `byte` at `i`.
fn expect(doc: &[u8], i: usize, byte: u8) -> Option<usize> {
    (doc.get(i) == Some(&byte)).then_some(i + 1)
}

/// The position after the string that starts (with its quote) at `i`.
fn string_end(doc: &[u8], i: usize) -> Option<usize> {
    let mut j = expect(doc, i, b'"')?;
    loop {
        j += memchr::memchr2(b'"', b'\\', doc.get(j..)?)?;
        if doc[j] == b'"' {
            return Some(j + 1);
        }
        j += 2; // a backslash and the character it escapes
    }
}

/// A member name from its JSON string (quotes included).
fn member_name(raw: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    let inner = &raw[1..raw.len() - 1];
    if memchr::memchr(b'\\', inner).is_none() {
        return std::str::from_utf8(inner)
            .ok()
            .map(std::borrow::Cow::Borrowed);
    }
    serde_json::from_slice::<String>(raw)
        .ok()
        .map(std::borrow::Cow::Owned)
}

/// The position after the JSON value that starts at `i`.
fn value_end(doc: &[u8], i: usize) -> Option<usize> {
    match doc.get(i)? {
        b'"' => string_end(doc, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match doc.get(j)? {
                    b'"' => {
                        j = string_end(doc, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let len = doc[i..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(doc.len() - i);
            (len > 0).then_some(i + len)
        }
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
        assert_eq!(
            fields_read(&[
                "function (d) { emit(d._id, d . n); }",
                "function(x){ emit(x.word, 1) }"
            ]),
            set(&["_id", "n", "word"])
        );
        assert_eq!(fields_read(&["function(doc) { emit(1, null); }"]), set(&[]));
    }

    #[test]
    fn an_unread_first_parameter_is_recognised_only_when_provable() {
        assert!(first_parameter_unused(
            "function(keys, values, rereduce) { return sum(values); }"
        ));
        assert!(first_parameter_unused(
            "function named (k, v) { return v.length; }"
        ));
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

    /// The reference: a full parse that keeps each member's text.
    fn reference(doc: &[u8], fields: &HashSet<String>) -> Option<Vec<u8>> {
        use serde::de::{Deserializer as _, MapAccess, Visitor};
        struct Keep<'a>(&'a HashSet<String>);
        impl<'de> Visitor<'de> for Keep<'_> {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<u8>, A::Error> {
                let mut out = vec![b'{'];
                while let Some(key) = map.next_key::<String>()? {
                    let value: &'de serde_json::value::RawValue = map.next_value()?;
                    if self.0.contains(&key) {
                        if out.len() > 1 {
                            out.push(b',');
                        }
                        settee_json::body::write_str(&mut out, &key);
                        out.push(b':');
                        out.extend_from_slice(value.get().as_bytes());
                    }
                }
                out.push(b'}');
                Ok(out)
            }
        }
        let mut de = serde_json::Deserializer::from_slice(doc);
        let out = de.deserialize_map(Keep(fields)).ok()?;
        de.end().ok()?;
        Some(out)
    }

    /// Member names, some needing escapes or looking like structure.
    const NAMES: &[&str] = &[
        "a",
        "b",
        "q\"uote",
        "back\\slash",
        "ü",
        "_id",
        "tab\t",
        "{",
        "]",
    ];

    fn json_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let name = || prop::sample::select(NAMES.to_vec());
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            any::<String>().prop_map(serde_json::Value::from),
            name().prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 40, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                prop::collection::vec((name(), inner), 0..6).prop_map(|m| {
                    serde_json::Value::Object(
                        m.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                    )
                }),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn projection_equals_a_full_parse(
            members in proptest::collection::vec((proptest::sample::select(NAMES.to_vec()), json_value()), 0..8),
            wanted in proptest::collection::vec(proptest::sample::select([NAMES, &["zz"]].concat()), 0..4),
            pretty in proptest::prelude::any::<bool>(),
        ) {
            // Members written by hand so that duplicate names survive, as in stored text.
            let sep = if pretty { ",\n  " } else { "," };
            let body: Vec<String> = members.iter().map(|(k, v)| {
                let v = if pretty { serde_json::to_string_pretty(v).unwrap() } else { v.to_string() };
                format!("{}{}{v}", serde_json::Value::from(*k), if pretty { " : " } else { ":" })
            }).collect();
            let doc = if pretty { format!(" {{\n  {} }}\n", body.join(sep)) } else { format!("{{{}}}", body.join(sep)) };
            let fields: HashSet<String> = wanted.iter().map(|s| s.to_string()).collect();
            proptest::prop_assert_eq!(project(doc.as_bytes(), &fields), reference(doc.as_bytes(), &fields), "{}", doc);
        }
    }

    #[test]
    fn projection_keeps_wanted_members_verbatim() {
        let doc = br#"{"_id":"a","big":"xxxxxxxx","n":1.50,"nested":{"a":[1,2]},"esc\"aped":true}"#;
        let out = project(doc, &set(&["n", "nested", "esc\"aped", "absent"]).unwrap()).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"n":1.50,"nested":{"a":[1,2]},"esc\"aped":true}"#
        );
        assert_eq!(project(b"[1]", &HashSet::new()), None);
        for cut in [
            &br#"{"a":"x"#[..],
            br#"{"a":1"#,
            br#"{"a""#,
            br#"{"a":{"b":[1,"#,
            b"{",
            b"",
            br#"{"a":1}x"#,
            br#"{"a" 1}"#,
        ] {
            assert_eq!(
                project(cut, &set(&["a"]).unwrap()),
                None,
                "{}",
                String::from_utf8_lossy(cut)
            );
        }
    }
}
