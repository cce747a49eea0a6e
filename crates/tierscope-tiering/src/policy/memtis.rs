//! MEMTIS (SOSP'23): PEBS samples counted per page; every 500 ms the hot threshold is
//! re-chosen from a log2 histogram of the counts (16 bins, filled from the hottest down
//! until the fast tier's capacity is reached); pages at or above it are promoted, fast
//! pages below it demoted, at most 100 MB/s; counts are halved every 2,000,000 samples.
//! MEMTIS's huge-page split by skewness is not modelled yet (docs/TIERING.md).
//!
//! Fed by a `pebs` monitor (the `pebs-memtis` preset: period 199, every sampled bin).

use super::counts::PageCounts;
use super::{promote_with_room, Policy, View};
use crate::migration::Move;
use tierscope_core::units::{Duration, Size};
use tierscope_core::{FieldError, Nanos, Snapshot};

/// Bins of the count histogram.
const BINS: usize = 16;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemtisConfig {
    pub period: Duration,
    /// Samples between two coolings.
    pub cooling_samples: u64,
    /// Migration bytes per second at most.
    pub max_rate: Size,
    pub page: Size,
}

impl Default for MemtisConfig {
    fn default() -> Self {
        MemtisConfig {
            period: Duration(500_000_000),
            cooling_samples: 2_000_000,
            max_rate: Size(100_000_000),
            page: Size(2 << 20),
        }
    }
}

impl MemtisConfig {
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.period.0 == 0 {
            return Err(FieldError::new("period", "must be positive"));
        }
        if self.cooling_samples == 0 {
            return Err(FieldError::new("cooling_samples", "must be positive"));
        }
        if self.page.0 < 4096 || !self.page.0.is_power_of_two() {
            return Err(FieldError::new(
                "page",
                "must be a power of two of at least 4KiB",
            ));
        }
        Ok(())
    }

    pub fn build(&self) -> Memtis {
        Memtis {
            config: self.clone(),
            counts: PageCounts::default(),
            next: self.period.0,
        }
    }
}

pub struct Memtis {
    config: MemtisConfig,
    counts: PageCounts,
    next: Nanos,
}

fn bin(count: u64) -> usize {
    ((64 - count.leading_zeros()) as usize).min(BINS - 1)
}

impl Memtis {
    /// The lowest count whose bin and every hotter one fit in `capacity` bytes.
    fn threshold(&self, capacity: u64) -> u64 {
        let mut bytes = [0u64; BINS];
        for (&s, &(e, c)) in &self.counts.pages {
            bytes[bin(c)] += e - s;
        }
        let mut total = 0u64;
        let mut lowest = BINS;
        for b in (1..BINS).rev() {
            if bytes[b] == 0 {
                // An empty bin must not lower the threshold past the pages it would admit.
                continue;
            }
            if total + bytes[b] > capacity {
                break;
            }
            total += bytes[b];
            lowest = b;
        }
        if lowest == BINS {
            u64::MAX
        } else {
            // Bin b holds counts in [2^(b-1), 2^b).
            1u64 << (lowest - 1)
        }
    }
}

impl Policy for Memtis {
    fn observe(&mut self, snapshot: &Snapshot) {
        self.counts.add(snapshot);
        if self.counts.since_cooling >= self.config.cooling_samples {
            self.counts.cool();
        }
    }

    fn next_action(&self) -> Nanos {
        self.next
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        self.next = view.now + self.config.period.0;
        let threshold = self.threshold(view.tiers[0].capacity);
        if threshold == u64::MAX {
            return;
        }
        let hot = self.counts.hot(threshold);
        let cold = self
            .counts
            .cold_on_fast(view, self.config.page.0, threshold);
        let budget = (self.config.max_rate.0 as f64 * self.config.period.0 as f64 * 1e-9) as u64;
        promote_with_room(view, &hot, &cold, budget.max(self.config.page.0), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::RegionReport;

    #[test]
    fn threshold_fills_the_fast_tier_from_the_hottest_bin_down() {
        let mut m = MemtisConfig::default().build();
        let mib2 = 2u64 << 20;
        let region = |i: u64, n: u32| RegionReport {
            start: i * mib2,
            end: (i + 1) * mib2,
            nr_accesses: n,
            age: 0,
        };
        // 2 pages at 40 samples (bin 6), 3 at 10 (bin 4), 10 at 1 (bin 1).
        let mut regions = vec![region(0, 40), region(1, 40)];
        regions.extend((2..5).map(|i| region(i, 10)));
        regions.extend((5..15).map(|i| region(i, 1)));
        m.observe(&Snapshot {
            start: 0,
            end: 1,
            regions,
        });
        assert_eq!(m.threshold(2 * mib2), 32, "only bin 6 fits");
        assert_eq!(m.threshold(5 * mib2), 8, "bins 6 and 4");
        assert_eq!(m.threshold(15 * mib2), 1, "everything");
        assert_eq!(m.threshold(mib2), u64::MAX, "not even the hottest bin");
    }
}
