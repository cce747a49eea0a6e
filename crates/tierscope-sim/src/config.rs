//! Configuration of the simulated hardware (the `[machine.tlb]` table, and the machine
//! the simulated engines are built from).

use serde::{Deserialize, Serialize};
use tierscope_core::{FieldError, PageSize, Paging};

/// Size and associativity of one translation cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheGeometry {
    pub entries: u32,
    pub ways: u32,
}

impl CacheGeometry {
    pub const fn new(entries: u32, ways: u32) -> Self {
        CacheGeometry { entries, ways }
    }

    /// Range checks; errors name `field` (the cache's key in `[machine.tlb]`).
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        if self.entries == 0 || self.ways == 0 || !self.entries.is_multiple_of(self.ways) {
            return Err(FieldError::new(
                field,
                format!(
                    "entries ({}) must be a positive multiple of ways ({})",
                    self.entries, self.ways
                ),
            ));
        }
        if !(self.entries / self.ways).is_power_of_two() {
            return Err(FieldError::new(
                field,
                format!(
                    "entries / ways ({}) must be a power of two (the set index is taken from \
                     address bits)",
                    self.entries / self.ways
                ),
            ));
        }
        Ok(())
    }
}

/// Per-core TLBs and paging-structure caches. Defaults: Skylake / Cascade Lake
/// (docs/models/MACHINE.md gives sources; paging-structure-cache sizes are reverse-engineered
/// estimates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlbConfig {
    /// L1 dTLB for 4 KiB pages.
    pub l1_4k: CacheGeometry,
    /// L1 dTLB for 2 MiB pages.
    pub l1_2m: CacheGeometry,
    /// Shared L2 TLB (STLB) for 4 KiB and 2 MiB pages.
    pub l2: CacheGeometry,
    /// Paging-structure cache of PML5 entries (5-level paging only).
    pub pml5_cache: CacheGeometry,
    /// Paging-structure cache of PML4 entries.
    pub pml4_cache: CacheGeometry,
    /// Paging-structure cache of PDPT entries.
    pub pdpte_cache: CacheGeometry,
    /// Paging-structure cache of PD entries that point to page tables.
    pub pde_cache: CacheGeometry,
}

impl Default for TlbConfig {
    fn default() -> Self {
        TlbConfig {
            l1_4k: CacheGeometry::new(64, 4),
            l1_2m: CacheGeometry::new(32, 4),
            l2: CacheGeometry::new(1536, 12),
            pml5_cache: CacheGeometry::new(2, 2),
            pml4_cache: CacheGeometry::new(4, 4),
            pdpte_cache: CacheGeometry::new(4, 4),
            pde_cache: CacheGeometry::new(32, 4),
        }
    }
}

impl TlbConfig {
    /// Range checks; field paths relative to the `[machine.tlb]` table.
    pub fn validate(&self) -> Result<(), FieldError> {
        self.l1_4k.validate("l1_4k")?;
        self.l1_2m.validate("l1_2m")?;
        self.l2.validate("l2")?;
        self.pml5_cache.validate("pml5_cache")?;
        self.pml4_cache.validate("pml4_cache")?;
        self.pdpte_cache.validate("pdpte_cache")?;
        self.pde_cache.validate("pde_cache")
    }
}

/// The simulated machine: paging, the size of the workload's pages, and the caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimMachine {
    pub paging: Paging,
    pub page_size: PageSize,
    pub tlb: TlbConfig,
    /// A last-level cache in front of the memory controllers (exact engine): only its
    /// misses reach NEMO's pipelines. None: every access does.
    pub llc: Option<tierscope_nemo::LlcConfig>,
    /// Host threads the exact engine may run the workload's cores on (results do not
    /// depend on it; docs/results/PERFORMANCE.md). 1: all cores on the run's own thread.
    pub host_threads: u32,
}

impl Default for SimMachine {
    fn default() -> Self {
        SimMachine {
            paging: Paging::FourLevel,
            page_size: PageSize::Base4K,
            tlb: TlbConfig::default(),
            llc: None,
            host_threads: 1,
        }
    }
}
