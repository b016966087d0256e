//! `settee bench`: CouchDB's published performance workloads against any CouchDB-compatible
//! server (Settee, Apache CouchDB, pouchdb-server, ...), one server or two side by side, with
//! every answer verified: a fast wrong answer is a failure, not a result.
//!
//! * [`client`]: one keep-alive HTTP/1.1 connection per virtual client.
//! * [`workloads`]: the workloads, each with its published parameters.
//! * [`report`]: results as a table with ratios, or JSON.

#![deny(missing_docs)]

pub mod client;
mod error;
pub mod report;
pub mod workloads;

pub use error::{Error, Result};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Which workloads to run, with their sizes.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Workload 1, single-document reads.
    pub reads: Option<workloads::reads::Params>,
    /// Workloads 2 and 5, view indexing and word count.
    pub views: Option<workloads::views::Params>,
    /// Workload 3, fabric_bench.
    pub fabric: Option<workloads::fabric::Params>,
    /// Workload 4, C10K.
    pub c10k: Option<workloads::c10k::Params>,
    /// Replication: one-shot copies and continuous lag.
    pub replication: Option<workloads::replication::Params>,
    /// Mango: index build, equality and range queries, a full scan.
    pub mango: Option<workloads::mango::Params>,
    /// Full-text search: index build, one-term and phrase queries.
    pub search: Option<workloads::search::Params>,
    /// Durable writes: `_bulk_docs` with sequential and random ids, single-document `PUT`s.
    pub writes: Option<workloads::writes::Params>,
    /// No progress bars (for `--json`).
    pub quiet: bool,
}

fn bar(message: String, quiet: bool) -> ProgressBar {
    let bar = ProgressBar::new(0).with_message(message);
    if let Ok(style) = ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} ({per_sec})") {
        bar.set_style(style);
    }
    if quiet {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}

/// Runs the planned workloads against one server, in order.
pub async fn run(target: &client::Target, plan: &Plan) -> Result<Vec<report::Outcome>> {
    let mut out = Vec::new();
    if let Some(p) = plan.reads {
        let bar = bar(
            format!("single-doc reads on {}", target.display),
            plan.quiet,
        );
        out.push(
            workloads::reads::run(target, p, bar)
                .await
                .map_err(|e| e.context("single-doc reads"))?,
        );
    }
    if let Some(p) = plan.views {
        let bar = bar(
            format!("view workloads on {} (loading)", target.display),
            plan.quiet,
        );
        out.extend(
            workloads::views::run(target, p, bar)
                .await
                .map_err(|e| e.context("view workloads"))?,
        );
    }
    if let Some(p) = &plan.writes {
        let bar = bar(format!("writes on {}", target.display), plan.quiet);
        out.extend(
            workloads::writes::run(target, p, bar)
                .await
                .map_err(|e| e.context("writes"))?,
        );
    }
    if let Some(p) = plan.fabric {
        let bar = bar(format!("fabric_bench on {}", target.display), plan.quiet);
        out.extend(
            workloads::fabric::run(target, p, bar)
                .await
                .map_err(|e| e.context("fabric_bench"))?,
        );
    }
    if let Some(p) = &plan.c10k {
        let bar = bar(format!("C10K on {}", target.display), plan.quiet);
        out.extend(
            workloads::c10k::run(target, p, bar)
                .await
                .map_err(|e| e.context("C10K"))?,
        );
    }
    if let Some(p) = plan.replication {
        let bar = bar(format!("replication on {}", target.display), plan.quiet);
        out.extend(
            workloads::replication::run(target, p, bar)
                .await
                .map_err(|e| e.context("replication"))?,
        );
    }
    if let Some(p) = plan.mango {
        let bar = bar(format!("mango on {}", target.display), plan.quiet);
        out.extend(
            workloads::mango::run(target, p, bar)
                .await
                .map_err(|e| e.context("mango"))?,
        );
    }
    if let Some(p) = plan.search {
        let bar = bar(format!("search on {}", target.display), plan.quiet);
        out.extend(
            workloads::search::run(target, p, bar)
                .await
                .map_err(|e| e.context("search"))?,
        );
    }
    Ok(out)
}
