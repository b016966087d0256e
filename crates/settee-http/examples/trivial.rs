//! The floor for a document GET on this machine: a bare HTTP server on the same stack as
//! the real one (tokio's multi-threaded runtime, hyper, one task per connection, each
//! request answered inline) answering every request with the same small JSON document.
//! Benchmarks compare Settee's GET with it.
//!
//! `cargo run --release -p settee-http --example trivial -- 127.0.0.1:15990`

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

const DOC: &[u8] = b"{\"_id\":\"cat\",\"_rev\":\"1-7b8a4f2ef58a0e4a6b3bbfd5f1a0bcd9\",\"name\":\"gizmo\"}\n";

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
                resp.headers_mut().insert("content-type", "application/json".parse().expect("static"));
                Ok::<_, Infallible>(resp)
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
