//! An incoming request as handlers see it: decoded path segments, query parameters with
//! CouchDB's parsing rules, headers, the body (read on demand, with a size limit) and the
//! authenticated user.

use crate::connections::TimedBody;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::{HeaderMap, Method};
use percent_encoding::percent_decode_str;
use serde_json::Value;

use crate::auth::User;
use crate::error::{HttpError, HttpResult};

/// Query parameters in request order, decoded.
#[derive(Debug, Default, Clone)]
pub struct Query(pub Vec<(String, String)>);

fn decode(s: &str) -> String {
    percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

impl Query {
    /// Parses a raw query string.
    pub fn parse(raw: Option<&str>) -> Query {
        let pairs = raw
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (decode(k), decode(v)),
                None => (decode(p), String::new()),
            })
            .collect();
        Query(pairs)
    }

    /// The options of a POST body (but those named in `leave_out`) followed by the query
    /// string's, as CouchDB reads them: the query string wins where both give an option,
    /// and range options fold in this order. Keys stay JSON text, as in a query string;
    /// other strings (`startkey_docid`, say) are their text.
    /// The query string with `members` (a `queries` element) in place of the parameters
    /// they name, as CouchDB reads each of several queries; `leave_out` are not parameters.
    pub fn overridden_by(
        &self,
        members: &serde_json::Map<String, Value>,
        leave_out: &[&str],
    ) -> Query {
        let own = Query(
            self.0
                .iter()
                .filter(|(k, _)| !members.contains_key(k) && !leave_out.contains(&k.as_str()))
                .cloned()
                .collect(),
        );
        own.with_body(Some(members), leave_out)
    }

    pub fn with_body(
        &self,
        body: Option<&serde_json::Map<String, Value>>,
        leave_out: &[&str],
    ) -> Query {
        let Some(body) = body else {
            return self.clone();
        };
        let text = |k: &str, v: &Value| match v {
            Value::String(s)
                if !matches!(
                    k,
                    "key" | "keys" | "startkey" | "start_key" | "endkey" | "end_key"
                ) =>
            {
                s.clone()
            }
            _ => v.to_string(),
        };
        let mut q: Vec<(String, String)> = body
            .iter()
            .filter(|(k, _)| !leave_out.contains(&k.as_str()) && self.get(k).is_none())
            .map(|(k, v)| (k.clone(), text(k, v)))
            .collect();
        q.extend(self.0.iter().cloned());
        Query(q)
    }

    /// The last value given for `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter: `true` or `false` in any case, else `query_parse_error`.
    pub fn bool(&self, key: &str) -> HttpResult<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(v) => Err(HttpError::query_parse(format!(
                "Invalid boolean parameter: \"{v}\""
            ))),
        }
    }

    /// A boolean parameter that is off unless given as `true`.
    pub fn flag(&self, key: &str) -> HttpResult<bool> {
        Ok(self.bool(key)?.unwrap_or(false))
    }

    /// How documents are rendered, from `conflicts`, `attachments` and `att_encoding_info`.
    pub fn doc_options(&self) -> HttpResult<settee_db::DocOptions> {
        Ok(settee_db::DocOptions {
            conflicts: self.flag("conflicts")?,
            attachments: self.flag("attachments")?,
            att_encoding_info: self.flag("att_encoding_info")?,
            ..Default::default()
        })
    }

    /// A non-negative integer parameter.
    pub fn u64(&self, key: &str) -> HttpResult<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.parse::<i64>() {
                Ok(n) if n >= 0 => Ok(Some(n as u64)),
                Ok(_) => Err(HttpError::query_parse(format!(
                    "Invalid value for positive integer: \"{v}\""
                ))),
                Err(_) => Err(HttpError::query_parse(format!(
                    "Invalid value for integer: \"{v}\""
                ))),
            },
        }
    }

    /// A JSON-valued parameter (such as `startkey`).
    pub fn json(&self, key: &str) -> HttpResult<Option<Value>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => serde_json::from_str(v)
                .map(Some)
                .map_err(|_| HttpError::bad_request("invalid UTF-8 JSON")),
        }
    }

    /// The key range a view or `_all_docs` query names, read as CouchDB reads it: its
    /// options in the order given, a later one winning (`key` sets both ends).
    pub fn key_range(&self) -> HttpResult<KeyRange> {
        let mut range = KeyRange::default();
        let json = |v: &str| {
            serde_json::from_str::<Value>(v)
                .map_err(|_| HttpError::bad_request("invalid UTF-8 JSON"))
        };
        for (k, v) in &self.0 {
            match k.as_str() {
                "key" => {
                    let key = json(v)?;
                    range.start_key = Some(key.clone());
                    range.end_key = Some(key);
                }
                "start_key" | "startkey" => range.start_key = Some(json(v)?),
                "end_key" | "endkey" => range.end_key = Some(json(v)?),
                "start_key_doc_id" | "startkey_docid" => range.start_docid = Some(v.clone()),
                "end_key_doc_id" | "endkey_docid" => range.end_docid = Some(v.clone()),
                _ => {}
            }
        }
        Ok(range)
    }
}

/// The bounds of a key range as a query gives them.
#[derive(Default, Debug, PartialEq)]
pub struct KeyRange {
    /// First key, from `key`, `start_key` or `startkey`.
    pub start_key: Option<Value>,
    /// Last key, from `key`, `end_key` or `endkey`.
    pub end_key: Option<Value>,
    /// Document id at the first key, from `start_key_doc_id` or `startkey_docid`.
    pub start_docid: Option<String>,
    /// Document id at the last key, from `end_key_doc_id` or `endkey_docid`.
    pub end_docid: Option<String>,
}

impl KeyRange {
    /// The range as document ids, for `_all_docs` and its kin: a key that is a string, else
    /// the document id given (CouchDB ignores a key that is not a string and falls back on
    /// `startkey_docid`/`endkey_docid`).
    pub fn id_bounds(self) -> (Option<String>, Option<String>) {
        let id = |key: Option<Value>, docid: Option<String>| match key {
            Some(Value::String(s)) => Some(s),
            _ => docid,
        };
        (
            id(self.start_key, self.start_docid),
            id(self.end_key, self.end_docid),
        )
    }
}

/// A request being handled.
pub struct Req {
    /// The method.
    pub method: Method,
    /// Path segments, percent-decoded one by one (so `%2F` inside an id stays in it).
    pub segments: Vec<String>,
    /// Query parameters.
    pub query: Query,
    /// Request headers.
    pub headers: HeaderMap,
    /// The body, until read.
    pub body: Option<TimedBody>,
    /// A body already read, read again in place of `body`: a rewritten request's (a
    /// rewrite function may read or replace the body before the request goes on).
    pub preread: Option<Bytes>,
    /// The path and query as the client sent them, still percent-encoded (or as a rewrite
    /// made them).
    pub raw_path: String,
    /// How many times rewrite rules have sent this request on (`[httpd] rewrite_limit`).
    pub rewrites: u32,
    /// The authenticated caller.
    pub user: Option<User>,
    /// The authentication handler that named the user (`default`, `cookie`, `jwt`, `proxy`).
    pub auth_handler: Option<&'static str>,
    /// The client's address.
    pub peer: std::net::IpAddr,
    /// Whether the request came over TLS.
    pub tls: bool,
    /// Time spent reading the body, for `X-CouchDB-Body-Time`.
    pub body_time: std::time::Duration,
}

impl Req {
    /// A header's value as text.
    pub fn header(&self, name: impl hyper::header::AsHeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether the caller is a server admin.
    pub fn is_admin(&self) -> bool {
        self.user.as_ref().is_some_and(User::is_admin)
    }

    /// Whether the client takes `content_type` (`type/subtype`), as CouchDB decides: its
    /// `Accept` header (`*/*` when there is none) names the type, its main type with `/*`,
    /// or `*/*`, with a quality above 0.
    pub fn accepts(&self, content_type: &str) -> bool {
        accepts(
            self.header(hyper::header::ACCEPT).unwrap_or("*/*"),
            content_type,
        )
    }

    /// Fails unless the body is declared as JSON (CouchDB's 415 for POST endpoints).
    pub fn require_json(&self) -> HttpResult<()> {
        match self.header("content-type") {
            Some(ct) if ct.to_ascii_lowercase().starts_with("application/json") => Ok(()),
            _ => Err(HttpError::bad_content_type()),
        }
    }

    /// Reads the whole body, refusing more than `limit` bytes with 413.
    pub async fn bytes(&mut self, limit: usize) -> HttpResult<Bytes> {
        if let Some(bytes) = self.preread.take() {
            return Ok(bytes);
        }
        let Some(body) = self.body.take() else {
            return Ok(Bytes::new());
        };
        let started = std::time::Instant::now();
        let collected = Limited::new(body, limit).collect().await;
        self.body_time += started.elapsed();
        match collected {
            Ok(c) => Ok(c.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(HttpError::new(
                413,
                "too_large",
                "the request entity is too large",
            )),
            Err(_) => Err(HttpError::bad_request("the request body could not be read")),
        }
    }

    /// Reads a JSON body, decoded as its `Content-Encoding` says: `gzip` (CouchDB decodes
    /// it, and the IBM Cloudant SDK gzips every body it sends) or `identity`; any other is
    /// 415, as in CouchDB. At most `limit` bytes, decoded.
    pub async fn json_bytes(&mut self, limit: usize) -> HttpResult<Bytes> {
        let bytes = self.bytes(limit).await?;
        match self.header("content-encoding") {
            None | Some("identity") => Ok(bytes),
            Some("gzip") => gunzip(&bytes, limit),
            Some(other) => Err(HttpError::new(
                415,
                "bad_content_type",
                format!("{other} is not a supported content encoding."),
            )),
        }
    }

    /// Reads the body as JSON (an empty body is not: `invalid UTF-8 JSON`, as CouchDB says).
    pub async fn json(&mut self, limit: usize) -> HttpResult<Value> {
        let bytes = self.json_bytes(limit).await?;
        crate::request::parse_json(&bytes)
    }

    /// The `queries` of a POST to a `…/queries` endpoint: each query's parameters, refused
    /// as CouchDB refuses a body without them.
    pub async fn queries(&mut self, max: usize) -> HttpResult<Vec<serde_json::Map<String, Value>>> {
        self.require_json()?;
        let body = self.json_object(max).await?;
        let Some(queries) = body.get("queries") else {
            return Err(HttpError::bad_request(
                "POST body must include `queries` parameter.",
            ));
        };
        let Value::Array(queries) = queries else {
            return Err(HttpError::bad_request("`queries` member must be an array."));
        };
        queries
            .iter()
            .map(|q| match q {
                Value::Object(members) => Ok(members.clone()),
                _ => Err(HttpError::bad_request("Each query must be an object.")),
            })
            .collect()
    }

    /// Reads the body as a JSON object.
    pub async fn json_object(
        &mut self,
        limit: usize,
    ) -> HttpResult<serde_json::Map<String, Value>> {
        match self.json(limit).await? {
            Value::Object(m) => Ok(m),
            _ => Err(HttpError::bad_request("Request body must be a JSON object")),
        }
    }
}

/// The bytes `gzipped` decodes to, at most `limit` of them.
fn gunzip(gzipped: &[u8], limit: usize) -> HttpResult<Bytes> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut decoder = flate2::read::GzDecoder::new(gzipped).take(limit as u64 + 1);
    decoder
        .read_to_end(&mut out)
        .map_err(|_| HttpError::bad_request("Request body is not properly gzipped."))?;
    if out.len() > limit {
        return Err(HttpError::new(
            413,
            "too_large",
            "the request entity is too large",
        ));
    }
    Ok(Bytes::from(out))
}

/// Splits a raw path into decoded segments (empty segments dropped).
pub fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        // A segment without an escape is its own decoding.
        .map(|s| {
            if s.contains('%') {
                percent_decode_str(s).decode_utf8_lossy().into_owned()
            } else {
                s.to_owned()
            }
        })
        .collect()
}

/// A path segment encoded as CouchDB encodes the ones it puts in `Location`: letters,
/// digits and `_ . - :` kept, every other byte `%XX`.
pub fn url_encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    push_url_encoded(&mut out, segment);
    out
}

/// Appends `segment` to `out` encoded as [`url_encode`] encodes it.
pub fn push_url_encoded(out: &mut String, segment: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in segment.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b':' => {
                out.push(b as char)
            }
            _ => {
                out.push('%');
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 15)] as char);
            }
        }
    }
}

/// [`Req::accepts`] for an `Accept` header's text: some range with a quality above 0 takes
/// the type, and none names the type or its main type with `/*` at quality 0.
fn accepts(accept: &str, content_type: &str) -> bool {
    let any_subtype = content_type
        .split_once('/')
        .map_or_else(String::new, |(main, _)| format!("{main}/*"));
    let ranges: Vec<(String, bool)> = accept
        .split(',')
        .map(|range| {
            let mut params = range.split(';');
            let media = params.next().unwrap_or("").trim().to_ascii_lowercase();
            let quality = params
                .filter_map(|p| p.trim().strip_prefix("q="))
                .next_back()
                .map_or(Some(1.0), |q| q.trim().parse::<f64>().ok());
            (media, quality.is_some_and(|q| q > 0.0))
        })
        .collect();
    let names = |media: &str| media == content_type || media == any_subtype;
    ranges
        .iter()
        .any(|(media, wanted)| *wanted && (media == "*/*" || names(media)))
        && !ranges.iter().any(|(media, wanted)| !wanted && names(media))
}

/// Parses a request body's JSON, nested as deeply as documents may be (see
/// [`settee_json::deep`]); a bad request with the reason otherwise.
pub fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> HttpResult<T> {
    settee_json::deep::from_slice(bytes).map_err(|e| HttpError::bad_request(e.reason()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_parse_like_couchdb() {
        let q = Query::parse(Some(
            "limit=5&descending=true&startkey=%22a%20b%22&bad=x&neg=-1&skip=zz&k=a+b",
        ));
        assert_eq!(q.u64("limit").unwrap(), Some(5));
        assert_eq!(q.bool("descending").unwrap(), Some(true));
        assert_eq!(
            q.json("startkey").unwrap(),
            Some(Value::String("a b".into()))
        );
        assert_eq!(
            q.bool("bad").unwrap_err().reason,
            "Invalid boolean parameter: \"x\""
        );
        assert_eq!(
            q.u64("neg").unwrap_err().reason,
            "Invalid value for positive integer: \"-1\""
        );
        assert_eq!(
            q.u64("skip").unwrap_err().reason,
            "Invalid value for integer: \"zz\""
        );
        assert_eq!(q.get("k"), Some("a b"));
    }

    #[test]
    fn key_ranges_fold_their_options_in_order() {
        let range = |q: &str| Query::parse(Some(q)).key_range().unwrap();
        let r = range("key=1&startkey_docid=x&end_key=%5B2%5D&start_key_doc_id=y");
        assert_eq!(
            r,
            KeyRange {
                start_key: Some(1.into()),
                end_key: Some(serde_json::json!([2])),
                start_docid: Some("y".into()),
                end_docid: None
            }
        );
        assert_eq!(range("startkey=3&key=4").start_key, Some(4.into()));
        assert_eq!(range("key=4&startkey=3").start_key, Some(3.into()));
        assert_eq!(range("").start_key, None);
        assert_eq!(
            Query::parse(Some("endkey={"))
                .key_range()
                .unwrap_err()
                .reason,
            "invalid UTF-8 JSON"
        );
    }

    #[test]
    fn location_segments_are_encoded_as_couchdb_encodes_them() {
        assert_eq!(url_encode("_design/a b:c.d-e"), "_design%2Fa%20b:c.d-e");
        assert_eq!(url_encode("é"), "%C3%A9");
    }

    #[test]
    fn accept_headers_are_read_as_couchdb_reads_them() {
        assert!(accepts("*/*", "multipart/mixed"));
        assert!(accepts(
            "application/json, text/plain, */*",
            "multipart/mixed"
        ));
        assert!(accepts("multipart/*;q=0.5", "multipart/related"));
        assert!(accepts("MULTIPART/MIXED", "multipart/mixed"));
        assert!(!accepts("application/json", "multipart/mixed"));
        assert!(!accepts("multipart/mixed;q=0", "multipart/mixed"));
        assert!(!accepts("*/*;q=0, application/json", "multipart/related"));
        assert!(!accepts("multipart/related", "multipart/mixed"));
        assert!(!accepts("multipart/mixed;q=0, */*", "multipart/mixed"));
        assert!(!accepts("multipart/*;q=0, */*", "multipart/mixed"));
        assert!(accepts("multipart/related;q=0, */*", "multipart/mixed"));
    }

    #[test]
    fn path_segments_decode_separately() {
        assert_eq!(segments("/db/a%2Fb/"), ["db", "a/b"]);
        assert_eq!(segments("/db/_design/x"), ["db", "_design", "x"]);
    }
}
