//! Reading a `_bulk_docs` body into document edits. A large body is split into its
//! documents' texts first and the parts are parsed side by side on the background threads,
//! so a thousand-document request does not wait for one core to parse it all. Each plain
//! document is read straight from its text ([`NewDoc::from_text`]), the others through a
//! `Value`. Bodies that are small, nest deeply, are malformed or leave ids to the server are
//! read whole on one thread, which also gives every error exactly.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;
use settee_db::NewDoc;

use crate::error::{HttpError, HttpResult};
use crate::server::State;

/// Bodies smaller than this are read whole on one thread: splitting costs more than it saves.
const SPLIT_FROM: usize = 32 << 10;
/// Deepest nesting parsed in parts (within serde_json's own recursion limit, so no guarded
/// stack is needed); deeper bodies are read whole by [`settee_json::deep`].
const SHALLOW: usize = 64;
/// Fewest documents in a part.
const MIN_PART: usize = 64;

/// The documents, `new_edits` and `all_or_nothing` of a `_bulk_docs` body.
pub type BulkBody = (Vec<NewDoc>, bool, bool);

/// Reads a `_bulk_docs` body off the event loop.
pub async fn parse(state: &Arc<State>, bytes: Bytes) -> HttpResult<BulkBody> {
    let failed = || HttpError::new(500, "unknown_error", "parsing the request failed");
    if bytes.len() >= SPLIT_FROM {
        let b = bytes.clone();
        let split = settee_node::run_in_background(move || split(&b))
            .await
            .ok_or_else(failed)?;
        if let Some(split) = split {
            if let Some(parsed) = in_parts(state, &bytes, split).await {
                return Ok(parsed);
            }
        }
    }
    let st = state.clone();
    settee_node::run_in_background(move || parse_whole(&st, &bytes))
        .await
        .ok_or_else(failed)?
}

/// Where each document's text is, and the body's flags.
struct Split {
    docs: Vec<Range<usize>>,
    new_edits: bool,
    atomic: bool,
}

/// A member's value as given, `null` included (an absent member is `None`).
#[derive(Default)]
struct Given(Option<Value>);

impl<'de> Deserialize<'de> for Given {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Given, D::Error> {
        Value::deserialize(d).map(|v| Given(Some(v)))
    }
}

/// The body's members, the documents left as text.
#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow)]
    docs: &'a RawValue,
    #[serde(default)]
    new_edits: Given,
    #[serde(default)]
    all_or_nothing: Given,
}

/// Splits a well-formed, shallow body into its documents' texts; `None` for anything else
/// (which [`parse_whole`] then reads, and refuses with the right reason).
fn split(bytes: &[u8]) -> Option<Split> {
    if settee_json::deep::depth(bytes) > SHALLOW {
        return None;
    }
    let top: Top = serde_json::from_slice(bytes).ok()?;
    let docs: Vec<&RawValue> = serde_json::from_str(top.docs.get()).ok()?;
    let new_edits = match top.new_edits.0 {
        None => true,
        Some(Value::Bool(b)) => b,
        Some(_) => return None,
    };
    let base = bytes.as_ptr() as usize;
    let docs = docs
        .iter()
        .map(|raw| {
            let at = raw.get().as_ptr() as usize - base;
            at..at + raw.get().len()
        })
        .collect();
    Some(Split {
        docs,
        new_edits,
        atomic: top.all_or_nothing.0 == Some(Value::Bool(true)),
    })
}

/// Parses the documents in parts on the background threads, in order; `None` when a
/// document is refused or has no id (the server's ids must be given out in the body's
/// order), to be read whole instead.
async fn in_parts(state: &Arc<State>, bytes: &Bytes, split: Split) -> Option<BulkBody> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let size = split.docs.len().div_ceil(threads).max(MIN_PART);
    let needs_id = Arc::new(AtomicBool::new(false));
    let parts: Vec<_> = split
        .docs
        .chunks(size)
        .map(|ranges| {
            let (st, b, flag) = (state.clone(), bytes.clone(), needs_id.clone());
            let ranges = ranges.to_vec();
            settee_node::start_in_background(move || {
                parse_part(&st, &b, &ranges, split.new_edits, &flag)
            })
        })
        .collect();
    let mut docs = Vec::with_capacity(split.docs.len());
    for part in parts {
        docs.extend(part.await??);
    }
    if needs_id.load(Ordering::Relaxed) {
        return None;
    }
    if !split.new_edits && docs.iter().any(|d| d.revs.is_empty()) {
        return None;
    }
    Some((docs, split.new_edits, split.atomic))
}

/// One part's documents; `None` at the first it refuses.
fn parse_part(
    state: &State,
    bytes: &[u8],
    ranges: &[Range<usize>],
    new_edits: bool,
    needs_id: &AtomicBool,
) -> Option<Vec<NewDoc>> {
    let new_id = || {
        needs_id.store(true, Ordering::Relaxed);
        String::from("0")
    };
    ranges
        .iter()
        .map(|r| {
            let text = &bytes[r.clone()];
            let doc = match NewDoc::from_text(text, &state.node.limits) {
                Some(doc) => doc,
                None => {
                    let value: Value = serde_json::from_slice(text).ok()?;
                    NewDoc::from_json(value, None, new_id, &state.node.limits).ok()?
                }
            };
            Some(presumed(doc, new_edits))
        })
        .collect()
}

/// A document of a body ready for the writer: a new edit's revision and record are worked
/// out here, on a parsing thread, rather than on the database's writer (`presume_rev`
/// leaves local documents alone).
fn presumed(mut doc: NewDoc, new_edits: bool) -> NewDoc {
    if new_edits {
        doc.presume_rev();
    }
    doc
}

/// Reads a `_bulk_docs` body: the documents, `new_edits` and `all_or_nothing`.
fn parse_whole(state: &State, bytes: &[u8]) -> HttpResult<BulkBody> {
    if bytes.is_empty() {
        return Err(HttpError::bad_request("Missing request body"));
    }
    let Value::Object(mut body) = crate::request::parse_json(bytes)? else {
        return Err(HttpError::bad_request("Request body must be a JSON object"));
    };
    let docs = match body.remove("docs") {
        Some(Value::Array(d)) => d,
        Some(_) => return Err(HttpError::bad_request("`docs` parameter must be an array.")),
        None => {
            return Err(HttpError::bad_request(
                "POST body must include `docs` parameter.",
            ))
        }
    };
    let new_edits = match body.get("new_edits") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(HttpError::bad_request(
                "`new_edits` parameter must be a boolean.",
            ))
        }
    };
    let parsed = docs
        .into_iter()
        .map(|d| {
            NewDoc::from_json(d, None, || state.node.new_uuid(), &state.node.limits)
                .map(|doc| presumed(doc, new_edits))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !new_edits && parsed.iter().any(|d| d.revs.is_empty()) {
        return Err(HttpError::bad_request(
            "When `new_edits: false`, the document needs `_rev` or `_revisions` specified",
        ));
    }
    Ok((
        parsed,
        new_edits,
        body.get("all_or_nothing") == Some(&Value::Bool(true)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_splits_into_its_documents_texts() {
        let body = br#" { "new_edits" : true, "docs" : [ {"_id":"a"} , {"b":[1,{"c":"]"}]} ,{}] , "x": 1}"#;
        let parts = split(body).expect("well formed");
        let texts: Vec<&[u8]> = parts.docs.iter().map(|r| &body[r.clone()]).collect();
        assert_eq!(
            texts,
            [&br#"{"_id":"a"}"#[..], br#"{"b":[1,{"c":"]"}]}"#, b"{}"]
        );
        assert!(parts.new_edits && !parts.atomic);
        let flags = split(br#"{"docs":[],"new_edits":false,"all_or_nothing":true}"#).unwrap();
        assert!(!flags.new_edits && flags.atomic && flags.docs.is_empty());
        // Everything else is read whole, which refuses it with the right reason.
        for refused in [
            &br#"{"docs":[{}],"new_edits":null}"#[..],
            br#"{"docs":{}}"#,
            br#"{"nodocs":[]}"#,
            br#"{"docs":[{}]"#,
            br#"[{"docs":[]}]"#,
            br#"{"docs":[],"docs":[]}"#,
            b"",
        ] {
            assert!(
                split(refused).is_none(),
                "{}",
                String::from_utf8_lossy(refused)
            );
        }
        let deep = format!(r#"{{"docs":[{}1{}]}}"#, "[".repeat(70), "]".repeat(70));
        assert!(split(deep.as_bytes()).is_none());
    }
}
