//! The outline of a JSON text: where an object's members and an array's items are, as byte
//! ranges, found in one pass without building any value.
//!
//! A `_bulk_docs` body of a thousand documents is split into its documents' texts so that
//! they can be parsed side by side. Building values only to find where they start and end
//! would parse the body twice; this pass reads the brackets and skips strings whole instead.
//!
//! The outline checks the structure it walks (the object's keys, colons and commas, the
//! array's commas, brackets that close what they opened, strings that end) but not what lies
//! inside a value it skips: a number, a literal or an escape is left to whoever parses the
//! range, which must parse every range it is given (and fail on what is not JSON). Anything
//! it cannot outline is `None`, for the caller to read the ordinary way.

use std::ops::Range;

/// One member of an object: its key's text (quotes included) and its value's, and when
/// the value is an array, its items'.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The key, quotes included, as written (escapes not decoded).
    pub key: Range<usize>,
    /// The value.
    pub value: Range<usize>,
    /// The items of the value, when it is an array: found in the same pass, not by reading
    /// it again.
    pub items: Option<Vec<Range<usize>>>,
}

impl Member {
    /// Whether the key is exactly `name` as written, with no escape in it.
    pub fn is(&self, text: &[u8], name: &str) -> bool {
        let key = &text[self.key.clone()];
        key.len() == name.len() + 2 && &key[1..key.len() - 1] == name.as_bytes()
    }
}

/// The members of the object that `text` is (whitespace around it allowed), in order; `None`
/// if `text` is not outlined as one object or nests deeper than `max_depth` (the object
/// itself is the first level).
pub fn object(text: &[u8], max_depth: usize) -> Option<Vec<Member>> {
    let mut s = Scan { text, at: 0 };
    s.space();
    let members = s.members(max_depth)?;
    s.space();
    (s.at == text.len()).then_some(members)
}

/// A position in a text being outlined.
struct Scan<'a> {
    text: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// An object's members, from its `{` to past its `}`.
    fn members(&mut self, max_depth: usize) -> Option<Vec<Member>> {
        let inner = max_depth.checked_sub(1)?;
        self.listed(b'{', b'}', |s| {
            let start = s.at;
            s.eat(b'"')?;
            s.string()?;
            let key = start..s.at;
            s.space();
            s.eat(b':')?;
            s.space();
            let start = s.at;
            let items = match s.peek()? {
                b'[' => Some(s.items(inner)?),
                _ => {
                    s.value(inner)?;
                    None
                }
            };
            let value = start..s.at;
            Some(Member { key, value, items })
        })
    }

    /// An array's items, from its `[` to past its `]`.
    fn items(&mut self, max_depth: usize) -> Option<Vec<Range<usize>>> {
        let inner = max_depth.checked_sub(1)?;
        self.listed(b'[', b']', |s| s.value(inner))
    }

    /// What `each` reads of every element between `open` and `close`, the elements
    /// separated by commas, whitespace allowed around each.
    fn listed<T>(
        &mut self,
        open: u8,
        close: u8,
        mut each: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        self.eat(open)?;
        let mut found = Vec::new();
        self.space();
        if self.eat(close).is_some() {
            return Some(found);
        }
        loop {
            self.space();
            found.push(each(self)?);
            self.space();
            match self.peek()? {
                b',' => self.at += 1,
                b if b == close => {
                    self.at += 1;
                    return Some(found);
                }
                _ => return None,
            }
        }
    }

    /// Skips one value, which may nest `max_depth` levels; its range.
    fn value(&mut self, max_depth: usize) -> Option<Range<usize>> {
        let start = self.at;
        match self.peek()? {
            b'"' => {
                self.at += 1;
                self.string()?;
            }
            b'{' | b'[' => self.nested(max_depth)?,
            _ => self.scalar()?,
        }
        Some(start..self.at)
    }

    /// Skips a string's contents and its closing quote (the opening one is eaten).
    fn string(&mut self) -> Option<()> {
        loop {
            let rest = &self.text[self.at..];
            let i = memchr::memchr2(b'"', b'\\', rest)?;
            self.at += i + 1;
            if rest[i] == b'"' {
                return Some(());
            }
            // The escaped byte, whatever it is: a quote after a backslash ends nothing.
            self.peek()?;
            self.at += 1;
        }
    }

    /// Skips a number or literal: everything up to the next delimiter.
    fn scalar(&mut self) -> Option<()> {
        let start = self.at;
        while !matches!(
            self.peek(),
            None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'[' | b'{')
        ) {
            self.at += 1;
        }
        (self.at > start).then_some(())
    }

    /// Skips an object or array and all it holds, checking only that each bracket closes
    /// what it opened and that no more than `max_depth` are open at once.
    fn nested(&mut self, max_depth: usize) -> Option<()> {
        // The open brackets, innermost last, one bit each (set for `{`): no allocation for
        // the thousands of small documents of a bulk body.
        let mut open = Brackets::default();
        loop {
            let b = self.peek()?;
            self.at += 1;
            match b {
                b'"' => self.string()?,
                b'{' | b'[' => {
                    if open.depth == max_depth {
                        return None;
                    }
                    open.push(b == b'{')?;
                }
                b'}' | b']' => {
                    if open.pop()? != (b == b'}') {
                        return None;
                    }
                    if open.depth == 0 {
                        return Some(());
                    }
                }
                _ => {}
            }
        }
    }
}

/// A stack of open brackets, up to 128 deep (deeper texts are not outlined).
#[derive(Default)]
struct Brackets {
    /// Bit `i` is set when the `i`th open bracket is `{`.
    kinds: u128,
    depth: usize,
}

impl Brackets {
    fn push(&mut self, brace: bool) -> Option<()> {
        let bit = 1u128.checked_shl(u32::try_from(self.depth).ok()?)?;
        if brace {
            self.kinds |= bit;
        } else {
            self.kinds &= !bit;
        }
        self.depth += 1;
        Some(())
    }

    /// Whether the innermost open bracket, now closed, was `{`; `None` if none was open.
    fn pop(&mut self) -> Option<bool> {
        self.depth = self.depth.checked_sub(1)?;
        Some(self.kinds >> self.depth & 1 == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::value::RawValue;
    use serde_json::Value;

    fn texts<'a>(text: &'a [u8], ranges: &[Range<usize>]) -> Vec<&'a str> {
        ranges
            .iter()
            .map(|r| std::str::from_utf8(&text[r.clone()]).unwrap())
            .collect()
    }

    #[test]
    fn members_and_items_are_found_with_strings_and_nesting_skipped() {
        let text = br#" { "a" : [ 1 , "]\"" , {"b":[{}]} , true ] , "c\"d":{"e":"}"} } "#;
        let members = object(text, 8).unwrap();
        assert_eq!(members.len(), 2);
        assert!(members[0].is(text, "a") && !members[1].is(text, "cd"));
        assert_eq!(&text[members[1].key.clone()], br#""c\"d""#);
        assert_eq!(&text[members[1].value.clone()], br#"{"e":"}"}"#);
        let items = members[0].items.as_ref().unwrap();
        assert_eq!(
            texts(text, items),
            ["1", r#""]\"""#, r#"{"b":[{}]}"#, "true"]
        );
        assert_eq!(members[1].items, None);
        assert_eq!(object(b"{}", 1), Some(vec![]));
        assert_eq!(object(b"{\"a\":[ ]}", 2).unwrap()[0].items, Some(vec![]));
    }

    /// Brackets are matched by kind at every depth the bracket stack holds (128), and a
    /// text nesting deeper is not outlined whatever the limit asked.
    #[test]
    fn brackets_match_by_kind_up_to_the_stacks_depth() {
        let nest = |depth: usize, inner: &str| {
            let (mut open, mut close) = (String::new(), String::new());
            for k in 0..depth {
                let (o, c) = if k % 3 == 0 {
                    ("{\"k\":", "}")
                } else {
                    ("[", "]")
                };
                open.push_str(o);
                close.insert_str(0, c);
            }
            format!("{{\"a\":{open}{inner}{close}}}")
        };
        assert!(object(nest(128, "1").as_bytes(), 200).is_some());
        assert!(object(nest(129, "1").as_bytes(), 200).is_none());
        let crossed = nest(60, "1").replacen("]}", "}]", 1);
        assert!(serde_json::from_str::<Value>(&crossed).is_err());
        assert!(object(crossed.as_bytes(), 200).is_none());
    }

    #[test]
    fn what_cannot_be_outlined_is_none() {
        for bad in [
            &b""[..],
            b"[]",
            b"{",
            b"{\"a\"}",
            b"{\"a\":}",
            b"{\"a\":1,}",
            b"{\"a\":1 \"b\":2}",
            b"{\"a\":[1}]}",
            b"{\"a\":\"x}",
            b"{\"a\":\"x\\\"}",
            b"{a:1}",
            b"{\"a\":1} x",
            b"{\"a\":1}}",
        ] {
            assert_eq!(object(bad, 8), None, "{}", String::from_utf8_lossy(bad));
        }
        for bad in [&b"[1,]"[..], b"[,1]", b"[1 2]", b"[1", b"[[1]"] {
            let text = [&b"{\"a\":"[..], bad, b"}"].concat();
            assert_eq!(object(&text, 8), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn nesting_deeper_than_allowed_is_none() {
        let text = br#"{"a":[[1]]}"#;
        assert!(object(text, 3).is_some());
        assert_eq!(object(text, 2), None);
        let items = br#"{"a":[{"a":[1]}]}"#;
        assert!(object(items, 4).is_some());
        assert_eq!(object(items, 3), None);
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[ -~\\\\\"\u{e9}\u{1F600}\n]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-z\"\\\\]{0,4}", inner), 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A text of `value` with whitespace spread between its tokens.
    fn spaced(value: &Value, pretty: bool) -> String {
        if pretty {
            serde_json::to_string_pretty(value).unwrap()
        } else {
            serde_json::to_string(value).unwrap()
        }
    }

    proptest! {
        /// For any valid text, the outline finds exactly the ranges serde_json finds.
        #[test]
        fn valid_texts_outline_as_serde_json_reads_them(
            members in prop::collection::vec(("[a-z]{1,3}", json()), 0..5),
            pretty: bool,
        ) {
            let object_value = Value::Object(members.into_iter().collect());
            let text = spaced(&object_value, pretty);
            let found = object(text.as_bytes(), 64).unwrap();
            let raw: std::collections::BTreeMap<String, &RawValue> =
                serde_json::from_str(&text).unwrap();
            prop_assert_eq!(found.len(), raw.len());
            for m in &found {
                let key: String = serde_json::from_slice(&text.as_bytes()[m.key.clone()]).unwrap();
                prop_assert_eq!(&text[m.value.clone()], raw[&key].get());
                prop_assert_eq!(m.items.is_some(), raw[&key].get().starts_with('['));
                if let Some(items) = &m.items {
                    let raw_items: Vec<&RawValue> = serde_json::from_str(raw[&key].get()).unwrap();
                    let want: Vec<&str> = raw_items.iter().map(|r| r.get()).collect();
                    prop_assert_eq!(texts(text.as_bytes(), items), want);
                }
            }
        }

        /// For any text, broken or not: the outline never panics, and where it outlines one
        /// serde_json cannot read, some range it gives is not JSON either, so a caller that
        /// parses every range refuses the text as serde_json does.
        #[test]
        fn broken_texts_are_never_outlined_into_valid_parts(
            value in prop::collection::vec(json(), 0..4),
            pretty: bool,
            cuts in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..4),
        ) {
            let mut text = format!(r#"{{"docs":{}}}"#, spaced(&Value::Array(value), pretty))
                .into_bytes();
            for (at, how, byte) in cuts {
                let i = at.index(text.len() + 1);
                let set = b"{}[]\",:\\ 1tn";
                let byte = set[usize::from(byte) % set.len()];
                match how {
                    0 => text.insert(i, byte),
                    1 if i < text.len() => { text.remove(i); }
                    2 if i < text.len() => text[i] = byte,
                    _ => text.truncate(i),
                }
            }
            let valid = serde_json::from_slice::<Value>(&text).is_ok();
            let Some(members) = object(&text, 64) else { return Ok(()) };
            let parses = |r: &Range<usize>| serde_json::from_slice::<Value>(&text[r.clone()]).is_ok();
            // A caller parses an array's items, every other value whole.
            let all_parse = members.iter().all(|m| {
                parses(&m.key)
                    && match &m.items {
                        Some(items) => items.iter().all(parses),
                        None => parses(&m.value),
                    }
            });
            if !valid {
                prop_assert!(!all_parse, "{}", String::from_utf8_lossy(&text));
            }
        }
    }
}
