//! The guest's control page (crate::abi, guest/abi.h): per-vCPU words the guest updates,
//! the byte maps it fills (truth counts, written pages), and the host's requests.

use crate::abi::{self, ctrl};
use crate::mem::Mmap;
use std::sync::atomic::Ordering;

/// Address of word `off` of vCPU `v`'s block.
pub(crate) fn vcpu_addr(v: usize, off: u64) -> u64 {
    abi::CTRL_ADDR + ctrl::VCPU + v as u64 * ctrl::VCPU_SIZE + off
}

/// Word `off` of vCPU `v`'s block.
pub(crate) fn vcpu_word(low: &Mmap, v: usize, off: u64) -> u64 {
    low.load(vcpu_addr(v, off))
}

/// Stores a word of the control page's shared part.
pub(crate) fn store(low: &Mmap, off: u64, v: u64) {
    low.store(abi::CTRL_ADDR + off, v);
}

/// Atomically takes and zeroes `n` bytes at `off`, calling `f(index, value)` for non-zero
/// ones in order.
pub(crate) fn swap_bytes(m: &Mmap, off: u64, n: u64, mut f: impl FnMut(u64, u8)) {
    let words = n.div_ceil(8);
    for wi in 0..words {
        let a = m.u64_at(off + wi * 8);
        if a.load(Ordering::Relaxed) == 0 {
            continue;
        }
        let v = a.swap(0, Ordering::AcqRel);
        for b in 0..8u64 {
            let byte = (v >> (8 * b)) as u8;
            let i = wi * 8 + b;
            if byte != 0 && i < n {
                f(i, byte);
            }
        }
    }
}
