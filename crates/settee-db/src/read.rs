//! Reading a database: documents, `_all_docs` ranges and change feeds, from one snapshot of
//! every shard. Nothing here waits for a writer.

use std::collections::HashSet;

use settee_json::{body, Rev};
use settee_store::{Bound, Direction, Entry, Range, RangeOptions, Snapshot};

use crate::att::{decode_bytes, AttInfo};
use crate::database::shard_index;
use crate::error::{Error, Result};
use crate::record::{peek_winner, Body, Counts, DocRecord, RevInfo, SeqEntry};
use crate::seq::SeqVector;
use crate::shard::{decode_local, ShardMeta, BY_ID, BY_SEQ, LOCAL};

/// What to add to a document beyond its body.
#[derive(Clone, Debug, Default)]
pub struct DocOptions {
    /// `_revisions`: the revision path.
    pub revs: bool,
    /// `_revs_info`: the path with each revision's availability.
    pub revs_info: bool,
    /// `_conflicts`: other live leaves.
    pub conflicts: bool,
    /// `_deleted_conflicts`: other deleted leaves.
    pub deleted_conflicts: bool,
    /// `_local_seq`: the shard sequence of the document's latest change.
    pub local_seq: bool,
    /// Attachment bytes inline (base64) instead of stubs.
    pub attachments: bool,
    /// With `attachments`: only bytes written after the newest of these revisions that is
    /// an ancestor (CouchDB's `atts_since`).
    pub atts_since: Option<Vec<Rev>>,
    /// Add `encoding` and `encoded_length` to attachment entries.
    pub att_encoding_info: bool,
}

/// Every shard of a database as of one moment.
#[derive(Clone)]
pub struct DbSnapshot {
    shards: Vec<Snapshot>,
    /// Whether the database is partitioned (documents placed by partition).
    partitioned: bool,
    /// Tells the database a snapshot is alive (see `Database::in_use`).
    _lease: std::sync::Arc<()>,
}

impl DbSnapshot {
    pub(crate) fn new(
        shards: Vec<Snapshot>,
        lease: std::sync::Arc<()>,
        partitioned: bool,
    ) -> DbSnapshot {
        DbSnapshot {
            shards,
            partitioned,
            _lease: lease,
        }
    }

    fn shard(&self, id: &str) -> &Snapshot {
        let key = crate::database::placement(id, self.partitioned);
        &self.shards[shard_index(key, self.shards.len())]
    }

    /// Whether the database is partitioned.
    pub fn partitioned(&self) -> bool {
        self.partitioned
    }

    /// Live and deleted document counts and sizes of one partition (ids `{p}:…`), from the
    /// reductions of the one shard that holds it, without visiting its documents.
    pub fn partition_counts(&self, partition: &str) -> Result<Counts> {
        let (lo, hi) = partition_range(partition);
        let shard = self.shard(&lo);
        let (lo, hi) = (
            Bound::Included(lo.into_bytes()),
            Bound::Excluded(hi.into_bytes()),
        );
        Ok(Counts::decode(&shard.reduce(BY_ID, &lo, &hi)?.value))
    }

    /// The database sequence.
    pub fn seq(&self) -> Result<SeqVector> {
        self.shards
            .iter()
            .map(|s| Ok(ShardMeta::decode(s.meta())?.update_seq))
            .collect::<Result<_>>()
            .map(SeqVector)
    }

    /// The database's purge sequence (one counter per shard).
    pub fn purge_seq(&self) -> Result<SeqVector> {
        self.shards
            .iter()
            .map(|s| Ok(ShardMeta::decode(s.meta())?.purge_seq))
            .collect::<Result<_>>()
            .map(SeqVector)
    }

    /// Each shard's count of design-document edits and purges, which moves in the commit
    /// that makes such a change and at no other time: what is derived from the design
    /// documents of this snapshot still holds for any snapshot with the same counts.
    pub fn design_changes(&self) -> Result<Vec<u64>> {
        self.shards
            .iter()
            .map(|s| ShardMeta::design_changes_in(s.meta()))
            .collect()
    }

    /// Names the state this snapshot holds, one commit id per shard (see
    /// [`settee_store::Snapshot::commit_id`]): two snapshots with equal ids read alike, so
    /// an answer derived from one can be named by them (an `ETag`).
    pub fn commit_ids(&self) -> Vec<([u8; 16], u64)> {
        self.shards.iter().map(Snapshot::commit_id).collect()
    }

    /// The metadata of the first shard (security object, revs limit).
    pub fn meta(&self) -> Result<ShardMeta> {
        ShardMeta::decode(self.shards[0].meta())
    }

    /// Bytes of live data in the shard files (CouchDB's `sizes.active`): the nodes of every
    /// tree and the blobs the documents' leaf revisions use, which is what a compaction
    /// keeps. Reads the trees' inner nodes, about one node in a hundred.
    pub fn active_bytes(&self) -> Result<u64> {
        self.shards
            .iter()
            .try_fold(self.counts()?.blobs, |total, shard| {
                Ok(total.saturating_add(shard.nodes_bytes()?))
            })
    }

    /// Live and deleted document counts and sizes over every shard.
    pub fn counts(&self) -> Result<Counts> {
        self.shards.iter().try_fold(Counts::default(), |total, s| {
            Ok(total.add(Counts::decode(&s.total(BY_ID)?.value)))
        })
    }

    /// A document's stored record.
    pub fn record(&self, id: &str) -> Result<Option<DocRecord>> {
        self.shard(id)
            .get(BY_ID, id.as_bytes())?
            .map(|e| DocRecord::decode(e.value()))
            .transpose()
    }

    /// The body of one revision of `id`.
    pub fn body<'a>(&self, id: &str, info: &'a RevInfo) -> Result<std::borrow::Cow<'a, [u8]>> {
        match &info.body {
            Body::Inline(b) => Ok(std::borrow::Cow::Borrowed(b)),
            Body::Blob(blob, _) => Ok(std::borrow::Cow::Owned(self.shard(id).read_blob(blob)?)),
        }
    }

    /// The JSON of revision `rev` of a document (its winner when `None`). A deleted winner
    /// is `not_found` "deleted"; an explicitly asked-for tombstone is returned.
    pub fn open_doc(&self, id: &str, rev: Option<&Rev>, opts: &DocOptions) -> Result<Vec<u8>> {
        let (rec, i) = self.resolve(id, rev)?;
        self.render(id, &rec, i, opts)
    }

    /// The record of `id` and the node of revision `rev` (its winner when `None`), with
    /// CouchDB's errors: `missing` for an unknown document or revision, `deleted` for a
    /// document whose winner is a tombstone.
    pub fn resolve(&self, id: &str, rev: Option<&Rev>) -> Result<(DocRecord, usize)> {
        settee_metrics::inc(settee_metrics::Metric::DatabaseReads);
        let rec = self.record(id)?.ok_or(Error::NotFound("missing"))?;
        let i = match rev {
            Some(r) => rec
                .tree
                .find(r)
                .filter(|&i| rec.tree.nodes[i].info.is_some())
                .ok_or(Error::NotFound("missing"))?,
            None => {
                let w = rec
                    .tree
                    .winner()
                    .ok_or(Error::Corrupted("document without revisions"))?;
                if rec.tree.nodes[w].deleted {
                    return Err(Error::NotFound("deleted"));
                }
                w
            }
        };
        Ok((rec, i))
    }

    /// Like [`DbSnapshot::resolve`] for the winner, decoding only the winning revision: the
    /// record's tree is that one node. For reads that show no history or conflicts.
    pub fn resolve_winner(&self, id: &str) -> Result<(DocRecord, usize)> {
        settee_metrics::inc(settee_metrics::Metric::DatabaseReads);
        let entry = self
            .shard(id)
            .get(BY_ID, id.as_bytes())?
            .ok_or(Error::NotFound("missing"))?;
        let rec = DocRecord::decode_winner(entry.value())?;
        if rec.tree.nodes[0].deleted {
            return Err(Error::NotFound("deleted"));
        }
        Ok((rec, 0))
    }

    /// The JSON of node `i` of a record.
    pub fn render(
        &self,
        id: &str,
        rec: &DocRecord,
        i: usize,
        opts: &DocOptions,
    ) -> Result<Vec<u8>> {
        self.render_as(id, rec, i, opts, &rec.tree.nodes[i].rev.to_string())
    }

    /// [`DbSnapshot::render`] with the revision's text already at hand.
    pub fn render_as(
        &self,
        id: &str,
        rec: &DocRecord,
        i: usize,
        opts: &DocOptions,
        rev_text: &str,
    ) -> Result<Vec<u8>> {
        let node = &rec.tree.nodes[i];
        let info = node.info.as_ref().ok_or(Error::NotFound("missing"))?;
        let stored = self.body(id, info)?;
        let mut out = Vec::with_capacity(stored.len() + id.len() + 64);
        body::begin(&mut out, id, Some(rev_text), &stored);
        if node.deleted {
            body::member(&mut out, "_deleted", b"true");
        }
        if opts.revs {
            let ids: Vec<String> = rec
                .tree
                .path(i)
                .iter()
                .map(|&p| rec.tree.nodes[p].rev.id.to_string())
                .collect();
            body::member(
                &mut out,
                "_revisions",
                &serde_json::to_vec(&serde_json::json!({"start": node.rev.pos, "ids": ids}))
                    .expect("json"),
            );
        }
        if opts.revs_info {
            let infos: Vec<serde_json::Value> = rec
                .tree
                .path(i)
                .iter()
                .map(|&p| {
                    let n = &rec.tree.nodes[p];
                    let status = if n.info.is_none() {
                        "missing"
                    } else if n.deleted {
                        "deleted"
                    } else {
                        "available"
                    };
                    serde_json::json!({"rev": n.rev.to_string(), "status": status})
                })
                .collect();
            body::member(
                &mut out,
                "_revs_info",
                &serde_json::to_vec(&infos).expect("json"),
            );
        }
        for (wanted, deleted, key) in [
            (opts.conflicts, false, "_conflicts"),
            (opts.deleted_conflicts, true, "_deleted_conflicts"),
        ] {
            if !wanted {
                continue;
            }
            let winner = rec.tree.winner();
            let revs: Vec<String> = rec
                .tree
                .leaves()
                .into_iter()
                .filter(|&l| Some(l) != winner && rec.tree.nodes[l].deleted == deleted)
                .map(|l| rec.tree.nodes[l].rev.to_string())
                .collect();
            if !revs.is_empty() {
                body::member(&mut out, key, &serde_json::to_vec(&revs).expect("json"));
            }
        }
        if opts.local_seq {
            // The document's latest change, as CouchDB's `high_seq`, whichever leaf made it.
            body::member(&mut out, "_local_seq", rec.seq.to_string().as_bytes());
        }
        if !info.atts.is_empty() {
            let atts = self.attachments_json(id, rec, i, opts)?;
            body::member(
                &mut out,
                "_attachments",
                &serde_json::to_vec(&atts).expect("json"),
            );
        }
        body::end(&mut out);
        Ok(out)
    }

    /// The `_attachments` member of node `i`.
    fn attachments_json(
        &self,
        id: &str,
        rec: &DocRecord,
        i: usize,
        opts: &DocOptions,
    ) -> Result<serde_json::Value> {
        let info = rec.tree.nodes[i]
            .info
            .as_ref()
            .ok_or(Error::NotFound("missing"))?;
        let mut map = serde_json::Map::new();
        for att in &info.atts {
            let data = if sends_data(rec, i, att, opts) {
                Some(self.attachment_bytes(id, att)?)
            } else {
                None
            };
            map.insert(
                att.name.clone(),
                att.to_json(data.as_deref(), opts.att_encoding_info),
            );
        }
        Ok(serde_json::Value::Object(map))
    }

    /// An attachment of revision `rev` (the winner when `None`) of a document.
    pub fn attachment(&self, id: &str, rev: Option<&Rev>, name: &str) -> Result<AttInfo> {
        let (rec, i) = self.resolve(id, rev)?;
        let info = rec.tree.nodes[i]
            .info
            .as_ref()
            .ok_or(Error::NotFound("missing"))?;
        info.atts
            .iter()
            .find(|a| a.name == name)
            .cloned()
            .ok_or(Error::NoAttachment)
    }

    /// One stored chunk of an attachment of `id`.
    pub fn attachment_chunk(&self, id: &str, chunk: &settee_store::BlobRef) -> Result<Vec<u8>> {
        Ok(self.shard(id).read_blob(chunk)?)
    }

    /// An attachment's identity bytes, whole.
    pub fn attachment_bytes(&self, id: &str, att: &AttInfo) -> Result<Vec<u8>> {
        let mut stored = Vec::with_capacity(att.encoded_length.min(1 << 30) as usize);
        for c in &att.chunks {
            stored.extend_from_slice(&self.attachment_chunk(id, c)?);
        }
        decode_bytes(att.encoding, stored)
    }

    /// What `_revs_diff` answers for one document: the revisions of `revs` this database
    /// lacks, and its leaves older than the newest of those (possible ancestors, whose
    /// attachments a replicator need not send again). `None` when it has them all.
    pub fn revs_diff(&self, id: &str, revs: &[Rev]) -> Result<Option<(Vec<Rev>, Vec<Rev>)>> {
        let record = self.record(id)?;
        let missing: Vec<Rev> = match &record {
            Some(rec) => rec.tree.missing(revs).into_iter().cloned().collect(),
            None => revs.to_vec(),
        };
        if missing.is_empty() {
            return Ok(None);
        }
        let max_pos = missing.iter().map(|r| r.pos).max().unwrap_or(0);
        let ancestors = record.map_or_else(Vec::new, |rec| {
            rec.tree
                .leaves()
                .into_iter()
                .map(|l| rec.tree.nodes[l].rev.clone())
                .filter(|r| r.pos < max_pos)
                .collect()
        });
        Ok(Some((missing, ancestors)))
    }

    /// A local document: its revision counter and body.
    pub fn local(&self, id: &str) -> Result<Option<(u64, Vec<u8>)>> {
        self.shard(id)
            .get(LOCAL, id.as_bytes())?
            .map(|e| decode_local(e.value()))
            .transpose()
    }

    /// Documents in id order (see [`AllDocsOptions`]); deleted documents are left out.
    pub fn all_docs(&self, opts: AllDocsOptions) -> Result<AllDocs> {
        let (tree, direction) = (
            if opts.local { LOCAL } else { BY_ID },
            if opts.descending {
                Direction::Backward
            } else {
                Direction::Forward
            },
        );
        let start = opts
            .start
            .clone()
            .map_or(Bound::Unbounded, |s| Bound::Included(s.into_bytes()));
        let end = match opts.end.clone() {
            None => Bound::Unbounded,
            Some(e) if opts.inclusive_end => Bound::Included(e.into_bytes()),
            Some(e) => Bound::Excluded(e.into_bytes()),
        };
        let ranges = self
            .shards
            .iter()
            .map(|s| {
                s.range(
                    tree,
                    RangeOptions {
                        start: start.clone(),
                        end: end.clone(),
                        direction,
                        skip: 0,
                        limit: None,
                    },
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AllDocs {
            snap: self.clone(),
            merge: Merge::new(ranges, opts.descending),
            skip: opts.skip,
            limit: opts.limit,
            opts,
        })
    }

    /// The ids of the live design documents, in id order (the range every design document
    /// id falls in, `_design/` up to [`DESIGN_END`]).
    pub fn design_docs(&self) -> Result<impl Iterator<Item = Result<String>>> {
        Ok(self
            .all_docs(AllDocsOptions::design_docs())?
            .map(|row| row.map(|r| r.id)))
    }

    /// How many live design documents there are, from the trees' counts (no scan).
    pub fn design_doc_count(&self) -> Result<u64> {
        self.live_between(crate::doc::DESIGN_PREFIX, DESIGN_END)
    }

    /// How many live documents have ids in `[start, end)`, from the trees' reductions
    /// without visiting them: asking whether a database has design documents costs a few
    /// node reads.
    pub fn live_between(&self, start: &str, end: &str) -> Result<u64> {
        let (lo, hi) = (
            Bound::Included(start.as_bytes().to_vec()),
            Bound::Excluded(end.as_bytes().to_vec()),
        );
        self.shards
            .iter()
            .map(|s| Ok(Counts::decode(&s.reduce(BY_ID, &lo, &hi)?.value).live))
            .sum()
    }

    /// How many live documents sort before `id` (CouchDB's `offset`).
    pub fn offset_of(&self, id: Option<&str>, descending: bool) -> Result<u64> {
        let Some(id) = id else { return Ok(0) };
        let mut total = 0;
        for s in &self.shards {
            let (lo, hi) = if descending {
                (Bound::Excluded(id.as_bytes().to_vec()), Bound::Unbounded)
            } else {
                (Bound::Unbounded, Bound::Excluded(id.as_bytes().to_vec()))
            };
            total += Counts::decode(&s.reduce(BY_ID, &lo, &hi)?.value).live;
        }
        Ok(total)
    }

    /// Changes after `since` in sequence order (or before it, descending).
    pub fn changes(&self, since: &SeqVector, opts: ChangesOptions) -> Result<Changes> {
        if since.0.len() != self.shards.len() {
            return Err(Error::BadSequence);
        }
        let ranges = self
            .shards
            .iter()
            .zip(&since.0)
            .map(|(s, &from)| {
                let (start, end) = if opts.descending {
                    (Bound::Unbounded, Bound::Unbounded)
                } else {
                    (
                        Bound::Excluded(from.to_be_bytes().to_vec()),
                        Bound::Unbounded,
                    )
                };
                s.range(BY_SEQ, RangeOptions::between(start, end, opts.descending))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let position = if opts.descending {
            self.seq()?
        } else {
            since.clone()
        };
        Ok(Changes {
            snap: self.clone(),
            merge: Merge::new(ranges, opts.descending),
            position,
            remaining: opts.limit,
            opts,
        })
    }

    /// Changes not yet seen by a reader at `position`.
    pub fn pending(&self, position: &SeqVector) -> Result<u64> {
        let mut n = 0;
        for (s, &from) in self.shards.iter().zip(&position.0) {
            n += s
                .reduce(
                    BY_SEQ,
                    &Bound::Excluded(from.to_be_bytes().to_vec()),
                    &Bound::Unbounded,
                )?
                .count;
        }
        Ok(n)
    }
}

/// Whether a reply for node `i` carries `att`'s bytes: when attachments are asked for and
/// the bytes were written after the newest `atts_since` revision on the node's path.
pub fn sends_data(rec: &DocRecord, i: usize, att: &AttInfo, opts: &DocOptions) -> bool {
    if !opts.attachments {
        return false;
    }
    let path = rec.tree.path(i);
    let since = opts.atts_since.as_ref().and_then(|revs| {
        revs.iter()
            .filter(|r| path.iter().any(|&p| rec.tree.nodes[p].rev == **r))
            .map(|r| r.pos)
            .max()
    });
    since.is_none_or(|p| att.revpos > p)
}

/// The entries of every shard's range, merged into one key order.
struct Merge {
    ranges: Vec<Range<'static>>,
    heads: Vec<Option<Entry>>,
    descending: bool,
}

impl Merge {
    fn new(ranges: Vec<Range<'static>>, descending: bool) -> Merge {
        let heads = vec![None; ranges.len()];
        Merge {
            ranges,
            heads,
            descending,
        }
    }

    fn fill(&mut self) -> Result<()> {
        for (i, r) in self.ranges.iter_mut().enumerate() {
            if self.heads[i].is_none() {
                self.heads[i] = r.next().transpose()?;
            }
        }
        Ok(())
    }

    /// The next entry and the shard it came from.
    fn next(&mut self) -> Result<Option<(usize, Entry)>> {
        self.fill()?;
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            let Some(h) = h else { continue };
            let better = match best {
                None => true,
                Some(b) => {
                    let bk = self.heads[b].as_ref().expect("best is filled").key();
                    if self.descending {
                        h.key() > bk
                    } else {
                        h.key() < bk
                    }
                }
            };
            if better {
                best = Some(i);
            }
        }
        Ok(best.map(|b| (b, self.heads[b].take().expect("best is filled"))))
    }
}

/// Which documents `_all_docs` lists.
#[derive(Clone, Debug, Default)]
pub struct AllDocsOptions {
    /// First id (in walk direction), inclusive.
    pub start: Option<String>,
    /// Last id (in walk direction).
    pub end: Option<String>,
    /// Whether `end` itself is listed.
    pub inclusive_end: bool,
    /// Walk in descending id order.
    pub descending: bool,
    /// Rows to leave out first.
    pub skip: u64,
    /// Most rows to list.
    pub limit: Option<u64>,
    /// Add each document's JSON.
    pub include_docs: bool,
    /// Options for included documents.
    pub doc: DocOptions,
    /// List local documents instead.
    pub local: bool,
}

/// One `_all_docs` row.
#[derive(Clone, Debug)]
pub struct DocRow {
    /// Document id.
    pub id: String,
    /// Winning revision.
    pub rev: Rev,
    /// The document, when asked for.
    pub doc: Option<Vec<u8>>,
}

/// The ids of partition `p` are those in `[p:, p;)` (`;` follows `:`).
pub fn partition_range(p: &str) -> (String, String) {
    (format!("{p}:"), format!("{p};"))
}

/// The first id past every design document id (`_design/` with its `/` stepped up).
pub const DESIGN_END: &str = "_design0";

impl AllDocsOptions {
    /// The options that list the design documents, as `_design_docs` does.
    pub fn design_docs() -> AllDocsOptions {
        AllDocsOptions {
            start: Some(crate::doc::DESIGN_PREFIX.into()),
            end: Some(DESIGN_END.into()),
            inclusive_end: false,
            ..AllDocsOptions::default()
        }
    }
}

/// The rows of an `_all_docs` request.
pub struct AllDocs {
    snap: DbSnapshot,
    merge: Merge,
    skip: u64,
    limit: Option<u64>,
    opts: AllDocsOptions,
}

impl AllDocs {
    fn row(&self, entry: &Entry) -> Result<Option<DocRow>> {
        let id = std::str::from_utf8(entry.key())
            .map_err(|_| Error::Corrupted("document id"))?
            .to_string();
        if self.opts.local {
            let (n, stored) = decode_local(entry.value())?;
            let rev = Rev {
                pos: 0,
                id: settee_json::RevId::Text(n.to_string().into()),
            };
            let doc = self.opts.include_docs.then(|| {
                let mut out = Vec::new();
                body::begin(&mut out, &id, Some(&rev.to_string()), &stored);
                body::end(&mut out);
                out
            });
            return Ok(Some(DocRow { id, rev, doc }));
        }
        let (rev, deleted) = peek_winner(entry.value())?;
        if deleted {
            return Ok(None);
        }
        let doc = if self.opts.include_docs {
            let rec = DocRecord::decode(entry.value())?;
            let w = rec
                .tree
                .winner()
                .ok_or(Error::Corrupted("document without revisions"))?;
            Some(self.snap.render(&id, &rec, w, &self.opts.doc)?)
        } else {
            None
        };
        Ok(Some(DocRow { id, rev, doc }))
    }
}

impl Iterator for AllDocs {
    type Item = Result<DocRow>;

    fn next(&mut self) -> Option<Result<DocRow>> {
        loop {
            if self.limit == Some(0) {
                return None;
            }
            let (_, entry) = match self.merge.next() {
                Ok(Some(e)) => e,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            match self.row(&entry) {
                Ok(None) => continue,
                Ok(Some(_)) if self.skip > 0 => self.skip -= 1,
                Ok(Some(row)) => {
                    self.limit = self.limit.map(|l| l - 1);
                    return Some(Ok(row));
                }
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Which changes a feed lists.
#[derive(Clone, Debug, Default)]
pub struct ChangesOptions {
    /// Newest first.
    pub descending: bool,
    /// Most rows to list.
    pub limit: Option<u64>,
    /// Add each document's JSON.
    pub include_docs: bool,
    /// Options for included documents.
    pub doc: DocOptions,
    /// List every leaf revision, not just the winner (`style=all_docs`).
    pub all_leaves: bool,
    /// Only these document ids (`filter=_doc_ids`).
    pub doc_ids: Option<HashSet<String>>,
    /// Only design documents (`filter=_design`).
    pub design_only: bool,
    /// Only documents this predicate accepts (`filter=_selector`); it sees the winning
    /// revision as JSON.
    pub doc_filter: Option<DocFilter>,
}

/// A predicate over documents, for filtered change feeds; an error ends the feed.
#[derive(Clone)]
pub struct DocFilter(pub std::sync::Arc<FilterFn>);

/// What a [`DocFilter`] calls: whether a document (its winning revision) passes.
pub type FilterFn = dyn Fn(&serde_json::Value) -> Result<bool, FilterError> + Send + Sync;

/// Why a filter could not decide on a document: CouchDB's error name and reason (a
/// function that threw, or ran out of time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    /// CouchDB's error name (`os_process_error`, or what the function threw).
    pub error: String,
    /// What went wrong.
    pub reason: String,
}

impl std::fmt::Debug for DocFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DocFilter")
    }
}

/// One change row.
#[derive(Clone, Debug)]
pub struct ChangeRow {
    /// Position after this row.
    pub seq: SeqVector,
    /// Document id.
    pub id: String,
    /// Revisions listed, winner first.
    pub revs: Vec<Rev>,
    /// Whether the document is deleted.
    pub deleted: bool,
    /// The document, when asked for.
    pub doc: Option<Vec<u8>>,
}

/// The rows of a change feed; [`Changes::position`] is where the feed got to.
pub struct Changes {
    snap: DbSnapshot,
    merge: Merge,
    position: SeqVector,
    remaining: Option<u64>,
    opts: ChangesOptions,
}

impl Changes {
    /// The position after the last row read (the feed's `last_seq`).
    pub fn position(&self) -> &SeqVector {
        &self.position
    }

    fn wanted(&self, id: &str) -> Result<bool> {
        let by_id = (!self.opts.design_only || id.starts_with(crate::doc::DESIGN_PREFIX))
            && self
                .opts
                .doc_ids
                .as_ref()
                .is_none_or(|ids| ids.contains(id));
        let Some(filter) = self.opts.doc_filter.as_ref().filter(|_| by_id) else {
            return Ok(by_id);
        };
        let Some(rec) = self.snap.record(id)? else {
            return Ok(false);
        };
        let w = rec
            .tree
            .winner()
            .ok_or(Error::Corrupted("document without revisions"))?;
        let doc: serde_json::Value = settee_json::deep::from_slice(&self.snap.render(
            id,
            &rec,
            w,
            &DocOptions::default(),
        )?)
        .map_err(|_| Error::Corrupted("stored body"))?;
        (filter.0)(&doc).map_err(Error::Filter)
    }

    fn row(&self, entry: SeqEntry) -> Result<ChangeRow> {
        let deleted = entry.deleted();
        let revs = if self.opts.all_leaves {
            entry.leaves.into_iter().map(|(r, _)| r).collect()
        } else {
            entry.leaves.into_iter().take(1).map(|(r, _)| r).collect()
        };
        let doc = if self.opts.include_docs {
            match self.snap.record(&entry.id)? {
                Some(rec) => {
                    let w = rec
                        .tree
                        .winner()
                        .ok_or(Error::Corrupted("document without revisions"))?;
                    Some(self.snap.render(&entry.id, &rec, w, &self.opts.doc)?)
                }
                None => None,
            }
        } else {
            None
        };
        Ok(ChangeRow {
            seq: self.position.clone(),
            id: entry.id,
            revs,
            deleted,
            doc,
        })
    }
}

impl Iterator for Changes {
    type Item = Result<ChangeRow>;

    fn next(&mut self) -> Option<Result<ChangeRow>> {
        loop {
            if self.remaining == Some(0) {
                return None;
            }
            let (shard, entry) = match self.merge.next() {
                Ok(Some(e)) => e,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            let seq = entry.key().try_into().map(u64::from_be_bytes).unwrap_or(0);
            self.position.0[shard] = seq;
            let parsed = match SeqEntry::decode(entry.value()) {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            match self.wanted(&parsed.id) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => return Some(Err(e)),
            }
            self.remaining = self.remaining.map(|r| r - 1);
            return Some(self.row(parsed));
        }
    }
}
