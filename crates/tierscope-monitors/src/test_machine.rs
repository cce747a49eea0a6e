//! A test machine shared by the monitors' unit tests: flat per-entry ACCESSED bits that
//! tests set directly, and a count of every test-and-clear.

use std::collections::{HashMap, HashSet};
use tierscope_core::{
    AddrRange, CostCounters, Flush, Level, Machine, Mapping, Nanos, PageSize, Paging, WriteLog,
};

/// A write log the test fills by hand.
#[derive(Default)]
pub struct FlatLog {
    pub written: Vec<u64>,
    pub tables: Vec<AddrRange>,
}

impl WriteLog for FlatLog {
    fn drain_written(&mut self, out: &mut Vec<u64>) {
        out.append(&mut self.written);
    }
    fn drain_tables(&mut self, out: &mut Vec<AddrRange>) {
        out.append(&mut self.tables);
    }
}

/// A machine with flat per-entry bits that records every test-and-clear.
pub struct Flat {
    pub maps: Vec<Mapping>,
    pub accessed: HashSet<(Level, u64)>,
    pub clears: HashMap<(Level, u64), u32>,
    pub now: Nanos,
    pub cost: CostCounters,
    /// The machine's write log, when a test gives it one.
    pub log: Option<FlatLog>,
}

impl Flat {
    pub fn new(maps: &[(u64, u64, PageSize)]) -> Self {
        Flat {
            maps: maps
                .iter()
                .map(|&(s, e, p)| Mapping {
                    range: AddrRange::new(s, e),
                    page_size: p,
                    name: "m".into(),
                })
                .collect(),
            accessed: HashSet::new(),
            clears: HashMap::new(),
            now: 0,
            cost: CostCounters::default(),
            log: None,
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

impl Machine for Flat {
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
    fn flush(&mut self, _: Flush) {}
    fn write_log(&mut self) -> Option<&mut dyn WriteLog> {
        self.log.as_mut().map(|l| l as &mut dyn WriteLog)
    }
    fn cost(&self) -> &CostCounters {
        &self.cost
    }
    fn cost_mut(&mut self) -> &mut CostCounters {
        &mut self.cost
    }
}
