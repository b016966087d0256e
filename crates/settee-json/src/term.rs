//! Content-derived revision ids, computed as CouchDB computes them.
//!
//! CouchDB's new revision id is the MD5 of the Erlang external term format (`term_to_binary`
//! with `minor_version` 1) of the list `[Deleted, OldPos, OldRevId, Body, Atts]`, where `Body`
//! is the document without its `_`-fields in the EJSON shape `{[{Key, Value}, …]}` and `Atts`
//! lists `{Name, ContentType, Md5}` for each attachment in reverse order. Producing the same
//! bytes means the same edit yields the same revision on Settee and on CouchDB, which keeps
//! replication between them free of spurious conflicts.
//!
//! Term tags used (from the external term format): 70 float (8-byte IEEE, big-endian),
//! 97 small integer (u8), 98 integer (i32), 100 atom (u16 length, Latin-1), 104 small tuple,
//! 106 empty list, 107 string of bytes (u16 length; a list of integers 0 to 255), 108 list (u32 length, elements, tail), 109 binary (u32 length), 110/111
//! small/large bignum (length, sign, little-endian magnitude).

use md5::{Digest, Md5};
use serde_json::{Map, Number, Value};

use crate::{Rev, RevId};

/// What an attachment contributes to its document's revision id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttDigest {
    /// Attachment name.
    pub name: String,
    /// Its MIME type.
    pub content_type: String,
    /// MD5 of its (identity-encoded) data.
    pub md5: [u8; 16],
}

/// The encoded `Body` of an edit: the part of the revision-id term that depends only on the
/// document's own members, so it can be prepared before the parent revision is known.
#[derive(Clone, Debug)]
pub struct EditTerm {
    body: Vec<u8>,
    /// The revision id for one parent, worked out ahead ([`EditTerm::presume`]).
    presumed: Option<Presumed>,
}

/// A revision id worked out ahead, and what it was worked out for.
#[derive(Clone, Debug)]
struct Presumed {
    deleted: bool,
    parent: Option<Rev>,
    id: RevId,
}

impl EditTerm {
    /// Encodes a body (without `_`-fields).
    pub fn new(body: &Map<String, Value>) -> EditTerm {
        EditTerm::from_members(body.iter().map(|(k, v)| (k.as_str(), v)), 64)
    }

    /// Like [`EditTerm::new`], for members given one by one (in order, each key once), with
    /// the bytes their JSON takes as a hint of the term's size.
    pub fn from_members<'a>(
        members: impl ExactSizeIterator<Item = (&'a str, &'a Value)>,
        json_len: usize,
    ) -> EditTerm {
        let mut out = Vec::with_capacity(json_len + 8 * members.len() + 16);
        object(&mut out, members);
        EditTerm {
            body: out,
            presumed: None,
        }
    }

    /// The term [`crate::transcode::transcode`] wrote for a document's members (the same
    /// bytes [`EditTerm::from_members`] writes for them).
    pub fn from_transcoded(term: Vec<u8>) -> EditTerm {
        EditTerm {
            body: term,
            presumed: None,
        }
    }

    /// The encoded members.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.body
    }

    /// Works out the revision id of this edit on top of `parent`, without attachments, now
    /// rather than when [`new_rev_id`] asks: a database's single writer then does not hash
    /// the bodies of a whole batch while it holds everyone else's edits. [`new_rev_id`]
    /// answers the same whether or not this was called. Returns the id.
    pub fn presume(&mut self, deleted: bool, parent: Option<&Rev>) -> RevId {
        self.presumed = None;
        let id = new_rev_id(deleted, parent, self, &[]);
        self.note_presumed(deleted, parent, id)
    }

    /// Keeps `id` as this edit's id on top of `parent`; returns it.
    fn note_presumed(&mut self, deleted: bool, parent: Option<&Rev>, id: RevId) -> RevId {
        self.presumed = Some(Presumed {
            deleted,
            parent: parent.cloned(),
            id: id.clone(),
        });
        id
    }

    /// The id worked out ahead, if it was worked out for these arguments.
    fn presumed(&self, deleted: bool, parent: Option<&Rev>, atts: &[AttDigest]) -> Option<&RevId> {
        let p = self.presumed.as_ref()?;
        (atts.is_empty() && p.deleted == deleted && p.parent.as_ref() == parent).then_some(&p.id)
    }
}

/// The revision id of an edit on top of `parent` (none for a document's first revision),
/// with the document's attachments in their document order.
pub fn new_rev_id(
    deleted: bool,
    parent: Option<&Rev>,
    edit: &EditTerm,
    atts: &[AttDigest],
) -> RevId {
    if let Some(id) = edit.presumed(deleted, parent, atts) {
        return id.clone();
    }
    let mut head = Vec::with_capacity(48);
    message_head(&mut head, deleted, parent);
    let mut tail = Vec::with_capacity(8 + atts.len() * 64);
    message_tail(&mut tail, atts);
    let mut md5 = Md5::new();
    md5.update(&head);
    md5.update(&edit.body);
    md5.update(&tail);
    RevId::Hash(md5.finalize().into())
}

/// Works out the revision ids of many edits without attachments at once, each as
/// [`EditTerm::presume`] does, with their hashes computed side by side in the processor's
/// vector lanes: for small documents, one at a time takes about ten times as long. Each
/// edit is `(term, deleted, parent)`; the ids come back in their order.
pub fn presume_many(edits: &mut [(&mut EditTerm, bool, Option<&Rev>)]) -> Vec<RevId> {
    let size = edits.iter().map(|(e, _, _)| e.body.len() + 48).sum();
    let mut text = Vec::with_capacity(size);
    let mut spans = Vec::with_capacity(edits.len());
    for (edit, deleted, parent) in edits.iter() {
        let start = text.len();
        message_head(&mut text, *deleted, *parent);
        text.extend_from_slice(&edit.body);
        message_tail(&mut text, &[]);
        spans.push(start..text.len());
    }
    let messages: Vec<&[u8]> = spans.into_iter().map(|span| &text[span]).collect();
    let mut digests = vec![[0u8; 16]; messages.len()];
    hasher().hash_many(&messages, &mut digests);
    edits
        .iter_mut()
        .zip(digests)
        .map(|((edit, deleted, parent), digest)| {
            edit.note_presumed(*deleted, *parent, RevId::Hash(digest))
        })
        .collect()
}

/// The hasher of many messages at once, for the vector instructions this processor has
/// (found once).
fn hasher() -> md5_many::Md5Many {
    static HASHER: std::sync::OnceLock<md5_many::Md5Many> = std::sync::OnceLock::new();
    *HASHER.get_or_init(md5_many::Md5Many::new)
}

/// The revision-id term up to the body: the outer list's header, `Deleted`, `OldPos` and
/// `OldRevId`.
fn message_head(out: &mut Vec<u8>, deleted: bool, parent: Option<&Rev>) {
    out.extend_from_slice(&[131, 108, 0, 0, 0, 5]);
    atom(out, if deleted { "true" } else { "false" });
    match parent {
        Some(rev) => {
            integer(out, i128::from(rev.pos));
            binary(out, rev.id.bytes());
        }
        None => {
            integer(out, 0);
            integer(out, 0);
        }
    }
}

/// The revision-id term after the body: `Atts` (in reverse order) and the list's tail.
fn message_tail(out: &mut Vec<u8>, atts: &[AttDigest]) {
    list_header(out, atts.len());
    for att in atts.iter().rev() {
        out.extend_from_slice(&[104, 3]);
        binary(out, att.name.as_bytes());
        binary(out, att.content_type.as_bytes());
        binary(out, &att.md5);
    }
    if !atts.is_empty() {
        out.push(106);
    }
    out.push(106); // tail of the outer five-element list
}

/// An Erlang term, for the identifiers CouchDB derives as the MD5 of `term_to_binary` of a
/// term (replication ids): enough of the term format to write them.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// An atom (`undefined`, `remote`, `default`).
    Atom(String),
    /// A binary (`<<"...">>`).
    Binary(Vec<u8>),
    /// A string, which Erlang keeps as a list of bytes (`"..."`).
    Chars(String),
    /// An integer.
    Int(i64),
    /// A list.
    List(Vec<Term>),
    /// A tuple.
    Tuple(Vec<Term>),
    /// A JSON value in CouchDB's EJSON shape (objects as `{[{Key, Value}]}`).
    Json(Value),
}

impl Term {
    /// `term_to_binary(Term)` as CouchDB 3 writes it: atoms as `ATOM_EXT`, strings of
    /// bytes as `STRING_EXT`.
    pub fn to_binary(&self) -> Vec<u8> {
        let mut out = vec![131];
        self.write(&mut out);
        out
    }

    /// The lowercase hex MD5 of [`Term::to_binary`].
    pub fn md5_hex(&self) -> String {
        Md5::digest(self.to_binary())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Term::Atom(name) => atom(out, name),
            Term::Binary(bytes) => binary(out, bytes),
            Term::Chars(s) if s.is_empty() => out.push(106),
            Term::Chars(s) if s.len() <= BYTE_STRING_MAX => byte_string(out, s.as_bytes()),
            Term::Chars(s) => {
                let items: Vec<Term> = s.bytes().map(|b| Term::Int(i64::from(b))).collect();
                Term::List(items).write(out);
            }
            Term::Int(i) => integer(out, i128::from(*i)),
            Term::List(items) => {
                list_header(out, items.len());
                items.iter().for_each(|t| t.write(out));
                if !items.is_empty() {
                    out.push(106);
                }
            }
            Term::Tuple(items) => {
                out.extend_from_slice(&[104, items.len() as u8]);
                items.iter().for_each(|t| t.write(out));
            }
            Term::Json(v) => value(out, v),
        }
    }
}

pub(crate) fn atom(out: &mut Vec<u8>, name: &str) {
    out.push(100);
    out.extend_from_slice(&(name.len() as u16).to_be_bytes());
    out.extend_from_slice(name.as_bytes());
}

/// The longest list of bytes Erlang writes as a string of bytes (`STRING_EXT`).
pub(crate) const BYTE_STRING_MAX: usize = u16::MAX as usize;

/// A string of bytes (`STRING_EXT`): a list of integers 0 to 255, at most
/// [`BYTE_STRING_MAX`] long and not empty.
pub(crate) fn byte_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(107);
    out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
    out.extend_from_slice(bytes);
}

pub(crate) fn binary(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(109);
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A list of `len` elements: the header only; the caller writes the elements and, for a
/// non-empty list, the empty-list tail.
fn list_header(out: &mut Vec<u8>, len: usize) {
    if len == 0 {
        out.push(106);
    } else {
        out.push(108);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn object<'a>(out: &mut Vec<u8>, members: impl ExactSizeIterator<Item = (&'a str, &'a Value)>) {
    out.extend_from_slice(&[104, 1]);
    let len = members.len();
    list_header(out, len);
    for (k, v) in members {
        out.extend_from_slice(&[104, 2]);
        binary(out, k.as_bytes());
        value(out, v);
    }
    if len > 0 {
        out.push(106);
    }
}

fn value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => atom(out, "null"),
        Value::Bool(b) => atom(out, if *b { "true" } else { "false" }),
        Value::Number(n) => number(out, n),
        Value::String(s) => binary(out, s.as_bytes()),
        Value::Array(items) if is_byte_list(items) => {
            // Erlang writes a list of small integers as a string of bytes.
            let bytes: Vec<u8> = items.iter().filter_map(small_int).collect();
            byte_string(out, &bytes);
        }
        // Containers on a stack that grows as deep documents need (see crate::deep).
        Value::Array(items) => crate::deep::grow(|| {
            list_header(out, items.len());
            items.iter().for_each(|item| value(out, item));
            if !items.is_empty() {
                out.push(106);
            }
        }),
        Value::Object(map) => {
            crate::deep::grow(|| object(out, map.iter().map(|(k, v)| (k.as_str(), v))))
        }
    }
}

/// Whether `term_to_binary` writes this list as `STRING_EXT`: not empty, at most 65,535
/// items, each an integer from 0 to 255.
fn is_byte_list(items: &[Value]) -> bool {
    !items.is_empty()
        && items.len() <= BYTE_STRING_MAX
        && items.iter().all(|v| small_int(v).is_some())
}

/// The value as a byte, if it is a JSON integer from 0 to 255 (`-0` included, which is the
/// integer 0; `1.0` is a float).
fn small_int(v: &Value) -> Option<u8> {
    let Value::Number(n) = v else { return None };
    let text = n.as_str();
    if text.contains(['.', 'e', 'E']) {
        return None;
    }
    text.parse::<i16>().ok().and_then(|i| u8::try_from(i).ok())
}

/// JSON integers become Erlang integers of any size, other numbers doubles (as the JSON
/// decoder CouchDB uses does).
fn number(out: &mut Vec<u8>, n: &Number) {
    // The number's text as given (numbers keep it: `arbitrary_precision`).
    number_text(out, n.as_str());
}

/// [`number`] from the number's JSON text.
pub(crate) fn number_text(out: &mut Vec<u8>, text: &str) {
    if let Some(i) = short_integer(text.as_bytes()) {
        integer(out, i.into());
    } else if text.contains(['.', 'e', 'E']) {
        // As `Number::as_f64` reads it.
        let float = text.parse::<f64>().ok().filter(|f| f.is_finite());
        out.push(70);
        out.extend_from_slice(&float.unwrap_or(0.0).to_bits().to_be_bytes());
    } else if let Ok(i) = text.parse::<i128>() {
        integer(out, i);
    } else {
        bignum(out, text);
    }
}

/// An integer of at most 18 digits (so within `i64`), optionally negative, read without
/// the general parser: most numbers in documents are such.
fn short_integer(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Some(if negative { -n } else { n })
}

fn integer(out: &mut Vec<u8>, i: i128) {
    if (0..=255).contains(&i) {
        out.extend_from_slice(&[97, i as u8]);
    } else if i32::try_from(i).is_ok() {
        out.push(98);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        let mag = i.unsigned_abs().to_le_bytes();
        let len = mag.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        big_header(out, len, i < 0);
        out.extend_from_slice(&mag[..len]);
    }
}

fn big_header(out: &mut Vec<u8>, len: usize, negative: bool) {
    if len <= 255 {
        out.extend_from_slice(&[110, len as u8]);
    } else {
        out.push(111);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.push(u8::from(negative));
}

/// An integer too large for i128, from its decimal text.
fn bignum(out: &mut Vec<u8>, text: &str) {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut mag: Vec<u8> = Vec::new(); // little-endian base 256
    for d in digits.bytes().filter(u8::is_ascii_digit) {
        let mut carry = u32::from(d - b'0');
        for byte in mag.iter_mut() {
            let x = u32::from(*byte) * 10 + carry;
            *byte = x as u8;
            carry = x >> 8;
        }
        while carry > 0 {
            mag.push(carry as u8);
            carry >>= 8;
        }
    }
    big_header(out, mag.len(), negative);
    out.extend_from_slice(&mag);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn empty_document_gets_couchdbs_well_known_first_rev() {
        let id = new_rev_id(false, None, &EditTerm::new(&Map::new()), &[]);
        assert_eq!(id.to_string(), "967a00dff5e02add41819138abb3284d");
    }

    /// An id worked out ahead is the one worked out on demand, and is used only for the
    /// arguments it was worked out for.
    #[test]
    fn a_presumed_id_is_the_computed_one_and_only_for_its_arguments() {
        let plain = EditTerm::new(&body(r#"{"a":1,"b":"two"}"#));
        let parent = Rev::parse("3-967a00dff5e02add41819138abb3284d").unwrap();
        let other = Rev::parse("3-0000000000000000000000000000000a").unwrap();
        let att = AttDigest {
            name: "a.txt".into(),
            content_type: "text/plain".into(),
            md5: [1; 16],
        };
        for (deleted, parent) in [(false, None), (false, Some(&parent)), (true, Some(&parent))] {
            let mut ahead = plain.clone();
            ahead.presume(deleted, parent);
            assert_eq!(
                new_rev_id(deleted, parent, &ahead, &[]),
                new_rev_id(deleted, parent, &plain, &[])
            );
            for (d, p, atts) in [
                (!deleted, parent, &[][..]),
                (deleted, Some(&other), &[]),
                (deleted, None, &[]),
                (deleted, parent, std::slice::from_ref(&att)),
            ] {
                assert_eq!(
                    new_rev_id(d, p, &ahead, atts),
                    new_rev_id(d, p, &plain, atts),
                    "{d} {p:?} {}",
                    atts.len()
                );
            }
        }
        // The presumed id is what is answered: one planted by hand shows it is used.
        let mut planted = plain.clone();
        planted.presumed = Some(Presumed {
            deleted: false,
            parent: None,
            id: RevId::parse("0000000000000000000000000000000b").unwrap(),
        });
        assert_eq!(
            new_rev_id(false, None, &planted, &[]).to_string(),
            "0000000000000000000000000000000b"
        );
        assert_ne!(
            new_rev_id(false, Some(&parent), &planted, &[]).to_string(),
            "0000000000000000000000000000000b"
        );
    }

    #[test]
    fn same_edit_same_id_different_edit_different_id() {
        let a = EditTerm::new(&body(r#"{"a":1,"b":[true,null,"x",{}]}"#));
        let b = EditTerm::new(&body(r#"{"b":[true,null,"x",{}],"a":1}"#));
        let parent = Rev::parse("1-967a00dff5e02add41819138abb3284d").unwrap();
        let id = |deleted, parent: Option<&Rev>, edit: &EditTerm, atts: &[AttDigest]| {
            new_rev_id(deleted, parent, edit, atts)
        };
        assert_eq!(
            id(false, Some(&parent), &a, &[]),
            id(false, Some(&parent), &a, &[])
        );
        assert_ne!(
            id(false, Some(&parent), &a, &[]),
            id(false, Some(&parent), &b, &[]),
            "key order counts"
        );
        assert_ne!(
            id(false, Some(&parent), &a, &[]),
            id(true, Some(&parent), &a, &[])
        );
        assert_ne!(id(false, Some(&parent), &a, &[]), id(false, None, &a, &[]));
        let att = AttDigest {
            name: "a.txt".into(),
            content_type: "text/plain".into(),
            md5: [1; 16],
        };
        assert_ne!(
            id(false, None, &a, &[]),
            id(false, None, &a, std::slice::from_ref(&att)),
            "attachments count"
        );
        let other = AttDigest {
            md5: [2; 16],
            ..att.clone()
        };
        assert_ne!(
            id(false, None, &a, std::slice::from_ref(&att)),
            id(false, None, &a, &[other]),
            "attachment content counts"
        );
    }

    fn encoded(json: &str) -> Vec<u8> {
        let mut out = Vec::new();
        value(&mut out, &serde_json::from_str(json).unwrap());
        out
    }

    #[test]
    fn numbers_encode_as_erlang_terms() {
        assert_eq!(encoded("7"), [97, 7]);
        assert_eq!(encoded("-1"), [98, 255, 255, 255, 255]);
        assert_eq!(encoded("4294967296"), [110, 5, 0, 0, 0, 0, 0, 1]);
        assert_eq!(encoded("-4294967296"), [110, 5, 1, 0, 0, 0, 0, 1]);
        assert_eq!(encoded("1.5"), [70, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]);
        let huge = encoded("340282366920938463463374607431768211456"); // 2^128
        assert_eq!(huge[..3], [110, 17, 0]);
        assert_eq!(huge[3..19], [0; 16]);
        assert_eq!(huge[19], 1);
    }

    #[test]
    fn lists_of_small_integers_encode_as_strings_of_bytes() {
        assert_eq!(encoded("[1,2,255]"), [107, 0, 3, 1, 2, 255]);
        assert_eq!(encoded("[-0]"), [107, 0, 1, 0]);
        // Anything else in the list makes it a list of terms.
        assert_eq!(encoded("[256]"), [108, 0, 0, 0, 1, 98, 0, 0, 1, 0, 106]);
        assert_eq!(encoded("[-1]")[0], 108);
        assert_eq!(encoded("[1.0]")[0], 108);
        assert_eq!(encoded(r#"[1,"x"]"#)[0], 108);
        let long = format!("[{}]", vec!["7"; 65_536].join(","));
        assert_eq!(encoded(&long)[0], 108);
        let longest = format!("[{}]", vec!["7"; 65_535].join(","));
        assert_eq!(encoded(&longest)[..3], [107, 255, 255]);
        // As the reference CouchDB 3.5 answered for these bodies.
        for (json, rev) in [
            (r#"{"a":[1,2,3]}"#, "308048961a84beb0c9e99e07facf0f5f"),
            (r#"{"a":[0,255]}"#, "ebdd13a7ecf6387443aa094a0d18b4d6"),
            (r#"{"a":[256]}"#, "dae5a862c278c62f4314bcf887e53971"),
        ] {
            let id = new_rev_id(false, None, &EditTerm::new(&body(json)), &[]);
            assert_eq!(id.to_string(), rev, "{json}");
        }
    }

    #[test]
    fn containers_encode_as_ejson() {
        assert_eq!(encoded("[]"), [106]);
        assert_eq!(encoded("{}"), [104, 1, 106]);
        assert_eq!(
            encoded(r#"{"a":"b"}"#),
            [104, 1, 108, 0, 0, 0, 1, 104, 2, 109, 0, 0, 0, 1, b'a', 109, 0, 0, 0, 1, b'b', 106]
        );
    }

    proptest::proptest! {
        /// An integer's term is the same whether the short reader takes it or the general
        /// one does: signs, zeros, every length up to past `i64`, and texts it must decline.
        #[test]
        fn short_integers_encode_as_the_general_reader_encodes_them(
            text in "-?[0-9]{1,20}|\\+[0-9]{1,3}|-|[0-9]{1,3}x"
        ) {
            let mut fast = Vec::new();
            number_text(&mut fast, &text);
            let mut general = Vec::new();
            match text.parse::<i128>() {
                Ok(i) => integer(&mut general, i),
                Err(_) => bignum(&mut general, &text),
            }
            proptest::prop_assert_eq!(fast, general, "{}", text);
            if text.len() > 19 || !text.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit()) {
                proptest::prop_assert!(short_integer(text.as_bytes()).is_none());
            }
        }

        /// Ids worked out many at once, side by side, are each the id worked out alone, for
        /// batches of bodies of many lengths (messages of one to a dozen blocks, so lanes
        /// end at different blocks), new and edited, live and deleted.
        #[test]
        fn ids_worked_out_together_are_each_the_id_worked_out_alone(
            docs in proptest::collection::vec(
                (
                    proptest::collection::vec(("[a-z]{1,8}", "[ -~]{0,120}"), 0..6),
                    proptest::bool::ANY,
                    proptest::option::of((1u64..1_000_000, "[0-9a-f]{32}")),
                ),
                0..40,
            )
        ) {
            let docs: Vec<(EditTerm, bool, Option<Rev>)> = docs
                .into_iter()
                .map(|(members, deleted, parent)| {
                    let body: Map<String, Value> = members
                        .into_iter()
                        .map(|(k, v)| (k, Value::String(v)))
                        .collect();
                    let parent = parent.map(|(pos, id)| Rev::parse(&format!("{pos}-{id}")).unwrap());
                    (EditTerm::new(&body), deleted, parent)
                })
                .collect();
            let alone: Vec<RevId> = docs
                .iter()
                .map(|(term, deleted, parent)| new_rev_id(*deleted, parent.as_ref(), term, &[]))
                .collect();
            let mut together = docs.clone();
            let mut edits: Vec<_> = together
                .iter_mut()
                .map(|(term, deleted, parent)| (term, *deleted, parent.as_ref()))
                .collect();
            let ids = presume_many(&mut edits);
            proptest::prop_assert_eq!(&ids, &alone);
            // Each term keeps its id for what it was worked out for.
            for ((term, deleted, parent), id) in together.iter().zip(&alone) {
                proptest::prop_assert_eq!(term.presumed(*deleted, parent.as_ref(), &[]), Some(id));
            }
        }
    }
}
