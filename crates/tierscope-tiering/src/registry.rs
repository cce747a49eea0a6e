//! The one registry of tiering policies, by `type` tag. Adding a policy: a file in
//! `policy/` (config + `impl Policy`), `pub mod` in policy/mod.rs, one arm in each match
//! below and one line in [`POLICIES`].

use crate::policy::colloid::ColloidConfig;
use crate::policy::damos::DamosConfig;
use crate::policy::fixed::Fixed;
use crate::policy::hemem::HememConfig;
use crate::policy::memtis::MemtisConfig;
use crate::policy::oracle::Oracle;
use crate::policy::periodic::{Mode, PeriodicConfig};
use crate::policy::telescope_rule::TelescopeRuleConfig;
use crate::policy::tpp::TppConfig;
use crate::policy::Policy;
use serde::{Deserialize, Serialize};
use tierscope_core::{FieldError, Intervals};

/// What feeds a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// The snapshots of a monitor of accesses (every monitor except write logs): the
    /// policy runs once per such monitor, a grid.
    Accesses,
    /// The per-page sample counts of a `pebs` monitor, or a `nemo` monitor's per-page
    /// counts scaled to PEBS samples (HeMem-NEMO): runs once per such monitor.
    PebsSamples,
    /// The hint faults of a `numa_hint` monitor: runs once per such monitor.
    HintFaults,
    /// The engine's own per-page counts of the window that just ended: runs once.
    TruthHistory,
    /// The coming window's truth, migrations free (the oracle): runs once.
    Lookahead,
    /// Nothing (static placement): runs once.
    Nothing,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum PolicyConfig {
    TelescopeRule(TelescopeRuleConfig),
    Damos(DamosConfig),
    Hemem(HememConfig),
    Memtis(MemtisConfig),
    Colloid(ColloidConfig),
    Tpp(TppConfig),
    Periodic(PeriodicConfig),
    Oracle {},
    Static {},
}

/// Every policy: tag and one line of help.
pub const POLICIES: &[(&str, &str)] = &[
    (
        "telescope-rule",
        "Telescope section 6.3: count > 5, skip regions >= 4 GB, hottest first, 10 GB per window",
    ),
    (
        "damos",
        "DAMOS migrate_hot / migrate_cold schemes, as tables or a damo command line",
    ),
    (
        "hemem",
        "HeMem: PEBS counts per 2 MiB page, hot at 8 samples, cooling at 18, 10 ms loop",
    ),
    (
        "memtis",
        "MEMTIS: log2 histogram threshold sized to the fast tier, 500 ms periods, 100 MB/s",
    ),
    (
        "colloid",
        "Colloid on HeMem's hotness: balance the tiers' loaded latencies (5%, 500 ms quantum)",
    ),
    (
        "tpp",
        "TPP: promote on a NUMA hint fault within 1 s of the scan, demote the oldest \
         promotions to keep 2% of the fast tier free",
    ),
    (
        "periodic",
        "Cori's periodic schedulers: each window, swap the hottest slow pages with the least \
         recently used fast ones (mode history or oracle)",
    ),
    (
        "oracle",
        "the coming window's densest ranges on the fast tier, free migration (a bound for packing)",
    ),
    ("static", "the initial placement, never migrated"),
];

impl PolicyConfig {
    pub fn kind(&self) -> &'static str {
        match self {
            PolicyConfig::TelescopeRule(_) => "telescope-rule",
            PolicyConfig::Damos(_) => "damos",
            PolicyConfig::Hemem(_) => "hemem",
            PolicyConfig::Memtis(_) => "memtis",
            PolicyConfig::Colloid(_) => "colloid",
            PolicyConfig::Tpp(_) => "tpp",
            PolicyConfig::Periodic(_) => "periodic",
            PolicyConfig::Oracle {} => "oracle",
            PolicyConfig::Static {} => "static",
        }
    }

    /// The default configuration of the policy called `kind`.
    pub fn named(kind: &str) -> Option<PolicyConfig> {
        Some(match kind {
            "telescope-rule" => PolicyConfig::TelescopeRule(Default::default()),
            "hemem" => PolicyConfig::Hemem(Default::default()),
            "memtis" => PolicyConfig::Memtis(Default::default()),
            "colloid" => PolicyConfig::Colloid(Default::default()),
            "tpp" => PolicyConfig::Tpp(Default::default()),
            "oracle" => PolicyConfig::Oracle {},
            "static" => PolicyConfig::Static {},
            _ => return None,
        })
    }

    pub fn feed(&self) -> Feed {
        match self {
            PolicyConfig::TelescopeRule(_) | PolicyConfig::Damos(_) => Feed::Accesses,
            PolicyConfig::Hemem(_) | PolicyConfig::Memtis(_) | PolicyConfig::Colloid(_) => {
                Feed::PebsSamples
            }
            PolicyConfig::Tpp(_) => Feed::HintFaults,
            PolicyConfig::Periodic(c) => match c.mode {
                Mode::History => Feed::TruthHistory,
                Mode::Oracle => Feed::Lookahead,
            },
            PolicyConfig::Oracle {} => Feed::Lookahead,
            PolicyConfig::Static {} => Feed::Nothing,
        }
    }

    /// Whether its moves are free (placed directly: no copy, no flush, no stall): only
    /// the oracle bound's.
    pub fn free_moves(&self) -> bool {
        matches!(self, PolicyConfig::Oracle {})
    }

    /// Range checks against a machine of `tiers` tiers; field paths relative to the
    /// policy's table.
    pub fn validate(&self, tiers: usize) -> Result<(), FieldError> {
        match self {
            PolicyConfig::TelescopeRule(c) => c.validate(),
            PolicyConfig::Damos(c) => c.validate(tiers),
            PolicyConfig::Hemem(c) => c.validate(),
            PolicyConfig::Memtis(c) => c.validate(),
            PolicyConfig::Colloid(c) => c.validate(),
            PolicyConfig::Tpp(c) => c.validate(),
            PolicyConfig::Periodic(c) => c.validate(),
            PolicyConfig::Oracle {} | PolicyConfig::Static {} => Ok(()),
        }
    }

    /// The policy, fed by a monitor running at `intervals` (the oracle's and the static
    /// policy's are ignored).
    pub fn build(&self, intervals: Intervals) -> Box<dyn Policy> {
        match self {
            PolicyConfig::TelescopeRule(c) => Box::new(c.build()),
            PolicyConfig::Damos(c) => Box::new(c.build(intervals)),
            PolicyConfig::Hemem(c) => Box::new(c.build()),
            PolicyConfig::Memtis(c) => Box::new(c.build()),
            PolicyConfig::Colloid(c) => Box::new(c.build()),
            PolicyConfig::Tpp(c) => Box::new(c.build()),
            PolicyConfig::Periodic(c) => Box::new(c.build()),
            PolicyConfig::Oracle {} => Box::new(Oracle::new()),
            PolicyConfig::Static {} => Box::new(Fixed),
        }
    }
}
