//! Reading a `_bulk_docs` body into document edits. A large body is split into its
//! documents' texts first and the parts are parsed side by side on the background threads,
//! each taking the next part left until none is, so a thousand-document request does not wait
//! for one core to parse it all, nor for a thread that starts late. Each plain
//! document is read straight from its text ([`NewDoc::from_text`]), the others through a
//! `Value`. Bodies that are small, nest deeply, are malformed or leave ids to the server are
//! read whole on one thread, which also gives every error exactly.

use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde::de::IgnoredAny;
use serde_json::Value;
use settee_db::NewDoc;
use settee_json::outline;
use tokio::sync::oneshot::{self, error::RecvError};

use crate::error::{HttpError, HttpResult};
use crate::server::State;

/// Bodies smaller than this are read whole on one thread: splitting costs more than it saves.
const SPLIT_FROM: usize = 32 << 10;
/// Deepest nesting parsed in parts (within serde_json's own recursion limit, so no guarded
/// stack is needed); deeper bodies are read whole by [`settee_json::deep`].
const SHALLOW: usize = 64;
/// Fewest documents in a part.
const MIN_PART: usize = 64;
/// Parts of a body per background thread, so that threads that start late take fewer.
const PARTS_A_THREAD: usize = 4;

/// The documents, `new_edits` and `all_or_nothing` of a `_bulk_docs` body.
pub type BulkBody = (Vec<NewDoc>, bool, bool);

/// Reads a `_bulk_docs` body off the event loop.
pub async fn parse(state: &Arc<State>, bytes: Bytes) -> HttpResult<BulkBody> {
    if bytes.len() >= SPLIT_FROM {
        if let Ok(Some(parsed)) = in_parts(state, &bytes).await {
            return Ok(parsed);
        }
    }
    let st = state.clone();
    settee_node::run_in_background(move || parse_whole(&st, &bytes))
        .await
        .ok_or_else(|| HttpError::new(500, "unknown_error", "parsing the request failed"))?
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

/// A body being parsed in parts on the background threads. The parts are more than the
/// threads, and each thread takes the next part not yet taken until none is left, so a
/// thread that starts late (its CPU was busy) takes fewer parts rather than holding the
/// body up.
struct Parts {
    state: Arc<State>,
    bytes: Bytes,
    /// The body's split, by whichever thread comes first; `None` if it does not split.
    plan: OnceLock<Option<Plan>>,
    /// Where the documents go once the last part is parsed: `None` when the body is to be
    /// read whole instead.
    answer: Mutex<Option<oneshot::Sender<Option<BulkBody>>>>,
}

/// How a split body's parts are shared out, and what they hold so far.
struct Plan {
    split: Split,
    /// Documents in each part but perhaps the last.
    size: usize,
    /// The next part no thread has taken.
    next: AtomicUsize,
    /// Each part's documents once parsed; `None` until then, or if one was refused (or
    /// parsing panicked).
    parsed: Vec<Mutex<Option<Vec<NewDoc>>>>,
    /// How many parts are parsed; whoever parses the last answers.
    finished: AtomicUsize,
    /// A document has no id: the body is read whole, which gives out ids in order.
    needs_id: AtomicBool,
}

/// Parses a body in parts on the background threads. Every thread is woken here, on the
/// event loop, which then waits: a thread woken by another background thread would be queued
/// behind it on its CPU (which the system counts as idle) and start only once it is done.
/// `Err` if the parsing failed (a panic); `None` if the body is to be read whole.
async fn in_parts(state: &Arc<State>, bytes: &Bytes) -> Result<Option<BulkBody>, RecvError> {
    let (tx, rx) = oneshot::channel();
    let parts = Arc::new(Parts {
        state: state.clone(),
        bytes: bytes.clone(),
        plan: OnceLock::new(),
        answer: Mutex::new(Some(tx)),
    });
    let threads = settee_node::background_threads();
    for _ in 0..threads.min(bytes.len().div_ceil(SPLIT_FROM)) {
        let parts = parts.clone();
        // Not awaited: the request waits for its documents, not for every thread.
        drop(settee_node::start_in_background(move || parts.take_parts()));
    }
    drop(parts);
    rx.await
}

impl Plan {
    /// Cuts a split body into `PARTS_A_THREAD` parts for each of `threads` threads.
    fn new(split: Split, threads: usize) -> Plan {
        let size = split
            .docs
            .len()
            .div_ceil(threads * PARTS_A_THREAD)
            .max(MIN_PART);
        let count = split.docs.len().div_ceil(size);
        Plan {
            split,
            size,
            next: AtomicUsize::new(0),
            parsed: (0..count).map(|_| Mutex::new(None)).collect(),
            finished: AtomicUsize::new(0),
            needs_id: AtomicBool::new(false),
        }
    }

    /// Every part's documents, in order; `None` when a document is refused or has no id
    /// (the server's ids must be given out in the body's order), to be read whole instead.
    fn documents(&self) -> Option<BulkBody> {
        if self.needs_id.load(Ordering::Relaxed) {
            return None;
        }
        let mut docs = Vec::with_capacity(self.split.docs.len());
        for slot in &self.parsed {
            docs.extend(slot.lock().expect("part lock").take()?);
        }
        let new_edits = self.split.new_edits;
        if !new_edits && docs.iter().any(|d| d.revs.is_empty()) {
            return None;
        }
        Some((docs, new_edits, self.split.atomic))
    }
}

impl Parts {
    /// Splits the body if no thread has yet, then parses parts not yet taken until none is
    /// left.
    fn take_parts(&self) {
        let plan = self.plan.get_or_init(|| {
            split(&self.bytes).map(|s| Plan::new(s, settee_node::background_threads()))
        });
        let Some(plan) = plan else {
            return self.answer(None);
        };
        if plan.parsed.is_empty() {
            return self.answer(plan.documents());
        }
        loop {
            let k = plan.next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = plan.parsed.get(k) else {
                return;
            };
            let docs = &plan.split.docs;
            let ranges = &docs[k * plan.size..((k + 1) * plan.size).min(docs.len())];
            let parsed = std::panic::catch_unwind(AssertUnwindSafe(|| {
                let new_edits = plan.split.new_edits;
                parse_part(&self.state, &self.bytes, ranges, new_edits, &plan.needs_id)
            }));
            let Some(parsed) = parsed.ok().flatten() else {
                // The body is read whole instead: the parts not yet taken are not needed.
                plan.next.fetch_max(plan.parsed.len(), Ordering::Relaxed);
                return self.answer(None);
            };
            *slot.lock().expect("part lock") = Some(parsed);
            if plan.finished.fetch_add(1, Ordering::AcqRel) + 1 == plan.parsed.len() {
                return self.answer(plan.documents());
            }
        }
    }

    /// Hands the request its documents (the first answer counts).
    fn answer(&self, docs: Option<BulkBody>) {
        if let Some(tx) = self.answer.lock().expect("parts lock").take() {
            let _ = tx.send(docs);
        }
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
    // Sized once: a document is a few hundred bytes, and a growing vector would copy
    // them all again at each doubling.
    let mut docs = Vec::with_capacity(ranges.len());
    for r in ranges {
        let text = &bytes[r.clone()];
        docs.push(match NewDoc::from_text(text, &state.node.limits) {
            Some(doc) => doc,
            None => {
                let value: Value = serde_json::from_slice(text).ok()?;
                NewDoc::from_json(value, None, new_id, &state.node.limits).ok()?
            }
        });
    }
    Some(presumed(docs, new_edits))
}

/// Documents of a body ready for the writer: new edits' revisions and records are worked
/// out here, on a parsing thread, rather than on the database's writer, all at once
/// (`presume_revs` leaves local documents alone).
fn presumed(mut docs: Vec<NewDoc>, new_edits: bool) -> Vec<NewDoc> {
    if new_edits {
        NewDoc::presume_revs(&mut docs);
    }
    docs
}

/// Reads a `_bulk_docs` body: the documents, `new_edits` and `all_or_nothing`.
fn parse_whole(state: &State, bytes: &[u8]) -> HttpResult<BulkBody> {
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
        .map(|d| NewDoc::from_json(d, None, || state.node.new_uuid(), &state.node.limits))
        .collect::<Result<Vec<_>, _>>()?;
    let parsed = presumed(parsed, new_edits);
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
