//! A run's `cost` output: core's generic counters, then every counter a registered monitor
//! or engine declares (`tierscope_core::OpCounter`), zero where the run never charged it,
//! so every monitor of every run lists the same keys (metrics.json, the Python result).

use serde::{Serialize, Serializer};
use std::sync::OnceLock;
use tierscope_core::{CostCounters, OpCounter};
use tierscope_monitors::MonitorConfig;

/// Counters the engines charge themselves (the simulated PML's log-full exits, the
/// statistical engine's window sampling's flips its counts do not vouch for). A monitor
/// declares its own in its file ([`tierscope_monitors::registry::Technique::counters`]).
const ENGINE_COUNTERS: [&OpCounter; 2] = [
    &tierscope_sim::pml::PML_EXITS,
    &tierscope_sim::stat::engine::BITS_CLEARED_UNSURE,
];

/// Every technique counter a run's output lists: the monitors' in registry order, then the
/// engines'.
pub fn listed_counters() -> &'static [&'static OpCounter] {
    static LISTED: OnceLock<Vec<&'static OpCounter>> = OnceLock::new();
    LISTED.get_or_init(|| {
        let mut all = MonitorConfig::counters();
        all.extend(ENGINE_COUNTERS);
        all
    })
}

/// `cost` as a run's output lists it (for `#[serde(serialize_with)]`).
pub fn serialize<S: Serializer>(cost: &CostCounters, serializer: S) -> Result<S::Ok, S::Error> {
    cost.serialize_listing(listed_counters(), serializer)
}

/// A borrowed [`CostCounters`] that serializes as a run's output lists it.
pub struct Listed<'a>(pub &'a CostCounters);

impl Serialize for Listed<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize(self.0, serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::cost::GENERIC_COUNTERS;

    #[test]
    fn every_counter_has_its_own_name() {
        let mut names: Vec<&str> = GENERIC_COUNTERS.to_vec();
        names.extend(listed_counters().iter().map(|c| c.name));
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        // The keys metrics.json and the Python result have always had (compare, the
        // sweep tables and the docs read them by name).
        let mut want = vec![
            "entries_read",
            "walk_steps",
            "clear_ops",
            "bits_cleared",
            "flushes_page",
            "flushes_full",
            "region_visits",
            "random_draws",
            "regions_split",
            "regions_merged",
            "pmu_interrupts",
            "pmu_samples",
            "pmu_throttled",
            "scan_pages",
            "scan_batches",
            "scan_sleeps",
            "log_pages",
            "hint_faults",
            "nemo_state_reads",
            "nemo_translation_writes",
            "nemo_interrupts",
            "pml_exits",
            "bits_cleared_unsure",
        ];
        want.sort_unstable();
        assert_eq!(unique, want);
    }

    #[test]
    fn an_unused_counter_is_listed_as_zero_and_a_charged_one_with_its_count() {
        let mut c = CostCounters::default();
        c.charge(&tierscope_monitors::pebs::PMU_SAMPLES, 9);
        let v = serde_json::to_value(Listed(&c)).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), GENERIC_COUNTERS.len() + listed_counters().len());
        assert_eq!(v["pmu_samples"], 9);
        assert_eq!(v["pml_exits"], 0);
        assert_eq!(v["nemo_interrupts"], 0);
        assert_eq!(v["entries_read"], 0);
    }
}
