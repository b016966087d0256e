//! A document's JSON text read in one pass straight into what a write needs: its stored body
//! ([`crate::body`]) and its revision term ([`crate::EditTerm`]), with `_id`, `_rev` and
//! `_deleted` taken out, without building a [`serde_json::Value`] tree in between. Bulk
//! writes read thousands of small documents per request, and the tree (an allocation per
//! string and container, freed again at once) was most of their cost.
//!
//! Only documents whose reading is plain take this path: [`transcode`] answers `None` for
//! anything else (another `_` member, a key given twice, a key with escapes, nesting deeper
//! than [`MAX_DEPTH`], text that is not a JSON object), and the caller reads those through
//! a `Value` as before. What it does produce is byte for byte what that way produces.

use std::collections::HashSet;

use crate::term;

/// Deepest nesting read here; deeper documents take the general path.
pub const MAX_DEPTH: usize = 64;

/// Objects with more members than this check for repeated keys with a hash set.
const LINEAR_KEYS: usize = 16;

/// A document read from its text.
#[derive(Debug, PartialEq)]
pub struct Transcoded {
    /// `_id`, if given.
    pub id: Option<String>,
    /// `_rev` as given, if given.
    pub rev: Option<String>,
    /// `_deleted`.
    pub deleted: bool,
    /// The stored body: what [`crate::body::encode_members`] writes for its members.
    pub body: Vec<u8>,
    /// The members' revision term: what [`crate::EditTerm::from_members`] encodes.
    pub term: Vec<u8>,
}

/// Reads a document's text; `None` when it needs the general path (see the module).
pub fn transcode(text: &[u8]) -> Option<Transcoded> {
    let mut r = Reader {
        text,
        at: 0,
        body: Vec::with_capacity(text.len()),
        term: Vec::with_capacity(text.len() + 32),
    };
    let mut doc = Transcoded {
        id: None,
        rev: None,
        deleted: false,
        body: Vec::new(),
        term: Vec::new(),
    };
    r.skip_ws();
    r.object(0, Some(&mut doc))?;
    r.skip_ws();
    if r.at != text.len() {
        return None;
    }
    (doc.body, doc.term) = (r.body, r.term);
    Some(doc)
}

/// What a value read was, for the list that holds it.
enum Read {
    /// An integer from 0 to 255: Erlang writes a list of only these as a string of bytes.
    Byte,
    Other,
}

struct Reader<'a> {
    text: &'a [u8],
    at: usize,
    body: Vec<u8>,
    term: Vec<u8>,
}

impl<'a> Reader<'a> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn value(&mut self, depth: usize) -> Option<Read> {
        self.skip_ws();
        match self.peek()? {
            b'{' => self.object(depth + 1, None).map(|()| Read::Other),
            b'[' => self.array(depth + 1).map(|()| Read::Other),
            b'"' => {
                let (raw, escaped) = self.string()?;
                self.string_out(raw, escaped)?;
                Some(Read::Other)
            }
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            _ => self.number(),
        }
    }

    fn literal(&mut self, word: &str) -> Option<Read> {
        let end = self.at + word.len();
        (self.text.get(self.at..end)? == word.as_bytes()).then_some(())?;
        self.at = end;
        self.body.extend_from_slice(word.as_bytes());
        term::atom(&mut self.term, word);
        Some(Read::Other)
    }

    fn number(&mut self) -> Option<Read> {
        let start = self.at;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.peek() {
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.text[start..self.at]).ok()?;
        let parsed;
        let text = if plain_number(text.as_bytes()) {
            text
        } else {
            // serde_json keeps a number's text, but writes its exponent as `e` and a sign.
            parsed = serde_json::from_str::<serde_json::Number>(text).ok()?;
            parsed.as_str()
        };
        self.body.extend_from_slice(text.as_bytes());
        let at = self.term.len();
        term::number_text(&mut self.term, text);
        Some(match self.term[at..] {
            [97, _] => Read::Byte,
            _ => Read::Other,
        })
    }

    /// A string's raw text between its quotes (escapes left as given), and whether it
    /// holds an escape (so that neither the key check nor the writing searches it again).
    #[inline]
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        self.eat(b'"')?;
        let start = self.at;
        let mut escaped = false;
        loop {
            // (An escape at the very end steps past the text, which `peek` then ends.)
            self.at += self.text.get(self.at..).map_or(0, plain_run);
            match self.peek()? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.at += 2;
                }
                0..=0x1f => return None,
                _ => self.at += 1,
            }
        }
        let raw = self.text.get(start..self.at)?;
        self.at += 1;
        Some((raw, escaped))
    }

    /// Writes a string value, given its raw text and whether it holds an escape.
    fn string_out(&mut self, raw: &[u8], escaped: bool) -> Option<()> {
        if escaped {
            let s = decoded(raw, true)?;
            crate::body::write_str(&mut self.body, &s);
            term::binary(&mut self.term, s.as_bytes());
        } else {
            utf8(raw).then_some(())?;
            self.body.push(b'"');
            self.body.extend_from_slice(raw);
            self.body.push(b'"');
            term::binary(&mut self.term, raw);
        }
        Some(())
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'[')?;
        self.body.push(b'[');
        let head = self.term.len();
        self.term.extend_from_slice(&[108, 0, 0, 0, 0]);
        let (mut count, mut bytes) = (0usize, true);
        self.skip_ws();
        if self.peek()? != b']' {
            loop {
                if count > 0 {
                    self.body.push(b',');
                }
                bytes &= matches!(self.value(depth)?, Read::Byte);
                count += 1;
                self.skip_ws();
                match self.peek()? {
                    b',' => self.at += 1,
                    b']' => break,
                    _ => return None,
                }
            }
        }
        self.at += 1;
        self.body.push(b']');
        self.end_list(head, count, bytes && count <= term::BYTE_STRING_MAX);
        Some(())
    }

    /// Finishes the list whose header is at `head`: its length, or the empty list, or, for
    /// a list of small integers, a string of bytes.
    fn end_list(&mut self, head: usize, count: usize, bytes: bool) {
        if count == 0 {
            self.term.truncate(head);
            self.term.push(106);
        } else if bytes {
            // Each item was written as [97, byte].
            let items: Vec<u8> = self.term[head + 5..]
                .iter()
                .skip(1)
                .step_by(2)
                .copied()
                .collect();
            self.term.truncate(head);
            term::byte_string(&mut self.term, &items);
        } else {
            self.term[head + 1..head + 5].copy_from_slice(&(count as u32).to_be_bytes());
            self.term.push(106);
        }
    }

    /// An object; at the top (`doc` given), its `_id`, `_rev` and `_deleted` go to `doc`
    /// and any other `_` member sends the document to the general path.
    fn object(&mut self, depth: usize, mut doc: Option<&mut Transcoded>) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'{')?;
        self.body.push(b'{');
        self.term.extend_from_slice(&[104, 1]);
        let head = self.term.len();
        self.term.extend_from_slice(&[108, 0, 0, 0, 0]);
        let mut keys = Keys::default();
        let mut count = 0usize;
        self.skip_ws();
        if self.peek()? != b'}' {
            loop {
                let (key, escaped) = self.string()?;
                if escaped || !keys.fresh(key) {
                    return None;
                }
                self.eat(b':')?;
                match doc.as_deref_mut() {
                    Some(doc) if key.first() == Some(&b'_') => self.special(key, doc)?,
                    _ => {
                        if count > 0 {
                            self.body.push(b',');
                        }
                        self.term.extend_from_slice(&[104, 2]);
                        self.string_out(key, false)?;
                        self.body.push(b':');
                        count += 1;
                        self.value(depth)?;
                    }
                }
                self.skip_ws();
                match self.peek()? {
                    b',' => self.at += 1,
                    b'}' => break,
                    _ => return None,
                }
                self.skip_ws();
            }
        }
        self.at += 1;
        self.body.push(b'}');
        self.end_list(head, count, false);
        Some(())
    }

    /// A top-level `_` member: `_id` and `_rev` as strings, `_deleted` as a boolean; any
    /// other (or another type) is left to the general path, which knows its rules.
    fn special(&mut self, key: &[u8], doc: &mut Transcoded) -> Option<()> {
        self.skip_ws();
        match key {
            b"_id" | b"_rev" => {
                let (raw, escaped) = self.string()?;
                let s = decoded(raw, escaped)?;
                let slot = if key == b"_id" {
                    &mut doc.id
                } else {
                    &mut doc.rev
                };
                *slot = Some(s);
            }
            b"_deleted" => {
                doc.deleted = match self.peek()? {
                    b't' if self.word("true") => true,
                    b'f' if self.word("false") => false,
                    _ => return None,
                };
            }
            _ => return None,
        }
        Some(())
    }

    /// Steps over `word` if it comes next.
    fn word(&mut self, word: &str) -> bool {
        let end = self.at + word.len();
        let here = self.text.get(self.at..end) == Some(word.as_bytes());
        if here {
            self.at = end;
        }
        here
    }
}

/// Whether `text` is a JSON number without an exponent (`-?(0|[1-9][0-9]*)(\.[0-9]+)?`),
/// which serde_json keeps exactly as given.
fn plain_number(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    let (int, frac) = match digits.iter().position(|&b| b == b'.') {
        Some(dot) => (&digits[..dot], Some(&digits[dot + 1..])),
        None => (digits, None),
    };
    let all_digits = |d: &[u8]| !d.is_empty() && d.iter().all(u8::is_ascii_digit);
    all_digits(int) && (int == b"0" || int[0] != b'0') && frac.is_none_or(all_digits)
}

/// How many bytes `text` starts with that a string holds as they are: none a quote, a
/// backslash or a control character. Read eight at a time; a tail shorter than that is left
/// to the caller's byte-by-byte reading.
#[inline]
fn plain_run(text: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `x` equal to zero, or below `n` (at most 0x80): exact
    // for the lowest such byte, which is all that is read of it.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS;
    let mut n = 0;
    while let Some(chunk) = text.get(n..n + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let stops = below(x, 0x20)
            | below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1);
        if stops != 0 {
            return n + (stops.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n
}

/// Whether `bytes` are UTF-8: the short ASCII texts that most of a document is are
/// checked a word at a time first.
fn utf8(bytes: &[u8]) -> bool {
    bytes.is_ascii() || std::str::from_utf8(bytes).is_ok()
}

/// A string's value from its raw text, which holds an escape if `escaped`.
fn decoded(raw: &[u8], escaped: bool) -> Option<String> {
    if !escaped {
        return std::str::from_utf8(raw).ok().map(str::to_string);
    }
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice(&quoted).ok()
}

/// The keys of one object so far, to find one given twice (a map keeps one of them, and
/// which is the general path's business).
#[derive(Default)]
struct Keys<'a> {
    first: [&'a [u8]; LINEAR_KEYS],
    len: usize,
    more: HashSet<&'a [u8]>,
}

impl<'a> Keys<'a> {
    /// Notes `key`; false if it was seen before.
    fn fresh(&mut self, key: &'a [u8]) -> bool {
        if self.len < LINEAR_KEYS {
            if self.first[..self.len].contains(&key) {
                return false;
            }
            self.first[self.len] = key;
            self.len += 1;
            return true;
        }
        if self.more.is_empty() {
            self.more.extend(self.first.iter().copied());
        }
        self.more.insert(key)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    use super::*;
    use crate::EditTerm;

    /// What the general path makes of a document: its specials, body and term.
    fn general(text: &[u8]) -> Option<Transcoded> {
        let map: Map<String, Value> = serde_json::from_slice(text).ok()?;
        let str_of = |k: &str| map.get(k).and_then(Value::as_str).map(str::to_string);
        let members: Vec<(&str, &Value)> = map
            .iter()
            .filter(|(k, _)| !k.starts_with('_'))
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        let body = crate::body::encode_members(members.iter().copied());
        let term = EditTerm::from_members(members.into_iter(), 0);
        Some(Transcoded {
            id: str_of("_id"),
            rev: str_of("_rev"),
            deleted: map.get("_deleted") == Some(&Value::Bool(true)),
            body,
            term: term.bytes().to_vec(),
        })
    }

    proptest! {
        /// The run read eight bytes at a time is the run read byte by byte, up to the
        /// tail it leaves: whatever bytes, high ones included, and wherever a stop falls.
        #[test]
        fn plain_runs_stop_where_a_byte_by_byte_reading_stops(
            text in prop::collection::vec(
                prop_oneof![
                    4 => 0x20u8..0x7f,
                    1 => Just(b'"'),
                    1 => Just(b'\\'),
                    1 => 0u8..0x20,
                    2 => 0x80u8..=0xff,
                ],
                0..40,
            )
        ) {
            let stop = text
                .iter()
                .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
                .unwrap_or(text.len());
            let run = plain_run(&text);
            prop_assert!(run <= stop);
            prop_assert!(run == stop || text.len() - run < 8, "{} of {}", run, stop);
        }
    }

    fn same(text: &str) {
        let fast = transcode(text.as_bytes()).unwrap_or_else(|| panic!("declined {text}"));
        assert_eq!(Some(fast), general(text.as_bytes()), "{text}");
    }

    #[test]
    fn plain_documents_read_as_the_general_path_reads_them() {
        same(r#"{}"#);
        same(r#" { "_id" : "a\u00e9" , "n" : 1 , "_rev":"1-abc", "_deleted" : true } "#);
        same(r#"{"a":[1,2,255],"b":[256,1],"c":[],"d":{},"e":[[0],[-0,1.0]]}"#);
        same(
            r#"{"s":"\ud83d\ude00\/\n\u0001","t":"é☃","u":"","n":[1E3,-0.0,1e400,12345678901234567890123]}"#,
        );
        same(r#"{"n":[1.50,-0,0.000,10,1E-2,2e+1,-1.5E+300]}"#);
        same(r#"{"x":null,"y":true,"z":false,"w":{"a":{"b":[{"c":null}]}}}"#);
        let bytes = format!(r#"{{"b":[{}]}}"#, vec!["9"; 65_536].join(","));
        same(&bytes);
    }

    #[test]
    fn anything_else_is_declined() {
        for text in [
            r#"{"_attachments":{}}"#,
            r#"{"_id":1}"#,
            r#"{"_deleted":"yes"}"#,
            r#"{"_revisions":{"start":1,"ids":["a"]}}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"_id":"x","_id":"y"}"#,
            r#"{"a\u0062":1}"#,
            r#"[1]"#,
            r#"{"a":1"#,
            r#"{"a":1} x"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":.5}"#,
            r#"{"a":1e}"#,
            r#"{"a":tru}"#,
            "",
        ] {
            assert_eq!(transcode(text.as_bytes()), None, "{text}");
        }
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(70), "]".repeat(70));
        assert_eq!(transcode(deep.as_bytes()), None);
        let many: Vec<String> = (0..40).map(|k| format!(r#""k{}":{k}"#, k % 39)).collect();
        assert_eq!(
            transcode(format!("{{{}}}", many.join(",")).as_bytes()),
            None
        );
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let scalar = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (0u8..=255).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z\\\\\"/\u{1}\u{e9}\u{1F600} ]{0,8}".prop_map(Value::String),
        ];
        scalar.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-z_]{0,3}", inner), 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any document the general path reads, written compactly or spaced out, reads
        /// the same here, or is declined (keys with escapes, `_` members of other types).
        #[test]
        fn documents_read_as_the_general_path_reads_them(
            doc in prop::collection::vec(("[a-z_]{0,4}", json_value()), 0..8),
            pretty in any::<bool>(),
        ) {
            let map: Map<String, Value> = doc.into_iter().collect();
            let value = Value::Object(map);
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            if let Some(fast) = transcode(text.as_bytes()) {
                prop_assert_eq!(Some(fast), general(text.as_bytes()));
            } else {
                let specials = value.as_object().unwrap().keys().any(|k| k.starts_with('_'));
                prop_assert!(specials, "declined {}", text);
            }
        }

        /// Any text at all, mostly broken JSON: never a panic, and whatever is read here
        /// is a document the general path reads the same way.
        #[test]
        fn broken_texts_are_declined_or_read_alike(
            text in "[{}\\[\\],:\"a_01.eE+\\- \\\\u]{0,40}",
            cut in any::<prop::sample::Index>(),
            doc in json_value(),
        ) {
            let whole = serde_json::to_string(&serde_json::json!({ "d": doc })).unwrap();
            let prefix = &whole.as_bytes()[..cut.index(whole.len() + 1)];
            for t in [text.as_bytes(), prefix] {
                if let Some(fast) = transcode(t) {
                    prop_assert_eq!(Some(fast), general(t), "{}", String::from_utf8_lossy(t));
                }
            }
        }
    }
}
