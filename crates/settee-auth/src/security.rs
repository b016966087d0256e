//! Per-database security objects: who administers a database and who may use it.

use serde_json::Value;

use crate::user::User;

/// Names and roles of one side of a security object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    /// User names.
    pub names: Vec<String>,
    /// Roles.
    pub roles: Vec<String>,
}

impl Group {
    fn is_empty(&self) -> bool {
        self.names.is_empty() && self.roles.is_empty()
    }

    fn holds(&self, user: &User) -> bool {
        self.names.contains(&user.name) || self.roles.iter().any(|r| user.roles.contains(r))
    }

    fn read(v: Option<&Value>) -> Group {
        let list = |k: &str| -> Vec<String> {
            v.and_then(|g| g.get(k))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        Group {
            names: list("names"),
            roles: list("roles"),
        }
    }
}

/// A database's `_security` object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecurityObject {
    /// Database admins: they also write design documents and `_security`.
    pub admins: Group,
    /// Members: they read and write documents. No members means everyone is one.
    pub members: Group,
}

/// Why a caller may not do something, as CouchDB tells it: anonymous callers get
/// `unauthorized` (401), authenticated ones `forbidden` (403).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// 401: authenticating might help.
    Unauthorized(&'static str),
    /// 403: this caller may not.
    Forbidden(&'static str),
}

/// A security object's members: `members`, or `readers` where there is no `members`, as
/// CouchDB still reads security objects written before `members` was named so.
fn members_of(v: &Value) -> Option<&Value> {
    v.get("members").or_else(|| v.get("readers"))
}

impl SecurityObject {
    /// Reads a stored security object (JSON text; empty means `{}`).
    pub fn parse(json: &[u8]) -> SecurityObject {
        let v: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
        SecurityObject {
            admins: Group::read(v.get("admins")),
            members: Group::read(members_of(&v)),
        }
    }

    /// Checks a security object a client wants to store; the reason when it is malformed.
    pub fn validate(v: &Value) -> Result<(), String> {
        let Value::Object(_) = v else {
            return Err("Security object must be a JSON object".into());
        };
        for part in [v.get("admins"), members_of(v)] {
            let Some(v) = part else { continue };
            let Value::Object(group) = v else {
                return Err("admins or members must be a JSON list of strings".into());
            };
            for list in ["names", "roles"] {
                match group.get(list) {
                    None => {}
                    Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
                    Some(_) => return Err(format!("{list} must be a JSON list of strings")),
                }
            }
        }
        Ok(())
    }

    /// Whether `user` administers the database: a server admin, or named or holding a role
    /// in `admins`.
    pub fn is_admin(&self, user: Option<&User>) -> bool {
        user.is_some_and(|u| u.is_admin() || self.admins.holds(u))
    }

    /// Whether `user` may read and write documents: a database admin, anyone when there are
    /// no members, or a member by name or role.
    pub fn is_member(&self, user: Option<&User>) -> bool {
        self.members.is_empty()
            || self.is_admin(user)
            || user.is_some_and(|u| self.members.holds(u))
    }

    /// Fails unless `user` is a member.
    pub fn check_member(&self, user: Option<&User>) -> Result<(), Denied> {
        if self.is_member(user) {
            Ok(())
        } else if user.is_none() {
            Err(Denied::Unauthorized(
                "You are not authorized to access this db.",
            ))
        } else {
            Err(Denied::Forbidden("You are not allowed to access this db."))
        }
    }

    /// Fails unless `user` is a database admin.
    pub fn check_admin(&self, user: Option<&User>) -> Result<(), Denied> {
        if self.is_admin(user) {
            Ok(())
        } else if user.is_none() {
            Err(Denied::Unauthorized("You are not a db or server admin."))
        } else {
            Err(Denied::Forbidden("You are not a db or server admin."))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, roles: &[&str]) -> User {
        User {
            name: name.into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn members_and_admins_by_name_and_role() {
        let sec = SecurityObject::parse(br#"{"admins":{"names":["ann"],"roles":["boss"]},"members":{"names":["bob"],"roles":["staff"]}}"#);
        let (ann, boss, bob, staff, eve, root) = (
            user("ann", &[]),
            user("x", &["boss"]),
            user("bob", &[]),
            user("y", &["staff"]),
            user("eve", &["other"]),
            User::admin("root"),
        );
        for admin in [&ann, &boss, &root] {
            assert!(
                sec.is_admin(Some(admin)) && sec.is_member(Some(admin)),
                "{admin:?}"
            );
        }
        for member in [&bob, &staff] {
            assert!(
                !sec.is_admin(Some(member)) && sec.is_member(Some(member)),
                "{member:?}"
            );
        }
        assert!(!sec.is_member(Some(&eve)));
        assert_eq!(
            sec.check_member(Some(&eve)),
            Err(Denied::Forbidden("You are not allowed to access this db."))
        );
        assert_eq!(
            sec.check_member(None),
            Err(Denied::Unauthorized(
                "You are not authorized to access this db."
            ))
        );
        assert_eq!(
            sec.check_admin(Some(&bob)),
            Err(Denied::Forbidden("You are not a db or server admin."))
        );
    }

    #[test]
    fn no_members_means_everyone_and_only_server_admins_administer_an_empty_object() {
        let sec = SecurityObject::parse(b"");
        assert!(sec.is_member(None) && sec.is_member(Some(&user("eve", &[]))));
        assert!(!sec.is_admin(Some(&user("eve", &[]))) && sec.is_admin(Some(&User::admin("root"))));
        let admins_only = SecurityObject::parse(
            br#"{"admins":{"roles":["_admin"]},"members":{"roles":["_admin"]}}"#,
        );
        assert!(!admins_only.is_member(None) && !admins_only.is_member(Some(&user("eve", &[]))));
    }

    #[test]
    fn malformed_objects_are_refused() {
        assert!(
            SecurityObject::validate(&serde_json::json!({"members": {"names": ["a"]}})).is_ok()
        );
        assert!(SecurityObject::validate(&serde_json::json!([])).is_err());
        assert!(SecurityObject::validate(&serde_json::json!({"admins": []})).is_err());
        assert_eq!(
            SecurityObject::validate(&serde_json::json!({"members": {"roles": [1]}})),
            Err("roles must be a JSON list of strings".into())
        );
        assert_eq!(
            SecurityObject::validate(&serde_json::json!({"admins": 1})),
            Err("admins or members must be a JSON list of strings".into())
        );
        assert!(
            SecurityObject::validate(&serde_json::json!({"readers": {"names": [2]}})).is_err(),
            "readers stand for members"
        );
    }

    #[test]
    fn readers_stand_for_members_when_there_are_none() {
        let sec = SecurityObject::parse(br#"{"readers":{"names":["bob"]}}"#);
        assert!(
            sec.is_member(Some(&user("bob", &[])))
                && !sec.is_member(None)
                && !sec.is_member(Some(&user("eve", &[])))
        );
        let sec = SecurityObject::parse(br#"{"members":{},"readers":{"names":["bob"]}}"#);
        assert!(sec.is_member(None), "members, when given, are what counts");
    }
}
