//! `multipart/related` documents, as CouchDB reads and writes them: a JSON part, then one
//! part per attachment marked `"follows": true`, in the order of `_attachments`.

use serde_json::Value;
use settee_db::{DbSnapshot, DocOptions, DocRecord};

use crate::doc::parse_doc;
use crate::error::{HttpError, HttpResult};

/// One part: its headers (names lowercased) and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The part's bytes.
    pub body: Vec<u8>,
}

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
    hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

/// Splits a multipart body into its parts.
pub fn parse(body: &[u8], boundary: &str) -> HttpResult<Vec<Part>> {
    let delim = format!("--{boundary}").into_bytes();
    let mut at = find(body, &delim, 0).ok_or_else(broken)? + delim.len();
    let mut parts = Vec::new();
    loop {
        if body.get(at..at + 2) == Some(b"--") {
            return Ok(parts);
        }
        let start = find(body, b"\r\n", at).ok_or_else(broken)? + 2;
        let head_end = find(body, b"\r\n\r\n", start - 2).ok_or_else(broken)?;
        let headers = std::str::from_utf8(&body[start.min(head_end)..head_end])
            .map_err(|_| broken())?
            .split("\r\n")
            .filter(|l| !l.is_empty())
            .map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())).ok_or_else(broken))
            .collect::<HttpResult<Vec<_>>>()?;
        let data_start = head_end + 4;
        let mut end_delim = b"\r\n".to_vec();
        end_delim.extend_from_slice(&delim);
        let data_end = find(body, &end_delim, data_start).ok_or_else(broken)?;
        parts.push(Part { headers, body: body[data_start..data_end].to_vec() });
        at = data_end + end_delim.len();
    }
}

/// Appends one part to a multipart body being written.
pub fn write_part(out: &mut Vec<u8>, boundary: &str, headers: &[(&str, String)], body: &[u8]) {
    out.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// Ends a multipart body.
pub fn write_end(out: &mut Vec<u8>, boundary: &str) {
    out.extend_from_slice(format!("--{boundary}--").as_bytes());
}

/// Node `i` of a document as `multipart/related`: the JSON with `"follows": true` for each
/// attachment whose bytes are sent, then those bytes. Returns the content type and body.
pub fn related_doc(snap: &DbSnapshot, id: &str, record: &DocRecord, i: usize, opts: &DocOptions) -> HttpResult<(String, Vec<u8>)> {
    let info = record.tree.nodes[i].info.as_ref().ok_or_else(|| HttpError::not_found("missing"))?;
    let stubs = DocOptions { attachments: false, ..opts.clone() };
    let mut doc = parse_doc(&snap.render(id, record, i, &stubs)?)?;
    let follows: Vec<&settee_db::AttInfo> = info.atts.iter().filter(|a| settee_db::sends_data(record, i, a, opts)).collect();
    for att in &follows {
        if let Some(Value::Object(entry)) = doc.get_mut("_attachments").and_then(|a| a.get_mut(&att.name)) {
            entry.remove("stub");
            entry.insert("follows".into(), Value::Bool(true));
        }
    }
    let boundary = crate::auth::random_hex(16);
    let mut out = Vec::new();
    write_part(&mut out, &boundary, &[("Content-Type", "application/json".into())], &serde_json::to_vec(&doc).expect("json"));
    for att in follows {
        let bytes = snap.attachment_bytes(id, att)?;
        let disposition = format!("attachment; filename={}", serde_json::to_string(&att.name).expect("json"));
        write_part(&mut out, &boundary, &[("Content-Disposition", disposition), ("Content-Type", att.content_type.clone()), ("Content-Length", bytes.len().to_string())], &bytes);
    }
    write_end(&mut out, &boundary);
    Ok((format!("multipart/related; boundary=\"{boundary}\""), out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_bodies_parse_back() {
        let mut out = Vec::new();
        write_part(&mut out, "abc", &[("Content-Type", "application/json".into())], b"{}");
        write_part(&mut out, "abc", &[("Content-Type", "text/plain".into())], b"line\r\n--not the end");
        write_end(&mut out, "abc");
        let parts = parse(&out, "abc").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].headers, [("content-type".to_string(), "application/json".to_string())]);
        assert_eq!(parts[1].body, b"line\r\n--not the end");
        assert_eq!(boundary("multipart/related; boundary=\"xyz\""), Some("xyz".into()));
        assert_eq!(boundary("multipart/related;boundary=q"), Some("q".into()));
    }

    #[test]
    fn broken_bodies_are_refused() {
        for bad in [&b""[..], b"--abc\r\nno-header-end", b"--abc\r\nA: b\r\n\r\nunterminated", b"--abc\r\nbad header\r\n\r\nx\r\n--abc--"] {
            assert_eq!(parse(bad, "abc").unwrap_err().status, 400, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
