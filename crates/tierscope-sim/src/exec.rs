//! Runs one simulated core's share of the workload: its stream's accesses in batches,
//! each executed through the core's TLBs and walker, with what an access needs from
//! memory requested [`LOOKAHEAD`] accesses ahead. The order of accesses, and so every
//! result, is the stream's; batching only lets the loop see what comes next.

use crate::mmu::Core;
use crate::page_table::PageTable;
use crate::pml::PmlHook;
use crate::stream::AccessStream;
use tierscope_core::workload::trace::{ADDR, STORE};

/// Accesses generated at a time (a 4 KiB buffer: stays in L1).
pub const BATCH: usize = 512;

/// How many accesses ahead the leaf bits and the L2 TLB set are prefetched: enough to
/// cover a miss to memory at the engine's rate of a few tens of ns per access.
pub const LOOKAHEAD: usize = 16;

/// How many accesses ahead the leaf hint is prefetched. The leaf's prefetch reads it (to
/// know which line to ask for), and so does the walk: over a large heap the hints (4
/// bytes per 2 MiB) do not stay in cache between two accesses to the same 2 MiB, and a
/// miss there would stall the loop at the prefetch itself.
pub const HINT_LOOKAHEAD: usize = 4 * LOOKAHEAD;

/// A reusable batch buffer.
pub struct Batch(Box<[u64; BATCH]>);

impl Default for Batch {
    fn default() -> Self {
        Batch(Box::new([0; BATCH]))
    }
}

/// Runs `stream` until it has issued `until` accesses, each through `core` (reporting to
/// `pml`: `NoPml` when PML is off) and then `effect(va, is_store)` (truth, tiers, PMU, ...).
#[inline(always)]
pub fn run_core<P: PmlHook, F: FnMut(u64, bool)>(
    core: &mut Core,
    pt: &PageTable,
    pml: &mut P,
    stream: &mut AccessStream,
    until: u64,
    batch: &mut Batch,
    mut effect: F,
) {
    let buf = &mut *batch.0;
    while stream.issued() < until {
        let n = stream.fill(until, buf);
        let buf = &buf[..n];
        for &r in &buf[..n.min(HINT_LOOKAHEAD)] {
            pt.prefetch_hint(r & ADDR);
        }
        for &r in &buf[..n.min(LOOKAHEAD)] {
            core.prefetch(pt, r & ADDR);
        }
        for (k, &r) in buf.iter().enumerate() {
            if let Some(&ahead) = buf.get(k + HINT_LOOKAHEAD) {
                pt.prefetch_hint(ahead & ADDR);
            }
            if let Some(&ahead) = buf.get(k + LOOKAHEAD) {
                core.prefetch(pt, ahead & ADDR);
            }
            let (va, write) = (r & ADDR, r & STORE != 0);
            core.access(pt, pml, va, write);
            effect(va, write);
        }
    }
}
