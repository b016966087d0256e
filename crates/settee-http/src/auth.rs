//! Who is asking: server admins from `[admins]`, checked by HTTP Basic credentials or an
//! `AuthSession` cookie. Password hashes use PBKDF2 in CouchDB's config format; successful
//! checks are remembered (by a salted digest of the credentials) so a client that sends Basic
//! credentials on every request pays the key derivation once.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::RwLock;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};


use crate::config::Config;

/// Default PBKDF2 iterations for new hashes (`[chttpd_auth] iterations`).
pub const DEFAULT_ITERATIONS: u32 = 50_000;
/// Seconds a session cookie stays valid (`[chttpd_auth] timeout`).
pub const DEFAULT_TIMEOUT: u64 = 600;

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// Roles; server admins have `_admin`.
    pub roles: Vec<String>,
}

impl User {
    /// Whether this is a server admin.
    pub fn is_admin(&self) -> bool {
        self.roles.iter().any(|r| r == "_admin")
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// Hashes a password for the config file: `-pbkdf2:sha256-<key>,<salt>,<iterations>`.
pub fn hash_password(password: &str, iterations: u32) -> String {
    let mut salt = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut salt);
    let salt = hex(&salt);
    let mut key = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt.as_bytes(), iterations, &mut key);
    format!("-pbkdf2:sha256-{},{salt},{iterations}", hex(&key))
}

/// Whether a config value is already a hash (rather than a plaintext password to hash).
pub fn is_hashed(value: &str) -> bool {
    value.starts_with("-pbkdf2") || value.starts_with("-hashed-")
}

/// Checks a password against a stored hash (PBKDF2-SHA256, PBKDF2-SHA1 or legacy salted SHA-1).
pub fn verify_password(stored: &str, password: &str) -> bool {
    let check = |want: &[u8], got: &[u8]| want.len() == got.len() && want.iter().zip(got).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0;
    if let Some(rest) = stored.strip_prefix("-pbkdf2:sha256-") {
        let [key, salt, iter] = rest.splitn(3, ',').collect::<Vec<_>>()[..] else { return false };
        let (Some(want), Ok(iter)) = (unhex(key), iter.parse::<u32>()) else { return false };
        let mut got = vec![0u8; want.len()];
        pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt.as_bytes(), iter, &mut got);
        return check(&want, &got);
    }
    if let Some(rest) = stored.strip_prefix("-pbkdf2-") {
        let [key, salt, iter] = rest.splitn(3, ',').collect::<Vec<_>>()[..] else { return false };
        let (Some(want), Ok(iter)) = (unhex(key), iter.parse::<u32>()) else { return false };
        let mut got = vec![0u8; want.len()];
        pbkdf2::pbkdf2_hmac::<sha1::Sha1>(password.as_bytes(), salt.as_bytes(), iter, &mut got);
        return check(&want, &got);
    }
    if let Some(rest) = stored.strip_prefix("-hashed-") {
        let Some((key, salt)) = rest.split_once(',') else { return false };
        let Some(want) = unhex(key) else { return false };
        let got = sha1::Sha1::new().chain_update(password.as_bytes()).chain_update(salt.as_bytes()).finalize();
        return check(&want, &got);
    }
    false
}

/// Checks credentials against the configured admins, remembering Basic credentials that
/// passed so that a client sending them on every request pays the key derivation once.
pub struct Authenticator {
    /// Keyed hash of an `Authorization` value that passed -> the admin and the stored hash
    /// it passed against (a changed password no longer matches).
    verified: RwLock<HashMap<u64, (String, String)>>,
    /// Random per process, so the keys cannot be predicted.
    hasher: RandomState,
}

impl Default for Authenticator {
    fn default() -> Self {
        Authenticator { verified: RwLock::new(HashMap::new()), hasher: RandomState::new() }
    }
}

impl Authenticator {
    /// The admin a Basic `Authorization` value was already verified for, if it still holds.
    pub fn cached(&self, config: &Config, header: &str) -> Option<User> {
        let key = self.hasher.hash_one(header);
        let verified = self.verified.read().expect("auth cache");
        let (name, stored) = verified.get(&key)?;
        (config.get("admins", name) == Some(stored.as_str())).then(|| admin(name))
    }

    /// Verifies Basic credentials (slow by design: run it off the event loop) and remembers
    /// them when they pass.
    pub fn verify(&self, config: &Config, header: &str) -> Option<User> {
        let (name, password) = parse_basic(header)?;
        let user = self.check(config, &name, &password)?;
        let stored = config.get("admins", &name)?.to_string();
        let mut verified = self.verified.write().expect("auth cache");
        if verified.len() > 10_000 {
            verified.clear();
        }
        verified.insert(self.hasher.hash_one(header), (name, stored));
        Some(user)
    }

    /// The admin named `name`, if `password` is theirs (slow: PBKDF2).
    pub fn check(&self, config: &Config, name: &str, password: &str) -> Option<User> {
        let stored = config.get("admins", name)?;
        verify_password(stored, password).then(|| admin(name))
    }
}

fn admin(name: &str) -> User {
    User { name: name.to_string(), roles: vec!["_admin".to_string()] }
}

/// Reads `Authorization: Basic …` into a name and password.
pub fn parse_basic(header: &str) -> Option<(String, String)> {
    let encoded = header.strip_prefix("Basic ").or_else(|| header.strip_prefix("basic "))?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (name, password) = decoded.split_once(':')?;
    Some((name.to_string(), password.to_string()))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn cookie_mac(secret: &[u8], stored_hash: &str, payload: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(stored_hash.as_bytes());
    mac.update(&[0]);
    mac.update(payload.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// A session cookie value for `name`: `base64url(name:hex-time:hmac)`. The MAC covers the
/// user's stored password hash, so changing the password ends their sessions.
pub fn make_cookie(secret: &[u8], stored_hash: &str, name: &str) -> String {
    let payload = format!("{name}:{:X}", now());
    let mac = cookie_mac(secret, stored_hash, &payload);
    let mut raw = payload.into_bytes();
    raw.push(b':');
    raw.extend_from_slice(&mac);
    URL_SAFE_NO_PAD.encode(raw)
}

/// The admin a session cookie names and its age in seconds, if it is genuine and not older
/// than `timeout` seconds.
pub fn check_cookie(config: &Config, secret: &[u8], cookie: &str, timeout: u64) -> Option<(User, u64)> {
    let raw = URL_SAFE_NO_PAD.decode(cookie.trim_end_matches('=')).ok()?;
    let first = raw.iter().position(|&b| b == b':')?;
    let second = first + 1 + raw[first + 1..].iter().position(|&b| b == b':')?;
    let name = std::str::from_utf8(&raw[..first]).ok()?;
    let time = u64::from_str_radix(std::str::from_utf8(&raw[first + 1..second]).ok()?, 16).ok()?;
    let payload = std::str::from_utf8(&raw[..second]).ok()?;
    let stored = config.get("admins", name)?;
    let want = cookie_mac(secret, stored, payload);
    let got = &raw[second + 1..];
    let equal = want.len() == got.len() && want.iter().zip(got).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0;
    (equal && now() < time.saturating_add(timeout)).then(|| (admin(name), now().saturating_sub(time)))
}

/// A `Set-Cookie` value for a session cookie; persistent cookies carry `Max-Age` (CouchDB's
/// `[chttpd_auth] allow_persistent_cookies`, on by default in 3.x).
pub fn cookie_header(value: &str, timeout: u64, persistent: bool) -> String {
    let mut h = format!("AuthSession={value}; Version=1; Path=/; HttpOnly");
    if persistent {
        h.push_str(&format!("; Max-Age={timeout}"));
    }
    h
}

/// Whether a session cookie this old should be replaced by a fresh one (once 10% of its
/// lifetime has passed, as CouchDB does).
pub fn needs_refresh(age: u64, timeout: u64) -> bool {
    age.saturating_mul(10) > timeout
}

/// A random secret or password: `bytes` random bytes as hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buf);
    hex(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_wrong_passwords_fail() {
        let h = hash_password("s3cret", 1000);
        assert!(h.starts_with("-pbkdf2:sha256-"));
        assert!(verify_password(&h, "s3cret"));
        assert!(!verify_password(&h, "s3cre"));
        assert!(!verify_password("-pbkdf2:sha256-zz,salt", "x"), "malformed hashes never match");
        assert!(!verify_password("plain", "plain"), "plaintext is never accepted as a hash");
    }

    #[test]
    fn cookies_are_signed_and_expire() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::load(&dir.path().join("c.ini")).unwrap();
        config.set("admins", "root", &hash_password("pw", 1000)).unwrap();
        let stored = config.get("admins", "root").unwrap().to_string();
        let cookie = make_cookie(b"secret", &stored, "root");
        assert_eq!(check_cookie(&config, b"secret", &cookie, 600).unwrap().0.name, "root");
        assert!(!needs_refresh(10, 600) && needs_refresh(61, 600));
        assert!(check_cookie(&config, b"other", &cookie, 600).is_none(), "wrong secret");
        assert!(check_cookie(&config, b"secret", &cookie, 0).is_none(), "expired");
        assert!(check_cookie(&config, b"secret", "garbage", 600).is_none());
        config.set("admins", "root", &hash_password("new", 1000)).unwrap();
        assert!(check_cookie(&config, b"secret", &cookie, 600).is_none(), "password changed");
    }

    #[test]
    fn verified_basic_credentials_are_remembered_until_the_password_changes() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::load(&dir.path().join("c.ini")).unwrap();
        config.set("admins", "root", &hash_password("pw", 1000)).unwrap();
        let auth = Authenticator::default();
        let good = format!("Basic {}", STANDARD.encode("root:pw"));
        let bad = format!("Basic {}", STANDARD.encode("root:nope"));
        assert!(auth.cached(&config, &good).is_none());
        assert_eq!(auth.verify(&config, &good).unwrap().name, "root");
        assert_eq!(auth.cached(&config, &good).unwrap().name, "root");
        assert!(auth.verify(&config, &bad).is_none());
        assert!(auth.cached(&config, &bad).is_none());
        config.set("admins", "root", &hash_password("new", 1000)).unwrap();
        assert!(auth.cached(&config, &good).is_none(), "a changed password ends the cached pass");
        assert!(auth.verify(&config, &good).is_none());
    }

    #[test]
    fn basic_credentials_parse() {
        assert_eq!(parse_basic("Basic YWRtaW46cGE6c3M="), Some(("admin".into(), "pa:ss".into())));
        assert_eq!(parse_basic("Bearer x"), None);
    }
}
