//! The users database: who may write which user document, the checks CouchDB's
//! `_design/_auth` validation function makes, password hashing on save, and what a reader
//! may see of a user document.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::password::user_doc_credentials;
use crate::user::User;

/// The id prefix of user documents.
pub const USER_PREFIX: &str = "org.couchdb.user:";

/// Members that hold credentials; replaced together when a password is set.
const CREDENTIALS: [&str; 8] = [
    "derived_key",
    "iterations",
    "password",
    "password_scheme",
    "password_sha",
    "preserve_salt",
    "pbkdf2_prf",
    "salt",
];

/// Whether `user` may write the user document `id` at all (CouchDB answers `not_found` to
/// anyone else): database admins, the user it names, and anonymous callers signing up.
pub fn may_write(user: Option<&User>, id: &str, db_admin: bool) -> bool {
    db_admin || user.is_none_or(|u| id.strip_prefix(USER_PREFIX) == Some(u.name.as_str()))
}

/// Keeps the credentials of `old` in a document its owner rewrites without a new password:
/// owners never see their credentials, so their edits do not carry them.
pub fn keep_credentials(doc: &mut Map<String, Value>, old: Option<&Value>) {
    if doc.contains_key("password")
        || doc.contains_key("derived_key")
        || doc.contains_key("password_sha")
    {
        return;
    }
    let Some(Value::Object(old)) = old else {
        return;
    };
    for k in CREDENTIALS {
        if let Some(v) = old.get(k) {
            doc.insert(k.to_string(), v.clone());
        }
    }
}

/// Replaces a plaintext `password` member by PBKDF2 credentials (slow by design).
pub fn hash_password(doc: &mut Map<String, Value>, iterations: u32) {
    let Some(Value::String(password)) = doc.get("password").cloned() else {
        if doc.get("password") == Some(&Value::Null) {
            doc.remove("password");
        }
        return;
    };
    for k in CREDENTIALS {
        doc.remove(k);
    }
    doc.extend(user_doc_credentials(&password, iterations));
}

fn forbidden(reason: &str) -> Error {
    Error::Forbidden(reason.to_string())
}

/// CouchDB's checks of a user document write, in its order and with its messages. `id` and
/// `deleted` describe the write, `doc` its body (credentials already hashed), `old` the
/// current document, `db_admin` whether the writer administers the users database.
pub fn validate(
    id: &str,
    deleted: bool,
    doc: &Map<String, Value>,
    old: Option<&Value>,
    user: Option<&User>,
    db_admin: bool,
) -> Result<()> {
    let user_name = user.map(|u| u.name.as_str());
    let old_name = old.and_then(|o| o.get("name")).and_then(Value::as_str);
    if deleted {
        return if db_admin || (user_name.is_some() && user_name == old_name) {
            Ok(())
        } else {
            Err(forbidden("Only admins may delete other user docs."))
        };
    }
    if doc.get("type").and_then(Value::as_str) != Some("user") {
        return Err(forbidden("doc.type must be user"));
    }
    let name = match doc.get("name") {
        Some(Value::String(n)) if !n.is_empty() => n.as_str(),
        _ => return Err(forbidden("doc.name is required")),
    };
    let roles = match doc.get("roles") {
        None => return Err(forbidden("doc.roles must exist")),
        Some(Value::Array(r)) => r,
        Some(_) => return Err(forbidden("doc.roles must be an array")),
    };
    if !roles.iter().all(Value::is_string) {
        return Err(forbidden("doc.roles can only contain strings"));
    }
    if id != format!("{USER_PREFIX}{name}") {
        return Err(forbidden(
            "Doc ID must be of the form org.couchdb.user:name",
        ));
    }
    if old.is_some() && old_name != Some(name) {
        return Err(forbidden("Usernames can not be changed."));
    }
    if doc.contains_key("password_sha") && !doc.contains_key("salt") {
        return Err(forbidden("Users with password_sha must have a salt.See /_utils/script/couch.js for example code."));
    }
    if let Some(scheme) = doc.get("password_scheme") {
        let scheme = scheme.as_str().unwrap_or_default();
        if !matches!(scheme, "simple" | "pbkdf2" | "simple+pbkdf2") {
            return Err(forbidden(&format!(
                "Password scheme `{scheme}` not supported."
            )));
        }
        if scheme == "pbkdf2" {
            if !doc.get("iterations").is_some_and(Value::is_number) {
                return Err(forbidden("iterations must be a number."));
            }
            if !doc.get("derived_key").is_some_and(Value::is_string) {
                return Err(forbidden("derived_key must be a string."));
            }
        }
    }
    if !db_admin {
        match old {
            Some(old) => {
                if user_name != old_name {
                    return Err(forbidden("You may only update your own user document."));
                }
                if old.get("roles").unwrap_or(&Value::Null) != &Value::Array(roles.clone()) {
                    return Err(forbidden("Only _admin may edit roles"));
                }
            }
            None if !roles.is_empty() => return Err(forbidden("Only _admin may set roles")),
            None => {}
        }
    }
    if roles
        .iter()
        .filter_map(Value::as_str)
        .any(|r| r.starts_with('_') && r != "_metrics")
    {
        return Err(forbidden(
            "No system roles (starting with underscore) in users db.",
        ));
    }
    if name.starts_with('_') {
        return Err(forbidden("Username may not start with underscore."));
    }
    if name.contains(':') {
        return Err(forbidden("Character `:` is not allowed in usernames."));
    }
    Ok(())
}

/// What `reader` may see of the user document `doc` (named `id`): all of it for database
/// admins; for the user it names, all but the credentials (no one but admins ever sees a
/// password hash); for others only the `public` members, or nothing (`None`).
pub fn visible(
    id: &str,
    doc: Value,
    reader: Option<&User>,
    db_admin: bool,
    public: &[String],
) -> Option<Value> {
    if db_admin {
        return Some(doc);
    }
    let Value::Object(mut members) = doc else {
        return None;
    };
    if reader.is_some_and(|u| id.strip_prefix(USER_PREFIX) == Some(u.name.as_str())) {
        for k in CREDENTIALS {
            members.remove(k);
        }
        return Some(Value::Object(members));
    }
    let kept: Map<String, Value> = members
        .into_iter()
        .filter(|(k, _)| k == "_id" || k == "_rev" || public.contains(k))
        .collect();
    (kept.len() > kept.keys().filter(|k| k.starts_with('_')).count()).then_some(Value::Object(kept))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn user(name: &str) -> User {
        User {
            name: name.into(),
            roles: vec![],
        }
    }

    const ID: &str = "org.couchdb.user:bob";

    #[test]
    fn passwords_are_replaced_by_hashes() {
        let mut doc =
            body(json!({"name": "bob", "password": "pw", "password_sha": "old", "salt": "old"}));
        hash_password(&mut doc, 10);
        assert!(!doc.contains_key("password") && !doc.contains_key("password_sha"));
        assert_eq!(doc["password_scheme"], "pbkdf2");
        assert!(crate::password::verify_user_doc(&Value::Object(doc), "pw"));
        let mut untouched = body(json!({"name": "bob", "derived_key": "k"}));
        hash_password(&mut untouched, 10);
        assert_eq!(untouched["derived_key"], "k");
    }

    #[test]
    fn who_may_write_which_user_document() {
        assert!(may_write(None, ID, false), "anonymous sign-up");
        assert!(may_write(Some(&user("bob")), ID, false));
        assert!(!may_write(Some(&user("eve")), ID, false));
        assert!(may_write(Some(&user("eve")), ID, true));
    }

    #[test]
    fn the_auth_rules_with_couchdbs_messages() {
        let ok = body(json!({"name": "bob", "type": "user", "roles": []}));
        assert!(validate(ID, false, &ok, None, None, false).is_ok());
        type Case = (
            Map<String, Value>,
            Option<Value>,
            Option<User>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (
                body(json!({"name": "bob", "roles": []})),
                None,
                None,
                "doc.type must be user",
            ),
            (
                body(json!({"type": "user", "roles": []})),
                None,
                None,
                "doc.name is required",
            ),
            (
                body(json!({"name": "bob", "type": "user"})),
                None,
                None,
                "doc.roles must exist",
            ),
            (
                body(json!({"name": "bob", "type": "user", "roles": "x"})),
                None,
                None,
                "doc.roles must be an array",
            ),
            (
                body(json!({"name": "bob", "type": "user", "roles": [1]})),
                None,
                None,
                "doc.roles can only contain strings",
            ),
            (
                body(json!({"name": "ann", "type": "user", "roles": []})),
                None,
                None,
                "Doc ID must be of the form org.couchdb.user:name",
            ),
            (
                body(json!({"name": "bob", "type": "user", "roles": ["x"]})),
                None,
                None,
                "Only _admin may set roles",
            ),
            (
                ok.clone(),
                Some(json!({"name": "bob", "roles": ["x"]})),
                Some(user("bob")),
                "Only _admin may edit roles",
            ),
            (
                ok.clone(),
                Some(json!({"name": "bob", "roles": []})),
                Some(user("eve")),
                "You may only update your own user document.",
            ),
            (
                body(json!({"name": "bob", "type": "user", "roles": [], "password_scheme": "md5"})),
                None,
                None,
                "Password scheme `md5` not supported.",
            ),
        ];
        for (doc, old, who, message) in cases {
            match validate(ID, false, &doc, old.as_ref(), who.as_ref(), false) {
                Err(Error::Forbidden(m)) => assert_eq!(m, message),
                other => panic!("{doc:?}: {other:?}"),
            }
        }
        let admin_sets_roles = body(json!({"name": "bob", "type": "user", "roles": ["staff"]}));
        assert!(validate(ID, false, &admin_sets_roles, None, None, true).is_ok());
        let system_role = body(json!({"name": "bob", "type": "user", "roles": ["_admin"]}));
        assert!(
            matches!(validate(ID, false, &system_role, None, None, true), Err(Error::Forbidden(m)) if m.starts_with("No system roles"))
        );
        let old = json!({"name": "bob"});
        assert!(
            validate(ID, true, &Map::new(), Some(&old), Some(&user("bob")), false).is_ok(),
            "users delete themselves"
        );
        assert!(validate(ID, true, &Map::new(), Some(&old), Some(&user("eve")), false).is_err());
    }

    #[test]
    fn readers_see_their_own_document_or_public_members() {
        let doc = json!({"_id": ID, "_rev": "1-a", "name": "bob", "derived_key": "k", "city": "x"});
        assert_eq!(
            visible(ID, doc.clone(), Some(&user("bob")), false, &[]),
            Some(json!({"_id": ID, "_rev": "1-a", "name": "bob", "city": "x"})),
            "owners never see their hash"
        );
        assert_eq!(
            visible(ID, doc.clone(), Some(&user("eve")), false, &[]),
            None
        );
        assert_eq!(
            visible(ID, doc.clone(), Some(&user("eve")), false, &["city".into()]),
            Some(json!({"_id": ID, "_rev": "1-a", "city": "x"}))
        );
        assert_eq!(visible(ID, doc.clone(), None, true, &[]), Some(doc));
    }
}
