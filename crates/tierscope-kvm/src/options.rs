//! The options of the KVM engine, the `[machine.kvm]` table of an experiment file
//! (docs/models/KVM.md).

use serde::{Deserialize, Serialize};
use tierscope_core::FieldError;

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
    /// Logs writes (for a write-log monitor, or a program's truth) into KVM's dirty ring
    /// where the host offers one; false, or a host without it, uses the dirty bitmap.
    /// Default true.
    pub dirty_ring: bool,
}

impl Default for KvmOptions {
    fn default() -> Self {
        KvmOptions {
            execute_flushes: true,
            prefault: true,
            paced: true,
            batch: 131_072,
            dirty_ring: true,
        }
    }
}

impl KvmOptions {
    /// Range checks; field paths relative to the `[machine.kvm]` table.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.batch == 0 {
            return Err(FieldError::new("batch", "must be positive"));
        }
        Ok(())
    }
}
