//! Cross-origin requests from browsers, as CouchDB answers them when `[chttpd] enable_cors`
//! is on: preflight `OPTIONS` requests are answered before authentication, and responses to
//! allowed origins carry `Access-Control-*` headers. Requests from other origins are served
//! as usual, without those headers, so the browser keeps their answers from the page.

use hyper::header::HeaderValue;
use hyper::HeaderMap;

use settee_config::registry as setting;

use crate::config::Config;
use crate::reply::{self, Response};

const DEFAULT_HEADERS: &str = "accept, accept-language, authorization, content-length, content-range, content-type, destination, expires, if-match, last-modified, origin, pragma, x-couch-full-commit, x-couch-id, x-couch-persist, x-couchdb-www-authenticate, x-http-method-override, x-requested-with, x-couchdb-vhost-path";
const DEFAULT_METHODS: &str = "CONNECT, COPY, DELETE, GET, HEAD, OPTIONS, POST, PUT, TRACE";
const DEFAULT_EXPOSED: &str =
    "accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time";
/// Response headers browsers show pages without being told.
const SIMPLE_HEADERS: [&str; 5] = [
    "cache-control",
    "content-language",
    "expires",
    "last-modified",
    "pragma",
];

/// The CORS settings (`[cors]`).
pub struct Cors {
    origins: Vec<String>,
    credentials: bool,
    headers: Vec<String>,
    methods: Vec<String>,
    max_age: u64,
    exposed: Vec<String>,
}

fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

impl Cors {
    /// The settings, or `None` when CORS is off.
    pub fn from_config(config: &Config) -> Option<Cors> {
        if !config.value::<bool>(&setting::ENABLE_CORS) {
            return None;
        }
        let get = |key: &str, default: &str| config.get("cors", key).unwrap_or(default).to_string();
        let mut headers = list(DEFAULT_HEADERS);
        headers.extend(list(&get("headers", "").to_ascii_lowercase()));
        Some(Cors {
            origins: list(&get("origins", "")),
            credentials: config.value::<bool>(&setting::CORS_CREDENTIALS),
            headers,
            methods: list(&get("methods", DEFAULT_METHODS)),
            max_age: config.value(&setting::CORS_MAX_AGE),
            exposed: list(&get("exposed_headers", DEFAULT_EXPOSED).to_ascii_lowercase()),
        })
    }

    fn allows(&self, origin: &str) -> bool {
        self.origins.iter().any(|o| o == "*" || o == origin)
    }

    /// The answer to a preflight request, if `headers` make one this server accepts.
    pub fn preflight(&self, headers: &HeaderMap) -> Option<Response> {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let origin = text("origin").filter(|o| self.allows(o))?;
        let method = text("access-control-request-method")?;
        if !self.methods.iter().any(|m| m == method) {
            return None;
        }
        let asked = text("access-control-request-headers").unwrap_or("");
        if !list(&asked.to_ascii_lowercase())
            .iter()
            .all(|h| self.headers.contains(h))
        {
            return None;
        }
        let mut resp = reply::empty(204);
        let h = resp.headers_mut();
        h.insert(
            "access-control-allow-origin",
            HeaderValue::from_str(origin).ok()?,
        );
        h.insert("access-control-max-age", HeaderValue::from(self.max_age));
        h.insert(
            "access-control-allow-methods",
            HeaderValue::from_str(&self.methods.join(", ")).ok()?,
        );
        h.insert(
            "access-control-allow-headers",
            HeaderValue::from_str(asked).ok()?,
        );
        if self.credentials {
            h.insert(
                "access-control-allow-credentials",
                HeaderValue::from_static("true"),
            );
        }
        Some(resp)
    }

    /// Adds the CORS headers to a response for a request from `origin`, if it is allowed.
    pub fn decorate(&self, origin: &str, resp: &mut Response) {
        if !self.allows(origin) {
            return;
        }
        let Ok(origin) = HeaderValue::from_str(origin) else {
            return;
        };
        let h = resp.headers_mut();
        let mut exposed = vec!["content-type".to_string()];
        exposed.extend(
            SIMPLE_HEADERS
                .iter()
                .filter(|s| h.contains_key(**s))
                .map(|s| s.to_string()),
        );
        exposed.extend(self.exposed.iter().cloned());
        h.insert("access-control-allow-origin", origin);
        if self.credentials {
            h.insert(
                "access-control-allow-credentials",
                HeaderValue::from_static("true"),
            );
        }
        if let Ok(v) = HeaderValue::from_str(&exposed.join(", ")) {
            h.insert("access-control-expose-headers", v);
        }
    }
}
