//! What the node knows about itself for `_stats`, `_prometheus` and `_system`: the gauges
//! read when asked (open databases, open files) and the process's figures (uptime, memory,
//! threads, context switches, I/O), from `/proc` where the system has it.

use std::sync::OnceLock;
use std::time::Instant;

use serde_json::{json, Value};
use settee_metrics::{set, Metric, Sample};

use crate::Node;

/// When the process started serving (the first time anyone asked).
fn started() -> Instant {
    static STARTED: OnceLock<Instant> = OnceLock::new();
    *STARTED.get_or_init(Instant::now)
}

/// The versions CouchDB's `/_node/{node}/_versions` gives that mean something here: the
/// JavaScript engine and the collation library (there is no Erlang).
pub fn versions() -> Value {
    let (library, version) = settee_json::collate::COLLATION_LIBRARY;
    json!({
        "javascript_engine": {"name": "quickjs", "version": settee_js::engine_version()},
        "collation_driver": {"name": library, "library_version": version},
    })
}

/// Marks the start of the node's uptime.
pub(crate) fn mark_start() {
    started();
}

/// Seconds since the node started.
pub fn uptime() -> u64 {
    started().elapsed().as_secs()
}

/// Open file descriptors of the process (0 where `/proc` is not there).
pub fn open_files() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// A `Name: value` line of `/proc/self/status`, as a number.
fn status_field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The process's figures from `/proc/self` (zeros where it is not there).
struct Process {
    resident_bytes: u64,
    threads: u64,
    context_switches: u64,
    read_bytes: u64,
    written_bytes: u64,
}

fn process() -> Process {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    Process {
        resident_bytes: status_field(&status, "VmRSS") * 1024,
        threads: status_field(&status, "Threads"),
        context_switches: status_field(&status, "voluntary_ctxt_switches")
            + status_field(&status, "nonvoluntary_ctxt_switches"),
        read_bytes: status_field(&io, "rchar"),
        written_bytes: status_field(&io, "wchar"),
    }
}

impl Node {
    /// Sets the gauges that are read rather than counted: open databases and open files.
    pub fn sample_stats(&self) {
        set(Metric::OpenDatabases, self.catalog.open_count() as u64);
        set(Metric::OpenOsFiles, open_files());
    }

    /// `GET /_node/{node}/_system`: CouchDB's fields that have a meaning here. Memory is the
    /// process's resident memory; `run_queue` the tasks waiting in the request runtime's
    /// global queue; `process_count` the process's threads; `os_proc_count` the external
    /// query server processes; `open_os_files` (not CouchDB's) the open descriptors.
    pub fn system(&self, run_queue: u64) -> Value {
        let p = process();
        json!({
            "uptime": uptime(),
            "memory": {"processes": p.resident_bytes, "processes_used": p.resident_bytes},
            "run_queue": run_queue,
            "context_switches": p.context_switches,
            "io_input": p.read_bytes,
            "io_output": p.written_bytes,
            "os_proc_count": settee_queryserver::alive(),
            "process_count": p.threads,
            "internal_replication_jobs": 0,
            "distribution": {},
            "open_os_files": open_files(),
        })
    }

    /// The samples `_prometheus` adds to the metrics, under CouchDB's names where the
    /// figure means the same here: uptime, one node, no internal replication, and the
    /// process's resident memory, threads, context switches and I/O (CouchDB's `erlang_…`
    /// names, whose dashboards read them as the server's).
    pub fn prometheus_samples(&self, run_queue: u64) -> Vec<Sample> {
        let p = process();
        let one = |name: &str, kind: &'static str, help: &str, value: u64| Sample {
            name: name.into(),
            kind,
            help: help.into(),
            labels: Vec::new(),
            value: value as f64,
        };
        let labelled = |name: &str, help: &str, label: (&str, &str), value: u64| Sample {
            labels: vec![(label.0.into(), label.1.into())],
            ..one(name, "gauge", help, value)
        };
        vec![
            one("uptime_seconds", "counter", "uptime of the node", uptime()),
            one(
                "internal_replication_jobs",
                "gauge",
                "count of internal replication changes to process",
                0,
            ),
            labelled(
                "membership",
                "count of nodes in the cluster",
                ("nodes", "all_nodes"),
                1,
            ),
            labelled(
                "membership",
                "count of nodes in the cluster",
                ("nodes", "cluster_nodes"),
                1,
            ),
            labelled(
                "erlang_memory_bytes",
                "the process's resident memory",
                ("memory_type", "total"),
                p.resident_bytes,
            ),
            one(
                "erlang_processes",
                "gauge",
                "the number of the server's threads",
                p.threads,
            ),
            one(
                "erlang_scheduler_queues",
                "gauge",
                "tasks waiting in the request runtime's queue",
                run_queue,
            ),
            one(
                "erlang_context_switches_total",
                "counter",
                "total number of context switches",
                p.context_switches,
            ),
            one(
                "erlang_io_recv_bytes_total",
                "counter",
                "the total number of bytes the process read",
                p.read_bytes,
            ),
            one(
                "erlang_io_sent_bytes_total",
                "counter",
                "the total number of bytes the process wrote",
                p.written_bytes,
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_read_by_name() {
        let status = "Name:\tx\nThreads:\t7\nVmRSS:\t  2048 kB\n";
        assert_eq!(status_field(status, "Threads"), 7);
        assert_eq!(status_field(status, "VmRSS"), 2048);
        assert_eq!(status_field(status, "Nothing"), 0);
        assert!(open_files() > 0, "this process has files open");
    }
}
