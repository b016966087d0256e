//! Database endpoints: create, info, delete, `_all_docs` and friends, `_revs_limit`,
//! `_security`, compaction and commits.

use std::sync::Arc;

use hyper::header::LOCATION;
use hyper::Method;
use serde_json::{json, Value};
use settee_db::{AllDocsOptions, Database, DbSnapshot, DocRow, DESIGN_PREFIX};

use settee_config::registry as setting;

use crate::access;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Out, Response};
use crate::request::{Query, Req};
use crate::server::State;

/// `PUT/GET/HEAD/DELETE/POST /{db}`.
pub async fn handle(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    match req.method {
        Method::PUT => {
            access::server_admin(req)?;
            let (q, partitioned) = creation_options(req, name)?;
            let st = state.clone();
            let n = name.to_string();
            let how = settee_db::Creation {
                q,
                partitioned,
                security: Some(state.node.default_security()),
            };
            tokio::task::spawn_blocking(move || st.node.catalog.create_with(&n, how))
                .await
                .map_err(join_error)??;
            let location = crate::node::absolute_uri(
                state,
                req,
                &format!("/{}", crate::request::url_encode(name)),
            );
            Ok(reply::with_header(
                reply::json(201, &json!({"ok": true})),
                LOCATION,
                &location,
            ))
        }
        Method::GET | Method::HEAD => {
            let db = open(state, name)?;
            Ok(reply::json(200, &db_info(&db)?))
        }
        Method::DELETE => {
            access::server_admin(req)?;
            if req.query.get("rev").is_some() {
                return Err(HttpError::bad_request("You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?"));
            }
            let st = state.clone();
            let n = name.to_string();
            tokio::task::spawn_blocking(move || st.node.catalog.delete(&n))
                .await
                .map_err(join_error)??;
            Ok(reply::ok())
        }
        Method::POST => crate::doc::post(state, req, name).await,
        _ => Err(HttpError::method_not_allowed("DELETE,GET,HEAD,POST,PUT")),
    }
}

/// An open database, or 404. Opening one that is not open reads files and may wait for its
/// name's turn (another request opening or closing it): the event loop's thread is handed
/// over meanwhile, so other requests go on.
pub fn open(state: &State, name: &str) -> HttpResult<Arc<Database>> {
    if let Some(db) = state.node.catalog.get_open(name) {
        return Ok(db);
    }
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        Ok(tokio::task::block_in_place(|| {
            state.node.catalog.get(name)
        })?)
    } else {
        Ok(state.node.catalog.get(name)?)
    }
}

/// A blocking task that failed to finish.
pub fn join_error(_: tokio::task::JoinError) -> HttpError {
    HttpError::new(500, "unknown_error", "the operation failed")
}

/// CouchDB's database information object.
pub fn db_info(db: &Database) -> HttpResult<Value> {
    let _timer = settee_metrics::Timer::start(settee_metrics::Metric::Dbinfo);
    let snap = db.snapshot();
    let counts = snap.counts()?;
    let file = db.file_size();
    let purge = snap.purge_seq()?.encode();
    // Damaged nodes may leave the live size unknown; the rest is still worth answering.
    let active = snap.active_bytes().unwrap_or(0);
    let mut info = json!({
        "db_name": db.name(),
        "purge_seq": purge,
        "update_seq": snap.seq()?.encode(),
        "sizes": {"file": file, "external": counts.external, "active": active},
        "props": if db.partitioned() { json!({"partitioned": true}) } else { json!({}) },
        "doc_del_count": counts.deleted,
        "doc_count": counts.live,
        "disk_format_version": 8,
        "compact_running": db.compact_running(),
        "cluster": {"q": db.q(), "n": 1, "w": 1, "r": 1},
        "instance_start_time": "0",
    });
    // Not CouchDB's: damaged records met in the shard files (see `settee check`).
    let damage = db.damage();
    if !damage.is_empty() {
        let list: Vec<Value> = damage
            .into_iter()
            .map(|(shard, d)| json!({"shard": shard, "offset": d.offset, "reason": d.what}))
            .collect();
        info["damaged"] = Value::Array(list);
    }
    Ok(info)
}

/// `GET/POST /{db}/_all_docs`, `_design_docs` and `_local_docs`.
pub async fn all_docs(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    which: &str,
) -> HttpResult<Response> {
    let db = open(state, name)?;
    let mut keys: Option<Vec<Value>> = match req.query.json("keys")? {
        Some(Value::Array(k)) => Some(k),
        Some(_) => return Err(HttpError::bad_request("`keys` parameter must be an array.")),
        None => None,
    };
    let body = match req.method {
        Method::GET | Method::HEAD => None,
        Method::POST => {
            req.require_json()?;
            let body = req.json_object(state.max_request).await?;
            match body.get("keys") {
                Some(Value::Array(k)) => keys = Some(k.clone()),
                Some(_) => {
                    return Err(HttpError::bad_request(
                        "`keys` body member must be an array.",
                    ))
                }
                None => {}
            }
            Some(body)
        }
        _ => return Err(HttpError::method_not_allowed("GET,HEAD,POST")),
    };
    let q = &req.query.with_body(body.as_ref(), &["keys"]);
    let plan = AllDocsPlan::read(q, keys, which, db.partitioned())?;
    let snap = db.snapshot();
    let head = plan.head(&snap, which)?;
    let rows = plan.rows(&snap)?;
    Ok(reply::stream(200, move |sink| {
        plan.write(sink, &snap, &head, rows)?;
        sink.write(b"\n")
    }))
}

/// `POST /{db}/_all_docs/queries`, `_design_docs/queries` and `_local_docs/queries`: each
/// query object's members as that query's parameters (the query string's are defaults),
/// every query checked before any is answered.
pub async fn all_docs_queries(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    which: &str,
) -> HttpResult<Response> {
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    let db = open(state, name)?;
    let queries = req.queries(state.max_request).await?;
    let mut plans = Vec::with_capacity(queries.len());
    for members in &queries {
        let keys = match members.get("keys") {
            None => None,
            Some(Value::Array(k)) => Some(k.clone()),
            Some(_) => {
                return Err(HttpError::query_parse(
                    "`keys` must be an array of strings.",
                ))
            }
        };
        let params = req.query.overridden_by(members, &["keys"]);
        plans.push(AllDocsPlan::read(&params, keys, which, db.partitioned())?);
    }
    let snap = db.snapshot();
    let mut out = b"{\"results\":[\r\n".to_vec();
    for (i, plan) in plans.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",\r\n");
        }
        let head = plan.head(&snap, which)?;
        let rows = plan.rows(&snap)?;
        let _ = plan.write(&mut out, &snap, &head, rows);
    }
    out.extend_from_slice(b"\r\n]}\n");
    Ok(reply::json_bytes(200, out))
}

/// One `_all_docs`-like query, its parameters checked.
struct AllDocsPlan {
    opts: AllDocsOptions,
    keys: Option<Vec<Value>>,
    update_seq: bool,
}

impl AllDocsPlan {
    /// Reads the parameters of `which` (`_all_docs`, `_design_docs`, `_local_docs`) in a
    /// database that is `partitioned` or not.
    fn read(
        q: &Query,
        mut keys: Option<Vec<Value>>,
        which: &str,
        partitioned: bool,
    ) -> HttpResult<AllDocsPlan> {
        let partition = crate::partition::param(q)?;
        if partition.is_some() && !partitioned {
            return Err(HttpError::query_parse(
                "`partition` parameter is not supported on this db",
            ));
        }
        let range = q.key_range()?;
        if keys.as_ref().is_some_and(|k| !k.is_empty())
            && (range.start_key.is_some() || range.end_key.is_some())
        {
            return Err(HttpError::query_parse(
                "`keys` is incompatible with `key`, `start_key` and `end_key`",
            ));
        }
        let (start, end) = range.id_bounds();
        let mut opts = AllDocsOptions {
            start,
            end,
            inclusive_end: q.bool("inclusive_end")?.unwrap_or(true),
            descending: q.flag("descending")?,
            skip: q.u64("skip")?.unwrap_or(0),
            limit: q.u64("limit")?,
            include_docs: q.flag("include_docs")?,
            doc: q.doc_options()?,
            local: which == "_local_docs",
        };
        if let Some(p) = partition.filter(|_| which == "_all_docs") {
            let (lo, hi) = settee_db::partition_range(p);
            clamp(&mut opts, lo, hi);
        }
        if which == "_design_docs" {
            clamp(
                &mut opts,
                DESIGN_PREFIX.to_string(),
                settee_db::DESIGN_END.to_string(),
            );
            // As CouchDB: `_design_docs` leaves out keys that name no design document.
            if let Some(keys) = keys.as_mut() {
                keys.retain(|k| k.as_str().is_none_or(|id| id.starts_with(DESIGN_PREFIX)));
            }
        }
        Ok(AllDocsPlan {
            opts,
            keys,
            update_seq: q.flag("update_seq")?,
        })
    }

    /// `total_rows` (CouchDB counts the rows of the namespace asked for; local documents
    /// are not counted), `offset` and `update_seq`.
    fn head(&self, snap: &DbSnapshot, which: &str) -> HttpResult<Head> {
        let total = match which {
            "_local_docs" => None,
            "_design_docs" => Some(snap.design_doc_count()?),
            _ => Some(snap.counts()?.live),
        };
        let null = || "null".to_string();
        let seq = match (self.update_seq, &total, &self.keys) {
            (false, _, _) => None,
            (true, None, _) | (true, _, Some(_)) => Some(null()),
            (true, Some(_), None) => Some(format!("\"{}\"", snap.seq()?.encode())),
        };
        let offset = match (total, &self.keys) {
            (None, _) | (_, Some(_)) => null(),
            (Some(t), None) => t
                .min(
                    snap.offset_of(self.opts.start.as_deref(), self.opts.descending)?
                        + self.opts.skip,
                )
                .to_string(),
        };
        Ok(Head {
            total: total.map_or_else(null, |t| t.to_string()),
            offset,
            seq,
        })
    }

    /// The rows of a range query (none for a `keys` query, whose rows are looked up).
    fn rows(&self, snap: &DbSnapshot) -> HttpResult<Option<settee_db::AllDocs>> {
        Ok(match self.keys {
            Some(_) => None,
            None => Some(snap.all_docs(self.opts.clone())?),
        })
    }

    /// Writes the answer: the head, then every row.
    fn write(
        &self,
        out: &mut impl Out,
        snap: &DbSnapshot,
        head: &Head,
        rows: Option<settee_db::AllDocs>,
    ) -> Result<(), crate::reply::Gone> {
        out.put(head.text().as_bytes())?;
        match (&self.keys, rows) {
            (Some(keys), _) => self.write_keyed(out, snap, keys)?,
            (None, Some(rows)) => {
                let mut first = true;
                for row in rows {
                    let row = match row {
                        Ok(r) => r,
                        Err(e) => {
                            tracing::error!(error = %e, "reading _all_docs");
                            break;
                        }
                    };
                    out.put(if first { b"" } else { b",\r\n" })?;
                    first = false;
                    write_row(out, &row)?;
                }
            }
            (None, None) => {}
        }
        out.put(b"\r\n]}")
    }

    /// `keys` rows in request order, deleted documents shown as CouchDB does.
    fn write_keyed(
        &self,
        out: &mut impl Out,
        snap: &DbSnapshot,
        keys: &[Value],
    ) -> Result<(), crate::reply::Gone> {
        let opts = &self.opts;
        let keys: Vec<&Value> = if opts.descending {
            keys.iter().rev().collect()
        } else {
            keys.iter().collect()
        };
        let limit = opts.limit.map_or(usize::MAX, |l| l as usize);
        for (i, key) in keys
            .into_iter()
            .skip(opts.skip as usize)
            .take(limit)
            .enumerate()
        {
            out.put(if i == 0 { b"" } else { b",\r\n" })?;
            let row = keyed_row(snap, key, opts);
            out.put(&serde_json::to_vec(&row).expect("json"))?;
        }
        Ok(())
    }
}

/// What an `_all_docs` answer starts with, each value as JSON text.
struct Head {
    total: String,
    offset: String,
    seq: Option<String>,
}

impl Head {
    /// `{"total_rows":…,"offset":…,["update_seq":…,]"rows":[`.
    fn text(&self) -> String {
        let seq = self
            .seq
            .as_ref()
            .map_or_else(String::new, |s| format!("\"update_seq\":{s},"));
        format!(
            "{{\"total_rows\":{},\"offset\":{},{seq}\"rows\":[\r\n",
            self.total, self.offset
        )
    }
}

/// Narrows a range of ids to `[lo, hi)` (the design documents, or one partition).
fn clamp(opts: &mut AllDocsOptions, lo: String, hi: String) {
    let (start, end) = if opts.descending {
        (&mut opts.end, &mut opts.start)
    } else {
        (&mut opts.start, &mut opts.end)
    };
    if start.as_ref().is_none_or(|s| *s < lo) {
        *start = Some(lo);
    }
    if end.as_ref().is_none_or(|e| *e > hi) {
        *end = Some(hi);
        if !opts.descending {
            opts.inclusive_end = false;
        }
    }
}

fn write_row(out: &mut impl Out, row: &DocRow) -> Result<(), crate::reply::Gone> {
    let mut line = Vec::with_capacity(96 + row.doc.as_ref().map_or(0, Vec::len));
    line.extend_from_slice(b"{\"id\":");
    settee_json::body::write_str(&mut line, &row.id);
    line.extend_from_slice(b",\"key\":");
    settee_json::body::write_str(&mut line, &row.id);
    line.extend_from_slice(b",\"value\":{\"rev\":\"");
    line.extend_from_slice(row.rev.to_string().as_bytes());
    line.extend_from_slice(b"\"}");
    if let Some(doc) = &row.doc {
        line.extend_from_slice(b",\"doc\":");
        line.extend_from_slice(doc);
    }
    line.push(b'}');
    out.put(&line)
}

fn keyed_row(snap: &settee_db::DbSnapshot, key: &Value, opts: &AllDocsOptions) -> Value {
    let Some(id) = key.as_str() else {
        return json!({"key": key, "error": "not_found"});
    };
    if settee_db::is_local(id) {
        return local_row(snap, id, opts);
    }
    let record = match snap.record(id) {
        Ok(Some(r)) => r,
        Ok(None) => return json!({"key": key, "error": "not_found"}),
        Err(e) => return json!({"key": key, "error": "unknown_error", "reason": e.to_string()}),
    };
    let Some(w) = record.tree.winner() else {
        return json!({"key": key, "error": "not_found"});
    };
    let node = &record.tree.nodes[w];
    if node.deleted {
        let mut row =
            json!({"id": id, "key": id, "value": {"rev": node.rev.to_string(), "deleted": true}});
        if opts.include_docs {
            row["doc"] = Value::Null;
        }
        return row;
    }
    let mut row = json!({"id": id, "key": id, "value": {"rev": node.rev.to_string()}});
    if opts.include_docs {
        row["doc"] = snap
            .render(id, &record, w, &opts.doc)
            .ok()
            .and_then(|b| settee_json::deep::from_slice(&b).ok())
            .unwrap_or(Value::Null);
    }
    row
}

/// A `keys` row for a local document, which CouchDB opens like any other.
fn local_row(snap: &settee_db::DbSnapshot, id: &str, opts: &AllDocsOptions) -> Value {
    let (n, stored) = match snap.local(id) {
        Ok(Some(found)) => found,
        Ok(None) => return json!({"key": id, "error": "not_found"}),
        Err(e) => return json!({"key": id, "error": "unknown_error", "reason": e.to_string()}),
    };
    let rev = format!("0-{n}");
    let mut row = json!({"id": id, "key": id, "value": {"rev": rev}});
    if opts.include_docs {
        row["doc"] =
            settee_json::deep::from_slice(&crate::doc::local_json(id, &rev, &stored, None))
                .unwrap_or(Value::Null);
    }
    row
}

/// `_revs_limit` and `_security`.
pub async fn meta(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    which: &str,
) -> HttpResult<Response> {
    let db = open(state, name)?;
    match (&req.method, which) {
        (&Method::GET | &Method::HEAD, "_revs_limit") => {
            Ok(reply::json(200, &json!(db.snapshot().meta()?.revs_limit)))
        }
        (&Method::GET | &Method::HEAD, "_purged_infos_limit") => Ok(reply::json(
            200,
            &json!(db.snapshot().meta()?.purged_infos_limit),
        )),
        (&Method::GET | &Method::HEAD, "_security") => {
            let sec = db.snapshot().meta()?.security;
            Ok(reply::json_bytes(
                200,
                if sec.is_empty() { b"{}".to_vec() } else { sec },
            ))
        }
        (&Method::PUT, "_revs_limit" | "_purged_infos_limit") => {
            access::db_admin(req, &db)?;
            let limit = match req.json(1 << 20).await? {
                Value::Number(n) => n.as_u64().filter(|&n| n > 0),
                _ => None,
            };
            // CouchDB's text for the purge limit; its revision limit has none (a 500), so the
            // same words serve.
            let reason = if which == "_revs_limit" {
                "`revs_limit` must be a positive integer"
            } else {
                "`purge_infos_limit` must be positive integer"
            };
            let limit = limit.ok_or_else(|| HttpError::bad_request(reason))?;
            if which == "_revs_limit" {
                db.update_meta(move |m| m.revs_limit = limit).await?;
            } else {
                db.update_meta(move |m| m.purged_infos_limit = limit)
                    .await?;
            }
            Ok(reply::ok())
        }
        (&Method::PUT, "_security") => {
            // Refused before the body is read, as CouchDB refuses it.
            state.node.may_set_security(req.user.as_ref(), &db)?;
            let sec = req.json(state.max_request).await?;
            (state.node)
                .set_security(req.user.as_ref(), &db, &sec)
                .await?;
            Ok(reply::ok())
        }
        _ => Err(HttpError::method_not_allowed("GET,HEAD,PUT")),
    }
}

/// Checks the options of creating database `name` in CouchDB's order and with its texts,
/// and gives its shard count `q` and whether it is partitioned: `n` is checked (one copy is
/// all there is, whatever it says), and so is `engine`, which Settee does not have.
fn creation_options(req: &Req, name: &str) -> HttpResult<(Option<usize>, bool)> {
    positive_int(req, "n")?;
    let q = positive_int(req, "q")?.map(|q| q as usize);
    if req.query.get("engine").is_some_and(|e| e != "couch") {
        return Err(HttpError::bad_request("invalid_engine_extension"));
    }
    match req.query.get("partitioned") {
        None | Some("false") => Ok((q, false)),
        Some("true") if name.starts_with('_') => {
            Err(HttpError::bad_request("Cannot partition a system database"))
        }
        Some("true") => Ok((q, true)),
        Some(_) => Err(HttpError::bad_request("Invalid `partitioned` parameter")),
    }
}

/// A creation option that must be a positive integer when given.
fn positive_int(req: &Req, name: &str) -> HttpResult<Option<u64>> {
    match req.query.get(name) {
        None => Ok(None),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(HttpError::bad_request(format!(
                "The `{name}` value should be a positive integer."
            ))),
        },
    }
}

/// `_compact`, `_ensure_full_commit`, `_view_cleanup`, `_purge`.
pub async fn maintenance(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    which: &str,
) -> HttpResult<Response> {
    if req.method != Method::POST {
        return Err(HttpError::method_not_allowed("POST"));
    }
    let db = open(state, name)?;
    match which {
        "_compact" if req.segments.len() == 2 => {
            access::maintenance_admin(req, &db)?;
            req.require_json()?;
            // As CouchDB: asking while a compaction runs (the automatic one, say) joins it.
            db.start_compaction();
            Ok(reply::json(202, &json!({"ok": true})))
        }
        "_ensure_full_commit" => {
            req.require_json()?;
            let d = db.clone();
            tokio::task::spawn_blocking(move || d.flush())
                .await
                .map_err(join_error)??;
            Ok(reply::json(
                201,
                &json!({"ok": true, "instance_start_time": "0"}),
            ))
        }
        "_view_cleanup" => {
            req.require_json()?;
            let d = db.clone();
            tokio::task::spawn_blocking(move || crate::view::cleanup(&d))
                .await
                .map_err(join_error)??;
            Ok(reply::json(202, &json!({"ok": true})))
        }
        "_purge" => {
            settee_metrics::inc(settee_metrics::Metric::HttpdPurgeRequests);
            purge(state, req, &db).await
        }
        _ => Err(HttpError::not_found(format!("no {which} here"))),
    }
}

/// `POST /{db}/_purge`: `{"docid": ["rev", …]}` removes those leaf revisions for good.
async fn purge(state: &Arc<State>, req: &mut Req, db: &Arc<Database>) -> HttpResult<Response> {
    access::db_admin(req, db)?;
    req.require_json()?;
    let body = req.json_object(state.max_request).await?;
    let (most_ids, most_revs) = {
        let config = state.node.config.read().expect("config lock");
        (
            config.value(&setting::PURGE_MAX_DOCUMENT_ID_NUMBER),
            config.value(&setting::PURGE_MAX_REVISIONS_NUMBER),
        )
    };
    if body.len() > most_ids {
        return Err(HttpError::bad_request(
            "Exceeded maximum number of documents.",
        ));
    }
    if body
        .values()
        .map(|revs| revs.as_array().map_or(0, Vec::len))
        .sum::<usize>()
        > most_revs
    {
        return Err(HttpError::bad_request(
            "Exceeded maximum number of revisions.",
        ));
    }
    let mut docs = Vec::with_capacity(body.len());
    for (id, revs) in body {
        let Value::Array(revs) = revs else {
            return Err(HttpError::bad_request("Invalid list of revisions"));
        };
        let revs = crate::doc::parse_revs(&revs)?;
        docs.push((id, revs));
    }
    let purged = db.purge(docs).await?;
    let purged: serde_json::Map<String, Value> = purged
        .into_iter()
        .map(|(id, revs)| {
            (
                id,
                json!(revs.iter().map(ToString::to_string).collect::<Vec<_>>()),
            )
        })
        .collect();
    Ok(reply::json(
        201,
        &json!({"purge_seq": Value::Null, "purged": purged}),
    ))
}
