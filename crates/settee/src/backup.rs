//! `settee backup` and `settee restore`: runs them and reports what they did.

use std::time::Instant;

/// Runs a backup on a runtime of its own.
pub fn backup(opts: settee_backup::BackupOptions) -> Result<(), String> {
    let started = Instant::now();
    let summary = runtime()?
        .block_on(settee_backup::backup(&opts))
        .map_err(|e| e.to_string())?;
    if summary.already_complete {
        eprintln!("settee: that backup had finished; nothing to do");
        return Ok(());
    }
    let to = opts
        .output
        .map_or_else(|| "standard output".into(), |p| p.display().to_string());
    eprintln!(
        "settee: backed up {} revisions of {} ({} bytes) to {to} in {:.1} s",
        summary.revisions,
        opts.db,
        summary.bytes,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs a restore on a runtime of its own; fails when the database refused a revision.
pub fn restore(opts: settee_backup::RestoreOptions) -> Result<(), String> {
    let started = Instant::now();
    let summary = runtime()?
        .block_on(settee_backup::restore(&opts))
        .map_err(|e| e.to_string())?;
    eprintln!(
        "settee: restored {} revisions into {} in {:.1} s",
        summary.revisions,
        opts.db,
        started.elapsed().as_secs_f64()
    );
    if summary.refused_count == 0 {
        return Ok(());
    }
    for f in &summary.refused {
        eprintln!("settee: {} refused: {}: {}", f.id, f.error, f.reason);
    }
    Err(format!(
        "{} revisions were refused by the database",
        summary.refused_count
    ))
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start: {e}"))
}
