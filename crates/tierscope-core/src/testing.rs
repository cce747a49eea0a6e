//! The one fake machine for unit tests of monitors and policies (compiled always: see the
//! module's declaration in lib.rs for why it is not behind a feature).
//!
//! Flat per-entry ACCESSED bits that tests set directly ([`FakeMachine::touch`]), a count
//! of every test-and-clear, flushes recorded, and optional hardware as the engines offer
//! it: a write log the test fills, a PMU whose samples a [`FakePmu`] draws, tiers with a
//! placement, and huge pages that split and collapse.

use crate::tiers::{TierSpec, TierTraffic, Tiers};
use crate::{
    AddrRange, CostCounters, Flush, Level, Machine, Mapping, Nanos, PageSize, Paging, Placement,
    Pmu, PmuEvent, PmuSample, WriteLog,
};
use std::collections::{BTreeSet, HashMap, HashSet};

/// A write log the test fills by hand.
#[derive(Default)]
pub struct FakeLog {
    pub written: Vec<u64>,
    pub tables: Vec<AddrRange>,
}

impl WriteLog for FakeLog {
    fn drain_written(&mut self, out: &mut Vec<u64>) {
        out.append(&mut self.written);
    }
    fn drain_tables(&mut self, out: &mut Vec<AddrRange>) {
        out.append(&mut self.tables);
    }
}

/// A PMU's sample source: it is programmed like the engines' PMUs and drains the samples
/// up to the machine's time.
pub trait FakePmu {
    fn program(&mut self, period: Option<u64>);
    fn drain(&mut self, now: Nanos, out: &mut Vec<PmuSample>);
}

/// Tiers with a placement and no traffic.
pub struct FakeTiers {
    pub specs: Vec<TierSpec>,
    pub placement: Placement,
}

impl Tiers for FakeTiers {
    fn specs(&self) -> &[TierSpec] {
        &self.specs
    }
    fn placement(&self) -> &Placement {
        &self.placement
    }
    fn place(&mut self, r: AddrRange, tier: u8) -> u64 {
        self.placement.set(r, tier)
    }
    fn take_traffic(&mut self, _: &mut [TierTraffic]) {}
}

#[derive(Default)]
pub struct FakeMachine {
    pub maps: Vec<Mapping>,
    pub accessed: HashSet<(Level, u64)>,
    /// Test-and-clears per entry.
    pub clears: HashMap<(Level, u64), u32>,
    pub now: Nanos,
    pub cost: CostCounters,
    pub flushes: Vec<Flush>,
    pub log: Option<FakeLog>,
    pub pmu: Option<Box<dyn FakePmu>>,
    pub tiers: Option<FakeTiers>,
    /// Split huge pages (block starts), when the heap is made of them.
    pub huge: Option<BTreeSet<u64>>,
}

impl FakeMachine {
    /// A machine mapping `maps` (start, end, page size).
    pub fn new(maps: &[(u64, u64, PageSize)]) -> Self {
        FakeMachine {
            maps: maps
                .iter()
                .map(|&(s, e, p)| Mapping {
                    range: AddrRange::new(s, e),
                    page_size: p,
                    name: "m".into(),
                })
                .collect(),
            ..FakeMachine::default()
        }
    }

    /// An access to each of `pages` through a page walk: the ACCESSED bit of its leaf and
    /// of every 4-level entry above it.
    pub fn touch(&mut self, pages: &[u64]) {
        for &va in pages {
            let leaf = self.leaf_level(va).expect("touched pages are mapped");
            for l in Level::ALL
                .into_iter()
                .filter(|&l| l >= leaf && l <= Level::Pml4)
            {
                self.accessed.insert((l, l.align_down(va)));
            }
        }
    }

    /// Every leaf entry of the mappings.
    pub fn leaves(&self) -> Vec<(Level, u64)> {
        let mut out = vec![];
        for m in &self.maps {
            let l = m.page_size.leaf_level();
            let mut va = m.range.start;
            while va < m.range.end {
                out.push((l, va));
                va += l.span();
            }
        }
        out
    }
}

impl Machine for FakeMachine {
    fn paging(&self) -> Paging {
        Paging::FourLevel
    }
    fn now(&self) -> Nanos {
        self.now
    }
    fn mappings(&self) -> &[Mapping] {
        &self.maps
    }
    fn leaf_level(&mut self, va: u64) -> Option<Level> {
        self.maps
            .iter()
            .find(|m| m.range.contains(va))
            .map(|m| m.page_size.leaf_level())
    }
    fn accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        Some(self.accessed.contains(&(level, level.align_down(va))))
    }
    fn test_and_clear_accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let leaf = self.leaf_level(va)?;
        if level < leaf {
            return None;
        }
        let key = (level, level.align_down(va));
        *self.clears.entry(key).or_insert(0) += 1;
        self.cost.entries_read += 1;
        self.cost.clear_ops += 1;
        self.cost.walk_steps += 4;
        Some(self.accessed.remove(&key))
    }
    fn dirty(&mut self, _: u64) -> Option<bool> {
        None
    }
    fn test_and_clear_dirty(&mut self, _: u64) -> Option<bool> {
        None
    }
    fn flush(&mut self, what: Flush) {
        self.flushes.push(what);
    }
    fn split_huge(&mut self, va: u64) -> bool {
        self.huge.as_mut().is_some_and(|s| s.insert(va))
    }
    fn collapse_huge(&mut self, va: u64) -> bool {
        self.huge.as_mut().is_some_and(|s| s.remove(&va))
    }
    fn write_log(&mut self) -> Option<&mut dyn WriteLog> {
        self.log.as_mut().map(|l| l as &mut dyn WriteLog)
    }
    fn pmu(&mut self) -> Option<&mut dyn Pmu> {
        if self.pmu.is_some() {
            Some(self)
        } else {
            None
        }
    }
    fn tiers(&mut self) -> Option<&mut dyn Tiers> {
        self.tiers.as_mut().map(|t| t as &mut dyn Tiers)
    }
    fn cost(&self) -> &CostCounters {
        &self.cost
    }
    fn cost_mut(&mut self) -> &mut CostCounters {
        &mut self.cost
    }
}

impl Pmu for FakeMachine {
    fn program(&mut self, _: PmuEvent, period: Option<u64>) {
        if let Some(p) = &mut self.pmu {
            p.program(period);
        }
    }
    fn drain(&mut self, out: &mut Vec<PmuSample>) {
        let now = self.now;
        if let Some(p) = &mut self.pmu {
            p.drain(now, out);
        }
    }
}
