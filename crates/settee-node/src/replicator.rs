//! The replicator database's rules: a replication document belongs to the user who wrote it
//! (its `owner`), and others who do not administer the database read it without the
//! credentials of its endpoints.

use serde_json::{Map, Value};
use settee_auth::User;
use settee_db::{Database, DocOptions, NewDoc};

use crate::error::{Error, Result};

/// The replicator database.
pub const REPLICATOR: &str = "_replicator";

/// Whether `name` is a replicator database: `_replicator` or `<prefix>/_replicator`. The
/// replicator runs the documents of each, and each follows the same ownership rules.
pub fn is_replicator_db(name: &str) -> bool {
    name == REPLICATOR || name.ends_with("/_replicator")
}

const OTHER_USERS: &str = "Can't update replication documents from other users.";

/// A replication document written by someone who does not administer `_replicator`: it must
/// be theirs (its `owner`), and becomes theirs when it names no owner.
pub(crate) fn own(db: &Database, doc: &mut NewDoc, user: Option<&User>) -> Result<()> {
    let name = user.map(|u| u.name.as_str());
    let old = db
        .snapshot()
        .open_doc(&doc.id, None, &DocOptions::default())
        .ok()
        .and_then(|b| settee_json::deep::from_slice::<Value>(&b).ok());
    if let Some(old_owner) = old.as_ref().and_then(|o| o.get("owner")) {
        if old_owner.as_str() != name {
            return Err(Error::Forbidden(OTHER_USERS.into()));
        }
    }
    let mut body: Map<String, Value> = settee_json::deep::from_slice(&doc.body)
        .map_err(|_| Error::BadRequest("Document must be a JSON object".into()))?;
    match body.get("owner") {
        None | Some(Value::Null) => {
            body.insert(
                "owner".into(),
                name.map_or(Value::Null, |n| Value::String(n.to_string())),
            );
            doc.set_body(&body);
        }
        Some(owner) if owner.as_str() == name => {}
        Some(_) => return Err(Error::Forbidden(OTHER_USERS.into())),
    }
    Ok(())
}

/// A replication document as `user`, who does not administer `_replicator`, sees it: whole
/// when it is theirs, otherwise without the credentials of its endpoints (user info in URLs,
/// `headers`, `auth`).
pub(crate) fn visible(user: Option<&User>, doc: Vec<u8>) -> Vec<u8> {
    let Ok(Value::Object(mut members)) = settee_json::deep::from_slice::<Value>(&doc) else {
        return doc;
    };
    let owner = members.get("owner").and_then(Value::as_str);
    if owner.is_some_and(|o| user.is_some_and(|u| u.name == o)) {
        return doc;
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
    serde_json::to_vec(&Value::Object(members)).expect("json")
}

/// `http://user:pass@host/db` → `http://host/db`: a replication endpoint as shown to those
/// who may not see its credentials.
pub fn strip_userinfo(url: &str) -> String {
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
    fn replicator_databases_are_recognised() {
        assert!(super::is_replicator_db("_replicator"));
        assert!(super::is_replicator_db("team/_replicator"));
        assert!(!super::is_replicator_db("replicator"));
    }

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

    #[test]
    fn others_read_replication_documents_without_credentials() {
        let doc = br#"{"owner":"bob","source":"http://bob:pw@a/db","target":{"url":"http://b/db","headers":{"x":"y"},"auth":{"basic":{}}}}"#;
        let bob = settee_auth::User {
            name: "bob".into(),
            roles: vec![],
        };
        let eve = settee_auth::User {
            name: "eve".into(),
            roles: vec![],
        };
        assert_eq!(super::visible(Some(&bob), doc.to_vec()), doc.to_vec());
        let seen: serde_json::Value =
            serde_json::from_slice(&super::visible(Some(&eve), doc.to_vec())).unwrap();
        assert_eq!(seen["source"], "http://a/db");
        assert_eq!(seen["target"], serde_json::json!({"url": "http://b/db"}));
    }
}
