//! Password hashes: PBKDF2 as CouchDB stores it, in the config file (`[admins]`) and in
//! `_users` documents. Checking is slow by design; callers run it off the event loop.

use rand::RngCore;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// Default PBKDF2 iterations for new hashes (`[chttpd_auth] iterations`).
pub const DEFAULT_ITERATIONS: u32 = 600_000;

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `bytes` random bytes as hex (salts, secrets, generated passwords).
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buf);
    hex(&buf)
}

fn pbkdf2_sha256(password: &str, salt: &str, iterations: u32, len: usize) -> Vec<u8> {
    let mut key = vec![0u8; len];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt.as_bytes(), iterations, &mut key);
    key
}

fn pbkdf2_sha1(password: &str, salt: &str, iterations: u32, len: usize) -> Vec<u8> {
    let mut key = vec![0u8; len];
    pbkdf2::pbkdf2_hmac::<sha1::Sha1>(password.as_bytes(), salt.as_bytes(), iterations, &mut key);
    key
}

/// Compares without leaking where the first difference is.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Hashes a password for the config file: `-pbkdf2:sha256-<key>,<salt>,<iterations>`.
pub fn hash_password(password: &str, iterations: u32) -> String {
    let salt = random_hex(16);
    format!(
        "-pbkdf2:sha256-{},{salt},{iterations}",
        hex(&pbkdf2_sha256(password, &salt, iterations, 32))
    )
}

/// Whether a config value is already a hash (rather than a plaintext password to hash).
pub fn is_hashed(value: &str) -> bool {
    value.starts_with("-pbkdf2") || value.starts_with("-hashed-")
}

/// Checks a password against a config-file hash (PBKDF2-SHA256, PBKDF2-SHA1 or legacy
/// salted SHA-1). Plaintext never matches.
pub fn verify_password(stored: &str, password: &str) -> bool {
    let pbkdf2 = |rest: &str, f: fn(&str, &str, u32, usize) -> Vec<u8>| {
        let [key, salt, iter] = rest.splitn(3, ',').collect::<Vec<_>>()[..] else {
            return false;
        };
        let (Some(want), Ok(iter)) = (unhex(key), iter.parse::<u32>()) else {
            return false;
        };
        same(&want, &f(password, salt, iter, want.len()))
    };
    if let Some(rest) = stored.strip_prefix("-pbkdf2:sha256-") {
        return pbkdf2(rest, pbkdf2_sha256);
    }
    if let Some(rest) = stored.strip_prefix("-pbkdf2-") {
        return pbkdf2(rest, pbkdf2_sha1);
    }
    if let Some(rest) = stored.strip_prefix("-hashed-") {
        let Some((key, salt)) = rest.split_once(',') else {
            return false;
        };
        let Some(want) = unhex(key) else { return false };
        let got = sha1::Sha1::new()
            .chain_update(password.as_bytes())
            .chain_update(salt.as_bytes())
            .finalize();
        return same(&want, &got);
    }
    false
}

/// The credential members of a `_users` document for `password`, as CouchDB writes them.
pub fn user_doc_credentials(password: &str, iterations: u32) -> Map<String, Value> {
    let salt = random_hex(16);
    let key = hex(&pbkdf2_sha256(password, &salt, iterations, 32));
    let fields = json!({"password_scheme": "pbkdf2", "pbkdf2_prf": "sha256", "iterations": iterations, "derived_key": key, "salt": salt});
    match fields {
        Value::Object(m) => m,
        _ => unreachable!("an object literal"),
    }
}

/// Checks a password against a `_users` document's credentials (`pbkdf2` with SHA-256 or
/// SHA-1, or the legacy `simple` scheme).
pub fn verify_user_doc(doc: &Value, password: &str) -> bool {
    let text = |k: &str| doc.get(k).and_then(Value::as_str);
    let Some(salt) = text("salt") else {
        return false;
    };
    match text("password_scheme").unwrap_or("simple") {
        "pbkdf2" => {
            let (Some(want), Some(iterations)) = (
                text("derived_key").and_then(unhex),
                doc.get("iterations").and_then(Value::as_u64),
            ) else {
                return false;
            };
            let Ok(iterations) = u32::try_from(iterations) else {
                return false;
            };
            match text("pbkdf2_prf").unwrap_or("sha") {
                "sha256" => same(
                    &want,
                    &pbkdf2_sha256(password, salt, iterations, want.len()),
                ),
                "sha" | "sha1" => same(&want, &pbkdf2_sha1(password, salt, iterations, want.len())),
                _ => false,
            }
        }
        "simple" => {
            let Some(want) = text("password_sha").and_then(unhex) else {
                return false;
            };
            let got = sha1::Sha1::new()
                .chain_update(password.as_bytes())
                .chain_update(salt.as_bytes())
                .finalize();
            same(&want, &got)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_hashes_verify_and_wrong_passwords_fail() {
        let h = hash_password("s3cret", 1000);
        assert!(h.starts_with("-pbkdf2:sha256-") && is_hashed(&h));
        assert!(verify_password(&h, "s3cret"));
        assert!(!verify_password(&h, "s3cre"));
        assert!(
            !verify_password("-pbkdf2:sha256-zz,salt", "x"),
            "malformed hashes never match"
        );
        assert!(
            !verify_password("plain", "plain"),
            "plaintext is never accepted as a hash"
        );
    }

    #[test]
    fn user_documents_verify_in_every_scheme() {
        let mut doc = Value::Object(user_doc_credentials("pw", 100));
        assert_eq!(doc["password_scheme"], "pbkdf2");
        assert!(verify_user_doc(&doc, "pw") && !verify_user_doc(&doc, "pW"));
        doc["iterations"] = json!(101);
        assert!(
            !verify_user_doc(&doc, "pw"),
            "the iterations are part of the hash"
        );
        // PBKDF2-SHA1, as CouchDB before 3.4 wrote: RFC 6070's first test vector.
        let sha1 = json!({"password_scheme": "pbkdf2", "salt": "salt", "iterations": 1, "derived_key": "0c60c80f961f0e71f3a9b524af6012062fe037a6"});
        assert!(verify_user_doc(&sha1, "password"));
        let simple = json!({"salt": "s", "password_sha": hex(&sha1::Sha1::new().chain_update(b"pws").finalize())});
        assert!(verify_user_doc(&simple, "pw") && !verify_user_doc(&simple, "p"));
        assert!(
            !verify_user_doc(&json!({"password": "pw"}), "pw"),
            "plaintext never matches"
        );
    }
}
