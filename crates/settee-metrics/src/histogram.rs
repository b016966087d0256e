//! Histograms: per stripe, a ring of the latest samples, each stamped with the second it was
//! taken; a reading summarises the samples of the last [`WINDOW_SECS`] seconds with the
//! statistics CouchDB reports for a histogram.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use crate::{Kind, Metric, COUNT, DEFS, STRIPES, WINDOW_SECS};

/// Samples kept per stripe.
const RING: usize = 256;

/// The latest samples of one stripe: `(second << 32) | f32 bits`, 0 for an empty slot.
struct Ring {
    next: AtomicUsize,
    slots: [AtomicU64; RING],
}

/// How many metrics are histograms.
const HISTOGRAMS: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < COUNT {
        if matches!(DEFS[i].kind, Kind::Histogram) {
            n += 1;
        }
        i += 1;
    }
    n
};

/// Each metric's histogram number (`usize::MAX` for the others).
const SLOT: [usize; COUNT] = {
    let mut out = [usize::MAX; COUNT];
    let (mut n, mut i) = (0, 0);
    while i < COUNT {
        if matches!(DEFS[i].kind, Kind::Histogram) {
            out[i] = n;
            n += 1;
        }
        i += 1;
    }
    out
};

static RINGS: [[Ring; STRIPES]; HISTOGRAMS] = [const {
    [const {
        Ring {
            next: AtomicUsize::new(0),
            slots: [const { AtomicU64::new(0) }; RING],
        }
    }; STRIPES]
}; HISTOGRAMS];

/// Seconds since the first sample, from 1 (so that no stamp is 0).
fn second() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs() + 1
}

fn rings(m: Metric) -> &'static [Ring; STRIPES] {
    let slot = SLOT[m as usize];
    assert!(slot != usize::MAX, "{m:?} is not a histogram");
    &RINGS[slot]
}

pub(crate) fn observe(m: Metric, stripe: usize, v: f64) {
    let ring = &rings(m)[stripe];
    let at = ring.next.fetch_add(1, Ordering::Relaxed) % RING;
    let bits = u64::from((v as f32).to_bits());
    ring.slots[at].store((second() << 32) | bits, Ordering::Relaxed);
}

/// CouchDB's statistics of a histogram's recent samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// How many samples.
    pub n: u64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// Their mean.
    pub arithmetic_mean: f64,
    /// The n-th root of their product (0 when one is not positive).
    pub geometric_mean: f64,
    /// n over the sum of their inverses (0 when one is not positive).
    pub harmonic_mean: f64,
    /// The 50th percentile.
    pub median: f64,
    /// Sample variance.
    pub variance: f64,
    /// Its square root.
    pub standard_deviation: f64,
    /// Third standardised moment.
    pub skewness: f64,
    /// Fourth standardised moment less 3.
    pub kurtosis: f64,
    /// The 50th, 75th, 90th, 95th, 99th and 99.9th percentiles (as `999`), interpolated.
    pub percentiles: Vec<(u32, f64)>,
    /// Ten equal bins from the smallest to the largest: each bin's upper end and count.
    pub bins: Vec<(f64, u64)>,
}

pub(crate) fn summary(m: Metric) -> Summary {
    let now = second();
    let mut values: Vec<f64> = rings(m)
        .iter()
        .flat_map(|r| r.slots.iter())
        .map(|s| s.load(Ordering::Relaxed))
        .filter(|&s| s != 0 && now - (s >> 32) < WINDOW_SECS)
        .map(|s| f64::from(f32::from_bits(s as u32)))
        .collect();
    values.sort_by(f64::total_cmp);
    summarise(&values)
}

/// The statistics of `sorted` samples.
pub(crate) fn summarise(sorted: &[f64]) -> Summary {
    let n = sorted.len();
    let points = [50u32, 75, 90, 95, 99, 999];
    if n == 0 {
        return Summary {
            percentiles: points.iter().map(|&p| (p, 0.0)).collect(),
            bins: vec![(0.0, 0)],
            ..Summary::default()
        };
    }
    let count = n as f64;
    let mean = sorted.iter().sum::<f64>() / count;
    let moment = |k: i32| sorted.iter().map(|v| (v - mean).powi(k)).sum::<f64>() / count;
    let (m2, m3, m4) = (moment(2), moment(3), moment(4));
    let variance = if n > 1 {
        m2 * count / (count - 1.0)
    } else {
        0.0
    };
    let positive = sorted[0] > 0.0;
    let percentile = |p: f64| {
        let rank = p * (count - 1.0);
        let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
        sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
    };
    Summary {
        n: n as u64,
        min: sorted[0],
        max: sorted[n - 1],
        arithmetic_mean: mean,
        geometric_mean: if positive {
            (sorted.iter().map(|v| v.ln()).sum::<f64>() / count).exp()
        } else {
            0.0
        },
        harmonic_mean: if positive {
            count / sorted.iter().map(|v| 1.0 / v).sum::<f64>()
        } else {
            0.0
        },
        median: percentile(0.5),
        variance,
        standard_deviation: variance.sqrt(),
        skewness: if m2 > 0.0 { m3 / m2.powf(1.5) } else { 0.0 },
        kurtosis: if m2 > 0.0 { m4 / (m2 * m2) - 3.0 } else { 0.0 },
        percentiles: points
            .iter()
            .map(|&p| {
                let q = if p == 999 {
                    0.999
                } else {
                    f64::from(p) / 100.0
                };
                (p, percentile(q))
            })
            .collect(),
        bins: bins(sorted),
    }
}

/// Ten equal bins over the samples' span (one bin when they are all equal).
fn bins(sorted: &[f64]) -> Vec<(f64, u64)> {
    let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
    if max <= min {
        return vec![(max, sorted.len() as u64)];
    }
    let width = (max - min) / 10.0;
    let mut out: Vec<(f64, u64)> = (1..=10).map(|i| (min + width * i as f64, 0)).collect();
    for v in sorted {
        let i = (((v - min) / width) as usize).min(9);
        out[i].1 += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nothing_recorded_reads_as_couchdb_shows_an_idle_histogram() {
        let s = summarise(&[]);
        assert_eq!(s.n, 0);
        assert_eq!(s.bins, [(0.0, 0)]);
        assert_eq!(s.percentiles.len(), 6);
    }

    #[test]
    fn statistics_of_a_known_sample() {
        let s = summarise(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((s.n, s.min, s.max, s.arithmetic_mean), (4, 1.0, 4.0, 2.5));
        assert_eq!(s.median, 2.5);
        assert!((s.variance - 5.0 / 3.0).abs() < 1e-12);
        assert!((s.harmonic_mean - 4.0 / (1.0 + 0.5 + 1.0 / 3.0 + 0.25)).abs() < 1e-12);
        assert!((s.geometric_mean - 24f64.powf(0.25)).abs() < 1e-12);
        assert_eq!(s.percentiles[1], (75, 3.25));
        assert_eq!(s.bins.iter().map(|b| b.1).sum::<u64>(), 4);
    }

    #[test]
    fn samples_recorded_are_summarised_until_they_age_out() {
        for v in [5.0, 1.0, 3.0] {
            observe(Metric::DbOpenTime, 0, v);
        }
        observe(Metric::DbOpenTime, 3, 7.0);
        let s = summary(Metric::DbOpenTime);
        assert_eq!((s.n, s.min, s.max), (4, 1.0, 7.0));
    }

    proptest! {
        /// Percentiles rise with their rank and stay within the samples; every sample is in
        /// one bin.
        #[test]
        fn percentiles_are_ordered_and_bins_hold_every_sample(
            mut v in proptest::collection::vec(0.0f64..1e6, 1..200)
        ) {
            v.sort_by(f64::total_cmp);
            let s = summarise(&v);
            let ps: Vec<f64> = s.percentiles.iter().map(|p| p.1).collect();
            prop_assert!(ps.windows(2).all(|w| w[0] <= w[1]));
            prop_assert!(ps[0] >= s.min && ps[5] <= s.max);
            prop_assert_eq!(s.bins.iter().map(|b| b.1).sum::<u64>(), v.len() as u64);
            prop_assert!(s.min <= s.arithmetic_mean && s.arithmetic_mean <= s.max);
        }
    }
}
