//! The `[machine]` table and the registry of engines: which engine runs the experiment,
//! what optional hardware each one offers, and the options of each.

use serde::{Deserialize, Serialize};
use tierscope_core::workload::{Density, WorkloadSpec};
use tierscope_core::{Capabilities, Capability, FieldError, PageSize, Paging};
use tierscope_kvm::KvmOptions;
use tierscope_sim::config::{HostPages, SimMachine, TlbConfig};

/// Which machine runs the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Every access goes through TLBs, paging-structure caches and the page walker.
    #[default]
    Exact,
    /// No access is executed: bits are drawn from the access-rate density of the current
    /// phase and the caches' miss probabilities (docs/models/FIDELITY.md). Terabyte and petabyte
    /// heaps in seconds; agrees with `exact` within the tolerances FIDELITY.md states.
    Stat,
    /// A real machine: the workload runs in a KVM micro-VM whose page tables the host
    /// built, in real time; monitors read and clear the real ACCESSED and DIRTY bits
    /// (docs/models/KVM.md). Needs /dev/kvm.
    Kvm,
}

impl EngineKind {
    pub const ALL: [EngineKind; 3] = [EngineKind::Exact, EngineKind::Stat, EngineKind::Kvm];

    pub const fn name(self) -> &'static str {
        match self {
            EngineKind::Exact => "exact",
            EngineKind::Stat => "stat",
            EngineKind::Kvm => "kvm",
        }
    }

    /// One line for `--help`.
    pub const fn help(self) -> &'static str {
        match self {
            EngineKind::Exact => {
                "every access through TLBs, paging-structure caches and a page walker"
            }
            EngineKind::Stat => {
                "statistical: bits drawn from access densities, terabytes to petabytes"
            }
            EngineKind::Kvm => "the workload in a real KVM micro-VM, in real time (needs /dev/kvm)",
        }
    }

    /// The optional hardware the engine offers monitors: what the engine itself declares.
    pub const fn capabilities(self) -> Capabilities {
        match self {
            EngineKind::Exact => tierscope_sim::SimEngine::Exact.capabilities(),
            EngineKind::Stat => tierscope_sim::SimEngine::Stat.capabilities(),
            EngineKind::Kvm => tierscope_kvm::KvmEngine::CAPABILITIES,
        }
    }

    /// Whether it runs in real time on real hardware (then monitors run one at a time,
    /// each on its own VM, with no unmonitored baseline).
    pub const fn is_real(self) -> bool {
        matches!(self, EngineKind::Kvm)
    }

    /// The engines that offer `c`, for error messages.
    pub fn offering(c: Capability) -> Vec<&'static str> {
        Self::ALL
            .into_iter()
            .filter(|e| e.capabilities().contains(c))
            .map(EngineKind::name)
            .collect()
    }

    /// What of `spec` the engine cannot run, with the field at fault (relative to the
    /// workload).
    pub fn check_workload(self, spec: &WorkloadSpec) -> Result<(), FieldError> {
        if self != EngineKind::Kvm {
            return Ok(());
        }
        // The KVM guest's generator knows masim's uniform and sequential patterns only.
        for (p, phase) in spec.phases.iter().enumerate() {
            if let Some(i) = phase
                .patterns
                .iter()
                .position(|pat| pat.density != Density::Uniform)
            {
                return Err(FieldError::new(
                    format!("phases[{p}].patterns[{i}].kind"),
                    "the kvm engine runs random (uniform) and sequential patterns only; use \
                     engine exact or stat",
                ));
            }
        }
        Ok(())
    }
}

/// The `[machine]` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MachineConfig {
    pub engine: EngineKind,
    /// 4 or 5; absent: the fewest levels whose user address space holds the workload
    /// (an experiment always holds the resolved number once parsed).
    pub paging_levels: Option<u8>,
    /// Page size of the workload's memory: "4KiB" or "2MiB" (THP).
    pub page_size: PageSize,
    /// "bare-metal" (the default), or the page size with which the host of a virtual
    /// machine backs guest memory under nested paging: "4KiB", "2MiB" or "1GiB" (engines
    /// exact and stat; docs/models/MACHINE.md, "Virtual machines").
    #[serde(skip_serializing_if = "is_bare_metal")]
    pub host_page_size: HostPages,
    pub tlb: TlbConfig,
    /// `[machine.kvm]`: options of the KVM engine (only with `engine = "kvm"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kvm: Option<KvmOptions>,
    /// `llc = { size = "32MiB", ways = 16 }`: a last-level cache in front of the memory
    /// controllers, so that NEMO sees its misses (engine `exact` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llc: Option<tierscope_nemo::LlcConfig>,
    /// Host threads the exact engine may run a multi-threaded workload's simulated cores
    /// on (1 to 64, at most one per workload thread is used); results are the same for
    /// any value. Default 1: runs already go in parallel (monitors, sweeps' `--jobs`).
    #[serde(skip_serializing_if = "is_one")]
    pub host_threads: u32,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_bare_metal(h: &HostPages) -> bool {
    *h == HostPages::BareMetal
}

/// Most host threads an experiment may ask for.
pub const MAX_HOST_THREADS: u32 = 64;

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            engine: EngineKind::Exact,
            paging_levels: None,
            page_size: PageSize::Base4K,
            host_page_size: HostPages::BareMetal,
            tlb: TlbConfig::default(),
            kvm: None,
            llc: None,
            host_threads: 1,
        }
    }
}

impl MachineConfig {
    /// The paging mode (4-level until resolved).
    pub fn paging(&self) -> Paging {
        if self.paging_levels == Some(5) {
            Paging::FiveLevel
        } else {
            Paging::FourLevel
        }
    }

    /// Checks the table and resolves `paging_levels` for `spec`; field paths relative to
    /// `[machine]`.
    pub fn resolve(&mut self, spec: &WorkloadSpec) -> Result<(), FieldError> {
        if let Some(l) = self.paging_levels {
            if l != 4 && l != 5 {
                return Err(FieldError::new(
                    "paging_levels",
                    format!("expected 4 or 5, got {l}"),
                ));
            }
        }
        if self.kvm.is_some() && self.engine != EngineKind::Kvm {
            return Err(FieldError::new("kvm", "only for engine = \"kvm\""));
        }
        self.tlb.validate().map_err(|e| e.under("tlb"))?;
        if !(1..=MAX_HOST_THREADS).contains(&self.host_threads) {
            return Err(FieldError::new(
                "host_threads",
                format!(
                    "expected 1 to {MAX_HOST_THREADS}, got {}",
                    self.host_threads
                ),
            ));
        }
        if self.host_threads != 1 && self.engine != EngineKind::Exact {
            return Err(FieldError::new(
                "host_threads",
                "only for engine = \"exact\" (the other engines run one host thread per \
                 run)",
            ));
        }
        if let Some(llc) = &self.llc {
            if self.engine != EngineKind::Exact {
                return Err(FieldError::new(
                    "llc",
                    "only for engine = \"exact\" (the statistical engine has no cache \
                     model for it, and the kvm engine's cache is the real one)",
                ));
            }
            llc.validate().map_err(|e| e.under("llc"))?;
        }
        if self.host_page_size != HostPages::BareMetal && self.engine == EngineKind::Kvm {
            return Err(FieldError::new(
                "host_page_size",
                "only for engines exact and stat (the kvm engine's host is the real one)",
            ));
        }
        if self.engine == EngineKind::Kvm {
            if self.paging_levels == Some(5) {
                return Err(FieldError::new(
                    "paging_levels",
                    "the kvm engine builds 4-level page tables, got 5",
                ));
            }
            self.kvm_options().validate().map_err(|e| e.under("kvm"))?;
            self.paging_levels = Some(4);
            return Ok(());
        }
        let fits = |paging| tierscope_sim::layout::lay_out(spec, paging, self.page_size).is_ok();
        let size = tierscope_core::units::format_size(spec.total_size());
        match self.paging_levels {
            Some(4) if !fits(Paging::FourLevel) => Err(FieldError::new(
                "paging_levels",
                format!(
                    "the workload's {size} do not fit in 4-level paging's 128 TiB of user \
                     address space: use 5 (or leave paging_levels out)"
                ),
            )),
            _ if !fits(Paging::FiveLevel) => Err(FieldError::new(
                "paging_levels",
                format!("the workload's {size} do not fit even in 5-level paging's 64 PiB"),
            )),
            Some(_) => Ok(()),
            None => {
                self.paging_levels = Some(if fits(Paging::FourLevel) { 4 } else { 5 });
                Ok(())
            }
        }
    }

    /// The `[machine.kvm]` options, defaults when the table is absent.
    pub fn kvm_options(&self) -> KvmOptions {
        self.kvm.unwrap_or_default()
    }

    /// The machine the simulated engines are built from.
    pub fn sim(&self) -> SimMachine {
        SimMachine {
            paging: self.paging(),
            page_size: self.page_size,
            host_pages: self.host_page_size,
            tlb: self.tlb,
            llc: self.llc,
            host_threads: self.host_threads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(text: &str) -> Result<MachineConfig, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn host_page_size_is_bare_metal_unless_set() {
        let spec = tierscope_core::workload::parse_masim("a, 64MiB\n\np\n10\na, 1, 4096, 1, ro\n")
            .unwrap();
        let bare = machine("").unwrap();
        assert_eq!(bare.host_page_size, HostPages::BareMetal);
        // Left out of the resolved document on bare metal, so its echo is unchanged.
        assert!(!toml::to_string(&bare).unwrap().contains("host_page_size"));
        for (text, host) in [
            ("4KiB", HostPages::Base4K),
            ("2MiB", HostPages::Huge2M),
            ("1GiB", HostPages::Huge1G),
            ("bare-metal", HostPages::BareMetal),
        ] {
            let mut m = machine(&format!("host_page_size = \"{text}\"")).unwrap();
            m.resolve(&spec).unwrap();
            assert_eq!(m.sim().host_pages, host);
        }
        let err = machine("host_page_size = \"64KiB\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not supported"), "{err}");
        let mut kvm = machine("engine = \"kvm\"\nhost_page_size = \"4KiB\"").unwrap();
        let err = kvm.resolve(&spec).unwrap_err();
        assert!(err.to_string().contains("host_page_size"), "{err}");
    }
}
