//! Configuration shared by several techniques: DAMON's region attributes (DAMON,
//! Telescope, split-hint), the flush policy (DAMON, Telescope, scans) and how samples are
//! read (DAMON, Telescope).

use serde::{Deserialize, Serialize};
use tierscope_core::FieldError;

/// DAMON's monitoring attributes, shared by the techniques built on its regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionAttrs {
    pub sample: u64,
    pub aggr: u64,
    pub ops_update: u64,
    pub min_nr_regions: u32,
    pub max_nr_regions: u32,
}

impl RegionAttrs {
    /// Range checks; `aggr` is named as the field that sets it in configs that derive
    /// it (split-hint's `window_samples`).
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.sample == 0 {
            return Err(FieldError::new("sample", "must be positive"));
        }
        if self.aggr < self.sample {
            return Err(FieldError::new(
                "aggr",
                format!(
                    "must be at least the sampling interval ({} ns < {} ns)",
                    self.aggr, self.sample
                ),
            ));
        }
        if self.ops_update == 0 {
            return Err(FieldError::new("ops_update", "must be positive"));
        }
        if self.min_nr_regions < 3 {
            return Err(FieldError::new(
                "min_nr_regions",
                format!("must be at least 3 (got {})", self.min_nr_regions),
            ));
        }
        if self.max_nr_regions < self.min_nr_regions {
            return Err(FieldError::new(
                "max_nr_regions",
                format!(
                    "must be at least min_nr_regions ({} < {})",
                    self.max_nr_regions, self.min_nr_regions
                ),
            ));
        }
        Ok(())
    }
}

/// Whether a technique invalidates cached translations after clearing an ACCESSED bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlushPolicy {
    /// Never flush (what DAMON does at the leaf).
    None,
    /// Flush the span of every cleared non-leaf entry (a range flush: a full flush when the
    /// span exceeds the kernel's 33-page ceiling); leaf clears are not flushed.
    Upper,
    /// Flush after every clear, leaf included.
    All,
}

/// How a region sampler's samples are read (DAMON, Telescope).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sampling {
    /// [`Sampling::Window`] where the technique's other settings allow it (each technique
    /// says which: [`Sampling::by_window`]), else [`Sampling::Each`]: window sampling gives
    /// the per-sample counts' distribution (docs/models/FIDELITY.md, "DAMON's window
    /// sampling", "Telescope's window sampling") at a fraction of the cost.
    #[default]
    Auto,
    /// Every sample clears (and, if the technique flushes, flushes) and reads its entry.
    Each,
    /// An engine that can estimates each region's count per aggregation window.
    Window,
}

impl Sampling {
    /// Whether an engine that offers it draws whole windows at once, `window_allowed`
    /// being whether the technique's other settings let `auto` choose that.
    pub fn by_window(self, window_allowed: bool) -> bool {
        match self {
            Sampling::Auto => window_allowed,
            Sampling::Each => false,
            Sampling::Window => true,
        }
    }
}
