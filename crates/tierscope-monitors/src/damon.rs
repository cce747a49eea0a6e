//! DAMON's virtual-address probe (mm/damon/vaddr.c): a random address per region, its
//! leaf entry (PTE, or PMD for a huge page) made old without a TLB flush, checked one
//! sampling interval later; a region whose sampling address lies in the folio checked just
//! before reuses that result.

use crate::region_monitor::Probe;
use crate::regions::Region;
use tierscope_core::rng::Rng;
use tierscope_core::Machine;

#[derive(Debug, Default)]
pub struct DamonProbe {
    last_addr: Option<u64>,
    last_folio_size: u64,
    last_accessed: bool,
}

impl Probe for DamonProbe {
    fn prepare(&mut self, _: usize, r: &mut Region, m: &mut dyn Machine, rng: &mut Rng) {
        r.sampling_addr = rng.range(r.start, r.end);
        m.cost_mut().random_draws += 1;
        if let Some(leaf) = m.leaf_level(r.sampling_addr) {
            m.test_and_clear_accessed(leaf, r.sampling_addr);
        }
    }

    fn check(&mut self, index: usize, r: &Region, m: &mut dyn Machine) -> bool {
        // The reuse only applies within one pass over the regions.
        if index == 0 {
            self.last_addr = None;
        }
        if let Some(last) = self.last_addr {
            let mask = !(self.last_folio_size - 1);
            if last & mask == r.sampling_addr & mask {
                return self.last_accessed;
            }
        }
        let (accessed, folio) = match m.leaf_level(r.sampling_addr) {
            Some(leaf) => (
                m.accessed(leaf, r.sampling_addr).unwrap_or(false),
                leaf.span(),
            ),
            None => (false, 4096),
        };
        self.last_addr = Some(r.sampling_addr);
        self.last_folio_size = folio;
        self.last_accessed = accessed;
        accessed
    }
}
