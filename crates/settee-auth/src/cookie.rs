//! `AuthSession` cookies: `base64url(name:hex-time:mac)`, where the MAC (HMAC-SHA256) is keyed
//! by the server secret and covers a per-user value (the user's password salt or hash), so a
//! changed password ends the user's sessions.

use base64::alphabet::URL_SAFE;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::password::same;

/// Seconds a session cookie stays valid (`[chttpd_auth] timeout`).
pub const DEFAULT_TIMEOUT: u64 = 600;

fn mac(secret: &[u8], user_secret: &str, payload: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(user_secret.as_bytes());
    mac.update(&[0]);
    mac.update(payload.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// A cookie value for `name`, issued at `now` (Unix seconds).
pub fn make(secret: &[u8], user_secret: &str, name: &str, now: u64) -> String {
    let payload = format!("{name}:{now:X}");
    let mut raw = payload.as_bytes().to_vec();
    raw.push(b':');
    raw.extend_from_slice(&mac(secret, user_secret, &payload));
    URL_SAFE_NO_PAD.encode(raw)
}

/// Decodes cookies as leniently as CouchDB: padding or not, and stray bits in the last
/// character (a cookie cut short mid-character still decodes).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Whether a cookie is malformed by CouchDB's rule (it is not base64url, or what it decodes
/// to has fewer than two colons): such a cookie is a bad request, where one that is only
/// wrong (unknown user, bad time, bad signature, expired) leaves the caller anonymous.
pub fn is_malformed(cookie: &str) -> bool {
    LENIENT
        .decode(cookie)
        .map_or(true, |raw| raw.iter().filter(|&&b| b == b':').count() < 2)
}

/// The user name a cookie claims and when it was issued, before it is checked.
pub fn claims(cookie: &str) -> Option<(String, u64)> {
    let raw = LENIENT.decode(cookie).ok()?;
    let (name, time, _) = split(&raw)?;
    Some((name.to_string(), time))
}

fn split(raw: &[u8]) -> Option<(&str, u64, usize)> {
    let first = raw.iter().position(|&b| b == b':')?;
    let second = first + 1 + raw[first + 1..].iter().position(|&b| b == b':')?;
    let name = std::str::from_utf8(&raw[..first]).ok()?;
    let time = u64::from_str_radix(std::str::from_utf8(&raw[first + 1..second]).ok()?, 16).ok()?;
    Some((name, time, second))
}

/// The cookie's age in seconds if it is genuine for `user_secret` and younger than
/// `timeout` at `now`.
pub fn check(
    secret: &[u8],
    user_secret: &str,
    cookie: &str,
    timeout: u64,
    now: u64,
) -> Option<u64> {
    let raw = LENIENT.decode(cookie).ok()?;
    let (_, time, second) = split(&raw)?;
    let payload = std::str::from_utf8(&raw[..second]).ok()?;
    let genuine = same(&mac(secret, user_secret, payload), &raw[second + 1..]);
    (genuine && now < time.saturating_add(timeout)).then(|| now.saturating_sub(time))
}

/// Whether a cookie this old should be replaced by a fresh one (once 10% of its lifetime
/// has passed, as CouchDB does).
pub fn needs_refresh(age: u64, timeout: u64) -> bool {
    age.saturating_mul(10) > timeout
}

/// How session cookies are set (`[chttpd_auth]`).
#[derive(Clone, Debug, Default)]
pub struct Attributes {
    /// `timeout`: seconds a cookie lasts.
    pub timeout: u64,
    /// `allow_persistent_cookies`: send `Max-Age`, so the cookie outlives the browser session.
    pub persistent: bool,
    /// The request came over TLS: mark the cookie `Secure`.
    pub secure: bool,
    /// `cookie_domain`.
    pub domain: Option<String>,
    /// `same_site`: `None`, `Lax` or `Strict`.
    pub same_site: Option<String>,
}

impl Attributes {
    /// The attributes after the value, in the order CouchDB's web server writes them:
    /// `Version`, `Expires` and `Max-Age` (`expires`, for a persistent cookie), `Secure`,
    /// `Domain`, `Path`, `HttpOnly`, `SameSite`.
    fn suffix(&self, expires: Option<(u64, u64)>) -> String {
        let mut h = String::from("; Version=1");
        if let Some((at, max_age)) = expires.filter(|_| self.persistent) {
            h.push_str(&format!(
                "; Expires={}; Max-Age={max_age}",
                expires_date(at)
            ));
        }
        if self.secure {
            h.push_str("; Secure");
        }
        if let Some(d) = &self.domain {
            h.push_str(&format!("; Domain={d}"));
        }
        h.push_str("; Path=/; HttpOnly");
        if let Some(s) = &self.same_site {
            h.push_str(&format!("; SameSite={s}"));
        }
        h
    }
}

/// A `Set-Cookie` value for a session cookie issued at `now` (Unix seconds): it expires
/// `timeout` later, said both ways (`Expires` for clients that read only that, as nano's
/// cookie jar does, and `Max-Age`).
pub fn header(value: &str, attrs: &Attributes, now: u64) -> String {
    format!(
        "AuthSession={value}{}",
        attrs.suffix(Some((now.saturating_add(attrs.timeout), attrs.timeout)))
    )
}

/// A `Set-Cookie` value that clears the session cookie: empty, and already expired at `now`
/// when `expire` (logging out).
pub fn clearing(attrs: &Attributes, expire: bool, now: u64) -> String {
    format!("AuthSession={}", attrs.suffix(expire.then_some((now, 0))))
}

/// The date `days` after 1970-01-01: `(year, month 1-12, day 1-31)` (Howard Hinnant's
/// algorithm, proleptic Gregorian calendar). For dates written into answers and documents.
pub fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// A cookie's `Expires` date as CouchDB's web server writes it: `Thu, 26-Nov-2026 11:35:31
/// GMT` (Unix seconds, UTC).
fn expires_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    let (year, month, day) = civil_date(days);
    let weekday = DAYS[(days.rem_euclid(7)) as usize];
    format!(
        "{weekday}, {day:02}-{}-{year} {:02}:{:02}:{:02} GMT",
        MONTHS[(month - 1) as usize],
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_signed_per_user_and_expire() {
        let cookie = make(b"secret", "salt1", "root", 1000);
        assert_eq!(claims(&cookie), Some(("root".into(), 1000)));
        assert_eq!(check(b"secret", "salt1", &cookie, 600, 1010), Some(10));
        assert!(
            check(b"other", "salt1", &cookie, 600, 1010).is_none(),
            "wrong secret"
        );
        assert!(
            check(b"secret", "salt2", &cookie, 600, 1010).is_none(),
            "password changed"
        );
        assert!(
            check(b"secret", "salt1", &cookie, 600, 1600).is_none(),
            "expired"
        );
        assert!(check(b"secret", "salt1", "garbage", 600, 1010).is_none());
        let forged = make(b"guess", "salt1", "root", 1000);
        assert!(
            check(b"secret", "salt1", &forged, 600, 1010).is_none(),
            "forged"
        );
        assert!(!needs_refresh(10, 600) && needs_refresh(61, 600));
    }

    #[test]
    fn malformed_cookies_are_told_from_wrong_ones_as_couchdb_tells_them() {
        let cookie = make(b"secret", "salt1", "root", 1000);
        // Cut short anywhere after the second colon: it decodes, and is only wrong.
        // "root:3E8:" is the first 12 characters.
        for cut in 14..cookie.len() {
            let short = &cookie[..cut];
            if short.len() % 4 != 1 {
                assert!(!is_malformed(short), "{short}");
                assert_eq!(claims(short), Some(("root".into(), 1000)));
                assert!(check(b"secret", "salt1", short, 600, 1010).is_none());
            }
        }
        for bad in [
            "garbage",
            "!!!",
            "a",
            &URL_SAFE_NO_PAD.encode("no colons"),
            &URL_SAFE_NO_PAD.encode("bob:6B07F483"),
        ] {
            assert!(is_malformed(bad), "{bad}");
        }
        let odd_time = URL_SAFE_NO_PAD.encode("bob:not-hex:mac");
        assert!(
            !is_malformed(&odd_time) && claims(&odd_time).is_none(),
            "two colons: wrong, not malformed"
        );
    }

    #[test]
    fn cookie_attributes_come_as_couchdb_writes_them() {
        // 2026-11-26 11:35:31 UTC, a Thursday.
        let now = 1_795_692_931;
        let mut a = Attributes {
            timeout: 600,
            persistent: true,
            ..Default::default()
        };
        assert_eq!(header("v", &a, now), "AuthSession=v; Version=1; Expires=Thu, 26-Nov-2026 11:45:31 GMT; Max-Age=600; Path=/; HttpOnly");
        a.secure = true;
        a.same_site = Some("Strict".into());
        a.domain = Some("example.com".into());
        assert_eq!(header("v", &a, now), "AuthSession=v; Version=1; Expires=Thu, 26-Nov-2026 11:45:31 GMT; Max-Age=600; Secure; Domain=example.com; Path=/; HttpOnly; SameSite=Strict");
        assert_eq!(clearing(&a, true, now), "AuthSession=; Version=1; Expires=Thu, 26-Nov-2026 11:35:31 GMT; Max-Age=0; Secure; Domain=example.com; Path=/; HttpOnly; SameSite=Strict");
        a.persistent = false;
        assert_eq!(header("v", &a, now), "AuthSession=v; Version=1; Secure; Domain=example.com; Path=/; HttpOnly; SameSite=Strict");
        assert_eq!(expires_date(0), "Thu, 01-Jan-1970 00:00:00 GMT");
        assert_eq!(expires_date(951_782_400), "Tue, 29-Feb-2000 00:00:00 GMT");
    }
}
