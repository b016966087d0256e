//! `GET /{db}/{docid}?open_revs=…`: several revisions of a document at once, as a JSON
//! list or, when the client takes it, as `multipart/mixed` (CouchDB's replicator does).
//! As CouchDB answers: revisions found first, then those missing, each in revision order,
//! each once; no winner's metadata; every attachment's bytes in the multipart form.

use serde_json::{json, Value};
use settee_db::{Database, DbSnapshot, DocOptions, DocRecord};
use settee_json::Rev;

use crate::doc::parse_doc;
use crate::doc_query::{DocQuery, OpenRevs};
use crate::error::{HttpError, HttpResult};
use crate::multipart;
use crate::reply::{self, Response};
use crate::request::Req;

/// What was asked for: the node of a revision found, or a revision missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Found<'a> {
    Ok(&'a Rev, usize),
    Missing(&'a Rev),
}

/// Answers an `open_revs` request.
pub fn get(req: &Req, db: &Database, id: &str, open_revs: &OpenRevs, q: &DocQuery) -> HttpResult<Response> {
    let snap = db.snapshot();
    let record = snap.record(id)?;
    let found = match (open_revs, &record) {
        (OpenRevs::All, None) => return Err(HttpError::not_found("missing")),
        (OpenRevs::All, Some(rec)) => rec.tree.leaves().into_iter().map(|l| Found::Ok(&rec.tree.nodes[l].rev, l)).collect(),
        (OpenRevs::List(revs), rec) => revs.iter().flat_map(|rev| asked(rec.as_ref(), rev, q.latest)).collect(),
    };
    let mut found: Vec<Found<'_>> = found;
    found.sort_unstable();
    found.dedup();
    let opts = DocOptions { revs_info: false, conflicts: false, deleted_conflicts: false, local_seq: false, ..q.opts.clone() };
    let rec = record.as_ref();
    if req.accepts("multipart/mixed") {
        return mixed(&snap, id, rec, &found, &opts);
    }
    let list = found
        .iter()
        .map(|f| match (f, rec) {
            (Found::Ok(_, i), Some(rec)) => Ok(json!({"ok": parse_doc(&snap.render(id, rec, *i, &opts)?)?})),
            (Found::Ok(rev, _) | Found::Missing(rev), _) => Ok(json!({"missing": rev.to_string()})),
        })
        .collect::<HttpResult<Vec<Value>>>()?;
    Ok(reply::json(200, &json!(list)))
}

/// The answers for one revision asked for: the leaves below it with `latest`, else itself
/// if its body is known.
fn asked<'a>(record: Option<&'a DocRecord>, rev: &'a Rev, latest: bool) -> Vec<Found<'a>> {
    let Some((rec, i)) = record.and_then(|rec| rec.tree.find(rev).map(|i| (rec, i))) else {
        return vec![Found::Missing(rev)];
    };
    if latest {
        return rec.tree.leaves_below(i).into_iter().map(|l| Found::Ok(&rec.tree.nodes[l].rev, l)).collect();
    }
    match rec.tree.nodes[i].info {
        Some(_) => vec![Found::Ok(rev, i)],
        None => vec![Found::Missing(rev)],
    }
}

/// `multipart/mixed`: one part per revision, `multipart/related` when it has attachment
/// bytes to send (all of them, as CouchDB sends them here); missing revisions as JSON parts
/// flagged `error="true"`.
fn mixed(snap: &DbSnapshot, id: &str, record: Option<&DocRecord>, found: &[Found<'_>], opts: &DocOptions) -> HttpResult<Response> {
    let boundary = crate::auth::random_hex(16);
    let every = DocOptions { attachments: true, atts_since: None, ..opts.clone() };
    let mut out = Vec::new();
    for f in found {
        match (f, record) {
            (Found::Ok(_, i), Some(rec)) => {
                let (content_type, body) = multipart::related_doc(snap, id, rec, *i, &every)?;
                multipart::write_part(&mut out, &boundary, &[("Content-Type", content_type)], &body);
            }
            (Found::Ok(rev, _) | Found::Missing(rev), _) => {
                let body = serde_json::to_vec(&json!({"missing": rev.to_string()})).expect("json");
                multipart::write_part(&mut out, &boundary, &[("Content-Type", "application/json; error=\"true\"".into())], &body);
            }
        }
    }
    multipart::write_end(&mut out, &boundary);
    Ok(reply::with_header(reply::bytes(200, out), hyper::header::CONTENT_TYPE, &format!("multipart/mixed; boundary=\"{boundary}\"")))
}
