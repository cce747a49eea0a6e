//! A program's address space, kept by the host: one window of guest-virtual memory mapped
//! linearly onto the heap slot (guest-physical = slot base + offset in the window), in
//! which the image, the stack, `brk` and anonymous `mmap` areas live. The host sets a page's
//! leaf entry present when it maps the page and clears it when it unmaps it, so a program
//! touching memory it never mapped faults, as under Linux. Every buffer a system call names
//! is checked against these mappings before the host reads or writes it.

use crate::abi::pte;
use crate::vm::Vm;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use tierscope_core::{AddrRange, Level, Mapping, PageSize};

pub const PAGE: u64 = 4096;

pub fn page_up(x: u64) -> u64 {
    x.div_ceil(PAGE) * PAGE
}

/// What a mapping holds (its name in [`Space::mappings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Image,
    Brk,
    Mmap,
    Stack,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Image => "program:image",
            Kind::Brk => "program:brk",
            Kind::Mmap => "program:mmap",
            Kind::Stack => "program:stack",
        }
    }
}

/// The guest buffer is not (entirely) mapped: the call returns EFAULT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub addr: u64,
    pub len: u64,
}

pub struct Space {
    window: AddrRange,
    /// Mapped page ranges by start: (end, kind). Disjoint, page-aligned.
    mapped: BTreeMap<u64, (u64, Kind)>,
    brk_start: u64,
    brk: u64,
    /// `brk` may not grow past this (the lowest address `mmap` hands out).
    brk_limit: u64,
    /// `mmap` hands out addresses below this (the stack's guard gap).
    mmap_top: u64,
}

impl Space {
    /// An empty space over the heap window of `vm`, with `brk` starting at `brk_start` and
    /// `mmap` below `mmap_top`.
    pub fn new(vm: &Vm, brk_start: u64, mmap_top: u64) -> Space {
        let l = &vm.layout;
        Space {
            window: AddrRange::new(l.heap_va, l.heap_va + l.heap_len),
            mapped: BTreeMap::new(),
            brk_start,
            brk: brk_start,
            brk_limit: mmap_top,
            mmap_top,
        }
    }

    pub fn window(&self) -> AddrRange {
        self.window
    }

    /// Offset of `va` in the heap slot.
    fn off(&self, va: u64) -> u64 {
        va - self.window.start
    }

    fn set_leaves(vm: &Vm, start: u64, end: u64, present: bool) {
        let l = &vm.layout;
        let flags = pte::PRESENT | pte::WRITABLE | pte::USER;
        let mut va = start;
        while va < end {
            let (e, _) = vm
                .entry_gpa(Level::Pte, va)
                .expect("the window's tables exist");
            let v = if present {
                (l.heap_gpa + (va - l.heap_va)) | flags
            } else {
                0
            };
            vm.phys_u64(e).store(v, Ordering::Release);
            va += PAGE;
        }
    }

    /// Whether any page of `[start, end)` is mapped.
    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.mapped
            .range(..end)
            .next_back()
            .is_some_and(|(_, &(e, _))| e > start)
    }

    /// Maps `[start, end)` (page-aligned, inside the window, unmapped) as `kind`.
    pub fn map(&mut self, vm: &Vm, start: u64, end: u64, kind: Kind) {
        debug_assert!(start.is_multiple_of(PAGE) && end.is_multiple_of(PAGE) && start < end);
        debug_assert!(self.window.start <= start && end <= self.window.end);
        debug_assert!(!self.overlaps(start, end));
        Space::set_leaves(vm, start, end, true);
        self.mapped.insert(start, (end, kind));
    }

    /// Unmaps every mapped page of `[start, end)` and drops its contents (the host frees
    /// them; a later mapping reads zeros). The caller flushes the guest's translations.
    pub fn unmap(&mut self, vm: &Vm, start: u64, end: u64) {
        let hit: Vec<(u64, u64, Kind)> = self
            .mapped
            .range(..end)
            .filter(|(_, &(e, _))| e > start)
            .map(|(&s, &(e, k))| (s, e, k))
            .collect();
        for (s, e, k) in hit {
            self.mapped.remove(&s);
            if s < start {
                self.mapped.insert(s, (start, k));
            }
            if e > end {
                self.mapped.insert(end, (e, k));
            }
            let (a, b) = (s.max(start), e.min(end));
            Space::set_leaves(vm, a, b, false);
            vm.heap.discard(self.off(a), b - a);
        }
    }

    /// Checks that `[addr, addr + len)` is mapped; returns its offset in the heap slot.
    pub fn check(&self, addr: u64, len: u64) -> Result<u64, Fault> {
        let fault = Fault { addr, len };
        let end = addr.checked_add(len).ok_or(fault)?;
        if len == 0 {
            return Ok(0);
        }
        let mut at = addr;
        while at < end {
            match self.mapped.range(..=at).next_back() {
                Some((_, &(e, _))) if e > at => at = e,
                _ => return Err(fault),
            }
        }
        Ok(self.off(addr))
    }

    /// Linux `brk`: a request outside `[brk start, limit]` or over another mapping leaves
    /// the break where it is; the call returns the break.
    pub fn brk(&mut self, vm: &Vm, want: u64) -> (u64, bool) {
        if want < self.brk_start || want > self.brk_limit {
            return (self.brk, false);
        }
        let (old, new) = (page_up(self.brk), page_up(want));
        if new > old {
            if self.overlaps(old, new) {
                return (self.brk, false);
            }
            self.map(vm, old, new, Kind::Brk);
        }
        let shrank = new < old;
        if shrank {
            self.unmap(vm, new, old);
        }
        self.brk = want;
        (self.brk, shrank)
    }

    /// The highest free range of `len` bytes between the break and the top of `mmap`'s
    /// area (Linux's top-down allocator, first fit from the top).
    pub fn find_free(&self, len: u64) -> Option<u64> {
        let floor = page_up(self.brk);
        let fits = |lo: u64, top: u64| top >= lo.max(floor) + len;
        let mut top = self.mmap_top;
        for (&s, &(e, _)) in self.mapped.range(..self.mmap_top).rev() {
            if e <= top && fits(e, top) {
                return Some(top - len);
            }
            top = top.min(s);
        }
        fits(0, top).then(|| top - len)
    }

    /// Lowers the break's limit to `at` once `mmap` hands out memory there.
    pub fn note_mmap(&mut self, start: u64) {
        self.brk_limit = self.brk_limit.min(start);
    }

    /// The mappings, merged where adjacent and of one kind, sorted.
    pub fn mappings(&self) -> Vec<Mapping> {
        let mut out: Vec<(u64, u64, Kind)> = vec![];
        for (&s, &(e, k)) in &self.mapped {
            match out.last_mut() {
                Some(last) if last.1 == s && last.2 == k => last.1 = e,
                _ => out.push((s, e, k)),
            }
        }
        out.into_iter()
            .map(|(s, e, k)| Mapping {
                range: AddrRange::new(s, e),
                page_size: PageSize::Base4K,
                name: k.name().into(),
            })
            .collect()
    }

    /// Whether `va` is mapped.
    pub fn contains(&self, va: u64) -> bool {
        self.check(va, 1).is_ok()
    }
}
