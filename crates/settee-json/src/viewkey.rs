//! View keys as byte strings whose plain byte order is CouchDB's collation, so view trees
//! compare keys with `memcmp` instead of decoding JSON and calling the collator on every
//! comparison.
//!
//! Each JSON value becomes a type tag followed by its content; strings under the default
//! collation are stored as their ICU root sort key (the collator's own byte-comparable form),
//! under `raw` collation as their UTF-8 bytes. Every encoding is self-delimiting, so an encoded
//! key followed by a document id still orders by key first, then by id.
//!
//! Zero bytes inside strings are written as `00 FF` and a string ends with `00 01`, so a
//! string sorts before every longer string it is a prefix of. Arrays and objects end with a
//! `00` byte, below every tag; object members each start with `01`.
//!
//! The encoding is one-way for strings (a sort key does not give the text back): view rows
//! keep the key's JSON text beside it for output.

use std::sync::LazyLock;

use icu_collator::options::CollatorOptions;
use icu_collator::{Collator, CollatorBorrowed};
use serde_json::{Number, Value};

static ROOT: LazyLock<CollatorBorrowed<'static>> = LazyLock::new(|| {
    Collator::try_new(Default::default(), CollatorOptions::default())
        .expect("the root collation is compiled in")
});

/// How strings (and, for `Raw`, types) order: a view's `options.collation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Collation {
    /// CouchDB's default: `null < false < true < numbers < strings < arrays < objects`,
    /// strings by the Unicode Collation Algorithm.
    #[default]
    Unicode,
    /// `"collation": "raw"`: Erlang term order, `numbers < false < null < true < objects <
    /// arrays < strings`, strings by code point.
    Raw,
}

/// Tag bytes, per collation, in the order of that collation.
struct Tags {
    null: u8,
    fals: u8,
    tru: u8,
    number: u8,
    string: u8,
    array: u8,
    object: u8,
}

const UNICODE: Tags = Tags {
    null: 0x10,
    fals: 0x20,
    tru: 0x21,
    number: 0x30,
    string: 0x40,
    array: 0x50,
    object: 0x60,
};
const RAW: Tags = Tags {
    number: 0x10,
    fals: 0x20,
    null: 0x21,
    tru: 0x22,
    object: 0x30,
    array: 0x40,
    string: 0x50,
};

/// Ends an array or object; below every tag.
const END: u8 = 0x00;
/// Starts each object member, so that an empty member name is not taken for [`END`].
const MEMBER: u8 = 0x01;
/// The second byte after a zero in string content: an escaped zero, or the end of the string.
const ESCAPED_ZERO: u8 = 0xFF;
const STRING_END: u8 = 0x01;

fn tags(c: Collation) -> &'static Tags {
    match c {
        Collation::Unicode => &UNICODE,
        Collation::Raw => &RAW,
    }
}

/// Appends the encoding of `v` to `out`.
pub fn encode(v: &Value, c: Collation, out: &mut Vec<u8>) {
    let t = tags(c);
    match v {
        Value::Null => out.push(t.null),
        Value::Bool(false) => out.push(t.fals),
        Value::Bool(true) => out.push(t.tru),
        Value::Number(n) => {
            out.push(t.number);
            out.extend_from_slice(&number_bytes(n));
        }
        Value::String(s) => {
            out.push(t.string);
            string(s, c, out);
        }
        Value::Array(items) => {
            out.push(t.array);
            for item in items {
                encode(item, c, out);
            }
            out.push(END);
        }
        Value::Object(members) => {
            out.push(t.object);
            for (k, item) in members {
                out.push(MEMBER);
                string(k, c, out);
                encode(item, c, out);
            }
            out.push(END);
        }
    }
}

/// The encoding of `v` as a new vector.
pub fn encoded(v: &Value, c: Collation) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    encode(v, c, &mut out);
    out
}

/// The encoding of the JSON text `json`: the same bytes as [`encoded`] of its parsed value,
/// without building the value (except for objects). `None` if the text is not JSON, or nests
/// deeper than [`crate::deep::MAX_DEPTH`] (a key may nest as deeply as a document).
pub fn encoded_json(json: &str, c: Collation) -> Option<Vec<u8>> {
    if crate::deep::depth(json.as_bytes()) > crate::deep::MAX_DEPTH {
        return None;
    }
    let mut out = Vec::with_capacity(16);
    let mut de = serde_json::Deserializer::from_str(json);
    de.disable_recursion_limit();
    serde::de::DeserializeSeed::deserialize(
        Encoder { c, out: &mut out },
        serde_stacker::Deserializer::new(&mut de),
    )
    .ok()?;
    de.end().ok()?;
    Some(out)
}

/// Writes the encoding of the value it is given by a deserializer.
struct Encoder<'a> {
    c: Collation,
    out: &'a mut Vec<u8>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Encoder<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Encoder<'_> {
    fn number(self, n: Number) {
        self.out.push(tags(self.c).number);
        self.out.extend_from_slice(&number_bytes(&n));
    }
}

impl<'de> serde::de::Visitor<'de> for Encoder<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.out.push(tags(self.c).null);
        Ok(())
    }

    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        let t = tags(self.c);
        self.out.push(if b { t.tru } else { t.fals });
        Ok(())
    }

    fn visit_i64<E>(self, n: i64) -> Result<(), E> {
        self.number(n.into());
        Ok(())
    }

    fn visit_u64<E>(self, n: u64) -> Result<(), E> {
        self.number(n.into());
        Ok(())
    }

    fn visit_f64<E: serde::de::Error>(self, f: f64) -> Result<(), E> {
        self.number(Number::from_f64(f).ok_or_else(|| E::custom("not a finite number"))?);
        Ok(())
    }

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.out.push(tags(self.c).string);
        string(s, self.c, self.out);
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let (c, out) = (self.c, self.out);
        out.push(tags(c).array);
        while seq
            .next_element_seed(Encoder { c, out: &mut *out })?
            .is_some()
        {}
        out.push(END);
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        // Objects are parsed as values, so that a repeated member name keeps one value as
        // parsing does; numbers kept exactly also arrive here, as maps with one private member.
        let value: Value =
            serde::Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        encode(&value, self.c, self.out);
        Ok(())
    }
}

/// A number as eight bytes whose unsigned order is numeric order.
fn number_bytes(n: &Number) -> [u8; 8] {
    let f = n
        .as_f64()
        .unwrap_or_else(|| n.to_string().parse().unwrap_or(0.0));
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = f.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    ordered.to_be_bytes()
}

/// A string's content (sort key or bytes), zero-escaped and terminated.
fn string(s: &str, c: Collation, out: &mut Vec<u8>) {
    match c {
        Collation::Unicode => sort_key(s, out),
        Collation::Raw => escape(s.as_bytes(), out),
    }
    out.push(0);
    out.push(STRING_END);
}

/// Strings up to this many bytes have their escaped sort keys remembered per thread: view
/// keys repeat the same short strings (types, dates, names) over and over.
const REMEMBERED_LEN: usize = 64;
/// Entries a thread's memory of sort keys holds before it starts over.
const REMEMBERED_KEYS: usize = 16_384;

thread_local! {
    static SORT_KEYS: std::cell::RefCell<std::collections::HashMap<Box<str>, Box<[u8]>>> = Default::default();
}

fn sort_key(s: &str, out: &mut Vec<u8>) {
    if s.len() > REMEMBERED_LEN {
        return escape(&raw_sort_key(s), out);
    }
    SORT_KEYS.with_borrow_mut(|known| {
        if let Some(key) = known.get(s) {
            return out.extend_from_slice(key);
        }
        let mut escaped = Vec::new();
        escape(&raw_sort_key(s), &mut escaped);
        out.extend_from_slice(&escaped);
        if known.len() >= REMEMBERED_KEYS {
            known.clear();
        }
        known.insert(s.into(), escaped.into());
    })
}

/// This encoding's own version: raised whenever the bytes a key encodes to change.
const ENCODING_VERSION: u32 = 1;

/// Strings from many scripts, cases and accents whose sort keys stand for the collation data.
const SAMPLES: &[&str] = &[
    "a",
    "A",
    "á",
    "à",
    "ä",
    "â",
    "b",
    "B",
    "c",
    "ç",
    "ß",
    "ss",
    "æ",
    "œ",
    "ø",
    "å",
    "ñ",
    "z",
    "Z",
    "0",
    "1",
    "9",
    "½",
    "-",
    "_",
    " ",
    ".",
    "a\u{301}",
    "\u{301}",
    "ﬁ",
    "Ǆ",
    "İ",
    "ı",
    "中",
    "文",
    "日本",
    "한국",
    "ελληνικά",
    "кириллица",
    "עברית",
    "عربي",
    "हिन्दी",
    "ไทย",
    "😀",
    "\u{FFFD}",
];

/// The version of view keys as stored: the encoding's version and a fingerprint of the
/// collation data (the sort keys of [`SAMPLES`]). An index made under another is rebuilt,
/// as CouchDB rebuilds one made under another collator version.
pub fn stored_key_version() -> &'static str {
    static VERSION: LazyLock<String> = LazyLock::new(|| {
        use md5::{Digest, Md5};
        let mut hash = Md5::new();
        for s in SAMPLES {
            hash.update(raw_sort_key(s));
            hash.update([0xFF]);
        }
        format!("{ENCODING_VERSION}-{:x}", hash.finalize())
    });
    &VERSION
}

fn raw_sort_key(s: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(s.len() * 2 + 4);
    let Ok(()) = ROOT.write_sort_key_to(s, &mut key);
    key
}

fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(ESCAPED_ZERO);
        }
    }
}

/// Length of the one encoded value at the start of `bytes`; `None` if it is not a whole value.
pub fn value_len(bytes: &[u8], c: Collation) -> Option<usize> {
    let t = tags(c);
    let tag = *bytes.first()?;
    if tag == t.null || tag == t.fals || tag == t.tru {
        Some(1)
    } else if tag == t.number {
        (bytes.len() >= 9).then_some(9)
    } else if tag == t.string {
        Some(1 + string_len(&bytes[1..])?)
    } else if tag == t.array || tag == t.object {
        let mut at = 1;
        loop {
            match *bytes.get(at)? {
                END => return Some(at + 1),
                MEMBER if tag == t.object => {
                    at += 1 + string_len(&bytes[at + 1..])?;
                    at += value_len(&bytes[at..], c)?;
                }
                _ if tag == t.object => return None,
                _ => at += value_len(&bytes[at..], c)?,
            }
        }
    } else {
        None
    }
}

/// Length of an escaped, terminated string content at the start of `bytes`.
fn string_len(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let zero = at + bytes.get(at..)?.iter().position(|&b| b == 0)?;
        match *bytes.get(zero + 1)? {
            STRING_END => return Some(zero + 2),
            ESCAPED_ZERO => at = zero + 2,
            _ => return None,
        }
    }
}

/// The part of an encoded key that decides its group at `group_level` = `level`: for an
/// array, its first `level` elements; any other key is its own group.
pub fn group_prefix(key: &[u8], level: usize, c: Collation) -> Option<&[u8]> {
    let t = tags(c);
    if key.first() != Some(&t.array) {
        return Some(&key[..value_len(key, c)?]);
    }
    let mut at = 1;
    for _ in 0..level {
        if *key.get(at)? == END {
            break;
        }
        at += value_len(&key[at..], c)?;
    }
    Some(&key[..at])
}

/// Appends a document id to an encoded key so that rows order by key, then id, then `dup`
/// (the position of a repeated emit of one key by one document).
pub fn push_doc_id(out: &mut Vec<u8>, id: &str, dup: u32) {
    escape(id.as_bytes(), out);
    out.push(0);
    out.push(STRING_END);
    if dup > 0 {
        out.extend_from_slice(&dup.to_be_bytes());
    }
}

/// Splits a row key made by [`encode`] + [`push_doc_id`] into the encoded key and the id.
pub fn split_row_key(row: &[u8], c: Collation) -> Option<(&[u8], String)> {
    let klen = value_len(row, c)?;
    let rest = &row[klen..];
    let idlen = string_len(rest)?;
    let mut id = Vec::with_capacity(idlen);
    let mut bytes = rest[..idlen - 2].iter();
    while let Some(&b) = bytes.next() {
        id.push(b);
        if b == 0 {
            bytes.next();
        }
    }
    Some((&row[..klen], String::from_utf8(id).ok()?))
}

/// The bound just above every row whose key encodes to `key` (with any id): a key range end
/// that includes all of that key's rows.
pub fn after_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.extend_from_slice(key);
    out.push(0xFF);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collate;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn json_text_is_encoded_like_its_value() {
        for text in [
            "1.0",
            "-0.0",
            "0",
            "1e2",
            "100",
            "-7",
            "18446744073709551615",
            "123456789012345678901234567890",
            r#" [ 1, "a\u0000b", {"k": 1, "k": 2}, null, true ] "#,
        ] {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                encoded_json(text, Collation::Unicode),
                Some(encoded(&v, Collation::Unicode)),
                "{text}"
            );
        }
        for bad in ["", "[1,", "1 2", "{\"a\"}", "nul"] {
            assert_eq!(encoded_json(bad, Collation::Unicode), None, "{bad}");
        }
    }

    #[test]
    fn remembered_sort_keys_equal_computed_ones_and_stay_bounded() {
        let long = "x".repeat(REMEMBERED_LEN + 1);
        let strings: Vec<String> = (0..REMEMBERED_KEYS + 10)
            .map(|i| format!("k{i}é"))
            .chain([long, String::new(), "a\u{0}b".into()])
            .collect();
        for pass in 0..2 {
            for s in &strings {
                let mut fresh = Vec::new();
                escape(&raw_sort_key(s), &mut fresh);
                let mut got = Vec::new();
                sort_key(s, &mut got);
                assert_eq!(got, fresh, "{s:?} on pass {pass}");
            }
        }
        assert!(SORT_KEYS.with_borrow(|k| k.len()) <= REMEMBERED_KEYS);
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-50i64..50).prop_map(|n| json!(n)),
            (-50.0f64..50.0).prop_map(|f| json!((f * 4.0).round() / 4.0)),
            "[aAbBéÉ \u{0}中z0-]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[abAé]{0,2}", inner), 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn encoding_json_text_equals_encoding_its_value(v in arb_json(), pretty in any::<bool>()) {
            let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
            for c in [Collation::Unicode, Collation::Raw] {
                prop_assert_eq!(encoded_json(&text, c), Some(encoded(&v, c)), "{}", text);
            }
        }

        #[test]
        fn byte_order_is_couchdb_collation(a in arb_json(), b in arb_json()) {
            let (x, y) = (encoded(&a, Collation::Unicode), encoded(&b, Collation::Unicode));
            prop_assert_eq!(x.cmp(&y), collate::compare(&a, &b), "{} vs {}", a, b);
            let (x, y) = (encoded(&a, Collation::Raw), encoded(&b, Collation::Raw));
            prop_assert_eq!(x.cmp(&y), collate::raw(&a, &b), "raw {} vs {}", a, b);
        }

        #[test]
        fn values_delimit_themselves(a in arb_json(), id in "[a-z\u{0}é/]{1,6}", dup in 0u32..3) {
            for c in [Collation::Unicode, Collation::Raw] {
                let key = encoded(&a, c);
                prop_assert_eq!(value_len(&key, c), Some(key.len()));
                let mut row = key.clone();
                push_doc_id(&mut row, &id, dup);
                let (k, got) = split_row_key(&row, c).expect("a row key");
                prop_assert_eq!(k, &key[..]);
                prop_assert_eq!(got, id.clone());
                prop_assert!(row.as_slice() < after_key(&key).as_slice());
            }
        }
    }

    #[test]
    fn rows_order_by_key_then_id() {
        let row = |k: Value, id: &str| {
            let mut r = encoded(&k, Collation::Unicode);
            push_doc_id(&mut r, id, 0);
            r
        };
        assert!(row(json!("a"), "z") < row(json!("b"), "a"));
        assert!(row(json!("a"), "a") < row(json!("a"), "ab"));
        assert!(
            row(json!(["a"]), "zzz") < row(json!(["a", 1]), "a"),
            "a shorter array first, whatever the id"
        );
        assert!(after_key(&encoded(&json!("a"), Collation::Unicode)) < row(json!("aa"), "a"));
    }

    #[test]
    fn group_prefixes_cut_arrays_only() {
        let c = Collation::Unicode;
        let k = encoded(&json!(["2024", "01", 5]), c);
        assert_eq!(
            group_prefix(&k, 2, c),
            group_prefix(&encoded(&json!(["2024", "01", 9]), c), 2, c)
        );
        assert_ne!(
            group_prefix(&k, 2, c),
            group_prefix(&encoded(&json!(["2024", "02"]), c), 2, c)
        );
        assert_eq!(
            group_prefix(&k, 9, c).map(|p| p.len()),
            Some(k.len() - 1),
            "a level past the end takes every element"
        );
        let s = encoded(&json!("x"), c);
        assert_eq!(group_prefix(&s, 1, c), Some(&s[..]));
    }

    #[test]
    fn raw_collation_follows_erlang_term_order() {
        let ordered = [
            json!(1),
            json!(false),
            json!(null),
            json!(true),
            json!({"a": "a"}),
            json!(["a"]),
            json!("a"),
        ];
        for pair in ordered.windows(2) {
            assert!(
                encoded(&pair[0], Collation::Raw) < encoded(&pair[1], Collation::Raw),
                "{} < {}",
                pair[0],
                pair[1]
            );
        }
    }
}
