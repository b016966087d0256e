//! Every setting Settee reads, in one table: its section and key (CouchDB's names), its
//! default, the kind of value, whether `/_node/_local/_config` may change it, and what it does.
//! Code reads a setting through its entry ([`Config::value`]), so a default is written once;
//! docs/CONFIGURATION.md is made from the table ([`markdown`]) and a test keeps it so.

use std::str::FromStr;

use crate::Config;

/// One setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The INI section (`smoosh.<channel>` stands for one section per channel).
    pub section: &'static str,
    /// The key.
    pub key: &'static str,
    /// The value in force when the file gives none, as it would be written there (empty:
    /// none, the feature is off or the behaviour described applies).
    pub default: &'static str,
    /// What kind of value it takes.
    pub kind: Kind,
    /// Whether `PUT /_node/_local/_config/…` may change it (CouchDB refuses those naming
    /// programs to run).
    pub over_http: bool,
    /// What it does.
    pub about: &'static str,
}

/// The kinds of values settings take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `true` or `false`.
    Bool,
    /// A whole number.
    Integer,
    /// A number, perhaps with a fraction.
    Number,
    /// Text.
    Text,
    /// A comma-separated list.
    List,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Bool => "boolean",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::Text => "text",
            Kind::List => "list",
        }
    }
}

impl Config {
    /// A setting's value: what the file gives, parsed, else its default. An unparsable value
    /// counts as absent, as CouchDB's typed reads treat it. Only for settings with a default
    /// (the others are read with [`Config::get`]).
    pub fn value<T: FromStr>(&self, setting: &Setting) -> T {
        self.value_in(setting, setting.section)
    }

    /// [`Config::value`] for a setting of a patterned section (`smoosh.<channel>`), read from
    /// the section `section`.
    pub fn value_in<T: FromStr>(&self, setting: &Setting, section: &str) -> T {
        self.get(section, setting.key)
            .and_then(|v| v.trim().parse().ok())
            .or_else(|| setting.default.parse().ok())
            .unwrap_or_else(|| panic!("the default of {}/{} parses", setting.section, setting.key))
    }
}

/// The entry for `section`/`key` (a `smoosh.<channel>` section matches its pattern).
pub fn lookup(section: &str, key: &str) -> Option<&'static Setting> {
    let pattern = if section.starts_with("smoosh.") {
        "smoosh.<channel>"
    } else {
        section
    };
    ALL.iter().find(|s| s.section == pattern && s.key == key)
}

macro_rules! settings {
    ($($(#[doc = $about:literal])+ $name:ident = $section:literal, $key:literal,
       $default:literal, $kind:ident, $http:literal;)*) => {
        $(
            $(#[doc = $about])+
            pub const $name: Setting = Setting {
                section: $section,
                key: $key,
                default: $default,
                kind: Kind::$kind,
                over_http: $http,
                about: concat!($($about),+),
            };
        )*
        /// Every setting, in the order of the documentation.
        pub const ALL: &[Setting] = &[$($name),*];
    };
}

settings! {
    /// Address the server listens on (from the next start).
    BIND_ADDRESS = "chttpd", "bind_address", "127.0.0.1", Text, true;
    /// Port the server listens on (0: any free port; from the next start).
    PORT = "chttpd", "port", "5984", Integer, true;
    /// Largest request body, in bytes (decoded, for gzip bodies).
    MAX_HTTP_REQUEST_SIZE = "chttpd", "max_http_request_size", "4294967296", Integer, true;
    /// Milliseconds a connection may wait for the first byte of a request.
    IDLE_TIMEOUT = "chttpd", "idle_timeout", "300000", Integer, true;
    /// Milliseconds a request's head may take once it began.
    HEADER_TIMEOUT = "chttpd", "header_timeout", "30000", Integer, true;
    /// Milliseconds a request body may wait between bytes.
    BODY_TIMEOUT = "chttpd", "body_timeout", "300000", Integer, true;
    /// Most connections at once (within the open-files limit less a reserve for databases).
    MAX_CONNECTIONS = "chttpd", "max_connections", "65536", Integer, true;
    /// Authentication handlers in the order they are tried.
    AUTHENTICATION_HANDLERS = "chttpd", "authentication_handlers", "{chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}", List, true;
    /// Refuse anonymous requests (401), except logging in.
    REQUIRE_VALID_USER = "chttpd", "require_valid_user", "false", Bool, true;
    /// As `require_valid_user`, but `/_up` stays open.
    REQUIRE_VALID_USER_EXCEPT_FOR_UP = "chttpd", "require_valid_user_except_for_up", "false", Bool, true;
    /// The `WWW-Authenticate` header of 401 answers.
    WWW_AUTHENTICATE = "chttpd", "WWW-Authenticate", "", Text, true;
    /// Whether `/_all_dbs` and `/_dbs_info` are for server admins only.
    ADMIN_ONLY_ALL_DBS = "chttpd", "admin_only_all_dbs", "true", Bool, true;
    /// Most databases one `POST /_dbs_info` may name.
    MAX_DB_NUMBER_FOR_DBS_INFO_REQ = "chttpd", "max_db_number_for_dbs_info_req", "100", Integer, true;
    /// Answer cross-origin requests as `[cors]` says.
    ENABLE_CORS = "chttpd", "enable_cors", "false", Bool, true;
    /// Header a proxy names the client's host in.
    X_FORWARDED_HOST = "chttpd", "x_forwarded_host", "X-Forwarded-Host", Text, true;
    /// Header a proxy names the client's scheme in.
    X_FORWARDED_PROTO = "chttpd", "x_forwarded_proto", "X-Forwarded-Proto", Text, true;
    /// Header a proxy says the client used TLS in (`on`).
    X_FORWARDED_SSL = "chttpd", "x_forwarded_ssl", "X-Forwarded-Ssl", Text, true;
    /// `WWW-Authenticate`, under its older section (read when `[chttpd]` has none).
    HTTPD_WWW_AUTHENTICATE = "httpd", "WWW-Authenticate", "", Text, true;
    /// The users database.
    AUTHENTICATION_DB = "chttpd_auth", "authentication_db", "_users", Text, true;
    /// PBKDF2 iterations for new passwords.
    ITERATIONS = "chttpd_auth", "iterations", "600000", Integer, true;
    /// Seconds a session cookie lives (renewed once 10% of it has passed).
    TIMEOUT = "chttpd_auth", "timeout", "600", Integer, true;
    /// Give session cookies `Max-Age` and `Expires`.
    ALLOW_PERSISTENT_COOKIES = "chttpd_auth", "allow_persistent_cookies", "true", Bool, true;
    /// The secret session cookies and proxy tokens are signed with (made at first start).
    SECRET = "chttpd_auth", "secret", "", Text, true;
    /// Require `X-Auth-CouchDB-Token` from the proxy authentication handler.
    PROXY_USE_SECRET = "chttpd_auth", "proxy_use_secret", "false", Bool, true;
    /// Members of user documents anyone signed in may read.
    PUBLIC_FIELDS = "chttpd_auth", "public_fields", "", List, true;
    /// Failed-login lockout: `enforce`, `warn` or `off`.
    LOCKOUT_MODE = "chttpd_auth_lockout", "mode", "enforce", Text, true;
    /// Failures that lock an account out.
    LOCKOUT_THRESHOLD = "chttpd_auth_lockout", "threshold", "5", Integer, true;
    /// Milliseconds a failure counts for.
    LOCKOUT_MAX_LIFETIME = "chttpd_auth_lockout", "max_lifetime", "300000", Integer, true;
    /// Most accounts the lockout remembers.
    LOCKOUT_MAX_OBJECTS = "chttpd_auth_lockout", "max_objects", "10000", Integer, true;
    /// Claims a JWT must carry (`exp`, `nbf`, `iat`, `iss`).
    JWT_REQUIRED_CLAIMS = "jwt_auth", "required_claims", "", List, true;
    /// A top-level claim holding a JWT's roles.
    JWT_ROLES_CLAIM_NAME = "jwt_auth", "roles_claim_name", "_couchdb.roles", Text, true;
    /// A dotted path to a JWT's roles (`\.` for a literal dot).
    JWT_ROLES_CLAIM_PATH = "jwt_auth", "roles_claim_path", "", Text, true;
    /// Origins allowed cross-origin requests (`*` for any).
    CORS_ORIGINS = "cors", "origins", "", List, true;
    /// Allow credentials on cross-origin requests.
    CORS_CREDENTIALS = "cors", "credentials", "false", Bool, true;
    /// Seconds a browser may cache a preflight answer.
    CORS_MAX_AGE = "cors", "max_age", "600", Integer, true;
    /// Request headers cross-origin requests may send.
    CORS_HEADERS = "cors", "headers", "", List, true;
    /// Methods cross-origin requests may use.
    CORS_METHODS = "cors", "methods", "", List, true;
    /// Response headers cross-origin clients may read.
    CORS_EXPOSED_HEADERS = "cors", "exposed_headers", "", List, true;
    /// Most replication jobs running at once; others wait, rotated in every `interval`.
    REPLICATOR_MAX_JOBS = "replicator", "max_jobs", "500", Integer, true;
    /// How often (ms) waiting replication jobs take turns with running ones.
    REPLICATOR_INTERVAL = "replicator", "interval", "60000", Integer, true;
    /// Most running replication jobs stopped for waiting ones at each turn.
    REPLICATOR_MAX_CHURN = "replicator", "max_churn", "20", Integer, true;
    /// Events kept in a replication job's history.
    REPLICATOR_MAX_HISTORY = "replicator", "max_history", "20", Integer, true;
    /// Default workers per replication job.
    REPLICATOR_WORKER_PROCESSES = "replicator", "worker_processes", "4", Integer, true;
    /// Default changes per replication batch.
    REPLICATOR_WORKER_BATCH_SIZE = "replicator", "worker_batch_size", "500", Integer, true;
    /// Default connections kept open to each remote replication endpoint.
    REPLICATOR_HTTP_CONNECTIONS = "replicator", "http_connections", "20", Integer, true;
    /// Default time (ms) to connect to a remote endpoint, and to wait for its answers.
    REPLICATOR_CONNECTION_TIMEOUT = "replicator", "connection_timeout", "30000", Integer, true;
    /// Default retries of a failed replication request before the job crashes.
    REPLICATOR_RETRIES_PER_REQUEST = "replicator", "retries_per_request", "5", Integer, true;
    /// Default time (ms) between a replication's checkpoints.
    REPLICATOR_CHECKPOINT_INTERVAL = "replicator", "checkpoint_interval", "30000", Integer, true;
    /// Whether replications write checkpoints by default.
    REPLICATOR_USE_CHECKPOINTS = "replicator", "use_checkpoints", "true", Bool, true;
    /// Whether replications read documents with `_bulk_get` by default.
    REPLICATOR_USE_BULK_GET = "replicator", "use_bulk_get", "true", Bool, true;
    /// Give each user a private database.
    PERUSER_ENABLE = "couch_peruser", "enable", "false", Bool, true;
    /// Delete a user's database with the user.
    PERUSER_DELETE_DBS = "couch_peruser", "delete_dbs", "false", Bool, true;
    /// Prefix of per-user database names.
    PERUSER_DATABASE_PREFIX = "couch_peruser", "database_prefix", "userdb-", Text, true;
    /// Shards of per-user databases.
    PERUSER_Q = "couch_peruser", "q", "1", Integer, true;
    /// Where databases live (from the next start).
    DATABASE_DIR = "couchdb", "database_dir", "", Text, true;
    /// Security object of new databases: `admin_only` or `everyone`.
    DEFAULT_SECURITY = "couchdb", "default_security", "admin_only", Text, true;
    /// Most databases open at once (closed least recently used).
    MAX_DBS_OPEN = "couchdb", "max_dbs_open", "500", Integer, true;
    /// Longest document id (empty: no limit).
    MAX_DOCUMENT_ID_LENGTH = "couchdb", "max_document_id_length", "", Integer, true;
    /// Largest document body, in bytes.
    MAX_DOCUMENT_SIZE = "couchdb", "max_document_size", "8000000", Integer, true;
    /// Milliseconds one JavaScript or query-server call may take.
    OS_PROCESS_TIMEOUT = "couchdb", "os_process_timeout", "5000", Integer, true;
    /// Whether `_users/_security` may be changed.
    USERS_DB_SECURITY_EDITABLE = "couchdb", "users_db_security_editable", "false", Bool, true;
    /// This server's uuid (made at first start).
    UUID = "couchdb", "uuid", "", Text, true;
    /// Shards of new databases.
    CLUSTER_Q = "cluster", "q", "2", Integer, true;
    /// Types stored gzip-compressed.
    COMPRESSIBLE_TYPES = "attachments", "compressible_types", "text/*, application/javascript, application/json, application/xml", List, true;
    /// gzip level for compressible attachments (0: stored as sent).
    COMPRESSION_LEVEL = "attachments", "compression_level", "8", Integer, true;
    /// Rows `_find` answers when the query names no limit.
    MANGO_DEFAULT_LIMIT = "mango", "default_limit", "25", Integer, true;
    /// Documents examined per result above which `_find` warns of a missing index.
    MANGO_INDEX_SCAN_WARNING_THRESHOLD = "mango", "index_scan_warning_threshold", "10", Integer, true;
    /// Most document ids one `_purge` may name.
    PURGE_MAX_DOCUMENT_ID_NUMBER = "purge", "max_document_id_number", "100", Integer, true;
    /// Most revisions one `_purge` may name.
    PURGE_MAX_REVISIONS_NUMBER = "purge", "max_revisions_number", "1000", Integer, true;
    /// Idle query-server processes kept per language.
    OS_PROCESS_SOFT_LIMIT = "query_server_config", "os_process_soft_limit", "100", Integer, true;
    /// Refuse reductions that do not shrink.
    REDUCE_LIMIT = "query_server_config", "reduce_limit", "true", Bool, true;
    /// Most uuids one `/_uuids` answers.
    UUIDS_MAX_COUNT = "uuids", "max_count", "1000", Integer, true;
    /// How `/_uuids` makes them: `random`, `sequential`, `utc_random`, `utc_id`.
    UUIDS_ALGORITHM = "uuids", "algorithm", "sequential", Text, true;
    /// Log level, CouchDB's names: `debug`, `info`, `notice` (the access lines), `warning`, `error` (and `critical`, `alert`, `emergency`), `none`; `RUST_LOG`/`SETTEE_LOG` win when set.
    LOG_LEVEL = "log", "level", "info", Text, true;
    /// Where log lines go: `stderr` or `file`.
    LOG_WRITER = "log", "writer", "stderr", Text, true;
    /// The log file when `writer` is `file`.
    LOG_FILE = "log", "file", "./couch.log", Text, true;
    /// Send a Content-Security-Policy with the admin UI's files at `/_utils`.
    CSP_UTILS_ENABLE = "csp", "utils_enable", "true", Bool, true;
    /// The Content-Security-Policy of `/_utils`: nothing from other origins, no inline
    /// scripts or styles.
    CSP_UTILS_HEADER_VALUE = "csp", "utils_header_value", "default-src 'self'; img-src 'self' data: blob:; script-src 'self'; style-src 'self'; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'self'", Text, true;
    /// Serve HTTPS as well (from the next start).
    SSL_ENABLE = "ssl", "enable", "false", Bool, true;
    /// Port HTTPS listens on.
    SSL_PORT = "ssl", "port", "6984", Integer, true;
    /// The server certificate (PEM).
    SSL_CERT_FILE = "ssl", "cert_file", "", Text, true;
    /// The certificate's private key (PEM).
    SSL_KEY_FILE = "ssl", "key_file", "", Text, true;
    /// Minutes between weighings of a database or index for compaction.
    SMOOSH_STALENESS = "smoosh", "staleness", "5", Number, true;
    /// Seconds a queued compaction waits before it starts.
    SMOOSH_WAIT_SECS = "smoosh", "wait_secs", "30", Number, true;
    /// Channels databases are offered to, in turn.
    SMOOSH_DB_CHANNELS = "smoosh", "db_channels", "upgrade_dbs,ratio_dbs,slack_dbs", List, true;
    /// Channels view indexes are offered to, in turn.
    SMOOSH_VIEW_CHANNELS = "smoosh", "view_channels", "upgrade_views,ratio_views,slack_views", List, true;
    /// How a channel weighs files: `ratio` or `slack` (shipped `slack_*` channels: `slack`).
    SMOOSH_PRIORITY = "smoosh.<channel>", "priority", "ratio", Text, true;
    /// Least weight a channel takes (shipped `ratio_*`: 2.0, `slack_*`: 536870912; others: 5.0 by ratio, 16777216 by slack).
    SMOOSH_MIN_PRIORITY = "smoosh.<channel>", "min_priority", "", Number, true;
    /// Greatest weight a channel takes.
    SMOOSH_MAX_PRIORITY = "smoosh.<channel>", "max_priority", "inf", Number, true;
    /// Smallest file a channel takes, in bytes.
    SMOOSH_MIN_SIZE = "smoosh.<channel>", "min_size", "1048576", Integer, true;
    /// Largest file a channel takes, in bytes.
    SMOOSH_MAX_SIZE = "smoosh.<channel>", "max_size", "18446744073709551615", Integer, true;
    /// Compactions a channel runs at once.
    SMOOSH_CONCURRENCY = "smoosh.<channel>", "concurrency", "1", Integer, true;
    /// Most files a channel queues.
    SMOOSH_CAPACITY = "smoosh.<channel>", "capacity", "9999", Integer, true;
    /// Time of day (HH:MM) a channel starts compacting.
    SMOOSH_FROM = "smoosh.<channel>", "from", "00:00", Text, true;
    /// Time of day (HH:MM) a channel stops compacting.
    SMOOSH_TO = "smoosh.<channel>", "to", "24:00", Text, true;
    /// Megabytes of file pages the storage engine caches.
    CACHE_MB = "settee", "cache_mb", "1024", Integer, true;
    /// Megabytes one JavaScript engine may hold.
    JS_MEMORY_MB = "settee", "js_memory_mb", "256", Integer, true;
}

/// Sections `/_node/_local/_config` may not change, as in CouchDB: they name programs the
/// server would run, so changing them over HTTP would let a request run commands. They are
/// set in the configuration file (or, for query servers, `COUCHDB_QUERY_SERVER_{LANG}`).
pub const LOCKED_SECTIONS: &[&str] = &[
    "daemons",
    "external",
    "httpd_design_handlers",
    "httpd_db_handlers",
    "httpd_global_handlers",
    "native_query_servers",
    "os_daemons",
    "query_servers",
    "feature_flags",
];

/// Sections whose keys are names, not settings: server admins, JWT keys, query servers.
pub const NAMED_SECTIONS: &[(&str, &str)] = &[
    (
        "admins",
        "server admins: `name = password` (hashed when written)",
    ),
    (
        "jwt_keys",
        "JWT keys: `hmac:KID`, `rsa:KID` or `ec:KID` = the key",
    ),
    (
        "query_servers",
        "external query servers: `LANGUAGE = COMMAND` (not changeable over HTTP)",
    ),
];

/// docs/CONFIGURATION.md, made from the table.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration\n\n\
         Every setting Settee reads, from its INI file (`DATA/settee.ini`, or `--config`) and\n\
         `/_node/_local/_config`, with CouchDB's section and key names. Made from\n\
         `crates/settee-config/src/registry.rs` (a test keeps this file the same:\n\
         `SETTEE_WRITE_DOCS=1 cargo test -p settee-config` writes it).\n",
    );
    let mut section = "";
    for s in ALL {
        if s.section != section {
            section = s.section;
            out.push_str(&format!(
                "\n## `[{section}]`\n\n| Key | Default | Kind | Over HTTP | What it does |\n|---|---|---|---|---|\n"
            ));
        }
        let default = if s.default.is_empty() {
            String::new()
        } else {
            format!("`{}`", s.default)
        };
        let http = if s.over_http { "yes" } else { "no" };
        let kind = s.kind.name();
        out.push_str(&format!(
            "| `{}` | {default} | {kind} | {http} | {} |\n",
            s.key,
            s.about.trim()
        ));
    }
    out.push_str("\n## Sections of names\n\n");
    for (name, about) in NAMED_SECTIONS {
        out.push_str(&format!("- `[{name}]`: {about}\n"));
    }
    out.push_str(
        "\n## Sections HTTP may not change\n\nThey name programs the server would run \
         (403 `Config section blacklisted for modification over HTTP API.`):",
    );
    for name in LOCKED_SECTIONS {
        out.push_str(&format!(" `[{name}]`"));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_of_its_kind_and_every_key_is_listed_once() {
        for s in ALL {
            let ok = s.default.is_empty()
                || match s.kind {
                    Kind::Bool => s.default.parse::<bool>().is_ok(),
                    Kind::Integer => s.default.parse::<u64>().is_ok(),
                    Kind::Number => s.default.parse::<f64>().is_ok(),
                    Kind::Text | Kind::List => true,
                };
            assert!(ok, "{}/{} = {}", s.section, s.key, s.default);
            assert_eq!(
                s.over_http,
                !LOCKED_SECTIONS.contains(&s.section),
                "{}",
                s.key
            );
            let same = ALL
                .iter()
                .filter(|o| (o.section, o.key) == (s.section, s.key));
            assert_eq!(same.count(), 1, "{}/{}", s.section, s.key);
        }
    }

    #[test]
    fn values_come_from_the_file_else_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::load(&dir.path().join("settee.ini")).unwrap();
        assert_eq!(config.value::<usize>(&MAX_DBS_OPEN), 500);
        assert_eq!(config.value::<u16>(&PORT), 5984);
        config.set("couchdb", "max_dbs_open", "7").unwrap();
        assert_eq!(config.value::<usize>(&MAX_DBS_OPEN), 7);
        config.set("couchdb", "max_dbs_open", "many").unwrap();
        assert_eq!(
            config.value::<usize>(&MAX_DBS_OPEN),
            500,
            "unparsable counts as absent"
        );
        assert_eq!(
            lookup("smoosh.ratio_dbs", "min_priority"),
            Some(&SMOOSH_MIN_PRIORITY)
        );
        assert_eq!(lookup("couchdb", "nope"), None);
    }

    /// docs/CONFIGURATION.md is what the table makes.
    #[test]
    fn the_configuration_document_is_current() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/CONFIGURATION.md");
        let made = markdown();
        if std::env::var_os("SETTEE_WRITE_DOCS").is_some() {
            std::fs::write(&path, &made).unwrap();
        }
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            written == made,
            "docs/CONFIGURATION.md is out of date: run SETTEE_WRITE_DOCS=1 cargo test -p settee-config"
        );
    }

    /// Every setting the code reads by a literal section and key is in the table.
    #[test]
    fn every_setting_the_code_reads_is_registered() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut missing = Vec::new();
        for krate in std::fs::read_dir(&root).unwrap().flatten() {
            for file in rust_files(&krate.path().join("src")) {
                if file.ends_with("settee-config/src/registry.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&file).unwrap();
                for (section, key) in literal_reads(&text) {
                    let named = NAMED_SECTIONS.iter().any(|(n, _)| *n == section);
                    if !named && lookup(&section, &key).is_none() {
                        missing.push(format!("{}: [{section}] {key}", file.display()));
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "settings read but not registered:\n{}",
            missing.join("\n")
        );
    }

    fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(rust_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
        out
    }

    /// `(section, key)` of each `get("section", "key"` and `get_or("section", "key"` call.
    fn literal_reads(text: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (at, _) in text.match_indices("get") {
            let rest = &text[at + 3..];
            let rest = rest.strip_prefix("_or").unwrap_or(rest);
            let Some(args) = rest.strip_prefix('(') else {
                continue;
            };
            let mut strings = args.trim_start().splitn(3, '"').skip(1);
            let (Some(section), Some(after)) = (strings.next(), strings.next()) else {
                continue;
            };
            let after = after.trim_start();
            let Some(after) = after.strip_prefix(',') else {
                continue;
            };
            let Some(after) = after.trim_start().strip_prefix('"') else {
                continue;
            };
            let key = after.split('"').next().unwrap_or_default();
            // A key is a name; `get("name", "")` is a helper's default, not a setting.
            if args.trim_start().starts_with('"') && !key.is_empty() {
                out.push((section.to_string(), key.to_string()));
            }
        }
        out
    }
}
