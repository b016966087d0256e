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

/// What was asked for: the node of a revision found, or a revision missing. Owned, so that
/// a streamed reply can take it along.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Found {
    Ok(Rev, usize),
    Missing(Rev),
}

/// Answers an `open_revs` request.
pub fn get(
    req: &Req,
    db: &Database,
    id: &str,
    open_revs: &OpenRevs,
    q: &DocQuery,
) -> HttpResult<Response> {
    let snap = db.snapshot();
    let record = snap.record(id)?;
    let mut found: Vec<Found> = match (open_revs, &record) {
        (OpenRevs::All, None) => return Err(HttpError::not_found("missing")),
        (OpenRevs::All, Some(rec)) => rec
            .tree
            .leaves()
            .into_iter()
            .map(|l| Found::Ok(rec.tree.nodes[l].rev.clone(), l))
            .collect(),
        (OpenRevs::List(revs), rec) => revs
            .iter()
            .flat_map(|rev| asked(rec.as_ref(), rev, q.latest))
            .collect(),
    };
    found.sort_unstable();
    found.dedup();
    let opts = DocOptions {
        revs_info: false,
        conflicts: false,
        deleted_conflicts: false,
        local_seq: false,
        ..q.opts.clone()
    };
    if req.accepts("multipart/mixed") {
        return Ok(mixed(snap, id.to_string(), record, found, opts));
    }
    let list = found
        .iter()
        .map(|f| match (f, &record) {
            (Found::Ok(_, i), Some(rec)) => {
                Ok(json!({"ok": parse_doc(&snap.render(id, rec, *i, &opts)?)?}))
            }
            (Found::Ok(rev, _) | Found::Missing(rev), _) => Ok(json!({"missing": rev.to_string()})),
        })
        .collect::<HttpResult<Vec<Value>>>()?;
    Ok(reply::json(200, &json!(list)))
}

/// The answers for one revision asked for: the leaves below it with `latest`, else itself
/// if its body is known.
fn asked(record: Option<&DocRecord>, rev: &Rev, latest: bool) -> Vec<Found> {
    let Some((rec, i)) = record.and_then(|rec| rec.tree.find(rev).map(|i| (rec, i))) else {
        return vec![Found::Missing(rev.clone())];
    };
    if latest {
        return rec
            .tree
            .leaves_below(i)
            .into_iter()
            .map(|l| Found::Ok(rec.tree.nodes[l].rev.clone(), l))
            .collect();
    }
    match rec.tree.nodes[i].info {
        Some(_) => vec![Found::Ok(rev.clone(), i)],
        None => vec![Found::Missing(rev.clone())],
    }
}

/// `multipart/mixed`, streamed: one part per revision, `multipart/related` when it has
/// attachment bytes to send (all of them, as CouchDB sends them here), read a chunk at a
/// time; missing revisions as JSON parts flagged `error="true"`.
fn mixed(
    snap: DbSnapshot,
    id: String,
    record: Option<DocRecord>,
    found: Vec<Found>,
    opts: DocOptions,
) -> Response {
    let boundary = crate::auth::random_hex(16);
    let (resp, mut sink) = reply::channel(200, "application/json");
    let resp = reply::with_header(
        resp,
        hyper::header::CONTENT_TYPE,
        &format!("multipart/mixed; boundary=\"{boundary}\""),
    );
    let every = DocOptions {
        attachments: true,
        atts_since: None,
        ..opts
    };
    tokio::task::spawn_blocking(move || {
        for f in &found {
            if write_part(&mut sink, &snap, &id, record.as_ref(), f, &every, &boundary).is_err() {
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
fn write_part(
    sink: &mut Sink,
    snap: &DbSnapshot,
    id: &str,
    record: Option<&DocRecord>,
    found: &Found,
    opts: &DocOptions,
    boundary: &str,
) -> Result<(), Gone> {
    match (found, record) {
        (Found::Ok(_, i), Some(rec)) => {
            let related = multipart::Related::new(snap, id, rec, *i, opts).map_err(|e| {
                tracing::error!(error = %e.reason, "reading a revision");
                Gone
            })?;
            sink.write(&multipart::part_head(
                boundary,
                &[("Content-Type", &related.content_type())],
            ))?;
            related.write(snap, id, &mut |bytes| sink.write(bytes))?;
        }
        (Found::Ok(rev, _) | Found::Missing(rev), _) => {
            sink.write(&multipart::part_head(
                boundary,
                &[("Content-Type", "application/json; error=\"true\"")],
            ))?;
            sink.write(&serde_json::to_vec(&json!({"missing": rev.to_string()})).expect("json"))?;
        }
    }
    sink.write(b"\r\n")
}
