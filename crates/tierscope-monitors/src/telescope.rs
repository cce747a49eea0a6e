//! Telescope's probe (Nair et al., ATC '24, section 5.2): per region and sampling interval,
//! profile one page-table entry at the highest level that fits the region, so one ACCESSED
//! bit can watch up to 512 GiB. `bounded` only picks entries inside the region; `flex`
//! accepts entries that overshoot by at most a per-level fraction of their span.
//! docs/TELESCOPE.md records the readings chosen where the paper is open.

use crate::config::{EntryPick, FlushPolicy, TelescopeConfig, Variant};
use crate::region_monitor::Probe;
use crate::regions::Region;
use std::collections::HashMap;
use tierscope_core::machine::FLUSH_CEILING_PAGES;
use tierscope_core::rng::Rng;
use tierscope_core::{Flush, Level, Machine};

pub struct TelescopeProbe {
    cfg: TelescopeConfig,
    /// Per region index: the entry being profiled (level, an address inside its span).
    chosen: Vec<(Level, u64)>,
    /// For `EntryPick::Uniform`: each region's decomposition into entries.
    covers: HashMap<(u64, u64), Vec<(Level, u64)>>,
    /// Spans of upper-level entries cleared in this pass, to flush once at its end.
    pending_flush: Vec<(u64, u64)>,
}

impl TelescopeProbe {
    pub fn new(cfg: TelescopeConfig) -> Self {
        TelescopeProbe {
            cfg,
            chosen: vec![],
            covers: HashMap::new(),
            pending_flush: vec![],
        }
    }

    /// The entry prepared for region `index`: its level and an address inside its span.
    pub fn chosen(&self, index: usize) -> (Level, u64) {
        self.chosen[index]
    }

    /// Whether the entry at `level` containing `va` may profile region `r`.
    fn qualifies(&self, level: Level, va: u64, r: &Region) -> bool {
        let start = level.align_down(va);
        let end = start.saturating_add(level.span());
        match self.cfg.variant {
            Variant::Bounded => start >= r.start && end <= r.end,
            Variant::Flex => {
                let outside = r.start.saturating_sub(start) + end.saturating_sub(r.end);
                outside as f64 <= self.cfg.flex_threshold.get(level) * level.span() as f64
            }
        }
    }

    /// The highest qualifying level for the entry containing `va`, at least the leaf.
    fn level_for(&self, va: u64, r: &Region, m: &mut dyn Machine) -> Level {
        let leaf = m.leaf_level(va).unwrap_or(Level::Pte);
        let mut l = m.paging().root();
        while l > leaf {
            if self.qualifies(l, va, r) {
                return l;
            }
            l = l.down().expect("above the leaf");
        }
        leaf
    }

    /// The region as a sequence of non-overlapping entries, each at the highest level that
    /// qualifies where it starts.
    fn cover(&self, r: &Region, m: &mut dyn Machine) -> Vec<(Level, u64)> {
        let mut out = vec![];
        let mut pos = r.start;
        while pos < r.end {
            let leaf = m.leaf_level(pos).unwrap_or(Level::Pte);
            let mut l = m.paging().root();
            loop {
                let aligned = l.align_down(pos) == pos || (pos == r.start && out.is_empty());
                if l == leaf || (aligned && self.qualifies(l, pos, r)) {
                    break;
                }
                l = l.down().expect("above the leaf");
            }
            out.push((l, pos));
            pos = l.align_down(pos) + l.span();
        }
        out
    }
}

impl Probe for TelescopeProbe {
    fn prepare(&mut self, index: usize, r: &mut Region, m: &mut dyn Machine, rng: &mut Rng) {
        let (level, va) = match self.cfg.entry_pick {
            EntryPick::Address => {
                let va = rng.range(r.start, r.end);
                (self.level_for(va, r, m), va)
            }
            EntryPick::Uniform => {
                let key = (r.start, r.end);
                if !self.covers.contains_key(&key) {
                    let c = self.cover(r, m);
                    self.covers.insert(key, c);
                }
                let cover = &self.covers[&key];
                cover[rng.below(cover.len() as u64) as usize]
            }
        };
        m.cost_mut().random_draws += 1;
        r.sampling_addr = va;
        if self.chosen.len() <= index {
            self.chosen.resize(index + 1, (Level::Pte, 0));
        }
        self.chosen[index] = (level, va);
        let cleared = m.test_and_clear_accessed(level, va).is_some();
        let is_leaf = m.leaf_level(va) == Some(level);
        let flush = match self.cfg.flush {
            FlushPolicy::None => false,
            FlushPolicy::Upper => !is_leaf,
            FlushPolicy::All => true,
        };
        if cleared && flush {
            let start = level.align_down(va);
            self.pending_flush.push((start, start + level.span()));
        }
    }

    fn after_prepare(&mut self, m: &mut dyn Machine) {
        if self.pending_flush.is_empty() {
            return;
        }
        // One batched flush per pass, as the kernel's mmu_gather would do: page by page
        // while the pass touched few pages, else everything.
        let pages: u64 = self.pending_flush.iter().map(|(s, e)| (e - s) >> 12).sum();
        if pages > FLUSH_CEILING_PAGES {
            m.flush(Flush::All);
        } else {
            for &(start, end) in &self.pending_flush {
                m.flush(Flush::Range { start, end });
            }
        }
        self.pending_flush.clear();
    }

    fn check(&mut self, index: usize, _: &Region, m: &mut dyn Machine) -> bool {
        let (level, va) = self.chosen[index];
        m.accessed(level, va).unwrap_or(false)
    }

    fn regions_changed(&mut self, _: &[Region]) {
        self.covers.clear();
    }
}
