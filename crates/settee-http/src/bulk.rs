//! Many documents per request: `_bulk_docs`, `_bulk_get`, `_revs_diff`, `_missing_revs`.

use std::sync::Arc;

use hyper::Method;
use serde_json::{json, Map, Value};
use settee_db::{DbSnapshot, DocOptions, Durability, EditMode, NewDoc};
use settee_json::Rev;

use crate::db::open;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

fn post_json(req: &Req) -> HttpResult<()> {
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    req.require_json()
}

/// `POST /{db}/_bulk_docs`.
pub async fn bulk_docs(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    post_json(req)?;
    let db = open(state, name)?;
    let bytes = req.json_bytes(state.max_request).await?;
    let (parsed, new_edits, atomic) = crate::bulk_body::parse(state, bytes).await?;
    if atomic {
        return Ok(not_atomic(&parsed));
    }
    settee_metrics::inc(settee_metrics::Metric::HttpdBulkRequests);
    settee_metrics::observe(settee_metrics::Metric::HttpdBulkDocs, parsed.len() as f64);
    // Each row names its document; a replicated edit's error row also names its revision.
    let ids: Vec<(String, Option<String>)> = parsed
        .iter()
        .map(|d| {
            (
                d.id.clone(),
                (!new_edits)
                    .then(|| d.revs.first().map(Rev::to_string))
                    .flatten(),
            )
        })
        .collect();
    let mode = if new_edits {
        EditMode::Interactive
    } else {
        EditMode::Replicated
    };
    let durability = if req.query.get("batch") == Some("ok") {
        Durability::Batch
    } else {
        Durability::Durable
    };
    // The answer is rendered as soon as the edits are applied, while a large write's
    // commits are synced, and sent once they are.
    let render = |results| bulk_answer(ids, results, new_edits);
    let out = (state.node)
        .update_docs_then(req.user.as_ref(), &db, parsed, mode, durability, render)
        .await?;
    Ok(reply::json_bytes(201, out))
}

/// The rows of a `_bulk_docs` answer, written straight into the reply (a JSON value per
/// row costs more than the write itself for small documents): one per document, but for a
/// replicated write, only those that failed.
fn bulk_answer(
    ids: Vec<(String, Option<String>)>,
    results: Vec<settee_node::Result<Rev>>,
    new_edits: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.len() * 80 + 2);
    out.push(b'[');
    for ((id, rev), row) in ids.into_iter().zip(results) {
        if row.is_ok() && !new_edits {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        push_row(&mut out, &id, rev.as_deref(), row.map_err(HttpError::from));
    }
    out.push(b']');
    out
}

/// CouchDB's answer to `"all_or_nothing": true`, which it does not support: 417, nothing
/// written, a `not_implemented` row per document naming its revision (`0-` when new).
fn not_atomic(docs: &[NewDoc]) -> Response {
    let mut out = vec![b'['];
    let refusal = || {
        Err(HttpError::new(
            417,
            "not_implemented",
            "all_or_nothing is not supported",
        ))
    };
    for (k, doc) in docs.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        let rev = doc
            .revs
            .first()
            .map_or_else(|| "0-".to_string(), Rev::to_string);
        push_row(&mut out, &doc.id, Some(&rev), refusal());
    }
    out.push(b']');
    reply::json_bytes(417, out)
}

/// One `_bulk_docs` result: `{"ok":true,"id","rev"}` or `{"id"[,"rev"],"error","reason"}`.
fn push_row(out: &mut Vec<u8>, id: &str, rev: Option<&str>, row: Result<Rev, HttpError>) {
    let string = reply::push_string;
    match row {
        Ok(rev) => reply::push_saved(out, id, &rev),
        Err(h) => {
            out.extend_from_slice(br#"{"id":"#);
            string(out, id);
            if let Some(rev) = rev {
                out.extend_from_slice(br#","rev":"#);
                string(out, rev);
            }
            out.extend_from_slice(br#","error":"#);
            string(out, &h.error);
            out.extend_from_slice(br#","reason":"#);
            string(out, &h.reason);
            out.push(b'}');
        }
    }
}

/// `POST /{db}/_bulk_get`.
pub async fn bulk_get(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    post_json(req)?;
    for p in ["rev", "open_revs", "new_edits", "w", "atts_since"] {
        if req.query.get(p).is_some() {
            return Err(HttpError::bad_request(format!(
                "\"{p}\" query parameter is not acceptable"
            )));
        }
    }
    let db = open(state, name)?;
    let body = req.json_object(state.max_request).await?;
    let Some(Value::Array(wanted)) = body.get("docs") else {
        return Err(HttpError::bad_request("Missing JSON list of 'docs'."));
    };
    // The document-read options, as CouchDB parses them; revisions read this way show none
    // of the winner's metadata.
    let query = crate::doc_query::DocQuery::parse(&req.query)?;
    let opts = DocOptions {
        revs: query.opts.revs,
        attachments: query.opts.attachments,
        att_encoding_info: query.opts.att_encoding_info,
        ..Default::default()
    };
    let snap = db.snapshot();
    let resolved: Vec<Resolved> = wanted
        .iter()
        .map(|w| resolve(&snap, w, &opts, query.latest, &state.node.limits))
        .collect::<HttpResult<_>>()?;
    // Multipart only for a client that does not take JSON, as CouchDB decides.
    if !req.accepts("application/json")
        && (req.accepts("multipart/mixed") || req.accepts("multipart/related"))
    {
        let outer = if req.accepts("multipart/mixed") {
            "multipart/mixed"
        } else {
            "multipart/related"
        };
        return multipart_results(&snap, &resolved, outer);
    }
    // The rendered revisions are spliced in as they are: no parse and re-encode per document.
    let mut out = b"{\"results\":[".to_vec();
    for (n, r) in resolved.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"id\":");
        serde_json::to_writer(&mut out, &r.id).expect("json");
        out.extend_from_slice(b",\"docs\":[");
        for (k, item) in r.items.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            match item {
                Ok(i) => {
                    let rec = r.record.as_ref().expect("found");
                    out.extend_from_slice(b"{\"ok\":");
                    out.extend_from_slice(&snap.render(r.id_str(), rec, *i, &r.opts)?);
                    out.push(b'}');
                }
                Err(e) => serde_json::to_writer(&mut out, e).expect("json"),
            }
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"]}");
    Ok(reply::json_bytes(200, out))
}

/// What one `_bulk_get` entry resolves to: revisions found (node indices of `record`) or
/// error objects, and the options to render them with.
struct Resolved {
    id: Value,
    record: Option<settee_db::DocRecord>,
    opts: DocOptions,
    items: Vec<Result<usize, Value>>,
}

impl Resolved {
    fn id_str(&self) -> &str {
        self.id.as_str().unwrap_or("")
    }
}

fn resolve(
    snap: &DbSnapshot,
    wanted: &Value,
    opts: &DocOptions,
    latest: bool,
    limits: &settee_db::DocLimits,
) -> HttpResult<Resolved> {
    let error = |id: &Value, rev: &Value, e: &str, r: &str| json!({"error": {"id": id, "rev": rev, "error": e, "reason": r}});
    let failed = |id: Value, rev: &Value, e: &str, r: &str| {
        Ok(Resolved {
            items: vec![Err(error(&id, rev, e, r))],
            id,
            record: None,
            opts: opts.clone(),
        })
    };
    let Some(id) = wanted.get("id").and_then(Value::as_str) else {
        return failed(
            Value::Null,
            &Value::Null,
            "bad_request",
            "document id missed",
        );
    };
    let idv = json!(id);
    if let Err(e) = limits.check_id(id) {
        let e = HttpError::from(e);
        return failed(idv, &Value::Null, &e.error, &e.reason);
    }
    // `atts_since` as CouchDB reads it: an empty list asks for nothing.
    let opts = match wanted.get("atts_since") {
        None | Some(Value::Null) => opts.clone(),
        Some(Value::Array(revs)) if revs.is_empty() => opts.clone(),
        Some(Value::Array(revs)) => match revs
            .iter()
            .map(|r| r.as_str().and_then(|s| Rev::parse(s).ok()).ok_or(r))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(revs) => DocOptions {
                attachments: true,
                atts_since: Some(revs),
                ..opts.clone()
            },
            Err(bad) => return failed(idv, bad, "bad_request", "Invalid rev format"),
        },
        Some(other) => {
            return failed(
                idv,
                other,
                "bad_request",
                "att_since value must be array of revs.",
            )
        }
    };
    let record = snap.record(id)?;
    let items = match (wanted.get("rev"), &record) {
        (Some(rev_value), _) => match Rev::parse(rev_value.as_str().unwrap_or("")) {
            Err(_) => vec![Err(error(
                &idv,
                rev_value,
                "bad_request",
                "Invalid rev format",
            ))],
            Ok(rev) => match record
                .as_ref()
                .and_then(|rec| rec.tree.find(&rev).map(|i| (rec, i)))
            {
                Some((rec, i)) if latest => rec.tree.leaves_below(i).into_iter().map(Ok).collect(),
                Some((rec, i)) if rec.tree.nodes[i].info.is_some() => vec![Ok(i)],
                _ => vec![Err(error(&idv, rev_value, "not_found", "missing"))],
            },
        },
        (None, None) => vec![Err(error(
            &idv,
            &json!("undefined"),
            "not_found",
            "missing",
        ))],
        (None, Some(rec)) => rec.tree.leaves().into_iter().map(Ok).collect(),
    };
    Ok(Resolved {
        id: idv,
        record,
        opts,
        items,
    })
}

/// `_bulk_get` as `multipart/mixed`: a part per revision (itself `multipart/related` when it
/// carries attachment bytes, which it does unless `atts_since` leaves them out), errors as
/// JSON parts flagged `error="true"`.
fn multipart_results(
    snap: &DbSnapshot,
    resolved: &[Resolved],
    outer: &str,
) -> HttpResult<Response> {
    let boundary = crate::auth::random_hex(16);
    let mut out = Vec::new();
    for r in resolved {
        for item in &r.items {
            match item {
                Ok(i) => {
                    let rec = r.record.as_ref().expect("found");
                    // As CouchDB: the bytes of every attachment not excluded by `atts_since`.
                    let every = DocOptions {
                        attachments: true,
                        ..r.opts.clone()
                    };
                    let (content_type, body) =
                        crate::multipart::related_doc(snap, r.id_str(), rec, *i, &every)?;
                    crate::multipart::write_part(
                        &mut out,
                        &boundary,
                        &[("Content-Type", content_type)],
                        &body,
                    );
                }
                Err(e) => {
                    let body = serde_json::to_vec(&e["error"]).expect("json");
                    crate::multipart::write_part(
                        &mut out,
                        &boundary,
                        &[("Content-Type", "application/json; error=\"true\"".into())],
                        &body,
                    );
                }
            }
        }
    }
    crate::multipart::write_end(&mut out, &boundary);
    Ok(reply::with_header(
        reply::bytes(200, out),
        hyper::header::CONTENT_TYPE,
        &format!("{outer}; boundary=\"{boundary}\""),
    ))
}

/// `POST /{db}/_revs_diff` (and the older `_missing_revs` shape).
pub async fn revs_diff(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    missing_revs: bool,
) -> HttpResult<Response> {
    post_json(req)?;
    let db = open(state, name)?;
    let body = req.json_object(state.max_request).await?;
    let snap = db.snapshot();
    let mut out = Map::new();
    for (id, revs) in body {
        let Value::Array(revs) = revs else {
            return Err(HttpError::bad_request("Invalid list of revisions"));
        };
        let revs = crate::doc::parse_revs(&revs)?;
        let Some((missing, ancestors)) = snap.revs_diff(&id, &revs)? else {
            continue;
        };
        let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
        if missing_revs {
            out.insert(id, json!(names));
            continue;
        }
        let mut entry = json!({"missing": names});
        if !ancestors.is_empty() {
            let ancestors: Vec<String> = ancestors.iter().map(ToString::to_string).collect();
            entry["possible_ancestors"] = json!(ancestors);
        }
        out.insert(id, entry);
    }
    let body = if missing_revs {
        json!({"missing_revs": out})
    } else {
        Value::Object(out)
    };
    Ok(reply::json(200, &body))
}
