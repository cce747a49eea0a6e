//! What a monitor's snapshots say, and in what unit: the type a policy's input is checked
//! against when an experiment is parsed. Every monitor emits snapshots of one shape
//! (regions with `nr_accesses`), but the number means different things depending on the
//! technique; a policy names the meanings it can act on, and a monitor that emits another
//! one cannot feed it, whatever either is called.

use serde::Serialize;

/// The meaning and unit of `nr_accesses` in a monitor's snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedKind {
    /// Checks of the region's ACCESSED bits (or an equivalent sampled test) that found it
    /// accessed, out of the aggregation window's `aggr / sample` checks (DAMON, Telescope,
    /// linear scanning, split-hint, the pruned walk).
    AccessChecks,
    /// Sampled memory accesses: one sample per sampling period of events (PEBS), or
    /// counts scaled to that period (NEMO's hot-set counters, as HeMem-NEMO reads them).
    Samples,
    /// Raw values of memory-controller telemetry counters, as a rule written in the
    /// experiment computes them (NEMO rules): their unit is the rule's.
    CounterReads,
    /// NUMA balancing hint faults taken in the window (one per first touch of a page
    /// after its scan).
    HintFaults,
    /// Pages written in the window, from a write log (PML, KVM's dirty log): a write log
    /// sees no reads.
    Writes,
    /// NEMO's MEMTIS telemetry (MEMTIS-NEMO, NEMO §5.2): huge-page regions carry counts
    /// scaled to a sampling period, as `Samples`; base-page (4 KiB) regions carry the exact
    /// accesses of the window to each base page of the huge pages tracked at base-page
    /// granularity in it (raw counts, replacing that huge page's earlier ones). A PEBS-fed
    /// policy that adds snapshots up would mix the two, so it is a kind of its own.
    HugeAndBaseCounts,
}

impl FeedKind {
    /// Every kind, in a fixed order.
    pub const ALL: [FeedKind; 6] = [
        FeedKind::AccessChecks,
        FeedKind::Samples,
        FeedKind::CounterReads,
        FeedKind::HintFaults,
        FeedKind::Writes,
        FeedKind::HugeAndBaseCounts,
    ];

    /// Everything but a write log: what tells how often memory is accessed.
    pub const ACCESSES: &'static [FeedKind] = &[
        FeedKind::AccessChecks,
        FeedKind::Samples,
        FeedKind::CounterReads,
        FeedKind::HintFaults,
    ];

    /// A short description with the unit, for messages and `--help`.
    pub fn describe(self) -> &'static str {
        match self {
            FeedKind::AccessChecks => "access checks per region and window",
            FeedKind::Samples => "sampled accesses (one per sampling period)",
            FeedKind::CounterReads => "raw memory-controller counter reads",
            FeedKind::HintFaults => "NUMA hint faults per window",
            FeedKind::Writes => "pages written per window (a write log)",
            FeedKind::HugeAndBaseCounts => {
                "huge-page counts scaled to samples with a window's per-4 KiB counts of the \
                 huge pages tracked (NEMO's MEMTIS telemetry)"
            }
        }
    }

    /// `kinds` as "a, b or c", for messages.
    pub fn list(kinds: &[FeedKind]) -> String {
        let names: Vec<&str> = kinds.iter().map(|k| k.describe()).collect();
        match names.split_last() {
            None => "nothing".into(),
            Some((last, [])) => (*last).into(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }
}

/// Where a policy's input comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyInput {
    /// A monitor's snapshots of one of these kinds: the policy runs once per such monitor
    /// of the experiment (a grid), or with the ones it names.
    Monitor(&'static [FeedKind]),
    /// The engine's own per-page access counts of the period that just ended (Cori's
    /// history scheduler): runs once.
    EngineHistory,
    /// The coming period's access counts, migration free (the oracle bounds): runs once.
    Lookahead,
    /// Nothing (a static placement): runs once.
    Nothing,
    /// The neighbour tenant's per-tenant counter (`[tiering.neighbour]`), read by the runner
    /// at the policy's interval: one region, the neighbour's heap, `nr_accesses` = its
    /// 64-byte requests since the last read (a throttling policy): runs once.
    TenantCounter,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_english() {
        assert_eq!(FeedKind::list(&[]), "nothing");
        assert_eq!(
            FeedKind::list(&[FeedKind::Samples]),
            "sampled accesses (one per sampling period)"
        );
        let s = FeedKind::list(FeedKind::ACCESSES);
        assert!(s.starts_with("access checks") && s.ends_with(" or NUMA hint faults per window"));
        assert!(!FeedKind::ACCESSES.contains(&FeedKind::Writes));
        assert_eq!(FeedKind::ALL.len(), 6);
    }
}
