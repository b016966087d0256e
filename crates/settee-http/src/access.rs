//! Who may do what, decided at the HTTP edge as CouchDB 3 decides it: server-admin-only
//! endpoints, database membership and database admins (the node's security rules, see
//! [`settee_node::security`]), which listings of the users and replicator databases are
//! closed, and when anonymous requests must authenticate.

use hyper::Method;
use settee_db::Database;
use settee_node::security;

use settee_config::registry as setting;

use crate::error::HttpResult;
use crate::request::Req;
use crate::server::State;

/// Fails with CouchDB's `You are not a server admin.` (401 for everyone) unless the caller is one.
pub fn server_admin(req: &Req) -> HttpResult<()> {
    Ok(security::check_server_admin(req.user.as_ref())?)
}

/// Fails unless the caller is a member of `db` (401 anonymous, 403 otherwise).
pub fn member(req: &Req, db: &Database) -> HttpResult<()> {
    Ok(security::check_member(req.user.as_ref(), db)?)
}

/// Fails unless the caller administers `db`: `You are not a db or server admin.` (401
/// anonymous, 403 otherwise), as CouchDB answers design-document and `_security` writes.
pub fn db_admin(req: &Req, db: &Database) -> HttpResult<()> {
    Ok(security::check_db_admin(req.user.as_ref(), db)?)
}

/// CouchDB's `require_db_admin` for compaction and view cleanup: members who are not admins
/// get 401 `You are not a server or db admin.` whoever they are.
pub fn maintenance_admin(req: &Req, db: &Database) -> HttpResult<()> {
    Ok(security::check_maintenance_admin(req.user.as_ref(), db)?)
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
    let closed = second.is_some_and(|s| state.node.closes_endpoint(name, s));
    // As CouchDB: these two answer for server admins before membership is looked at.
    if closed && matches!(second, Some("_all_docs" | "_changes")) {
        return server_admin(req);
    }
    let db = crate::db::open(state, name)?;
    match second {
        Some("_compact" | "_view_cleanup" | "_search_cleanup" | "_nouveau_cleanup") => {
            maintenance_admin(req, &db)?
        }
        _ => member(req, &db)?,
    }
    // Members may not use the other listings of user or replication documents either: they
    // would bypass the per-document rules. (Asked by others, they fail as CouchDB's do, on
    // membership, above.)
    if closed {
        return server_admin(req);
    }
    Ok(())
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
    let config = state.node.config.read().expect("config lock");
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
