//! The initial stack of a Linux x86-64 process (System V ABI, figure 3.9): `argc`, the
//! `argv` and `envp` pointer arrays, the auxiliary vector, and above them the strings and
//! AT_RANDOM's 16 bytes. musl's start-up reads AT_PHDR (to find the TLS template, which
//! it installs with `arch_prctl`), AT_PAGESZ and AT_RANDOM.

use super::elf::Image;

const AT_NULL: u64 = 0;
const AT_PHDR: u64 = 3;
const AT_PHENT: u64 = 4;
const AT_PHNUM: u64 = 5;
const AT_PAGESZ: u64 = 6;
const AT_BASE: u64 = 7;
const AT_FLAGS: u64 = 8;
const AT_ENTRY: u64 = 9;
const AT_UID: u64 = 11;
const AT_EUID: u64 = 12;
const AT_GID: u64 = 13;
const AT_EGID: u64 = 14;
const AT_CLKTCK: u64 = 17;
const AT_SECURE: u64 = 23;
const AT_RANDOM: u64 = 25;
const AT_EXECFN: u64 = 31;

/// The bytes to place so that they end at `top`, and the stack pointer to start with.
pub struct InitialStack {
    pub bytes: Vec<u8>,
    pub start: u64,
    pub rsp: u64,
}

/// Builds the stack for `args` (argv[0] first) and `env` ending at `top`.
pub fn build(
    image: &Image,
    args: &[String],
    env: &[String],
    random: [u8; 16],
    top: u64,
) -> InitialStack {
    // Strings and the random bytes first, from the top down.
    let mut strings: Vec<u8> = vec![];
    let mut place = |s: &[u8]| -> u64 {
        strings.splice(0..0, s.iter().copied());
        strings.len() as u64
    };
    let random_at = place(&random);
    let arg_at: Vec<u64> = args
        .iter()
        .map(|a| place(&[a.as_bytes(), &[0]].concat()))
        .collect();
    let env_at: Vec<u64> = env
        .iter()
        .map(|e| place(&[e.as_bytes(), &[0]].concat()))
        .collect();
    // `place` returned distances from the top to each item's start.
    let addr = |dist: u64| top - dist;
    let strings_start = top - strings.len() as u64;

    let (uid, gid) = (0, 0);
    let aux = [
        (AT_PHDR, image.phdr),
        (AT_PHENT, image.phent),
        (AT_PHNUM, image.phnum),
        (AT_PAGESZ, 4096),
        (AT_BASE, 0),
        (AT_FLAGS, 0),
        (AT_ENTRY, image.entry),
        (AT_UID, uid),
        (AT_EUID, uid),
        (AT_GID, gid),
        (AT_EGID, gid),
        (AT_CLKTCK, 100),
        (AT_SECURE, 0),
        (AT_RANDOM, addr(random_at)),
        (AT_EXECFN, arg_at.first().map_or(0, |&d| addr(d))),
        (AT_NULL, 0),
    ];
    let mut words: Vec<u64> = vec![args.len() as u64];
    words.extend(arg_at.iter().map(|&d| addr(d)));
    words.push(0);
    words.extend(env_at.iter().map(|&d| addr(d)));
    words.push(0);
    for (k, v) in aux {
        words.push(k);
        words.push(v);
    }
    // `rsp` (pointing at argc) must be 16-byte aligned at entry.
    let rsp = (strings_start - 8 * words.len() as u64) & !15;
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.resize((strings_start - rsp) as usize, 0);
    bytes.extend_from_slice(&strings);
    InitialStack {
        bytes,
        start: rsp,
        rsp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(s: &InitialStack, va: u64) -> u64 {
        let o = (va - s.start) as usize;
        u64::from_le_bytes(s.bytes[o..o + 8].try_into().unwrap())
    }

    fn cstr(s: &InitialStack, va: u64) -> String {
        let o = (va - s.start) as usize;
        let end = s.bytes[o..].iter().position(|&b| b == 0).unwrap();
        String::from_utf8(s.bytes[o..o + end].to_vec()).unwrap()
    }

    #[test]
    fn argc_argv_envp_and_auxv_as_linux_lays_them_out() {
        let img = Image {
            entry: 0x401000,
            segments: vec![],
            phdr: 0x400040,
            phent: 56,
            phnum: 7,
            functions: vec![],
        };
        let top = 0x4000_0000;
        let args = vec!["prog".to_string(), "a b".to_string()];
        let s = build(&img, &args, &["K=V".to_string()], [7; 16], top);
        assert_eq!(s.rsp % 16, 0);
        assert_eq!(s.start + s.bytes.len() as u64, top);
        assert_eq!(word(&s, s.rsp), 2);
        assert_eq!(cstr(&s, word(&s, s.rsp + 8)), "prog");
        assert_eq!(cstr(&s, word(&s, s.rsp + 16)), "a b");
        assert_eq!(word(&s, s.rsp + 24), 0);
        assert_eq!(cstr(&s, word(&s, s.rsp + 32)), "K=V");
        assert_eq!(word(&s, s.rsp + 40), 0);
        // The auxiliary vector: find AT_PHDR and AT_RANDOM.
        let mut at = s.rsp + 48;
        let mut aux = std::collections::BTreeMap::new();
        loop {
            let (k, v) = (word(&s, at), word(&s, at + 8));
            if k == AT_NULL {
                break;
            }
            aux.insert(k, v);
            at += 16;
        }
        assert_eq!(aux[&AT_PHDR], 0x400040);
        assert_eq!(aux[&AT_PHNUM], 7);
        assert_eq!(aux[&AT_ENTRY], 0x401000);
        let r = (aux[&AT_RANDOM] - s.start) as usize;
        assert_eq!(&s.bytes[r..r + 16], &[7; 16]);
        assert_eq!(cstr(&s, aux[&AT_EXECFN]), "prog");
    }
}
