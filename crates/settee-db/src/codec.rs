//! Binary encoding of the values this crate stores: the storage engine's varints and
//! length-prefixed bytes (its `format` module), plus revisions. Decoding never panics on
//! damaged input; damage is reported as [`Error::Corrupted`] naming what was being read.

use settee_json::{Rev, RevId};
use settee_store::format;

use crate::error::{Error, Result};

pub use settee_store::format::{put_bytes, put_varint};

/// Appends a revision: depth, then a tag (0 hash, 1 text) and the id.
pub fn put_rev(out: &mut Vec<u8>, rev: &Rev) {
    put_varint(out, rev.pos);
    match &rev.id {
        RevId::Hash(h) => {
            out.push(0);
            out.extend_from_slice(h);
        }
        RevId::Text(t) => {
            out.push(1);
            put_bytes(out, t.as_bytes());
        }
    }
}

/// Reads values written by the `put_` functions.
pub struct Reader<'a> {
    inner: format::Reader<'a>,
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// Reads `bytes`, naming them `what` in errors.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader {
            inner: format::Reader::new(bytes, 0),
            bytes,
            what,
        }
    }

    fn bad(&self) -> impl Fn(settee_store::Error) -> Error + '_ {
        |_| Error::Corrupted(self.what)
    }

    /// Whether everything has been read.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Everything not yet read.
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.inner.pos()..];
        self.inner = format::Reader::new(&[], 0);
        self.bytes = &[];
        rest
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        self.inner.take(n).map_err(self.bad())
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8> {
        self.inner.u8().map_err(self.bad())
    }

    /// A little-endian u64.
    pub fn u64_le(&mut self) -> Result<u64> {
        self.inner.u64().map_err(self.bad())
    }

    /// A varint.
    pub fn varint(&mut self) -> Result<u64> {
        self.inner.varint().map_err(self.bad())
    }

    /// A varint used as a count, bounded by what remains to read (each item takes a byte).
    pub fn len(&mut self) -> Result<usize> {
        let v = self.varint()?;
        let left = self.bytes.len() - self.inner.pos();
        usize::try_from(v)
            .ok()
            .filter(|&n| n <= left.max(1 << 20))
            .ok_or(Error::Corrupted(self.what))
    }

    /// Length-prefixed bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        self.inner.bytes().map_err(self.bad())
    }

    /// Length-prefixed UTF-8 text.
    pub fn str(&mut self) -> Result<&'a str> {
        let bytes = self.bytes()?;
        std::str::from_utf8(bytes).map_err(|_| Error::Corrupted(self.what))
    }

    /// A revision written by [`put_rev`].
    pub fn rev(&mut self) -> Result<Rev> {
        let pos = self.varint()?;
        let id = match self.u8()? {
            0 => RevId::Hash(self.take(16)?.try_into().expect("16 bytes")),
            1 => RevId::Text(self.str()?.into()),
            _ => return Err(Error::Corrupted(self.what)),
        };
        Ok(Rev { pos, id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_truncation() {
        let mut out = Vec::new();
        put_varint(&mut out, u64::MAX);
        put_bytes(&mut out, b"hello");
        let rev = Rev::parse("12-967a00dff5e02add41819138abb3284d").unwrap();
        put_rev(&mut out, &rev);
        put_rev(&mut out, &Rev::parse("1-abc").unwrap());
        let mut r = Reader::new(&out, "test");
        assert_eq!(r.varint().unwrap(), u64::MAX);
        assert_eq!(r.bytes().unwrap(), b"hello");
        assert_eq!(r.rev().unwrap(), rev);
        assert_eq!(r.rev().unwrap().to_string(), "1-abc");
        assert!(r.is_empty());
        for cut in 0..out.len() {
            let mut r = Reader::new(&out[..cut], "test");
            let ok = r
                .varint()
                .and_then(|_| r.bytes().map(|_| ()))
                .and_then(|_| r.rev())
                .and_then(|_| r.rev());
            assert!(ok.is_err(), "cut at {cut}");
        }
    }
}
