//! Attachment uploads: an attachment's bytes written, as they arrive, into loose blobs of
//! the document's shard, with the policy CouchDB applies to them (gzip for compressible
//! types, MD5 and length of the identity bytes, a size limit), so that whichever path
//! uploads (a standalone PUT, a multipart document) stores attachments the same way and
//! holds only one chunk in memory at a time.

use std::io::Write;
use std::sync::Arc;

use md5::{Digest, Md5};
use settee_store::LooseBlob;

use crate::att::{AttPolicy, AttSource, Encoding, CHUNK};
use crate::{Database, Error, Result};

/// Writes an attachment's bytes, as they arrive, into loose blobs of the document's shard:
/// MD5 and length of the identity bytes, gzip-encoded when the type is compressible (or
/// when they arrive gzip-encoded already), and only one chunk held in memory at a time.
pub struct Uploader {
    db: Arc<Database>,
    shard: usize,
    id: String,
    limit: u64,
    form: Form,
    encoded_length: u64,
    pending: Vec<u8>,
    blobs: Vec<LooseBlob>,
}

/// How the arriving bytes relate to the stored ones.
enum Form {
    /// Stored as they come.
    Identity(Tally),
    /// Compressed on the way in.
    Compress(Tally, flate2::write::GzEncoder<Vec<u8>>),
    /// Already gzip-encoded (a multipart part whose entry says so, or an upload sent with
    /// `Content-Encoding: gzip`): stored as they come, and decoded only to learn the identity
    /// bytes' MD5 and length, which must be the tally's cap when `declared`.
    Encoded {
        gz: flate2::write::GzDecoder<Tally>,
        declared: bool,
    },
}

/// MD5 and length of the identity bytes, refusing more than `cap` of them.
struct Tally {
    md5: Md5,
    length: u64,
    cap: u64,
}

impl Tally {
    fn new(cap: u64) -> Tally {
        Tally {
            md5: Md5::new(),
            length: 0,
            cap,
        }
    }
}

impl Write for Tally {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.length += data.len() as u64;
        if self.length > self.cap {
            return Err(std::io::Error::other("longer than allowed"));
        }
        self.md5.update(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn not_gzip() -> Error {
    Error::BadRequest(
        "An attachment said to be gzip-encoded is not valid gzip (of its `length`, when given)"
            .into(),
    )
}

impl Uploader {
    /// An upload of an attachment of type `content_type` to document `id`, stored as
    /// `policy` says, of no more than `limit` bytes.
    pub fn new(
        db: &Arc<Database>,
        id: &str,
        content_type: &str,
        policy: &AttPolicy,
        limit: u64,
    ) -> Uploader {
        let tally = Tally::new(u64::MAX);
        let level = flate2::Compression::new(policy.compression_level.min(9));
        let form = match policy.compresses(content_type) {
            true => Form::Compress(tally, flate2::write::GzEncoder::new(Vec::new(), level)),
            false => Form::Identity(tally),
        };
        Uploader::with_form(db, id, form, limit)
    }

    /// An upload of bytes that arrive gzip-encoded, kept so, whose identity bytes are said
    /// to be `length` long: decoding stops past that, so a small upload cannot make the
    /// server decode far more than it claims.
    pub fn gzipped(db: &Arc<Database>, id: &str, length: u64, limit: u64) -> Uploader {
        let form = Form::Encoded {
            gz: flate2::write::GzDecoder::new(Tally::new(length)),
            declared: true,
        };
        Uploader::with_form(db, id, form, limit)
    }

    /// An upload of bytes that arrive gzip-encoded, kept so, of identity bytes no longer
    /// than `limit`.
    pub fn gzip_stream(db: &Arc<Database>, id: &str, limit: u64) -> Uploader {
        let form = Form::Encoded {
            gz: flate2::write::GzDecoder::new(Tally::new(limit)),
            declared: false,
        };
        Uploader::with_form(db, id, form, limit)
    }

    fn with_form(db: &Arc<Database>, id: &str, form: Form, limit: u64) -> Uploader {
        Uploader {
            db: db.clone(),
            shard: db.shard_for(id),
            id: id.to_string(),
            limit,
            form,
            encoded_length: 0,
            pending: Vec::with_capacity(CHUNK),
            blobs: Vec::new(),
        }
    }

    /// Adds the next bytes.
    pub async fn push(&mut self, data: &[u8]) -> Result<()> {
        let length = match &mut self.form {
            Form::Identity(tally) => {
                tally.write_all(data).expect("a tally cannot fail");
                self.pending.extend_from_slice(data);
                tally.length
            }
            Form::Compress(tally, gz) => {
                tally.write_all(data).expect("a tally cannot fail");
                gz.write_all(data).expect("writing to a Vec cannot fail");
                self.pending.append(gz.get_mut());
                tally.length
            }
            Form::Encoded { gz, declared } => {
                let too_long = |gz: &flate2::write::GzDecoder<Tally>| {
                    !*declared && gz.get_ref().length > gz.get_ref().cap
                };
                gz.write_all(data).map_err(|_| {
                    if too_long(gz) {
                        Error::AttachmentTooLarge(self.id.clone())
                    } else {
                        not_gzip()
                    }
                })?;
                self.pending.extend_from_slice(data);
                gz.get_ref().length
            }
        };
        if length > self.limit || self.pending.len() as u64 + self.encoded_length > self.limit {
            return Err(Error::AttachmentTooLarge(self.id.clone()));
        }
        while self.pending.len() >= CHUNK {
            let rest = self.pending.split_off(CHUNK);
            let chunk = std::mem::replace(&mut self.pending, rest);
            self.encoded_length += chunk.len() as u64;
            self.blobs.push(append(&self.db, self.shard, chunk).await?);
        }
        Ok(())
    }

    /// Ends the upload; the blobs become the attachment when the edit that adopts them commits.
    pub async fn finish(mut self) -> Result<AttSource> {
        let (tally, encoding) = match self.form {
            Form::Identity(tally) => (tally, Encoding::Identity),
            Form::Compress(tally, gz) => {
                self.pending
                    .extend_from_slice(&gz.finish().expect("writing to a Vec cannot fail"));
                (tally, Encoding::Gzip)
            }
            Form::Encoded { gz, declared } => {
                let tally = gz.finish().map_err(|_| not_gzip())?;
                if declared && tally.length != tally.cap {
                    return Err(not_gzip());
                }
                (tally, Encoding::Gzip)
            }
        };
        if !self.pending.is_empty() || self.blobs.is_empty() {
            self.encoded_length += self.pending.len() as u64;
            let last = std::mem::take(&mut self.pending);
            self.blobs.push(append(&self.db, self.shard, last).await?);
        }
        Ok(AttSource::Loose {
            blobs: self.blobs,
            encoding,
            length: tally.length,
            encoded_length: self.encoded_length,
            md5: tally.md5.finalize().into(),
        })
    }
}

/// Appends one chunk to the shard's file, off the event loop.
async fn append(db: &Arc<Database>, shard: usize, chunk: Vec<u8>) -> Result<LooseBlob> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || db.append_blob(shard, chunk))
        .await
        .map_err(|_| Error::Io {
            op: "append an attachment",
            source: std::io::Error::other("the write did not finish"),
        })?
}
