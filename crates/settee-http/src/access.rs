//! Who may do what, decided at the HTTP edge as CouchDB 3 decides it: server-admin-only
//! endpoints, database membership and database admins from each database's security object,
//! and the special rules of the users database.

use std::sync::{Arc, Mutex};

use hyper::Method;
use serde_json::Value;
use settee_auth::{users, Denied, SecurityObject, User};
use settee_db::{is_local, Database, NewDoc, DESIGN_PREFIX};

use settee_config::registry as setting;

use crate::error::{HttpError, HttpResult};
use crate::request::Req;
use crate::server::State;

/// The security object CouchDB 3 gives new databases under `[couchdb] default_security =
/// admin_only` (the default): only server admins may use them.
pub const ADMIN_ONLY: &[u8] = br#"{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}"#;

/// The security object for a database being created, from `[couchdb] default_security`.
pub fn default_security(state: &State) -> Vec<u8> {
    match state
        .config
        .read()
        .expect("config lock")
        .get("couchdb", "default_security")
    {
        Some("everyone" | "admin_local") => Vec::new(),
        _ => ADMIN_ONLY.to_vec(),
    }
}

/// A database's parsed security object, kept with the database and re-read when the stored
/// bytes change.
#[derive(Default)]
struct Cached(Mutex<(Vec<u8>, Arc<SecurityObject>)>);

/// The security object of `db`.
pub fn security(db: &Database) -> HttpResult<Arc<SecurityObject>> {
    let stored = db.snapshot().meta()?.security;
    let cache = db.extension(Cached::default);
    let mut slot = cache.0.lock().expect("security cache");
    if slot.0 != stored {
        *slot = (stored.clone(), Arc::new(SecurityObject::parse(&stored)));
    }
    Ok(slot.1.clone())
}

fn denied(d: Denied) -> HttpError {
    match d {
        Denied::Unauthorized(reason) => HttpError::new(401, "unauthorized", reason),
        Denied::Forbidden(reason) => HttpError::new(403, "forbidden", reason),
    }
}

/// Fails with CouchDB's `You are not a server admin.` (401 for everyone) unless the caller is one.
pub fn server_admin(req: &Req) -> HttpResult<()> {
    if req.is_admin() {
        Ok(())
    } else {
        Err(HttpError::new(
            401,
            "unauthorized",
            "You are not a server admin.",
        ))
    }
}

/// Fails unless the caller is a member of `db` (401 anonymous, 403 otherwise).
pub fn member(req: &Req, db: &Database) -> HttpResult<()> {
    if req.is_admin() {
        return Ok(());
    }
    security(db)?
        .check_member(req.user.as_ref())
        .map_err(denied)
}

/// Fails unless the caller administers `db`: `You are not a db or server admin.` (401
/// anonymous, 403 otherwise), as CouchDB answers design-document and `_security` writes.
pub fn db_admin(req: &Req, db: &Database) -> HttpResult<()> {
    if req.is_admin() {
        return Ok(());
    }
    security(db)?.check_admin(req.user.as_ref()).map_err(denied)
}

/// Whether the caller administers `db`.
pub fn is_db_admin(user: Option<&User>, db: &Database) -> HttpResult<bool> {
    Ok(user.is_some_and(User::is_admin) || security(db)?.is_admin(user))
}

/// CouchDB's `require_db_admin` for compaction and view cleanup: members who are not admins
/// get 401 `You are not a server or db admin.` whoever they are.
pub fn maintenance_admin(req: &Req, db: &Database) -> HttpResult<()> {
    member(req, db)?;
    if is_db_admin(req.user.as_ref(), db)? {
        Ok(())
    } else {
        Err(HttpError::new(
            401,
            "unauthorized",
            "You are not a server or db admin.",
        ))
    }
}

/// The checks every request to `/{db}/…` passes before its handler runs: database creation
/// and deletion are for server admins; `_all_docs` and `_changes` of the users and replicator
/// databases too; compaction and view cleanup for database admins; everything else for
/// members (finer checks, such as design-document writes, happen in the handlers).
pub fn check_db_request(state: &State, req: &Req, name: &str) -> HttpResult<()> {
    if req.is_admin() {
        return Ok(());
    }
    let second = req.segments.get(1).map(String::as_str);
    if second.is_none() && (req.method == Method::PUT || req.method == Method::DELETE) {
        return server_admin(req);
    }
    let guarded = is_users_db(state, name) || name == REPLICATOR;
    if guarded && matches!(second, Some("_all_docs" | "_changes")) {
        return server_admin(req);
    }
    let db = crate::db::open(state, name)?;
    match second {
        Some("_compact" | "_view_cleanup") => maintenance_admin(req, &db)?,
        _ => member(req, &db)?,
    }
    // Members may not use the other listings of user or replication documents either: they
    // would bypass the per-document rules. (Asked by others, they fail as CouchDB's do, on
    // membership, above.)
    if guarded
        && second.is_some_and(|s| {
            s.starts_with('_') && s != "_design" && s != "_local" && s != "_security"
        })
    {
        return server_admin(req);
    }
    Ok(())
}

/// Checks and prepares document writes before they are saved; one answer per document,
/// `None` for those that may be saved. Design documents need a database admin and must be
/// valid; documents of the users database follow its rules and have passwords hashed (off
/// the event loop); every other document passes the `validate_doc_update` functions.
pub async fn check_writes(
    state: &Arc<State>,
    req: &Req,
    db: &Arc<Database>,
    docs: &mut [NewDoc],
) -> Vec<Option<HttpError>> {
    let user = req.user.as_ref();
    let admin = match is_db_admin(user, db) {
        Ok(a) => a,
        Err(e) => return vec![Some(e); docs.len()],
    };
    let mut out: Vec<Option<HttpError>> = vec![None; docs.len()];
    if !admin {
        let err = security(db)
            .and_then(|s| s.check_admin(user).map_err(denied))
            .err();
        for (i, d) in docs.iter().enumerate() {
            if d.id.starts_with(DESIGN_PREFIX) {
                out[i] = err.clone().or_else(|| {
                    Some(HttpError::new(
                        403,
                        "forbidden",
                        "You are not a db or server admin.",
                    ))
                });
            }
        }
    } else {
        out = crate::view::validate_design_docs(state, docs).await;
    }
    if is_users_db(state, db.name()) {
        let iterations = state
            .config
            .read()
            .expect("config lock")
            .value::<u32>(&setting::ITERATIONS);
        for (doc, slot) in docs.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() && !doc.id.starts_with(DESIGN_PREFIX) && !is_local(&doc.id) {
                *slot = prepare_user_doc(db, doc, user, admin, iterations)
                    .await
                    .err();
            }
        }
    }
    if db.name() == REPLICATOR && !admin {
        for (doc, slot) in docs.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() && !doc.id.starts_with(DESIGN_PREFIX) && !is_local(&doc.id) {
                *slot = own_replication_doc(db, doc, user).err();
            }
        }
    }
    if let Err(e) = crate::validate::run(state, req, db, docs, &mut out).await {
        return vec![Some(e); docs.len()];
    }
    out
}

/// The users database's rules for one document write, with its password hashed.
async fn prepare_user_doc(
    db: &Arc<Database>,
    doc: &mut NewDoc,
    user: Option<&User>,
    admin: bool,
    iterations: u32,
) -> HttpResult<()> {
    if !users::may_write(user, &doc.id, admin) {
        return Err(HttpError::not_found("missing"));
    }
    let body: serde_json::Map<String, Value> = settee_json::deep::from_slice(&doc.body)
        .map_err(|_| HttpError::bad_request("Document must be a JSON object"))?;
    let body = tokio::task::spawn_blocking(move || {
        let mut body = body;
        users::hash_password(&mut body, iterations);
        body
    })
    .await
    .map_err(crate::db::join_error)?;
    let old = db
        .snapshot()
        .open_doc(&doc.id, None, &settee_db::DocOptions::default())
        .ok()
        .and_then(|b| settee_json::deep::from_slice::<Value>(&b).ok());
    let mut body = body;
    if !admin {
        users::keep_credentials(&mut body, old.as_ref());
    }
    users::validate(&doc.id, doc.deleted, &body, old.as_ref(), user, admin)
        .map_err(|e| HttpError::new(403, "forbidden", e.to_string()))?;
    doc.set_body(&body);
    Ok(())
}

/// What a caller who does not administer the users database may see of user document `id`
/// (rendered as `doc`): their own document whole, others only through `[chttpd_auth]
/// public_fields`, design documents not at all.
pub fn filter_user_doc(
    state: &State,
    req: &Req,
    db: &Database,
    id: &str,
    doc: Vec<u8>,
) -> HttpResult<Vec<u8>> {
    if is_db_admin(req.user.as_ref(), db)? {
        return Ok(doc);
    }
    if id.starts_with(DESIGN_PREFIX) {
        return Err(HttpError::new(
            403,
            "forbidden",
            "Only administrators can view design docs in the users database.",
        ));
    }
    let public: Vec<String> = {
        let config = state.config.read().expect("config lock");
        config
            .get("chttpd_auth", "public_fields")
            .unwrap_or("")
            .split(',')
            .map(|f| f.trim().to_string())
            .filter(|f| !f.is_empty())
            .collect()
    };
    let value: Value = settee_json::deep::from_slice(&doc)
        .map_err(|_| HttpError::new(500, "unknown_error", "a stored document is not valid JSON"))?;
    let shown = users::visible(id, value, req.user.as_ref(), false, &public)
        .ok_or_else(|| HttpError::not_found("missing"))?;
    Ok(serde_json::to_vec(&shown).expect("json"))
}

/// Whether `db` is the users database.
pub fn is_users_db(state: &State, db: &str) -> bool {
    db == state.settings.load().users_db
}

/// `[chttpd] require_valid_user` (or `require_valid_user_except_for_up`): anonymous requests
/// get 401 `Authentication required.`, except logging in (`POST /_session`) and, with the
/// second setting, `/_up`.
pub fn requires_valid_user(state: &State, first: Option<&str>, method: &Method) -> bool {
    let settings = state.settings.load();
    let (all, except_up) = (
        settings.require_valid_user,
        settings.require_valid_user_except_for_up,
    );
    if !all && !except_up {
        return false;
    }
    match first {
        Some("_session") if *method == Method::POST => false,
        Some("_up") => all && !except_up,
        _ => true,
    }
}

/// The `WWW-Authenticate` value for a 401 answer, as CouchDB chooses it: the request's
/// `X-CouchDB-WWW-Authenticate`, else `[chttpd] WWW-Authenticate`, else `Basic
/// realm="server"` when every request must authenticate; otherwise none, so browsers do not
/// show a login prompt to applications.
pub fn www_authenticate(
    state: &State,
    asked: Option<hyper::header::HeaderValue>,
) -> Option<String> {
    if let Some(asked) = asked.as_ref().and_then(|v| v.to_str().ok()) {
        return Some(asked.to_string());
    }
    let config = state.config.read().expect("config lock");
    if let Some(configured) = config
        .get("chttpd", "WWW-Authenticate")
        .or_else(|| config.get("httpd", "WWW-Authenticate"))
    {
        return Some(configured.to_string());
    }
    config
        .value::<bool>(&setting::REQUIRE_VALID_USER)
        .then(|| "Basic realm=\"server\"".to_string())
}

/// The replicator database.
pub const REPLICATOR: &str = "_replicator";

const OTHER_USERS: &str = "Can't update replication documents from other users.";

/// A replication document written by someone who does not administer `_replicator`: it must
/// be theirs (its `owner`), and becomes theirs when it names no owner.
fn own_replication_doc(db: &Database, doc: &mut NewDoc, user: Option<&User>) -> HttpResult<()> {
    let name = user.map(|u| u.name.as_str());
    let old = db
        .snapshot()
        .open_doc(&doc.id, None, &settee_db::DocOptions::default())
        .ok()
        .and_then(|b| settee_json::deep::from_slice::<Value>(&b).ok());
    if let Some(old_owner) = old.as_ref().and_then(|o| o.get("owner")) {
        if old_owner.as_str() != name {
            return Err(HttpError::new(403, "forbidden", OTHER_USERS));
        }
    }
    let mut body: serde_json::Map<String, Value> = settee_json::deep::from_slice(&doc.body)
        .map_err(|_| HttpError::bad_request("Document must be a JSON object"))?;
    match body.get("owner") {
        None | Some(Value::Null) => {
            body.insert(
                "owner".into(),
                name.map_or(Value::Null, |n| Value::String(n.to_string())),
            );
            doc.set_body(&body);
        }
        Some(owner) if owner.as_str() == name => {}
        Some(_) => return Err(HttpError::new(403, "forbidden", OTHER_USERS)),
    }
    Ok(())
}

/// A replication document as a reader who neither owns it nor administers `_replicator` sees
/// it: without the credentials of its endpoints (user info in URLs, `headers`, `auth`).
pub fn filter_replication_doc(req: &Req, db: &Database, doc: Vec<u8>) -> HttpResult<Vec<u8>> {
    if is_db_admin(req.user.as_ref(), db)? {
        return Ok(doc);
    }
    let Ok(Value::Object(mut members)) = settee_json::deep::from_slice::<Value>(&doc) else {
        return Ok(doc);
    };
    if members
        .get("owner")
        .and_then(Value::as_str)
        .is_some_and(|o| req.user.as_ref().is_some_and(|u| u.name == o))
    {
        return Ok(doc);
    }
    for side in ["source", "target"] {
        match members.get_mut(side) {
            Some(Value::String(url)) => *url = strip_userinfo(url),
            Some(Value::Object(endpoint)) => {
                endpoint.remove("headers");
                endpoint.remove("auth");
                if let Some(Value::String(url)) = endpoint.get_mut("url") {
                    *url = strip_userinfo(url);
                }
            }
            _ => {}
        }
    }
    Ok(serde_json::to_vec(&Value::Object(members)).expect("json"))
}

/// `http://user:pass@host/db` → `http://host/db`.
fn strip_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn user_info_is_stripped_from_urls() {
        assert_eq!(
            super::strip_userinfo("http://bob:pw@host:5984/db"),
            "http://host:5984/db"
        );
        assert_eq!(
            super::strip_userinfo("https://host/db@x"),
            "https://host/db@x"
        );
        assert_eq!(super::strip_userinfo("db"), "db");
    }
}
