//! Building responses: compact JSON followed by a newline, CouchDB's standard headers, and
//! streamed bodies fed from a blocking producer (for `_all_docs` and change feeds).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Frame;
use hyper::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::StatusCode;
use tokio::sync::mpsc;

use crate::error::HttpError;

/// Response body: whole or streamed.
pub type Body = BoxBody<Bytes, Infallible>;
/// A response.
pub type Response = hyper::Response<Body>;

/// A response with a JSON body (the bytes given plus a newline).
pub fn json_bytes(status: u16, mut bytes: Vec<u8>) -> Response {
    bytes.push(b'\n');
    let mut resp = hyper::Response::new(Full::new(Bytes::from(bytes)).boxed());
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_headers(&mut resp);
    resp
}

/// A saved edit's answer, `{"ok":true,"id","rev"}`, appended to `out`: the body of a
/// single-document write, and a row of `_bulk_docs`'.
pub fn push_saved(out: &mut Vec<u8>, id: &str, rev: &settee_json::Rev) {
    out.extend_from_slice(br#"{"ok":true,"id":"#);
    push_string(out, id);
    out.extend_from_slice(br#","rev":"#);
    match rev.id {
        settee_json::RevId::Hash(_) => {
            out.push(b'"');
            rev.push_bytes_to(out);
            out.push(b'"');
        }
        // A revision replicated from elsewhere may name itself with any text.
        settee_json::RevId::Text(_) => push_string(out, &rev.to_string()),
    }
    out.push(b'}');
}

/// Appends `s` as a JSON string. Most ids and revisions need no escape and are copied
/// between quotes; any other is written as serde_json writes it.
pub fn push_string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        serde_json::to_writer(&mut *out, s).expect("writing to a Vec");
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// A response with a JSON value.
pub fn json(status: u16, value: &serde_json::Value) -> Response {
    json_bytes(
        status,
        serde_json::to_vec(value).expect("a JSON value serializes"),
    )
}

/// A response with raw bytes (the caller sets the content type).
pub fn bytes(status: u16, bytes: Vec<u8>) -> Response {
    let mut resp = hyper::Response::new(Full::new(Bytes::from(bytes)).boxed());
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp
}

/// `{"ok":true}`.
pub fn ok() -> Response {
    json_bytes(200, b"{\"ok\":true}".to_vec())
}

/// A response without a body.
pub fn empty(status: u16) -> Response {
    let mut resp = hyper::Response::new(Empty::new().boxed());
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp
}

fn json_headers(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("must-revalidate"));
}

/// The error response for `e`.
pub fn error(e: &HttpError) -> Response {
    let mut resp = json_bytes(e.status, e.body());
    if let Some(allow) = e.allow {
        resp.headers_mut()
            .insert(hyper::header::ALLOW, HeaderValue::from_static(allow));
    }
    if e.close {
        resp.headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// An `ETag` in CouchDB's form for what a 128-bit hash names: the hash in base 36, quoted.
pub fn hashed_etag(hash: [u8; 16]) -> String {
    let mut n = u128::from_be_bytes(hash);
    let mut digits = Vec::with_capacity(26);
    loop {
        digits.push(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    format!("\"{}\"", String::from_utf8(digits).expect("ASCII digits"))
}

/// Adds a header (ignored if the value is not a valid header value).
pub fn with_header(mut resp: Response, name: HeaderName, value: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
    resp
}

/// A body fed through a channel; `len` is its exact length when known in advance.
struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
    len: Option<u64>,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.len.map_or_else(
            hyper::body::SizeHint::default,
            hyper::body::SizeHint::with_exact,
        )
    }
}

/// Where a streamed response's producer writes. Bytes are sent in chunks; a write fails
/// once the client has gone, so producers stop early.
pub struct Sink {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
    held: Option<tokio::sync::oneshot::Sender<Result<(), HttpError>>>,
}

const CHUNK: usize = 32 * 1024;

/// The client went away.
#[derive(Debug)]
pub struct Gone;

impl Sink {
    /// Appends bytes, sending a chunk when enough have gathered.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Gone> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Holds the response back until the first bytes are sent or [`Sink::release`]: the
    /// receiver learns then that it may go out, or that the producer failed first
    /// ([`Sink::fail`]), so the request can still answer with an error status.
    pub fn hold(&mut self) -> tokio::sync::oneshot::Receiver<Result<(), HttpError>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.held = Some(tx);
        rx
    }

    /// Lets a held response go out.
    pub fn release(&mut self) {
        if let Some(held) = self.held.take() {
            let _ = held.send(Ok(()));
        }
    }

    /// Answers a held response with `e` instead; false once the response has gone out (the
    /// producer can then only stop).
    pub fn fail(&mut self, e: HttpError) -> bool {
        match self.held.take() {
            Some(held) => {
                let _ = held.send(Err(e));
                true
            }
            None => false,
        }
    }

    /// Sends what has gathered now (for feeds that must not wait).
    pub fn flush(&mut self) -> Result<(), Gone> {
        self.release();
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.tx.blocking_send(chunk).map_err(|_| Gone)
    }

    /// Sends from async code.
    pub async fn send(&mut self, bytes: &[u8]) -> Result<(), Gone> {
        self.release();
        self.buf.extend_from_slice(bytes);
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.tx.send(chunk).await.map_err(|_| Gone)
    }
}

/// Where rows go: a streamed response or a buffer (for answers made of several results).
pub trait Out {
    /// Appends bytes; fails once a streamed response's client has gone.
    fn put(&mut self, bytes: &[u8]) -> Result<(), Gone>;
}

impl Out for Sink {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Gone> {
        self.write(bytes)
    }
}

impl Out for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Gone> {
        self.extend_from_slice(bytes);
        Ok(())
    }
}

/// A streamed response and the sink that feeds it.
pub fn channel(status: u16, content_type: &'static str) -> (Response, Sink) {
    channel_sized(status, content_type, None)
}

/// A streamed response of exactly `len` bytes when given (sent with `Content-Length`).
pub fn channel_sized(
    status: u16,
    content_type: &'static str,
    len: Option<u64>,
) -> (Response, Sink) {
    let (tx, rx) = mpsc::channel(4);
    let mut resp = hyper::Response::new(ChannelBody { rx, len }.boxed());
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    json_headers(&mut resp);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    (
        resp,
        Sink {
            tx,
            buf: Vec::with_capacity(CHUNK),
            held: None,
        },
    )
}

/// A JSON response produced by `f` on a blocking thread while the client receives it.
pub fn stream(
    status: u16,
    f: impl FnOnce(&mut Sink) -> Result<(), Gone> + Send + 'static,
) -> Response {
    let (resp, mut sink) = channel(status, "application/json");
    tokio::task::spawn_blocking(move || {
        if f(&mut sink).is_ok() {
            let _ = sink.flush();
        }
    });
    resp
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// A string is written as serde_json writes it, whether it takes the copy or not:
        /// quotes, backslashes, control characters, DEL, non-ASCII.
        #[test]
        fn strings_are_written_as_serde_json_writes_them(
            s in "[a-z0-9_:/\"\\\\\\x00-\\x1f\\x7f\u{e9}\u{2028}\u{1F600}]{0,12}"
        ) {
            let mut out = b"x".to_vec();
            push_string(&mut out, &s);
            let want = serde_json::to_string(&s).unwrap();
            prop_assert_eq!(&out[1..], want.as_bytes());
        }
    }
}
