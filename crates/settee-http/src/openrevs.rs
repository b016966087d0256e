//! `GET /{db}/{docid}?open_revs=…`: several revisions of a document at once, as a JSON
//! list or, when the client asks for it, as `multipart/mixed` (CouchDB's replicator does).

use serde_json::{json, Value};
use settee_db::{Database, DocOptions, DocRecord};
use settee_json::Rev;

use crate::doc::{parse_doc, parse_rev};
use crate::error::{HttpError, HttpResult};
use crate::multipart;
use crate::reply::{self, Response};
use crate::request::Req;

/// One answer: a revision found (record and node), or the text of one missing.
enum Found<'a> {
    Ok(&'a DocRecord, usize),
    Missing(String),
}

/// Answers an `open_revs` request.
pub fn get(req: &Req, db: &Database, id: &str, open_revs: &str, opts: &DocOptions, latest: bool) -> HttpResult<Response> {
    let snap = db.snapshot();
    let record = snap.record(id)?;
    let mut found = Vec::new();
    if open_revs == "all" {
        let rec = record.as_ref().ok_or_else(|| HttpError::not_found("missing"))?;
        found.extend(rec.tree.leaves().into_iter().map(|l| Found::Ok(rec, l)));
    } else {
        let revs: Vec<String> = serde_json::from_str(open_revs).map_err(|_| HttpError::bad_request("Invalid list of revisions"))?;
        for text in revs {
            let rev: Rev = parse_rev(&text)?;
            let node = record.as_ref().and_then(|rec| rec.tree.find(&rev).map(|i| (rec, i)));
            match node {
                Some((rec, i)) if latest => found.extend(rec.tree.leaves_below(i).into_iter().map(|l| Found::Ok(rec, l))),
                Some((rec, i)) if rec.tree.nodes[i].info.is_some() => found.push(Found::Ok(rec, i)),
                _ => found.push(Found::Missing(text)),
            }
        }
    }
    if req.header("accept").is_some_and(|a| a.contains("multipart/mixed")) {
        return mixed(&snap, id, &found, opts);
    }
    let list = found
        .iter()
        .map(|f| match f {
            Found::Ok(rec, i) => Ok(json!({"ok": parse_doc(&snap.render(id, rec, *i, opts)?)?})),
            Found::Missing(r) => Ok(json!({"missing": r})),
        })
        .collect::<HttpResult<Vec<Value>>>()?;
    Ok(reply::json(200, &json!(list)))
}

/// `multipart/mixed`: one part per revision, itself `multipart/related` when it carries
/// attachment bytes; missing revisions as JSON parts flagged `error="true"`.
fn mixed(snap: &settee_db::DbSnapshot, id: &str, found: &[Found<'_>], opts: &DocOptions) -> HttpResult<Response> {
    let boundary = crate::auth::random_hex(16);
    let mut out = Vec::new();
    for f in found {
        match f {
            Found::Ok(rec, i) if opts.attachments => {
                let (content_type, body) = multipart::related_doc(snap, id, rec, *i, opts)?;
                multipart::write_part(&mut out, &boundary, &[("Content-Type", content_type)], &body);
            }
            Found::Ok(rec, i) => multipart::write_part(&mut out, &boundary, &[("Content-Type", "application/json".into())], &snap.render(id, rec, *i, opts)?),
            Found::Missing(r) => {
                let body = serde_json::to_vec(&json!({"missing": r})).expect("json");
                multipart::write_part(&mut out, &boundary, &[("Content-Type", "application/json; error=\"true\"".into())], &body);
            }
        }
    }
    multipart::write_end(&mut out, &boundary);
    Ok(reply::with_header(reply::bytes(200, out), hyper::header::CONTENT_TYPE, &format!("multipart/mixed; boundary=\"{boundary}\"")))
}
