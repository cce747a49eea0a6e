//! Configuration shared by several techniques: DAMON's region attributes (DAMON,
//! Telescope, split-hint) and the flush policy (DAMON, Telescope, scans).

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
