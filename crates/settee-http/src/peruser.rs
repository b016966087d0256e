//! A private database per user (`[couch_peruser]`), the pattern PouchDB apps rely on: when a
//! user document is written, the database `userdb-{hex of the name}` is created if missing and
//! the user made its admin and member; when the user is deleted, they are taken off it (or it
//! is deleted, with `delete_dbs`).

use std::sync::Arc;

use serde_json::{json, Value};
use settee_db::Database;

use settee_config::registry as setting;

use crate::error::HttpResult;
use crate::server::State;

struct Settings {
    prefix: String,
    delete_dbs: bool,
    q: usize,
}

fn settings(state: &State) -> Option<Settings> {
    let config = state.config.read().expect("config lock");
    config
        .value::<bool>(&setting::PERUSER_ENABLE)
        .then(|| Settings {
            prefix: config
                .get("couch_peruser", "database_prefix")
                .unwrap_or("userdb-")
                .to_string(),
            delete_dbs: config.value::<bool>(&setting::PERUSER_DELETE_DBS),
            q: config.value::<usize>(&setting::PERUSER_Q).max(1),
        })
}

/// The private database of user `name`: the prefix, then the name's UTF-8 bytes in hex.
pub fn db_name(prefix: &str, name: &str) -> String {
    format!("{prefix}{}", settee_auth::password::hex(name.as_bytes()))
}

/// Whether writes to `db` need [`after_writes`]: it is the users database and per-user
/// databases are on.
pub fn watches(state: &State, db: &Database) -> bool {
    crate::access::is_users_db(state, db.name()) && settings(state).is_some()
}

/// After user documents (`id`, deleted) were written to `db`: keeps their databases in step.
pub async fn after_writes(
    state: &Arc<State>,
    db: &Database,
    written: &[(String, bool)],
) -> HttpResult<()> {
    if !crate::access::is_users_db(state, db.name()) {
        return Ok(());
    }
    let Some(settings) = settings(state) else {
        return Ok(());
    };
    for (id, deleted) in written {
        let Some(name) = id.strip_prefix(crate::auth::USER_PREFIX) else {
            continue;
        };
        let target = db_name(&settings.prefix, name);
        if *deleted && settings.delete_dbs {
            let st = state.clone();
            let _ = tokio::task::spawn_blocking(move || st.catalog.delete(&target)).await;
            continue;
        }
        let existing = state.catalog.get(&target).ok();
        let userdb = match existing {
            Some(d) => d,
            None if *deleted => continue,
            None => {
                let (st, t, q) = (state.clone(), target.clone(), settings.q);
                match tokio::task::spawn_blocking(move || st.catalog.create(&t, Some(q)))
                    .await
                    .map_err(crate::db::join_error)?
                {
                    Ok(d) => d,
                    Err(settee_db::Error::DatabaseExists) => state.catalog.get(&target)?,
                    Err(e) => return Err(e.into()),
                }
            }
        };
        set_member(&userdb, name, !deleted).await?;
    }
    Ok(())
}

/// Adds `name` to (or removes it from) the database's `admins.names` and `members.names`,
/// keeping everything else in its security object.
async fn set_member(db: &Arc<Database>, name: &str, add: bool) -> HttpResult<()> {
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
