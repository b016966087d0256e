//! The configuration values every request consults, parsed once per configuration change
//! instead of looked up (and parsed) in the configuration file's sections on each request.

use hyper::header::HeaderName;
use settee_config::registry as setting;
use std::collections::HashMap;

use std::time::Duration;

use crate::auth;
use crate::config::Config;
use crate::connections::ConnLimits;

/// Settings on every request's path, as of the last configuration change.
#[derive(Debug)]
pub struct Settings {
    /// `[chttpd] authentication_handlers`, in their order.
    pub handlers: Vec<&'static str>,
    /// `[chttpd] require_valid_user`.
    pub require_valid_user: bool,
    /// `[chttpd] require_valid_user_except_for_up`.
    pub require_valid_user_except_for_up: bool,
    /// `[admins]`: each server admin's password hash.
    pub admins: HashMap<String, String>,
    /// The headers a proxy names the client's host and scheme in (`[chttpd] x_forwarded_host`,
    /// `x_forwarded_ssl`, `x_forwarded_proto`), for the absolute URIs answers carry.
    pub forwarded: Forwarded,
    /// How long clients may take and how many may connect (`[chttpd] idle_timeout`,
    /// `header_timeout`, `body_timeout` in milliseconds, and `max_connections`).
    pub conn: ConnLimits,
}

/// Header names a proxy uses for what the client asked for, parsed once (a configured name
/// that is no header name matches no header).
#[derive(Debug)]
pub struct Forwarded {
    /// The host the client used.
    pub host: Option<HeaderName>,
    /// `on` when the client used TLS.
    pub ssl: Option<HeaderName>,
    /// `https` when the client used TLS.
    pub proto: Option<HeaderName>,
}

impl Settings {
    /// The settings `config` gives.
    pub fn from_config(config: &Config) -> Settings {
        let mut admins = HashMap::new();
        // The first entry of a name wins, as in `Config::get`.
        for (name, hash) in config.section("admins").unwrap_or_default() {
            admins.entry(name.clone()).or_insert_with(|| hash.clone());
        }
        Settings {
            handlers: auth::handlers(config),
            require_valid_user: config.value::<bool>(&setting::REQUIRE_VALID_USER),
            require_valid_user_except_for_up: config
                .value::<bool>(&setting::REQUIRE_VALID_USER_EXCEPT_FOR_UP),
            admins,
            conn: conn_limits(config),
            forwarded: Forwarded {
                host: header_name(config, "x_forwarded_host", "X-Forwarded-Host"),
                ssl: header_name(config, "x_forwarded_ssl", "X-Forwarded-Ssl"),
                proto: header_name(config, "x_forwarded_proto", "X-Forwarded-Proto"),
            },
        }
    }
}

/// The header `[chttpd] key` names, `default` if none.
fn header_name(config: &Config, key: &str, default: &str) -> Option<HeaderName> {
    HeaderName::try_from(config.get("chttpd", key).unwrap_or(default)).ok()
}

/// The connection limits the configuration sets, CouchDB's where it sets none.
fn conn_limits(config: &Config) -> ConnLimits {
    let ms = |s: &setting::Setting| Duration::from_millis(config.value::<u64>(s).max(1));
    ConnLimits {
        idle: ms(&setting::IDLE_TIMEOUT),
        header: ms(&setting::HEADER_TIMEOUT),
        body: ms(&setting::BODY_TIMEOUT),
        max: config.value::<usize>(&setting::MAX_CONNECTIONS).max(1),
    }
}

#[cfg(test)]
mod tests {
    /// The registry's defaults are the libraries' own.
    #[test]
    fn registered_defaults_agree_with_the_libraries() {
        let config = Config::default();
        let lockout = settee_auth::lockout::Policy::default();
        assert_eq!(
            config.value::<u32>(&setting::LOCKOUT_THRESHOLD),
            lockout.threshold
        );
        assert_eq!(
            config.value::<u64>(&setting::LOCKOUT_MAX_LIFETIME),
            lockout.lifetime_ms
        );
        assert_eq!(
            config.value::<usize>(&setting::LOCKOUT_MAX_OBJECTS),
            lockout.max_entries
        );
        assert_eq!(
            config.value::<u64>(&setting::TIMEOUT),
            settee_auth::cookie::DEFAULT_TIMEOUT
        );
        assert_eq!(
            config.value::<u32>(&setting::ITERATIONS),
            settee_auth::password::DEFAULT_ITERATIONS
        );
        let atts = settee_db::AttPolicy::default();
        assert_eq!(
            config.value::<u32>(&setting::COMPRESSION_LEVEL),
            atts.compression_level
        );
        let conn = crate::connections::ConnLimits::default();
        assert_eq!(config.value::<usize>(&setting::MAX_CONNECTIONS), conn.max);
        assert_eq!(
            config.value::<u64>(&setting::IDLE_TIMEOUT) as u128,
            conn.idle.as_millis()
        );
        assert_eq!(
            config.value::<u64>(&setting::HEADER_TIMEOUT) as u128,
            conn.header.as_millis()
        );
        assert_eq!(
            config.value::<u64>(&setting::BODY_TIMEOUT) as u128,
            conn.body.as_millis()
        );
    }

    use super::*;

    #[test]
    fn settings_follow_the_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::load(&dir.path().join("settee.ini")).unwrap();
        let defaults = Settings::from_config(&config);
        assert_eq!(defaults.handlers, vec!["cookie", "default"]);
        assert!(!defaults.require_valid_user && !defaults.require_valid_user_except_for_up);
        assert!(defaults.admins.is_empty());
        assert_eq!(defaults.conn, ConnLimits::default());
        config.set("chttpd", "require_valid_user", "true").unwrap();
        config.set("chttpd", "header_timeout", "1500").unwrap();
        config.set("chttpd", "max_connections", "10").unwrap();
        config.set("admins", "root", "-pbkdf2-abc,def,10").unwrap();
        config
            .set(
                "chttpd",
                "authentication_handlers",
                "{chttpd_auth, default_authentication_handler}",
            )
            .unwrap();
        let changed = Settings::from_config(&config);
        assert!(changed.require_valid_user);
        assert_eq!(
            changed.admins.get("root").map(String::as_str),
            Some("-pbkdf2-abc,def,10")
        );
        assert_eq!(changed.handlers, vec!["default"]);
        assert_eq!(
            (changed.conn.header, changed.conn.max, changed.conn.idle),
            (Duration::from_millis(1500), 10, ConnLimits::default().idle)
        );
    }
}
