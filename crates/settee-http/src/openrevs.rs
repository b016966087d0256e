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
use crate::reply::{self, Gone, Response, Sink};
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
    let answers: Vec<Answer> = found
        .iter()
        .map(|f| match (f, &record) {
            (Found::Ok(_, i), Some(_)) => Answer::Ok(*i),
            (Found::Ok(rev, _) | Found::Missing(rev), _) => Answer::Missing(rev.to_string()),
        })
        .collect();
    if req.accepts("multipart/mixed") {
        return Ok(mixed(snap, id.to_string(), record, answers, opts));
    }
    let list = answers
        .iter()
        .map(|a| match (a, &record) {
            (Answer::Ok(i), Some(rec)) => Ok(json!({"ok": parse_doc(&snap.render(id, rec, *i, &opts)?)?})),
            (Answer::Ok(_), None) => Err(HttpError::not_found("missing")),
            (Answer::Missing(rev), _) => Ok(json!({"missing": rev})),
        })
        .collect::<HttpResult<Vec<Value>>>()?;
    Ok(reply::json(200, &json!(list)))
}

/// One answer, owned so that a streamed reply can take it along: the node of a revision
/// found, or the text of one missing.
enum Answer {
    Ok(usize),
    Missing(String),
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

/// `multipart/mixed`, streamed: one part per revision, `multipart/related` when it has
/// attachment bytes to send (all of them, as CouchDB sends them here), read a chunk at a
/// time; missing revisions as JSON parts flagged `error="true"`.
fn mixed(snap: DbSnapshot, id: String, record: Option<DocRecord>, answers: Vec<Answer>, opts: DocOptions) -> Response {
    let boundary = crate::auth::random_hex(16);
    let (resp, mut sink) = reply::channel(200, "application/json");
    let resp = reply::with_header(resp, hyper::header::CONTENT_TYPE, &format!("multipart/mixed; boundary=\"{boundary}\""));
    let every = DocOptions { attachments: true, atts_since: None, ..opts };
    tokio::task::spawn_blocking(move || {
        for answer in &answers {
            if write_part(&mut sink, &snap, &id, record.as_ref(), answer, &every, &boundary).is_err() {
                return;
            }
        }
        if sink.write(format!("--{boundary}--").as_bytes()).is_ok() {
            let _ = sink.flush();
        }
    });
    resp
}

/// One part of [`mixed`].
fn write_part(sink: &mut Sink, snap: &DbSnapshot, id: &str, record: Option<&DocRecord>, answer: &Answer, opts: &DocOptions, boundary: &str) -> Result<(), Gone> {
    sink.write(format!("--{boundary}\r\n").as_bytes())?;
    match (answer, record) {
        (Answer::Ok(i), Some(rec)) => {
            let related = multipart::Related::new(snap, id, rec, *i, opts).map_err(|e| {
                tracing::error!(error = %e.reason, "reading a revision");
                Gone
            })?;
            sink.write(format!("Content-Type: {}\r\n\r\n", related.content_type()).as_bytes())?;
            related.write(snap, id, &mut |bytes| sink.write(bytes))?;
        }
        (Answer::Missing(rev), _) => {
            sink.write(b"Content-Type: application/json; error=\"true\"\r\n\r\n")?;
            sink.write(&serde_json::to_vec(&json!({"missing": rev})).expect("json"))?;
        }
        (Answer::Ok(_), None) => return Err(Gone),
    }
    sink.write(b"\r\n")
}
