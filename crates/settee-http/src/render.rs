//! Show, list and update functions over HTTP (`/{db}/_design/{d}/_show|_list|_update/…`):
//! CouchDB's request object, and the response objects the functions answer, sent as HTTP.
//! The functions themselves run in the node ([`settee_node::DesignFunction`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use base64::Engine as _;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;
use md5::{Digest, Md5};
use serde_json::{json, Map, Value};
use settee_db::{Database, DocOptions, Durability, EditMode, NewDoc};
use settee_js::{ListIo, Render};
use settee_node::DesignFunction;

use crate::db::{db_info, join_error, open};
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response, Sink};
use crate::request::{url_encode, Query, Req};
use crate::server::State;

/// Query parameters the request object gives decoded from JSON, as CouchDB does.
const JSON_QUERY_KEYS: [&str; 4] = ["key", "startkey", "endkey", "descending"];

/// Headers never shown to design functions (CouchDB 3.5 strips them: they are secrets).
const HIDDEN_HEADERS: [&str; 3] = ["authorization", "cookie", "x-auth-couchdb-token"];

/// The design document `ddoc` of `db` as stored; CouchDB's 404 `missing` when absent.
pub fn design_json(db: &Database, ddoc: &str) -> HttpResult<Value> {
    let id = format!("_design/{ddoc}");
    let body = match db.snapshot().open_doc(&id, None, &DocOptions::default()) {
        Ok(body) => body,
        Err(e) => {
            let e = HttpError::from(&e);
            return Err(if e.status == 404 {
                HttpError::not_found("missing")
            } else {
                e
            });
        }
    };
    settee_json::deep::from_slice(&body)
        .map_err(|_| HttpError::new(500, "unknown_error", "the design document is not JSON"))
}

/// A design function of `kind` named `name`; 404 `missing json key: …` as CouchDB answers.
fn function(ddoc: Value, kind: Render, name: &str) -> HttpResult<DesignFunction> {
    DesignFunction::find(ddoc, kind, name).map_err(HttpError::from)
}

/// The request body as design functions see it: the text, or `"undefined"` when there is
/// none (a GET, or no `Content-Length` and no body).
async fn body_text(state: &State, req: &mut Req) -> HttpResult<String> {
    if matches!(req.method, Method::GET | Method::HEAD) {
        return Ok("undefined".into());
    }
    let bytes = req.bytes(state.max_request).await?;
    let declared = req.header("content-length").is_some();
    if bytes.is_empty() && !declared && req.header("transfer-encoding").is_none() {
        return Ok("undefined".into());
    }
    // The body stays readable for whoever handles the request after a rewrite.
    req.preread = Some(bytes.clone());
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Parameters as an object of strings, the last of a repeated name winning.
fn params(query: &Query) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in &query.0 {
        out.insert(k.clone(), Value::String(v.clone()));
    }
    out
}

/// The request's query as design functions see it: `key`, `startkey`, `endkey` and
/// `descending` decoded from JSON (400 when they are not JSON), the rest as text.
fn query_object(query: &Query) -> HttpResult<Map<String, Value>> {
    let mut out = params(query);
    for key in JSON_QUERY_KEYS {
        if let Some(Value::String(text)) = out.get(key) {
            let value = serde_json::from_str(text)
                .map_err(|_| HttpError::bad_request("invalid UTF-8 JSON"))?;
            out.insert(key.to_string(), value);
        }
    }
    Ok(out)
}

/// A header name as CouchDB shows it: each `-`-separated part capitalised.
fn canonical_header(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |c| {
                c.to_ascii_uppercase().to_string() + &chars.as_str().to_ascii_lowercase()
            })
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// The request's headers as design functions see them, secrets left out, ordered by name.
fn headers_object(req: &Req) -> Map<String, Value> {
    let mut sorted = BTreeMap::new();
    for (name, value) in &req.headers {
        if HIDDEN_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        sorted.insert(name.as_str().to_string(), value);
    }
    sorted
        .into_iter()
        .map(|(name, value)| (canonical_header(&name), Value::String(value)))
        .collect()
}

/// The path as the client asked for it: the raw URI split on `/`, each part decoded, the
/// query string left on the last part (as CouchDB gives it).
fn requested_path(req: &Req) -> Value {
    let parts: Vec<String> = req
        .raw_path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    json!(parts)
}

/// A form body's fields, for a POST or PUT of `application/x-www-form-urlencoded`.
fn form_object(req: &Req, body: &str) -> Map<String, Value> {
    let is_form = req
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !is_form || !matches!(req.method, Method::POST | Method::PUT) {
        return Map::new();
    }
    params(&Query::parse(Some(body)))
}

/// The caller as design functions see them.
fn user_ctx(req: &Req, db: &str) -> Value {
    let name = req.user.as_ref().map(|u| u.name.clone());
    let roles = req.user.as_ref().map_or_else(Vec::new, |u| u.roles.clone());
    json!({"db": db, "name": name, "roles": roles})
}

/// The database's security object.
fn security(db: &Database) -> HttpResult<Value> {
    let meta = db.snapshot().meta()?;
    Ok(serde_json::from_slice(&meta.security).unwrap_or_else(|_| json!({})))
}

/// CouchDB's request object for show, list and update functions (`id` is the document's
/// id from the path, if any); rewrite functions get it without `info`, `uuid`, `id` and
/// `form`.
pub async fn request_object(
    state: &State,
    req: &mut Req,
    db: &Database,
    id: Option<&str>,
    rewrite: bool,
) -> HttpResult<Value> {
    let query = query_object(&req.query)?;
    let body = body_text(state, req).await?;
    let mut obj = Map::new();
    if !rewrite {
        obj.insert("info".into(), db_info(db)?);
        let uuid = state.node.uuids.lock().expect("uuid lock").next_id();
        obj.insert("uuid".into(), json!(uuid));
        obj.insert("id".into(), json!(id));
    }
    obj.insert("method".into(), json!(req.method.as_str()));
    obj.insert("requested_path".into(), requested_path(req));
    obj.insert("path".into(), json!(req.segments));
    obj.insert("raw_path".into(), json!(req.raw_path));
    obj.insert("query".into(), Value::Object(query));
    obj.insert("headers".into(), Value::Object(headers_object(req)));
    if !rewrite {
        obj.insert("form".into(), Value::Object(form_object(req, &body)));
    }
    obj.insert("body".into(), Value::String(body));
    obj.insert("peer".into(), json!(req.peer.to_string()));
    obj.insert("cookie".into(), json!({}));
    obj.insert("userCtx".into(), user_ctx(req, db.name()));
    obj.insert("secObj".into(), security(db)?);
    Ok(Value::Object(obj))
}

/// A response object's member that is not CouchDB's.
fn invalid_member(key: &str, value: &Value) -> HttpError {
    HttpError::new(
        500,
        "external_response_error",
        format!("Invalid data from external server: {{<<\"{key}\">>,{value}}}"),
    )
}

/// A response object (`code`, `headers`, `body`, `json`, `base64`, `stop`) as HTTP, read
/// as CouchDB reads it: members in order, the last of `body`, `json` and `base64` naming
/// the content type, `json` sent when given; status 200 and `application/json` by
/// default. Responses that are not JSON get `Content-Security-Policy: sandbox`.
pub fn send_response(resp: &Value) -> HttpResult<Response> {
    let Value::Object(members) = resp else {
        return Err(HttpError::new(500, "unknown_error", "function_clause"));
    };
    let mut code = 200u16;
    let mut ctype = "application/json";
    let (mut data, mut json_body) = (Vec::new(), None);
    let mut headers: Vec<(String, String)> = Vec::new();
    for (key, value) in members {
        match (key.as_str(), value) {
            ("code", v) => code = status_code(v)?,
            ("stop", Value::Bool(true)) => {}
            ("json", v) => {
                json_body = Some(v);
                ctype = "application/json";
            }
            ("body", Value::String(text)) => {
                data = text.as_bytes().to_vec();
                ctype = "text/html; charset=utf-8";
            }
            ("body", _) => return Err(HttpError::new(500, "unknown_error", "badarg")),
            ("base64", Value::String(text)) => {
                data = base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|_| HttpError::new(500, "unknown_error", "function_clause"))?;
                ctype = "application/binary";
            }
            ("headers", Value::Object(h)) => {
                headers = h.iter().map(|(k, v)| (k.clone(), header_text(v))).collect();
            }
            ("headers" | "base64", _) => {
                return Err(HttpError::new(500, "unknown_error", "function_clause"))
            }
            (key, value) => return Err(invalid_member(key, value)),
        }
    }
    let is_json = json_body.is_some();
    let body = match json_body {
        Some(v) => {
            let mut bytes = serde_json::to_vec(v).expect("json");
            bytes.push(b'\n');
            bytes
        }
        None => data,
    };
    let mut out = reply::bytes(code, body);
    let has_type = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    if !has_type {
        headers.push(("Content-Type".into(), ctype.into()));
    }
    if !is_json {
        headers.push(("Content-Security-Policy".into(), "sandbox".into()));
    }
    set_headers(&mut out, &headers)?;
    Ok(out)
}

/// A response object's `code`: a number (or its text) from 100 to 999.
fn status_code(v: &Value) -> HttpResult<u16> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    n.filter(|n| (100..1000).contains(n))
        .map(|n| n as u16)
        .ok_or_else(|| HttpError::new(500, "unknown_error", format!("bad status code {v}")))
}

/// A header value as CouchDB writes one it was given: strings as they are, the rest as JSON.
fn header_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Sets response headers (replacing those of the same name); 500 for names or values
/// HTTP cannot carry.
fn set_headers(resp: &mut Response, headers: &[(String, String)]) -> HttpResult<()> {
    for (name, value) in headers {
        let bad = || {
            HttpError::new(
                500,
                "external_response_error",
                format!("Invalid header {name}"),
            )
        };
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        let value = HeaderValue::from_str(value).map_err(|_| bad())?;
        resp.headers_mut().insert(name, value);
    }
    Ok(())
}

/// A show or update request's database, function and document id.
type DocFunction = (Arc<Database>, DesignFunction, Option<String>);

/// The database, the function and the document id (`{f}[/{docid}]`, the id's own `/`
/// kept) of a show or update request; 404 `show_error`/`update_error` without a name.
fn doc_function(
    state: &State,
    name: &str,
    ddoc: &str,
    rest: &[String],
    kind: Render,
) -> HttpResult<DocFunction> {
    let Some(fname) = rest.first() else {
        let error = if kind == Render::Show {
            "show_error"
        } else {
            "update_error"
        };
        return Err(HttpError::new(404, error, "Invalid path."));
    };
    let db = open(state, name)?;
    let f = function(design_json(&db, ddoc)?, kind, fname)?;
    let id = (rest.len() > 1).then(|| rest[1..].join("/"));
    Ok((db, f, id))
}

/// The document a show or update function gets (with `_revisions` and `_conflicts`) and
/// its revision; `None` when there is no id, or it is missing or deleted.
fn read_doc(db: &Database, id: Option<&str>) -> HttpResult<Option<(String, String)>> {
    let Some(id) = id else {
        return Ok(None);
    };
    let opts = DocOptions {
        revs: true,
        conflicts: true,
        ..DocOptions::default()
    };
    let body = match db.snapshot().open_doc(id, None, &opts) {
        Ok(body) => body,
        Err(e) if HttpError::from(&e).status == 404 => return Ok(None),
        Err(e) => return Err(HttpError::from(&e)),
    };
    let doc: Value = settee_json::deep::from_slice(&body)
        .map_err(|_| HttpError::new(500, "unknown_error", "a stored document is not JSON"))?;
    if doc.get("_deleted") == Some(&Value::Bool(true)) {
        return Ok(None);
    }
    let rev = doc["_rev"].as_str().unwrap_or_default().to_string();
    Ok(Some((String::from_utf8_lossy(&body).into_owned(), rev)))
}

/// A show's `ETag`: the design document's and the document's revisions, the `Accept`
/// header and the caller's name and roles (not the show's name or query, as in CouchDB).
fn show_etag(ddoc: &Value, doc_rev: Option<&str>, req: &Req) -> String {
    let mut hash = Md5::new();
    for part in [
        ddoc["_rev"].as_str().unwrap_or_default(),
        doc_rev.unwrap_or("nil"),
        req.header("accept").unwrap_or_default(),
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    if let Some(user) = &req.user {
        hash.update(user.name.as_bytes());
        for role in &user.roles {
            hash.update([0]);
            hash.update(role.as_bytes());
        }
    }
    reply::hashed_etag(hash.finalize().into())
}

/// `/{db}/_design/{ddoc}/_show/{f}[/{docid}]`, any method.
pub async fn show(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    ddoc: &str,
    rest: &[String],
) -> HttpResult<Response> {
    let (db, f, id) = doc_function(state, name, ddoc, rest, Render::Show)?;
    let doc = read_doc(&db, id.as_deref())?;
    let etag = show_etag(&f.ddoc, doc.as_ref().map(|(_, rev)| rev.as_str()), req);
    if req.header("if-none-match") == Some(etag.as_str()) {
        let mut resp = reply::empty(304);
        set_headers(&mut resp, &[("ETag".into(), etag)])?;
        return Ok(resp);
    }
    let reqobj = request_object(state, req, &db, id.as_deref(), false).await?;
    let missing = id.is_some() && doc.is_none();
    let doc_text = doc.map_or_else(|| "null".to_string(), |(text, _)| text);
    let node = state.node.clone();
    let answer = tokio::task::spawn_blocking(move || node.show(&f, &doc_text, &reqobj))
        .await
        .map_err(join_error)?;
    let result = answer
        .map_err(HttpError::from)
        .and_then(|r| send_response(&r));
    let mut resp = match result {
        Ok(resp) => resp,
        // As CouchDB: a show of a document that is not there fails as that document.
        Err(_) if missing => return Err(HttpError::not_found("document not found")),
        Err(e) => return Err(e),
    };
    set_headers(
        &mut resp,
        &[("ETag".into(), etag), ("Vary".into(), "Accept".into())],
    )?;
    Ok(resp)
}

/// `POST|PUT /{db}/_design/{ddoc}/_update/{f}[/{docid}]`: the document the function gives
/// back is saved as the caller (validation functions run), with its new revision in
/// `X-Couch-Update-NewRev` and its id in `X-Couch-Id`.
pub async fn update(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    ddoc: &str,
    rest: &[String],
) -> HttpResult<Response> {
    let (db, f, id) = doc_function(state, name, ddoc, rest, Render::Update)?;
    if matches!(req.method, Method::GET | Method::HEAD) {
        return Err(HttpError::new(
            405,
            "method_not_allowed",
            "Update functions do not allow GET",
        ));
    }
    let doc = read_doc(&db, id.as_deref())?;
    let reqobj = request_object(state, req, &db, id.as_deref(), false).await?;
    let doc_text = doc.map_or_else(|| "null".to_string(), |(text, _)| text);
    let node = state.node.clone();
    let (new_doc, mut resp) =
        tokio::task::spawn_blocking(move || node.update(&f, &doc_text, &reqobj))
            .await
            .map_err(join_error)??;
    let mut code = 200;
    let mut added = Vec::new();
    if new_doc.is_object() {
        let (id, rev) = save_update(state, req, &db, new_doc).await?;
        code = 201;
        added.push(("X-Couch-Update-NewRev", rev));
        added.push(("X-Couch-Id", url_encode(&id)));
    }
    let members = resp
        .as_object_mut()
        .expect("an update's response is an object");
    if !members.contains_key("code") {
        members.insert("code".into(), json!(code));
    }
    let headers = members
        .entry("headers")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| HttpError::new(500, "unknown_error", "function_clause"))?;
    for (name, value) in added {
        headers.insert(name.into(), json!(value));
    }
    send_response(&resp)
}

/// Saves the document an update function gave back; its id and new revision.
async fn save_update(
    state: &Arc<State>,
    req: &Req,
    db: &Arc<Database>,
    doc: Value,
) -> HttpResult<(String, String)> {
    let id_given = doc
        .get("_id")
        .and_then(Value::as_str)
        .is_some_and(|id| !id.is_empty());
    if !id_given {
        return Err(HttpError::new(
            400,
            "illegal_docid",
            "Document id must not be empty",
        ));
    }
    let mut doc = NewDoc::from_json(doc, None, String::new, &state.node.limits)?;
    doc.presume_rev();
    let id = doc.id.clone();
    let rev = (state.node)
        .update_doc(
            req.user.as_ref(),
            db,
            doc,
            EditMode::Interactive,
            Durability::Durable,
        )
        .await?;
    Ok((id, rev.to_string()))
}

/// `GET|HEAD|POST /{db}/_design/{ddoc}/_list/{f}/{view}` (the view of the same design
/// document) or `…/_list/{f}/{other}/{view}`: the list function over the view's rows, its
/// output streamed as it sends it.
pub async fn list(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    ddoc: &str,
    rest: &[String],
) -> HttpResult<Response> {
    let (fname, view_ddoc, view) = match rest {
        [f, view] => (f, ddoc, view),
        [f, other, view] => (f, other.as_str(), view),
        _ => return Err(HttpError::new(404, "list_error", "Invalid path.")),
    };
    let body = match req.method {
        Method::GET | Method::HEAD => None,
        Method::POST => {
            req.require_json()?;
            let body = req.json_object(state.max_request).await?;
            req.preread = Some(serde_json::to_vec(&body).expect("json").into());
            Some(body)
        }
        _ => {
            let mut e = HttpError::new(405, "method_not_allowed", "Only GET,POST,HEAD allowed");
            e.allow = Some("GET,POST,HEAD");
            return Err(e);
        }
    };
    let db = open(state, name)?;
    let f = function(design_json(&db, ddoc)?, Render::List, fname)?;
    let query = req.query.with_body(body.as_ref(), &[]);
    let rows = crate::view::list_rows(state, &db, query, view_ddoc, view).await?;
    let reqobj = request_object(state, req, &db, None, false).await?;
    let (mut resp, sink) = reply::channel(200, "application/json");
    let (started, start) = tokio::sync::oneshot::channel();
    let node = state.node.clone();
    tokio::task::spawn_blocking(move || {
        let out = Rc::new(RefCell::new(ListOut {
            sink,
            started: Some(started),
            pending: None,
        }));
        let io = Box::new(HttpListIo {
            rows: rows.rows,
            out: out.clone(),
        });
        let result = node.list(&f, &rows.head, &reqobj, io);
        out.borrow_mut().finish(result);
    });
    let (code, headers) = start
        .await
        .map_err(|_| HttpError::new(500, "unknown_error", "the list function stopped"))??;
    *resp.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::OK);
    set_headers(&mut resp, &headers)?;
    Ok(resp)
}

/// How a list's response starts: its status and headers, or the error it failed with
/// before it sent anything.
type Started = HttpResult<(u16, Vec<(String, String)>)>;

/// A list's output: the response's start goes out with the first bytes (so `start()` may
/// change it until then), then the bytes go to the streamed body.
struct ListOut {
    sink: Sink,
    started: Option<tokio::sync::oneshot::Sender<Started>>,
    /// The response object of `start()` and the bytes sent before the response started.
    pending: Option<(Value, String)>,
}

impl ListOut {
    /// Starts the response (once), with what was sent before; false when the client went.
    fn commit(&mut self) -> bool {
        let Some(started) = self.started.take() else {
            return true;
        };
        let (resp, chunk) = self
            .pending
            .take()
            .unwrap_or_else(|| (json!({}), String::new()));
        let head = list_head(&resp);
        let ok = head.is_ok();
        let _ = started.send(head);
        ok && self.sink.write(chunk.as_bytes()).is_ok()
    }

    fn start(&mut self, resp: Value, chunk: String) -> bool {
        if self.started.is_none() {
            return self.send(chunk);
        }
        let before = self.pending.take().map(|(_, c)| c).unwrap_or_default();
        let nothing_yet = before.is_empty() && chunk.is_empty();
        self.pending = Some((resp, before + &chunk));
        nothing_yet || self.commit()
    }

    fn send(&mut self, chunk: String) -> bool {
        if chunk.is_empty() {
            return true;
        }
        self.commit() && self.sink.write(chunk.as_bytes()).is_ok()
    }

    /// Ends the list: its last chunk, or its error (a JSON error answer when nothing went
    /// out yet, else CouchDB's error line at the end of the body).
    fn finish(&mut self, result: settee_node::Result<String>) {
        match result {
            Ok(tail) => {
                if self.send(tail) && self.commit() {
                    let _ = self.sink.flush();
                }
            }
            Err(e) => {
                let e = HttpError::from(e);
                if let Some(started) = self.started.take() {
                    let _ = started.send(Err(e));
                    return;
                }
                let line = json!({"code": e.status, "error": e.error, "reason": e.reason});
                let _ = self.sink.write(format!("\n{line}\n").as_bytes());
                let _ = self.sink.flush();
            }
        }
    }
}

/// The status and headers of a list's `start()` object; lists are sandboxed, and JSON
/// unless they say otherwise.
fn list_head(resp: &Value) -> Started {
    let code = match resp.get("code") {
        Some(v) => status_code(v)?,
        None => 200,
    };
    let mut headers: Vec<(String, String)> = match resp.get("headers") {
        Some(Value::Object(h)) => h.iter().map(|(k, v)| (k.clone(), header_text(v))).collect(),
        Some(_) => return Err(HttpError::new(500, "unknown_error", "function_clause")),
        None => Vec::new(),
    };
    headers.push(("Content-Security-Policy".into(), "sandbox".into()));
    for (name, value) in &headers {
        let bad = HeaderName::from_bytes(name.as_bytes()).is_err()
            || HeaderValue::from_str(value).is_err();
        if bad {
            return Err(HttpError::new(
                500,
                "external_response_error",
                format!("Invalid header {name}"),
            ));
        }
    }
    Ok((code, headers))
}

/// The rows a list function reads and where its output goes.
struct HttpListIo {
    rows: Box<dyn Iterator<Item = String> + Send>,
    out: Rc<RefCell<ListOut>>,
}

impl ListIo for HttpListIo {
    fn next_row(&mut self) -> Option<String> {
        self.rows.next()
    }

    fn start(&mut self, resp_json: String, chunk: String) -> bool {
        let resp = serde_json::from_str(&resp_json).unwrap_or_else(|_| json!({}));
        self.out.borrow_mut().start(resp, chunk)
    }

    fn send(&mut self, chunk: String) -> bool {
        self.out.borrow_mut().send(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_capitalised_as_couchdb_shows_them() {
        assert_eq!(canonical_header("x-aBC-dEF"), "X-Abc-Def");
        assert_eq!(canonical_header("accept"), "Accept");
        assert_eq!(
            canonical_header("x-couchdb-requested-path"),
            "X-Couchdb-Requested-Path"
        );
    }

    #[test]
    fn response_objects_become_responses() {
        let r = send_response(&json!({"body": "hi", "code": 201})).unwrap();
        assert_eq!(r.status(), 201);
        assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
        assert_eq!(r.headers()["content-security-policy"], "sandbox");
        let r = send_response(&json!({"json": {"a": 1}, "headers": {"X-N": 5}})).unwrap();
        assert_eq!(r.headers()["content-type"], "application/json");
        assert_eq!(r.headers()["x-n"], "5");
        assert!(r.headers().get("content-security-policy").is_none());
        let r = send_response(&json!({"base64": "aGk=", "headers": {"content-type": "text/x"}}))
            .unwrap();
        assert_eq!(r.headers()["content-type"], "text/x");
        let e = send_response(&json!({"bogus": 1})).unwrap_err();
        assert_eq!(
            (e.status, e.error.as_str()),
            (500, "external_response_error")
        );
        assert_eq!(
            e.reason,
            "Invalid data from external server: {<<\"bogus\">>,1}"
        );
        assert_eq!(
            send_response(&json!({"body": 3})).unwrap_err().reason,
            "badarg"
        );
        assert_eq!(
            send_response(&json!([1])).unwrap_err().reason,
            "function_clause"
        );
    }

    #[test]
    fn json_query_keys_are_decoded() {
        let q = Query::parse(Some(
            "key=%22a%22&startkey=[1]&limit=5&keys=[1]&descending=true",
        ));
        let obj = query_object(&q).unwrap();
        assert_eq!(
            Value::Object(obj),
            json!({"key": "a", "startkey": [1], "limit": "5", "keys": "[1]", "descending": true})
        );
        let bad = query_object(&Query::parse(Some("key=nope"))).unwrap_err();
        assert_eq!(
            (bad.status, bad.reason.as_str()),
            (400, "invalid UTF-8 JSON")
        );
    }
}
