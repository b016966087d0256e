//! One shard of a database: a store file with three trees and the update job that applies
//! document edits to them in the file's writer's place.
//!
//! Trees: `by_id` (document id -> [`DocRecord`]), `by_seq` (big-endian shard sequence ->
//! [`SeqEntry`]) and `local` (`_local/` id -> revision counter and body). The header
//! metadata holds a [`ShardMeta`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use settee_json::{new_rev_id, Rev, RevId};
use settee_store::{
    Action, BlobCopier, Durability, NoReduce, Pending, Snapshot, Store, StoreOptions, TreeSpec,
    Txn, ValueRewriter,
};

use crate::att::{AttInfo, AttSource};
use crate::codec::{put_bytes, put_varint, Reader};
use crate::doc::{NewDoc, DESIGN_PREFIX};
use crate::edit_queue::{Answering, EditQueues, Edits, EditsPending};
use crate::error::{Error, Result};
use crate::record::{Body, DocCounts, DocRecord, FreshRecord, RevInfo, SeqEntry};
use crate::revtree::{Merged, RevTree};

/// Tree slot of the document-id tree.
pub const BY_ID: usize = 0;
/// Tree slot of the sequence tree.
pub const BY_SEQ: usize = 1;
/// Tree slot of local documents.
pub const LOCAL: usize = 2;

/// Version of the shard metadata layout.
const META_VERSION: u8 = 2;

/// Bodies up to this size are kept in the document record; larger ones in blobs.
pub(crate) const INLINE_MAX: usize = 768;

/// Per-shard state kept in each commit's header.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardMeta {
    /// Sequence of the latest document change in this shard.
    pub update_seq: u64,
    /// Number of purges applied.
    pub purge_seq: u64,
    /// How many revisions each document path keeps.
    pub revs_limit: u64,
    /// The database's security object, as JSON text.
    pub security: Vec<u8>,
    /// How many purges are remembered (`_purged_infos_limit`).
    pub purged_infos_limit: u64,
    /// How many times a design document of this shard was edited or purged: what layers
    /// above derive from design documents (validation functions) stays good while it does
    /// not move, so a write need not look at them. Files from before it read as 0.
    pub design_changes: u64,
    /// Whether the database is partitioned (`PUT /{db}?partitioned=true`): set when it is
    /// created and never changed. Files from before it read as `false`.
    pub partitioned: bool,
}

impl Default for ShardMeta {
    fn default() -> ShardMeta {
        ShardMeta {
            update_seq: 0,
            purge_seq: 0,
            revs_limit: 1000,
            security: Vec::new(),
            purged_infos_limit: 1000,
            design_changes: 0,
            partitioned: false,
        }
    }
}

impl ShardMeta {
    fn encode(&self) -> Vec<u8> {
        let mut out = vec![META_VERSION];
        put_varint(&mut out, self.update_seq);
        put_varint(&mut out, self.purge_seq);
        put_varint(&mut out, self.revs_limit);
        put_bytes(&mut out, &self.security);
        put_varint(&mut out, self.purged_infos_limit);
        put_varint(&mut out, self.design_changes);
        put_varint(&mut out, u64::from(self.partitioned));
        out
    }

    /// Reads only [`ShardMeta::design_changes`] of a commit's metadata, without copying
    /// the security object: every write asks for it.
    pub fn design_changes_in(bytes: &[u8]) -> Result<u64> {
        if bytes.is_empty() {
            return Ok(0);
        }
        let mut r = Reader::new(bytes, "shard metadata");
        if r.u8()? != META_VERSION {
            return Err(Error::Corrupted("shard metadata version"));
        }
        let _ = (
            r.varint()?,
            r.varint()?,
            r.varint()?,
            r.bytes()?,
            r.varint()?,
        );
        if r.is_empty() {
            Ok(0)
        } else {
            r.varint()
        }
    }

    /// Reads the metadata of a commit (defaults for a new file).
    pub fn decode(bytes: &[u8]) -> Result<ShardMeta> {
        if bytes.is_empty() {
            return Ok(ShardMeta::default());
        }
        let mut r = Reader::new(bytes, "shard metadata");
        if r.u8()? != META_VERSION {
            return Err(Error::Corrupted("shard metadata version"));
        }
        let (update_seq, purge_seq, revs_limit, security, purged_infos_limit) = (
            r.varint()?,
            r.varint()?,
            r.varint()?,
            r.bytes()?.to_vec(),
            r.varint()?,
        );
        let design_changes = if r.is_empty() { 0 } else { r.varint()? };
        let partitioned = !r.is_empty() && r.varint()? == 1;
        Ok(ShardMeta {
            update_seq,
            purge_seq,
            revs_limit,
            security,
            purged_infos_limit,
            design_changes,
            partitioned,
        })
    }
}

/// The store layout of a shard file.
pub fn tree_specs() -> Vec<TreeSpec> {
    vec![
        TreeSpec::logged(DocCounts),
        TreeSpec::logged(NoReduce),
        TreeSpec::default(),
    ]
}

/// How an edit is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditMode {
    /// A client edit: it must extend a current leaf (`new_edits=true`).
    Interactive,
    /// A replicated revision: merged into the tree as given (`new_edits=false`).
    Replicated,
}

/// The outcome of one document edit.
pub type EditResult = Result<Rev>;

/// An open shard.
pub struct Shard {
    store: Store,
    edits: Arc<EditQueues>,
    local_edits: Arc<EditQueues>,
}

impl Shard {
    /// Opens an existing shard file, or creates it when `create` is set.
    pub fn open(path: &Path, options: StoreOptions, create: bool) -> Result<Shard> {
        let options = StoreOptions {
            trees: tree_specs(),
            ..options
        };
        let store = if create {
            Store::create(path, options)?
        } else {
            Store::open(path, options)?
        };
        Ok(Shard {
            store,
            edits: Arc::default(),
            local_edits: Arc::default(),
        })
    }

    /// The newest committed state.
    pub fn snapshot(&self) -> Snapshot {
        self.store.snapshot()
    }

    /// The underlying store (for compaction and flushing).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Applies document edits, together with those of other requests queued meanwhile (see
    /// [`crate::edit_queue`]); answers in the order given, when `answering` says.
    pub(crate) fn update_docs(
        &self,
        docs: Edits,
        mode: EditMode,
        durability: Durability,
        answering: Answering,
    ) -> EditsPending {
        self.edits
            .push(&self.store, docs, mode, durability, apply_docs, answering)
    }

    /// Writes local documents, gathered as [`Shard::update_docs`] gathers edits.
    pub(crate) fn update_local(
        &self,
        docs: Edits,
        durability: Durability,
        answering: Answering,
    ) -> EditsPending {
        self.local_edits.push(
            &self.store,
            docs,
            EditMode::Interactive,
            durability,
            |txn, docs, _| apply_local(txn, docs),
            answering,
        )
    }

    /// Purges leaf revisions; answers with the revisions purged per document.
    pub fn purge(&self, docs: Vec<(String, Vec<Rev>)>) -> Pending<Vec<Vec<Rev>>, Error> {
        self.store
            .submit(Durability::Durable, move |txn| apply_purge(txn, &docs))
    }

    /// Changes the shard metadata.
    pub fn update_meta(
        &self,
        f: impl FnOnce(&mut ShardMeta) + Send + 'static,
    ) -> Pending<(), Error> {
        self.store.submit(Durability::Durable, move |txn| {
            let mut meta = ShardMeta::decode(txn.meta())?;
            f(&mut meta);
            txn.set_meta(meta.encode());
            Ok(())
        })
    }
}

/// The ids a batch edits (`edited`, one per document), each once and in id order, and for
/// each document the index of its id among them. A batch's ids usually come in order
/// already (sequential ids, or a writer that sorts), which the sort then only confirms; the
/// by-id changes come out in the order the tree wants them, with no hashing and no sort of
/// their own.
fn distinct_ids<'a>(edited: &[&'a str]) -> (Vec<&'a str>, Vec<usize>) {
    let mut order: Vec<usize> = (0..edited.len()).collect();
    order.sort_by_key(|&k| edited[k]);
    let mut ids: Vec<&str> = Vec::with_capacity(edited.len());
    let mut slot_of = vec![0; edited.len()];
    for k in order {
        let id = edited[k];
        if ids.last() != Some(&id) {
            ids.push(id);
        }
        slot_of[k] = ids.len() - 1;
    }
    (ids, slot_of)
}

/// The record of each of `ids` as the batch starts (none: no such document), looked up
/// together so that the descents into a large by-id tree overlap.
fn current_records<'a>(txn: &Txn, ids: &[&str]) -> Result<Vec<Slot<'a>>> {
    txn.get_many(BY_ID, ids)?
        .into_iter()
        .map(|entry| {
            let record = entry.map(|e| DocRecord::decode(e.value())).transpose()?;
            Ok(Slot::Record(record, false))
        })
        .collect()
}

/// What a batch knows of one id.
enum Slot<'a> {
    /// Its record (none: no such document), and whether the batch changed it.
    Record(Option<DocRecord>, bool),
    /// A new document's first revision, written at this sequence from the values worked
    /// out ahead ([`NewDoc::presume_rev`]).
    Fresh(&'a FreshRecord, u64),
}

impl Slot<'_> {
    /// The record and whether the batch changed it, decoding a fresh one's if a later edit
    /// of the batch touches it.
    fn record(&mut self) -> Result<(&mut Option<DocRecord>, &mut bool)> {
        if let Slot::Fresh(fresh, seq) = *self {
            *self = Slot::Record(Some(DocRecord::decode(&fresh.record(seq))?), true);
        }
        match self {
            Slot::Record(record, dirty) => Ok((record, dirty)),
            Slot::Fresh(..) => Err(Error::Corrupted("fresh record left undecoded")),
        }
    }
}

/// Applies a batch of edits: reads each record once, applies edits in order (a later edit of
/// the same id sees the earlier one), then writes both trees in one modification each.
fn apply_docs(txn: &mut Txn, docs: &[&NewDoc], mode: EditMode) -> Result<Vec<EditResult>> {
    let mut meta = ShardMeta::decode(txn.meta())?;
    let edited: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    let (ids, slot_of) = distinct_ids(&edited);
    let mut records = current_records(txn, &ids)?;
    let mut seq_changes: BTreeMap<u64, Option<Vec<u8>>> = BTreeMap::new();
    let mut results = Vec::with_capacity(docs.len());
    for (&doc, &k) in docs.iter().zip(&slot_of) {
        let slot = &mut records[k];
        let next_seq = meta.update_seq + 1;
        let fits = |f: &&FreshRecord| {
            f.deleted == doc.deleted && doc.revs.is_empty() && doc.atts.is_empty()
        };
        if let (Slot::Record(None, _), EditMode::Interactive, Some(fresh)) =
            (&*slot, mode, doc.fresh.as_ref().filter(fits))
        {
            // A new id: what edit() would make was worked out while parsing.
            meta.update_seq = next_seq;
            meta.design_changes += u64::from(doc.id.starts_with(DESIGN_PREFIX));
            seq_changes.insert(next_seq, Some(fresh.seq_entry.clone()));
            *slot = Slot::Fresh(fresh, next_seq);
            results.push(Ok(fresh.rev.clone()));
            continue;
        }
        let (record, dirty) = slot.record()?;
        let old_seq = record.as_ref().map(|r| r.seq);
        match edit(
            txn,
            record.as_ref().map(|r| &r.tree),
            doc,
            mode,
            next_seq,
            meta.revs_limit,
        ) {
            Ok(Some((tree, rev))) => {
                meta.update_seq = next_seq;
                if let Some(old) = old_seq {
                    if seq_changes.remove(&old).is_none() {
                        seq_changes.insert(old, None);
                    }
                }
                let new = DocRecord {
                    tree,
                    seq: next_seq,
                };
                meta.design_changes += u64::from(doc.id.starts_with(DESIGN_PREFIX));
                seq_changes.insert(next_seq, Some(SeqEntry::of(&doc.id, &new).encode()));
                *record = Some(new);
                *dirty = true;
                results.push(Ok(rev));
            }
            Ok(None) => results.push(Ok(doc.revs[0].clone())),
            Err(e) => results.push(Err(e)),
        }
    }
    let by_id: Vec<Action> = ids
        .into_iter()
        .zip(records)
        .filter_map(|(id, slot)| match slot {
            Slot::Record(Some(record), true) => {
                Some(Action::Put(id.as_bytes().to_vec(), record.encode()))
            }
            Slot::Record(..) => None,
            Slot::Fresh(fresh, seq) => Some(Action::Put(id.as_bytes().to_vec(), fresh.record(seq))),
        })
        .collect();
    txn.apply(BY_ID, &by_id)?;
    let by_seq: Vec<Action> = seq_changes
        .into_iter()
        .map(|(seq, v)| match v {
            Some(v) => Action::Put(seq.to_be_bytes().to_vec(), v),
            None => Action::Delete(seq.to_be_bytes().to_vec()),
        })
        .collect();
    txn.apply(BY_SEQ, &by_seq)?;
    txn.set_meta(meta.encode());
    Ok(results)
}

/// Applies one edit to a document's tree, writing its body and new attachment bytes.
/// `Ok(None)` means a replicated revision that was already present (nothing to write).
fn edit(
    txn: &mut Txn,
    old: Option<&RevTree<RevInfo>>,
    doc: &NewDoc,
    mode: EditMode,
    seq: u64,
    revs_limit: u64,
) -> Result<Option<(RevTree<RevInfo>, Rev)>> {
    let mut tree = old.cloned().unwrap_or_default();
    let leaf = match mode {
        EditMode::Replicated => {
            if doc.revs.first().is_some_and(|r| tree.find(r).is_some()) {
                return Ok(None);
            }
            // Stubs refer to the newest ancestor this server holds.
            let base = doc
                .revs
                .iter()
                .skip(1)
                .find_map(|r| tree.find(r).and_then(|i| tree.nodes[i].info.as_ref()));
            let pos = doc.revs.first().map_or(1, |r| r.pos);
            let info = new_info(txn, doc, base, pos, seq, mode)?;
            match tree.merge_path(&doc.revs, doc.deleted, info) {
                Merged::Exists => return Ok(None),
                Merged::Added(i) => i,
            }
        }
        EditMode::Interactive => {
            let parent = match doc.revs.first() {
                None if tree.nodes.is_empty() => None,
                // Recreating a deleted document continues its winning tombstone.
                None if tree.is_deleted() => tree.winner(),
                None => return Err(Error::Conflict),
                Some(rev) => match tree.find(rev) {
                    Some(i) if tree.is_leaf(i) => Some(i),
                    _ => return Err(Error::Conflict),
                },
            };
            let parent_rev = parent.map(|p| tree.nodes[p].rev.clone());
            let pos = parent_rev.as_ref().map_or(1, |r| r.pos + 1);
            let base = parent.and_then(|p| tree.nodes[p].info.as_ref());
            let info = new_info(txn, doc, base, pos, seq, mode)?;
            let digests: Vec<_> = info.atts.iter().map(|a| a.rev_digest()).collect();
            let id: RevId = new_rev_id(doc.deleted, parent_rev.as_ref(), &doc.edit, &digests);
            if tree
                .find(&Rev {
                    pos,
                    id: id.clone(),
                })
                .is_some()
            {
                return Err(Error::Conflict);
            }
            tree.add_child(parent, id, doc.deleted, info)
        }
    };
    let rev = tree.nodes[leaf].rev.clone();
    tree.stem(usize::try_from(revs_limit).unwrap_or(usize::MAX));
    spill_superseded(txn, &mut tree)?;
    Ok(Some((tree, rev)))
}

/// Moves the inline bodies of revisions that are no longer leaves into blobs. Superseded
/// bodies stay readable by `?rev=` until compaction drops them, as in CouchDB, but every read
/// and update of the document decodes and rewrites its record, so the record keeps only a
/// pointer to them: a document's record then grows by a few dozen bytes per revision
/// instead of by its body.
fn spill_superseded(txn: &mut Txn, tree: &mut RevTree<RevInfo>) -> Result<()> {
    if tree.nodes.len() == 1 {
        return Ok(()); // the one revision is a leaf
    }
    let children = tree.child_counts();
    for (node, _) in tree.nodes.iter_mut().zip(children).filter(|&(_, c)| c > 0) {
        if let Some(info) = &mut node.info {
            if let Body::Inline(bytes) = &info.body {
                info.body = Body::Blob(txn.write_blob(bytes)?, bytes.len() as u64);
            }
        }
    }
    Ok(())
}

/// Stores a new revision's body and attachments; stubs are taken from `base`, the revision
/// being edited. Attachments with bytes get the revision's position `pos`, unless a
/// replicated revision gives theirs.
fn new_info(
    txn: &mut Txn,
    doc: &NewDoc,
    base: Option<&RevInfo>,
    pos: u64,
    seq: u64,
    mode: EditMode,
) -> Result<RevInfo> {
    let body = if doc.body.len() <= INLINE_MAX {
        Body::Inline(doc.body.clone())
    } else {
        Body::Blob(txn.write_blob(&doc.body)?, doc.body.len() as u64)
    };
    let mut atts = Vec::with_capacity(doc.atts.len());
    for att in &doc.atts {
        let (md5, length, encoding, encoded_length, chunks) = match &att.source {
            AttSource::Stub => {
                let kept = base.and_then(|b| b.atts.iter().find(|a| a.name == att.name));
                atts.push(
                    kept.cloned()
                        .ok_or_else(|| Error::MissingStub(doc.id.clone(), att.name.clone()))?,
                );
                continue;
            }
            AttSource::Data {
                chunks,
                encoding,
                length,
                md5,
            } => {
                let stored = chunks
                    .iter()
                    .map(|c| txn.write_blob(c))
                    .collect::<Result<_, _>>()?;
                (
                    *md5,
                    *length,
                    *encoding,
                    chunks.iter().map(|c| c.len() as u64).sum(),
                    stored,
                )
            }
            AttSource::Loose {
                blobs,
                encoding,
                length,
                encoded_length,
                md5,
            } => {
                let adopted = blobs
                    .iter()
                    .map(|b| txn.adopt(b))
                    .collect::<Result<_, _>>()?;
                (*md5, *length, *encoding, *encoded_length, adopted)
            }
        };
        let info = AttInfo {
            name: att.name.clone(),
            content_type: att.content_type.clone(),
            revpos: match (mode, att.revpos) {
                (EditMode::Replicated, Some(given)) if (1..=pos).contains(&given) => given,
                _ => pos,
            },
            md5,
            length,
            encoding,
            encoded_length,
            chunks,
        };
        atts.push(info);
    }
    Ok(RevInfo { body, seq, atts })
}

/// Removes purged revisions; a document left without revisions disappears entirely.
fn apply_purge(txn: &mut Txn, docs: &[(String, Vec<Rev>)]) -> Result<Vec<Vec<Rev>>> {
    let mut meta = ShardMeta::decode(txn.meta())?;
    let mut out = Vec::with_capacity(docs.len());
    for (id, revs) in docs {
        let Some(mut record) = txn
            .get(BY_ID, id.as_bytes())?
            .map(|e| DocRecord::decode(e.value()))
            .transpose()?
        else {
            out.push(Vec::new());
            continue;
        };
        let purged = record.tree.purge(revs);
        if purged.is_empty() {
            out.push(purged);
            continue;
        }
        meta.purge_seq += 1;
        meta.design_changes += u64::from(id.starts_with(DESIGN_PREFIX));
        let mut seq_actions = vec![Action::Delete(record.seq.to_be_bytes().to_vec())];
        if record.tree.nodes.is_empty() {
            txn.apply(BY_ID, &[Action::Delete(id.as_bytes().to_vec())])?;
        } else {
            meta.update_seq += 1;
            record.seq = meta.update_seq;
            seq_actions.push(Action::Put(
                record.seq.to_be_bytes().to_vec(),
                SeqEntry::of(id, &record).encode(),
            ));
            txn.apply(
                BY_ID,
                &[Action::Put(id.as_bytes().to_vec(), record.encode())],
            )?;
        }
        txn.apply(BY_SEQ, &seq_actions)?;
        out.push(purged);
    }
    txn.set_meta(meta.encode());
    Ok(out)
}

/// Local documents: revisions `0-N` counting writes, no history, no sequence.
fn apply_local(txn: &mut Txn, docs: &[&NewDoc]) -> Result<Vec<EditResult>> {
    let mut current: HashMap<&str, Option<(u64, Vec<u8>)>> = HashMap::new();
    let mut results = Vec::with_capacity(docs.len());
    for &doc in docs {
        if !current.contains_key(doc.id.as_str()) {
            let old = txn
                .get(LOCAL, doc.id.as_bytes())?
                .map(|e| decode_local(e.value()))
                .transpose()?;
            current.insert(&doc.id, old);
        }
        let slot = current.get_mut(doc.id.as_str()).expect("just inserted");
        let have = slot.as_ref().map(|(n, _)| *n);
        let given = match doc.revs.first() {
            None => None,
            Some(Rev {
                pos: 0,
                id: RevId::Text(t),
            }) => match t.parse::<u64>() {
                Ok(n) => Some(n),
                Err(_) => {
                    // An answer for this document alone: the job may carry other requests.
                    results.push(Err(Error::BadRequest("Invalid rev format".into())));
                    continue;
                }
            },
            Some(_) => {
                results.push(Err(Error::Conflict));
                continue;
            }
        };
        // As CouchDB: no conflicts between local documents' revisions; the revision given
        // (none counts as 0) is the one the edit follows, and a deletion removes whatever is
        // there.
        if have.is_none() && doc.deleted {
            results.push(Err(Error::NotFound("missing")));
            continue;
        }
        if doc.deleted {
            *slot = None;
            results.push(Ok(Rev {
                pos: 0,
                id: RevId::Text("0".into()),
            }));
        } else {
            let n = given.unwrap_or(0) + 1;
            *slot = Some((n, doc.body.clone()));
            results.push(Ok(Rev {
                pos: 0,
                id: RevId::Text(n.to_string().into()),
            }));
        }
    }
    let mut actions: Vec<Action> = current
        .into_iter()
        .map(|(id, v)| match v {
            Some((n, body)) => Action::Put(id.as_bytes().to_vec(), encode_local(n, &body)),
            None => Action::Delete(id.as_bytes().to_vec()),
        })
        .collect();
    actions.sort_by(|a, b| a.key().cmp(b.key()));
    txn.apply(LOCAL, &actions)?;
    Ok(results)
}

fn encode_local(n: u64, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 10);
    put_varint(&mut out, n);
    out.extend_from_slice(body);
    out
}

/// Reads a `local` tree value: the revision counter and the body.
pub fn decode_local(bytes: &[u8]) -> Result<(u64, Vec<u8>)> {
    let mut r = Reader::new(bytes, "local document");
    let n = r.varint()?;
    Ok((n, r.rest().to_vec()))
}

/// Compaction of a shard: copies the bodies of leaf revisions (and their blobs) and drops
/// the bodies of superseded revisions, which then read as "missing", as in CouchDB.
pub struct DocRewriter;

impl ValueRewriter for DocRewriter {
    fn rewrite(
        &self,
        tree: usize,
        _key: &[u8],
        value: &[u8],
        blobs: &mut BlobCopier<'_>,
    ) -> settee_store::Result<Option<Vec<u8>>> {
        if tree != BY_ID {
            return Ok(None);
        }
        let Ok(mut record) = DocRecord::decode(value) else {
            return Ok(None);
        };
        let leaves: std::collections::HashSet<usize> = record.tree.leaves().into_iter().collect();
        for (i, node) in record.tree.nodes.iter_mut().enumerate() {
            if !leaves.contains(&i) {
                node.info = None;
                continue;
            }
            let Some(info) = &mut node.info else { continue };
            if let Body::Blob(blob, _) = &mut info.body {
                *blob = blobs.copy(blob)?;
            }
            for att in &mut info.atts {
                for chunk in &mut att.chunks {
                    *chunk = blobs.copy(chunk)?;
                }
            }
        }
        Ok(Some(record.encode()))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Each id once, in byte order, and every document pointed at its own id.
        #[test]
        fn a_batch_edits_each_id_once_in_order(
            edited in prop::collection::vec("[a-c]{0,2}|_design/[ab]|\\PC{0,3}", 0..40)
        ) {
            let edited: Vec<&str> = edited.iter().map(String::as_str).collect();
            let (ids, slot_of) = distinct_ids(&edited);
            let mut model: Vec<&str> = edited.clone();
            model.sort_unstable();
            model.dedup();
            prop_assert_eq!(&ids, &model);
            prop_assert_eq!(slot_of.len(), edited.len());
            for (k, id) in edited.iter().enumerate() {
                prop_assert_eq!(ids[slot_of[k]], *id);
            }
        }
    }

    #[test]
    fn metadata_written_before_the_design_count_reads_as_none_changed() {
        let meta = ShardMeta {
            update_seq: 7,
            purge_seq: 2,
            revs_limit: 50,
            security: b"{}".to_vec(),
            purged_infos_limit: 9,
            design_changes: 4,
            partitioned: true,
        };
        assert_eq!(ShardMeta::decode(&meta.encode()).unwrap(), meta);
        assert_eq!(ShardMeta::design_changes_in(&meta.encode()).unwrap(), 4);
        assert_eq!(ShardMeta::design_changes_in(&[]).unwrap(), 0, "a new file");
        // The layout before the count: the same fields up to `purged_infos_limit`.
        let mut older = vec![META_VERSION];
        for v in [7, 2, 50] {
            put_varint(&mut older, v);
        }
        put_bytes(&mut older, b"{}");
        put_varint(&mut older, 9);
        assert_eq!(
            ShardMeta::decode(&older).unwrap(),
            ShardMeta {
                design_changes: 0,
                partitioned: false,
                ..meta.clone()
            }
        );
        // The layout before the partitioned flag: a database that is not partitioned.
        let mut counted = older.clone();
        put_varint(&mut counted, 4);
        assert_eq!(
            ShardMeta::decode(&counted).unwrap(),
            ShardMeta {
                partitioned: false,
                ..meta
            }
        );
        assert_eq!(ShardMeta::design_changes_in(&older).unwrap(), 0);
    }
}
