//! HeMem (SOSP'21) as Colloid's fork runs it: PEBS samples counted per 2 MiB page, hot at
//! 8 sampled reads (or 4 writes), every count halved when one exceeds the cooling
//! threshold (18), a policy loop every 10 ms that promotes hot pages from the slow tier,
//! demoting the coldest fast pages to make room, up to 10 GB per loop.
//!
//! Fed by a `pebs` monitor whose window is the loop (the `pebs-hemem` preset: period
//! 5003, 10 ms windows, every sampled bin reported). A snapshot carries sample counts
//! without HeMem's load / store split, so the read threshold applies to all samples when
//! the monitor samples loads (or both), the write threshold when it samples stores only.

use super::counts::PageCounts;
use super::{due_if, promote_with_room, Policy, View};
use crate::migration::Move;
use tierscope_core::units::Size;
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::{FeedKind, PolicyInput, FieldError, Nanos, Snapshot};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HememConfig {
    /// Samples that make a page hot.
    pub hot_threshold: u64,
    /// When a page's count exceeds this, every count is halved.
    pub cooling_threshold: u64,
    /// Bytes promoted per loop at most.
    pub max_per_loop: Size,
    /// Page size HeMem manages.
    pub page: Size,
}

impl Default for HememConfig {
    fn default() -> Self {
        HememConfig {
            hot_threshold: 8,
            cooling_threshold: 18,
            max_per_loop: Size(10_000_000_000),
            page: Size(2 << 20),
        }
    }
}

impl PolicyTechnique for HememConfig {
    const HELP: &'static str =
        "HeMem: PEBS counts per 2 MiB page, hot at 8 samples, cooling at 18, 10 ms loop";

    fn by_name() -> Option<Self> {
        Some(Self::default())
    }

    fn input(&self) -> PolicyInput {
        PolicyInput::Monitor(&[FeedKind::Samples])
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        if self.hot_threshold == 0 || self.cooling_threshold < self.hot_threshold {
            return Err(FieldError::new(
                "cooling_threshold",
                "expected 1 <= hot_threshold <= cooling_threshold",
            ));
        }
        if self.page.0 < 4096 || !self.page.0.is_power_of_two() {
            return Err(FieldError::new(
                "page",
                "must be a power of two of at least 4KiB",
            ));
        }
        Ok(())
    }

    fn policy(&self, _: &PolicyContext) -> Box<dyn Policy> {
        Box::new(Hemem {
            config: self.clone(),
            counts: PageCounts::default(),
            fresh: false,
        })
    }
}

pub struct Hemem {
    config: HememConfig,
    counts: PageCounts,
    fresh: bool,
}

impl Policy for Hemem {
    fn observe(&mut self, snapshot: &Snapshot) {
        self.counts.add(snapshot);
        if self.counts.max() > self.config.cooling_threshold {
            self.counts.cool();
        }
        self.fresh = true;
    }

    fn next_action(&self) -> Nanos {
        due_if(self.fresh)
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        self.fresh = false;
        let c = &self.config;
        let hot = self.counts.hot(c.hot_threshold);
        if hot.is_empty() {
            return;
        }
        let cold = self.counts.cold_on_fast(view, c.page.0, c.hot_threshold);
        promote_with_room(view, &hot, &cold, c.max_per_loop.0, out);
    }
}
