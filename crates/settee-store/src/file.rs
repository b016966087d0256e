//! An open store file as readers see it: positional reads of records, decoded nodes through
//! the shared cache, blobs, and recovery of the newest valid header when a file is opened.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::backend::Backend;
use crate::cache::NodeCache;
use crate::error::{Error, Result};
use crate::format::{
    decode_record, parse_header_head, Header, Ptr, RecordKind, BLOCK, FLAG_COMPACTING,
    FORMAT_VERSION, HEADER_HEAD, OLDEST_VERSION,
};
use crate::node::Node;

/// Something that hands out decoded nodes by pointer: a snapshot, or a write transaction that
/// also sees its own not yet committed nodes.
pub(crate) trait NodeSource {
    /// The node stored at `ptr`.
    fn node(&self, ptr: Ptr) -> Result<Arc<Node>>;
}

impl<T: NodeSource + ?Sized> NodeSource for &T {
    fn node(&self, ptr: Ptr) -> Result<Arc<Node>> {
        (**self).node(ptr)
    }
}

impl<T: NodeSource + ?Sized> NodeSource for Box<T> {
    fn node(&self, ptr: Ptr) -> Result<Arc<Node>> {
        (**self).node(ptr)
    }
}

/// A file's bytes plus its identity in the node cache. Shared by the writer and every
/// snapshot taken from it; kept alive by old snapshots after a compaction swapped files.
pub(crate) struct StoreFile {
    pub backend: Arc<dyn Backend>,
    pub cache: NodeCache,
    pub cache_id: u64,
    /// End of the last commit: no committed pointer reaches past it.
    committed: AtomicU64,
    /// The incarnation of the writer's appends when a compaction moved the store to another
    /// file, every append committed (0 before): loose blobs of that incarnation are intact
    /// here and can be copied over.
    retired: AtomicU64,
    /// Damaged records met so far, by offset: what was wrong with each.
    damage: Mutex<BTreeMap<u64, String>>,
}

/// A damaged record of a store file: where, and what was wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damaged {
    /// File offset of the record.
    pub offset: u64,
    /// What was wrong.
    pub what: String,
}

impl StoreFile {
    pub fn new(backend: Arc<dyn Backend>, cache: NodeCache, committed: u64) -> StoreFile {
        StoreFile {
            backend,
            cache,
            cache_id: NodeCache::new_file_id(),
            committed: AtomicU64::new(committed),
            retired: AtomicU64::new(0),
            damage: Mutex::default(),
        }
    }

    /// Records that the file's commits now end at `end`.
    pub fn set_committed(&self, end: u64) {
        self.committed.store(end, Ordering::Release);
    }

    /// End of the last commit.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Records that writing moved to another file when its appends had `incarnation`, all
    /// of them committed.
    pub fn retire(&self, incarnation: u64) {
        self.retired.store(incarnation, Ordering::Release);
    }

    /// Whether bytes appended here under `incarnation` were all committed before writing
    /// moved to another file.
    pub fn retired_intact(&self, incarnation: u64) -> bool {
        self.retired.load(Ordering::Acquire) == incarnation
    }

    /// Remembers damage that `error` reports, if it does.
    pub fn note_damage(&self, error: &Error) {
        if let Error::Corrupted { offset, what } = error {
            self.damage
                .lock()
                .expect("damage lock")
                .entry(*offset)
                .or_insert_with(|| what.clone());
        }
    }

    /// The damaged records met so far, in file order.
    pub fn damage(&self) -> Vec<Damaged> {
        self.damage
            .lock()
            .expect("damage lock")
            .iter()
            .map(|(&offset, what)| Damaged {
                offset,
                what: what.clone(),
            })
            .collect()
    }

    /// Reads and checks the whole committed record at `ptr`.
    pub fn read_record(&self, ptr: Ptr) -> Result<(RecordKind, Vec<u8>)> {
        self.read_record_below(ptr, self.committed())
    }

    /// Reads and checks the whole record at `ptr`, which must end by `limit` (a damaged
    /// pointer must not make us allocate gigabytes).
    pub fn read_record_below(&self, ptr: Ptr, limit: u64) -> Result<(RecordKind, Vec<u8>)> {
        if ptr
            .offset
            .checked_add(u64::from(ptr.len))
            .is_none_or(|end| end > limit)
        {
            let e = Error::corrupted(ptr.offset, "pointer past the end of the committed file");
            self.note_damage(&e);
            return Err(e);
        }
        let mut buf = vec![0u8; ptr.len as usize];
        self.backend
            .read_exact_at(&mut buf, ptr.offset)
            .map_err(Error::io("read record"))?;
        let (kind, payload) =
            decode_record(&buf, ptr.offset).inspect_err(|e| self.note_damage(e))?;
        let payload_start = buf.len() - payload.len();
        buf.drain(..payload_start);
        Ok((kind, buf))
    }

    /// Decodes the node at `ptr` from disk and caches it.
    pub fn load_node(&self, ptr: Ptr) -> Result<Arc<Node>> {
        let (kind, payload) = self.read_record(ptr)?;
        let node = Arc::new(
            Node::decode(kind, &payload, ptr.offset).inspect_err(|e| self.note_damage(e))?,
        );
        self.cache.insert(self.cache_id, ptr.offset, node.clone());
        Ok(node)
    }
}

impl NodeSource for StoreFile {
    fn node(&self, ptr: Ptr) -> Result<Arc<Node>> {
        match self.cache.get(self.cache_id, ptr.offset) {
            Some(node) => Ok(node),
            None => self.load_node(ptr),
        }
    }
}

/// Where an opaque blob is stored. Callers keep these inside their values and read the blob
/// back through a snapshot; [`BlobRef::encode`] gives a fixed 20-byte form for that.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlobRef {
    /// File offset of the blob's record.
    pub offset: u64,
    /// Length of the stored record (compressed size plus record head).
    pub stored_len: u32,
    /// Length of the blob's bytes as written by the caller.
    pub len: u64,
}

impl BlobRef {
    /// Size of the encoded form.
    pub const ENCODED_LEN: usize = 20;

    /// A fixed-size little-endian encoding.
    pub fn encode(&self) -> [u8; BlobRef::ENCODED_LEN] {
        let mut out = [0u8; BlobRef::ENCODED_LEN];
        out[0..8].copy_from_slice(&self.offset.to_le_bytes());
        out[8..12].copy_from_slice(&self.stored_len.to_le_bytes());
        out[12..20].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Decodes [`BlobRef::encode`]'s output; `None` if the length is wrong.
    pub fn decode(bytes: &[u8]) -> Option<BlobRef> {
        if bytes.len() != BlobRef::ENCODED_LEN {
            return None;
        }
        Some(BlobRef {
            offset: u64::from_le_bytes(bytes[0..8].try_into().ok()?),
            stored_len: u32::from_le_bytes(bytes[8..12].try_into().ok()?),
            len: u64::from_le_bytes(bytes[12..20].try_into().ok()?),
        })
    }

    pub(crate) fn ptr(&self) -> Ptr {
        Ptr {
            offset: self.offset,
            len: self.stored_len,
        }
    }
}

/// Turns a blob record's payload back into the caller's bytes.
pub(crate) fn blob_bytes(kind: RecordKind, payload: Vec<u8>, blob: &BlobRef) -> Result<Vec<u8>> {
    let bytes = match kind {
        RecordKind::Blob => payload,
        RecordKind::BlobLz4 => {
            // lz4 expands at most ~255 times; a larger claim is damage, not data.
            if blob.len > (payload.len() as u64 + 16) * 255 {
                return Err(Error::corrupted(blob.offset, "compressed blob too long"));
            }
            lz4_flex::block::decompress(&payload, blob.len as usize)
                .map_err(|e| Error::corrupted(blob.offset, format!("blob decompression: {e}")))?
        }
        _ => {
            return Err(Error::corrupted(
                blob.offset,
                "record is a node, not a blob",
            ))
        }
    };
    if bytes.len() as u64 != blob.len {
        return Err(Error::corrupted(
            blob.offset,
            "blob length does not match its reference",
        ));
    }
    Ok(bytes)
}

/// A header found by recovery and where it ends (the committed length of the file).
#[derive(Debug)]
pub(crate) struct Recovered {
    pub header: Header,
    pub end: u64,
}

/// Finds the newest header that checks out: magic, checksum, the file's salt, and the
/// checksum of the region it commits. Torn or damaged bytes after it are not looked at.
pub(crate) fn recover(backend: &dyn Backend, path: &Path) -> Result<Recovered> {
    let len = backend.len().map_err(Error::io("file length"))?;
    let first = match read_header_at(backend, 0, len, path)? {
        Some(h) => h,
        None => {
            return Err(Error::NotAStore {
                path: path.to_path_buf(),
            })
        }
    };
    let salt = first.header.salt;
    let mut block = (len.saturating_sub(HEADER_HEAD as u64) / BLOCK) * BLOCK;
    while block > 0 {
        if let Some(found) = read_header_at(backend, block, len, path)? {
            if found.header.salt == salt
                && found.header.flags & FLAG_COMPACTING == 0
                && region_intact(backend, &found.header, block)?
            {
                return Ok(found);
            }
        }
        block -= BLOCK;
    }
    Ok(first)
}

/// The newest log record that the newest valid header before `offset` names: where the
/// chain of log records goes on past a damaged record at `offset` (the commit before the
/// one that wrote it pointed there). `None` when no earlier header names one. A damaged
/// header passed over on the way is reported to `damaged` (the records only it named are
/// lost with it).
pub(crate) fn log_before(
    backend: &dyn Backend,
    offset: u64,
    salt: [u8; 16],
    path: &Path,
    damaged: &dyn Fn(Error),
) -> Result<Option<Ptr>> {
    let len = backend.len().map_err(Error::io("file length"))?;
    let mut block = (offset / BLOCK) * BLOCK;
    while block > 0 {
        match read_header_at(backend, block, len, path)? {
            Some(found)
                if found.header.salt == salt && found.header.flags & FLAG_COMPACTING == 0 =>
            {
                return Ok(found.header.log.filter(|p| p.offset < offset));
            }
            Some(_) => {}
            None => {
                let mut magic = [0u8; 8];
                if backend.read_exact_at(&mut magic, block).is_ok()
                    && magic == crate::format::HEADER_MAGIC
                {
                    damaged(Error::corrupted(
                        block,
                        "a header before a damaged log record is damaged too",
                    ));
                }
            }
        }
        block -= BLOCK;
    }
    Ok(None)
}

/// Reads the header at `offset` if there is a well-formed one. `Ok(None)` means "no header
/// here"; only the header at offset 0 turns damage into an error.
pub(crate) fn read_header_at(
    backend: &dyn Backend,
    offset: u64,
    len: u64,
    path: &Path,
) -> Result<Option<Recovered>> {
    let mut head = [0u8; HEADER_HEAD];
    if offset + HEADER_HEAD as u64 > len {
        return Ok(None);
    }
    backend
        .read_exact_at(&mut head, offset)
        .map_err(Error::io("read header"))?;
    let Some((body_len, crc)) = parse_header_head(&head) else {
        return Ok(None);
    };
    let end = offset + (HEADER_HEAD + body_len) as u64;
    if end > len {
        return damaged(offset, "header runs past the end of the file");
    }
    let mut body = vec![0u8; body_len];
    backend
        .read_exact_at(&mut body, offset + HEADER_HEAD as u64)
        .map_err(Error::io("read header"))?;
    if !crate::format::checksum_ok(crc32fast::hash(&body), crc) {
        return damaged(offset, "header checksum mismatch");
    }
    let (header, version) = match Header::decode_body(&body, offset) {
        Ok(decoded) => decoded,
        Err(e) if offset == 0 => return Err(e),
        Err(_) => return Ok(None),
    };
    if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
        if offset > 0 {
            // Stored bytes may look like a header of another version; only the first counts.
            return Ok(None);
        }
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            version,
        });
    }
    let before = |p: &crate::format::Ptr| {
        p.offset
            .checked_add(u64::from(p.len))
            .is_some_and(|e| e <= offset)
    };
    let roots_point_back =
        header.roots.iter().flatten().all(|r| before(&r.ptr)) && header.log.iter().all(before);
    if header.data_start > offset || !roots_point_back {
        return damaged(offset, "header points past itself");
    }
    Ok(Some(Recovered { header, end }))
}

fn damaged<T>(offset: u64, what: &str) -> Result<Option<T>> {
    if offset == 0 {
        Err(Error::corrupted(0, what))
    } else {
        Ok(None)
    }
}

/// Whether the bytes a header commits still have the checksum it recorded.
pub(crate) fn region_intact(
    backend: &dyn Backend,
    header: &Header,
    header_offset: u64,
) -> Result<bool> {
    Ok(crate::format::checksum_ok(
        crc_of(backend, header.data_start, header_offset)?,
        header.region_crc,
    ))
}

/// CRC-32 of the bytes from `start` to `end`, read a piece at a time.
pub(crate) fn crc_of(backend: &dyn Backend, start: u64, end: u64) -> Result<u32> {
    const STEP: u64 = 1 << 20;
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; STEP.min(end.saturating_sub(start)) as usize];
    let mut pos = start;
    while pos < end {
        let n = STEP.min(end - pos) as usize;
        backend
            .read_exact_at(&mut buf[..n], pos)
            .map_err(Error::io("verify commit"))?;
        crc.update(&buf[..n]);
        pos += n as u64;
    }
    Ok(crc.finalize())
}
