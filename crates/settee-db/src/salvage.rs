//! Checking and salvaging a database's files (`settee check`, `settee salvage`).
//!
//! A check reads every store file of a database end to end (`settee_store::scan_file`):
//! every record's checksum and every commit's, whatever the trees still reach. It takes no
//! lock, so it may run beside a server.
//!
//! A salvage rebuilds each damaged shard from what can still be read: the documents of every
//! readable node of its id tree, with their logged changes, each with the bodies and
//! attachments of its leaf revisions (a document one of whose blobs is damaged is lost
//! whole, not kept half); the sequence tree is made again from the documents, so that the
//! change feed lists exactly them; local documents are copied. The new file replaces the
//! old in one rename, and the old is kept beside it as `shard-N.settee.damaged`. View indexes
//! that do not check out, and every index of a database whose shard was rebuilt, are deleted:
//! they are built again from the documents. A salvage needs the database closed (the server
//! stopped). It holds a shard's id tree in memory, and a bounded batch of documents' blobs.

use std::path::{Path, PathBuf};

use settee_store::{Action, Durability, FileScan, Snapshot, Store, StoreOptions};

use crate::error::{Error, Result};
use crate::record::{Body, DocRecord, SeqEntry};
use crate::shard::{tree_specs, BY_ID, BY_SEQ, LOCAL};

/// What checking one file found.
#[derive(Debug)]
pub struct FileCheck {
    /// The file.
    pub path: PathBuf,
    /// Its scan.
    pub scan: FileScan,
}

/// Checks every store file of a database: its shards, and its view indexes (in `views/`).
pub fn check_database(dir: &Path) -> Result<Vec<FileCheck>> {
    let mut files = files_with(dir, "settee")?;
    files.extend(view_indexes(dir)?);
    files
        .into_iter()
        .map(|path| {
            Ok(FileCheck {
                scan: settee_store::scan_file(&path)?,
                path,
            })
        })
        .collect()
}

/// The files of `dir` with extension `ext`, sorted.
fn files_with(dir: &Path, ext: &str) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(Error::io("list database files"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    Ok(files)
}

/// The view index files of the database in `dir`.
fn view_indexes(dir: &Path) -> Result<Vec<PathBuf>> {
    let views = dir.join("views");
    if views.is_dir() {
        files_with(&views, "view")
    } else {
        Ok(Vec::new())
    }
}

/// What salvaging one shard kept and lost.
#[derive(Debug, Default)]
pub struct ShardSalvage {
    /// Documents copied whole.
    pub kept: u64,
    /// Id ranges under damaged nodes: (after, up to, how many there were), `None` for an
    /// open end.
    pub lost_ranges: Vec<(Option<String>, Option<String>, u64)>,
    /// Documents lost to a damaged blob (a body or an attachment).
    pub lost_docs: Vec<String>,
    /// Local documents under damaged nodes.
    pub lost_local: u64,
    /// Damaged records the rebuild met, beyond those above.
    pub damage: Vec<settee_store::Damaged>,
}

/// Documents copied per commit of the new file, and the blob bytes a batch may hold.
const BATCH: usize = 2048;
const BATCH_BYTES: usize = 64 << 20;

/// Rebuilds the shard file at `path` from what can still be read, replacing it (the old
/// file is kept as `….damaged`). The shard must not be open elsewhere.
pub fn salvage_shard(path: &Path, options: &StoreOptions) -> Result<ShardSalvage> {
    let options = StoreOptions {
        trees: tree_specs(),
        ..options.clone()
    };
    let old = Store::open(path, options.clone())?;
    let snap = old.snapshot();
    let mut report = ShardSalvage::default();
    let text = |k: Option<Vec<u8>>| k.map(|k| String::from_utf8_lossy(&k).into_owned());
    let docs = snap.readable_entries(BY_ID, &mut |lost| {
        report
            .lost_ranges
            .push((text(lost.after), text(lost.up_to), lost.entries))
    })?;
    let mut lost_local = 0;
    let local = snap.readable_entries(LOCAL, &mut |lost| lost_local += lost.entries)?;
    report.lost_local = lost_local;
    let new_path = path.with_extension("settee.salvage");
    let _ = std::fs::remove_file(&new_path);
    let new = Store::create(&new_path, options)?;
    let mut docs = docs.into_iter().peekable();
    while docs.peek().is_some() {
        let (kept, lost) = copy_docs(&snap, &new, &mut docs)?;
        report.kept += kept;
        report.lost_docs.extend(lost);
    }
    let meta = snap.meta().to_vec();
    new.update(Durability::Durable, move |txn| -> Result<()> {
        let actions: Vec<Action> = local.into_iter().map(|(k, v)| Action::Put(k, v)).collect();
        txn.apply(LOCAL, &actions)?;
        txn.set_meta(meta);
        Ok(())
    })?;
    report.damage = old.damage();
    drop((snap, old, new));
    // The damaged file keeps a second name, then the new one takes its place in one rename:
    // whenever the process stops, the shard's name holds a whole file.
    std::fs::hard_link(path, damaged_name(path)).map_err(Error::io("keep the damaged file"))?;
    std::fs::rename(&new_path, path).map_err(Error::io("put the salvaged file in place"))?;
    settee_store::sync_parent(path).map_err(Error::io("salvage"))?;
    Ok(report)
}

/// A name for a damaged file kept beside its replacement: `….damaged`, numbered if taken.
fn damaged_name(path: &Path) -> PathBuf {
    let named = |n: usize| {
        let mut name = path.as_os_str().to_owned();
        name.push(if n == 0 {
            ".damaged".to_string()
        } else {
            format!(".damaged.{n}")
        });
        PathBuf::from(name)
    };
    (0..).map(named).find(|p| !p.exists()).expect("a free name")
}

/// Copies the next documents of `docs` (a batch bounded in count and blob bytes) into `new`
/// with the blobs of their leaf revisions, rebuilding their sequence entries; answers how
/// many were kept and the ids of those lost to damage.
fn copy_docs(
    snap: &Snapshot,
    new: &Store,
    docs: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
) -> Result<(u64, Vec<String>)> {
    let (mut lost, mut readable, mut bytes) = (Vec::new(), Vec::new(), 0);
    for (key, value) in docs {
        let id = String::from_utf8_lossy(&key).into_owned();
        match read_doc(snap, &value) {
            Some(doc) => {
                bytes += doc.1.iter().map(Vec::len).sum::<usize>();
                readable.push((id, doc));
            }
            None => lost.push(id),
        }
        if readable.len() >= BATCH || bytes >= BATCH_BYTES {
            break;
        }
    }
    let kept = readable.len() as u64;
    new.update(Durability::Durable, move |txn| -> Result<()> {
        let (mut by_id, mut by_seq) = (Vec::new(), Vec::new());
        for (id, (mut record, blobs)) in readable {
            let mut written = blobs.into_iter().map(|bytes| txn.write_blob(&bytes));
            for node in &mut record.tree.nodes {
                let Some(info) = &mut node.info else { continue };
                if let Body::Blob(blob, _) = &mut info.body {
                    *blob = written.next().expect("one blob read per reference")?;
                }
                for att in &mut info.atts {
                    for chunk in &mut att.chunks {
                        *chunk = written.next().expect("one blob read per reference")?;
                    }
                }
            }
            by_seq.push((record.seq, SeqEntry::of(&id, &record).encode()));
            by_id.push(Action::Put(id.into_bytes(), record.encode()));
        }
        by_seq.sort_by_key(|(seq, _)| *seq);
        txn.apply(BY_ID, &by_id)?;
        txn.apply(
            BY_SEQ,
            &by_seq
                .into_iter()
                .map(|(seq, v)| Action::Put(seq.to_be_bytes().to_vec(), v))
                .collect::<Vec<_>>(),
        )?;
        Ok(())
    })?;
    Ok((kept, lost))
}

/// A document record with the bodies of superseded revisions dropped (as compaction drops
/// them) and the bytes of every blob its leaf revisions name, in the order they are named;
/// `None` if the record or one of those blobs cannot be read.
fn read_doc(snap: &Snapshot, value: &[u8]) -> Option<(DocRecord, Vec<Vec<u8>>)> {
    let mut record = DocRecord::decode(value).ok()?;
    let leaves: std::collections::HashSet<usize> = record.tree.leaves().into_iter().collect();
    let mut blobs = Vec::new();
    for (i, node) in record.tree.nodes.iter_mut().enumerate() {
        if !leaves.contains(&i) {
            node.info = None;
            continue;
        }
        let Some(info) = &node.info else { continue };
        if let Body::Blob(blob, _) = &info.body {
            blobs.push(snap.read_blob(blob).ok()?);
        }
        for att in &info.atts {
            for chunk in &att.chunks {
                blobs.push(snap.read_blob(chunk).ok()?);
            }
        }
    }
    Some((record, blobs))
}

/// What a salvage did to one file.
#[derive(Debug)]
pub enum Salvaged {
    /// A shard rebuilt.
    Shard(ShardSalvage),
    /// A view index deleted (damaged, or its database rebuilt), to be built again.
    IndexDropped,
}

/// Salvages every damaged file of the database in `dir` (see the module documentation);
/// files that check out are left alone. The database must be closed.
pub fn salvage_database(dir: &Path, options: &StoreOptions) -> Result<Vec<(PathBuf, Salvaged)>> {
    let mut done = Vec::new();
    let checked = check_database(dir)?;
    for file in checked
        .iter()
        .filter(|f| !f.scan.intact() && f.path.extension().is_some_and(|e| e == "settee"))
    {
        let report = salvage_shard(&file.path, options)?;
        done.push((file.path.clone(), Salvaged::Shard(report)));
    }
    // A rebuilt shard may hold fewer documents or older revisions than the indexes saw, and
    // no change tells them: every index is built again then, else only damaged ones.
    let rebuilt = !done.is_empty();
    for file in checked.iter().filter(|f| {
        f.path.extension().is_some_and(|e| e == "view") && (rebuilt || !f.scan.intact())
    }) {
        std::fs::remove_file(&file.path).map_err(Error::io("drop a view index"))?;
        done.push((file.path.clone(), Salvaged::IndexDropped));
    }
    Ok(done)
}
