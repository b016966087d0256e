//! Who is asking: server admins from `[admins]` and users from the `_users` database,
//! checked by HTTP Basic credentials or an `AuthSession` cookie. Successful Basic checks are
//! remembered (by a salted digest of the header) so a client sending credentials on every
//! request pays the key derivation once; the account is still looked up each time, so a
//! changed password or deleted user takes effect at once.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::RwLock;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::Value;
use settee_db::{Catalog, DocOptions};

pub use settee_auth::password::{hash_password, random_hex, verify_password};
pub use settee_auth::User;

use crate::config::Config;
use crate::settings::Settings;

pub use settee_node::users_db;

pub use settee_auth::users::USER_PREFIX;

/// What an account's password is checked against.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// A hash from `[admins]`.
    Config(String),
    /// A `_users` document.
    Doc(Value),
}

/// A known account.
#[derive(Clone, Debug)]
pub struct Account {
    /// The user, with roles.
    pub user: User,
    /// What its password is checked against.
    pub credentials: Credentials,
}

impl Account {
    /// The per-account value that cookie MACs cover and that cached Basic checks are tied
    /// to: it changes whenever the password does.
    pub fn fingerprint(&self) -> String {
        match &self.credentials {
            Credentials::Config(hash) => hash.clone(),
            Credentials::Doc(doc) => {
                let text = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or("");
                format!(
                    "{}:{}:{}",
                    text("salt"),
                    text("derived_key"),
                    text("password_sha")
                )
            }
        }
    }

    /// Whether `password` is this account's (slow: PBKDF2).
    pub fn verify(&self, password: &str) -> bool {
        match &self.credentials {
            Credentials::Config(hash) => verify_password(hash, password),
            Credentials::Doc(doc) => settee_auth::password::verify_user_doc(doc, password),
        }
    }
}

/// The account named `name`: a server admin from the config first, else the user document
/// `org.couchdb.user:NAME` in the users database.
pub fn account(config: &Config, catalog: &Catalog, name: &str) -> Option<Account> {
    if let Some(hash) = config.get("admins", name) {
        return Some(Account {
            user: User::admin(name),
            credentials: Credentials::Config(hash.to_string()),
        });
    }
    let db = catalog.get(&users_db(config)).ok()?;
    let body = db
        .snapshot()
        .open_doc(
            &format!("{USER_PREFIX}{name}"),
            None,
            &DocOptions::default(),
        )
        .ok()?;
    let doc: Value = settee_json::deep::from_slice(&body).ok()?;
    if doc.get("type").and_then(Value::as_str) != Some("user") {
        return None;
    }
    let roles = doc
        .get("roles")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Some(Account {
        user: User {
            name: name.to_string(),
            roles,
        },
        credentials: Credentials::Doc(doc),
    })
}

/// The authentication handlers `[chttpd] authentication_handlers` lists, in its order, by
/// CouchDB's names (`cookie`, `default`, `jwt`, `proxy`); cookie then Basic when unset.
pub fn handlers(config: &Config) -> Vec<&'static str> {
    let Some(list) = config.get("chttpd", "authentication_handlers") else {
        return vec!["cookie", "default"];
    };
    let mut found: Vec<(usize, &'static str)> = ["cookie", "default", "jwt", "proxy"]
        .into_iter()
        .filter_map(|h| {
            list.find(&format!("{h}_authentication_handler"))
                .map(|at| (at, h))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, h)| h).collect()
}

/// The JWT settings: `[jwt_keys]` and `[jwt_auth]`.
pub fn jwt_config(config: &Config) -> settee_auth::jwt::JwtConfig {
    let keys = config
        .section("jwt_keys")
        .unwrap_or_default()
        .iter()
        .cloned()
        .collect();
    let required_claims = config
        .get("jwt_auth", "required_claims")
        .unwrap_or("")
        .split(',')
        .map(|c| {
            c.trim()
                .trim_start_matches('{')
                .split(',')
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .filter(|c| !c.is_empty())
        .collect();
    settee_auth::jwt::JwtConfig {
        keys,
        required_claims,
        roles_claim_path: config
            .get("jwt_auth", "roles_claim_path")
            .map(str::to_string),
        roles_claim_name: config
            .get("jwt_auth", "roles_claim_name")
            .unwrap_or("_couchdb.roles")
            .to_string(),
    }
}

/// The user named `name` if their account still has `fingerprint` (a password check that
/// passed earlier still holds). Server admins are found in the parsed settings; anyone else
/// through `account`, called only then.
pub fn revalidate(
    settings: &Settings,
    name: &str,
    fingerprint: &str,
    account: impl FnOnce() -> Option<Account>,
) -> Option<User> {
    if let Some(hash) = settings.admins.get(name) {
        return (hash == fingerprint).then(|| User::admin(name));
    }
    account()
        .filter(|a| a.fingerprint() == fingerprint)
        .map(|a| a.user)
}

/// Remembers which Basic `Authorization` values passed, for which account fingerprint.
pub struct Authenticator {
    verified: RwLock<HashMap<u64, (String, String)>>,
    /// Random per process, so the keys cannot be predicted.
    hasher: RandomState,
}

impl Default for Authenticator {
    fn default() -> Self {
        Authenticator {
            verified: RwLock::new(HashMap::new()),
            hasher: RandomState::new(),
        }
    }
}

impl Authenticator {
    /// The user a Basic header was already verified for, if `still_valid(name, fingerprint)`
    /// says the account is unchanged.
    pub fn cached(
        &self,
        header: &str,
        still_valid: impl FnOnce(&str, &str) -> Option<User>,
    ) -> Option<User> {
        use settee_metrics::{inc, Metric};
        let key = self.hasher.hash_one(header);
        let verified = self.verified.read().expect("auth cache");
        let found = verified
            .get(&key)
            .and_then(|(name, fingerprint)| still_valid(name, fingerprint));
        inc(if found.is_some() {
            Metric::AuthCacheHits
        } else {
            Metric::AuthCacheMisses
        });
        found
    }

    /// Verifies Basic credentials against `account` (slow by design: run it off the event
    /// loop) and remembers them when they pass.
    pub fn verify(&self, header: &str, password: &str, account: Option<Account>) -> Option<User> {
        let account = account?;
        if !account.verify(password) {
            return None;
        }
        let mut verified = self.verified.write().expect("auth cache");
        if verified.len() > 10_000 {
            verified.clear();
        }
        verified.insert(
            self.hasher.hash_one(header),
            (account.user.name.clone(), account.fingerprint()),
        );
        Some(account.user)
    }
}

/// Reads `Authorization: Basic …` into a name and password.
pub fn parse_basic(header: &str) -> Option<(String, String)> {
    let encoded = header
        .strip_prefix("Basic ")
        .or_else(|| header.strip_prefix("basic "))?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (name, password) = decoded.split_once(':')?;
    Some((name.to_string(), password.to_string()))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin_account(hash: &str) -> Option<Account> {
        Some(Account {
            user: User::admin("root"),
            credentials: Credentials::Config(hash.to_string()),
        })
    }

    /// `still_valid` for an account looked up by `lookup`.
    fn valid(lookup: Option<Account>) -> impl FnOnce(&str, &str) -> Option<User> {
        move |_, fingerprint| {
            lookup
                .filter(|a| a.fingerprint() == fingerprint)
                .map(|a| a.user)
        }
    }

    #[test]
    fn verified_basic_credentials_are_remembered_until_the_password_changes() {
        let hash = hash_password("pw", 1000);
        let auth = Authenticator::default();
        let good = format!("Basic {}", STANDARD.encode("root:pw"));
        assert!(auth.cached(&good, valid(admin_account(&hash))).is_none());
        assert_eq!(
            auth.verify(&good, "pw", admin_account(&hash)).unwrap().name,
            "root"
        );
        assert_eq!(
            auth.cached(&good, valid(admin_account(&hash)))
                .unwrap()
                .name,
            "root"
        );
        assert!(auth
            .verify("Basic eA==", "nope", admin_account(&hash))
            .is_none());
        let changed = hash_password("new", 1000);
        assert!(
            auth.cached(&good, valid(admin_account(&changed))).is_none(),
            "a changed password ends the cached pass"
        );
        assert!(
            auth.cached(&good, valid(None)).is_none(),
            "a removed account ends it too"
        );
    }

    #[test]
    fn user_document_accounts_verify_and_fingerprint_their_credentials() {
        let doc = Value::Object(settee_auth::password::user_doc_credentials("pw", 100));
        let account = Account {
            user: User {
                name: "u".into(),
                roles: vec![],
            },
            credentials: Credentials::Doc(doc),
        };
        assert!(account.verify("pw") && !account.verify("px"));
        let again = Value::Object(settee_auth::password::user_doc_credentials("pw", 100));
        let other = Account {
            credentials: Credentials::Doc(again),
            ..account.clone()
        };
        assert_ne!(
            account.fingerprint(),
            other.fingerprint(),
            "a new salt is a new fingerprint"
        );
    }

    #[test]
    fn basic_credentials_parse() {
        assert_eq!(
            parse_basic("Basic YWRtaW46cGE6c3M="),
            Some(("admin".into(), "pa:ss".into()))
        );
        assert_eq!(parse_basic("Bearer x"), None);
    }
}
