//! Reading a `_bulk_docs` body into document edits. A large body is split into its
//! documents' texts first and the parts are parsed side by side on the background threads,
//! so a thousand-document request does not wait for one core to parse it all. Each plain
//! document is read straight from its text ([`NewDoc::from_text`]), the others through a
//! `Value`. Bodies that are small, nest deeply, are malformed or leave ids to the server are
//! read whole on one thread, which also gives every error exactly.

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use serde::de::IgnoredAny;
use serde_json::Value;
use settee_db::NewDoc;
use settee_json::outline;

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
        let (st, b) = (state.clone(), bytes.clone());
        let started = settee_node::run_in_background(move || in_parts(&st, &b))
            .await
            .ok_or_else(failed)?;
        if let Some(parts) = started {
            if let Some(parsed) = parts.finish().await {
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

/// Splits a well-formed, shallow body into its documents' texts (see
/// [`settee_json::outline`]); `None` for anything else, which [`parse_whole`] then reads
/// and refuses with the right reason. Every range it gives, and every member it does not
/// read itself, is parsed before the body is taken, so a body it splits is one a whole
/// read would take too.
fn split(bytes: &[u8]) -> Option<Split> {
    let members = outline::object(bytes, SHALLOW)?;
    let (mut docs, mut new_edits, mut atomic) = (None, None, None);
    for m in members {
        let value = &bytes[m.value.clone()];
        // A key written with escapes may name a member twice, which a whole read settles.
        let key = &bytes[m.key.clone()];
        if key.contains(&b'\\') {
            return None;
        }
        if m.is(bytes, "docs") {
            first(&mut docs, m.items?)?;
        } else if m.is(bytes, "new_edits") {
            let flag = match value {
                b"true" => true,
                b"false" => false,
                _ => return None,
            };
            first(&mut new_edits, flag)?;
        } else if m.is(bytes, "all_or_nothing") {
            let flag = serde_json::from_slice::<Value>(value).ok()? == Value::Bool(true);
            first(&mut atomic, flag)?;
        } else {
            serde_json::from_slice::<String>(key).ok()?;
            serde_json::from_slice::<IgnoredAny>(value).ok()?;
        }
    }
    Some(Split {
        docs: docs?,
        new_edits: new_edits.unwrap_or(true),
        atomic: atomic.unwrap_or(false),
    })
}

/// Fills `slot` with a member's value; `None` if the member came before (a body that names
/// one twice is read whole, which settles it).
fn first<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    slot.is_none().then(|| *slot = Some(value))
}

/// A part's documents, parsed on another background thread.
type PartParsed = Pin<Box<dyn Future<Output = Option<Option<Vec<NewDoc>>>> + Send>>;

/// A split body being parsed: the first part's documents, the others still coming.
struct Parts {
    first: Option<Vec<NewDoc>>,
    rest: Vec<PartParsed>,
    split: Split,
    needs_id: Arc<AtomicBool>,
}

/// Splits the body and parses it in parts on the background threads, in order: this thread
/// hands the later parts to the others, then parses the first itself. `None` if the body
/// does not split.
fn in_parts(state: &Arc<State>, bytes: &Bytes) -> Option<Parts> {
    let split = split(bytes)?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let size = split.docs.len().div_ceil(threads).max(MIN_PART);
    let needs_id = Arc::new(AtomicBool::new(false));
    let mut chunks = split.docs.chunks(size);
    let head = chunks.next().unwrap_or_default();
    let rest = chunks
        .map(|ranges| {
            let (st, b, flag) = (state.clone(), bytes.clone(), needs_id.clone());
            let ranges = ranges.to_vec();
            Box::pin(settee_node::start_in_background(move || {
                parse_part(&st, &b, &ranges, split.new_edits, &flag)
            })) as PartParsed
        })
        .collect();
    let first = parse_part(state, bytes, head, split.new_edits, &needs_id);
    Some(Parts {
        first,
        rest,
        split,
        needs_id,
    })
}

impl Parts {
    /// Every part's documents, in order; `None` when a document is refused or has no id
    /// (the server's ids must be given out in the body's order), to be read whole instead.
    async fn finish(self) -> Option<BulkBody> {
        let mut docs = Vec::with_capacity(self.split.docs.len());
        docs.extend(self.first?);
        for part in self.rest {
            docs.extend(part.await??);
        }
        if self.needs_id.load(Ordering::Relaxed) {
            return None;
        }
        let new_edits = self.split.new_edits;
        if !new_edits && docs.iter().any(|d| d.revs.is_empty()) {
            return None;
        }
        Some((docs, new_edits, self.split.atomic))
    }
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
    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::value::RawValue;

    /// A body as a whole read of it finds it: the documents' texts and the two flags.
    #[derive(Deserialize)]
    struct Whole<'a> {
        #[serde(borrow)]
        docs: Vec<&'a RawValue>,
        new_edits: Option<bool>,
        all_or_nothing: Option<Value>,
    }

    /// Members a body may have, some of them broken, in any order.
    fn member() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(r#""new_edits":false"#.to_string()),
            Just(r#""new_edits" : true"#.to_string()),
            Just(r#""new_edits":"no""#.to_string()),
            Just(r#""all_or_nothing":true"#.to_string()),
            Just(r#""all_or_nothing":[1,{"a":"}"}]"#.to_string()),
            Just(r#""d\u006fcs":[]"#.to_string()),
            Just(r#""x":{"docs":[1]}"#.to_string()),
            Just(r#""y":[tru]"#.to_string()),
            Just("\"z\n\":1".to_string()),
            prop::collection::vec(doc(), 0..4)
                .prop_map(|d| format!(r#""docs": [{}]"#, d.join(" , "))),
        ]
    }

    fn doc() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z]{1,4}".prop_map(|id| format!(r#"{{"_id":"{id}","n":[1,{{"s":"]\\"}}]}}"#)),
            Just(r#"{"_id":"q","_rev":"1-abc"}"#.to_string()),
            Just("{}".to_string()),
            Just("{\"a\":1}}".to_string()),
            Just("nul".to_string()),
            Just("[]".to_string()),
        ]
    }

    proptest! {
        /// A body split in parts reads as a whole read finds it: the same documents' texts
        /// and flags; a body the whole read refuses is either not split or has a document
        /// text that does not parse (and is then read whole, with its error).
        #[test]
        fn a_split_body_is_what_a_whole_read_finds(
            members in prop::collection::vec(member(), 0..4),
            cut in prop::option::of(any::<prop::sample::Index>()),
        ) {
            let mut body = format!("{{{}}}", members.join(",")).into_bytes();
            if let Some(cut) = cut {
                body.truncate(cut.index(body.len()));
            }
            let whole = serde_json::from_slice::<Whole>(&body);
            let Some(split) = split(&body) else { return Ok(()) };
            let texts: Vec<&[u8]> = split.docs.iter().map(|r| &body[r.clone()]).collect();
            match whole {
                Ok(w) => {
                    let want: Vec<&[u8]> = w.docs.iter().map(|r| r.get().as_bytes()).collect();
                    prop_assert_eq!(texts, want);
                    prop_assert_eq!(split.new_edits, w.new_edits.unwrap_or(true));
                    prop_assert_eq!(split.atomic, w.all_or_nothing == Some(Value::Bool(true)));
                }
                Err(_) => prop_assert!(
                    texts.iter().any(|t| serde_json::from_slice::<Value>(t).is_err()),
                    "split a body a whole read refuses: {}",
                    String::from_utf8_lossy(&body)
                ),
            }
        }
    }

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
