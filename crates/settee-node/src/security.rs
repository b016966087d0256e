//! Who may do what to a database, from its security object, as CouchDB 3 decides it:
//! members read and write documents, database admins also write design documents and the
//! security object, server admins do everything.

use std::sync::{Arc, Mutex};

use settee_auth::{SecurityObject, User};
use settee_db::Database;

use crate::error::{Error, Result};
use crate::Node;

/// The security object CouchDB 3 gives new databases under `[couchdb] default_security =
/// admin_only` (the default): only server admins may use them.
pub const ADMIN_ONLY: &[u8] = br#"{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}"#;

/// A database's parsed security object, kept with the database and read again when the
/// stored bytes change.
#[derive(Default)]
struct Cached(Mutex<(Vec<u8>, Arc<SecurityObject>)>);

/// The security object of `db`.
pub fn security(db: &Database) -> Result<Arc<SecurityObject>> {
    let stored = db.snapshot().meta()?.security;
    let cache = db.extension(Cached::default);
    let mut slot = cache.0.lock().expect("security cache");
    if slot.0 != stored {
        *slot = (stored.clone(), Arc::new(SecurityObject::parse(&stored)));
    }
    Ok(slot.1.clone())
}

/// Whether `user` is a server admin.
pub fn is_server_admin(user: Option<&User>) -> bool {
    user.is_some_and(User::is_admin)
}

/// Fails with CouchDB's `You are not a server admin.` (unauthorized, for everyone) unless
/// `user` is one.
pub fn check_server_admin(user: Option<&User>) -> Result<()> {
    if is_server_admin(user) {
        Ok(())
    } else {
        Err(Error::Unauthorized("You are not a server admin.".into()))
    }
}

/// Fails unless `user` is a member of `db` (unauthorized when anonymous, forbidden otherwise).
pub fn check_member(user: Option<&User>, db: &Database) -> Result<()> {
    if is_server_admin(user) {
        return Ok(());
    }
    Ok(security(db)?.check_member(user)?)
}

/// Fails unless `user` administers `db`: `You are not a db or server admin.`, as CouchDB
/// answers design-document and `_security` writes.
pub fn check_db_admin(user: Option<&User>, db: &Database) -> Result<()> {
    if is_server_admin(user) {
        return Ok(());
    }
    Ok(security(db)?.check_admin(user)?)
}

/// Whether `user` administers `db`.
pub fn is_db_admin(user: Option<&User>, db: &Database) -> Result<bool> {
    Ok(is_server_admin(user) || security(db)?.is_admin(user))
}

/// CouchDB's `require_db_admin` for compaction and view cleanup: members who are not admins
/// are refused (unauthorized) `You are not a server or db admin.` whoever they are.
pub fn check_maintenance_admin(user: Option<&User>, db: &Database) -> Result<()> {
    check_member(user, db)?;
    if is_db_admin(user, db)? {
        Ok(())
    } else {
        Err(Error::Unauthorized(
            "You are not a server or db admin.".into(),
        ))
    }
}

impl Node {
    /// Fails unless `user` may replace `db`'s security object: a database admin, and for
    /// the users database only when `[couchdb] users_db_security_editable` allows it.
    pub fn may_set_security(&self, user: Option<&User>, db: &Database) -> Result<()> {
        if self.is_users_db(db.name()) && !self.policy().users_db_security_editable {
            return Err(Error::Forbidden(
                "You can't edit the security object of the user database.".into(),
            ));
        }
        check_db_admin(user, db)
    }

    /// Replaces `db`'s security object with `sec` as `user`, once it is well formed.
    pub async fn set_security(
        &self,
        user: Option<&User>,
        db: &Database,
        sec: &serde_json::Value,
    ) -> Result<()> {
        self.may_set_security(user, db)?;
        SecurityObject::validate(sec).map_err(|e| Error::BadRequest(e.to_string()))?;
        let bytes = serde_json::to_vec(sec).expect("json");
        db.update_meta(move |m| m.security = bytes.clone()).await?;
        Ok(())
    }

    /// Whether `db`'s documents follow rules of their own (the users and replicator
    /// databases), which listings of all its documents would get round.
    pub fn guards_documents(&self, db: &str) -> bool {
        self.is_users_db(db) || crate::is_replicator_db(db)
    }

    /// Whether endpoint `endpoint` of database `db` (`_all_docs`, `_changes`, `_find`, ...)
    /// is for server admins only: in the users and replicator databases every `_` endpoint
    /// but design and local documents and the security object lists or queries documents
    /// past their per-document rules.
    pub fn closes_endpoint(&self, db: &str, endpoint: &str) -> bool {
        self.guards_documents(db)
            && endpoint.starts_with('_')
            && !matches!(endpoint, "_design" | "_local" | "_security")
    }

    /// The security object for a database being created, from `[couchdb] default_security`.
    pub fn default_security(&self) -> Vec<u8> {
        if self.policy().admin_only_by_default {
            ADMIN_ONLY.to_vec()
        } else {
            Vec::new()
        }
    }
}
