//! Reading and clearing the ACCESSED and DIRTY bits of the page tables the host built, as
//! a kernel thread on another core would (each charged as a software walk): shared by the
//! synthetic workload's engine and a program's.

use crate::abi::pte;
use crate::vm::Vm;
use std::sync::atomic::Ordering;
use tierscope_core::{CostCounters, Flush, Level};

pub(crate) fn accessed(vm: &Vm, cost: &mut CostCounters, level: Level, va: u64) -> Option<bool> {
    let (e, steps) = vm.entry_gpa(level, va)?;
    let v = vm.phys_u64(e).load(Ordering::Acquire);
    if v & pte::PRESENT == 0 {
        return None;
    }
    cost.charge_read(steps);
    Some(v & pte::ACCESSED != 0)
}

pub(crate) fn test_and_clear_accessed(
    vm: &Vm,
    cost: &mut CostCounters,
    level: Level,
    va: u64,
) -> Option<bool> {
    let (e, steps) = vm.entry_gpa(level, va)?;
    let a = vm.phys_u64(e);
    if a.load(Ordering::Relaxed) & pte::PRESENT == 0 {
        return None;
    }
    let old = a.fetch_and(!pte::ACCESSED, Ordering::AcqRel) & pte::ACCESSED != 0;
    cost.charge_test_and_clear(steps, old);
    Some(old)
}

pub(crate) fn dirty(vm: &Vm, cost: &mut CostCounters, level: Level, va: u64) -> Option<bool> {
    let (e, steps) = vm.entry_gpa(level, va)?;
    let v = vm.phys_u64(e).load(Ordering::Acquire);
    cost.charge_read(steps);
    Some(v & pte::DIRTY != 0)
}

pub(crate) fn test_and_clear_dirty(
    vm: &Vm,
    cost: &mut CostCounters,
    level: Level,
    va: u64,
) -> Option<bool> {
    let (e, steps) = vm.entry_gpa(level, va)?;
    let old = vm.phys_u64(e).fetch_and(!pte::DIRTY, Ordering::AcqRel) & pte::DIRTY != 0;
    cost.charge_read(steps);
    cost.clear_ops += 1;
    Some(old)
}

/// Counts a flush as the simulator does (one page flush per 4 KiB page up to Linux's
/// ceiling, else one full flush); true when it counts as a full flush.
pub(crate) fn count_flush(cost: &mut CostCounters, what: Flush) -> bool {
    match what {
        Flush::Page(_) => {
            cost.flushes_page += 1;
            false
        }
        Flush::Range { start, end } => {
            let pages = end.saturating_sub(start).div_ceil(4096);
            let full = pages > tierscope_core::machine::FLUSH_CEILING_PAGES;
            if full {
                cost.flushes_full += 1;
            } else {
                cost.flushes_page += pages;
            }
            full
        }
        Flush::All => {
            cost.flushes_full += 1;
            true
        }
    }
}
