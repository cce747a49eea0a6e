//! The host's view of guest/abi.h: guest-physical layout and control-page offsets. The
//! guest checks its side with `_Static_assert`s; `tests` below check a few of ours.

/// Guest-physical (and identity-mapped virtual) address of the GDT.
pub const GDT_ADDR: u64 = 0x1000;
/// The control page(s): `struct ctrl`.
pub const CTRL_ADDR: u64 = 0x10000;
pub const CTRL_SIZE: u64 = 0x19000;
/// Where the guest binary is loaded and entered.
pub const CODE_ADDR: u64 = 0x10_0000;
pub const CODE_MAX: u64 = 0x10_0000;
/// Selectors: the guest runs in user mode with the standard x86-64 Linux layout
/// (kernel CS 0x10, user CS 0x33, user SS 0x2b).
pub const USER_CS: u16 = 0x33;
pub const USER_DS: u16 = 0x2b;
/// vCPU stacks: `STACK_SIZE` each from `STACK_BASE`.
pub const STACK_BASE: u64 = 0x20_0000;
pub const STACK_SIZE: u64 = 0x1_0000;
/// Page-table pages of the low identity map (first 1 GiB, 2 MiB pages).
pub const PML4_ADDR: u64 = 0x60_0000;
pub const PDPT_LOW_ADDR: u64 = 0x60_1000;
pub const PD_LOW_ADDR: u64 = 0x60_2000;
/// Truth and written-page arrays start here (2 MiB aligned), in the low slot.
pub const ARRAYS_ADDR: u64 = 0x80_0000;
/// The low slot is identity-mapped up to 1 GiB.
pub const LOW_LIMIT: u64 = 1 << 30;
/// The slot of the heap's page-table pages starts at this guest-physical address.
pub const PT_SLOT_ADDR: u64 = 1 << 30;
/// The heap's guest-virtual base: PML4 entry 2, apart from the low identity map.
pub const HEAP_VA: u64 = 1 << 40;

pub const MAX_VCPUS: usize = 64;
pub const MAX_PATTERNS: usize = 16;
pub const MAX_PHASES: usize = 64;
pub const MAGIC: u64 = 0x5453_5f4b_564d_3031;

pub const PORT_EXIT: u16 = 0x10;
pub const PORT_DEBUG: u16 = 0x11;

pub const KIND_RANDOM: u32 = 0;
pub const KIND_SEQUENTIAL: u32 = 1;
pub const MODE_RO: u32 = 0;
pub const MODE_WO: u32 = 1;
pub const MODE_RW: u32 = 2;
pub const FLUSH_PAGES: u64 = 0;
pub const FLUSH_FULL: u64 = 1;

/// `struct ctrl` field offsets.
pub mod ctrl {
    pub const MAGIC: u64 = 0x000;
    pub const HEAP_VA: u64 = 0x008;
    pub const HEAP_LEN: u64 = 0x010;
    pub const TRUTH_VA: u64 = 0x018;
    pub const BLOCK_SHIFT: u64 = 0x020;
    pub const COUNT_MODE: u64 = 0x028;
    pub const WRITTEN_VA: u64 = 0x030;
    pub const BATCH: u64 = 0x038;
    pub const NPHASES: u64 = 0x040;
    pub const SEED: u64 = 0x048;
    pub const NVCPUS: u64 = 0x050;
    pub const PHASE: u64 = 0x080;
    pub const STOP: u64 = 0x0c0;
    pub const PAUSE: u64 = 0x100;
    pub const FLUSH_SEQ: u64 = 0x140;
    pub const FLUSH_KIND: u64 = 0x148;
    pub const FLUSH_START: u64 = 0x150;
    pub const FLUSH_END: u64 = 0x158;
    pub const VCPU: u64 = 0x1000;
    pub const VCPU_SIZE: u64 = 0x200;
    pub const PHASES: u64 = 0x9000;
    pub const PHASE_SIZE: u64 = 0x400;
}

/// `struct vcpu` field offsets.
pub mod vcpu {
    pub const BUDGET: u64 = 0x00;
    pub const DONE: u64 = 0x40;
    pub const PAUSED: u64 = 0x48;
    pub const FLUSH_DONE_SEQ: u64 = 0x50;
    pub const STATE: u64 = 0x58;
    pub const FLUSHES_PAGE: u64 = 0x60;
    pub const FLUSHES_FULL: u64 = 0x68;
    pub const PHASE_SEEN: u64 = 0x70;
    pub const PER_PAT: u64 = 0x80;
}

/// `struct phase` / `struct pattern` offsets.
pub mod phase {
    pub const NPAT: u64 = 0x00;
    pub const TOTAL_WEIGHT: u64 = 0x08;
    pub const PAT: u64 = 0x10;
    pub const PAT_SIZE: u64 = 48;
    pub const P_OFF: u64 = 0;
    pub const P_LEN: u64 = 8;
    pub const P_STRIDE: u64 = 16;
    pub const P_KIND: u64 = 24;
    pub const P_MODE: u64 = 28;
    pub const P_CUM_WEIGHT: u64 = 32;
}

/// Page-table entry bits.
pub mod pte {
    pub const PRESENT: u64 = 1 << 0;
    pub const WRITABLE: u64 = 1 << 1;
    pub const USER: u64 = 1 << 2;
    pub const ACCESSED: u64 = 1 << 5;
    pub const DIRTY: u64 = 1 << 6;
    pub const HUGE: u64 = 1 << 7;
    pub const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;
}

/// The guest binary, built from guest/guest.c by build.rs.
pub static GUEST_BIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest.bin"));

// The layout is consistent (checked at compile time).
const _: () = assert!(CTRL_ADDR + CTRL_SIZE <= CODE_ADDR);
const _: () = assert!(STACK_BASE + STACK_SIZE * MAX_VCPUS as u64 <= PML4_ADDR);
const _: () = assert!(ctrl::VCPU + ctrl::VCPU_SIZE * MAX_VCPUS as u64 == ctrl::PHASES);
const _: () = assert!(ctrl::PHASES + ctrl::PHASE_SIZE * MAX_PHASES as u64 == CTRL_SIZE);
const _: () = assert!(phase::PAT + phase::PAT_SIZE * MAX_PATTERNS as u64 <= ctrl::PHASE_SIZE);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_binary_fits() {
        assert!(!GUEST_BIN.is_empty() && (GUEST_BIN.len() as u64) < CODE_MAX);
    }
}
