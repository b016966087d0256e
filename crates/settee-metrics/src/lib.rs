//! Node statistics as CouchDB keeps them (`GET /_node/{node}/_stats`, `/_prometheus`):
//! counters, gauges and histograms named by CouchDB's paths.
//!
//! Recording must cost nothing a request would notice, on any number of cores: each thread
//! counts into one of a few stripes (each a block of its own cache lines), so threads on
//! different cores rarely write the same line, and a reading sums the stripes. Histograms
//! keep the latest samples of each stripe in a ring with the second each was taken, and a
//! reading summarises those of the last [`WINDOW_SECS`] seconds, as CouchDB's histograms
//! cover its stats interval.
//!
//! The statistics are the process's: one node per process, as in CouchDB.

mod catalog;
mod histogram;
mod prometheus;
mod render;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

pub use catalog::{Def, Metric, COUNT, DEFS};
pub use histogram::Summary;
pub use prometheus::{prometheus, Sample};
pub use render::{stats, stats_at};

/// What a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A count that moves by increments (CouchDB lets a few move down too).
    Counter,
    /// A value set as it is now.
    Gauge,
    /// A distribution of recent samples.
    Histogram,
}

impl Kind {
    /// CouchDB's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// How many stripes values are spread over.
const STRIPES: usize = 8;

/// The seconds a histogram reading covers (CouchDB's `[stats] interval` default).
pub const WINDOW_SECS: u64 = 10;

/// One stripe of every metric's value, on cache lines of its own.
#[repr(align(128))]
struct Stripe([AtomicU64; COUNT]);

static VALUES: [Stripe; STRIPES] =
    [const { Stripe([const { AtomicU64::new(0) }; COUNT]) }; STRIPES];

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
}

fn stripe() -> usize {
    MY_STRIPE.with(|s| *s)
}

/// Adds one to a counter.
pub fn inc(m: Metric) {
    add(m, 1);
}

/// Adds `n` to a counter.
pub fn add(m: Metric, n: u64) {
    VALUES[stripe()].0[m as usize].fetch_add(n, Ordering::Relaxed);
}

/// Takes one from a counter that counts things present (CouchDB's decremented counters:
/// clients following changes).
pub fn dec(m: Metric) {
    VALUES[stripe()].0[m as usize].fetch_sub(1, Ordering::Relaxed);
}

/// Sets a value read from elsewhere when asked for (open databases, open files, jobs).
pub fn set(m: Metric, v: u64) {
    for (i, s) in VALUES.iter().enumerate() {
        s.0[m as usize].store(if i == 0 { v } else { 0 }, Ordering::Relaxed);
    }
}

/// A counter's or gauge's value now.
pub fn value(m: Metric) -> u64 {
    VALUES.iter().fold(0u64, |sum, s| {
        sum.wrapping_add(s.0[m as usize].load(Ordering::Relaxed))
    })
}

/// Records a sample of a histogram (in the unit its description names: milliseconds for
/// most, microseconds for `fsync/time`, a count for `httpd/bulk_docs`).
pub fn observe(m: Metric, v: f64) {
    histogram::observe(m, stripe(), v);
}

/// A histogram's summary of its samples of the last [`WINDOW_SECS`] seconds.
pub fn summary(m: Metric) -> Summary {
    histogram::summary(m)
}

/// Times what follows until it is dropped, as a sample of `m` in milliseconds.
pub struct Timer {
    metric: Metric,
    started: std::time::Instant,
}

impl Timer {
    /// Starts timing for `m`.
    pub fn start(m: Metric) -> Timer {
        Timer {
            metric: m,
            started: std::time::Instant::now(),
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        observe(self.metric, self.started.elapsed().as_secs_f64() * 1000.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let before = value(Metric::DocumentInserts);
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        inc(Metric::DocumentInserts);
                    }
                });
            }
        });
        assert_eq!(value(Metric::DocumentInserts) - before, 16_000);
    }

    #[test]
    fn decrements_on_other_threads_balance() {
        let before = value(Metric::HttpdClientsRequestingChanges);
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..10 {
                    inc(Metric::HttpdClientsRequestingChanges);
                }
            });
        });
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| dec(Metric::HttpdClientsRequestingChanges));
            }
        });
        assert_eq!(
            value(Metric::HttpdClientsRequestingChanges).wrapping_sub(before),
            7
        );
    }

    #[test]
    fn set_values_replace_what_was_there() {
        set(Metric::OpenOsFiles, 40);
        set(Metric::OpenOsFiles, 12);
        assert_eq!(value(Metric::OpenOsFiles), 12);
    }
}
