//! tierscope's real backend: the workload runs in a KVM micro-VM whose 4-level page tables
//! the host builds in guest memory it also maps, so monitors read and clear real ACCESSED
//! and DIRTY bits, and KVM's dirty log records real guest writes. See docs/models/KVM.md.

pub mod abi;
mod bits;
mod boot;
mod ctrl;
mod dirty_log;
mod dirty_ring;
mod engine;
pub mod guard;
mod measure;
mod mem;
pub mod options;
mod pacer;
pub mod probe;
pub mod program;
mod stats;
mod vm;

pub use dirty_log::DirtyLog;
pub use engine::{pages_to_blocks, GuestCounters, KvmEngine, KvmParams};
pub use options::KvmOptions;
pub use probe::{accessed_probe, AccessedProbe};
pub use vm::Layout;

/// Why the KVM engine could not be used or failed.
#[derive(Debug, thiserror::Error)]
pub enum KvmError {
    /// /dev/kvm or a needed capability is missing (one line; the CLI exits 2).
    #[error("KVM is not available: {0}")]
    Unavailable(String),
    #[error("{op}: {err}")]
    Kvm {
        op: &'static str,
        err: kvm_ioctls::Error,
    },
    #[error("guest memory: {0}")]
    Mmap(std::io::Error),
    #[error("KVM engine configuration: {0}")]
    Config(String),
    #[error("KVM guest: {0}")]
    Guest(String),
}

impl KvmError {
    fn kvm(op: &'static str, err: kvm_ioctls::Error) -> KvmError {
        KvmError::Kvm { op, err }
    }
}

/// Ok when this host can run the KVM engine, else a one-line reason.
pub fn kvm_available() -> Result<(), String> {
    use kvm_ioctls::{Cap, Kvm};
    if !std::path::Path::new("/dev/kvm").exists() {
        return Err("/dev/kvm does not exist (no KVM on this host)".into());
    }
    let kvm = Kvm::new().map_err(|e| format!("cannot open /dev/kvm: {e}"))?;
    if kvm.get_api_version() != 12 {
        return Err(format!(
            "unexpected KVM API version {}",
            kvm.get_api_version()
        ));
    }
    for (cap, name) in [
        (Cap::UserMemory, "KVM_CAP_USER_MEMORY"),
        (Cap::ExtCpuid, "KVM_CAP_EXT_CPUID"),
    ] {
        if !kvm.check_extension(cap) {
            return Err(format!("KVM lacks {name}"));
        }
    }
    Ok(())
}
