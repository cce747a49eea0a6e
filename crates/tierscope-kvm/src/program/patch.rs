//! Rewriting a program's `syscall` instructions into port writes.
//!
//! The host here is PVM: the guest runs at CPL 3 with no kernel of its own, and a
//! `syscall` to a guest supervisor that does not exist ends the VM (triple fault). So, as
//! the loader copies the program in, every `syscall` (0F 05) becomes `out 0x12, al`
//! (E6 12): also two bytes, so no address moves. The port write exits to the host with
//! the guest's registers intact and `rip` already past the instruction, exactly where
//! `syscall` would return; the host performs the call and puts the result in `rax`
//! (crate::program::syscalls). The guest runs with IOPL 3, so the port write is allowed
//! at CPL 3.
//!
//! The instructions are found with a real decoder (iced-x86), not a byte search: 0F 05
//! also occurs inside other instructions' immediates and displacements. Decoding starts
//! at every function symbol (the .symtab of an unstripped static binary, which musl-gcc
//! leaves) and runs to the next, so a table of data between functions cannot shift the
//! decoding of what follows; a stripped binary is decoded linearly from each executable
//! segment's start. A `syscall` the decoder missed faults when executed, and the run
//! reports it (crate::program::run).

use super::elf::Image;
use iced_x86::{Code, Decoder, DecoderOptions};

/// The port the rewritten `syscall` instructions write to.
pub const SYSCALL_PORT: u16 = 0x12;
/// `out imm8, al` with [`SYSCALL_PORT`].
const OUT_AL: [u8; 2] = [0xe6, SYSCALL_PORT as u8];

/// Rewrites the `syscall` instructions in `code`, the bytes of an executable segment
/// loaded at `vaddr`; returns their addresses.
pub fn rewrite_syscalls(image: &Image, vaddr: u64, code: &mut [u8]) -> Vec<u64> {
    let end = vaddr + code.len() as u64;
    let mut starts: Vec<u64> = image
        .functions
        .iter()
        .map(|f| f.start)
        .filter(|&s| s >= vaddr && s < end)
        .collect();
    starts.insert(0, vaddr);
    starts.dedup();
    starts.push(end);
    let mut found = vec![];
    for w in starts.windows(2) {
        let (a, b) = ((w[0] - vaddr) as usize, (w[1] - vaddr) as usize);
        let mut d = Decoder::with_ip(64, &code[a..b], w[0], DecoderOptions::NONE);
        while d.can_decode() {
            let ins = d.decode();
            if ins.code() == Code::Syscall {
                found.push(ins.ip());
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    for &ip in &found {
        let o = (ip - vaddr) as usize;
        debug_assert_eq!(&code[o..o + 2], &[0x0f, 0x05]);
        code[o..o + 2].copy_from_slice(&OUT_AL);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(functions: Vec<std::ops::Range<u64>>) -> Image {
        Image {
            entry: 0,
            segments: vec![],
            phdr: 0,
            phent: 56,
            phnum: 0,
            functions,
        }
    }

    #[test]
    fn rewrites_real_syscalls_only() {
        // mov eax, 0x050f0000 (0F 05 inside an immediate); syscall; ret;
        // then a second function: mov eax, 60; syscall.
        let mut code = vec![0xb8, 0x00, 0x00, 0x0f, 0x05, 0x0f, 0x05, 0xc3];
        code.extend([0xb8, 60, 0, 0, 0, 0x0f, 0x05]);
        let base = 0x401000;
        let img = image(vec![base..base + 8, base + 8..base + 15]);
        let found = rewrite_syscalls(&img, base, &mut code);
        assert_eq!(found, vec![base + 5, base + 13]);
        assert_eq!(&code[3..5], &[0x0f, 0x05], "the immediate is untouched");
        assert_eq!(&code[5..7], &OUT_AL);
        assert_eq!(&code[13..15], &OUT_AL);
    }

    #[test]
    fn a_symbol_resynchronises_after_data_in_code() {
        // Function 1 is `ret`, then a byte of data (0xb8 would swallow the next 4 bytes as
        // an immediate in a linear sweep), then function 2: syscall; ret.
        let mut code = vec![0xc3, 0xb8, 0x0f, 0x05, 0xc3];
        let base = 0x401000;
        let linear = rewrite_syscalls(&image(vec![]), base, &mut code.clone());
        assert!(linear.is_empty(), "a linear sweep is fooled: {linear:x?}");
        let found = rewrite_syscalls(
            &image(vec![base..base + 1, base + 2..base + 5]),
            base,
            &mut code,
        );
        assert_eq!(found, vec![base + 2]);
    }
}
