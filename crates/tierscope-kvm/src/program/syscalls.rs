//! The program's system calls, performed by the host (vmmload's design: no guest kernel).
//!
//! The vCPU thread hands each call here with the guest's registers (the number in `rax`,
//! arguments in `rdi, rsi, rdx, r10, r8, r9`, the Linux x86-64 convention) and puts the
//! result in `rax` (a negative errno on failure). Every guest buffer is checked against
//! the program's mappings ([`Space::check`]) before the host touches it: a bad pointer
//! returns EFAULT and never reaches host memory outside the guest. Paths are resolved inside
//! the program's working directory, and only the inputs it was granted are reachable
//! besides ([`Jail`]). Guest file descriptors are the program's own numbers, mapped to host
//! descriptors the host opened for it (closed when the process ends); 0, 1 and 2 are the
//! host's standard streams (closing them in the guest only forgets them; their status flags
//! are restored at the end).
//! The supported calls are [`SUPPORTED`] (docs/models/PROGRAMS.md); any other returns ENOSYS and
//! is counted.

use super::jail::{self, Jail, Start};
use super::space::{page_up, Fault, Kind, Space, PAGE};
use crate::vm::Vm;
use std::collections::BTreeMap;
use tierscope_core::rng::Rng;

/// The calls the host performs, by number, with their Linux names.
pub const SUPPORTED: &[(u64, &str)] = &[
    (0, "read"),
    (1, "write"),
    (2, "open"),
    (3, "close"),
    (4, "stat"),
    (5, "fstat"),
    (6, "lstat"),
    (8, "lseek"),
    (9, "mmap"),
    (10, "mprotect"),
    (11, "munmap"),
    (12, "brk"),
    (13, "rt_sigaction"),
    (14, "rt_sigprocmask"),
    (16, "ioctl"),
    (17, "pread64"),
    (19, "readv"),
    (20, "writev"),
    (21, "access"),
    (28, "madvise"),
    (39, "getpid"),
    (60, "exit"),
    (63, "uname"),
    (72, "fcntl"),
    (79, "getcwd"),
    (96, "gettimeofday"),
    (102, "getuid"),
    (104, "getgid"),
    (107, "geteuid"),
    (108, "getegid"),
    (158, "arch_prctl"),
    (186, "gettid"),
    (201, "time"),
    (218, "set_tid_address"),
    (228, "clock_gettime"),
    (231, "exit_group"),
    (257, "openat"),
    (262, "newfstatat"),
    (318, "getrandom"),
];

/// The Linux name of call `nr`, when it is one tierscope knows.
pub fn name(nr: u64) -> Option<&'static str> {
    SUPPORTED.iter().find(|&&(n, _)| n == nr).map(|&(_, s)| s)
}

const ARCH_SET_FS: u64 = 0x1002;
const ARCH_GET_FS: u64 = 0x1003;
const AT_FDCWD: i64 = -100;
const AT_EMPTY_PATH: i32 = 0x1000;
const TIOCGWINSZ: u64 = 0x5413;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MADV_DONTNEED: u64 = 4;
/// The program's process and thread id.
const TID: i64 = 1;

/// What the vCPU loop does after a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Resume,
    /// The guest's translations must be dropped first (memory was unmapped).
    FlushAndResume,
    /// `arch_prctl(ARCH_SET_FS)`: set the FS base, then resume.
    SetFs(u64),
    Exit(i32),
}

/// The arguments of one call.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub nr: u64,
    pub args: [u64; 6],
    /// The guest's FS base now (for ARCH_GET_FS).
    pub fs_base: u64,
}

/// Counters of the calls a program made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyscallCounts {
    /// Calls performed, by number.
    pub done: BTreeMap<u64, u64>,
    /// Calls refused with ENOSYS, by number.
    pub unsupported: BTreeMap<u64, u64>,
    /// Calls that returned EFAULT because a buffer was not mapped.
    pub efaults: u64,
    /// The first bad buffer: (call number, address, length).
    pub first_efault: Option<(u64, u64, u64)>,
}

impl SyscallCounts {
    /// One line: calls made, those refused (ENOSYS) and bad buffers (EFAULT).
    pub fn summary(&self) -> String {
        let total: u64 = self.done.values().sum();
        let mut s = format!("{total} system calls");
        if !self.unsupported.is_empty() {
            let list: Vec<String> = self
                .unsupported
                .iter()
                .map(|(nr, n)| format!("{nr} x{n}"))
                .collect();
            s += &format!(", unsupported (ENOSYS): {}", list.join(", "));
        }
        if let Some((nr, addr, len)) = self.first_efault {
            s += &format!(
                ", {} bad buffers (EFAULT; first: {}({addr:#x}, {len} bytes))",
                self.efaults,
                name(nr).unwrap_or("?")
            );
        }
        s
    }
}

/// The host side of the program: its address space, descriptors and counters.
pub struct Process {
    pub space: Space,
    fds: BTreeMap<i64, i32>,
    pub counts: SyscallCounts,
    rng: Rng,
    /// What the program may reach on the host's file system.
    pub jail: Jail,
    /// The status flags of the standard streams at the start (the program may set
    /// O_NONBLOCK on the caller's terminal; it is undone at the end).
    std_flags: [i32; 3],
    /// Pages of the window the host wrote on the program's behalf since the last take
    /// (a `read` into a buffer): KVM's dirty log does not see host writes.
    host_written: Vec<u64>,
}

fn errno() -> i64 {
    -i64::from(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

/// A host call's result as the guest sees it.
fn ret(r: i64) -> i64 {
    if r < 0 {
        errno()
    } else {
        r
    }
}

impl Process {
    pub fn new(space: Space, seed: u64, jail: Jail) -> Process {
        // SAFETY: F_GETFL on the standard streams; -1 where one is closed.
        let std_flags = [0, 1, 2].map(|fd| unsafe { libc::fcntl(fd, libc::F_GETFL) });
        Process {
            space,
            fds: (0..3).map(|fd| (fd, fd as i32)).collect(),
            counts: SyscallCounts::default(),
            rng: Rng::for_stream(seed, "program/getrandom"),
            jail,
            std_flags,
            host_written: vec![],
        }
    }

    /// Pages the host wrote for the program since the last call (sorted, deduplicated).
    pub fn take_host_written(&mut self) -> Vec<u64> {
        let mut v = std::mem::take(&mut self.host_written);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A host pointer to the checked guest buffer `[addr, addr + len)`.
    fn buf(&mut self, vm: &Vm, nr: u64, addr: u64, len: u64) -> Result<*mut u8, i64> {
        match self.space.check(addr, len) {
            // SAFETY (of the add): the offset lies inside the heap mapping, checked above.
            Ok(off) => Ok(unsafe { vm.heap.as_ptr().add(off as usize) }),
            Err(Fault { addr, len }) => {
                self.counts.efaults += 1;
                self.counts.first_efault.get_or_insert((nr, addr, len));
                Err(-i64::from(libc::EFAULT))
            }
        }
    }

    /// A guest buffer the host is about to write: checked, and its pages noted.
    fn out_buf(&mut self, vm: &Vm, nr: u64, addr: u64, len: u64) -> Result<*mut u8, i64> {
        let p = self.buf(vm, nr, addr, len)?;
        let mut page = addr & !(PAGE - 1);
        while page < addr + len {
            self.host_written.push(page);
            page += PAGE;
        }
        Ok(p)
    }

    /// Copies `v` to the guest at `addr`.
    fn put<T: Copy>(&mut self, vm: &Vm, nr: u64, addr: u64, v: &T) -> Result<(), i64> {
        let n = std::mem::size_of::<T>();
        let p = self.out_buf(vm, nr, addr, n as u64)?;
        // SAFETY: `p` points at `n` checked bytes of guest memory; `v` is plain data.
        unsafe { std::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), p, n) };
        Ok(())
    }

    /// A NUL-terminated path from the guest (at most 4096 bytes).
    fn path(&mut self, vm: &Vm, nr: u64, addr: u64) -> Result<std::ffi::CString, i64> {
        let mut bytes = vec![];
        for i in 0..4096 {
            let p = self.buf(vm, nr, addr + i, 1)?;
            // SAFETY: one checked byte of guest memory.
            let b = unsafe { p.read_volatile() };
            if b == 0 {
                return std::ffi::CString::new(bytes).map_err(|_| -i64::from(libc::EINVAL));
            }
            bytes.push(b);
        }
        Err(-i64::from(libc::ENAMETOOLONG))
    }

    fn host_fd(&self, fd: u64) -> Result<i32, i64> {
        self.fds
            .get(&(fd as i64))
            .copied()
            .ok_or(-i64::from(libc::EBADF))
    }

    /// Where a path relative to guest descriptor `fd` starts.
    fn start(&self, fd: u64) -> Result<Start, i64> {
        if fd as i64 == AT_FDCWD {
            Ok(Start::Cwd)
        } else {
            self.host_fd(fd).map(Start::Dir)
        }
    }

    /// A new guest descriptor (the lowest free) for host descriptor `host`.
    fn add_fd(&mut self, host: i32) -> i64 {
        let fd = (0..).find(|n| !self.fds.contains_key(n)).expect("free fd");
        self.fds.insert(fd, host);
        fd
    }

    /// Performs `c`; returns the value for `rax` and what to do next.
    pub fn call(&mut self, vm: &Vm, c: Call) -> (i64, After) {
        let known = name(c.nr).is_some();
        if known {
            *self.counts.done.entry(c.nr).or_default() += 1;
        } else {
            *self.counts.unsupported.entry(c.nr).or_default() += 1;
            return (-i64::from(libc::ENOSYS), After::Resume);
        }
        match self.dispatch(vm, c) {
            Ok(r) => r,
            Err(e) => (e, After::Resume),
        }
    }

    fn dispatch(&mut self, vm: &Vm, c: Call) -> Result<(i64, After), i64> {
        let [a0, a1, a2, a3, a4, a5] = c.args;
        let nr = c.nr;
        let ok = |r: i64| Ok((r, After::Resume));
        match nr {
            0 | 17 => {
                let fd = self.host_fd(a0)?;
                let p = self.out_buf(vm, nr, a1, a2)?;
                // SAFETY: `p` is `a2` checked bytes of guest memory.
                let r = unsafe {
                    if nr == 0 {
                        libc::read(fd, p.cast(), a2 as usize)
                    } else {
                        libc::pread(fd, p.cast(), a2 as usize, a3 as i64)
                    }
                };
                ok(ret(r as i64))
            }
            1 => {
                let fd = self.host_fd(a0)?;
                let p = self.buf(vm, nr, a1, a2)?;
                // SAFETY: `p` is `a2` checked bytes of guest memory.
                ok(ret(unsafe { libc::write(fd, p.cast(), a2 as usize) } as i64))
            }
            19 | 20 => {
                let fd = self.host_fd(a0)?;
                let n = a2.min(1024);
                let mut iov = Vec::with_capacity(n as usize);
                for i in 0..n {
                    let at = a1 + 16 * i;
                    let p = self.buf(vm, nr, at, 16)?;
                    // SAFETY: 16 checked bytes of guest memory: one struct iovec.
                    let (base, len) = unsafe {
                        (
                            p.cast::<u64>().read_unaligned(),
                            p.add(8).cast::<u64>().read_unaligned(),
                        )
                    };
                    let q = if nr == 19 {
                        self.out_buf(vm, nr, base, len)?
                    } else {
                        self.buf(vm, nr, base, len)?
                    };
                    iov.push(libc::iovec {
                        iov_base: q.cast(),
                        iov_len: len as usize,
                    });
                }
                // SAFETY: every iovec points at checked guest memory of its length.
                let r = unsafe {
                    if nr == 19 {
                        libc::readv(fd, iov.as_ptr(), iov.len() as i32)
                    } else {
                        libc::writev(fd, iov.as_ptr(), iov.len() as i32)
                    }
                };
                ok(ret(r as i64))
            }
            2 | 257 => {
                let (start, path, flags, mode) = if nr == 2 {
                    (Start::Cwd, a0, a1, a2)
                } else {
                    (self.start(a0)?, a1, a2, a3)
                };
                let path = self.path(vm, nr, path)?;
                let fd = self.jail.open(start, &path, flags as i32, mode as u32)?;
                ok(self.add_fd(std::os::fd::IntoRawFd::into_raw_fd(fd)))
            }
            3 => {
                let host = self.host_fd(a0)?;
                self.fds.remove(&(a0 as i64));
                if host > 2 && !self.fds.values().any(|&h| h == host) {
                    // SAFETY: a descriptor this process opened for the guest.
                    return ok(ret(i64::from(unsafe { libc::close(host) })));
                }
                ok(0)
            }
            4 | 6 | 262 | 5 => {
                let st = match nr {
                    5 => jail::fstat(self.host_fd(a0)?)?,
                    _ => {
                        let (start, path, flags, out) = match nr {
                            262 => (a0, a1, a3 as i32, a2),
                            6 => (AT_FDCWD as u64, a0, libc::AT_SYMLINK_NOFOLLOW, a1),
                            _ => (AT_FDCWD as u64, a0, 0, a1),
                        };
                        let p = self.path(vm, nr, path)?;
                        self.buf(vm, nr, out, std::mem::size_of::<libc::stat>() as u64)?;
                        if p.is_empty() && flags & AT_EMPTY_PATH != 0 {
                            jail::fstat(self.host_fd(start)?)?
                        } else {
                            let nofollow = flags & libc::AT_SYMLINK_NOFOLLOW != 0;
                            self.jail.stat(self.start(start)?, &p, nofollow)?
                        }
                    }
                };
                // stat, lstat, fstat: the buffer is the second argument; newfstatat: the third.
                let out = if nr == 262 { a2 } else { a1 };
                self.put(vm, nr, out, &st)?;
                ok(0)
            }
            8 => {
                let fd = self.host_fd(a0)?;
                // SAFETY: plain call on a descriptor of the guest's.
                ok(ret(unsafe { libc::lseek(fd, a1 as i64, a2 as i32) }))
            }
            9 => self.mmap(vm, [a0, a1, a2, a3, a4, a5]),
            10 => {
                // Protections are not enforced (every page stays writable); the range
                // must be mapped.
                self.buf(vm, nr, a0, a1)?;
                ok(0)
            }
            11 => {
                if a0 % PAGE != 0 || a1 == 0 {
                    return ok(-i64::from(libc::EINVAL));
                }
                let w = self.space.window();
                let (s, e) = (a0.max(w.start), (a0.saturating_add(page_up(a1))).min(w.end));
                if s < e {
                    self.space.unmap(vm, s, e);
                }
                Ok((0, After::FlushAndResume))
            }
            12 => {
                let (brk, shrank) = self.space.brk(vm, a0);
                Ok((
                    brk as i64,
                    if shrank {
                        After::FlushAndResume
                    } else {
                        After::Resume
                    },
                ))
            }
            13 | 14 => {
                // No signal is ever delivered to the program: actions and masks are
                // accepted and have no effect; the old ones read as empty.
                let (old, size) = if nr == 13 {
                    (a2, 32)
                } else {
                    (a2, a3.min(128))
                };
                if old != 0 {
                    let p = self.out_buf(vm, nr, old, size)?;
                    // SAFETY: `size` checked bytes of guest memory.
                    unsafe { std::ptr::write_bytes(p, 0, size as usize) };
                }
                ok(0)
            }
            16 => {
                let fd = self.host_fd(a0)?;
                if a1 != TIOCGWINSZ {
                    return ok(-i64::from(libc::ENOTTY));
                }
                // SAFETY: all-zero is a valid winsize.
                let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
                // SAFETY: TIOCGWINSZ writes one winsize.
                let r = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
                if r < 0 {
                    return ok(errno());
                }
                self.put(vm, nr, a2, &ws)?;
                ok(0)
            }
            21 => {
                let p = self.path(vm, nr, a0)?;
                self.jail.access(Start::Cwd, &p, a1 as i32)?;
                ok(0)
            }
            28 => {
                self.buf(vm, nr, a0, a1)?;
                if a2 == MADV_DONTNEED {
                    // Anonymous memory reads zero afterwards, as under Linux.
                    let off = a0 - self.space.window().start;
                    vm.heap.discard(off & !(PAGE - 1), page_up(a1));
                }
                ok(0)
            }
            39 | 186 | 218 => ok(TID),
            // SAFETY: getuid and getgid cannot fail and touch no memory.
            102 | 107 => ok(i64::from(unsafe { libc::getuid() })),
            // SAFETY: as above.
            104 | 108 => ok(i64::from(unsafe { libc::getgid() })),
            // The status a parent would see: its low 8 bits, as under Linux.
            60 | 231 => Ok((0, After::Exit((a0 & 0xff) as i32))),
            63 => {
                // SAFETY: all-zero is a valid utsname; uname fills it.
                let mut u: libc::utsname = unsafe { std::mem::zeroed() };
                // SAFETY: a valid out-pointer.
                unsafe { libc::uname(&mut u) };
                self.put(vm, nr, a0, &u)?;
                ok(0)
            }
            72 => {
                let fd = self.host_fd(a0)?;
                match a1 as i32 {
                    libc::F_GETFD | libc::F_SETFD | libc::F_GETFL | libc::F_SETFL => {
                        // SAFETY: a flag query or update on a descriptor of the guest's.
                        ok(ret(i64::from(unsafe {
                            libc::fcntl(fd, a1 as i32, a2 as i32)
                        })))
                    }
                    _ => ok(-i64::from(libc::EINVAL)),
                }
            }
            79 => {
                // The working directory is the program's root and current directory.
                let b = b"/\0";
                if (b.len() as u64) > a1 {
                    return ok(-i64::from(libc::ERANGE));
                }
                let p = self.out_buf(vm, nr, a0, b.len() as u64)?;
                // SAFETY: `b.len()` checked bytes of guest memory.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len()) };
                ok(b.len() as i64)
            }
            96 => {
                // SAFETY: all-zero is a valid timeval; gettimeofday fills it.
                let mut tv: libc::timeval = unsafe { std::mem::zeroed() };
                // SAFETY: a valid out-pointer and no time zone.
                unsafe { libc::gettimeofday(&mut tv, std::ptr::null_mut()) };
                if a0 != 0 {
                    self.put(vm, nr, a0, &tv)?;
                }
                ok(0)
            }
            158 => match a0 {
                ARCH_SET_FS => Ok((0, After::SetFs(a1))),
                ARCH_GET_FS => {
                    self.put(vm, nr, a1, &c.fs_base)?;
                    ok(0)
                }
                _ => ok(-i64::from(libc::EINVAL)),
            },
            201 => {
                // SAFETY: time with no out-pointer.
                let t = i64::from(unsafe { libc::time(std::ptr::null_mut()) } as i32) as i64;
                if a0 != 0 {
                    self.put(vm, nr, a0, &t)?;
                }
                ok(t)
            }
            228 => {
                // SAFETY: all-zero is a valid timespec; clock_gettime fills it.
                let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
                // SAFETY: a valid out-pointer; a bad clock id returns EINVAL.
                let r = unsafe { libc::clock_gettime(a0 as i32, &mut ts) };
                if r < 0 {
                    return ok(errno());
                }
                self.put(vm, nr, a1, &ts)?;
                ok(0)
            }
            318 => {
                // Deterministic bytes from the run's seed: the same seed, the same run.
                let p = self.out_buf(vm, nr, a0, a1)?;
                for i in 0..a1 as usize {
                    // SAFETY: `a1` checked bytes of guest memory.
                    unsafe { p.add(i).write(self.rng.next_u64() as u8) };
                }
                ok(a1 as i64)
            }
            _ => unreachable!("every supported call is handled"),
        }
    }

    /// `mmap`: anonymous memory, or a private copy of a file's bytes.
    fn mmap(&mut self, vm: &Vm, a: [u64; 6]) -> Result<(i64, After), i64> {
        let [addr, len, _prot, flags, fd, off] = a;
        let einval = Ok((-i64::from(libc::EINVAL), After::Resume));
        if len == 0 || off % PAGE != 0 {
            return einval;
        }
        let len = page_up(len);
        let w = self.space.window();
        let mut after = After::Resume;
        let start = if flags & MAP_FIXED != 0 {
            if addr % PAGE != 0 || addr < w.start || addr.saturating_add(len) > w.end {
                return Ok((-i64::from(libc::ENOMEM), After::Resume));
            }
            self.space.unmap(vm, addr, addr + len);
            after = After::FlushAndResume;
            addr
        } else {
            match self.space.find_free(len) {
                Some(s) => s,
                None => return Ok((-i64::from(libc::ENOMEM), After::Resume)),
            }
        };
        self.space.map(vm, start, start + len, Kind::Mmap);
        self.space.note_mmap(start);
        if flags & MAP_ANONYMOUS == 0 {
            let host = match self.host_fd(fd) {
                Ok(h) => h,
                Err(e) => {
                    self.space.unmap(vm, start, start + len);
                    return Ok((e, After::FlushAndResume));
                }
            };
            let p = self.out_buf(vm, 9, start, len)?;
            let mut done = 0usize;
            while (done as u64) < len {
                // SAFETY: `p + done .. p + len` is checked guest memory.
                let r = unsafe {
                    libc::pread(
                        host,
                        p.add(done).cast(),
                        len as usize - done,
                        (off + done as u64) as i64,
                    )
                };
                if r <= 0 {
                    break;
                }
                done += r as usize;
            }
        }
        Ok((start as i64, after))
    }
}

impl Drop for Process {
    /// Closes the descriptors opened for the program and gives the standard streams back
    /// their status flags (the program may have set O_NONBLOCK on the caller's terminal).
    fn drop(&mut self) {
        for &host in self.fds.values().filter(|&&h| h > 2) {
            // SAFETY: a descriptor this process opened for the guest, closed once (each
            // host descriptor stands for one guest descriptor: there is no dup).
            unsafe { libc::close(host) };
        }
        for (fd, &flags) in self.std_flags.iter().enumerate() {
            if flags >= 0 {
                // SAFETY: F_SETFL on a standard stream, with the flags it had.
                unsafe { libc::fcntl(fd as i32, libc::F_SETFL, flags) };
            }
        }
    }
}
