//! MGLRU's generations used for promotion (Linux's multi-gen LRU, mm/vmscan.c and
//! Documentation/mm/multigen_lru.rst). Pages belong to generations: the aging scans page
//! tables for referenced pages and moves each one it finds to the youngest generation
//! (`max_seq`), then starts a new generation (increments `max_seq`); eviction takes pages
//! from the oldest generation (`min_seq`). At most `MAX_NR_GENS` = 4 generations exist at a
//! time: a page not referenced for that many agings sits in the oldest.
//!
//! As a tiering policy (our reading: Linux does not promote by generation itself): every
//! snapshot of the monitor feeding it is one aging pass, whose accessed regions join the
//! youngest generation. Pages of the youngest generation on a slower tier are promoted to
//! the fast tier, most recently made young first, at most `max_per_pass` bytes per pass;
//! room is made by demoting fast-tier pages of the oldest generation (those not referenced
//! in the last `generations - 1` passes), oldest first, as MGLRU's eviction would.
//! Generations are kept per `page` of the heap (2 MiB by default, coarser on heaps of more
//! than 2^22 pages: the tracking memory stays under 32 MiB).

use super::{due_if, promote_with_room, Policy, View};
use crate::migration::Move;
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::units::Size;
use tierscope_core::{AddrRange, FeedKind, FieldError, Nanos, PolicyInput, RegionReport, Snapshot};

/// Linux's MAX_NR_GENS.
const MAX_NR_GENS: u32 = 4;
/// Linux's MIN_NR_GENS: the youngest and the oldest.
const MIN_NR_GENS: u32 = 2;
/// Most pages tracked: above this the tracking granule grows.
const MAX_PAGES: u64 = 1 << 22;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MglruConfig {
    /// Generations kept (2 to 4: Linux's MIN_NR_GENS to MAX_NR_GENS).
    pub generations: u32,
    /// Bytes promoted per aging pass at most.
    pub max_per_pass: Size,
    /// The granule generations are kept at.
    pub page: Size,
}

impl Default for MglruConfig {
    fn default() -> Self {
        MglruConfig {
            generations: MAX_NR_GENS,
            max_per_pass: Size(1 << 30),
            page: Size(2 << 20),
        }
    }
}

impl PolicyTechnique for MglruConfig {
    const HELP: &'static str = "MGLRU's generations: each snapshot is an aging pass; promote the youngest \
         generation, demote the oldest (4 generations, 1 GiB per pass)";

    fn by_name() -> Option<Self> {
        Some(Self::default())
    }

    /// The aging reads accessed bits: checks of page tables.
    fn input(&self) -> PolicyInput {
        PolicyInput::Monitor(&[FeedKind::AccessChecks])
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        if !(MIN_NR_GENS..=MAX_NR_GENS).contains(&self.generations) {
            return Err(FieldError::new(
                "generations",
                format!(
                    "expected {MIN_NR_GENS} to {MAX_NR_GENS} (Linux's MIN_NR_GENS to MAX_NR_GENS), got {}",
                    self.generations
                ),
            ));
        }
        if self.max_per_pass.0 == 0 {
            return Err(FieldError::new("max_per_pass", "must be positive"));
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
        Box::new(Mglru {
            config: self.clone(),
            seq: 0,
            base: 0,
            shift: 0,
            young_at: vec![],
            pending: false,
        })
    }
}

pub struct Mglru {
    config: MglruConfig,
    /// Aging passes so far: the youngest generation's sequence number (`max_seq`).
    seq: u64,
    /// The tracked span's start and its granule (log2).
    base: u64,
    shift: u32,
    /// Per granule: the pass that last found it referenced (0: never).
    young_at: Vec<u64>,
    pending: bool,
}

impl Mglru {
    /// Sizes the tracking to the span the first snapshot's regions cover (what its
    /// monitor watches; regions outside it later are not tracked).
    fn track(&mut self, s: &Snapshot) {
        let lo = s.regions.iter().map(|r| r.start).min();
        let hi = s.regions.iter().map(|r| r.end).max();
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return;
        };
        if !self.young_at.is_empty() || hi <= lo {
            return;
        }
        let span = hi - lo;
        let mut shift = self.config.page.0.trailing_zeros();
        while span.div_ceil(1 << shift) > MAX_PAGES {
            shift += 1;
        }
        self.base = lo;
        self.shift = shift;
        self.young_at = vec![0; span.div_ceil(1 << shift) as usize];
    }

    fn granule(&self, i: usize) -> AddrRange {
        let start = self.base + ((i as u64) << self.shift);
        AddrRange::new(start, start + (1 << self.shift))
    }

    /// Runs of granules with `keep(young_at)`, as regions (nr_accesses: 0).
    fn runs(&self, keep: impl Fn(u64) -> bool) -> Vec<(RegionReport, u64)> {
        let mut out: Vec<(RegionReport, u64)> = vec![];
        for (i, &at) in self.young_at.iter().enumerate() {
            if !keep(at) {
                continue;
            }
            let g = self.granule(i);
            match out.last_mut() {
                Some((r, last)) if r.end == g.start && *last == at => r.end = g.end,
                _ => out.push((
                    RegionReport {
                        start: g.start,
                        end: g.end,
                        nr_accesses: 0,
                        age: 0,
                    },
                    at,
                )),
            }
        }
        out
    }
}

impl Policy for Mglru {
    /// One aging pass: the regions found referenced join the youngest generation.
    fn observe(&mut self, s: &Snapshot) {
        self.track(s);
        self.seq += 1;
        for r in s.regions.iter().filter(|r| r.nr_accesses > 0) {
            // Granules the region overlaps, within the tracked span.
            let lo = r.start.saturating_sub(self.base) >> self.shift;
            let hi = r.end.saturating_sub(self.base).div_ceil(1 << self.shift);
            let hi = (hi as usize).min(self.young_at.len());
            for at in &mut self.young_at[(lo as usize).min(hi)..hi] {
                *at = self.seq;
            }
        }
        self.pending = true;
    }

    fn next_action(&self) -> Nanos {
        due_if(self.pending)
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        if !std::mem::take(&mut self.pending) {
            return;
        }
        let seq = self.seq;
        let youngest: Vec<RegionReport> = self.runs(|at| at == seq).into_iter().map(|r| r.0).collect();
        // The oldest generation: not referenced in the last `generations - 1` passes.
        let old = u64::from(self.config.generations - 1);
        let mut oldest = self.runs(|at| seq - at >= old);
        oldest.sort_by_key(|(r, at)| (*at, r.start));
        let oldest: Vec<RegionReport> = oldest.into_iter().map(|r| r.0).collect();
        let heap = view.placement.range();
        let inside = |r: &RegionReport| r.start >= heap.start && r.end <= heap.end;
        let youngest: Vec<RegionReport> = youngest.into_iter().filter(inside).collect();
        let oldest: Vec<RegionReport> = oldest.into_iter().filter(inside).collect();
        promote_with_room(view, &youngest, &oldest, self.config.max_per_pass.0, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::Placement;

    const MIB2: u64 = 2 << 20;

    fn snapshot(hot: &[u64], pages: u64) -> Snapshot {
        Snapshot {
            start: 0,
            end: 1,
            regions: (0..pages)
                .map(|i| RegionReport {
                    start: i * MIB2,
                    end: (i + 1) * MIB2,
                    nr_accesses: u32::from(hot.contains(&i)) * 3,
                    age: 0,
                })
                .collect(),
        }
    }

    fn moves(p: &mut dyn Policy, placement: &Placement, fast: u64) -> Vec<Move> {
        let tiers = super::super::test_tiers(fast);
        let view = View {
            now: 0,
            tiers: &tiers,
            placement,
            latency_ns: &[1.0, 1.0],
        };
        let mut out = vec![];
        p.act(&view, &mut out);
        out
    }

    #[test]
    fn the_youngest_generation_is_promoted_and_the_oldest_makes_room() {
        // 8 pages of 2 MiB; a fast tier of 2 pages holding pages 0 and 1 at first.
        let heap = AddrRange::new(0, 8 * MIB2);
        let mut placement = Placement::new(heap, 1, 2);
        placement.set(AddrRange::new(0, 2 * MIB2), 0);
        let mut p = MglruConfig::default().policy(&PolicyContext::for_tests());
        // Pass 1: page 0 referenced. Pass 2: pages 5 and 6.
        p.observe(&snapshot(&[0], 8));
        assert!(moves(p.as_mut(), &placement, 2 * MIB2).is_empty(), "page 0 is fast already");
        p.observe(&snapshot(&[5, 6], 8));
        // Pages 5 and 6 are the youngest; page 1 was never referenced and page 0 only one
        // pass ago: with 4 generations neither is in the oldest yet (seq - at < 3 for page
        // 0; page 1's 0 is 2 passes old), so nothing can make room.
        assert!(moves(p.as_mut(), &placement, 2 * MIB2).is_empty());
        p.observe(&snapshot(&[5, 6], 8));
        // Pass 3: pages never referenced (1-4, 7) are now in the oldest generation; page 0
        // (pass 1) is 2 passes old, not yet. The oldest run holding fast memory goes down
        // (only page 1 of it is fast), and one young page comes up in its room.
        let m = moves(p.as_mut(), &placement, 2 * MIB2);
        assert_eq!(
            m,
            vec![
                Move {
                    range: AddrRange::new(MIB2, 5 * MIB2),
                    to: 1
                },
                Move {
                    range: AddrRange::new(5 * MIB2, 6 * MIB2),
                    to: 0
                },
            ]
        );
    }

    #[test]
    fn fewer_generations_age_pages_out_sooner() {
        let heap = AddrRange::new(0, 4 * MIB2);
        let mut placement = Placement::new(heap, 1, 2);
        placement.set(AddrRange::new(0, MIB2), 0);
        let two = MglruConfig {
            generations: 2,
            ..MglruConfig::default()
        };
        let mut p = two.policy(&PolicyContext::for_tests());
        p.observe(&snapshot(&[0], 4));
        let _ = moves(p.as_mut(), &placement, MIB2);
        p.observe(&snapshot(&[3], 4));
        // With 2 generations, page 0 (one pass old) is already the oldest.
        let m = moves(p.as_mut(), &placement, MIB2);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!((m[0].to, m[1].to), (1, 0));
        assert_eq!(m[1].range, AddrRange::new(3 * MIB2, 4 * MIB2));
    }

    #[test]
    fn bad_settings_name_the_field() {
        let bad = |c: MglruConfig| c.check(2).unwrap_err().field;
        let d = MglruConfig::default;
        assert_eq!(bad(MglruConfig { generations: 5, ..d() }), "generations");
        assert_eq!(bad(MglruConfig { generations: 1, ..d() }), "generations");
        assert_eq!(bad(MglruConfig { max_per_pass: Size(0), ..d() }), "max_per_pass");
        assert_eq!(bad(MglruConfig { page: Size(3000), ..d() }), "page");
    }
}
