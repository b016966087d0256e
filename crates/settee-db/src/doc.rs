//! Documents as clients send them: validation of ids and `_`-members, and the split into
//! stored body and revision metadata.

use serde_json::{Map, Value};
use settee_json::{body, EditTerm, Rev, RevId};

use crate::att::{parse_attachments, AttPolicy, NewAtt};
use crate::error::{Error, Result};
use crate::record::FreshRecord;

/// Prefix of design document ids.
pub const DESIGN_PREFIX: &str = "_design/";
/// Prefix of local (non-replicated) document ids.
pub const LOCAL_PREFIX: &str = "_local/";

/// Members starting with `_` that a document may carry and that are kept in its body
/// (the replicator's bookkeeping).
const KEPT_SPECIAL: [&str; 5] = [
    "_replication_state",
    "_replication_state_time",
    "_replication_state_reason",
    "_replication_id",
    "_replication_stats",
];

/// Members accepted and ignored on input (they are produced on output).
const IGNORED_SPECIAL: [&str; 4] = [
    "_revs_info",
    "_local_seq",
    "_conflicts",
    "_deleted_conflicts",
];

/// Checks a document id by CouchDB's rules.
pub fn validate_id(id: &str) -> Result<()> {
    let bad = |reason: &str| Err(Error::IllegalDocId(reason.to_string()));
    if id.is_empty() {
        return bad("Document id must not be empty");
    }
    if id == "_design/" || id == "_local/" {
        return bad(&format!("Illegal document id `{id}`"));
    }
    if id.starts_with('_') && !id.starts_with(DESIGN_PREFIX) && !id.starts_with(LOCAL_PREFIX) {
        return bad("Only reserved document ids may start with underscore.");
    }
    Ok(())
}

/// The partition a document id names in a partitioned database: what comes before its
/// first colon. Design and local documents belong to no partition.
pub fn partition_of(id: &str) -> Option<&str> {
    if id.starts_with(DESIGN_PREFIX) || is_local(id) {
        return None;
    }
    id.split_once(':').map(|(p, _)| p)
}

/// Checks an id written to a partitioned database by CouchDB's rules: `partition:id` with a
/// valid partition and a valid id after the colon; design and local documents are exempt.
pub fn validate_partitioned_id(id: &str) -> Result<()> {
    if id.starts_with(DESIGN_PREFIX) || is_local(id) {
        return Ok(());
    }
    let Some((partition, rest)) = id.split_once(':') else {
        return Err(Error::IllegalDocId(
            "Doc id must be of form partition:id".into(),
        ));
    };
    validate_partition(partition)?;
    validate_id(rest)
}

/// Checks a partition name (of an id, or of a `/{db}/_partition/{p}` path) by CouchDB's
/// rules.
pub fn validate_partition(partition: &str) -> Result<()> {
    let bad = |reason: &str| Err(Error::IllegalPartition(reason.to_string()));
    if partition.is_empty() {
        return bad("Partition must not be empty");
    }
    if partition.starts_with('_') {
        return bad("Partition must not start with an underscore");
    }
    if partition.contains(':') {
        return bad("Partition must not contain a colon");
    }
    Ok(())
}

/// Whether an id names a local document.
pub fn is_local(id: &str) -> bool {
    id.starts_with(LOCAL_PREFIX)
}

/// A document edit as received, validated and ready to apply.
#[derive(Clone, Debug)]
pub struct NewDoc {
    /// The document id.
    pub id: String,
    /// The revision history the client gave, newest first: `_rev` alone, or the whole
    /// `_revisions` list. Empty for a new document.
    pub revs: Vec<Rev>,
    /// Whether this edit deletes the document.
    pub deleted: bool,
    /// The stored body: the document's own members as compact JSON.
    pub body: Vec<u8>,
    /// The revision-id term of this edit's body.
    pub edit: EditTerm,
    /// Its attachments (none when the body had no `_attachments`).
    pub atts: Vec<NewAtt>,
    /// The stored values it makes if its id has no record at all, worked out ahead
    /// ([`NewDoc::presume_rev`]); cleared by [`NewDoc::set_body`].
    pub(crate) fresh: Option<FreshRecord>,
}

/// The largest body a request may commit on its own thread (see [`crate::edit_queue`]).
const SMALL_BODY: usize = 64 << 10;

impl NewDoc {
    /// Whether committing this edit is quick: a body of at most 64 KiB and no attachment
    /// bytes to write with it.
    pub fn is_small(&self) -> bool {
        self.body.len() <= SMALL_BODY
            && self
                .atts
                .iter()
                .all(|a| !matches!(a.source, crate::att::AttSource::Data { .. }))
    }
}

/// Limits and policies applied while reading a document.
#[derive(Clone, Debug)]
pub struct DocLimits {
    /// Largest encoded body accepted (`[couchdb] max_document_size`).
    pub max_document_size: usize,
    /// How attachments are stored.
    pub atts: AttPolicy,
    /// Longest document id accepted, in bytes (`[couchdb] max_document_id_length`; none by
    /// default, as CouchDB's `infinity`).
    pub max_document_id_length: Option<usize>,
}

impl DocLimits {
    /// Checks an id a write would create by CouchDB's rules and length limit.
    pub fn check_id(&self, id: &str) -> Result<()> {
        validate_id(id)?;
        match self.max_document_id_length {
            Some(max) if max > 0 && id.len() > max => {
                Err(Error::IllegalDocId("Document id is too long".into()))
            }
            _ => Ok(()),
        }
    }
}

impl Default for DocLimits {
    fn default() -> DocLimits {
        DocLimits {
            max_document_size: 8_000_000,
            atts: AttPolicy::default(),
            max_document_id_length: None,
        }
    }
}

impl NewDoc {
    /// Reads a document from JSON. `url_id` (from the request path) wins over a body `_id`;
    /// without either, `new_id` supplies one.
    pub fn from_json(
        value: Value,
        url_id: Option<&str>,
        new_id: impl FnOnce() -> String,
        limits: &DocLimits,
    ) -> Result<NewDoc> {
        NewDoc::from_json_parts(value, url_id, new_id, limits, Vec::new())
    }

    /// Like [`NewDoc::from_json`], with the attachment parts of a `multipart/related`
    /// upload for the `"follows": true` entries, in order.
    pub fn from_json_parts(
        value: Value,
        url_id: Option<&str>,
        new_id: impl FnOnce() -> String,
        limits: &DocLimits,
        parts: Vec<crate::att::AttSource>,
    ) -> Result<NewDoc> {
        let Value::Object(map) = value else {
            return Err(Error::BadRequest("Document must be a JSON object".into()));
        };
        let mut id = None;
        let mut rev = None;
        let mut revisions = None;
        let mut deleted = false;
        let mut atts = None;
        // The body's members in order (the map has no key twice), encoded from here.
        let mut body: Vec<(String, Value)> = Vec::with_capacity(map.len());
        for (key, value) in map {
            if !key.starts_with('_') || KEPT_SPECIAL.contains(&key.as_str()) {
                body.push((key, value));
                continue;
            }
            match (key.as_str(), value) {
                ("_id", Value::String(s)) => id = Some(s),
                ("_id", _) => {
                    return Err(Error::IllegalDocId("Document id must be a string".into()))
                }
                ("_rev", v) => rev = Some(v),
                ("_revisions", v) => revisions = Some(v),
                ("_deleted", Value::Bool(b)) => deleted = b,
                ("_attachments", v) => atts = Some(v),
                (k, _) if IGNORED_SPECIAL.contains(&k) => {}
                (k, _) => {
                    return Err(Error::DocValidation(format!(
                        "Bad special document member: {k}"
                    )))
                }
            }
        }
        if let Some(body_id) = &id {
            limits.check_id(body_id)?;
        }
        let id = match url_id {
            Some(u) => u.to_string(),
            None => id.unwrap_or_else(new_id),
        };
        limits.check_id(&id)?;
        let revs = match revisions {
            // A local document's revision is a counter: CouchDB reads the first id alone.
            Some(r) if is_local(&id) => parse_revisions_leniently(r)?,
            Some(r) => parse_revisions(r)?,
            None => match rev {
                Some(Value::String(s)) => vec![Rev::parse(&s).map_err(bad_rev)?],
                None => Vec::new(),
                // `null` included, as CouchDB reads it.
                Some(_) => return Err(Error::BadRequest("Invalid rev format".into())),
            },
        };
        let members = || body.iter().map(|(k, v)| (k.as_str(), v));
        let encoded = settee_json::body::encode_members(members());
        if encoded.len() > limits.max_document_size {
            return Err(Error::DocumentTooLarge(id));
        }
        let edit = EditTerm::from_members(members(), encoded.len());
        // Dropped without recursion: a body may nest deeply (see settee_json::deep).
        for (_, value) in body {
            settee_json::deep::dispose(value);
        }
        let atts = match atts {
            Some(v) => parse_attachments(v, &limits.atts, &mut parts.into_iter())?,
            None => Vec::new(),
        };
        Ok(NewDoc {
            id,
            revs,
            deleted,
            body: encoded,
            edit,
            atts,
            fresh: None,
        })
    }
}

impl NewDoc {
    /// Reads a plain document's JSON text in one pass, without a `Value` in between (see
    /// [`settee_json::transcode`]): one that names its `_id`, at most `_rev` and `_deleted`
    /// besides, and is valid. `None` for every other text, which [`NewDoc::from_json`] then
    /// reads (and refuses with the right error where it must); what both read, they read
    /// alike.
    pub fn from_text(text: &[u8], limits: &DocLimits) -> Option<NewDoc> {
        NewDoc::from_text_at(text, None, limits)
    }

    /// [`NewDoc::from_text`] for a document the request's path names, as a `PUT` does:
    /// `url_id` wins over the text's `_id`, which must still be valid, as
    /// [`NewDoc::from_json`] reads them; with `url_id`, the text need not name an `_id`.
    pub fn from_text_at(text: &[u8], url_id: Option<&str>, limits: &DocLimits) -> Option<NewDoc> {
        let doc = settee_json::transcode::transcode(text)?;
        if let Some(body_id) = &doc.id {
            limits.check_id(body_id).ok()?;
        }
        let id = match url_id {
            Some(u) => u.to_string(),
            None => doc.id?,
        };
        limits.check_id(&id).ok()?;
        if doc.body.len() > limits.max_document_size {
            return None;
        }
        let revs = match doc.rev {
            Some(rev) => vec![Rev::parse(&rev).ok()?],
            None => Vec::new(),
        };
        Some(NewDoc {
            id,
            revs,
            deleted: doc.deleted,
            body: doc.body,
            edit: EditTerm::from_transcoded(doc.term),
            atts: Vec::new(),
            fresh: None,
        })
    }

    /// Replaces the body (as a layer above rewrites it before saving, e.g. hashing a user's
    /// password); the revision term follows the new body.
    pub fn set_body(&mut self, body: &Map<String, Value>) {
        self.body = body::encode(body);
        self.edit = EditTerm::new(body);
        self.fresh = None;
    }

    /// Works out this edit's revision id ahead, for the parent the client named (none for
    /// a new document), if it has no attachments and is not a `_local` document. For an
    /// edit that also names no parent and has a body kept inline (at most 768 bytes), it
    /// works out the values the edit stores if its id has no record at all. For
    /// interactive edits, called off the database writer's thread, which then need not
    /// hash or encode them. The writer still does what fits what it finds: another parent
    /// when a deleted document is made again, an edit of the record when one exists.
    /// Change the body afterwards only with [`NewDoc::set_body`].
    pub fn presume_rev(&mut self) {
        if self.takes_presumed() {
            let id = self.edit.presume(self.deleted, self.revs.first());
            self.keep_fresh(id);
        }
    }

    /// [`NewDoc::presume_rev`] for many edits at once, their revision ids hashed side by
    /// side (see [`settee_json::presume_many`]).
    pub fn presume_revs(docs: &mut [NewDoc]) {
        let mut ahead: Vec<&mut NewDoc> = docs.iter_mut().filter(|d| d.takes_presumed()).collect();
        let mut edits: Vec<_> = ahead
            .iter_mut()
            .map(|d| {
                let NewDoc {
                    edit,
                    deleted,
                    revs,
                    ..
                } = &mut **d;
                (edit, *deleted, revs.first())
            })
            .collect();
        let ids = settee_json::presume_many(&mut edits);
        drop(edits);
        for (doc, id) in ahead.into_iter().zip(ids) {
            doc.keep_fresh(id);
        }
    }

    /// Whether this edit's revision may be worked out ahead: no attachments, not local.
    fn takes_presumed(&self) -> bool {
        self.atts.is_empty() && !is_local(&self.id)
    }

    /// Keeps the values a new document with revision id `id` stores, if it names no parent
    /// and its body is kept inline.
    fn keep_fresh(&mut self, id: RevId) {
        self.fresh = (self.revs.is_empty() && self.body.len() <= crate::shard::INLINE_MAX)
            .then(|| FreshRecord::new(&self.id, id, self.deleted, &self.body));
    }

    /// Whether the values of a new document were worked out ahead (see
    /// [`NewDoc::presume_rev`]).
    pub fn worked_out_ahead(&self) -> bool {
        self.fresh.is_some()
    }

    /// An edit made from a stored revision: its body unchanged (`body` as stored), with the
    /// attachments given (stubs for those kept). Used by the standalone attachment endpoints.
    pub fn from_stored(
        id: &str,
        parent: Option<Rev>,
        body: Vec<u8>,
        atts: Vec<NewAtt>,
    ) -> Result<NewDoc> {
        let map: Map<String, Value> =
            settee_json::deep::from_slice(&body).map_err(|_| Error::Corrupted("stored body"))?;
        Ok(NewDoc {
            id: id.to_string(),
            revs: parent.into_iter().collect(),
            deleted: false,
            edit: EditTerm::new(&map),
            body,
            atts,
            fresh: None,
        })
    }
}

fn bad_rev(_: settee_json::Error) -> Error {
    Error::BadRequest("Invalid rev format".into())
}

/// Reads `_revisions` as CouchDB does, without relating `start` to the ids (a local
/// document's `{"start": 0, "ids": ["1"]}`, as CouchDB's replicator writes its checkpoints):
/// only the newest id, at `start`.
fn parse_revisions_leniently(v: Value) -> Result<Vec<Rev>> {
    let invalid = |m: &str| Error::DocValidation(m.to_string());
    let Value::Object(obj) = v else {
        return Err(invalid("Bad special document member: _revisions"));
    };
    let start = obj
        .get("start")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("_revisions.start isn't an integer."))?;
    let Some(Value::Array(ids)) = obj.get("ids") else {
        return Err(invalid("_revisions.ids isn't a array."));
    };
    let Some(first) = ids.first() else {
        return Ok(Vec::new());
    };
    let s = first
        .as_str()
        .ok_or_else(|| invalid("RevId isn't a string"))?;
    Ok(vec![Rev {
        pos: start,
        id: RevId::parse(s).map_err(|_| invalid("RevId isn't a valid hexadecimal"))?,
    }])
}

/// Reads `_revisions: {"start": N, "ids": [...]}` into revisions, newest first.
fn parse_revisions(v: Value) -> Result<Vec<Rev>> {
    let invalid = |m: &str| Error::DocValidation(m.to_string());
    let Value::Object(obj) = v else {
        return Err(invalid("Bad special document member: _revisions"));
    };
    let start = obj
        .get("start")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("_revisions.start isn't an integer."))?;
    let Some(Value::Array(ids)) = obj.get("ids") else {
        return Err(invalid("_revisions.ids isn't a array."));
    };
    if ids.len() as u64 > start {
        return Err(invalid(
            "_revisions.start is smaller than the number of ids.",
        ));
    }
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            let s = id.as_str().ok_or_else(|| invalid("RevId isn't a string"))?;
            let id = RevId::parse(s).map_err(|_| invalid("RevId isn't a valid hexadecimal"))?;
            Ok(Rev {
                pos: start - i as u64,
                id,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<NewDoc> {
        NewDoc::from_json(v, None, || "generated".into(), &DocLimits::default())
    }

    #[test]
    fn splits_metadata_from_body() {
        let d =
            parse(json!({"_id": "a", "x": 1, "_rev": "1-abc", "_conflicts": [], "y": {"z": null}}))
                .unwrap();
        assert_eq!(d.id, "a");
        assert_eq!(d.revs, vec![Rev::parse("1-abc").unwrap()]);
        assert_eq!(d.body, br#"{"x":1,"y":{"z":null}}"#);
        assert_eq!(parse(json!({})).unwrap().id, "generated");
    }

    #[test]
    fn only_small_bodies_without_attachment_bytes_are_small() {
        assert!(parse(json!({"x": 1})).unwrap().is_small());
        assert!(!parse(json!({"x": "y".repeat(SMALL_BODY)}))
            .unwrap()
            .is_small());
        let stub = json!({"_attachments": {"a.txt": {"stub": true, "content_type": "text/plain", "length": 1, "digest": "md5-x"}}});
        assert!(parse(stub).unwrap().is_small(), "a stub writes no bytes");
        let data =
            json!({"_attachments": {"a.txt": {"content_type": "text/plain", "data": "aGk="}}});
        assert!(!parse(data).unwrap().is_small());
    }

    /// A body rewritten after its revision id was worked out ahead (as `_users` does with
    /// passwords) gets the id of the body it has.
    #[test]
    fn a_rewritten_body_drops_the_revision_worked_out_ahead() {
        let mut d = parse(json!({"_id": "org.couchdb.user:ann", "password": "secret"})).unwrap();
        d.presume_rev();
        let hashed: Map<String, Value> =
            serde_json::from_value(json!({"derived_key": "abc", "salt": "def"})).unwrap();
        d.set_body(&hashed);
        let fresh = EditTerm::new(&hashed);
        assert_eq!(
            settee_json::new_rev_id(false, None, &d.edit, &[]),
            settee_json::new_rev_id(false, None, &fresh, &[])
        );
        let mut first =
            parse(json!({"_id": "org.couchdb.user:ann", "password": "secret"})).unwrap();
        first.presume_rev();
        assert_ne!(
            settee_json::new_rev_id(false, None, &d.edit, &[]),
            settee_json::new_rev_id(false, None, &first.edit, &[])
        );
    }

    #[test]
    fn revisions_win_over_rev() {
        let d = parse(json!({"_rev": "9-x", "_revisions": {"start": 3, "ids": ["c", "b", "a"]}}))
            .unwrap();
        let revs: Vec<String> = d.revs.iter().map(ToString::to_string).collect();
        assert_eq!(revs, ["3-c", "2-b", "1-a"]);
    }

    #[test]
    fn refuses_what_couchdb_refuses() {
        let reason = |v: Value| parse(v).unwrap_err().to_string();
        assert_eq!(reason(json!([1])), "Document must be a JSON object");
        assert_eq!(
            reason(json!({"_foo": 1})),
            "Bad special document member: _foo"
        );
        assert_eq!(
            reason(json!({"_deleted": "yes"})),
            "Bad special document member: _deleted"
        );
        assert_eq!(
            reason(json!({"_id": "_bad"})),
            "Only reserved document ids may start with underscore."
        );
        assert_eq!(reason(json!({"_id": ""})), "Document id must not be empty");
        assert_eq!(reason(json!({"_id": 5})), "Document id must be a string");
        assert_eq!(reason(json!({"_rev": "x"})), "Invalid rev format");
        assert_eq!(
            reason(json!({"_revisions": {"start": "1", "ids": []}})),
            "_revisions.start isn't an integer."
        );
        let big = NewDoc::from_json(
            json!({"a": "0123456789"}),
            Some("d"),
            String::new,
            &DocLimits {
                max_document_size: 8,
                ..Default::default()
            },
        );
        assert!(matches!(big, Err(Error::DocumentTooLarge(id)) if id == "d"));
    }

    #[test]
    fn url_id_wins_but_body_id_is_still_checked() {
        let d = NewDoc::from_json(
            json!({"_id": "b"}),
            Some("a"),
            String::new,
            &DocLimits::default(),
        )
        .unwrap();
        assert_eq!(d.id, "a");
        assert!(NewDoc::from_json(
            json!({"_id": "_x"}),
            Some("a"),
            String::new,
            &DocLimits::default()
        )
        .is_err());
    }

    #[test]
    fn a_text_read_for_a_path_id_reads_as_its_json_does() {
        let limits = DocLimits::default();
        let texts = [
            r#"{"x":1,"y":[true,null,"s"]}"#,
            r#"{"_id":"b","x":{"z":2.5}}"#,
            r#"{"x":1,"_rev":"1-abc","_deleted":true}"#,
            r#"{"_id":"a","n":-3}"#,
        ];
        for text in texts {
            for url_id in ["a", "_design/d", "_local/l"] {
                let fast = NewDoc::from_text_at(text.as_bytes(), Some(url_id), &limits)
                    .unwrap_or_else(|| panic!("declined {text}"));
                let value = serde_json::from_str(text).unwrap();
                let general = NewDoc::from_json(value, Some(url_id), String::new, &limits);
                assert_eq!(
                    format!("{fast:?}"),
                    format!("{:?}", general.unwrap()),
                    "{text}"
                );
            }
        }
        // What the general path refuses is declined here, and left to it.
        for text in [
            r#"{"_id":"_x"}"#,
            r#"{"_rev":"bad"}"#,
            r#"{"_id":1}"#,
            "[1]",
        ] {
            assert!(NewDoc::from_text_at(text.as_bytes(), Some("a"), &limits).is_none());
        }
        // Without a path id, the text must name one.
        assert!(NewDoc::from_text_at(br#"{"x":1}"#, None, &limits).is_none());
        assert_eq!(
            NewDoc::from_text_at(br#"{"_id":"b"}"#, None, &limits)
                .unwrap()
                .id,
            "b"
        );
    }
}
