//! A store file read from end to end as the sequence of records and headers it is, without
//! following any pointer: every record's checksum and every commit's region checksum
//! verified, whatever the trees still reach. What `settee check` reports, and how a damaged
//! file is judged.
//!
//! Records follow one another from the end of a header to the zero padding before the next
//! one (see [`crate::format`]). A record whose checksum fails may have a damaged length: the
//! walk trusts it only if a record, padding or a header follows where it says the record
//! ends, and otherwise resumes at the next block boundary. The walk ends where the newest
//! commit that opening would take ends: what follows (the zeros reserved for later commits,
//! or a commit a crash cut short) is no damage.

use std::path::Path;

use crate::backend::{Backend, FileBackend};
use crate::error::{Error, Result};
use crate::format::{decode_record, Header, RecordKind, BLOCK, RECORD_HEAD};
use crate::node::Node;
use crate::overlay::LogRecord;

/// One record of a scanned file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedRecord {
    /// Its offset.
    pub offset: u64,
    /// Its whole length, head included.
    pub len: u64,
    /// Its kind, as its head says.
    pub kind: Option<RecordKind>,
    /// Whether its checksum holds and, for nodes and log records, it decodes.
    pub intact: bool,
    /// Entries reached through it: a leaf's entries, the entries below an inner node, a log
    /// record's changes, one for a blob (0 when it is damaged).
    pub entries: u64,
}

/// One header of a scanned file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedHeader {
    /// Its offset.
    pub offset: u64,
    /// Its commit number.
    pub generation: u64,
    /// Whether the bytes of the commit it closes still match its region checksum.
    pub region_intact: bool,
}

/// What a scan found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileScan {
    /// Every record, in file order.
    pub records: Vec<ScannedRecord>,
    /// Every header of the file's salt, in file order.
    pub headers: Vec<ScannedHeader>,
    /// Stretches that are neither records nor headers nor padding (a damaged record head,
    /// and what follows it up to the next block boundary).
    pub unreadable: Vec<(u64, u64)>,
    /// Length of the file.
    pub len: u64,
    /// Where the newest valid commit ends: the rest of the file is not scanned.
    pub end: u64,
    /// A header after `end` whose own checksum holds but whose commit does not: a commit a
    /// crash cut short, or one damaged since (the two cannot be told apart). Opening drops
    /// it either way.
    pub dropped_commit: Option<u64>,
}

impl FileScan {
    /// Whether every record and every commit region checks out, the last commit's included.
    pub fn intact(&self) -> bool {
        self.unreadable.is_empty()
            && self.records.iter().all(|r| r.intact)
            && self.headers.iter().all(|h| h.region_intact)
            && self.dropped_commit.is_none()
    }
}

/// Scans the store file at `path`. It is only read, and not locked: a running server's
/// file can be scanned, up to what was committed when the scan read it.
pub fn scan_file(path: &Path) -> Result<FileScan> {
    scan(&FileBackend::open_unlocked(path).map_err(Error::io("open for checking"))?)
}

/// Scans a store held by any backend.
pub fn scan(backend: &dyn Backend) -> Result<FileScan> {
    let len = backend.len().map_err(Error::io("file length"))?;
    let first = read_header(backend, 0, len)?
        .ok_or_else(|| Error::corrupted(0, "no store header at the start"))?;
    let salt = first.0.salt;
    let end = crate::file::recover(backend, Path::new("the file being checked"))?.end;
    let mut out = FileScan {
        len,
        end,
        ..FileScan::default()
    };
    let mut pos = first.1;
    while pos < end {
        if pos % BLOCK == 0 {
            if let Some((header, end)) =
                read_header(backend, pos, end)?.filter(|(h, _)| h.salt == salt)
            {
                let region_intact = crate::file::region_intact(backend, &header, pos)?;
                out.headers.push(ScannedHeader {
                    offset: pos,
                    generation: header.generation,
                    region_intact,
                });
                pos = end;
                continue;
            }
        }
        pos = step(backend, pos, end, &mut out)?;
    }
    let mut block = end.div_ceil(BLOCK) * BLOCK;
    while block < len && out.dropped_commit.is_none() {
        out.dropped_commit = read_header(backend, block, len)?
            .filter(|(h, _)| h.salt == salt)
            .map(|_| block);
        block += BLOCK;
    }
    Ok(out)
}

/// Records read whole to be decoded (nodes and log records are far smaller); larger ones
/// only have their checksum computed, a piece at a time.
const DECODE_MAX: u64 = 64 << 20;

/// Reads what starts at `pos` (padding, a record, or damage) and returns where the next
/// thing starts; nothing at or past `len` is read.
fn step(backend: &dyn Backend, pos: u64, len: u64, out: &mut FileScan) -> Result<u64> {
    let next_block = ((pos / BLOCK + 1) * BLOCK).min(len);
    if pos + RECORD_HEAD as u64 > len {
        return skip(backend, pos, len, out);
    }
    let mut head = [0u8; RECORD_HEAD];
    backend
        .read_exact_at(&mut head, pos)
        .map_err(Error::io("read record"))?;
    if head.iter().all(|&b| b == 0) {
        return skip(backend, pos, next_block, out);
    }
    let Some((kind, end, intact)) = check_record(backend, pos, &head, len)? else {
        out.unreadable.push((pos, next_block));
        return Ok(next_block);
    };
    let entries = if intact {
        entries_of(backend, kind, pos, end)?
    } else {
        None
    };
    out.records.push(ScannedRecord {
        offset: pos,
        len: end - pos,
        kind: Some(kind),
        intact: entries.is_some(),
        entries: entries.unwrap_or(0),
    });
    // A damaged record's length is believed only if something whole follows it.
    if entries.is_some() || end == len || sound_at(backend, end, len)? {
        Ok(end)
    } else {
        Ok(next_block.max(pos + 1))
    }
}

/// The kind, end and whether the checksum holds of the record whose head `head` was read at
/// `pos`; `None` when the head cannot be a record's (unknown kind, runs past `len`).
fn check_record(
    backend: &dyn Backend,
    pos: u64,
    head: &[u8; RECORD_HEAD],
    len: u64,
) -> Result<Option<(RecordKind, u64, bool)>> {
    let payload_len = u64::from(u32::from_le_bytes(head[0..4].try_into().expect("4 bytes")));
    let end = pos + RECORD_HEAD as u64 + payload_len;
    let Some(kind) = record_kind(head[8]) else {
        return Ok(None);
    };
    if end > len {
        return Ok(None);
    }
    let stored = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
    Ok(Some((
        kind,
        end,
        crate::format::checksum_ok(crate::file::crc_of(backend, pos + 8, end)?, stored),
    )))
}

/// Whether a whole record, padding or a header starts at `pos`.
fn sound_at(backend: &dyn Backend, pos: u64, len: u64) -> Result<bool> {
    if pos.is_multiple_of(BLOCK) && read_header(backend, pos, len)?.is_some() {
        return Ok(true);
    }
    if pos + RECORD_HEAD as u64 > len {
        return Ok(false);
    }
    let mut head = [0u8; RECORD_HEAD];
    backend
        .read_exact_at(&mut head, pos)
        .map_err(Error::io("read record"))?;
    if head.iter().all(|&b| b == 0) {
        return Ok(true);
    }
    Ok(check_record(backend, pos, &head, len)?.is_some_and(|(_, _, intact)| intact))
}

/// The entries a record whose checksum holds reaches, or `None` if it does not decode.
fn entries_of(backend: &dyn Backend, kind: RecordKind, pos: u64, end: u64) -> Result<Option<u64>> {
    if matches!(kind, RecordKind::Blob | RecordKind::BlobLz4) || end - pos > DECODE_MAX {
        return Ok(Some(1));
    }
    let mut bytes = vec![0u8; (end - pos) as usize];
    backend
        .read_exact_at(&mut bytes, pos)
        .map_err(Error::io("read record"))?;
    Ok(decode_record(&bytes, pos)
        .ok()
        .and_then(|(kind, payload)| entries(kind, payload, pos)))
}

/// Steps over zeros from `pos` to `to`; bytes that are not zero there are damage.
fn skip(backend: &dyn Backend, pos: u64, to: u64, out: &mut FileScan) -> Result<u64> {
    let mut buf = vec![0u8; (to - pos) as usize];
    backend
        .read_exact_at(&mut buf, pos)
        .map_err(Error::io("read padding"))?;
    if let Some(i) = buf.iter().position(|&b| b != 0) {
        out.unreadable.push((pos + i as u64, to));
    }
    Ok(to)
}

fn record_kind(byte: u8) -> Option<RecordKind> {
    [
        RecordKind::Leaf,
        RecordKind::Inner,
        RecordKind::Blob,
        RecordKind::BlobLz4,
        RecordKind::Log,
    ]
    .into_iter()
    .find(|k| *k as u8 == byte)
}

/// The entries a checked record reaches, or `None` if it does not decode.
fn entries(kind: RecordKind, payload: &[u8], offset: u64) -> Option<u64> {
    match kind {
        RecordKind::Leaf | RecordKind::Inner => {
            let node = Node::decode(kind, payload, offset).ok()?;
            Some(if node.is_leaf() {
                node.len() as u64
            } else {
                (0..node.len()).map(|i| node.child_count(i)).sum()
            })
        }
        RecordKind::Log => LogRecord::decode(payload, offset)
            .ok()
            .map(|r| r.changes.len() as u64),
        RecordKind::Blob | RecordKind::BlobLz4 => Some(1),
    }
}

/// The header at `offset`, and where it ends, if a well-formed one stands there (damaged
/// ones are none, except at the start of the file, which is an error).
fn read_header(backend: &dyn Backend, offset: u64, len: u64) -> Result<Option<(Header, u64)>> {
    Ok(
        crate::file::read_header_at(backend, offset, len, Path::new("the file being checked"))?
            .map(|r| (r.header, r.end)),
    )
}
