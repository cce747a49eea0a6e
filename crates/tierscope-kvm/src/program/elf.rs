//! Reading a static x86-64 Linux ELF executable: the loadable segments, the entry point and
//! where the program headers sit (musl finds its TLS template through AT_PHDR). Only what
//! loading needs; anything else (a dynamic interpreter, another machine) is refused with
//! the reason.

/// One PT_LOAD segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Where the segment goes (after the load bias of a static PIE).
    pub vaddr: u64,
    /// Bytes taken from the file at `offset`.
    pub file: std::ops::Range<usize>,
    /// Bytes in memory (the part past the file's is zero: .bss).
    pub mem_len: u64,
    pub executable: bool,
    pub writable: bool,
}

/// What loading an executable needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub entry: u64,
    pub segments: Vec<Segment>,
    /// Address of the program headers in memory (AT_PHDR), their size and count.
    pub phdr: u64,
    pub phent: u64,
    pub phnum: u64,
    /// Executable address ranges and their function symbols' ranges (from .symtab, when
    /// the file has one): where `syscall` instructions are looked for.
    pub functions: Vec<std::ops::Range<u64>>,
}

/// The end of user space under 4-level paging (Linux's TASK_SIZE): every segment must lie
/// below it, so no address computed from one can wrap.
pub const USER_END: u64 = 0x7fff_ffff_f000;

const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const PT_PHDR: u32 = 6;
const PF_X: u32 = 1;
const PF_W: u32 = 2;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const EM_X86_64: u16 = 62;
const SHT_SYMTAB: u32 = 2;
const STT_FUNC: u8 = 2;

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// Parses `file`; a static PIE (ET_DYN without an interpreter) is placed at `pie_base`.
pub fn parse(file: &[u8], pie_base: u64) -> Result<Image, String> {
    let short = || "truncated ELF file".to_string();
    if file.get(..4) != Some(b"\x7fELF") {
        return Err("not an ELF file (no \\x7fELF magic)".into());
    }
    if file.get(4) != Some(&2) || file.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let e_type = u16_at(file, 16).ok_or_else(short)?;
    let machine = u16_at(file, 18).ok_or_else(short)?;
    if machine != EM_X86_64 {
        return Err(format!("ELF machine {machine} is not x86-64 (62)"));
    }
    let bias = match e_type {
        ET_EXEC => 0,
        ET_DYN => pie_base,
        t => {
            return Err(format!(
                "ELF type {t} is not an executable (ET_EXEC or ET_DYN)"
            ))
        }
    };
    let entry = u64_at(file, 24).ok_or_else(short)?;
    let entry = entry
        .checked_add(bias)
        .filter(|&e| e < USER_END)
        .ok_or_else(|| format!("entry point {entry:#x} lies outside user space"))?;
    let phoff = u64_at(file, 32).ok_or_else(short)? as usize;
    let shoff = u64_at(file, 40).ok_or_else(short)? as usize;
    let phent = usize::from(u16_at(file, 54).ok_or_else(short)?);
    let phnum = usize::from(u16_at(file, 56).ok_or_else(short)?);
    let shent = usize::from(u16_at(file, 58).ok_or_else(short)?);
    let shnum = usize::from(u16_at(file, 60).ok_or_else(short)?);
    if phent < 56 {
        return Err(format!("program header size {phent} < 56"));
    }
    let mut segments = vec![];
    let mut phdr = None;
    for i in 0..phnum {
        let h = i
            .checked_mul(phent)
            .and_then(|o| o.checked_add(phoff))
            .ok_or_else(short)?;
        let p_type = u32_at(file, h).ok_or_else(short)?;
        let flags = u32_at(file, h + 4).ok_or_else(short)?;
        let offset = u64_at(file, h + 8).ok_or_else(short)? as usize;
        let vaddr = u64_at(file, h + 16).ok_or_else(short)?;
        let filesz = u64_at(file, h + 32).ok_or_else(short)? as usize;
        let memsz = u64_at(file, h + 40).ok_or_else(short)?;
        match p_type {
            PT_INTERP => {
                return Err(
                    "dynamically linked (it names an interpreter): only static programs run; \
                     build with `musl-gcc -static`"
                        .into(),
                )
            }
            PT_PHDR => phdr = vaddr.checked_add(bias),
            PT_LOAD => {
                let end = offset.checked_add(filesz).filter(|&e| e <= file.len());
                let Some(end) = end else {
                    return Err(format!("segment {i} runs past the end of the file"));
                };
                if (filesz as u64) > memsz {
                    return Err(format!("segment {i}: file size above memory size"));
                }
                let at = vaddr.checked_add(bias);
                if at
                    .and_then(|a| a.checked_add(memsz))
                    .is_none_or(|e| e > USER_END)
                {
                    return Err(format!(
                        "segment {i} ({memsz} bytes at {vaddr:#x}) lies outside user space \
                         (below {USER_END:#x})"
                    ));
                }
                segments.push(Segment {
                    vaddr: at.expect("checked above"),
                    file: offset..end,
                    mem_len: memsz,
                    executable: flags & PF_X != 0,
                    writable: flags & PF_W != 0,
                });
            }
            _ => {}
        }
    }
    if segments.is_empty() {
        return Err("no loadable segment".into());
    }
    // Without PT_PHDR (static non-PIE), the headers are wherever the segment holding
    // their file offset maps them.
    let phdr = phdr.or_else(|| {
        segments.iter().find_map(|s| {
            let end = phoff.checked_add(phnum * phent)?;
            (s.file.start <= phoff && end <= s.file.end)
                .then(|| s.vaddr + (phoff - s.file.start) as u64)
        })
    });
    let functions = functions(file, shoff, shent, shnum, bias);
    Ok(Image {
        entry,
        segments,
        phdr: phdr.unwrap_or(0),
        phent: phent as u64,
        phnum: phnum as u64,
        functions,
    })
}

/// The function symbols' address ranges from .symtab (empty when stripped or malformed).
fn functions(
    file: &[u8],
    shoff: usize,
    shent: usize,
    shnum: usize,
    bias: u64,
) -> Vec<std::ops::Range<u64>> {
    let mut out = vec![];
    if shoff == 0 || shent < 64 {
        return out;
    }
    for i in 0..shnum {
        let Some(h) = (i * shent).checked_add(shoff) else {
            break;
        };
        if u32_at(file, h + 4) != Some(SHT_SYMTAB) {
            continue;
        }
        let (Some(off), Some(size), Some(entsize)) = (
            u64_at(file, h + 24),
            u64_at(file, h + 32),
            u64_at(file, h + 56),
        ) else {
            continue;
        };
        // The table must lie inside the file: that also bounds the loop below.
        if entsize < 24 || off.checked_add(size).is_none_or(|e| e > file.len() as u64) {
            continue;
        }
        for k in 0..size / entsize {
            let s = (off + k * entsize) as usize;
            let (Some(&info), Some(value), Some(len)) =
                (file.get(s + 4), u64_at(file, s + 8), u64_at(file, s + 16))
            else {
                break;
            };
            let start = value.checked_add(bias);
            let end = start.and_then(|v| v.checked_add(len));
            if let (true, Some(start), Some(end)) = (info & 0xf == STT_FUNC, start, end) {
                if value != 0 && len != 0 && end <= USER_END {
                    out.push(start..end);
                }
            }
        }
    }
    out.sort_unstable_by_key(|r| (r.start, r.end));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF header and one program header, by hand.
    fn elf(e_type: u16, machine: u16, interp: bool) -> Vec<u8> {
        let mut f = vec![0u8; 64 + 56 * 2 + 16];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[16..18].copy_from_slice(&e_type.to_le_bytes());
        f[18..20].copy_from_slice(&machine.to_le_bytes());
        f[24..32].copy_from_slice(&0x401000u64.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&2u16.to_le_bytes());
        let ph = |f: &mut Vec<u8>,
                  at: usize,
                  t: u32,
                  flags: u32,
                  vaddr: u64,
                  filesz: u64,
                  memsz: u64| {
            f[at..at + 4].copy_from_slice(&t.to_le_bytes());
            f[at + 4..at + 8].copy_from_slice(&flags.to_le_bytes());
            f[at + 16..at + 24].copy_from_slice(&vaddr.to_le_bytes());
            f[at + 32..at + 40].copy_from_slice(&filesz.to_le_bytes());
            f[at + 40..at + 48].copy_from_slice(&memsz.to_le_bytes());
        };
        let len = f.len() as u64;
        ph(&mut f, 64, PT_LOAD, PF_X | 4, 0x400000, len, len + 100);
        ph(&mut f, 120, if interp { PT_INTERP } else { 4 }, 0, 0, 0, 0);
        f
    }

    #[test]
    fn reads_a_static_executable() {
        let f = elf(ET_EXEC, EM_X86_64, false);
        let img = parse(&f, 0x1000_0000).unwrap();
        assert_eq!(img.entry, 0x401000);
        assert_eq!(img.segments.len(), 1);
        let s = &img.segments[0];
        assert_eq!(
            (s.vaddr, s.file.clone(), s.mem_len),
            (0x400000, 0..f.len(), f.len() as u64 + 100)
        );
        assert!(s.executable && !s.writable);
        // The headers sit at file offset 64 of the segment mapped at 0x400000.
        assert_eq!((img.phdr, img.phnum), (0x400040, 2));
        // A static PIE is moved by the base.
        let pie = parse(&elf(ET_DYN, EM_X86_64, false), 0x1000_0000).unwrap();
        assert_eq!(pie.entry, 0x1040_1000);
    }

    #[test]
    fn refuses_what_it_cannot_load() {
        let err = |f: &[u8]| parse(f, 0).unwrap_err();
        assert!(err(b"#!/bin/sh\n").contains("not an ELF"));
        assert!(err(&elf(ET_EXEC, 3, false)).contains("not x86-64"));
        assert!(err(&elf(1, EM_X86_64, false)).contains("not an executable"));
        assert!(err(&elf(ET_EXEC, EM_X86_64, true)).contains("only static programs"));
        assert!(err(&elf(ET_EXEC, EM_X86_64, false)[..40]).contains("truncated"));
    }
}
