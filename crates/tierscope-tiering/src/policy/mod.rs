//! Tiering policies: each turns what its monitor reports into moves. One file per policy,
//! its config beside it, and one line in the list below (see [`crate::registry`]).

pub mod counts;

crate::registry::registry! {
    TelescopeRule(telescope_rule::TelescopeRuleConfig) = "telescope-rule",
    Damos(damos::DamosConfig) = "damos",
    Hemem(hemem::HememConfig) = "hemem",
    Memtis(memtis::MemtisConfig) = "memtis",
    Colloid(colloid::ColloidConfig) = "colloid",
    Tpp(tpp::TppConfig) = "tpp",
    Periodic(periodic::PeriodicConfig) = "periodic",
    Oracle(oracle::OracleConfig) = "oracle",
    Static(fixed::StaticConfig) = "static",
    Mglru(mglru::MglruConfig) = "mglru",
    Throttle(throttle::ThrottleConfig) = "throttle",
}

use crate::migration::Move;
use tierscope_core::tiers::TierSpec;
use tierscope_core::{AddrRange, Nanos, Placement, RegionReport, Snapshot};

/// What a policy sees when it acts.
pub struct View<'a> {
    pub now: Nanos,
    pub tiers: &'a [TierSpec],
    pub placement: &'a Placement,
    /// Each tier's loaded latency over the last performance window, ns (what Colloid
    /// measures from the memory controllers' queue occupancy; idle before the first).
    pub latency_ns: &'a [f64],
}

impl View<'_> {
    /// Bytes of `r` not on `tier`.
    pub fn bytes_off(&self, r: AddrRange, tier: u8) -> u64 {
        let mut n = 0;
        self.placement.runs(r, |run, t| {
            if t != tier {
                n += run.len();
            }
        });
        n
    }

    /// Bytes of `r` on `tier`.
    pub fn bytes_on(&self, r: AddrRange, tier: u8) -> u64 {
        r.overlap(&self.placement.range()) - self.bytes_off(r, tier)
    }

    /// The runs of the heap on `tier`, in address order.
    pub fn runs_on(&self, tier: u8) -> Vec<AddrRange> {
        let mut runs = vec![];
        self.placement.runs(self.placement.range(), |r, t| {
            if t == tier {
                runs.push(r);
            }
        });
        runs
    }

    /// Free bytes of `tier`.
    pub fn room(&self, tier: u8) -> u64 {
        self.tiers[tier as usize]
            .capacity
            .saturating_sub(self.placement.bytes_on(tier))
    }

    pub fn slowest(&self) -> u8 {
        (self.tiers.len() - 1) as u8
    }
}

/// A tiering policy. It learns only through the snapshots it is given (and, for the
/// oracle, the coming window's truth, which the runner hands it as a snapshot).
pub trait Policy: Send {
    /// A snapshot from the monitor feeding it.
    fn observe(&mut self, snapshot: &Snapshot);

    /// The coming window's accesses per byte, by range (policies fed by the lookahead
    /// truth, the oracle; others ignore it).
    fn observe_heat(&mut self, _heat: &[(AddrRange, f64)]) {}

    /// When it next wants to act (`Nanos::MAX`: not until the next snapshot).
    fn next_action(&self) -> Nanos;

    /// Decides moves at `view.now`; the migration engine carries them out in order.
    fn act(&mut self, view: &View, out: &mut Vec<Move>);

    /// The CPU quota in force at `now` for the neighbour tenant (`[tiering.neighbour]`),
    /// in (0, 1]: 1, unthrottled, for every policy but a throttling one.
    fn quota(&mut self, _now: Nanos) -> f64 {
        1.0
    }
}

/// The part of `range` to move when only `take` of its `off` bytes still to move fit: all
/// of it, or a head about that long (the migration engine skips the parts already in
/// place, so a head holds at least `take` bytes to move only when nothing is in place;
/// it never moves more than the limits let it).
pub fn head(range: AddrRange, off: u64, take: u64) -> AddrRange {
    let end = if take >= off {
        range.end
    } else {
        (range.start + take).next_multiple_of(4096).min(range.end)
    };
    AddrRange::new(range.start, end)
}

/// Sorts reports coldest first (fewest accesses), then by address.
pub fn coldest_first(v: &mut [RegionReport]) {
    v.sort_by(|a, b| {
        a.nr_accesses
            .cmp(&b.nr_accesses)
            .then(a.start.cmp(&b.start))
    });
}

/// When a policy that acts once per snapshot wants to act: now if one is pending.
pub fn due_if(pending: bool) -> Nanos {
    if pending {
        0
    } else {
        Nanos::MAX
    }
}

/// Promotes `hot` (in order) to tier 0 up to `budget` bytes, first demoting regions of
/// `cold` (in order) to the slowest tier to make room. Moves go to `out`, demotions first.
pub fn promote_with_room(
    view: &View,
    hot: &[RegionReport],
    cold: &[RegionReport],
    budget: u64,
    out: &mut Vec<Move>,
) {
    let mut promotions = Promotions::default();
    promotions.reset(budget);
    for r in hot {
        if promotions.full() {
            break;
        }
        promotions.offer(view, AddrRange::new(r.start, r.end));
    }
    promotions.finish(view, cold, out);
}

/// [`promote_with_room`] in two steps, for a policy that offers its candidates one at a
/// time rather than as a list (the Telescope rule's split regions, whose millions of
/// pieces it never lists) and keeps the buffer from one window to the next.
#[derive(Debug, Default)]
pub struct Promotions {
    budget: u64,
    /// Bytes the ranges chosen so far still have to move (at most `budget`).
    need: u64,
    ranges: Vec<AddrRange>,
}

impl Promotions {
    /// Empty, with `budget` bytes to promote (the buffer's memory is kept).
    pub fn reset(&mut self, budget: u64) {
        self.budget = budget;
        self.need = 0;
        self.ranges.clear();
    }

    /// The budget is spent: later offers would be ignored.
    pub fn full(&self) -> bool {
        self.need >= self.budget
    }

    /// Chooses `range` when some of it is off tier 0 (nothing otherwise).
    pub fn offer(&mut self, view: &View, range: AddrRange) {
        let off = view.bytes_off(range, 0);
        if off == 0 {
            return;
        }
        self.need += off.min(self.budget - self.need);
        self.ranges.push(range);
    }

    /// Demotes `cold` (in order) to the slowest tier until the chosen ranges fit, then
    /// promotes them, as much as fits. Moves go to `out`, demotions first.
    pub fn finish(&self, view: &View, cold: &[RegionReport], out: &mut Vec<Move>) {
        let mut room = view.room(0);
        let slow = view.slowest();
        for r in cold {
            if room >= self.need {
                break;
            }
            let range = AddrRange::new(r.start, r.end);
            let on = view.bytes_on(range, 0);
            if on == 0 {
                continue;
            }
            room += on;
            out.push(Move { range, to: slow });
        }
        let mut left = self.need.min(room);
        for &range in &self.ranges {
            if left == 0 {
                break;
            }
            let off = view.bytes_off(range, 0);
            let take = off.min(left);
            out.push(Move {
                range: head(range, off, take),
                to: 0,
            });
            left -= take;
        }
    }
}

/// A fast tier of `fast` bytes over an unbounded slow one, for the policies' tests (which
/// read capacities and placements, never latencies or bandwidths).
#[cfg(test)]
pub(crate) fn test_tiers(fast: u64) -> [TierSpec; 2] {
    let t = |name: &str, capacity| TierSpec {
        name: name.into(),
        capacity,
        latency_ns: 100.0,
        bandwidth: 1e10,
        queueing: 0.0,
        curve: Vec::new(),
        background: 0.0,
    };
    [t("fast", fast), t("slow", u64::MAX)]
}
