//! A private database per user (`[couch_peruser]`), the pattern PouchDB apps rely on: when a
//! user document is written, the database `userdb-{hex of the name}` is created if missing and
//! the user made its admin and member; when the user is deleted, they are taken off it (or it
//! is deleted, with `delete_dbs`).

use std::sync::Arc;

use serde_json::{json, Value};
use settee_db::Database;

use crate::error::{join_error, Result};
use crate::Node;

/// The private database of user `name`: the prefix, then the name's UTF-8 bytes in hex.
pub fn db_name(prefix: &str, name: &str) -> String {
    format!("{prefix}{}", settee_auth::password::hex(name.as_bytes()))
}

impl Node {
    /// Whether writes to `db` need [`Node::after_user_writes`]: it is the users database
    /// and per-user databases are on.
    pub(crate) fn watches_users(&self, db: &Database) -> bool {
        let policy = self.policy.load();
        policy.peruser.is_some() && db.name() == policy.users_db
    }

    /// After user documents (`id`, deleted) were written to `db`: keeps their databases in
    /// step.
    pub(crate) async fn after_user_writes(
        self: &Arc<Self>,
        db: &Database,
        written: &[(String, bool)],
    ) -> Result<()> {
        let policy = self.policy();
        let Some(settings) = policy
            .peruser
            .as_ref()
            .filter(|_| self.is_users_db(db.name()))
        else {
            return Ok(());
        };
        for (id, deleted) in written {
            let Some(name) = id.strip_prefix(settee_auth::users::USER_PREFIX) else {
                continue;
            };
            let target = db_name(&settings.prefix, name);
            if *deleted && settings.delete_dbs {
                let node = self.clone();
                let _ = tokio::task::spawn_blocking(move || node.catalog.delete(&target)).await;
                continue;
            }
            let userdb = match self.catalog.get(&target).ok() {
                Some(d) => d,
                None if *deleted => continue,
                None => self.create_user_db(&target, settings.q).await?,
            };
            set_member(&userdb, name, !deleted).await?;
        }
        Ok(())
    }

    /// Creates a private database (or finds it, created meanwhile).
    async fn create_user_db(self: &Arc<Self>, name: &str, q: usize) -> Result<Arc<Database>> {
        let (node, target) = (self.clone(), name.to_string());
        let created = tokio::task::spawn_blocking(move || node.catalog.create(&target, Some(q)))
            .await
            .map_err(join_error)?;
        match created {
            Ok(d) => Ok(d),
            Err(settee_db::Error::DatabaseExists) => Ok(self.catalog.get(name)?),
            Err(e) => Err(e.into()),
        }
    }
}

/// Adds `name` to (or removes it from) the database's `admins.names` and `members.names`,
/// keeping everything else in its security object.
async fn set_member(db: &Arc<Database>, name: &str, add: bool) -> Result<()> {
    let stored = db.snapshot().meta()?.security;
    let mut sec: Value = serde_json::from_slice(&stored)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let mut changed = false;
    for part in ["admins", "members"] {
        let group = sec
            .as_object_mut()
            .expect("an object")
            .entry(part)
            .or_insert_with(|| json!({}));
        if !group.is_object() {
            *group = json!({});
        }
        let names = group
            .as_object_mut()
            .expect("an object")
            .entry("names")
            .or_insert_with(|| json!([]));
        if !names.is_array() {
            *names = json!([]);
        }
        let list = names.as_array_mut().expect("an array");
        let present = list.iter().any(|n| n == name);
        if add && !present {
            list.push(json!(name));
            changed = true;
        } else if !add && present {
            list.retain(|n| n != name);
            changed = true;
        }
    }
    if changed {
        let bytes = serde_json::to_vec(&sec).expect("json");
        db.update_meta(move |m| m.security = bytes.clone()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn database_names_are_the_hex_of_the_user_name() {
        assert_eq!(super::db_name("userdb-", "foo"), "userdb-666f6f");
        assert_eq!(super::db_name("userdb-", "bob"), "userdb-626f62");
        assert_eq!(super::db_name("u-", "é"), "u-c3a9");
    }
}
