//! Reading and clearing the ACCESSED and DIRTY bits of the page tables the host built, as
//! a kernel thread on another core would (each charged as a software walk): shared by the
//! synthetic workload's engine and a program's.

use crate::abi::pte;
use crate::vm::Vm;
use std::sync::atomic::Ordering;
use tierscope_core::{CostCounters, Level};

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
