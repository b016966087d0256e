//! The floor for a document GET on this machine: a bare HTTP server on the same stack as
//! the real one (tokio's multi-threaded runtime, hyper, one task per connection, each
//! request answered inline) answering every request with the bytes Settee answers a GET of
//! the small document `animals/cat` with: the same body and the same headers, values
//! included (a fixed request id of the same length). Benchmarks compare Settee's GET with it.
//!
//! `cargo run --release -p settee-http --example trivial -- 127.0.0.1:15990`

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// The document the benchmarks read, `{"name":"cat","legs":4,"sound":"meow"}` stored as
/// `animals/cat`, as Settee answers it.
const DOC: &[u8] = b"{\"_id\":\"cat\",\"_rev\":\"1-3a81c98445731d7cddbbfb0f34370cec\",\"name\":\"cat\",\"legs\":4,\"sound\":\"meow\"}\n";

/// Settee's headers on that answer besides `content-length` and `date`, which hyper adds.
const HEADERS: [(&str, &str); 6] = [
    ("content-type", "application/json"),
    ("cache-control", "must-revalidate"),
    ("etag", "\"1-3a81c98445731d7cddbbfb0f34370cec\""),
    ("x-couchdb-body-time", "0"),
    ("server", settee_http::SERVER_HEADER),
    ("x-couch-request-id", "ad8f763da1"),
];

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:15990".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("trivial server on http://{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(|_req| async {
                let mut resp = hyper::Response::new(Full::new(Bytes::from_static(DOC)));
                for (name, value) in HEADERS {
                    resp.headers_mut().insert(HeaderName::from_static(name), HeaderValue::from_static(value));
                }
                Ok::<_, Infallible>(resp)
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
