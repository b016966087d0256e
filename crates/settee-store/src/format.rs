//! The byte layouts of a store file, written down once.
//!
//! A store file is a sequence of *records* and *headers*, appended and never rewritten.
//!
//! ```text
//! Record (tree node or blob), at any offset:
//!   0   4  u32 LE   payload length N
//!   4   4  u32 LE   CRC-32 of bytes [8, 9+N)  (kind byte and payload)
//!   8   1  u8       kind: 1 leaf node, 2 inner node, 3 blob, 4 lz4-compressed blob
//!   9   N           payload
//!
//! Header, only at offsets that are multiples of BLOCK (4096):
//!   0   8  magic    "SETTEE\x01H"
//!   8   4  u32 LE   body length B
//!  12   4  u32 LE   CRC-32 of the body
//!  16   B  body:
//!          16       salt: random bytes chosen when the file was created, the same in
//!                   every header of the file (forged headers inside stored data fail it)
//!           4 u32   format version (FORMAT_VERSION)
//!           4 u32   flags: bit 0 = written by an unfinished compaction, never opened
//!           8 u64   generation: 0 for the creating header, +1 per commit
//!           8 u64   data_start: where this commit's appended bytes begin
//!           4 u32   CRC-32 of the bytes [data_start, header offset), padding included
//!           varint  number of tree slots T, then per slot:
//!                     u8 0 (empty tree) | 1, varint node offset, varint node length,
//!                     varint entry count, varint reduction length, reduction bytes
//!           varint  metadata length, metadata bytes (the caller's, opaque)
//!           u8 0 (no log) | 1, varint offset, varint length: the newest log record
//!                   (version 2 on; version 1 headers end after the metadata)
//!
//! Log record payload (kind 5), the changes of one commit to logged trees:
//!   varint  previous log record's offset + 1 (0: first since the trees were folded),
//!           varint previous record's length
//!   varint  records in the chain, this one included
//!   then per change: varint tree, u8 0 (delete) | 1 (put), varint key length, key,
//!           and for a put varint value length, value
//! ```
//!
//! A commit appends its records, zero padding up to the next BLOCK boundary and a header, then
//! makes all of it durable with one sync. The header's region checksum covers everything the
//! commit appended, so a header whose data did not fully reach the disk is rejected on open
//! even though data and header were synced together. Opening scans block boundaries from the
//! end for the newest header that checks out; earlier commits were synced before it began.

use crate::error::{Error, Result};

/// Headers start only at multiples of this many bytes.
pub const BLOCK: u64 = 4096;
/// Bytes of a record before its payload.
pub const RECORD_HEAD: usize = 9;
/// Bytes of a header before its body.
pub const HEADER_HEAD: usize = 16;
/// The current file format version: 2 added logged trees (the header's log pointer).
pub const FORMAT_VERSION: u32 = 2;
/// The oldest file format version this build still opens.
pub const OLDEST_VERSION: u32 = 1;
/// First bytes of every header.
pub const HEADER_MAGIC: [u8; 8] = *b"SETTEE\x01H";
/// Header flag: written part-way through a compaction; not a point to open at.
pub const FLAG_COMPACTING: u32 = 1;

/// The kind byte of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// A B+tree leaf node.
    Leaf = 1,
    /// A B+tree inner node.
    Inner = 2,
    /// An uncompressed blob.
    Blob = 3,
    /// An lz4-compressed blob.
    BlobLz4 = 4,
    /// Changes to logged trees not yet folded into their nodes.
    Log = 5,
}

impl RecordKind {
    fn from_byte(b: u8) -> Option<RecordKind> {
        Some(match b {
            1 => RecordKind::Leaf,
            2 => RecordKind::Inner,
            3 => RecordKind::Blob,
            4 => RecordKind::BlobLz4,
            5 => RecordKind::Log,
            _ => return None,
        })
    }
}

/// Where a record lives: its offset and its total length (head included), so that it can be
/// read with one positional read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ptr {
    /// File offset of the record's first byte.
    pub offset: u64,
    /// Length of the whole record.
    pub len: u32,
}

/// Whether a stored checksum matches the computed one. Fuzzing builds accept any, so that
/// the fuzzer reaches the decoders behind the checksums.
pub fn checksum_ok(computed: u32, stored: u32) -> bool {
    cfg!(fuzzing) || computed == stored
}

/// Appends a record for `payload` to `out`.
pub fn encode_record(out: &mut Vec<u8>, kind: RecordKind, payload: &[u8]) {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[kind as u8]);
    crc.update(payload);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(payload);
}

/// Checks a whole record read from `offset` and returns its kind and payload.
pub fn decode_record(bytes: &[u8], offset: u64) -> Result<(RecordKind, &[u8])> {
    if bytes.len() < RECORD_HEAD {
        return Err(Error::corrupted(offset, "record shorter than its head"));
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if len != bytes.len() - RECORD_HEAD {
        return Err(Error::corrupted(
            offset,
            "record length does not match its pointer",
        ));
    }
    if !checksum_ok(crc32fast::hash(&bytes[8..]), crc) {
        return Err(Error::corrupted(offset, "record checksum mismatch"));
    }
    let kind = RecordKind::from_byte(bytes[8])
        .ok_or_else(|| Error::corrupted(offset, "unknown record kind"))?;
    Ok((kind, &bytes[RECORD_HEAD..]))
}

/// The root of one tree as a header records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// The root node.
    pub ptr: Ptr,
    /// Number of entries in the tree.
    pub count: u64,
    /// The reducer's value over the whole tree.
    pub reduction: Vec<u8>,
}

/// A decoded header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The file's salt.
    pub salt: [u8; 16],
    /// Flags (`FLAG_*`).
    pub flags: u32,
    /// Commit counter.
    pub generation: u64,
    /// First byte of this commit's appended region.
    pub data_start: u64,
    /// CRC-32 of the region [data_start, header offset).
    pub region_crc: u32,
    /// One slot per tree of the store's schema.
    pub roots: Vec<Option<Root>>,
    /// The caller's metadata.
    pub meta: Vec<u8>,
    /// The newest log record of the logged trees' changes not yet in their nodes.
    pub log: Option<Ptr>,
}

impl Header {
    /// Serialises the header, head included.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(64 + self.meta.len());
        body.extend_from_slice(&self.salt);
        body.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        body.extend_from_slice(&self.flags.to_le_bytes());
        body.extend_from_slice(&self.generation.to_le_bytes());
        body.extend_from_slice(&self.data_start.to_le_bytes());
        body.extend_from_slice(&self.region_crc.to_le_bytes());
        put_varint(&mut body, self.roots.len() as u64);
        for root in &self.roots {
            match root {
                None => body.push(0),
                Some(r) => {
                    body.push(1);
                    put_varint(&mut body, r.ptr.offset);
                    put_varint(&mut body, u64::from(r.ptr.len));
                    put_varint(&mut body, r.count);
                    put_bytes(&mut body, &r.reduction);
                }
            }
        }
        put_bytes(&mut body, &self.meta);
        match self.log {
            None => body.push(0),
            Some(p) => {
                body.push(1);
                put_varint(&mut body, p.offset);
                put_varint(&mut body, u64::from(p.len));
            }
        }
        let mut out = Vec::with_capacity(HEADER_HEAD + body.len());
        out.extend_from_slice(&HEADER_MAGIC);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a header body whose checksum has been verified.
    pub fn decode_body(body: &[u8], offset: u64) -> Result<(Header, u32)> {
        let bad = |what: &str| Error::corrupted(offset, format!("header: {what}"));
        let mut r = Reader::new(body, offset);
        let salt: [u8; 16] = r.take(16)?.try_into().expect("16 bytes");
        let version = r.u32()?;
        let flags = r.u32()?;
        let generation = r.u64()?;
        let data_start = r.u64()?;
        let region_crc = r.u32()?;
        let slots = r.varint()?;
        if slots > 1 << 16 {
            return Err(bad("too many tree slots"));
        }
        let mut roots = Vec::with_capacity(slots as usize);
        for _ in 0..slots {
            roots.push(match r.u8()? {
                0 => None,
                1 => {
                    let offset = r.varint()?;
                    let len = u32::try_from(r.varint()?).map_err(|_| bad("node length"))?;
                    let count = r.varint()?;
                    let reduction = r.bytes()?.to_vec();
                    Some(Root {
                        ptr: Ptr { offset, len },
                        count,
                        reduction,
                    })
                }
                _ => return Err(bad("bad tree slot tag")),
            });
        }
        let meta = r.bytes()?.to_vec();
        let log = match (version, if version >= 2 { r.u8()? } else { 0 }) {
            (_, 0) => None,
            (_, 1) => {
                let offset = r.varint()?;
                let len = u32::try_from(r.varint()?).map_err(|_| bad("log record length"))?;
                Some(Ptr { offset, len })
            }
            _ => return Err(bad("bad log tag")),
        };
        if !r.is_empty() {
            return Err(bad("trailing bytes"));
        }
        let header = Header {
            salt,
            flags,
            generation,
            data_start,
            region_crc,
            roots,
            meta,
            log,
        };
        Ok((header, version))
    }
}

/// Parses the 16-byte head of a header: the body length and checksum, if the magic matches.
pub fn parse_header_head(head: &[u8]) -> Option<(usize, u32)> {
    if head.len() < HEADER_HEAD || head[0..8] != HEADER_MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes"));
    Some((len, crc))
}

/// Appends `v` as an LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a varint length followed by the bytes.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Bytes a varint of `v` takes.
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// A bounds-checked decoder over untrusted bytes: every failure is a `Corrupted` error.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    offset: u64,
}

impl<'a> Reader<'a> {
    /// Reads `buf`, reporting errors at file offset `offset`.
    pub fn new(buf: &'a [u8], offset: u64) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            offset,
        }
    }

    /// Position within the buffer.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// True once every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn truncated(&self) -> Error {
        Error::corrupted(
            self.offset,
            format!("truncated at byte {} of {}", self.pos, self.buf.len()),
        )
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| self.truncated())?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// An LEB128 varint of at most 10 bytes.
    pub fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::corrupted(self.offset, "varint too long"))
    }

    /// A varint length followed by that many bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = usize::try_from(self.varint()?).map_err(|_| self.truncated())?;
        self.take(n)
    }

    /// A varint length followed by that many bytes, as a (start, len) span of the buffer.
    pub fn span(&mut self) -> Result<(u32, u32)> {
        let b = self.bytes()?;
        Ok(((self.pos - b.len()) as u32, b.len() as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_measure() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
            assert_eq!(Reader::new(&b, 0).varint().unwrap(), v);
        }
    }

    #[test]
    fn record_round_trip_and_checksum() {
        let mut b = Vec::new();
        encode_record(&mut b, RecordKind::Blob, b"hello");
        let (k, p) = decode_record(&b, 0).unwrap();
        assert_eq!((k, p), (RecordKind::Blob, &b"hello"[..]));
        b[10] ^= 1;
        assert!(matches!(
            decode_record(&b, 7),
            Err(Error::Corrupted { offset: 7, .. })
        ));
    }

    #[test]
    fn header_round_trip() {
        let h = Header {
            salt: [7; 16],
            flags: 0,
            generation: 42,
            data_start: 8192,
            region_crc: 99,
            roots: vec![
                None,
                Some(Root {
                    ptr: Ptr {
                        offset: 4096,
                        len: 77,
                    },
                    count: 3,
                    reduction: vec![1, 2],
                }),
            ],
            meta: b"meta".to_vec(),
            log: Some(Ptr {
                offset: 5000,
                len: 40,
            }),
        };
        let bytes = h.encode();
        let (len, crc) = parse_header_head(&bytes).unwrap();
        let body = &bytes[HEADER_HEAD..HEADER_HEAD + len];
        assert_eq!(crc32fast::hash(body), crc);
        assert_eq!(Header::decode_body(body, 0).unwrap(), (h, FORMAT_VERSION));
    }
}
