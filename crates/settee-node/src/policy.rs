//! The settings the node's document rules read on every write and read, parsed once per
//! configuration change rather than looked up in the configuration on each request.

use settee_config::registry as setting;
use settee_config::Config;

/// `[couch_peruser]`: a private database per user.
#[derive(Debug, Clone)]
pub struct PerUser {
    /// `database_prefix`: the start of each private database's name.
    pub prefix: String,
    /// `delete_dbs`: whether deleting a user deletes their database.
    pub delete_dbs: bool,
    /// `q`: shards of each new private database.
    pub q: usize,
}

/// What the document rules read, as of the last configuration change.
#[derive(Debug, Clone)]
pub struct Policy {
    /// `[chttpd_auth] authentication_db`: the users database.
    pub users_db: String,
    /// `[chttpd_auth] public_fields`: the fields of user documents every user may read.
    pub public_fields: Vec<String>,
    /// `[chttpd_auth] iterations`: PBKDF2 iterations for passwords written to user documents.
    pub iterations: u32,
    /// `[couch_peruser]`, when enabled.
    pub peruser: Option<PerUser>,
    /// `[couchdb] default_security`: whether new databases are for server admins only.
    pub admin_only_by_default: bool,
    /// `[couchdb] users_db_security_editable`: whether the users database's security object
    /// may be changed.
    pub users_db_security_editable: bool,
}

impl Policy {
    /// The policy `config` sets.
    pub fn from_config(config: &Config) -> Policy {
        Policy {
            users_db: users_db(config),
            public_fields: config
                .get("chttpd_auth", "public_fields")
                .unwrap_or("")
                .split(',')
                .map(|f| f.trim().to_string())
                .filter(|f| !f.is_empty())
                .collect(),
            iterations: config.value::<u32>(&setting::ITERATIONS),
            peruser: config
                .value::<bool>(&setting::PERUSER_ENABLE)
                .then(|| PerUser {
                    prefix: config
                        .get("couch_peruser", "database_prefix")
                        .unwrap_or("userdb-")
                        .to_string(),
                    delete_dbs: config.value::<bool>(&setting::PERUSER_DELETE_DBS),
                    q: config.value::<usize>(&setting::PERUSER_Q).max(1),
                }),
            admin_only_by_default: !matches!(
                config.get("couchdb", "default_security"),
                Some("everyone" | "admin_local")
            ),
            users_db_security_editable: config.value::<bool>(&setting::USERS_DB_SECURITY_EDITABLE),
        }
    }
}

/// The database holding user accounts (`[chttpd_auth] authentication_db`).
pub fn users_db(config: &Config) -> String {
    config
        .get("chttpd_auth", "authentication_db")
        .unwrap_or("_users")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_follows_the_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::load(&dir.path().join("settee.ini")).unwrap();
        let defaults = Policy::from_config(&config);
        assert_eq!(defaults.users_db, "_users");
        assert!(defaults.public_fields.is_empty());
        assert!(defaults.peruser.is_none());
        assert!(defaults.admin_only_by_default);
        assert!(!defaults.users_db_security_editable);
        assert_eq!(
            defaults.iterations,
            config.value::<u32>(&setting::ITERATIONS)
        );
        for (section, key, value) in [
            ("chttpd_auth", "authentication_db", "accounts"),
            ("chttpd_auth", "public_fields", "name, city,,"),
            ("chttpd_auth", "iterations", "7"),
            ("couch_peruser", "enable", "true"),
            ("couch_peruser", "q", "0"),
            ("couchdb", "default_security", "everyone"),
            ("couchdb", "users_db_security_editable", "true"),
        ] {
            config.set(section, key, value).unwrap();
        }
        let changed = Policy::from_config(&config);
        assert_eq!(changed.users_db, "accounts");
        assert_eq!(changed.public_fields, ["name", "city"]);
        assert_eq!(changed.iterations, 7);
        let peruser = changed.peruser.expect("per-user databases on");
        assert_eq!((peruser.prefix.as_str(), peruser.q), ("userdb-", 1));
        assert!(!peruser.delete_dbs);
        assert!(!changed.admin_only_by_default);
        assert!(changed.users_db_security_editable);
    }
}
