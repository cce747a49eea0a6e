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
    /// No access is executed: bits are drawn from the access-rate density of the current
    /// phase and the caches' miss probabilities (docs/FIDELITY.md). Terabyte and petabyte
    /// heaps in seconds; agrees with `exact` within the tolerances FIDELITY.md states.
    Stat,
    /// A real machine: the workload runs in a KVM micro-VM whose page tables the host
    /// built, in real time; monitors read and clear the real ACCESSED and DIRTY bits
    /// (docs/KVM.md). Built by tierscope-experiment (crate tierscope-kvm); needs /dev/kvm.
    Kvm,
}

/// Options of the KVM engine, the `[machine.kvm]` table (docs/KVM.md). Only for
/// `engine = "kvm"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KvmOptions {
    /// Executes the monitors' flush requests (a host-side zap of KVM's shadow page tables:
    /// milliseconds each, plus the guest's re-faults); false only counts them. Default true.
    pub execute_flushes: bool,
    /// Backs the regions some pattern accesses with host memory before the guest starts,
    /// so the guest runs at speed from the start. Default true.
    pub prefault: bool,
    /// Paces each vCPU at `workload.rate` accesses per real second; false runs the guest
    /// as fast as it can (the rate reached is in the machine stats). Default true.
    pub paced: bool,
    /// Accesses per pattern choice (masim's default 131072).
    pub batch: u64,
}

impl Default for KvmOptions {
    fn default() -> Self {
        KvmOptions {
            execute_flushes: true,
            prefault: true,
            paced: true,
            batch: 131_072,
        }
    }
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
        if self.entries == 0 || self.ways == 0 || !self.entries.is_multiple_of(self.ways) {
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
    /// `[machine.kvm]`: options of the KVM engine (only with `engine = "kvm"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kvm: Option<KvmOptions>,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            engine: EngineKind::Exact,
            paging_levels: 4,
            page_size: PageSize::Base4K,
            tlb: TlbConfig::default(),
            kvm: None,
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
        if self.kvm.is_some() && self.engine != EngineKind::Kvm {
            return Err("machine.kvm: only for engine = \"kvm\"".into());
        }
        if self.engine == EngineKind::Kvm {
            if self.paging_levels != 4 {
                return Err(format!(
                    "machine.paging_levels: the kvm engine builds 4-level page tables, got {}",
                    self.paging_levels
                ));
            }
            if self.kvm_options().batch == 0 {
                return Err("machine.kvm.batch: must be positive".into());
            }
        }
        self.tlb.validate()
    }

    /// The `[machine.kvm]` options, defaults when the table is absent.
    pub fn kvm_options(&self) -> KvmOptions {
        self.kvm.unwrap_or_default()
    }
}
