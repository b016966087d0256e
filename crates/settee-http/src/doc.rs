//! Document endpoints: `GET/HEAD/PUT/DELETE/COPY /{db}/{docid}` (including `_design/` and
//! `_local/` ids), `POST /{db}`, and form uploads (`POST /{db}/{docid}`, in `form`).

use std::sync::Arc;

use hyper::header::{ETAG, IF_MATCH, IF_NONE_MATCH, LOCATION};
use hyper::Method;
use serde_json::{json, Value};
use settee_db::{
    is_local, AttSource, Database, DbSnapshot, DocOptions, DocRecord, Durability, EditMode, NewDoc,
    Uploader,
};
use settee_json::{body, Rev};

use crate::db::open;
use crate::doc_query::DocQuery;
use crate::error::{HttpError, HttpResult};
use crate::multipart;
use crate::reply::{self, Response};
use crate::request::{push_url_encoded, Req};
use crate::server::State;

/// Dispatches on the method.
pub async fn handle(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    id: &str,
) -> HttpResult<Response> {
    match req.method {
        Method::GET | Method::HEAD => get(state, req, name, id),
        Method::PUT => put(state, req, name, id).await,
        Method::DELETE => delete(state, req, name, id).await,
        Method::POST => crate::form::post(state, req, name, id).await,
        _ if req.method.as_str() == "COPY" => copy(state, req, name, id).await,
        _ => Err(HttpError::method_not_allowed(
            "DELETE,GET,HEAD,POST,PUT,COPY",
        )),
    }
}

/// Parses a revision from a request, refusing bad ones with CouchDB's reason.
pub fn parse_rev(s: &str) -> HttpResult<Rev> {
    Rev::parse(s).map_err(|_| HttpError::bad_request("Invalid rev format"))
}

/// Parses a JSON list of revisions, refusing non-strings and bad revisions alike.
pub fn parse_revs(values: &[Value]) -> HttpResult<Vec<Rev>> {
    values
        .iter()
        .map(|r| {
            r.as_str()
                .ok_or_else(|| HttpError::bad_request("Invalid rev format"))
                .and_then(parse_rev)
        })
        .collect()
}

/// The revision named by `If-Match`, quotes stripped.
fn if_match(req: &Req) -> Option<String> {
    req.header(IF_MATCH).map(|v| {
        v.trim()
            .trim_start_matches("W/")
            .trim_matches('"')
            .to_string()
    })
}

/// The revision a write names by `?rev=` or `If-Match`, which must agree, as CouchDB reads
/// them for deletions and attachment writes.
pub fn named_rev(req: &Req) -> HttpResult<Option<String>> {
    match (req.query.get("rev").map(str::to_string), if_match(req)) {
        (Some(q), Some(h)) if q != h => Err(HttpError::bad_request(
            "Document rev and etag have different values",
        )),
        (q, h) => Ok(q.or(h)),
    }
}

/// The content type of a `multipart/related` request, if it is one.
fn multipart_related(req: &Req) -> Option<&str> {
    req.header("content-type")
        .filter(|ct| ct.starts_with("multipart/related"))
}

/// `GET`/`HEAD` of a document. As CouchDB: the winner's metadata (`_conflicts`,
/// `_deleted_conflicts`, `_revs_info`, `_local_seq`) only when the winner is read; an `ETag`
/// and a 304 for `If-None-Match` whenever the answer carries none of it.
pub fn get(state: &State, req: &Req, name: &str, id: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    let snap = db.snapshot();
    let q = DocQuery::parse(&req.query)?;
    if is_local(id) {
        return local_get(req, &snap, id, &q);
    }
    // In `_users` and `_replicator` what a caller who is not a database admin sees of a
    // document is filtered; only plain reads of the winner can be.
    let visibility = state.node.visibility(req.user.as_ref(), &db)?;
    let guarded = !visibility.is_whole();
    if let Some(open_revs) = &q.open_revs {
        visibility.check_read(false)?;
        return crate::openrevs::get(req, &db, id, open_revs, &q);
    }
    let rev = q.rev_to_open();
    let opts = match rev {
        None => q.opts.clone(),
        Some(_) => DocOptions {
            revs_info: false,
            conflicts: false,
            deleted_conflicts: false,
            local_seq: false,
            ..q.opts.clone()
        },
    };
    let history = opts.revs || opts.revs_info || opts.conflicts || opts.deleted_conflicts;
    let plain = !(history || opts.local_seq || opts.attachments);
    // A plain read of the current revision needs nothing of the history.
    let (record, i) = match rev {
        Some(r) => snap.resolve(id, Some(r))?,
        None => open_winner(&snap, id, !plain, q.deleted)?,
    };
    visibility.check_read(plain)?;
    // The ETag is the revision in quotes; the revision alone is the middle of it.
    let mut etag = String::with_capacity(48);
    etag.push('"');
    record.tree.nodes[i].rev.push_to(&mut etag);
    etag.push('"');
    let rev_text = &etag[1..etag.len() - 1];
    // A filtered document is filtered before any 304, which would tell what it hides.
    let visible = match guarded {
        false => None,
        true => Some(state.node.visible_doc(
            visibility,
            req.user.as_ref(),
            id,
            snap.render_as(id, &record, i, &opts, rev_text)?,
        )?),
    };
    let named = rev.is_some() || !shows_meta(&record, i, &opts);
    if named && if_none_match(req, &etag) {
        return Ok(reply::with_header(reply::empty(304), ETAG, &etag));
    }
    let resp = match visible {
        Some(body) => reply::json_bytes(200, body),
        None if opts.attachments
            && has_attachments(&record, i)
            && req.accepts("multipart/related") =>
        {
            multipart::related_reply(&snap, id, &record, i, &opts)?
        }
        None => reply::json_bytes(200, snap.render_as(id, &record, i, &opts, rev_text)?),
    };
    Ok(if named {
        reply::with_header(resp, ETAG, &etag)
    } else {
        resp
    })
}

/// The winning revision of `id`; a deleted one only when `deleted` asks for it. `whole`
/// decodes the whole revision tree, which reads that show history or conflicts need.
fn open_winner(
    snap: &DbSnapshot,
    id: &str,
    whole: bool,
    deleted: bool,
) -> HttpResult<(DocRecord, usize)> {
    let found = if whole {
        snap.resolve(id, None)
    } else {
        snap.resolve_winner(id)
    };
    match found {
        Err(settee_db::Error::NotFound("deleted")) if deleted => {
            let record = snap
                .record(id)?
                .ok_or_else(|| HttpError::not_found("missing"))?;
            let winner = record
                .tree
                .winner()
                .ok_or_else(|| HttpError::not_found("missing"))?;
            Ok((record, winner))
        }
        other => Ok(other?),
    }
}

/// Whether reading winner `i` with `opts` shows metadata (CouchDB's `meta`), which leaves
/// the answer without an `ETag`: revision information, the local sequence, or conflicts
/// that exist.
fn shows_meta(record: &DocRecord, i: usize, opts: &DocOptions) -> bool {
    let other_leaf = |deleted: bool| {
        record
            .tree
            .leaves()
            .into_iter()
            .any(|l| l != i && record.tree.nodes[l].deleted == deleted)
    };
    opts.revs_info
        || opts.local_seq
        || (opts.conflicts && other_leaf(false))
        || (opts.deleted_conflicts && other_leaf(true))
}

/// Whether node `i` has attachments, stubs included.
fn has_attachments(record: &DocRecord, i: usize) -> bool {
    record.tree.nodes[i]
        .info
        .as_ref()
        .is_some_and(|info| !info.atts.is_empty())
}

/// Whether `If-None-Match` names `etag` (a quoted value, weak or not, in a list or alone).
pub fn if_none_match(req: &Req, etag: &str) -> bool {
    req.header(IF_NONE_MATCH).is_some_and(|v| {
        v.split([',', ' '])
            .any(|t| t.trim_start_matches("W/") == etag)
    })
}

/// A local document: `_revisions` with `revs`, a `rev` that must be its own, and an `ETag`
/// naming its revision and body.
fn local_get(req: &Req, snap: &DbSnapshot, id: &str, q: &DocQuery) -> HttpResult<Response> {
    let (n, stored) = snap
        .local(id)?
        .ok_or_else(|| HttpError::not_found("missing"))?;
    let rev = format!("0-{n}");
    if q.rev_to_open().is_some_and(|r| r.to_string() != rev) {
        return Err(HttpError::not_found("missing"));
    }
    // Its revision is not enough for an ETag: a local document written anew after a
    // deletion starts its count again.
    let etag = local_etag(&rev, &stored);
    if if_none_match(req, &etag) {
        return Ok(reply::with_header(reply::empty(304), ETAG, &etag));
    }
    let revisions = q
        .opts
        .revs
        .then(|| json!({"start": 0, "ids": [n.to_string()]}));
    Ok(reply::with_header(
        reply::json_bytes(200, local_json(id, &rev, &stored, revisions.as_ref())),
        ETAG,
        &etag,
    ))
}

/// A local document's JSON: its id and revision spliced before its stored members, and
/// `_revisions` after them when given.
pub fn local_json(id: &str, rev: &str, stored: &[u8], revisions: Option<&Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(stored.len() + 48);
    body::begin(&mut out, id, Some(rev), stored);
    if let Some(revisions) = revisions {
        body::member(
            &mut out,
            "_revisions",
            &serde_json::to_vec(revisions).expect("json"),
        );
    }
    body::end(&mut out);
    out
}

/// A rendered document as a JSON value.
pub fn parse_doc(bytes: &[u8]) -> HttpResult<Value> {
    settee_json::deep::from_slice(bytes)
        .map_err(|_| HttpError::new(500, "unknown_error", "a stored document is not valid JSON"))
}

/// A local document's ETag: a hash of its revision and body, the same for the answer to
/// the write that made it and for later reads.
fn local_etag(rev: &str, stored: &[u8]) -> String {
    use md5::{Digest, Md5};
    reply::hashed_etag(
        Md5::new()
            .chain_update(rev.as_bytes())
            .chain_update([0])
            .chain_update(stored)
            .finalize()
            .into(),
    )
}

/// Edit mode and durability from `new_edits` and `batch`.
fn write_options(req: &Req) -> HttpResult<(EditMode, Durability)> {
    let mode = if req.query.bool("new_edits")? == Some(false) {
        EditMode::Replicated
    } else {
        EditMode::Interactive
    };
    let durability = if req.query.get("batch") == Some("ok") {
        Durability::Batch
    } else {
        Durability::Durable
    };
    Ok((mode, durability))
}

/// Reads a document body and reconciles its `_rev` with `?rev=` and `If-Match`.
async fn read_doc(
    state: &State,
    req: &mut Req,
    name: &str,
    id: Option<&str>,
) -> HttpResult<NewDoc> {
    let (mut value, parts) = match multipart_related(req).map(multipart::boundary) {
        Some(boundary) => {
            let boundary = boundary
                .ok_or_else(|| HttpError::bad_request("multipart/related needs a boundary"))?;
            read_multipart(state, req, name, &boundary, id).await?
        }
        None => {
            let limit = state.max_request.min(
                state
                    .node
                    .limits
                    .max_document_size
                    .saturating_mul(2)
                    .max(1 << 20),
            );
            let bytes = match req.json_bytes(limit).await {
                Err(e) if e.status == 413 => {
                    return Err(HttpError::new(
                        413,
                        "document_too_large",
                        id.unwrap_or("").to_string(),
                    ))
                }
                other => other?,
            };
            if let Some(doc) = plain_doc(state, req, &bytes, id) {
                return Ok(doc);
            }
            (crate::request::parse_json(&bytes)?, Vec::new())
        }
    };
    if let Value::Object(map) = &mut value {
        let body_rev = map.get("_rev").and_then(Value::as_str).map(str::to_string);
        let query_rev = req.query.get("rev").map(str::to_string);
        if let (Some(b), Some(q)) = (&body_rev, &query_rev) {
            if b != q {
                return Err(HttpError::bad_request(
                    "Document rev from request body and query string have different values",
                ));
            }
        }
        let rev = body_rev.or(query_rev);
        if let Some(etag) = if_match(req) {
            if rev.as_ref().is_some_and(|r| *r != etag) {
                return Err(HttpError::bad_request(
                    "Document rev and etag have different values",
                ));
            }
            map.insert("_rev".into(), Value::String(etag));
        } else if let Some(r) = rev {
            map.insert("_rev".into(), Value::String(r));
        }
    }
    Ok(NewDoc::from_json_parts(
        value,
        id,
        || state.node.new_uuid(),
        &state.node.limits,
        parts,
    )?)
}

/// A plain document's text read in one pass ([`NewDoc::from_text_at`]), when nothing but
/// the text names its revision: `None` leaves every other body, and every error, to the
/// general path, which reads what both read alike.
fn plain_doc(state: &State, req: &Req, text: &[u8], id: Option<&str>) -> Option<NewDoc> {
    if req.query.get("rev").is_some() || if_match(req).is_some() {
        return None;
    }
    NewDoc::from_text_at(text, id, &state.node.limits)
}

/// A `multipart/related` upload, streamed: the JSON document first, then each part named by
/// a `"follows": true` attachment entry goes straight into the document's shard.
async fn read_multipart(
    state: &State,
    req: &mut Req,
    name: &str,
    boundary: &str,
    id: Option<&str>,
) -> HttpResult<(Value, Vec<AttSource>)> {
    let body = req
        .body
        .take()
        .ok_or_else(|| HttpError::bad_request("Missing request body"))?;
    let started = std::time::Instant::now();
    let mut reader = multipart::Reader::new(body, boundary);
    reader
        .next_part()
        .await?
        .ok_or_else(|| HttpError::bad_request("Malformed multipart body"))?;
    let json = reader
        .read_part(
            state
                .node
                .limits
                .max_document_size
                .saturating_mul(2)
                .max(1 << 20),
        )
        .await?;
    let doc: Value = crate::request::parse_json(&json)?;
    // Each part's type, and its identity length if it arrives gzip-encoded (as CouchDB's
    // replicator sends what CouchDB stores compressed).
    let follows: Vec<(String, Option<u64>)> = doc
        .get("_attachments")
        .and_then(Value::as_object)
        .map(|atts| {
            atts.values()
                .filter(|a| a.get("follows") == Some(&Value::Bool(true)))
                .map(follows_part)
                .collect::<HttpResult<_>>()
        })
        .transpose()?
        .unwrap_or_default();
    let id = id
        .or_else(|| doc.get("_id").and_then(Value::as_str))
        .ok_or_else(|| HttpError::bad_request("A multipart document needs an id"))?
        .to_string();
    let db = crate::db::open(state, name)?;
    let mut sources = Vec::with_capacity(follows.len());
    for (content_type, gzipped) in follows {
        reader.next_part().await?.ok_or_else(|| {
            HttpError::bad_request("Malformed multipart body: an attachment part is missing")
        })?;
        let mut up = match gzipped {
            Some(length) => Uploader::gzipped(&db, &id, length, state.max_request as u64),
            None => Uploader::new(
                &db,
                &id,
                &content_type,
                &state.node.limits.atts,
                state.max_request as u64,
            ),
        };
        while let Some(bytes) = reader.chunk().await? {
            up.push(&bytes).await?;
        }
        sources.push(up.finish().await?);
    }
    req.body_time += started.elapsed();
    Ok((doc, sources))
}

/// A `"follows": true` entry's content type, and the identity length it gives if its part
/// is gzip-encoded (which it must give).
fn follows_part(entry: &Value) -> HttpResult<(String, Option<u64>)> {
    let content_type = entry
        .get("content_type")
        .and_then(Value::as_str)
        .unwrap_or("application/octet-stream")
        .to_string();
    match entry.get("encoding").and_then(Value::as_str) {
        None | Some("identity") => Ok((content_type, None)),
        Some("gzip") => match entry.get("length").and_then(Value::as_u64) {
            Some(length) => Ok((content_type, Some(length))),
            None => Err(HttpError::bad_request(
                "A gzip-encoded attachment needs its `length`",
            )),
        },
        Some(other) => Err(HttpError::bad_request(format!(
            "Unsupported attachment encoding: {other}"
        ))),
    }
}

/// Which single-document write answers: each has its own status and headers in CouchDB.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Put,
    Post,
    Delete,
    Copy,
    /// A form upload: an `ETag` and no `Location`, as CouchDB answers it.
    Form,
}

impl Answer {
    /// 200 for a deletion, 201 otherwise.
    fn status(self, deleted: bool) -> u16 {
        if self == Answer::Delete || deleted {
            200
        } else {
            201
        }
    }
}

/// Applies one edit and answers as CouchDB does for a single-document write. A `batch=ok`
/// write is answered 202 whatever becomes of it, as CouchDB answers before trying it: a
/// refusal or a conflict is only logged.
pub(crate) async fn write_one(
    state: &Arc<State>,
    req: &Req,
    db: &Arc<Database>,
    doc: NewDoc,
    mode: EditMode,
    durability: Durability,
    answer: Answer,
) -> HttpResult<Response> {
    let id = doc.id.clone();
    if mode == EditMode::Replicated && doc.revs.is_empty() {
        return Err(HttpError::bad_request(
            "When `new_edits: false`, the document needs `_rev` or `_revisions` specified",
        ));
    }
    let local_body = is_local(&id).then(|| doc.body.clone());
    let saved = save_one(state, req, db, doc, mode, durability).await;
    if durability == Durability::Batch {
        if let Err(e) = saved {
            tracing::info!(db = db.name(), id = %id, error = %e.error, reason = %e.reason, "a batch=ok write was not saved");
        }
        return Ok(reply::json(202, &json!({"ok": true, "id": id})));
    }
    let (rev, deleted) = saved?;
    let mut body = Vec::with_capacity(id.len() + 80);
    reply::push_saved(&mut body, &id, &rev);
    let mut resp = reply::json_bytes(answer.status(deleted), body);
    if answer != Answer::Post {
        let etag = match &local_body {
            Some(body) => local_etag(&rev.to_string(), body),
            None => {
                let mut tag = String::with_capacity(48);
                tag.push('"');
                rev.push_to(&mut tag);
                tag.push('"');
                tag
            }
        };
        resp = reply::with_header(resp, ETAG, &etag);
    }
    if !matches!(answer, Answer::Delete | Answer::Form) {
        let mut path = String::with_capacity(db.name().len() + id.len() + 2);
        for segment in [db.name(), &id] {
            path.push('/');
            push_url_encoded(&mut path, segment);
        }
        resp = reply::with_header(
            resp,
            LOCATION,
            &crate::node::absolute_uri(state, req, &path),
        );
    }
    Ok(resp)
}

/// Checks and saves one edit: its new revision and whether it deletes.
async fn save_one(
    state: &Arc<State>,
    req: &Req,
    db: &Arc<Database>,
    mut doc: NewDoc,
    mode: EditMode,
    durability: Durability,
) -> HttpResult<(Rev, bool)> {
    if mode == EditMode::Interactive {
        doc.presume_rev();
    }
    let deleted = doc.deleted;
    let rev = (state.node)
        .update_doc(req.user.as_ref(), db, doc, mode, durability)
        .await?;
    Ok((rev, deleted))
}

async fn put(state: &Arc<State>, req: &mut Req, name: &str, id: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    let (mode, mut durability) = write_options(req)?;
    // As CouchDB: a multipart upload is written durably and answered with its revision,
    // `batch=ok` or not.
    if multipart_related(req).is_some() {
        durability = Durability::Durable;
    }
    let doc = read_doc(state, req, name, Some(id)).await?;
    write_one(state, req, &db, doc, mode, durability, Answer::Put).await
}

/// `POST /{db}`: a new document with a generated id unless it names one.
pub async fn post(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    req.require_json()?;
    let db = open(state, name)?;
    let (_, durability) = write_options(req)?;
    let doc = read_doc(state, req, name, None).await?;
    write_one(
        state,
        req,
        &db,
        doc,
        EditMode::Interactive,
        durability,
        Answer::Post,
    )
    .await
}

async fn delete(state: &Arc<State>, req: &mut Req, name: &str, id: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    // As CouchDB: the document must be there to be deleted (404 `missing` or `deleted`
    // whatever revision is named), then `rev` and `If-Match` must agree, then a revision
    // is needed.
    let snap = db.snapshot();
    if is_local(id) {
        snap.local(id)?
            .ok_or_else(|| HttpError::not_found("missing"))?;
    } else {
        snap.resolve_winner(id)?;
    }
    // A local document needs no revision (it never conflicts); others do.
    let rev = match named_rev(req)? {
        Some(rev) => Some(rev),
        None if is_local(id) => None,
        None => return Err(settee_db::Error::Conflict.into()),
    };
    let mut body = json!({"_deleted": true});
    if let Some(rev) = rev {
        parse_rev(&rev)?;
        body["_rev"] = json!(rev);
    }
    let doc = NewDoc::from_json(body, Some(id), String::new, &state.node.limits)?;
    // `batch=ok` does not apply to deletions, as in CouchDB: the answer names the revision.
    write_one(
        state,
        req,
        &db,
        doc,
        EditMode::Interactive,
        Durability::Durable,
        Answer::Delete,
    )
    .await
}

/// `COPY /{db}/{docid}` with a `Destination: id[?rev=…]` header.
async fn copy(state: &Arc<State>, req: &mut Req, name: &str, id: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    let dest = req
        .header("destination")
        .ok_or_else(|| HttpError::bad_request("Destination header is mandatory for COPY."))?
        .to_string();
    let (dest_id, dest_rev) = match dest.split_once("?rev=") {
        Some((d, r)) => (d.to_string(), Some(r.to_string())),
        None => (dest, None),
    };
    let dest_id = percent_encoding::percent_decode_str(&dest_id)
        .decode_utf8_lossy()
        .into_owned();
    let rev = req.query.get("rev").map(parse_rev).transpose()?;
    // The copy takes the source's attachments along, bytes and all (they may belong in
    // another shard's file).
    let source = db.snapshot().open_doc(
        id,
        rev.as_ref(),
        &DocOptions {
            attachments: true,
            ..DocOptions::default()
        },
    )?;
    let mut value = parse_doc(&source)?;
    if let Value::Object(map) = &mut value {
        map.remove("_id");
        map.remove("_rev");
        if let Some(r) = dest_rev {
            map.insert("_rev".into(), Value::String(r));
        }
    }
    let doc = NewDoc::from_json(value, Some(&dest_id), String::new, &state.node.limits)?;
    write_one(
        state,
        req,
        &db,
        doc,
        EditMode::Interactive,
        Durability::Durable,
        Answer::Copy,
    )
    .await
}
