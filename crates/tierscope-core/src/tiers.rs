//! Memory tiers: what each tier is (capacity, idle latency, bandwidth, how latency grows
//! with load), where the workload's pages sit ([`crate::Placement`]), and the [`Tiers`]
//! capability through which a tiering policy's migrations reach a machine.
//!
//! The preset constants and the loaded-latency shape are documented with their sources in
//! docs/models/TIERING.md.

use crate::addr::AddrRange;
use crate::placement::Placement;

/// Most tiers a machine has (experiments are checked against it).
pub const MAX_TIERS: usize = 8;

/// Utilisation above which the loaded-latency curve stops growing: the queueing term is
/// finite, so a saturated tier is very slow rather than infinitely slow (the performance
/// model lengthens the window instead, until the tier's traffic fits its bandwidth).
pub const MAX_UTILISATION: f64 = 0.99;

/// One memory tier.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TierSpec {
    pub name: String,
    /// Bytes of the workload's memory the tier can hold.
    pub capacity: u64,
    /// Idle load-to-use latency of a last-level-cache miss served here, ns.
    pub latency_ns: f64,
    /// Peak bandwidth, bytes per second (reads and writes together).
    pub bandwidth: f64,
    /// Queueing coefficient `k` of the loaded-latency curve
    /// `latency(u) = latency_ns * (1 + k * u / (1 - u))`, `u` the utilisation.
    pub queueing: f64,
    /// Bytes per second other tenants move on the tier (an antagonist): part of its
    /// utilisation, never of the workload's accesses.
    #[serde(default)]
    pub background: f64,
}

impl TierSpec {
    /// Latency at utilisation `u` (traffic / bandwidth), ns: flat while the tier is
    /// lightly loaded, rising steeply towards saturation like an M/M/1 queue's waiting
    /// time.
    pub fn loaded_latency(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, MAX_UTILISATION);
        self.latency_ns * (1.0 + self.queueing * u / (1.0 - u))
    }
}

/// A named tier with its constants; capacity is set by the experiment.
#[derive(Debug, Clone, Copy)]
pub struct TierPreset {
    pub name: &'static str,
    pub latency_ns: f64,
    /// Bytes per second.
    pub bandwidth: f64,
    pub queueing: f64,
    /// Where the numbers come from, for `--help` and docs.
    pub source: &'static str,
}

impl TierPreset {
    /// The preset as a tier of `capacity` bytes with no antagonist.
    pub fn spec(&self, capacity: u64) -> TierSpec {
        TierSpec {
            name: self.name.into(),
            capacity,
            latency_ns: self.latency_ns,
            bandwidth: self.bandwidth,
            queueing: self.queueing,
            background: 0.0,
        }
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// The queueing coefficient of every preset: latency 1.1x idle at 50 % utilisation, 1.9x
/// at 90 %, about 11x at saturation (docs/models/TIERING.md, the loaded-latency curve).
pub const DEFAULT_QUEUEING: f64 = 0.1;

pub const TIER_PRESETS: &[TierPreset] = &[
    TierPreset {
        name: "dram",
        latency_ns: 114.0,
        bandwidth: 114.9 * GIB,
        queueing: DEFAULT_QUEUEING,
        source: "local DRAM as NEMO measured it (114 ns, 114.9 GiB/s)",
    },
    TierPreset {
        name: "cxl",
        latency_ns: 380.0,
        bandwidth: 16.4 * GIB,
        queueing: DEFAULT_QUEUEING,
        source: "CXL-attached DRAM as NEMO measured it (380 ns, 16.4 GiB/s)",
    },
    TierPreset {
        name: "pmem",
        latency_ns: 305.0,
        bandwidth: 39.4e9,
        queueing: DEFAULT_QUEUEING,
        source: "Optane DC PMM, 6 DIMMs, random-load latency and read bandwidth \
                 (Izraelevitz et al., 2019)",
    },
    TierPreset {
        name: "numa",
        latency_ns: 186.0,
        bandwidth: 34e9,
        queueing: DEFAULT_QUEUEING,
        source: "a remote socket's DRAM: 1.63x the dram preset's latency and 34 GB/s of \
                 remote reads over two UPI links (docs/models/TIERING.md gives the measurements)",
    },
    TierPreset {
        name: "cori-fast",
        latency_ns: 50.0,
        bandwidth: 10e9,
        queueing: 0.0,
        source: "cori-sim's fast tier (50 ns, 10 GB/s, no loaded latency)",
    },
    TierPreset {
        name: "cori-slow",
        latency_ns: 150.0,
        bandwidth: 3.7e9,
        queueing: 0.0,
        source: "cori-sim's slow tier (3x latency, 0.37x bandwidth)",
    },
];

/// The preset called `name`.
pub fn tier_preset(name: &str) -> Option<&'static TierPreset> {
    TIER_PRESETS.iter().find(|p| p.name == name)
}

/// Where the workload's pages are before any policy acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitialPlacement {
    /// In first-touch order into the fastest tier until it is full, then the next: the
    /// workload's regions in the order it lists them (MASIM initialises them in that order
    /// at start-up), each from its start.
    #[default]
    FirstTouchFast,
    /// 2 MiB granules round-robin over the tiers that still have room.
    Interleaved,
    /// Everything on the slowest tier.
    AllSlow,
    /// Everything on the fastest tier, capacity ignored: the upper bound runs.
    AllFast,
}

impl InitialPlacement {
    pub const NAMES: [&'static str; 4] =
        ["first-touch-fast", "interleaved", "all-slow", "all-fast"];
}

/// Granule of interleaved placement.
pub const INTERLEAVE_GRANULE: u64 = 2 << 20;

/// The tiers of a machine and how its heap starts out on them.
#[derive(Debug, Clone, PartialEq)]
pub struct TierSetup {
    pub tiers: Vec<TierSpec>,
    pub initial: InitialPlacement,
}

impl TierSetup {
    /// The placement of `heap` before any migration; `touch_order` lists the workload's
    /// regions in the order it first touches them.
    pub fn initial_placement(&self, heap: AddrRange, touch_order: &[AddrRange]) -> Placement {
        let n = self.tiers.len();
        let last = (n - 1) as u8;
        match self.initial {
            InitialPlacement::AllSlow => Placement::new(heap, last, n),
            InitialPlacement::AllFast => Placement::new(heap, 0, n),
            InitialPlacement::FirstTouchFast => {
                let mut p = Placement::new(heap, last, n);
                let mut tier = 0;
                let mut room = self.tiers[0].capacity;
                for r in touch_order {
                    let mut at = r.start;
                    while at < r.end && tier < n - 1 {
                        let end = at.saturating_add(room & !4095).min(r.end);
                        p.set(AddrRange::new(at, end), tier as u8);
                        room -= end - at;
                        at = end;
                        if room < 4096 {
                            tier += 1;
                            room = self.tiers[tier].capacity;
                        }
                    }
                }
                p
            }
            InitialPlacement::Interleaved => {
                let mut p = Placement::new(heap, last, n);
                let mut room: Vec<u64> = self.tiers.iter().map(|t| t.capacity).collect();
                let mut at = heap.start;
                let mut t = 0;
                while at < heap.end {
                    let end = ((at / INTERLEAVE_GRANULE + 1) * INTERLEAVE_GRANULE).min(heap.end);
                    // The next tier with room for this granule (the last tier always
                    // takes it: validation made it hold the heap).
                    let mut k = 0;
                    while k < n - 1 && room[t] < end - at {
                        t = (t + 1) % n;
                        k += 1;
                    }
                    let tier = if room[t] >= end - at { t } else { n - 1 };
                    room[tier] = room[tier].saturating_sub(end - at);
                    p.set(AddrRange::new(at, end), tier as u8);
                    at = end;
                    t = (tier + 1) % n;
                }
                p
            }
        }
    }
}

/// Accesses a tier served: expected counts on the statistical engine, hence `f64`.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TierTraffic {
    pub reads: f64,
    pub writes: f64,
}

impl TierTraffic {
    pub fn total(&self) -> f64 {
        self.reads + self.writes
    }
}

/// Memory tiers with a placement the tiering engine may change ([`crate::Capability::Tiers`]).
pub trait Tiers {
    fn specs(&self) -> &[TierSpec];

    fn placement(&self) -> &Placement;

    /// Puts the pages of `r` on `tier` (the remap after a copy); returns the bytes that
    /// changed tier. Costs and flushes are the migration engine's to charge and issue.
    fn place(&mut self, r: AddrRange, tier: u8) -> u64;

    /// Adds the accesses each tier served since the last call to `out` (one entry per
    /// tier) and restarts the count.
    fn take_traffic(&mut self, out: &mut [TierTraffic]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(initial: InitialPlacement, fast: u64) -> TierSetup {
        let mk = |name: &str, capacity| TierSpec {
            name: name.into(),
            capacity,
            latency_ns: 100.0,
            bandwidth: 1e9,
            queueing: DEFAULT_QUEUEING,
            background: 0.0,
        };
        TierSetup {
            tiers: vec![mk("fast", fast), mk("slow", u64::MAX)],
            initial,
        }
    }

    #[test]
    fn loaded_latency_is_flat_then_steep_and_bounded() {
        let t = setup(InitialPlacement::AllSlow, 0).tiers[0].clone();
        assert_eq!(t.loaded_latency(0.0), 100.0);
        assert!((t.loaded_latency(0.5) - 110.0).abs() < 1e-9);
        assert!((t.loaded_latency(0.9) - 190.0).abs() < 1e-9);
        assert_eq!(t.loaded_latency(5.0), t.loaded_latency(MAX_UTILISATION));
        assert!(t.loaded_latency(MAX_UTILISATION) > 10.0 * 100.0);
    }

    #[test]
    fn initial_placements_respect_capacity() {
        let heap = AddrRange::new(1 << 30, (1 << 30) + (100 << 20));
        // Two regions, the first listed at the top (laid out top-down): first touch fills
        // it from its start, then the second.
        let mib = |m: u64| heap.start + (m << 20);
        let order = [
            AddrRange::new(mib(80), mib(100)),
            AddrRange::new(mib(0), mib(80)),
        ];
        let p = setup(InitialPlacement::FirstTouchFast, 30 << 20).initial_placement(heap, &order);
        assert_eq!(p.bytes_on(0), 30 << 20);
        assert_eq!(p.tier_of(mib(80)), 0);
        assert_eq!(p.tier_of(mib(99)), 0);
        assert_eq!(p.tier_of(mib(9)), 0);
        assert_eq!(p.tier_of(mib(10)), 1);
        let p = setup(InitialPlacement::Interleaved, 30 << 20).initial_placement(heap, &order);
        assert_eq!(
            p.bytes_on(0),
            30 << 20,
            "fast fills, then the rest goes slow"
        );
        assert_eq!(p.tier_of(heap.start), 0);
        assert_eq!(p.tier_of(heap.start + (2 << 20)), 1);
        assert_eq!(p.tier_of(heap.start + (4 << 20)), 0);
        let p = setup(InitialPlacement::AllSlow, 30 << 20).initial_placement(heap, &order);
        assert_eq!(p.bytes_on(1), 100 << 20);
        let p = setup(InitialPlacement::AllFast, 30 << 20).initial_placement(heap, &order);
        assert_eq!(p.bytes_on(0), 100 << 20);
    }
}
