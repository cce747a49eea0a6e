//! Simulated Intel PML (page-modification logging), the write log of the exact engine.
//!
//! The guest runs under EPT with accessed/dirty flags on (EPTP bit 6), EPT mapping guest
//! memory in 4 KiB pages (as KVM does while it logs dirty pages). The model follows the
//! SDM (vol. 3C, 28.2.4 and 28.3.6 "Page-Modification Logging"):
//!
//! - Each 4 KiB guest-physical page has an EPT dirty bit, separate from the DIRTY bit of
//!   the guest's own PTE. When a write sets it (0 -> 1) the processor appends the page's
//!   guest-physical address to a 512-entry log.
//! - With EPT A/D on, the processor's accesses to guest paging-structure entries count as
//!   writes (SDM 28.2.4), so every page-table page the walker loads an entry from gets its
//!   EPT dirty bit set and is logged on 0 -> 1. As vmmload does, only the last-level tables
//!   are in the logged partition (PTE tables; PMD tables too when 2 MiB pages are mapped);
//!   the higher levels have their EPT dirty bit preset, so they never log.
//! - A log attempt that finds the log full causes a "PML log full" VM exit; the host
//!   moves the 512 entries to its own buffer and resets the log (KVM's
//!   `vmx_flush_pml_buffer`). The exit is counted ([`PML_EXITS`]).
//! - A drain (the VMM harvesting the log) also empties the partial log, clears the EPT
//!   dirty bits of the drained pages so their next write logs again, and invalidates the
//!   cached translations (INVEPT: a cached translation would otherwise let writes through
//!   without setting the cleared bit). The engine performs that invalidation before the
//!   workload runs again and counts it as a full flush.
//!
//! Logging starts when a monitor first asks for the write log; until then the engine
//! has no `Pml` and pays nothing for it.

use tierscope_core::{AddrRange, Level, OpCounter, WriteLog};

/// "PML log full" VM exits taken on the workload's cores: the engine's cost of simulated
/// PML, charged by the engines that model it (a run's `cost` output lists it).
pub static PML_EXITS: OpCounter = OpCounter {
    name: "pml_exits",
    cycles: |m| m.pml_exit,
    on_workload_core: true,
};

/// Entries in the hardware log (the PML index counts 511 down to 0).
pub const PML_ENTRIES: usize = 512;

const PAGE_SHIFT: u32 = 12;

/// What address translation reports to PML: the tables each walk loads from and the
/// stores. The engine's loops are generic over it, so that without PML ([`NoPml`]) they
/// carry no logging code and no check per access.
pub trait PmlHook {
    /// The walker loaded an entry of `table` (at `level`) while translating `va`.
    fn table_load(&mut self, table: u32, level: Level, va: u64);
    /// A store to `va`, after its translation.
    fn data_write(&mut self, va: u64);
}

/// PML off: nothing is logged.
pub struct NoPml;

impl PmlHook for NoPml {
    #[inline(always)]
    fn table_load(&mut self, _: u32, _: Level, _: u64) {}
    #[inline(always)]
    fn data_write(&mut self, _: u64) {}
}

impl PmlHook for Pml {
    /// Logs the table's page on its EPT dirty bit's 0 -> 1, for tables at or below the
    /// logged levels.
    #[inline(always)]
    fn table_load(&mut self, table: u32, level: Level, va: u64) {
        if level > self.top_logged || !self.table_dirty.set(table as usize) {
            return;
        }
        let t = table as usize;
        if t >= self.table_span.len() {
            self.table_span.resize(t + 1, 0);
            self.table_shift.resize(t + 1, 0);
        }
        let shift = level.span_shift() + 9;
        self.table_span[t] = va >> shift << shift;
        self.table_shift[t] = shift as u8;
        self.append(self.table_base + ((table as u64) << PAGE_SHIFT));
    }

    /// A store by the guest to `va` (in the heap): logs its page on its EPT dirty bit's
    /// 0 -> 1.
    #[inline(always)]
    fn data_write(&mut self, va: u64) {
        let gpa = (va - self.heap.start) & !((1 << PAGE_SHIFT) - 1);
        if self.data_dirty.set((gpa >> PAGE_SHIFT) as usize) {
            self.append(gpa);
        }
    }
}

/// A bitmap of EPT dirty bits.
#[derive(Debug, Clone, Default)]
struct Bits(Vec<u64>);

impl Bits {
    fn with_len(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }

    /// Sets bit `i`; true when it was clear (the 0 -> 1 transition PML logs).
    #[inline(always)]
    fn set(&mut self, i: usize) -> bool {
        if i / 64 >= self.0.len() {
            self.0.resize(i / 64 + 1, 0);
        }
        let w = &mut self.0[i / 64];
        let m = 1u64 << (i % 64);
        let was_clear = *w & m == 0;
        *w |= m;
        was_clear
    }

    fn clear(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w &= !(1u64 << (i % 64));
        }
    }
}

/// The PML state of one guest: EPT dirty bits, the hardware log, the host's buffer.
#[derive(Debug, Clone)]
pub struct Pml {
    /// Guest-physical address 0 is the heap's first byte (as the engine's `phys_addr`).
    heap: AddrRange,
    /// Guest-physical address of page table 0; table `t` sits at `table_base + t * 4 KiB`,
    /// above the heap.
    table_base: u64,
    /// The lowest table level in the logged partition is `Pte`; this is the highest.
    top_logged: Level,
    data_dirty: Bits,
    table_dirty: Bits,
    /// Start of the span each table maps, filled when the table is first logged (the
    /// host built the tables, so it knows which guest range each one translates).
    table_span: Vec<u64>,
    table_shift: Vec<u8>,
    log: [u64; PML_ENTRIES],
    len: usize,
    /// Entries moved out of the log (by exits and drains), not yet drained.
    host_data: Vec<u64>,
    host_tables: Vec<u32>,
    exits: u64,
    /// Dirty bits were cleared by a drain: cached translations must be invalidated
    /// before the guest runs again.
    invept_pending: bool,
}

impl Pml {
    /// Logging for a guest whose heap is `heap`; `huge` when 2 MiB pages are mapped (then
    /// PMD tables are last-level tables too).
    pub fn new(heap: AddrRange, huge: bool) -> Pml {
        let pages = (heap.len() >> PAGE_SHIFT) as usize;
        Pml {
            heap,
            table_base: heap.len().next_multiple_of(2 << 20),
            top_logged: if huge { Level::Pmd } else { Level::Pte },
            data_dirty: Bits::with_len(pages),
            table_dirty: Bits::default(),
            table_span: vec![],
            table_shift: vec![],
            log: [0; PML_ENTRIES],
            len: 0,
            host_data: vec![],
            host_tables: vec![],
            exits: 0,
            // The guest may hold translations cached before logging started.
            invept_pending: true,
        }
    }

    /// Appends `gpa` to the log; a full log first exits to the host, which empties it.
    #[inline(always)]
    fn append(&mut self, gpa: u64) {
        if self.len == PML_ENTRIES {
            self.exits += 1;
            self.empty_log();
        }
        self.log[self.len] = gpa;
        self.len += 1;
    }

    /// Moves the log's entries to the host's buffers (data pages, tables).
    fn empty_log(&mut self) {
        for &gpa in &self.log[..self.len] {
            if gpa < self.table_base {
                self.host_data.push(gpa);
            } else {
                self.host_tables
                    .push(((gpa - self.table_base) >> PAGE_SHIFT) as u32);
            }
        }
        self.len = 0;
    }

    /// VM exits taken because the log was full, since the last call.
    pub fn take_exits(&mut self) -> u64 {
        std::mem::take(&mut self.exits)
    }

    /// Whether a drain cleared dirty bits since the last call (the engine then
    /// invalidates every cached translation: INVEPT).
    pub fn take_invept(&mut self) -> bool {
        std::mem::take(&mut self.invept_pending)
    }

    /// Entries currently in the hardware log (for tests).
    pub fn logged(&self) -> usize {
        self.len
    }
}

impl WriteLog for Pml {
    fn drain_written(&mut self, out: &mut Vec<u64>) {
        self.empty_log();
        let first = out.len();
        for gpa in self.host_data.drain(..) {
            self.data_dirty.clear((gpa >> PAGE_SHIFT) as usize);
            out.push(self.heap.start + gpa);
        }
        out[first..].sort_unstable();
        self.invept_pending = true;
    }

    fn drain_tables(&mut self, out: &mut Vec<AddrRange>) {
        self.empty_log();
        let first = out.len();
        for t in self.host_tables.drain(..) {
            self.table_dirty.clear(t as usize);
            let (start, shift) = (self.table_span[t as usize], self.table_shift[t as usize]);
            out.push(AddrRange::new(start, start + (1u64 << shift)));
        }
        out[first..].sort_unstable_by_key(|r| r.start);
        self.invept_pending = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAP: AddrRange = AddrRange::new(1 << 40, (1 << 40) + (64 << 20));

    #[test]
    fn a_page_logs_once_until_drained_and_a_full_log_exits() {
        let mut p = Pml::new(HEAP, false);
        for k in 0..3 {
            p.data_write(HEAP.start + 4096 * 7 + k * 8);
        }
        assert_eq!(p.logged(), 1, "one entry per 0 -> 1 of the EPT dirty bit");
        // 1 + 1023 pages: the 513th log attempt finds the log full and exits, and so
        // does the 1025th (none here).
        for i in 0..1023u64 {
            p.data_write(HEAP.start + 4096 * (8 + i));
        }
        assert_eq!(p.take_exits(), 1);
        assert_eq!(p.logged(), 1024 - 512);
        let mut out = vec![];
        p.drain_written(&mut out);
        assert_eq!(out.len(), 1024);
        assert!(out.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(out[0], HEAP.start + 4096 * 7);
        assert!(p.take_invept());
        // Cleared on drain: the next write logs again.
        p.data_write(HEAP.start + 4096 * 7);
        assert_eq!(p.logged(), 1);
    }

    #[test]
    fn tables_above_the_last_level_never_log() {
        let mut p = Pml::new(HEAP, false);
        p.table_load(0, Level::Pml4, HEAP.start);
        p.table_load(3, Level::Pmd, HEAP.start);
        assert_eq!(p.logged(), 0);
        p.table_load(9, Level::Pte, HEAP.start + (2 << 20) + 4096);
        p.table_load(9, Level::Pte, HEAP.start + (2 << 20) + 8192);
        let mut spans = vec![];
        p.drain_tables(&mut spans);
        assert_eq!(
            spans,
            vec![AddrRange::new(
                HEAP.start + (2 << 20),
                HEAP.start + (4 << 20)
            )]
        );
        let mut huge = Pml::new(HEAP, true);
        huge.table_load(3, Level::Pmd, HEAP.start);
        huge.drain_tables(&mut spans);
        assert_eq!(spans[1], AddrRange::new(1 << 40, (1 << 40) + (1 << 30)));
    }
}
