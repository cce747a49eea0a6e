//! The program's vCPU loop: run until a rewritten `syscall` exits to the host, perform the
//! call, resume; end on `exit`/`exit_group`, on a fault, or when the engine stops.

use super::engine::{Outcome, ProgShared};
use super::patch::SYSCALL_PORT;
use super::syscalls::{After, Call};
use kvm_ioctls::{Cap, SyncReg, VcpuExit, VcpuFd};
use std::sync::atomic::Ordering;

pub(super) fn run(shared: &ProgShared, mut vcpu: VcpuFd) {
    // With KVM_CAP_SYNC_REGS the registers travel in the shared run structure: a call
    // then costs one KVM_RUN instead of three ioctls (docs/models/PROGRAMS.md, overhead).
    let sync = shared.vm.kvm.check_extension(Cap::SyncRegs);
    if sync {
        vcpu.set_sync_valid_reg(SyncReg::Register);
    }
    // This thread performs the program's calls: from here on with the least file rights.
    let entered = shared.process.lock().expect("process").jail.enter();
    let outcome = loop {
        if let Err(e) = &entered {
            break Outcome::Error(e.clone());
        }
        let port = match vcpu.run() {
            Ok(VcpuExit::IoOut(port, _)) => port,
            Ok(VcpuExit::Unsupported(crate::dirty_ring::EXIT_DIRTY_RING_FULL)) => {
                if let Err(e) = shared.vm.harvest_rings() {
                    break Outcome::Error(e.to_string());
                }
                continue;
            }
            Ok(other) => {
                let what = format!("{other:?}");
                break fault(shared, &vcpu, &what);
            }
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                if shared.stop.load(Ordering::Acquire) {
                    break Outcome::Stopped;
                }
                continue;
            }
            Err(e) => break Outcome::Error(format!("KVM_RUN: {e}")),
        };
        if port != SYSCALL_PORT {
            break fault(shared, &vcpu, &format!("a write to I/O port {port:#x}"));
        }
        match syscall(shared, &mut vcpu, sync) {
            Ok(None) => {}
            Ok(Some(o)) => break o,
            Err(e) => break Outcome::Error(e),
        }
    };
    let mut o = shared.outcome.lock().expect("outcome");
    *o = Some(outcome);
    // Set under the lock, so a waiter that checked `done` is already waiting when notified.
    shared.done.store(true, Ordering::Release);
    drop(o);
    shared.ended.notify_all();
}

/// Performs the call the guest just made; `Some` when the program ended.
fn syscall(shared: &ProgShared, vcpu: &mut VcpuFd, sync: bool) -> Result<Option<Outcome>, String> {
    let mut regs = if sync {
        vcpu.sync_regs().regs
    } else {
        vcpu.get_regs().map_err(|e| format!("KVM_GET_REGS: {e}"))?
    };
    let mut sregs = None;
    if regs.rax == 158 {
        sregs = Some(
            vcpu.get_sregs()
                .map_err(|e| format!("KVM_GET_SREGS: {e}"))?,
        );
    }
    let call = Call {
        nr: regs.rax,
        args: [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9],
        fs_base: sregs.as_ref().map_or(0, |s| s.fs.base),
    };
    let (r, after) = shared
        .process
        .lock()
        .expect("process")
        .call(&shared.vm, call);
    // What `syscall` leaves: the result in rax, the return address in rcx, flags in r11.
    regs.rax = r as u64;
    regs.rcx = regs.rip;
    regs.r11 = regs.rflags;
    match after {
        After::Exit(code) => return Ok(Some(Outcome::Exited(code))),
        After::Resume => {}
        After::FlushAndResume => shared.vm.zap_shadow().map_err(|e| e.to_string())?,
        After::SetFs(base) => {
            let mut s = sregs.expect("read for arch_prctl");
            s.fs.base = base;
            vcpu.set_sregs(&s)
                .map_err(|e| format!("KVM_SET_SREGS: {e}"))?;
        }
    }
    if sync {
        vcpu.sync_regs_mut().regs = regs;
        vcpu.set_sync_dirty_reg(SyncReg::Register);
    } else {
        vcpu.set_regs(&regs)
            .map_err(|e| format!("KVM_SET_REGS: {e}"))?;
    }
    Ok(None)
}

/// The one-line report of a program that stopped on something other than a call.
fn fault(shared: &ProgShared, vcpu: &VcpuFd, what: &str) -> Outcome {
    let regs = vcpu.get_regs().ok();
    let sregs = vcpu.get_sregs().ok();
    let rip = regs.as_ref().map_or(0, |r| r.rip);
    let process = shared.process.lock().expect("process");
    let is_syscall = |at: u64| {
        process.space.check(at, 2).is_ok() && {
            let off = at - process.space.window().start;
            let b = |i: u64| shared.vm.heap.byte(off + i);
            (b(0), b(1)) == (0x0f, 0x05)
        }
    };
    let mut why = String::new();
    if is_syscall(rip) {
        why = " (a `syscall` instruction the loader did not find)".into();
    } else if process.space.check(rip, 2).is_err() {
        // A `syscall` the loader never saw (code built or changed at run time) jumps to the
        // guest's absent supervisor; the instruction leaves its return address in rcx.
        let after = regs.as_ref().map_or(0, |r| r.rcx);
        why = match after.checked_sub(2).filter(|&at| is_syscall(at)) {
            Some(at) => format!(
                " (a `syscall` instruction at {at:#x} the loader did not find: code built or \
                 changed at run time cannot make system calls here)"
            ),
            None => " (instruction pointer outside the program's memory)".into(),
        };
    }
    if let Some(s) = &sregs {
        if s.cr2 != 0 && !process.space.contains(s.cr2) {
            why = format!(" (access to unmapped address {:#x})", s.cr2);
        }
    }
    Outcome::Faulted(format!(
        "the program stopped with {what} at rip {rip:#x}{why}"
    ))
}
