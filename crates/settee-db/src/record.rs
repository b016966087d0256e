//! What a shard stores per document, and the reducer that counts documents.
//!
//! `by_id` value (a [`DocRecord`]):
//!
//! ```text
//! 0  u8   version (4; version 3 lacks the blob bytes, version 2 the winner's offset too)
//! 1  u8   flags: bit 0 = the document is deleted (its winner is a tombstone)
//! 2  u64  LE shard sequence of the document's latest change
//! 10 u32  LE size of the winner's body (CouchDB's "external" size)
//! 14 u32  LE offset in this value of the winner's node, so that reading the current
//!         revision costs the same however long the document's history
//! 18 u64  LE bytes of the blobs the leaf revisions use (bodies and attachment chunks, each
//!         once), which database sizes count as live
//! 26 rev  the winning revision (varint depth, tag, id)
//!    varint node count, then per node, parents first:
//!         rev; varint parent index + 1 (0 = root); u8 flags (1 deleted, 2 stored, 4 blob);
//!         if stored: varint sequence; inline body (varint length, bytes)
//!                    or blob (20-byte blob reference, varint length);
//!                    varint attachment count, then each attachment (see `att.rs`)
//! ```
//!
//! `by_seq` value (a [`SeqEntry`]): varint id length, id, then the leaves, winner first,
//! each as u8 deleted and rev. It holds what a `_changes` row shows, so a feed without
//! `include_docs` never reads `by_id`.

use settee_json::{Rev, RevId};
use settee_store::{BlobRef, Reducer};

use crate::att::AttInfo;
use crate::codec::{put_bytes, put_rev, put_varint, Reader};
use crate::error::{Error, Result};
use crate::revtree::{RevNode, RevTree};

/// Where a revision's body is kept.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// In the record itself (small bodies).
    Inline(Vec<u8>),
    /// In a blob of the shard file, with the body's length.
    Blob(BlobRef, u64),
}

impl Body {
    /// The body's length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Body::Inline(b) => b.len() as u64,
            Body::Blob(_, n) => *n,
        }
    }

    /// Whether the body is empty (never, for a stored JSON object).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What is stored for one revision.
#[derive(Clone, Debug, PartialEq)]
pub struct RevInfo {
    /// Its body.
    pub body: Body,
    /// The shard sequence at which it was written.
    pub seq: u64,
    /// Its attachments, in document order.
    pub atts: Vec<AttInfo>,
}

/// A document's stored state: its revision tree and latest sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct DocRecord {
    /// Every known revision.
    pub tree: RevTree<RevInfo>,
    /// The shard sequence of the latest change.
    pub seq: u64,
}

const VERSION: u8 = 4;
/// The version before the blob bytes were recorded; still read.
const VERSION_3: u8 = 3;
/// The version before the winner's offset was recorded; still read.
const VERSION_2: u8 = 2;
/// Where the blob bytes are, from version 4.
const BLOB_BYTES_AT: usize = 18;
const DELETED: u8 = 1;
const STORED: u8 = 2;
const BLOB: u8 = 4;

/// The fixed header of a record: version, flags, sequence, size, and (from version 3) the
/// winner's offset. Damage is reported, never a panic.
struct Header {
    deleted: bool,
    seq: u64,
    winner_offset: Option<usize>,
}

fn header(r: &mut Reader<'_>) -> Result<Header> {
    let version = r.u8()?;
    if !matches!(version, VERSION | VERSION_3 | VERSION_2) {
        return Err(Error::Corrupted("document record version"));
    }
    let deleted = r.u8()? & DELETED != 0;
    let seq = r.u64_le()?;
    r.take(4)?;
    let winner_offset = if version == VERSION_2 {
        None
    } else {
        Some(u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes")) as usize)
    };
    if version == VERSION {
        r.take(8)?;
    }
    Ok(Header {
        deleted,
        seq,
        winner_offset,
    })
}

impl DocRecord {
    /// Encodes for the `by_id` tree.
    pub fn encode(&self) -> Vec<u8> {
        let winner = self
            .tree
            .winner()
            .expect("a stored document has a revision");
        let w = &self.tree.nodes[winner];
        let size = w
            .info
            .as_ref()
            .map_or(0, |i| i.body.len())
            .min(u64::from(u32::MAX)) as u32;
        let mut out = Vec::with_capacity(64 + size as usize);
        out.push(VERSION);
        out.push(if w.deleted { DELETED } else { 0 });
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.leaf_blob_bytes().to_le_bytes());
        put_rev(&mut out, &w.rev);
        put_varint(&mut out, self.tree.nodes.len() as u64);
        for (i, n) in self.tree.nodes.iter().enumerate() {
            if i == winner {
                let offset =
                    u32::try_from(out.len()).expect("a document record is far below 4 GiB");
                out[14..18].copy_from_slice(&offset.to_le_bytes());
            }
            encode_node(&mut out, n);
        }
        out
    }

    /// Bytes of the blobs the leaf revisions use, bodies and attachment chunks, each counted
    /// once however many leaves share it: what a compaction keeps of this document's blobs.
    pub fn leaf_blob_bytes(&self) -> u64 {
        let mut seen: Vec<u64> = Vec::new();
        let mut total = 0u64;
        for i in self.tree.leaves() {
            let Some(info) = &self.tree.nodes[i].info else {
                continue;
            };
            let body = match &info.body {
                Body::Blob(blob, _) => Some(blob),
                Body::Inline(_) => None,
            };
            for blob in body
                .into_iter()
                .chain(info.atts.iter().flat_map(|a| &a.chunks))
            {
                if !seen.contains(&blob.offset) {
                    seen.push(blob.offset);
                    total = total.saturating_add(u64::from(blob.stored_len));
                }
            }
        }
        total
    }

    /// Decodes only the winning revision of a `by_id` value: a record whose tree is that
    /// one node. For reads that show nothing of the history (a plain `GET`), at a cost that
    /// does not grow with it.
    pub fn decode_winner(bytes: &[u8]) -> Result<DocRecord> {
        let mut r = Reader::new(bytes, "document record");
        let h = header(&mut r)?;
        let Some(offset) = h.winner_offset else {
            let mut full = DocRecord::decode(bytes)?;
            let w = full
                .tree
                .winner()
                .ok_or(Error::Corrupted("document record without revisions"))?;
            let mut node = full.tree.nodes.swap_remove(w);
            node.parent = None;
            return Ok(DocRecord {
                tree: RevTree { nodes: vec![node] },
                seq: full.seq,
            });
        };
        let winner = r.rev()?;
        let mut at = Reader::new(
            bytes
                .get(offset..)
                .ok_or(Error::Corrupted("document record winner offset"))?,
            "document record",
        );
        let mut node = decode_node(&mut at, usize::MAX)?;
        if node.rev != winner || node.deleted != h.deleted {
            return Err(Error::Corrupted("document record winner offset"));
        }
        node.parent = None;
        Ok(DocRecord {
            tree: RevTree { nodes: vec![node] },
            seq: h.seq,
        })
    }

    /// Decodes a `by_id` value.
    pub fn decode(bytes: &[u8]) -> Result<DocRecord> {
        let mut r = Reader::new(bytes, "document record");
        let seq = header(&mut r)?.seq;
        r.rev()?;
        let count = r.len()?;
        let mut nodes = Vec::with_capacity(count.min(4096));
        for i in 0..count {
            nodes.push(decode_node(&mut r, i)?);
        }
        if nodes.is_empty() {
            return Err(Error::Corrupted("document record without revisions"));
        }
        Ok(DocRecord {
            tree: RevTree { nodes },
            seq,
        })
    }
}

/// The winner of a `by_id` value, read without decoding the tree (for `_all_docs`).
pub fn peek_winner(bytes: &[u8]) -> Result<(Rev, bool)> {
    let mut r = Reader::new(bytes, "document record");
    let deleted = header(&mut r)?.deleted;
    Ok((r.rev()?, deleted))
}

fn encode_node(out: &mut Vec<u8>, n: &RevNode<RevInfo>) {
    put_rev(out, &n.rev);
    put_varint(out, n.parent.map_or(0, |p| p as u64 + 1));
    let mut flags = if n.deleted { DELETED } else { 0 };
    match &n.info {
        None => out.push(flags),
        Some(info) => {
            flags |= STORED;
            if matches!(info.body, Body::Blob(..)) {
                flags |= BLOB;
            }
            out.push(flags);
            put_varint(out, info.seq);
            match &info.body {
                Body::Inline(b) => put_bytes(out, b),
                Body::Blob(blob, len) => {
                    out.extend_from_slice(&blob.encode());
                    put_varint(out, *len);
                }
            }
            put_varint(out, info.atts.len() as u64);
            for att in &info.atts {
                att.encode(out);
            }
        }
    }
}

fn decode_node(r: &mut Reader<'_>, index: usize) -> Result<RevNode<RevInfo>> {
    let rev = r.rev()?;
    let parent = match r.varint()? {
        0 => None,
        p if (p as usize) <= index => Some(p as usize - 1),
        _ => return Err(Error::Corrupted("revision parent after its child")),
    };
    let flags = r.u8()?;
    let info = if flags & STORED == 0 {
        None
    } else {
        let seq = r.varint()?;
        let body = if flags & BLOB == 0 {
            Body::Inline(r.bytes()?.to_vec())
        } else {
            let blob = BlobRef::decode(r.take(BlobRef::ENCODED_LEN)?)
                .ok_or(Error::Corrupted("blob reference"))?;
            Body::Blob(blob, r.varint()?)
        };
        let n = r.len()?;
        let atts = if n == 0 {
            Vec::new()
        } else {
            (0..n)
                .map(|_| AttInfo::decode(r))
                .collect::<Result<Vec<_>>>()?
        };
        Some(RevInfo { body, seq, atts })
    };
    Ok(RevNode {
        rev,
        parent,
        deleted: flags & DELETED != 0,
        info,
    })
}

/// A `by_seq` entry: the document id and its leaves, winner first.
#[derive(Clone, Debug, PartialEq)]
pub struct SeqEntry {
    /// Document id.
    pub id: String,
    /// Leaf revisions and whether each is deleted; the winner first.
    pub leaves: Vec<(Rev, bool)>,
}

impl SeqEntry {
    /// The entry describing a record's current state.
    pub fn of(id: &str, record: &DocRecord) -> SeqEntry {
        let t = &record.tree;
        SeqEntry {
            id: id.to_string(),
            leaves: t
                .leaves()
                .into_iter()
                .map(|i| (t.nodes[i].rev.clone(), t.nodes[i].deleted))
                .collect(),
        }
    }

    /// Encodes for the `by_seq` tree.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.id.len() + 24 * self.leaves.len() + 4);
        put_bytes(&mut out, self.id.as_bytes());
        put_varint(&mut out, self.leaves.len() as u64);
        for (rev, deleted) in &self.leaves {
            out.push(u8::from(*deleted));
            put_rev(&mut out, rev);
        }
        out
    }

    /// Decodes a `by_seq` value.
    pub fn decode(bytes: &[u8]) -> Result<SeqEntry> {
        let mut r = Reader::new(bytes, "sequence entry");
        let id = r.str()?.to_string();
        let n = r.len()?;
        let mut leaves = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let deleted = r.u8()? != 0;
            leaves.push((r.rev()?, deleted));
        }
        if leaves.is_empty() {
            return Err(Error::Corrupted("sequence entry without revisions"));
        }
        Ok(SeqEntry { id, leaves })
    }

    /// Whether the document is deleted.
    pub fn deleted(&self) -> bool {
        self.leaves[0].1
    }
}

/// The `by_id` and `by_seq` values of a new document's first revision, encoded before its
/// sequence is known: everything but the sequence can be worked out while the request is
/// parsed, which leaves the shard's single writer only the lookup that shows the id is new
/// and the joining of [`FreshRecord::record`]. Only for a body kept inline and no
/// attachments.
#[derive(Clone, Debug)]
pub struct FreshRecord {
    /// The revision (depth 1).
    pub rev: Rev,
    /// Whether the revision is a tombstone.
    pub deleted: bool,
    /// The `by_seq` value.
    pub seq_entry: Vec<u8>,
    /// The `by_id` value up to its one node's sequence, with the header's sequence 0.
    head: Vec<u8>,
    /// The `by_id` value after the node's sequence.
    tail: Vec<u8>,
}

/// The length of the fixed header of a current record.
const HEADER_LEN: usize = BLOB_BYTES_AT + 8;

impl FreshRecord {
    /// The first revision, `1-{rev_id}`, of document `id`, with `body` inline.
    pub fn new(id: &str, rev_id: RevId, deleted: bool, body: &[u8]) -> FreshRecord {
        // Written here as [`DocRecord::encode`] and [`SeqEntry::encode`] write a record of
        // one inline revision (a test holds them to it), without building its tree.
        let rev = Rev { pos: 1, id: rev_id };
        let flag = if deleted { DELETED } else { 0 };
        let size = body.len().min(u32::MAX as usize) as u32;
        let mut head = Vec::with_capacity(HEADER_LEN + 2 * 20 + 4);
        head.push(VERSION);
        head.push(flag);
        head.extend_from_slice(&0u64.to_le_bytes());
        head.extend_from_slice(&size.to_le_bytes());
        head.extend_from_slice(&[0; 4]);
        head.extend_from_slice(&0u64.to_le_bytes()); // no leaf blobs
        put_rev(&mut head, &rev);
        put_varint(&mut head, 1);
        let node_at = u32::try_from(head.len()).expect("a revision id is short");
        head[14..18].copy_from_slice(&node_at.to_le_bytes());
        put_rev(&mut head, &rev);
        put_varint(&mut head, 0); // no parent
        head.push(flag | STORED);
        let mut tail = Vec::with_capacity(body.len() + 12);
        put_bytes(&mut tail, body);
        put_varint(&mut tail, 0); // no attachments
        let mut seq_entry = Vec::with_capacity(id.len() + 24);
        put_bytes(&mut seq_entry, id.as_bytes());
        put_varint(&mut seq_entry, 1);
        seq_entry.push(u8::from(deleted));
        put_rev(&mut seq_entry, &rev);
        FreshRecord {
            rev,
            deleted,
            seq_entry,
            head,
            tail,
        }
    }

    /// The `by_id` value when the revision is written at `seq`: the bytes
    /// [`DocRecord::encode`] gives for it.
    pub fn record(&self, seq: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head.len() + 10 + self.tail.len());
        out.extend_from_slice(&self.head);
        out[2..10].copy_from_slice(&seq.to_le_bytes());
        put_varint(&mut out, seq);
        out.extend_from_slice(&self.tail);
        out
    }
}

/// Counts live and deleted documents, their external size and the bytes of their leaves'
/// blobs in `by_id`, so database info and `_all_docs` offsets are logarithmic. Reduction:
/// four little-endian u64s (three in files written before the blob bytes were kept).
pub struct DocCounts;

/// Live documents, deleted documents and total size of live bodies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Documents whose winner is not deleted.
    pub live: u64,
    /// Deleted documents.
    pub deleted: u64,
    /// Bytes of the winners' bodies.
    pub external: u64,
    /// Bytes of the blobs the leaf revisions use (see [`DocRecord::leaf_blob_bytes`]).
    pub blobs: u64,
}

impl Counts {
    /// Reads a reduction made by [`DocCounts`] (zeros if malformed).
    pub fn decode(bytes: &[u8]) -> Counts {
        let word = |i: usize| {
            bytes
                .get(i * 8..i * 8 + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        Counts {
            live: word(0),
            deleted: word(1),
            external: word(2),
            blobs: word(3),
        }
    }

    fn encode(&self) -> Vec<u8> {
        [self.live, self.deleted, self.external, self.blobs]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect()
    }

    /// The counts of two sets of documents together.
    pub(crate) fn add(mut self, o: Counts) -> Counts {
        self.live = self.live.saturating_add(o.live);
        self.deleted = self.deleted.saturating_add(o.deleted);
        self.external = self.external.saturating_add(o.external);
        self.blobs = self.blobs.saturating_add(o.blobs);
        self
    }

    /// These counts without those of some of their documents.
    fn less(mut self, o: &Counts) -> Counts {
        self.live = self.live.saturating_sub(o.live);
        self.deleted = self.deleted.saturating_sub(o.deleted);
        self.external = self.external.saturating_sub(o.external);
        self.blobs = self.blobs.saturating_sub(o.blobs);
        self
    }
}

impl Reducer for DocCounts {
    fn reduce(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<u8>, String> {
        let total = entries.iter().fold(Counts::default(), |c, (_, v)| {
            let deleted = v.get(1).is_some_and(|f| f & DELETED != 0);
            let size = v
                .get(10..14)
                .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
            let blobs = match v.first() {
                Some(&VERSION) => v
                    .get(BLOB_BYTES_AT..BLOB_BYTES_AT + 8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes"))),
                _ => 0,
            };
            c.add(Counts {
                live: u64::from(!deleted),
                deleted: u64::from(deleted),
                external: if deleted { 0 } else { u64::from(size) },
                blobs,
            })
        });
        Ok(total.encode())
    }

    fn rereduce(&self, reductions: &[&[u8]]) -> Result<Vec<u8>, String> {
        Ok(reductions
            .iter()
            .fold(Counts::default(), |c, r| c.add(Counts::decode(r)))
            .encode())
    }

    fn subtract(&self, whole: &[u8], part: &[u8]) -> Option<Vec<u8>> {
        Some(Counts::decode(whole).less(&Counts::decode(part)).encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_json::RevId;
    use settee_store::BlobRef;

    proptest::proptest! {
        /// A record joined from its parts is byte for byte the one encoded whole, whatever
        /// the sequence (one to ten varint bytes), the revision, the body and the flag.
        #[test]
        fn a_fresh_record_is_the_encoded_one(seq in proptest::prelude::any::<u64>(), hash in proptest::prelude::any::<[u8; 16]>(), text in "[a-z0-9]{0,40}", body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..800), deleted in proptest::prelude::any::<bool>(), id in "[a-z_/]{1,30}") {
            for rev_id in [RevId::Hash(hash), RevId::Text(text.clone().into())] {
                let rev = Rev { pos: 1, id: rev_id.clone() };
                let fresh = FreshRecord::new(&id, rev_id, deleted, &body);
                let mut tree = RevTree::default();
                tree.add_child(None, rev.id.clone(), deleted, RevInfo { body: Body::Inline(body.clone()), seq, atts: vec![] });
                let whole = DocRecord { tree, seq };
                proptest::prop_assert_eq!(fresh.record(seq), whole.encode());
                proptest::prop_assert_eq!(&fresh.seq_entry, &SeqEntry::of(&id, &whole).encode());
                proptest::prop_assert_eq!((&fresh.rev, fresh.deleted), (&rev, deleted));
                proptest::prop_assert_eq!(DocRecord::decode(&fresh.record(seq)).unwrap(), whole);
            }
        }
    }

    fn sample() -> DocRecord {
        let mut tree = RevTree::default();
        let a = tree.add_child(
            None,
            RevId::Text("a".into()),
            false,
            RevInfo {
                body: Body::Inline(b"{}".to_vec()),
                seq: 1,
                atts: vec![],
            },
        );
        tree.add_child(
            Some(a),
            RevId::Hash([7; 16]),
            true,
            RevInfo {
                body: Body::Inline(b"{\"x\":1}".to_vec()),
                seq: 2,
                atts: vec![],
            },
        );
        tree.merge_path(
            &[Rev::parse("3-c").unwrap(), Rev::parse("2-b").unwrap()],
            false,
            RevInfo {
                body: Body::Inline(b"{}".to_vec()),
                seq: 3,
                atts: vec![AttInfo {
                    name: "a".into(),
                    content_type: "text/plain".into(),
                    revpos: 3,
                    md5: [1; 16],
                    length: 5,
                    encoding: crate::att::Encoding::Identity,
                    encoded_length: 5,
                    chunks: vec![],
                }],
            },
        );
        DocRecord { tree, seq: 3 }
    }

    #[test]
    fn records_round_trip_and_peek_the_winner() {
        let rec = sample();
        let bytes = rec.encode();
        assert_eq!(DocRecord::decode(&bytes).unwrap(), rec);
        assert_eq!(
            peek_winner(&bytes).unwrap(),
            (Rev::parse("3-c").unwrap(), false)
        );
        for cut in 0..bytes.len() {
            assert!(DocRecord::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn the_winner_alone_is_read_at_its_offset() {
        let rec = sample();
        let bytes = rec.encode();
        let w = rec.tree.winner().unwrap();
        let alone = DocRecord::decode_winner(&bytes).unwrap();
        assert_eq!(alone.seq, rec.seq);
        assert_eq!(alone.tree.nodes.len(), 1);
        assert_eq!(
            (
                &alone.tree.nodes[0].rev,
                &alone.tree.nodes[0].info,
                alone.tree.nodes[0].parent
            ),
            (&rec.tree.nodes[w].rev, &rec.tree.nodes[w].info, None)
        );
        for cut in 0..bytes.len() {
            assert!(
                DocRecord::decode_winner(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        // An offset that does not point at the winner is damage, reported.
        for offset in [0u32, 19, 10_000] {
            let mut bad = bytes.clone();
            bad[14..18].copy_from_slice(&offset.to_le_bytes());
            assert!(DocRecord::decode_winner(&bad).is_err(), "offset {offset}");
        }
    }

    #[test]
    fn version_2_records_without_the_offset_are_still_read() {
        let rec = sample();
        let mut old = rec.encode();
        old.drain(14..26);
        old[0] = VERSION_2;
        assert_eq!(DocRecord::decode(&old).unwrap(), rec);
        assert_eq!(
            peek_winner(&old).unwrap(),
            (Rev::parse("3-c").unwrap(), false)
        );
        assert_eq!(
            DocRecord::decode_winner(&old).unwrap().tree.nodes[0].rev,
            Rev::parse("3-c").unwrap()
        );
        let c = Counts::decode(&DocCounts.reduce(&[(b"a", &old)]).unwrap());
        assert_eq!(
            c,
            Counts {
                live: 1,
                deleted: 0,
                external: 2,
                blobs: 0
            }
        );
    }

    #[test]
    fn version_3_records_without_the_blob_bytes_are_still_read() {
        let rec = with_blobs();
        let mut old = rec.encode();
        old.drain(18..26);
        old[0] = VERSION_3;
        let offset = u32::from_le_bytes(old[14..18].try_into().unwrap()) - 8;
        old[14..18].copy_from_slice(&offset.to_le_bytes());
        assert_eq!(DocRecord::decode(&old).unwrap(), rec);
        assert_eq!(
            DocRecord::decode_winner(&old).unwrap().tree.nodes[0].rev,
            Rev::parse("3-c").unwrap()
        );
        let c = Counts::decode(&DocCounts.reduce(&[(b"a", &old)]).unwrap());
        assert_eq!(c.blobs, 0, "unknown until the record is written again");
    }

    fn blob(offset: u64, stored_len: u32) -> BlobRef {
        BlobRef {
            offset,
            stored_len,
            len: u64::from(stored_len) * 2,
        }
    }

    /// The sample with blobs: the superseded revision's body (not counted), the leaves'
    /// bodies, and an attachment both leaves share (counted once).
    fn with_blobs() -> DocRecord {
        let mut rec = sample();
        let att = |chunks: Vec<BlobRef>| AttInfo {
            name: "big".into(),
            content_type: "image/png".into(),
            revpos: 2,
            md5: [2; 16],
            length: 9,
            encoding: crate::att::Encoding::Identity,
            encoded_length: 9,
            chunks,
        };
        for (i, node) in rec.tree.nodes.iter_mut().enumerate() {
            let Some(info) = node.info.as_mut() else {
                continue;
            };
            info.body = Body::Blob(blob(1000 * (i as u64 + 1), 100 + i as u32), 5000);
            info.atts.push(att(vec![blob(50_000, 7), blob(60_000, 11)]));
        }
        rec
    }

    #[test]
    fn blob_bytes_count_what_the_leaves_use_once() {
        let rec = with_blobs();
        let leaves = rec.tree.leaves();
        assert_eq!(leaves.len(), 2);
        assert!(leaves.iter().all(|&i| rec.tree.nodes[i].info.is_some()));
        assert!(
            rec.tree
                .nodes
                .iter()
                .enumerate()
                .any(|(i, n)| n.info.is_some() && !leaves.contains(&i)),
            "a superseded revision has a body"
        );
        let bodies: u64 = leaves.iter().map(|&i| 100 + i as u64).sum();
        assert_eq!(rec.leaf_blob_bytes(), bodies + 7 + 11);
        let bytes = rec.encode();
        assert_eq!(DocRecord::decode(&bytes).unwrap(), rec);
        let r = DocCounts
            .reduce(&[(b"a", &bytes), (b"b", &sample().encode())])
            .unwrap();
        let c = Counts::decode(&DocCounts.rereduce(&[&r, &r]).unwrap());
        assert_eq!(c.blobs, 2 * (bodies + 18));
    }

    #[test]
    fn seq_entries_round_trip() {
        let e = SeqEntry::of("doc", &sample());
        assert_eq!(e.leaves.len(), 2);
        assert_eq!(SeqEntry::decode(&e.encode()).unwrap(), e);
        assert!(!e.deleted());
    }

    #[test]
    fn counts_live_and_deleted_documents() {
        let live = sample().encode();
        let mut dead = sample();
        dead.tree.nodes.truncate(2);
        let dead = dead.encode();
        let r = DocCounts
            .reduce(&[(b"a", &live), (b"b", &dead), (b"c", &live)])
            .unwrap();
        let c = Counts::decode(&DocCounts.rereduce(&[&r, &r]).unwrap());
        assert_eq!(
            c,
            Counts {
                live: 4,
                deleted: 2,
                external: 8,
                blobs: 0
            }
        );
    }
}
