//! JSON Web Tokens (`Authorization: Bearer …`) as CouchDB checks them: HS/RS/ES 256/384/512
//! signatures with keys named `hmac:KID`, `rsa:KID` or `ec:KID` (`_default` when the token
//! has no `kid`), the claims `[jwt_auth] required_claims` names, `sub` as the user name and
//! roles from a claim.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde_json::Value;

use crate::user::User;

/// What a JWT check needs from the configuration.
#[derive(Clone, Debug, Default)]
pub struct JwtConfig {
    /// `[jwt_keys]`: `kty:kid` to the key (base64 secret for `hmac`, PEM for `rsa`/`ec`,
    /// with newlines written as `\n`).
    pub keys: HashMap<String, String>,
    /// `[jwt_auth] required_claims`: claims that must be present (`exp`, `nbf`, `iat`,
    /// `iss`); `exp` and `nbf` are checked against the clock only when required.
    pub required_claims: Vec<String>,
    /// `[jwt_auth] roles_claim_path`: a dotted path (`\.` for a literal dot) to the roles.
    pub roles_claim_path: Option<String>,
    /// `[jwt_auth] roles_claim_name`: a top-level claim holding the roles (`_couchdb.roles`).
    pub roles_claim_name: String,
}

/// Why a token was refused, with CouchDB's status: `bad_request` (400) for malformed or
/// badly signed tokens, `unauthorized` (401) for expired ones or ones without `sub`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwtError {
    /// 400 `bad_request`.
    BadRequest(String),
    /// 401 `unauthorized`.
    Unauthorized(String),
}

fn bad(reason: &str) -> JwtError {
    JwtError::BadRequest(reason.to_string())
}

/// The `[jwt_keys]` entry for a key type and a token's `kid`.
fn key_text<'a>(kty: &str, kid: Option<&str>, cfg: &'a JwtConfig) -> Result<&'a str, JwtError> {
    cfg.keys
        .get(&format!("{kty}:{}", kid.unwrap_or("_default")))
        .map(String::as_str)
        .ok_or_else(|| bad("Unknown kid"))
}

fn key_for(alg: Algorithm, kid: Option<&str>, cfg: &JwtConfig) -> Result<DecodingKey, JwtError> {
    let kty = match alg {
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => "hmac",
        Algorithm::RS256 | Algorithm::RS384 | Algorithm::RS512 => "rsa",
        Algorithm::ES256 | Algorithm::ES384 => "ec",
        _ => return Err(bad("Invalid alg header parameter")),
    };
    let value = key_text(kty, kid, cfg)?;
    let pem = value.replace("\\n", "\n");
    match kty {
        "hmac" => STANDARD
            .decode(value.trim())
            .map(|k| DecodingKey::from_secret(&k))
            .map_err(|_| bad("Not a valid key")),
        "rsa" => {
            DecodingKey::from_rsa_pem(pem.as_bytes()).map_err(|_| bad("not an RSA public key"))
        }
        _ => DecodingKey::from_ec_pem(pem.as_bytes()).map_err(|_| bad("not an EC public key")),
    }
}

/// Checks `token` and returns the user it names.
pub fn verify(token: &str, cfg: &JwtConfig) -> Result<User, JwtError> {
    if check_alg(token)? == "ES512" {
        return es512::verify(token, cfg);
    }
    let header = decode_header(token).map_err(|_| bad("Malformed token"))?;
    let key = key_for(header.alg, header.kid.as_deref(), cfg)?;
    let mut validation = Validation::new(header.alg);
    validation.leeway = 0;
    validation.validate_aud = false;
    validation.validate_exp = cfg.required_claims.iter().any(|c| c == "exp");
    validation.validate_nbf = cfg.required_claims.iter().any(|c| c == "nbf");
    validation.set_required_spec_claims(&cfg.required_claims);
    let hmac = matches!(
        header.alg,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    );
    let claims = decode::<Value>(token, &key, &validation).map_err(|e| match e.kind() {
        ErrorKind::ExpiredSignature => JwtError::Unauthorized("exp not in future".into()),
        ErrorKind::ImmatureSignature => JwtError::Unauthorized("nbf not in past".into()),
        ErrorKind::InvalidSignature if hmac => bad("Bad HMAC"),
        ErrorKind::InvalidSignature => bad("Bad signature"),
        ErrorKind::MissingRequiredClaim(c) => JwtError::BadRequest(format!("Missing {c} claim")),
        _ => bad("Malformed token"),
    })?;
    user(claims.claims, cfg)
}

/// The user a verified token's claims name: `sub`, and the roles claim.
fn user(claims: Value, cfg: &JwtConfig) -> Result<User, JwtError> {
    let name = claims
        .get("sub")
        .and_then(Value::as_str)
        .ok_or_else(|| JwtError::Unauthorized("Token missing sub claim.".into()))?;
    Ok(User {
        name: name.to_string(),
        roles: roles(&claims, cfg)?,
    })
}

/// The algorithms CouchDB verifies.
const ALGS: [&str; 9] = [
    "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512",
];

/// CouchDB's header checks before any signature: `alg` must be present and one it verifies
/// (`none`, `PS256`, `EdDSA`, ... are refused as CouchDB refuses them).
fn check_alg(token: &str) -> Result<&'static str, JwtError> {
    let header = json_part(token.split('.').next().unwrap_or_default())?;
    match header.get("alg") {
        None => Err(bad("Missing alg header parameter")),
        Some(Value::String(alg)) => ALGS
            .into_iter()
            .find(|a| a == alg)
            .ok_or_else(|| bad("Invalid alg header parameter")),
        Some(_) => Err(bad("Invalid alg header parameter")),
    }
}

/// A base64url-encoded JSON part of a token.
fn json_part(part: &str) -> Result<Value, JwtError> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| bad("Malformed token"))
}

/// ES512 (ECDSA over P-521 with SHA-512), which the general JWT library lacks: the
/// signature checked here, and the claims as [`verify`] has the library check them.
mod es512 {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use p521::ecdsa::signature::Verifier;
    use p521::ecdsa::{Signature, VerifyingKey};
    use p521::pkcs8::DecodePublicKey;
    use serde_json::Value;

    use super::{bad, json_part, key_text, user, JwtConfig, JwtError};
    use crate::user::User;

    pub(super) fn verify(token: &str, cfg: &JwtConfig) -> Result<User, JwtError> {
        let malformed = || bad("Malformed token");
        let (signed, signature) = token.rsplit_once('.').ok_or_else(malformed)?;
        let (header, payload) = signed.split_once('.').ok_or_else(malformed)?;
        let kid = json_part(header)?
            .get("kid")
            .and_then(Value::as_str)
            .map(str::to_string);
        let pem = key_text("ec", kid.as_deref(), cfg)?.replace("\\n", "\n");
        let key =
            p521::PublicKey::from_public_key_pem(&pem).map_err(|_| bad("not an EC public key"))?;
        let key =
            VerifyingKey::from_affine(*key.as_affine()).map_err(|_| bad("not an EC public key"))?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .ok()
            .and_then(|bytes| Signature::from_slice(&bytes).ok())
            .ok_or_else(|| bad("Bad signature"))?;
        key.verify(signed.as_bytes(), &signature)
            .map_err(|_| bad("Bad signature"))?;
        let claims = json_part(payload)?;
        check_claims(&claims, cfg)?;
        user(claims, cfg)
    }

    /// The required claims present, and `exp` and `nbf` (when required) against the clock.
    fn check_claims(claims: &Value, cfg: &JwtConfig) -> Result<(), JwtError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        for claim in &cfg.required_claims {
            let Some(value) = claims.get(claim) else {
                return Err(JwtError::BadRequest(format!("Missing {claim} claim")));
            };
            let at = value.as_u64();
            match claim.as_str() {
                "exp" if at.is_none_or(|exp| exp < now) => {
                    return Err(JwtError::Unauthorized("exp not in future".into()))
                }
                "nbf" if at.is_none_or(|nbf| nbf > now) => {
                    return Err(JwtError::Unauthorized("nbf not in past".into()))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The roles claim: an array of strings (or a comma-separated string), at the configured path.
fn roles(claims: &Value, cfg: &JwtConfig) -> Result<Vec<String>, JwtError> {
    let found = match &cfg.roles_claim_path {
        Some(path) => split_path(path)
            .iter()
            .try_fold(claims, |v, part| v.get(part.as_str())),
        None => claims.get(cfg.roles_claim_name.as_str()),
    };
    match found {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|r| {
                r.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad("Malformed token"))
            })
            .collect(),
        Some(Value::String(s)) => Ok(s
            .split(',')
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .collect()),
        Some(_) => Err(bad("Malformed token")),
    }
}

/// `a.b\.c` → `["a", "b.c"]`.
fn split_path(path: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                chars.next();
                parts.last_mut().expect("one part").push('.');
            }
            '.' => parts.push(String::new()),
            c => parts.last_mut().expect("one part").push(c),
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{encode, EncodingKey, Header};
    use serde_json::json;

    fn hmac_config(required: &[&str]) -> JwtConfig {
        JwtConfig {
            keys: HashMap::from([("hmac:_default".to_string(), STANDARD.encode(b"sekrit"))]),
            required_claims: required.iter().map(|c| c.to_string()).collect(),
            roles_claim_path: None,
            roles_claim_name: "_couchdb.roles".into(),
        }
    }

    fn hs256(claims: Value, secret: &[u8]) -> String {
        encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret),
        )
        .unwrap()
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    /// A token with the given header, any payload and signature.
    fn with_header(header: Value) -> String {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
        format!("{}.{}.c2ln", part(&header), part(&json!({"sub": "x"})))
    }

    #[test]
    fn algorithms_are_checked_as_couchdb_checks_them() {
        let cfg = hmac_config(&[]);
        let refused = |header: Value| verify(&with_header(header), &cfg).unwrap_err();
        for alg in ["none", "PS256", "EdDSA", "HS1", "ES1024"] {
            assert_eq!(
                refused(json!({"alg": alg})),
                bad("Invalid alg header parameter"),
                "{alg}"
            );
        }
        assert_eq!(
            refused(json!({"alg": 5})),
            bad("Invalid alg header parameter")
        );
        assert_eq!(
            refused(json!({"typ": "JWT"})),
            bad("Missing alg header parameter")
        );
        assert_eq!(
            verify("bm90IGpzb24.e30.c2ln", &cfg).unwrap_err(),
            bad("Malformed token")
        );
        // A known algorithm goes on to the signature.
        assert_eq!(refused(json!({"alg": "HS256"})), bad("Bad HMAC"));
        let token = hs256(json!({"sub": "ann"}), b"sekrit");
        for alg in [Algorithm::HS384, Algorithm::HS512] {
            let key = EncodingKey::from_secret(b"sekrit");
            let t = encode(&Header::new(alg), &json!({"sub": "ann"}), &key).unwrap();
            assert_eq!(verify(&t, &cfg).unwrap().name, "ann", "{alg:?}");
        }
        assert_eq!(verify(&token, &cfg).unwrap().name, "ann");
    }

    #[test]
    fn hmac_tokens_name_users_and_roles() {
        let cfg = hmac_config(&["exp"]);
        let token = hs256(
            json!({"sub": "ann", "exp": now() + 60, "_couchdb.roles": ["staff"]}),
            b"sekrit",
        );
        assert_eq!(
            verify(&token, &cfg),
            Ok(User {
                name: "ann".into(),
                roles: vec!["staff".into()]
            })
        );
        assert_eq!(
            verify(
                &hs256(json!({"sub": "ann", "exp": now() + 60}), b"wrong"),
                &cfg
            ),
            Err(bad("Bad HMAC"))
        );
        assert_eq!(
            verify(
                &hs256(json!({"sub": "ann", "exp": now() - 10}), b"sekrit"),
                &cfg
            ),
            Err(JwtError::Unauthorized("exp not in future".into()))
        );
        assert_eq!(
            verify(&hs256(json!({"sub": "ann"}), b"sekrit"), &cfg),
            Err(bad("Missing exp claim"))
        );
        assert_eq!(
            verify(&hs256(json!({"exp": now() + 60}), b"sekrit"), &cfg),
            Err(JwtError::Unauthorized("Token missing sub claim.".into()))
        );
        assert_eq!(verify("not.a.token", &cfg), Err(bad("Malformed token")));
        let expired_but_not_required = hs256(json!({"sub": "ann", "exp": now() - 10}), b"sekrit");
        assert!(
            verify(&expired_but_not_required, &hmac_config(&[])).is_ok(),
            "exp is only checked when required, as CouchDB does"
        );
    }

    #[test]
    fn ec_tokens_and_nested_role_paths() {
        let pair = rcgen::KeyPair::generate().unwrap();
        let mut cfg = hmac_config(&[]);
        cfg.keys
            .insert("ec:k1".into(), pair.public_key_pem().replace('\n', "\\n"));
        cfg.roles_claim_path = Some("app.couch\\.roles".into());
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("k1".into());
        let claims = json!({"sub": "bo", "app": {"couch.roles": ["a", "b"]}});
        let token = encode(
            &header,
            &claims,
            &EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap(),
        )
        .unwrap();
        assert_eq!(
            verify(&token, &cfg),
            Ok(User {
                name: "bo".into(),
                roles: vec!["a".into(), "b".into()]
            })
        );
        header.kid = Some("k2".into());
        let unknown = encode(
            &header,
            &claims,
            &EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap(),
        )
        .unwrap();
        assert_eq!(verify(&unknown, &cfg), Err(bad("Unknown kid")));
        let other = rcgen::KeyPair::generate().unwrap();
        header.kid = Some("k1".into());
        let forged = encode(
            &header,
            &claims,
            &EncodingKey::from_ec_pem(other.serialize_pem().as_bytes()).unwrap(),
        )
        .unwrap();
        assert_eq!(verify(&forged, &cfg), Err(bad("Bad signature")));
    }

    /// An ES512 token signed with P-521 key `secret` (a scalar's bytes), with `claims`.
    fn es512(secret: u8, kid: &str, claims: &Value) -> String {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use p521::ecdsa::signature::Signer;
        let key = p521::ecdsa::SigningKey::from_slice(&[secret; 65]).unwrap();
        let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let signed = format!(
            "{}.{}",
            part(&json!({"alg": "ES512", "typ": "JWT", "kid": kid})),
            part(claims)
        );
        let signature: p521::ecdsa::Signature = key.sign(signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()))
    }

    fn es512_public_pem(secret: u8) -> String {
        use p521::pkcs8::{EncodePublicKey, LineEnding};
        let key = p521::ecdsa::SigningKey::from_slice(&[secret; 65]).unwrap();
        let verifying = p521::ecdsa::VerifyingKey::from(&key);
        let public = p521::PublicKey::from_affine(*verifying.as_affine()).unwrap();
        public.to_public_key_pem(LineEnding::LF).unwrap()
    }

    #[test]
    fn es512_tokens_are_verified_as_couchdb_verifies_them() {
        let mut cfg = hmac_config(&["exp"]);
        cfg.keys
            .insert("ec:p521".into(), es512_public_pem(7).replace('\n', "\\n"));
        let claims = json!({"sub": "eve", "exp": now() + 600, "_couchdb.roles": ["r"]});
        assert_eq!(
            verify(&es512(7, "p521", &claims), &cfg),
            Ok(User {
                name: "eve".into(),
                roles: vec!["r".into()]
            })
        );
        // Another key's signature, a changed payload, an unknown kid, the claims' checks.
        assert_eq!(
            verify(&es512(8, "p521", &claims), &cfg),
            Err(bad("Bad signature"))
        );
        let token = es512(7, "p521", &claims);
        let (head, rest) = token.split_once('.').unwrap();
        let (_, signature) = rest.split_once('.').unwrap();
        let other = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(json!({"sub": "mallory", "exp": now() + 600}).to_string());
        assert_eq!(
            verify(&format!("{head}.{other}.{signature}"), &cfg),
            Err(bad("Bad signature"))
        );
        assert_eq!(
            verify(&es512(7, "nope", &claims), &cfg),
            Err(bad("Unknown kid"))
        );
        let expired = json!({"sub": "eve", "exp": now() - 5});
        assert_eq!(
            verify(&es512(7, "p521", &expired), &cfg),
            Err(JwtError::Unauthorized("exp not in future".into()))
        );
        assert_eq!(
            verify(&es512(7, "p521", &json!({"sub": "eve"})), &cfg),
            Err(bad("Missing exp claim"))
        );
        assert_eq!(
            verify(&es512(7, "p521", &json!({"exp": now() + 600})), &cfg),
            Err(JwtError::Unauthorized("Token missing sub claim.".into()))
        );
    }
}
