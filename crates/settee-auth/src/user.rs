//! Who is asking: CouchDB's `userCtx`.

use serde_json::{json, Value};

/// An authenticated caller: a name and roles. Server admins hold the `_admin` role.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// Roles; server admins have `_admin`.
    pub roles: Vec<String>,
}

/// The role every server admin holds.
pub const ADMIN_ROLE: &str = "_admin";

impl User {
    /// A server admin named `name`.
    pub fn admin(name: &str) -> User {
        User {
            name: name.to_string(),
            roles: vec![ADMIN_ROLE.to_string()],
        }
    }

    /// Whether this is a server admin.
    pub fn is_admin(&self) -> bool {
        self.roles.iter().any(|r| r == ADMIN_ROLE)
    }
}

/// The `userCtx` object CouchDB gives validation functions and `_session`: `name` is null
/// for anonymous callers.
pub fn user_ctx(user: Option<&User>, db: Option<&str>) -> Value {
    let mut ctx = json!({
        "db": db,
        "name": user.map(|u| u.name.as_str()),
        "roles": user.map_or(&[][..], |u| &u.roles[..]),
    });
    if db.is_none() {
        ctx.as_object_mut().expect("an object").remove("db");
    }
    ctx
}
