//! `POST /{db}/{docid}` with a `multipart/form-data` body: CouchDB's form upload (the one
//! its old admin pages used). Each file sent as `_attachments` is added to the document at
//! the revision the form's `_rev` names, or to the document its `_doc` field holds; the
//! document's other attachments stay. Like CouchDB, it needs a `Referer` on this host.

use std::sync::Arc;

use base64::Engine;
use hyper::header::{CONTENT_TYPE, REFERER};
use serde_json::{json, Map, Value};
use settee_db::{Database, DocOptions, Durability, EditMode, NewDoc};

use crate::db::open;
use crate::doc::{self, Answer};
use crate::error::{HttpError, HttpResult};
use crate::multipart;
use crate::reply::Response;
use crate::request::Req;
use crate::server::State;

/// The fields of an upload form that matter.
#[derive(Default)]
struct Form {
    rev: Option<String>,
    doc: Option<String>,
    /// `(file name, content type, bytes)` of each `_attachments` file.
    files: Vec<(String, String, Vec<u8>)>,
}

/// Handles the upload.
pub async fn post(state: &Arc<State>, req: &mut Req, name: &str, id: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    check_referer(state, req)?;
    let content_type = req.header(CONTENT_TYPE).unwrap_or_default().to_string();
    let is_form = content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("multipart/form-data"));
    let boundary = multipart::boundary(&content_type)
        .filter(|_| is_form)
        .ok_or_else(|| {
            HttpError::new(
                415,
                "bad_content_type",
                "Content-Type must be multipart/form-data",
            )
        })?;
    let form = read_form(req, &boundary, state.max_request).await?;
    let mut body = match &form.doc {
        Some(text) => crate::request::parse_json(text.as_bytes())?,
        None => current(&db, id, form.rev.as_deref())?,
    };
    let Value::Object(fields) = &mut body else {
        return Err(HttpError::bad_request("Document must be a JSON object"));
    };
    add_files(fields, form.files);
    let doc = NewDoc::from_json(body, Some(id), String::new, &state.node.limits)?;
    doc::write_one(
        state,
        req,
        &db,
        doc,
        EditMode::Interactive,
        Durability::Durable,
        Answer::Form,
    )
    .await
}

/// CouchDB's check against cross-site form posts: a `Referer` naming the host asked.
fn check_referer(state: &State, req: &Req) -> HttpResult<()> {
    let referer = req
        .header(REFERER)
        .ok_or_else(|| HttpError::bad_request("Referer header required."))?;
    let host = referer.split_once("://").map_or("", |(_, rest)| {
        rest.split(['/', '?', '#']).next().unwrap_or("")
    });
    if host != crate::node::client_host(state, req) {
        return Err(HttpError::bad_request("Referer header must match host."));
    }
    Ok(())
}

/// The document the files are added to: the revision `_rev` names (with its attachments as
/// stubs), or a new document when there is none yet.
fn current(db: &Database, id: &str, rev: Option<&str>) -> HttpResult<Value> {
    let snap = db.snapshot();
    let rev = match rev {
        Some(rev) => doc::parse_rev(rev)?,
        None if snap.resolve_winner(id).is_ok() => return Err(settee_db::Error::Conflict.into()),
        None => return Ok(json!({})),
    };
    let text = snap.open_doc(id, Some(&rev), &DocOptions::default())?;
    doc::parse_doc(&text)
}

/// Puts each file in `_attachments`, in place of any attachment of its name.
fn add_files(doc: &mut Map<String, Value>, files: Vec<(String, String, Vec<u8>)>) {
    let atts = doc.entry("_attachments").or_insert_with(|| json!({}));
    if !atts.is_object() {
        *atts = json!({});
    }
    let atts = atts.as_object_mut().expect("an object");
    for (name, content_type, bytes) in files {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        atts.insert(name, json!({"content_type": content_type, "data": data}));
    }
}

/// Reads the form: `_rev`, `_doc` and the `_attachments` files, at most `limit` bytes.
async fn read_form(req: &mut Req, boundary: &str, limit: usize) -> HttpResult<Form> {
    let body = req
        .body
        .take()
        .ok_or_else(|| HttpError::bad_request("Missing request body"))?;
    let mut reader = multipart::Reader::new(body, boundary);
    let mut form = Form::default();
    let mut left = limit;
    while let Some(headers) = reader.next_part().await? {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let disposition = header("content-disposition").unwrap_or_default();
        let (field, file) = (param(disposition, "name"), param(disposition, "filename"));
        let content_type = header("content-type")
            .unwrap_or("application/octet-stream")
            .to_string();
        let bytes = reader.read_part(left).await?;
        left -= bytes.len();
        let text = || String::from_utf8_lossy(&bytes).into_owned();
        match (field.as_deref(), file) {
            (Some("_attachments"), Some(file)) if !file.is_empty() => {
                form.files.push((file, content_type, bytes))
            }
            (Some("_rev"), None) => form.rev = Some(text()),
            (Some("_doc"), None) => form.doc = Some(text()),
            _ => {}
        }
    }
    Ok(form)
}

/// A parameter of a `Content-Disposition` header value (quotes removed).
fn param(value: &str, name: &str) -> Option<String> {
    value.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disposition_parameters_are_read() {
        let v = r#"form-data; name="_attachments"; filename="a b.txt""#;
        assert_eq!(param(v, "name").as_deref(), Some("_attachments"));
        assert_eq!(param(v, "filename").as_deref(), Some("a b.txt"));
        assert_eq!(
            param("form-data; name=_rev", "name").as_deref(),
            Some("_rev")
        );
        assert_eq!(param("form-data; name=\"_rev\"", "filename"), None);
    }
}
