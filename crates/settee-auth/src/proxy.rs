//! Proxy authentication: a trusted proxy in front of the server names the user and roles in
//! headers (`X-Auth-CouchDB-UserName`, `-Roles`), optionally proving it knows the server
//! secret with `X-Auth-CouchDB-Token` = hex HMAC of the user name.

use hmac::{Hmac, Mac};

use crate::password::{hex, same};

/// Whether `token` is the HMAC (SHA-256, or SHA-1 as older CouchDB made it) of `name` under
/// `secret`, in lower-case hex.
pub fn token_matches(secret: &[u8], name: &str, token: &str) -> bool {
    let token = token.trim().to_ascii_lowercase();
    [
        mac_hex::<Hmac<sha2::Sha256>>(secret, name),
        mac_hex::<Hmac<sha1::Sha1>>(secret, name),
    ]
    .iter()
    .any(|mac| same(mac.as_bytes(), token.as_bytes()))
}

/// Lower-case hex of the HMAC `M` of `name` keyed by `secret`.
fn mac_hex<M: Mac + hmac::digest::KeyInit>(secret: &[u8], name: &str) -> String {
    let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(secret).expect("any key length");
    mac.update(name.as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// Roles from the roles header: comma-separated, trimmed.
pub fn roles(header: Option<&str>) -> Vec<String> {
    header
        .unwrap_or("")
        .split(',')
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_hmacs_of_the_name() {
        // HMAC-SHA1("key", "The quick brown fox jumps over the lazy dog"), a published vector.
        assert!(token_matches(
            b"key",
            "The quick brown fox jumps over the lazy dog",
            "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9"
        ));
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(b"s").unwrap();
        mac.update(b"ann");
        assert!(token_matches(
            b"s",
            "ann",
            &hex(&mac.finalize().into_bytes())
        ));
        assert!(!token_matches(
            b"s",
            "bob",
            "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9"
        ));
        assert_eq!(roles(Some(" a, b ,,c")), ["a", "b", "c"]);
    }
}
