//! `validate_doc_update` functions: every design document's function runs on every write
//! of a normal document (interactive or replicated), with the new document, the current one,
//! the user context and the security object; the first refusal wins, as in CouchDB.

use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};
use settee_db::{
    is_local, AllDocsOptions, Database, DbSnapshot, DocOptions, NewDoc, DESIGN_PREFIX,
};

use settee_auth::User;

use crate::error::{join_error, Error, Result};
use crate::Node;

/// One design document's validation function.
struct Validator {
    /// Engine cache key: design document id and revision.
    key: String,
    language: String,
    source: String,
    /// The design document, for `require` and `this` (and for external query servers).
    ddoc: Value,
}

/// A refusal: CouchDB's error name and the reason.
type Refusal = Option<(String, String)>;

/// The validation functions of a database and the shards' design-change counts they were
/// read at ([`settee_db::DbSnapshot::design_changes`]): writes find them without looking at
/// the design documents until one of those changes.
#[derive(Default)]
struct Cached(Mutex<Option<ReadAt>>);

/// Validation functions and the design-change counts of the snapshot they were read from.
type ReadAt = (Vec<u64>, Arc<Vec<Validator>>);

/// The database's validation functions, as of `snap`.
fn validators(db: &Database, snap: &DbSnapshot) -> Result<Arc<Vec<Validator>>> {
    let changes = snap.design_changes()?;
    let cache = db.extension(Cached::default);
    if let Some((at, found)) = &*cache.0.lock().expect("validators cache") {
        if *at == changes {
            return Ok(found.clone());
        }
    }
    let found = Arc::new(read_validators(snap)?);
    // Two writers may read at once, one an older snapshot: whichever is kept is exact for
    // its counts, and a write with other counts reads again.
    *cache.0.lock().expect("validators cache") = Some((changes, found.clone()));
    Ok(found)
}

/// Reads the validation functions of the design documents in `snap`.
fn read_validators(snap: &DbSnapshot) -> Result<Vec<Validator>> {
    // Most databases have no design documents; their trees' counts say so without a scan.
    if snap.design_doc_count()? == 0 {
        return Ok(Vec::new());
    }
    let opts = AllDocsOptions::design_docs();
    let mut found = Vec::new();
    for row in snap.all_docs(opts)? {
        let row = row?;
        let Ok(body) = snap.open_doc(&row.id, None, &DocOptions::default()) else {
            continue;
        };
        let Ok(ddoc) = settee_json::deep::from_slice::<Value>(&body) else {
            continue;
        };
        let Some(source) = ddoc.get("validate_doc_update").and_then(Value::as_str) else {
            continue;
        };
        let language = ddoc
            .get("language")
            .and_then(Value::as_str)
            .unwrap_or("javascript")
            .to_string();
        found.push(Validator {
            key: format!("vdu:{}:{}", row.id, row.rev),
            language,
            source: source.to_string(),
            ddoc,
        });
    }
    Ok(found)
}

/// The document as validation functions see it: its members with `_id`, the parent `_rev`,
/// `_revisions` and `_deleted`.
fn new_doc_json(doc: &NewDoc) -> Value {
    let mut map: Map<String, Value> = settee_json::deep::from_slice(&doc.body).unwrap_or_default();
    map.insert("_id".into(), json!(doc.id));
    if let Some(rev) = doc.revs.first() {
        map.insert("_rev".into(), json!(rev.to_string()));
        let ids: Vec<String> = doc.revs.iter().map(|r| r.id.to_string()).collect();
        map.insert("_revisions".into(), json!({"start": rev.pos, "ids": ids}));
    }
    if doc.deleted {
        map.insert("_deleted".into(), json!(true));
    }
    Value::Object(map)
}

/// Runs the database's validation functions over `docs` as `user` (design and local
/// documents are not validated), recording a refusal in `out` for each document refused.
pub(crate) async fn run(
    node: &Node,
    user: Option<&User>,
    db: &Arc<Database>,
    docs: &[NewDoc],
    out: &mut [Option<Error>],
) -> Result<()> {
    let snap = db.snapshot();
    let validators = validators(db, &snap)?;
    if validators.is_empty() {
        return Ok(());
    }
    let mut jobs = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        if out[i].is_some() || doc.id.starts_with(DESIGN_PREFIX) || is_local(&doc.id) {
            continue;
        }
        let old = snap
            .open_doc(&doc.id, None, &DocOptions::default())
            .ok()
            .map_or_else(
                || "null".to_string(),
                |b| String::from_utf8_lossy(&b).into_owned(),
            );
        jobs.push((i, new_doc_json(doc).to_string(), old));
    }
    let ctx = settee_auth::user_ctx(user, Some(db.name())).to_string();
    let sec = String::from_utf8(snap.meta()?.security)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "{}".into());
    let (limits, servers) = (node.views.pool().limits(), node.views.servers().clone());
    let verdicts = tokio::task::spawn_blocking(move || -> Vec<(usize, Verdict)> {
        jobs.into_iter()
            .map(|(i, new, old)| {
                (
                    i,
                    first_refusal(&validators, &servers, limits, &new, &old, &ctx, &sec),
                )
            })
            .collect()
    })
    .await
    .map_err(join_error)?;
    for (i, verdict) in verdicts {
        out[i] = match verdict {
            Ok(None) => None,
            Ok(Some((error, reason))) => Some(match error.as_str() {
                "forbidden" => Error::Forbidden(reason),
                "unauthorized" => Error::Unauthorized(reason),
                _ => Error::Refused { error, reason },
            }),
            Err(reason) => Some(Error::Failed(reason)),
        };
    }
    Ok(())
}

/// What the validators said of one write: a refusal, or why they could not run.
type Verdict = std::result::Result<Refusal, String>;

/// The first refusal of any validator for one write.
fn first_refusal(
    validators: &[Validator],
    servers: &settee_queryserver::QueryServers,
    limits: settee_js::Limits,
    new: &str,
    old: &str,
    ctx: &str,
    sec: &str,
) -> Verdict {
    for v in validators {
        let verdict = if v.language == "javascript" {
            settee_js::with_local_engine(limits, |e| {
                e.load_validator(&v.key, &v.source, &v.ddoc.to_string())?;
                e.validate(
                    &v.key,
                    new.to_string(),
                    old.to_string(),
                    ctx.to_string(),
                    sec.to_string(),
                )
            })
            .map_err(|e| e.to_string())?
        } else {
            external(servers, v, new, old, ctx, sec)?
        };
        if verdict.is_some() {
            return Ok(verdict);
        }
    }
    Ok(None)
}

/// A validation function in another language, through its query server's `ddoc` command.
fn external(
    servers: &settee_queryserver::QueryServers,
    v: &Validator,
    new: &str,
    old: &str,
    ctx: &str,
    sec: &str,
) -> Verdict {
    let parse = |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::Null);
    let args = json!([parse(new), parse(old), parse(ctx), parse(sec)]);
    let mut process = servers.checkout(&v.language).map_err(|e| e.to_string())?;
    let timeout = process.timeout();
    let answer = process
        .ddoc(&v.ddoc, &["validate_doc_update"], &args, timeout)
        .map_err(|e| e.to_string())?;
    if answer == json!(1) || answer == json!(true) {
        return Ok(None);
    }
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    for kind in ["forbidden", "unauthorized"] {
        if let Some(reason) = answer.get(kind) {
            return Ok(Some((kind.to_string(), text(reason))));
        }
    }
    Ok(Some(("unknown_error".to_string(), text(&answer))))
}
