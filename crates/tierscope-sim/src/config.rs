//! Configuration of the simulated hardware.

use serde::{Deserialize, Serialize};
use tierscope_core::{PageSize, Paging};

/// Which machine runs the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Every access goes through TLBs, paging-structure caches and the page walker.
    #[default]
    Exact,
}

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

    pub fn validate(&self, field: &str) -> Result<(), String> {
        if self.entries == 0 || self.ways == 0 || self.entries % self.ways != 0 {
            return Err(format!(
                "{field}: entries ({}) must be a positive multiple of ways ({})",
                self.entries, self.ways
            ));
        }
        if !(self.entries / self.ways).is_power_of_two() {
            return Err(format!(
                "{field}: entries / ways ({}) must be a power of two (the set index is taken from address bits)",
                self.entries / self.ways
            ));
        }
        Ok(())
    }
}

/// Per-core TLBs and paging-structure caches. Defaults: Skylake / Cascade Lake
/// (docs/MACHINE.md gives sources; paging-structure-cache sizes are reverse-engineered
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
    pub fn validate(&self) -> Result<(), String> {
        self.l1_4k.validate("machine.tlb.l1_4k")?;
        self.l1_2m.validate("machine.tlb.l1_2m")?;
        self.l2.validate("machine.tlb.l2")?;
        self.pml5_cache.validate("machine.tlb.pml5_cache")?;
        self.pml4_cache.validate("machine.tlb.pml4_cache")?;
        self.pdpte_cache.validate("machine.tlb.pdpte_cache")?;
        self.pde_cache.validate("machine.tlb.pde_cache")
    }
}

/// The simulated machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MachineConfig {
    pub engine: EngineKind,
    /// 4 or 5.
    pub paging_levels: u8,
    /// Page size of the workload's memory: "4KiB" or "2MiB" (THP).
    pub page_size: PageSize,
    pub tlb: TlbConfig,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            engine: EngineKind::Exact,
            paging_levels: 4,
            page_size: PageSize::Base4K,
            tlb: TlbConfig::default(),
        }
    }
}

impl MachineConfig {
    pub fn paging(&self) -> Paging {
        if self.paging_levels == 5 {
            Paging::FiveLevel
        } else {
            Paging::FourLevel
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.paging_levels != 4 && self.paging_levels != 5 {
            return Err(format!(
                "machine.paging_levels: expected 4 or 5, got {}",
                self.paging_levels
            ));
        }
        self.tlb.validate()
    }
}
