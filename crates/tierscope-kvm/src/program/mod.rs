//! Real programs in the micro-VM (vmmload's design): an unmodified static x86-64 Linux
//! executable runs at CPL 3 with no guest kernel; the host loads it, builds its page
//! tables, and performs its system calls. Monitors read the real ACCESSED / DIRTY bits of
//! its page tables and KVM's dirty log of its writes. See docs/models/PROGRAMS.md.
//!
//! `elf.rs` reads the executable, `patch.rs` rewrites its `syscall` instructions into port
//! writes, `space.rs` keeps its mappings, `stack.rs` builds its initial stack,
//! `syscalls.rs` performs its calls, `run.rs` is the vCPU loop, and [`ProgramEngine`]
//! (`engine.rs`) is what monitors run on.

mod elf;
mod engine;
mod jail;
mod patch;
mod run;
mod space;
mod stack;
mod syscalls;

pub use engine::{Outcome, ProgramEngine, ProgramParams, ProgramReport};
pub use jail::Input;
pub use syscalls::{name as syscall_name, SyscallCounts, SUPPORTED as SUPPORTED_SYSCALLS};
