//! `multipart/related` documents, as CouchDB reads and writes them: a JSON part, then one
//! part per attachment marked `"follows": true`, in the order of `_attachments`.

use serde_json::Value;
use settee_db::{AttInfo, DbSnapshot, DocOptions, DocRecord};

use crate::doc::parse_doc;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Gone, Response};

/// The `boundary` parameter of a multipart content type.
pub fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim().eq_ignore_ascii_case("boundary")).then(|| v.trim().trim_matches('"').to_string())
    })
}

fn broken() -> HttpError {
    HttpError::bad_request("Malformed multipart body")
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Reads a multipart body part by part as it arrives, never holding more than one network
/// frame and a boundary's length of a part in memory.
pub struct Reader {
    body: crate::connections::TimedBody,
    buf: Vec<u8>,
    /// `\r\n--boundary`: what ends a part (the body is read as if preceded by `\r\n`).
    delim: Vec<u8>,
    /// The current part has ended (its delimiter was consumed).
    part_done: bool,
    ended: bool,
}

impl Reader {
    /// Starts reading `body` split on `boundary`.
    pub fn new(body: crate::connections::TimedBody, boundary: &str) -> Reader {
        // Reading starts inside an empty preamble "part" that the first delimiter ends.
        Reader {
            body,
            buf: b"\r\n".to_vec(),
            delim: format!("\r\n--{boundary}").into_bytes(),
            part_done: false,
            ended: false,
        }
    }

    /// Reads one more frame; false at the end of the body.
    async fn fill(&mut self) -> HttpResult<bool> {
        use http_body_util::BodyExt;
        loop {
            match self.body.frame().await {
                None => return Ok(false),
                Some(Err(_)) => {
                    return Err(HttpError::bad_request("the request body could not be read"))
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                        return Ok(true);
                    }
                }
            }
        }
    }

    /// Moves to the next part and returns its headers (names lowercased); `None` after the
    /// closing boundary. Any unread rest of the current part is skipped.
    pub async fn next_part(&mut self) -> HttpResult<Option<Vec<(String, String)>>> {
        while !self.part_done {
            self.chunk().await?;
        }
        if self.ended {
            return Ok(None);
        }
        // After a delimiter: "--" ends the body, else the part's headers and a blank line.
        while self.buf.len() < 2 {
            if !self.fill().await? {
                return Err(broken());
            }
        }
        if self.buf.starts_with(b"--") {
            self.ended = true;
            return Ok(None);
        }
        let end = loop {
            if let Some(p) = find(&self.buf, b"\r\n\r\n", 0) {
                break p;
            }
            if self.buf.len() > 64 * 1024 || !self.fill().await? {
                return Err(broken());
            }
        };
        let head = std::str::from_utf8(&self.buf[..end]).map_err(|_| broken())?;
        let headers = head
            .split("\r\n")
            .filter(|l| !l.is_empty())
            .map(|l| {
                l.split_once(':')
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                    .ok_or_else(broken)
            })
            .collect::<HttpResult<Vec<_>>>()?;
        self.buf.drain(..end + 4);
        self.part_done = false;
        Ok(Some(headers))
    }

    /// The next bytes of the current part; `None` once it has ended.
    pub async fn chunk(&mut self) -> HttpResult<Option<Vec<u8>>> {
        if self.part_done {
            return Ok(None);
        }
        loop {
            if let Some(p) = find(&self.buf, &self.delim, 0) {
                let data: Vec<u8> = self.buf.drain(..p).collect();
                self.buf.drain(..self.delim.len());
                self.part_done = true;
                return Ok(Some(data));
            }
            let keep = self.delim.len();
            if self.buf.len() > keep + 64 * 1024 {
                let take = self.buf.len() - keep;
                return Ok(Some(self.buf.drain(..take).collect()));
            }
            if !self.fill().await? {
                return Err(broken());
            }
        }
    }

    /// The whole current part, refusing more than `limit` bytes with 413.
    pub async fn read_part(&mut self, limit: usize) -> HttpResult<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(c) = self.chunk().await? {
            out.extend_from_slice(&c);
            if out.len() > limit {
                return Err(HttpError::new(
                    413,
                    "too_large",
                    "the request entity is too large",
                ));
            }
        }
        Ok(out)
    }
}

/// What starts a part of a multipart body: its delimiter and headers, up to the blank line.
pub fn part_head(boundary: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = format!("--{boundary}\r\n").into_bytes();
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Appends one part to a multipart body being written.
pub fn write_part(out: &mut Vec<u8>, boundary: &str, headers: &[(&str, String)], body: &[u8]) {
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    out.extend_from_slice(&part_head(boundary, &headers));
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// Ends a multipart body.
pub fn write_end(out: &mut Vec<u8>, boundary: &str) {
    out.extend_from_slice(format!("--{boundary}--").as_bytes());
}

/// A revision as sent with its attachments: the JSON, each attachment whose bytes go along
/// marked `"follows": true`, then those bytes, identity-encoded (the digest of a stored
/// attachment is its identity bytes' MD5, which a receiver checks the bytes against). With
/// no bytes to send it is the JSON alone, as `application/json`.
pub struct Related {
    json: Vec<u8>,
    follows: Vec<AttInfo>,
    boundary: String,
}

impl Related {
    /// Node `i` of `record` with the attachments `opts` sends.
    pub fn new(
        snap: &DbSnapshot,
        id: &str,
        record: &DocRecord,
        i: usize,
        opts: &DocOptions,
    ) -> HttpResult<Related> {
        let info = record.tree.nodes[i]
            .info
            .as_ref()
            .ok_or_else(|| HttpError::not_found("missing"))?;
        let stubs = DocOptions {
            attachments: false,
            ..opts.clone()
        };
        let json = snap.render(id, record, i, &stubs)?;
        let follows: Vec<AttInfo> = info
            .atts
            .iter()
            .filter(|a| settee_db::sends_data(record, i, a, opts))
            .cloned()
            .collect();
        if follows.is_empty() {
            return Ok(Related {
                json,
                follows,
                boundary: String::new(),
            });
        }
        let mut doc = parse_doc(&json)?;
        for att in &follows {
            if let Some(Value::Object(entry)) = doc
                .get_mut("_attachments")
                .and_then(|a| a.get_mut(&att.name))
            {
                for key in ["stub", "encoding", "encoded_length"] {
                    entry.remove(key);
                }
                entry.insert("follows".into(), Value::Bool(true));
            }
        }
        let json = serde_json::to_vec(&doc).expect("json");
        Ok(Related {
            json,
            follows,
            boundary: crate::auth::random_hex(16),
        })
    }

    /// Its content type.
    pub fn content_type(&self) -> String {
        match self.follows.is_empty() {
            true => "application/json".into(),
            false => format!("multipart/related; boundary=\"{}\"", self.boundary),
        }
    }

    /// Writes the body to `out`, reading each attachment a chunk at a time; stops when `out`
    /// does, or when a chunk cannot be read (logged).
    pub fn write(
        &self,
        snap: &DbSnapshot,
        id: &str,
        out: &mut dyn FnMut(&[u8]) -> Result<(), Gone>,
    ) -> Result<(), Gone> {
        if self.follows.is_empty() {
            return out(&self.json);
        }
        out(&part_head(
            &self.boundary,
            &[("Content-Type", "application/json")],
        ))?;
        out(&self.json)?;
        for att in &self.follows {
            let disposition = format!(
                "attachment; filename={}",
                serde_json::to_string(&att.name).expect("json")
            );
            out(b"\r\n")?;
            out(&part_head(
                &self.boundary,
                &[
                    ("Content-Disposition", &disposition),
                    ("Content-Type", &att.content_type),
                    ("Content-Length", &att.length.to_string()),
                ],
            ))?;
            let mut reader = crate::att::identity_reader(snap.clone(), id, att);
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match std::io::Read::read(&mut reader, &mut buf) {
                    Ok(0) => break,
                    Ok(n) => out(&buf[..n])?,
                    Err(e) => {
                        tracing::error!(error = %e, "reading an attachment");
                        return Err(Gone);
                    }
                }
            }
        }
        out(format!("\r\n--{}--", self.boundary).as_bytes())
    }
}

/// [`Related`] whole in memory, with its content type (for answers that gather several).
pub fn related_doc(
    snap: &DbSnapshot,
    id: &str,
    record: &DocRecord,
    i: usize,
    opts: &DocOptions,
) -> HttpResult<(String, Vec<u8>)> {
    let related = Related::new(snap, id, record, i, opts)?;
    let mut body = Vec::new();
    related
        .write(snap, id, &mut |bytes| {
            body.extend_from_slice(bytes);
            Ok(())
        })
        .map_err(|_| HttpError::new(500, "unknown_error", "an attachment could not be read"))?;
    Ok((related.content_type(), body))
}

/// A document read with its attachments, streamed as it is read.
pub fn related_reply(
    snap: &DbSnapshot,
    id: &str,
    record: &DocRecord,
    i: usize,
    opts: &DocOptions,
) -> HttpResult<Response> {
    let related = Related::new(snap, id, record, i, opts)?;
    let (resp, mut sink) = reply::channel(200, "application/json");
    let resp = reply::with_header(resp, hyper::header::CONTENT_TYPE, &related.content_type());
    let (snap, id) = (snap.clone(), id.to_string());
    tokio::task::spawn_blocking(move || {
        if related
            .write(&snap, &id, &mut |bytes| sink.write(bytes))
            .is_ok()
        {
            let _ = sink.flush();
        }
    });
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_are_read_from_content_types() {
        assert_eq!(
            boundary("multipart/related; boundary=\"xyz\""),
            Some("xyz".into())
        );
        assert_eq!(boundary("multipart/related;boundary=q"), Some("q".into()));
        assert_eq!(boundary("multipart/related"), None);
        let mut out = Vec::new();
        write_part(
            &mut out,
            "b",
            &[("Content-Type", "text/plain".into())],
            b"hi",
        );
        write_end(&mut out, "b");
        assert_eq!(out, b"--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n--b--");
    }
}
