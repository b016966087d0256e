//! The floor for a document GET on this machine: a bare HTTP server on the same stack as
//! the real one (tokio's multi-threaded runtime, hyper, one task per connection, each
//! request answered inline) answering every request with the bytes Settee answers a GET of
//! the small document `animals/cat` with: the same body and the same headers, values
//! included (a fixed request id of the same length). Benchmarks compare Settee's GET with it.
//!
//! Given a file as well, it is also the floor for a durable single-document write: each POST
//! is answered, inline on the thread that read it, once its body is written into the file
//! and `fdatasync`ed. Like Settee's commits, the writes go over zeros laid down beforehand
//! (an 8 KiB block each, about what a one-document commit writes), so a sync never has to
//! record a longer file. The answer's body has the length of Settee's answer to a POST (its
//! headers are the GET's).
//!
//! `cargo run --release -p settee-http --example trivial -- 127.0.0.1:15990 [FILE]`

use std::convert::Infallible;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
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

/// Settee's answer to a POST of a new document, with a fixed id and revision.
const CREATED: &[u8] = b"{\"ok\":true,\"id\":\"8f3c1a5e0b2d4c6e9a7f1b3d5c7e9a0b\",\"rev\":\"1-5d41402abc4b2a76b9719d911017c592\"}\n";

/// The bytes each durable write covers.
const BLOCK: u64 = 8192;
/// The zeros laid down ahead of the writes, which wrap around within them.
const AREA: u64 = 64 << 20;

/// A file of zeros that durable POSTs overwrite in turn, wrapping at its end.
struct Log {
    file: File,
    next: AtomicU64,
}

impl Log {
    /// Creates (or empties) the file at `path` and fills it with synced zeros.
    fn create(path: &str) -> std::io::Result<Log> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let zeros = vec![0u8; 1 << 20];
        for at in (0..AREA).step_by(zeros.len()) {
            file.write_all_at(&zeros, at)?;
        }
        file.sync_all()?;
        Ok(Log {
            file,
            next: AtomicU64::new(0),
        })
    }

    /// Writes `body` into the next block and syncs it.
    fn append(&self, body: &[u8]) -> std::io::Result<()> {
        let mut block = vec![0u8; BLOCK as usize];
        let n = body.len().min(block.len());
        block[..n].copy_from_slice(&body[..n]);
        let at = self.next.fetch_add(BLOCK, Ordering::Relaxed) % AREA;
        self.file.write_all_at(&block, at)?;
        self.file.sync_data()
    }
}

fn answer(body: &'static [u8], status: hyper::StatusCode) -> hyper::Response<Full<Bytes>> {
    let mut resp = hyper::Response::new(Full::new(Bytes::from_static(body)));
    *resp.status_mut() = status;
    for (name, value) in HEADERS {
        resp.headers_mut().insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    resp
}

async fn serve(
    req: hyper::Request<hyper::body::Incoming>,
    log: Option<Arc<Log>>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let Some(log) = log.filter(|_| req.method() == hyper::Method::POST) else {
        return Ok(answer(DOC, hyper::StatusCode::OK));
    };
    let written = match req.into_body().collect().await {
        Ok(body) => log.append(&body.to_bytes()),
        Err(e) => Err(std::io::Error::other(e)),
    };
    Ok(match written {
        Ok(()) => answer(CREATED, hyper::StatusCode::CREATED),
        Err(_) => answer(
            b"{\"error\":\"unknown_error\",\"reason\":\"the write failed\"}\n",
            hyper::StatusCode::INTERNAL_SERVER_ERROR,
        ),
    })
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:15990".into());
    let log = args
        .next()
        .map(|path| Log::create(&path))
        .transpose()?
        .map(Arc::new);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("trivial server on http://{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let log = log.clone();
        tokio::spawn(async move {
            let service = service_fn(|req| serve(req, log.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
