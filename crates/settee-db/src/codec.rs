//! Small binary encoding helpers for the values this crate stores: LEB128 varints,
//! length-prefixed bytes and revisions. Decoding never panics on damaged input.

use settee_json::{Rev, RevId};

use crate::error::{Error, Result};

/// Appends `v` as an unsigned LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends length-prefixed bytes.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

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

/// Reads values written by the `put_` functions, reporting damage as [`Error::Corrupted`].
pub struct Reader<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// Reads `bytes`, naming them `what` in errors.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader { bytes, what }
    }

    fn bad(&self) -> Error {
        Error::Corrupted(self.what)
    }

    /// Whether everything has been read.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Everything not yet read.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.bytes.len() {
            return Err(self.bad());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian u64.
    pub fn u64_le(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    /// A varint.
    pub fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.bad())
    }

    /// A varint used as a length or index, bounded by what remains to read.
    pub fn len(&mut self) -> Result<usize> {
        let v = self.varint()?;
        usize::try_from(v).ok().filter(|&n| n <= self.bytes.len().max(1 << 20)).ok_or_else(|| self.bad())
    }

    /// Length-prefixed bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    /// Length-prefixed UTF-8 text.
    pub fn str(&mut self) -> Result<&'a str> {
        let bytes = self.bytes()?;
        std::str::from_utf8(bytes).map_err(|_| self.bad())
    }

    /// A revision written by [`put_rev`].
    pub fn rev(&mut self) -> Result<Rev> {
        let pos = self.varint()?;
        let id = match self.u8()? {
            0 => RevId::Hash(self.take(16)?.try_into().expect("16 bytes")),
            1 => RevId::Text(self.str()?.into()),
            _ => return Err(self.bad()),
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
            let ok = r.varint().and_then(|_| r.bytes().map(|_| ())).and_then(|_| r.rev()).and_then(|_| r.rev());
            assert!(ok.is_err(), "cut at {cut}");
        }
    }
}
