//! Stored document bodies and how replies are assembled from them without parsing.
//!
//! A stored body is a compact JSON object holding the document's own fields, in the order
//! the client sent them, without the `_`-prefixed metadata. A reply is written as
//! `{"_id":…,"_rev":…` followed by the stored members and any metadata members, so reading a
//! document never parses its JSON.

use serde_json::{Map, Value};

/// Encodes a body map as compact JSON (at any depth: see [`crate::deep`]).
pub fn encode(body: &Map<String, Value>) -> Vec<u8> {
    encode_members(body.iter().map(|(k, v)| (k.as_str(), v)))
}

/// Like [`encode`], for members given one by one (in order, each key once), so a caller
/// that took a document apart need not build a map again to encode its body.
pub fn encode_members<'a>(members: impl Iterator<Item = (&'a str, &'a Value)>) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.push(b'{');
    for (i, (key, value)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(&mut out, key);
        out.push(b':');
        crate::deep::write(&mut out, value);
    }
    out.push(b'}');
    out
}

/// Appends `s` as a JSON string literal.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
}

/// Starts a document reply: `{"_id":…` and, if given, `"_rev":…`, then the members of the
/// stored `body`. Finish with [`member`] calls and [`end`].
pub fn begin(out: &mut Vec<u8>, id: &str, rev: Option<&str>, body: &[u8]) {
    out.extend_from_slice(b"{\"_id\":");
    write_str(out, id);
    if let Some(rev) = rev {
        out.extend_from_slice(b",\"_rev\":");
        write_str(out, rev);
    }
    let members = members(body);
    if !members.is_empty() {
        out.push(b',');
        out.extend_from_slice(members);
    }
}

/// Appends one more member whose value is already JSON text.
pub fn member(out: &mut Vec<u8>, key: &str, json: &[u8]) {
    out.push(b',');
    write_str(out, key);
    out.push(b':');
    out.extend_from_slice(json);
}

/// Closes a reply started with [`begin`].
pub fn end(out: &mut Vec<u8>) {
    out.push(b'}');
}

/// The text between a stored object's braces (empty for `{}`, or for anything that is not an
/// object, which a stored body never is).
pub fn members(body: &[u8]) -> &[u8] {
    match body {
        [b'{', inner @ .., b'}'] => trim(inner),
        _ => &[],
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !first.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !last.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(
        id: &str,
        rev: Option<&str>,
        body: &[u8],
        extra: &[(&str, &str)],
    ) -> serde_json::Value {
        let mut out = Vec::new();
        begin(&mut out, id, rev, body);
        for (k, v) in extra {
            member(&mut out, k, v.as_bytes());
        }
        end(&mut out);
        serde_json::from_slice(&out).expect("valid JSON")
    }

    #[test]
    fn splices_id_and_rev_in_front_of_stored_members() {
        let v = reply(
            "a\"b",
            Some("1-x"),
            br#"{"n":1,"s":"t"}"#,
            &[("_deleted", "true")],
        );
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["_id", "_rev", "n", "s", "_deleted"]);
        assert_eq!(v["_id"], "a\"b");
        assert_eq!(
            reply("x", None, b"{}", &[]),
            serde_json::json!({"_id": "x"})
        );
        assert_eq!(
            reply("x", None, b"{ }", &[]),
            serde_json::json!({"_id": "x"})
        );
    }

    #[test]
    fn encoding_keeps_member_order_and_numbers_as_written() {
        let map: Map<String, Value> =
            serde_json::from_str(r#"{"z": 1.50, "a": 12345678901234567890123}"#).unwrap();
        assert_eq!(encode(&map), br#"{"z":1.50,"a":12345678901234567890123}"#);
    }
}
