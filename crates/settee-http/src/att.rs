//! Standalone attachments: `GET/HEAD/PUT/DELETE /{db}/{docid}/{attname}`. Uploads stream into
//! the document's shard in chunks (never held whole in memory); downloads stream chunk by
//! chunk, with `Range` for identity-encoded attachments and gzip passed through to clients
//! that accept it.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use http_body_util::BodyExt;
use hyper::header::{ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_RANGE, CONTENT_TYPE, ETAG, LOCATION};
use hyper::Method;
use serde_json::json;
use settee_db::{
    AttInfo, AttSource, Database, DbSnapshot, Durability, EditMode, Encoding, NewAtt, NewDoc,
    Uploader,
};
use settee_json::Rev;

use crate::db::open;
use crate::doc::parse_rev;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::{url_encode, Req};
use crate::server::State;

/// Dispatches on the method.
pub async fn handle(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    id: &str,
    att: &str,
) -> HttpResult<Response> {
    // However the id arrived (`_local%2Fx` included).
    if settee_db::is_local(id) {
        return Err(HttpError::bad_request(
            "_local documents do not accept attachments.",
        ));
    }
    match req.method {
        Method::GET | Method::HEAD => get(state, req, name, id, att),
        Method::PUT => put(state, req, name, id, att).await,
        Method::DELETE => delete(state, req, name, id, att).await,
        _ => Err(HttpError::method_not_allowed("DELETE,GET,HEAD,PUT")),
    }
}

/// The revision a write names by `rev` or `If-Match`, which must agree (as CouchDB).
fn rev_param(req: &Req) -> HttpResult<Option<Rev>> {
    crate::doc::named_rev(req)?
        .as_deref()
        .map(parse_rev)
        .transpose()
}

/// CouchDB's answer for a write whose revision is not the document's latest.
fn conflict() -> HttpError {
    settee_db::Error::Conflict.into()
}

fn get(state: &State, req: &Req, name: &str, id: &str, att_name: &str) -> HttpResult<Response> {
    let db = open(state, name)?;
    let snap = db.snapshot();
    let rev = req.query.get("rev").map(parse_rev).transpose()?;
    let att = snap.attachment(id, rev.as_ref(), att_name)?;
    let etag = format!("\"{}\"", STANDARD.encode(att.md5));
    if crate::doc::if_none_match(req, &etag) {
        return Ok(reply::with_header(reply::empty(304), ETAG, &etag));
    }
    // As CouchDB: ranges are checked whatever the encoding (416 when none can be served),
    // and served only from identity bytes.
    let ranges = req
        .header("range")
        .map(|r| parse_ranges(r, att.length))
        .transpose()?
        .flatten();
    let multipart =
        ranges.as_ref().is_some_and(|r| r.len() > 1) && att.encoding == Encoding::Identity;
    let resp = match (att.encoding, ranges) {
        (Encoding::Gzip, _) if takes_gzip(req.header("accept-encoding")) => {
            let resp = send_chunks(snap, id, att.clone(), None, 200);
            reply::with_header(resp, CONTENT_ENCODING, "gzip")
        }
        (Encoding::Gzip, _) => send_decoded(snap, id, att.clone()),
        (Encoding::Identity, Some(ranges)) if ranges.len() == 1 => {
            let (start, end) = ranges[0];
            let resp = send_chunks(snap, id, att.clone(), Some((start, end)), 206);
            reply::with_header(
                resp,
                CONTENT_RANGE,
                &format!("bytes {start}-{end}/{}", att.length),
            )
        }
        (Encoding::Identity, Some(ranges)) => send_ranges(snap, id, att.clone(), ranges),
        (Encoding::Identity, None) => send_chunks(snap, id, att.clone(), None, 200),
    };
    let accept_ranges = if att.encoding == Encoding::Identity {
        "bytes"
    } else {
        "none"
    };
    // A multipart answer's type names its boundary.
    let resp = if multipart {
        resp
    } else {
        reply::with_header(resp, CONTENT_TYPE, &att.content_type)
    };
    let resp = reply::with_header(resp, ACCEPT_RANGES, accept_ranges);
    // CouchDB's default `[csp] attachments_enable`: attachments are not run as pages of the
    // server's origin.
    let resp = reply::with_header(resp, hyper::header::CONTENT_SECURITY_POLICY, "sandbox");
    Ok(reply::with_header(resp, ETAG, &etag))
}

/// Whether a client's `Accept-Encoding` takes gzip, q-values and `*` read as mochiweb
/// reads them.
fn takes_gzip(header: Option<&str>) -> bool {
    let mut star = false;
    for part in header.unwrap_or("").split(',') {
        let mut params = part.split(';');
        let coding = params.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = params
            .find_map(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|v| v.trim().parse::<f32>().ok())
            })
            .unwrap_or(1.0);
        match coding.as_str() {
            "gzip" | "x-gzip" => return q > 0.0,
            "*" => star = q > 0.0,
            _ => {}
        }
    }
    star
}

/// The `bytes=` ranges of a `Range` header against a length, as CouchDB reads them:
/// `Ok(None)` to send the whole attachment (a header that does not parse, one with `0-`, ten
/// or more ranges), 416 for a range that ends before it starts, ends clamped to the length.
fn parse_ranges(header: &str, len: u64) -> HttpResult<Option<Vec<(u64, u64)>>> {
    let unsatisfiable = || {
        HttpError::new(
            416,
            "requested_range_not_satisfiable",
            "Requested range not satisfiable",
        )
    };
    let Some(specs) = parsed_ranges(header) else {
        return Ok(None);
    };
    if specs.contains(&(Some(0), None)) || specs.len() >= 10 {
        return Ok(None);
    }
    let last = len.saturating_sub(1);
    let mut out = Vec::with_capacity(specs.len());
    for spec in specs {
        let (from, to) = match spec {
            (Some(from), Some(to)) => (from, to.min(last)),
            (None, Some(suffix)) => (len.saturating_sub(suffix), last),
            (Some(from), None) => (from, last),
            (None, None) => return Ok(None),
        };
        if len == 0 || to < from {
            return Err(unsatisfiable());
        }
        out.push((from, to));
    }
    Ok(Some(out))
}

/// A `Range` header's `bytes=` specs (`a-b`, `a-`, `-b`), or None when it does not parse.
fn parsed_ranges(header: &str) -> Option<Vec<(Option<u64>, Option<u64>)>> {
    let specs = header.trim().strip_prefix("bytes=")?;
    specs
        .split(',')
        .map(|spec| {
            let (a, b) = spec.trim().split_once('-')?;
            let num = |t: &str| {
                if t.is_empty() {
                    Ok(None)
                } else {
                    t.parse().map(Some)
                }
            };
            match (num(a.trim()).ok()?, num(b.trim()).ok()?) {
                (None, None) => None,
                pair => Some(pair),
            }
        })
        .collect()
}

/// Several ranges of an identity attachment as `multipart/byteranges`, as CouchDB sends
/// them: each part with its type and `Content-Range`.
fn send_ranges(snap: DbSnapshot, id: &str, att: AttInfo, ranges: Vec<(u64, u64)>) -> Response {
    let boundary = format!("{:032x}", rand::random::<u128>());
    let (resp, mut sink) = reply::channel(206, "multipart/byteranges");
    let resp = reply::with_header(
        resp,
        CONTENT_TYPE,
        &format!("multipart/byteranges; boundary=\"{boundary}\""),
    );
    let id = id.to_string();
    // A stored type cannot add lines to a part's head.
    let content_type: String = att
        .content_type
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    tokio::task::spawn_blocking(move || {
        let out = || -> Result<(), reply::Gone> {
            sink.write(format!("--{boundary}").as_bytes())?;
            for (start, end) in ranges {
                let head = format!("\r\nContent-Type: {content_type}\r\nContent-Range: bytes {start}-{end}/{}\r\n\r\n", att.length);
                sink.write(head.as_bytes())?;
                write_range(&snap, &id, &att, Some((start, end)), &mut sink)?;
                sink.write(format!("\r\n--{boundary}").as_bytes())?;
            }
            sink.write(b"--")?;
            sink.flush()
        };
        let _ = out();
    });
    resp
}

/// Streams the stored bytes of an attachment, or the identity bytes `start..=end` of them.
fn send_chunks(
    snap: DbSnapshot,
    id: &str,
    att: AttInfo,
    range: Option<(u64, u64)>,
    status: u16,
) -> Response {
    let len = match range {
        Some((s, e)) => e - s + 1,
        None => att.encoded_length,
    };
    let (resp, mut sink) = reply::channel_sized(status, "application/octet-stream", Some(len));
    let id = id.to_string();
    tokio::task::spawn_blocking(move || {
        if write_range(&snap, &id, &att, range, &mut sink).is_ok() {
            let _ = sink.flush();
        }
    });
    resp
}

/// Writes the stored bytes of an attachment, or the identity bytes `start..=end` of them.
/// Stops (as if the client had gone) when a chunk cannot be read, which is logged.
fn write_range(
    snap: &DbSnapshot,
    id: &str,
    att: &AttInfo,
    range: Option<(u64, u64)>,
    sink: &mut reply::Sink,
) -> Result<(), reply::Gone> {
    let mut at = 0u64;
    for chunk in &att.chunks {
        let bytes = snap.attachment_chunk(id, chunk).map_err(|e| {
            tracing::error!(error = %e, "reading an attachment");
            reply::Gone
        })?;
        let (lo, hi) = (at, at + bytes.len() as u64);
        at = hi;
        let (from, to) = match range {
            None => (0, bytes.len()),
            Some((s, e)) if hi <= s || lo > e => continue,
            Some((s, e)) => ((s.max(lo) - lo) as usize, ((e + 1).min(hi) - lo) as usize),
        };
        sink.write(&bytes[from..to])?;
    }
    Ok(())
}

/// An attachment's identity bytes, read a stored chunk at a time and decoded as they go.
pub fn identity_reader(snap: DbSnapshot, id: &str, att: &AttInfo) -> Box<dyn std::io::Read + Send> {
    let chunks = ChunkReader {
        snap,
        id: id.to_string(),
        chunks: att.chunks.clone().into_iter(),
        current: std::io::Cursor::new(Vec::new()),
    };
    match att.encoding {
        Encoding::Identity => Box::new(chunks),
        Encoding::Gzip => Box::new(flate2::read::GzDecoder::new(chunks)),
    }
}

/// Reads an attachment's stored chunks in order, one at a time.
struct ChunkReader {
    snap: DbSnapshot,
    id: String,
    chunks: std::vec::IntoIter<settee_store::BlobRef>,
    current: std::io::Cursor<Vec<u8>>,
}

impl std::io::Read for ChunkReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.current.read(out)?;
            if n > 0 || out.is_empty() {
                return Ok(n);
            }
            let Some(next) = self.chunks.next() else {
                return Ok(0);
            };
            let bytes = self
                .snap
                .attachment_chunk(&self.id, &next)
                .map_err(std::io::Error::other)?;
            self.current = std::io::Cursor::new(bytes);
        }
    }
}

/// Streams a gzip-stored attachment decoded, for clients that do not accept gzip.
fn send_decoded(snap: DbSnapshot, id: &str, att: AttInfo) -> Response {
    let (resp, mut sink) = reply::channel_sized(200, "application/octet-stream", Some(att.length));
    let reader = ChunkReader {
        snap,
        id: id.to_string(),
        chunks: att.chunks.into_iter(),
        current: std::io::Cursor::new(Vec::new()),
    };
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut gz = flate2::read::GzDecoder::new(reader);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match gz.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if sink.write(&buf[..n]).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "decoding an attachment");
                    return;
                }
            }
        }
        let _ = sink.flush();
    });
    resp
}

/// The current revision's body and attachments as an edit to build on; errors as CouchDB
/// answers a stale or missing revision.
fn base_edit(
    db: &Database,
    id: &str,
    rev: Option<Rev>,
    keep: impl Fn(&AttInfo) -> bool,
) -> HttpResult<(Option<Rev>, Vec<u8>, Vec<NewAtt>)> {
    let snap = db.snapshot();
    let record = snap.record(id)?;
    let Some(record) = record.filter(|r| !r.tree.is_deleted() || rev.is_some()) else {
        return match rev {
            Some(_) => Err(missing_rev()),
            None => Ok((None, b"{}".to_vec(), Vec::new())),
        };
    };
    let rev = rev.ok_or_else(conflict)?;
    // A revision the document does not have is CouchDB's `missing_rev`; one it has but that
    // was edited since is a conflict.
    let i = record.tree.find(&rev).ok_or_else(missing_rev)?;
    if !record.tree.is_leaf(i) {
        return Err(conflict());
    }
    let info = record.tree.nodes[i].info.as_ref().ok_or_else(conflict)?;
    let body = snap.body(id, info)?.into_owned();
    let stubs = info
        .atts
        .iter()
        .filter(|a| keep(a))
        .map(|a| NewAtt {
            name: a.name.clone(),
            content_type: a.content_type.clone(),
            source: AttSource::Stub,
            revpos: None,
        })
        .collect();
    Ok((Some(rev), body, stubs))
}

/// CouchDB's answer for a write naming a revision the document does not have.
fn missing_rev() -> HttpError {
    HttpError::new(409, "not_found", "missing_rev")
}

async fn put(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    id: &str,
    att_name: &str,
) -> HttpResult<Response> {
    state.node.limits.check_id(id)?;
    settee_db::check_att_name(att_name)?;
    let db = open(state, name)?;
    let content_type = req
        .header("content-type")
        .unwrap_or("application/octet-stream")
        .to_string();
    let rev = rev_param(req)?;
    let (parent, body, mut atts) = base_edit(&db, id, rev, |a| a.name != att_name)?;
    let source = upload(state, req, &db, id, &content_type).await?;
    atts.push(NewAtt {
        name: att_name.to_string(),
        content_type,
        source,
        revpos: None,
    });
    let doc = NewDoc::from_stored(id, parent, body, atts)?;
    let rev = save(state, req, &db, doc).await?;
    // As CouchDB: a `Location`, and no `ETag`.
    let resp = reply::json(201, &json!({"ok": true, "id": id, "rev": rev.to_string()}));
    let path = format!(
        "/{}/{}/{}",
        url_encode(name),
        url_encode(id),
        url_encode(att_name)
    );
    Ok(reply::with_header(
        resp,
        LOCATION,
        &crate::node::absolute_uri(state, req, &path),
    ))
}

/// Streams a request body into loose blobs of the document's shard.
async fn upload(
    state: &State,
    req: &mut Req,
    db: &Arc<Database>,
    id: &str,
    content_type: &str,
) -> HttpResult<AttSource> {
    let Some(mut body) = req.body.take() else {
        return Err(HttpError::bad_request("Missing request body"));
    };
    let started = std::time::Instant::now();
    let mut up = match req
        .header("content-encoding")
        .map(|e| e.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("identity") => Uploader::new(
            db,
            id,
            content_type,
            &state.node.limits.atts,
            state.max_request as u64,
        ),
        // Kept gzip-encoded, as CouchDB keeps it; decoded only to learn its identity bytes.
        Some("gzip") => Uploader::gzip_stream(db, id, state.max_request as u64),
        Some(_) => {
            return Err(HttpError::new(
                415,
                "bad_content_type",
                "Only gzip and identity content-encodings are supported",
            ))
        }
    };
    let mut received = 0u64;
    loop {
        let frame = match body.frame().await {
            None => break,
            Some(Ok(f)) => f,
            Some(Err(_)) => {
                return Err(HttpError::bad_request("the request body could not be read"))
            }
        };
        if let Ok(data) = frame.into_data() {
            received += data.len() as u64;
            up.push(&data).await?;
        }
    }
    req.body_time += started.elapsed();
    // Bytes that came with the body beyond its declared length (a client that counted
    // characters, not bytes): CouchDB refuses the attachment rather than store it cut short.
    if req.header(hyper::header::CONTENT_LENGTH).is_some() && body.overran(received) {
        return Err(HttpError {
            close: true,
            ..HttpError::bad_request("attachment longer than expected")
        });
    }
    Ok(up.finish().await?)
}

/// Saves an edit of a document's attachments, durably, as the caller.
async fn save(state: &State, req: &Req, db: &Arc<Database>, doc: NewDoc) -> HttpResult<Rev> {
    let (mode, durability) = (EditMode::Interactive, Durability::Durable);
    Ok((state.node)
        .update_doc(req.user.as_ref(), db, doc, mode, durability)
        .await?)
}

async fn delete(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    id: &str,
    att_name: &str,
) -> HttpResult<Response> {
    settee_db::check_att_name(att_name)?;
    let db = open(state, name)?;
    let snap = db.snapshot();
    // As CouchDB: without a revision, the document and the attachment must be there before
    // the missing revision is a conflict.
    let Some(rev) = rev_param(req)? else {
        snap.attachment(id, None, att_name)?;
        return Err(conflict());
    };
    let (parent, body, atts) = base_edit(&db, id, Some(rev.clone()), |a| a.name != att_name)?;
    snap.attachment(id, Some(&rev), att_name)?;
    let doc = NewDoc::from_stored(id, parent, body, atts)?;
    let rev = save(state, req, &db, doc).await?;
    Ok(reply::json(
        200,
        &json!({"ok": true, "id": id, "rev": rev.to_string()}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_like_couchdb() {
        let one = |h: &str| parse_ranges(h, 100).unwrap();
        assert_eq!(one("bytes=0-9"), Some(vec![(0, 9)]));
        assert_eq!(one("bytes=90-"), Some(vec![(90, 99)]));
        assert_eq!(one("bytes=-10"), Some(vec![(90, 99)]));
        assert_eq!(one("bytes=50-500"), Some(vec![(50, 99)]));
        assert_eq!(one("bytes=0-1, 5-6"), Some(vec![(0, 1), (5, 6)]));
        // Served whole: other units, headers that do not parse, `0-` first, ten ranges.
        for whole in [
            "items=0-1",
            "bytes=x-1",
            "bytes=1",
            "bytes=0-",
            "bytes=0-,5-6",
            "bytes=5-6,0-",
            "bytes=-",
            &format!("bytes={}", ["1-2"; 10].join(",")),
        ] {
            assert_eq!(one(whole), None, "{whole}");
        }
        for bad in ["bytes=100-", "bytes=5-2", "bytes=1-2,9-3"] {
            assert_eq!(parse_ranges(bad, 100).unwrap_err().status, 416, "{bad}");
        }
        assert_eq!(parse_ranges("bytes=0-1", 0).unwrap_err().status, 416);
    }

    #[test]
    fn gzip_is_taken_as_mochiweb_reads_accept_encoding() {
        assert!(
            takes_gzip(Some("gzip, deflate"))
                && takes_gzip(Some("deflate, *"))
                && takes_gzip(Some("GZIP;q=0.5"))
        );
        assert!(
            !takes_gzip(None)
                && !takes_gzip(Some("gzip;q=0"))
                && !takes_gzip(Some("*;q=0"))
                && !takes_gzip(Some("identity"))
        );
        assert!(
            !takes_gzip(Some("gzip;q=0, *")),
            "gzip refused by name is refused"
        );
    }
}
