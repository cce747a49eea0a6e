//! The [`Tiers`] capability of the simulated engines: the tier specs, the placement of the
//! heap, and the traffic each tier served. The exact engine records every access's tier
//! ([`TierState::record`]); the statistical engine computes expected traffic from its
//! batch segments and the patterns' densities over the placement's runs
//! ([`TierState::account_segments`]), with no per-access work.

use crate::layout::Layout;
use crate::stat::density::{Pattern, Schedule, Segment, Workload};
use tierscope_core::tiers::{TierSetup, TierSpec, TierTraffic, Tiers, MAX_TIERS};
use tierscope_core::workload::PatternKind;
use tierscope_core::{AddrRange, Placement};

/// The bytes a sequential pattern's accesses `[x, y)` of segment `seg` sweep: `laps`
/// whole passes over its region, then `first` and, past the region's end, `wrapped`.
/// Shared by the tiers' traffic and the statistical NEMO (`stat::nemo`).
#[derive(Debug, Clone, Copy)]
pub struct Sweep {
    pub laps: u64,
    pub first: AddrRange,
    pub wrapped: AddrRange,
}

impl Sweep {
    pub fn of(p: &Pattern, seg: &Segment, x: u64, y: u64) -> Sweep {
        let size = p.region.len();
        let start =
            (seg.offset as u128 + (x - seg.first) as u128 * p.stride as u128) % size as u128;
        let swept = (y - x) as u128 * p.stride.max(1) as u128;
        let laps = (swept / size as u128) as u64;
        let rem = (swept % size as u128) as u64;
        let o = start as u64;
        let (first, wrapped) = if o + rem <= size {
            let r = AddrRange::new(p.region.start + o, p.region.start + o + rem);
            (r, AddrRange::new(r.end, r.end))
        } else {
            (
                AddrRange::new(p.region.start + o, p.region.end),
                AddrRange::new(p.region.start, p.region.start + o + rem - size),
            )
        };
        Sweep {
            laps,
            first,
            wrapped,
        }
    }

    /// Bytes swept in `r` (a lap counts every byte of the region once).
    pub fn bytes_in(&self, region: AddrRange, r: AddrRange) -> f64 {
        let overlap = |a: AddrRange| a.end.min(r.end).saturating_sub(a.start.max(r.start));
        (self.laps as f64) * overlap(region) as f64
            + overlap(self.first) as f64
            + overlap(self.wrapped) as f64
    }

    /// Bytes swept in all.
    pub fn bytes(&self, region: AddrRange) -> f64 {
        self.bytes_in(region, region)
    }
}

/// Counts an access to `va` in the traffic of its tier.
#[inline(always)]
fn count(placement: &Placement, traffic: &mut [TierTraffic], va: u64, write: bool) {
    let t = &mut traffic[placement.tier_of(va) as usize];
    if write {
        t.writes += 1.0;
    } else {
        t.reads += 1.0;
    }
}

#[derive(Debug, Clone)]
pub struct TierState {
    specs: Vec<TierSpec>,
    pub placement: Placement,
    traffic: Vec<TierTraffic>,
    /// Bumped by every placement change (the statistical engine caches per-pattern tier
    /// shares against it).
    version: u64,
    /// Per pattern: (version, share of its accesses on each tier), random patterns only.
    shares: Vec<(u64, Vec<f64>)>,
}

impl TierState {
    /// Tiers for the heap of `layout`, placed as `setup` says.
    pub fn new(setup: &TierSetup, layout: &Layout) -> Self {
        TierState {
            specs: setup.tiers.clone(),
            placement: setup.initial_placement(layout.heap, &layout.regions()),
            traffic: vec![TierTraffic::default(); setup.tiers.len()],
            version: 0,
            shares: vec![],
        }
    }

    /// One executed access (exact engine).
    #[inline(always)]
    pub fn record(&mut self, va: u64, write: bool) {
        count(&self.placement, &mut self.traffic, va, write);
    }

    /// One executed access counted in `traffic` (a host thread's share of the exact
    /// engine's accesses, added later with [`TierState::add_traffic`]).
    #[inline(always)]
    pub fn record_into(&self, traffic: &mut [TierTraffic], va: u64, write: bool) {
        count(&self.placement, traffic, va, write);
    }

    /// Adds a host thread's `partial` traffic and zeroes it. The counts are whole numbers
    /// far below 2^53, so the sums are exact and do not depend on how the accesses were
    /// split.
    pub fn add_traffic(&mut self, partial: &mut [TierTraffic]) {
        for (t, p) in self.traffic.iter_mut().zip(partial) {
            t.reads += p.reads;
            t.writes += p.writes;
            *p = TierTraffic::default();
        }
    }

    /// Number of tiers.
    pub fn tier_count(&self) -> usize {
        self.specs.len()
    }

    /// Bytes of `spans` on each tier, added to `out`.
    fn bytes_by_tier(&self, spans: &[AddrRange], out: &mut [f64]) {
        for &s in spans {
            self.placement
                .runs(s, |run, t| out[t as usize] += run.len() as f64);
        }
    }

    /// Share of a random pattern's accesses on each tier, by its density over the runs.
    fn random_shares(&mut self, w: &Workload, pattern: usize) -> &[f64] {
        if self.shares.len() < w.patterns.len() {
            self.shares = vec![(u64::MAX, vec![]); w.patterns.len()];
        }
        if self.shares[pattern].0 != self.version {
            let p = &w.patterns[pattern];
            let mut share = vec![0.0; self.specs.len()];
            self.placement
                .runs(p.region, |run, t| share[t as usize] += p.mass(run));
            let total: f64 = share.iter().sum();
            if total > 0.0 {
                share.iter_mut().for_each(|s| *s /= total);
            }
            self.shares[pattern] = (self.version, share);
        }
        &self.shares[pattern].1
    }

    /// Expected traffic of accesses `[ia, ib)` of every thread (statistical engine).
    pub fn account_segments(&mut self, w: &Workload, schedules: &[Schedule], ia: u64, ib: u64) {
        let n_tiers = self.specs.len();
        let mut add = vec![TierTraffic::default(); n_tiers];
        let mut bytes = vec![0.0; n_tiers];
        for (seg, x, y) in schedules.iter().flat_map(|s| s.overlapping(ia, ib)) {
            let n = (y - x) as f64;
            let p = &w.patterns[seg.pattern as usize];
            let store = p.store_share();
            // At most MAX_TIERS tiers (validated): no allocation per segment.
            let mut share = [0.0f64; MAX_TIERS];
            if p.kind == PatternKind::Sequential {
                bytes.iter_mut().for_each(|b| *b = 0.0);
                let sweep = Sweep::of(p, &seg, x, y);
                if sweep.laps > 0 {
                    self.bytes_by_tier(&[p.region], &mut bytes);
                    bytes.iter_mut().for_each(|b| *b *= sweep.laps as f64);
                }
                self.bytes_by_tier(&[sweep.first, sweep.wrapped], &mut bytes);
                let total: f64 = bytes.iter().sum();
                for (s, b) in share.iter_mut().zip(&bytes) {
                    *s = b / total.max(1.0);
                }
            } else {
                let shares = self.random_shares(w, seg.pattern as usize);
                share[..shares.len()].copy_from_slice(shares);
            }
            for (a, sh) in add.iter_mut().zip(&share) {
                a.reads += n * sh * (1.0 - store);
                a.writes += n * sh * store;
            }
        }
        for (t, a) in self.traffic.iter_mut().zip(&add) {
            t.reads += a.reads;
            t.writes += a.writes;
        }
    }
}

impl Tiers for TierState {
    fn specs(&self) -> &[TierSpec] {
        &self.specs
    }

    fn placement(&self) -> &Placement {
        &self.placement
    }

    fn place(&mut self, r: AddrRange, tier: u8) -> u64 {
        let changed = self.placement.set(r, tier);
        if changed > 0 {
            self.version += 1;
        }
        changed
    }

    fn take_traffic(&mut self, out: &mut [TierTraffic]) {
        for (o, t) in out.iter_mut().zip(&mut self.traffic) {
            o.reads += t.reads;
            o.writes += t.writes;
            *t = TierTraffic::default();
        }
    }
}
