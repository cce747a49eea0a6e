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

/// What backs the guest's memory on the host: bare metal (no host), or a virtual machine
/// under nested paging (EPT) whose host maps guest-physical memory with pages of one size.
/// A TLB entry then caches the guest-virtual to host-physical translation at the smaller
/// of the guest's and the host's page size (Intel SDM vol. 3C, 28.3: combined mappings),
/// and a walk also walks the host's tables (docs/models/MACHINE.md, "Virtual machines").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HostPages {
    #[default]
    BareMetal,
    Base4K,
    Huge2M,
    Huge1G,
}

impl HostPages {
    /// The host's page size in bytes (`None` on bare metal).
    pub const fn bytes(self) -> Option<u64> {
        match self {
            HostPages::BareMetal => None,
            HostPages::Base4K => Some(4 << 10),
            HostPages::Huge2M => Some(2 << 20),
            HostPages::Huge1G => Some(1 << 30),
        }
    }

    /// Host (EPT) entries one guest-physical translation loads when nothing of it is
    /// cached: 4-level EPT down to the host's leaf (4, 3 or 2); 0 on bare metal.
    pub const fn ept_loads(self) -> u64 {
        match self {
            HostPages::BareMetal => 0,
            HostPages::Base4K => 4,
            HostPages::Huge2M => 3,
            HostPages::Huge1G => 2,
        }
    }

    /// Whether a guest page of `page` is cached in the TLB as several smaller entries
    /// (the host's pages are smaller than the guest's).
    pub fn splinters(self, page: PageSize) -> bool {
        self.bytes().is_some_and(|h| h < page.bytes())
    }

    pub fn parse(text: &str) -> Result<HostPages, String> {
        if text == "bare-metal" {
            return Ok(HostPages::BareMetal);
        }
        match tierscope_core::units::parse_size(text) {
            Ok(0x1000) => Ok(HostPages::Base4K),
            Ok(0x20_0000) => Ok(HostPages::Huge2M),
            Ok(0x4000_0000) => Ok(HostPages::Huge1G),
            _ => Err(format!(
                "host page size `{text}` is not supported (expected \"bare-metal\", \"4KiB\", \
                 \"2MiB\" or \"1GiB\")"
            )),
        }
    }
}

impl std::fmt::Display for HostPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostPages::BareMetal => "bare-metal",
            HostPages::Base4K => "4KiB",
            HostPages::Huge2M => "2MiB",
            HostPages::Huge1G => "1GiB",
        })
    }
}

impl Serialize for HostPages {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostPages {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        HostPages::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The simulated machine: paging, the size of the workload's pages, and the caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimMachine {
    pub paging: Paging,
    pub page_size: PageSize,
    /// Bare metal, or the host's page size under nested paging.
    pub host_pages: HostPages,
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
            host_pages: HostPages::BareMetal,
            tlb: TlbConfig::default(),
            llc: None,
            host_threads: 1,
        }
    }
}
