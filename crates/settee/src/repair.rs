//! `settee check` and `settee salvage`: verifying a data directory's files and rebuilding
//! damaged databases from what can still be read (the work is `settee_db`'s; this prints it).

use std::path::{Path, PathBuf};

use settee_db::{FileCheck, Salvaged, ShardSalvage};
use settee_store::{format::RecordKind, FileScan};

/// Databases of the data directory, or the one named.
fn databases(data: &Path, only: Option<&str>) -> Result<Vec<(String, PathBuf)>, String> {
    if let Some(name) = only {
        let dir = settee_db::database_dir(data, name);
        return if dir.is_dir() {
            Ok(vec![(name.to_string(), dir)])
        } else {
            Err(format!("no database {name} in {}", data.display()))
        };
    }
    let root = data.join("dbs");
    let entries =
        std::fs::read_dir(&root).map_err(|e| format!("reading {}: {e}", root.display()))?;
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| {
            (
                e.file_name().to_string_lossy().replace("%2F", "/"),
                e.path(),
            )
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Verifies every record and commit of every store file; true when all check out.
pub fn check(data: &Path, only: Option<&str>) -> Result<bool, String> {
    let (mut files, mut damaged) = (0, 0);
    for (name, dir) in databases(data, only)? {
        for FileCheck { path, scan } in
            settee_db::check_database(&dir).map_err(|e| format!("{name}: {e}"))?
        {
            files += 1;
            if !scan.intact() {
                damaged += 1;
                println!("{}: damaged", path.display());
                report_scan(&scan);
            }
        }
    }
    println!(
        "checked {files} files in {}: {}",
        data.display(),
        if damaged == 0 {
            "all intact".to_string()
        } else {
            format!("{damaged} damaged")
        }
    );
    Ok(damaged == 0)
}

fn kind_name(kind: Option<RecordKind>) -> &'static str {
    match kind {
        Some(RecordKind::Leaf) => "leaf node",
        Some(RecordKind::Inner) => "inner node",
        Some(RecordKind::Blob | RecordKind::BlobLz4) => "blob",
        Some(RecordKind::Log) => "log record",
        None => "record",
    }
}

fn report_scan(scan: &FileScan) {
    for r in scan.records.iter().filter(|r| !r.intact) {
        println!(
            "  {} at offset {}: checksum mismatch",
            kind_name(r.kind),
            r.offset
        );
    }
    for (from, to) in &scan.unreadable {
        println!("  unreadable bytes from offset {from} to {to}");
    }
    for h in scan.headers.iter().filter(|h| !h.region_intact) {
        println!(
            "  commit {} (header at offset {}): its bytes no longer match its checksum",
            h.generation, h.offset
        );
    }
    if let Some(at) = scan.dropped_commit {
        println!("  the last commit (header at offset {at}) does not check out: a crash cut it short, or it was damaged since; opening drops it");
    }
}

/// Rebuilds the damaged files of database `name` (the server must be stopped).
pub fn salvage(data: &Path, name: &str) -> Result<(), String> {
    let (_, dir) = databases(data, Some(name))?.pop().expect("one database");
    let options = settee_store::StoreOptions::default();
    let done = settee_db::salvage_database(&dir, &options).map_err(|e| match e.to_string() {
        m if m.contains("another writer") => {
            format!("{name} is open in a running server; stop it first")
        }
        m => format!("{name}: {m}"),
    })?;
    if done.is_empty() {
        println!("{name}: every file checks out; nothing to salvage");
    }
    for (path, what) in done {
        match what {
            Salvaged::IndexDropped => println!("{}: view index deleted (damaged, or its database rebuilt); it is built again on the next query", path.display()),
            Salvaged::Shard(report) => report_salvage(&path, &report),
        }
    }
    Ok(())
}

fn report_salvage(path: &Path, r: &ShardSalvage) {
    println!(
        "{}: rebuilt with {} documents (the damaged file is kept as {}.damaged)",
        path.display(),
        r.kept,
        path.display()
    );
    let end = |k: &Option<String>, open: &str| k.clone().unwrap_or_else(|| open.to_string());
    for (after, up_to, n) in &r.lost_ranges {
        println!(
            "  lost {n} documents with ids after {} up to {}",
            end(after, "the first"),
            end(up_to, "the last")
        );
    }
    for id in &r.lost_docs {
        println!("  lost document {id} (a body or attachment was damaged)");
    }
    if r.lost_local > 0 {
        println!("  lost {} local documents", r.lost_local);
    }
    for d in &r.damage {
        println!("  damaged record at offset {}: {}", d.offset, d.what);
    }
}
