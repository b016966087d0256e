//! `/_utils`: the admin UI (crate `settee-ui`), served with its types, caching headers,
//! gzip and the server's Content-Security-Policy.

use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, LOCATION, VARY};
use hyper::Method;
use settee_config::registry as setting;

use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

/// Versioned files never change: a year, and no revalidation.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// `GET|HEAD /_utils[/…]`.
pub fn utils(state: &State, req: &Req) -> HttpResult<Response> {
    if !matches!(req.method, Method::GET | Method::HEAD) {
        return Err(HttpError::method_not_allowed("GET,HEAD"));
    }
    let path = req.raw_path.split('?').next().unwrap_or_default();
    let rest: Vec<&str> = req.segments[1..].iter().map(String::as_str).collect();
    let (file, cache) = match rest.as_slice() {
        [] if !path.ends_with('/') => return Ok(redirect("/_utils/")),
        [] | ["index.html"] => (settee_ui::index(), "no-cache"),
        ["v", version, file @ ..] => {
            let file = settee_ui::asset(&file.join("/")).ok_or_else(missing)?;
            // A page from an older build asks for its own version: it gets today's file,
            // not to be kept.
            let cache = if *version == settee_ui::version() {
                IMMUTABLE
            } else {
                "no-cache"
            };
            (file, cache)
        }
        _ => return Err(missing()),
    };
    let gzip = req
        .header("accept-encoding")
        .is_some_and(|a| a.split(',').any(|e| e.trim().starts_with("gzip")));
    let body = if gzip { &file.gzipped } else { &file.bytes };
    let mut resp = reply::bytes(200, body.clone());
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(file.content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
    if gzip {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    let config = state.node.config.read().expect("config lock");
    if config.value::<bool>(&setting::CSP_UTILS_ENABLE) {
        let csp = config.value::<String>(&setting::CSP_UTILS_HEADER_VALUE);
        if let Ok(v) = HeaderValue::from_str(&csp) {
            headers.insert("content-security-policy", v);
        }
    }
    Ok(resp)
}

fn missing() -> HttpError {
    HttpError::not_found("missing")
}

fn redirect(to: &'static str) -> Response {
    let mut resp = reply::empty(301);
    resp.headers_mut()
        .insert(LOCATION, HeaderValue::from_static(to));
    resp
}
