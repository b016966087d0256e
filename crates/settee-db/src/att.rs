//! Attachments: what is stored per revision, what a client sends, and CouchDB's JSON for
//! them.
//!
//! An attachment's bytes live in blobs of the document's shard, in chunks of at most
//! [`CHUNK`] bytes so they can be streamed. Types listed as compressible
//! (`[attachments] compressible_types`) are stored gzip-encoded, as CouchDB stores them;
//! the digest is always the MD5 of the identity bytes.

use std::io::{Read, Write};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use md5::{Digest, Md5};
use serde_json::{json, Map, Value};
use settee_store::{BlobRef, LooseBlob};

use crate::codec::{put_bytes, put_varint, Reader};
use crate::error::{Error, Result};

/// Largest blob an attachment is split into.
pub const CHUNK: usize = 1 << 20;

/// How stored attachment bytes are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// As received.
    Identity,
    /// gzip.
    Gzip,
}

impl Encoding {
    /// CouchDB's name for it (`None` for identity).
    pub fn name(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
        }
    }
}

/// An attachment as stored with a revision.
#[derive(Clone, Debug, PartialEq)]
pub struct AttInfo {
    /// Its name.
    pub name: String,
    /// Its MIME type.
    pub content_type: String,
    /// The revision depth at which its bytes were last written.
    pub revpos: u64,
    /// MD5 of the identity bytes.
    pub md5: [u8; 16],
    /// Length of the identity bytes.
    pub length: u64,
    /// How the stored bytes are encoded.
    pub encoding: Encoding,
    /// Length of the stored bytes.
    pub encoded_length: u64,
    /// The stored bytes, in order.
    pub chunks: Vec<BlobRef>,
}

impl AttInfo {
    /// CouchDB's `digest`: `md5-` and the base64 MD5.
    pub fn digest(&self) -> String {
        format!("md5-{}", STANDARD.encode(self.md5))
    }

    /// What the attachment adds to its revision's id.
    pub fn rev_digest(&self) -> settee_json::AttDigest {
        settee_json::AttDigest {
            name: self.name.clone(),
            content_type: self.content_type.clone(),
            md5: self.md5,
        }
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_bytes(out, self.name.as_bytes());
        put_bytes(out, self.content_type.as_bytes());
        put_varint(out, self.revpos);
        out.extend_from_slice(&self.md5);
        put_varint(out, self.length);
        out.push(u8::from(self.encoding == Encoding::Gzip));
        put_varint(out, self.encoded_length);
        put_varint(out, self.chunks.len() as u64);
        for c in &self.chunks {
            out.extend_from_slice(&c.encode());
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<AttInfo> {
        let name = r.str()?.to_string();
        let content_type = r.str()?.to_string();
        let revpos = r.varint()?;
        let md5 = r.take(16)?.try_into().expect("16 bytes");
        let length = r.varint()?;
        let encoding = if r.u8()? == 1 {
            Encoding::Gzip
        } else {
            Encoding::Identity
        };
        let encoded_length = r.varint()?;
        let n = r.len()?;
        let mut chunks = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            chunks.push(
                BlobRef::decode(r.take(BlobRef::ENCODED_LEN)?)
                    .ok_or(Error::Corrupted("attachment chunk"))?,
            );
        }
        Ok(AttInfo {
            name,
            content_type,
            revpos,
            md5,
            length,
            encoding,
            encoded_length,
            chunks,
        })
    }

    /// The `_attachments` entry for this attachment: a stub, or with `data` (identity bytes,
    /// base64) when `data` is given; `encoding_info` adds `encoding`/`encoded_length`.
    pub fn to_json(&self, data: Option<&[u8]>, encoding_info: bool) -> Value {
        let mut v = json!({"content_type": self.content_type, "revpos": self.revpos, "digest": self.digest()});
        match data {
            Some(bytes) => v["data"] = json!(STANDARD.encode(bytes)),
            None => {
                v["length"] = json!(self.length);
                v["stub"] = json!(true);
            }
        }
        if encoding_info {
            if let Some(name) = self.encoding.name() {
                v["encoding"] = json!(name);
                v["encoded_length"] = json!(self.encoded_length);
            }
        }
        v
    }
}

/// Where a new revision's attachment comes from.
#[derive(Clone, Debug)]
pub enum AttSource {
    /// New bytes, already encoded as `encoding` and split into chunks.
    Data {
        /// Stored chunks.
        chunks: Vec<Vec<u8>>,
        /// Their encoding.
        encoding: Encoding,
        /// Identity length.
        length: u64,
        /// MD5 of the identity bytes.
        md5: [u8; 16],
    },
    /// New bytes streamed in ahead as loose blobs of the document's shard.
    Loose {
        /// The blobs, in order.
        blobs: Vec<LooseBlob>,
        /// Their encoding.
        encoding: Encoding,
        /// Identity length.
        length: u64,
        /// Stored length.
        encoded_length: u64,
        /// MD5 of the identity bytes.
        md5: [u8; 16],
    },
    /// Unchanged from the revision being edited (`"stub": true`).
    Stub,
}

/// An attachment of a document edit.
#[derive(Clone, Debug)]
pub struct NewAtt {
    /// Its name.
    pub name: String,
    /// Its MIME type (ignored for stubs, which keep theirs).
    pub content_type: String,
    /// Its bytes.
    pub source: AttSource,
    /// The revision position the attachment was given with (`revpos`). A replicated
    /// revision keeps it, as CouchDB keeps it; a client's edit gives attachments with new
    /// bytes the new revision's position.
    pub revpos: Option<u64>,
}

/// Which attachments are stored compressed (`[attachments]` in the config).
#[derive(Clone, Debug)]
pub struct AttPolicy {
    /// MIME types (a `*` suffix matches a prefix) stored gzip-encoded.
    pub compressible_types: Vec<String>,
    /// gzip level 0-9; 0 stores everything as identity.
    pub compression_level: u32,
}

impl Default for AttPolicy {
    fn default() -> AttPolicy {
        AttPolicy {
            compressible_types: [
                "text/*",
                "application/javascript",
                "application/json",
                "application/xml",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            compression_level: 8,
        }
    }
}

impl AttPolicy {
    /// Whether `content_type` is stored gzip-encoded.
    pub fn compresses(&self, content_type: &str) -> bool {
        let base = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        self.compression_level > 0
            && self
                .compressible_types
                .iter()
                .any(|t| match t.strip_suffix('*') {
                    Some(prefix) => base.starts_with(prefix),
                    None => base == *t,
                })
    }

    /// Encodes identity bytes for storage: MD5, length, and the chunks to write.
    pub fn prepare(&self, content_type: &str, data: &[u8]) -> AttSource {
        let md5: [u8; 16] = Md5::digest(data).into();
        let (stored, encoding) = if self.compresses(content_type) {
            let mut gz = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2),
                flate2::Compression::new(self.compression_level.min(9)),
            );
            gz.write_all(data).expect("writing to a Vec cannot fail");
            (
                gz.finish().expect("writing to a Vec cannot fail"),
                Encoding::Gzip,
            )
        } else {
            (data.to_vec(), Encoding::Identity)
        };
        let chunks = if stored.is_empty() {
            vec![Vec::new()]
        } else {
            stored.chunks(CHUNK).map(<[u8]>::to_vec).collect()
        };
        AttSource::Data {
            chunks,
            encoding,
            length: data.len() as u64,
            md5,
        }
    }
}

/// Decodes stored bytes to identity bytes.
pub fn decode_bytes(encoding: Encoding, stored: Vec<u8>) -> Result<Vec<u8>> {
    match encoding {
        Encoding::Identity => Ok(stored),
        Encoding::Gzip => {
            let mut out = Vec::with_capacity(stored.len() * 3);
            flate2::read::GzDecoder::new(&stored[..])
                .read_to_end(&mut out)
                .map_err(|_| Error::Corrupted("gzip attachment"))?;
            Ok(out)
        }
    }
}

/// Reads a document's `_attachments` member.
/// Entries marked `"follows": true` take their bytes from `parts`, in order (the attachment
/// parts of a `multipart/related` upload, already stored or prepared).
pub fn parse_attachments(
    value: Value,
    policy: &AttPolicy,
    parts: &mut std::vec::IntoIter<AttSource>,
) -> Result<Vec<NewAtt>> {
    let Value::Object(map) = value else {
        return Err(Error::DocValidation(
            "Bad special document member: _attachments".into(),
        ));
    };
    // As CouchDB: an entry that is not an object is no attachment, and is left out.
    map.into_iter()
        .filter_map(|(name, v)| match v {
            Value::Object(obj) => Some(parse_one(name, obj, policy, parts)),
            _ => None,
        })
        .collect()
}

/// Refuses attachment names CouchDB refuses (those starting with `_`).
pub fn check_att_name(name: &str) -> Result<()> {
    if name.starts_with('_') {
        return Err(Error::BadRequest(format!(
            "Attachment name '{name}' starts with prohibited character '_'"
        )));
    }
    Ok(())
}

fn parse_one(
    name: String,
    obj: Map<String, Value>,
    policy: &AttPolicy,
    parts: &mut std::vec::IntoIter<AttSource>,
) -> Result<NewAtt> {
    check_att_name(&name)?;
    let content_type = text(&obj, "content_type")
        .unwrap_or("application/octet-stream")
        .to_string();
    let revpos = obj.get("revpos").and_then(Value::as_u64);
    if obj.get("stub") == Some(&Value::Bool(true)) {
        return Ok(NewAtt {
            name,
            content_type,
            source: AttSource::Stub,
            revpos,
        });
    }
    if obj.get("follows") == Some(&Value::Bool(true)) {
        let source = parts
            .next()
            .ok_or_else(|| Error::BadRequest(format!("No multipart part for attachment {name}")))?;
        return Ok(NewAtt {
            name,
            content_type,
            source,
            revpos,
        });
    }
    let bytes = text(&obj, "data").and_then(|data| STANDARD.decode(data.as_bytes()).ok());
    let Some(bytes) = bytes else {
        return Err(Error::BadRequest(format!(
            "Invalid attachment data for {name}"
        )));
    };
    let source = policy.prepare(&content_type, &bytes);
    Ok(NewAtt {
        name,
        content_type,
        source,
        revpos,
    })
}

fn text<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressible_types_are_gzipped_and_decode_back() {
        let p = AttPolicy::default();
        assert!(p.compresses("text/plain; charset=utf-8") && p.compresses("application/json"));
        assert!(!p.compresses("image/png"));
        let text = b"hello hello hello hello hello hello".repeat(100);
        let AttSource::Data {
            chunks,
            encoding,
            length,
            md5,
        } = p.prepare("text/plain", &text)
        else {
            panic!("data")
        };
        assert_eq!(encoding, Encoding::Gzip);
        assert_eq!(length, text.len() as u64);
        assert_eq!(md5, <[u8; 16]>::from(Md5::digest(&text)));
        assert_eq!(decode_bytes(Encoding::Gzip, chunks.concat()).unwrap(), text);
        let big = vec![7u8; CHUNK * 2 + 5];
        let AttSource::Data {
            chunks, encoding, ..
        } = p.prepare("image/png", &big)
        else {
            panic!("data")
        };
        assert_eq!(
            (encoding, chunks.len(), chunks[2].len()),
            (Encoding::Identity, 3, 5)
        );
    }

    #[test]
    fn parses_inline_data_and_stubs_and_refuses_bad_ones() {
        let p = AttPolicy::default();
        let none = || Vec::<AttSource>::new().into_iter();
        let atts = parse_attachments(json!({"a.txt": {"content_type": "text/plain", "data": "aGVsbG8="}, "b": {"stub": true}}), &p, &mut none()).unwrap();
        assert_eq!(atts[0].name, "a.txt");
        assert!(matches!(atts[1].source, AttSource::Stub));
        let err = |v: Value| {
            parse_attachments(v, &p, &mut none())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(json!({"_x": {"data": ""}})),
            "Attachment name '_x' starts with prohibited character '_'"
        );
        assert_eq!(
            err(json!({"x": {"data": "!!!"}})),
            "Invalid attachment data for x"
        );
        assert!(parse_attachments(json!([1]), &p, &mut none()).is_err());
        assert_eq!(
            err(json!({"f": {"follows": true}})),
            "No multipart part for attachment f"
        );
        let mut parts = vec![p.prepare("image/png", b"part")].into_iter();
        let atts = parse_attachments(
            json!({"f": {"follows": true, "content_type": "image/png"}}),
            &p,
            &mut parts,
        )
        .unwrap();
        assert!(matches!(&atts[0].source, AttSource::Data { length: 4, .. }));
    }

    #[test]
    fn stored_info_round_trips() {
        let info = AttInfo {
            name: "n".into(),
            content_type: "t/x".into(),
            revpos: 3,
            md5: [9; 16],
            length: 10,
            encoding: Encoding::Gzip,
            encoded_length: 7,
            chunks: vec![],
        };
        let mut out = Vec::new();
        info.encode(&mut out);
        assert_eq!(AttInfo::decode(&mut Reader::new(&out, "t")).unwrap(), info);
        assert_eq!(info.to_json(None, true)["encoding"], "gzip");
        assert_eq!(info.to_json(Some(b"hi"), false)["data"], "aGk=");
    }
}
