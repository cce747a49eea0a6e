//! What a program may reach on the host: its working directory, read and written, and the
//! input files the experiment grants, read only. Nothing else.
//!
//! The working directory is the program's `/` and its current directory. Every path the
//! program names is resolved by the kernel inside it (`openat2` with `RESOLVE_IN_ROOT`):
//! `..` stops at it, absolute paths and symbolic links are taken relative to it, and magic
//! links (`/proc/self/fd/N`) and mount crossings are refused. So `/etc/shadow`,
//! `/proc/self/mem` or `../../x` name files inside the working directory, which normally
//! do not exist (ENOENT). An input appears at its path relative to the experiment file
//! (`inputs = ["data/in.bin"]` is `/data/in.bin` and `data/in.bin` to the program) and
//! opens read-only (EACCES for write access).
//!
//! When tierscope runs as root, the thread that performs the program's calls also gives up
//! root's rights over files: its file-system user and group become the working
//! directory's owner (`nobody` for the temporary directory), which drops root's
//! permission-bypassing capabilities on that thread only (setfsuid(2)).
//!
//! The default working directory is a fresh temporary one, removed when the run ends.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `nobody` / `nogroup` on Debian: the owner of the temporary working directory when
/// tierscope runs as root.
const NOBODY: u32 = 65534;

/// An error for the guest: a negative errno.
pub type Errno = i64;

fn neg(e: i32) -> Errno {
    -i64::from(e)
}

fn last_errno() -> Errno {
    neg(std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO))
}

/// Where a relative path starts.
#[derive(Debug, Clone, Copy)]
pub enum Start {
    /// The program's current directory (its root).
    Cwd,
    /// A directory the program opened (a host descriptor inside the working directory).
    Dir(RawFd),
}

/// The program's view of the host's files.
pub struct Jail {
    /// The working directory, opened `O_PATH`.
    root: OwnedFd,
    dir: PathBuf,
    /// Input files by their path as the program names it (relative, normalised).
    inputs: BTreeMap<Vec<u8>, PathBuf>,
    /// The file-system user and group the program's calls run as (when tierscope is root).
    fs_ids: Option<(u32, u32)>,
    /// A temporary working directory of ours, removed on drop.
    temporary: bool,
}

/// An input the program may read: the path it uses and the host file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub name: String,
    pub host: PathBuf,
}

impl Jail {
    /// A jail over `workdir` (a fresh temporary directory when `None`) granting `inputs`.
    pub fn new(workdir: Option<&Path>, inputs: &[Input]) -> Result<Jail, String> {
        let root_uid = euid() == 0;
        let (dir, temporary) = match workdir {
            Some(d) => (d.to_path_buf(), false),
            None => (make_temp_dir()?, true),
        };
        let mut jail = Jail {
            root: open_dir(&dir)?,
            dir,
            inputs: BTreeMap::new(),
            fs_ids: None,
            temporary,
        };
        if root_uid {
            jail.fs_ids = Some(if temporary {
                std::os::unix::fs::chown(&jail.dir, Some(NOBODY), Some(NOBODY))
                    .map_err(|e| format!("{}: {e}", jail.dir.display()))?;
                (NOBODY, NOBODY)
            } else {
                let m = std::fs::metadata(&jail.dir)
                    .map_err(|e| format!("{}: {e}", jail.dir.display()))?;
                (m.uid(), m.gid())
            });
        }
        for i in inputs {
            let key = normalise(i.name.as_bytes())
                .filter(|k| !k.is_empty())
                .ok_or_else(|| format!("input `{}`: not a file path", i.name))?;
            jail.inputs.insert(key, i.host.clone());
        }
        Ok(jail)
    }

    /// The working directory on the host.
    #[cfg(test)]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Called once on the thread that performs the program's calls: from then on its file
    /// calls run with the working directory owner's rights (when tierscope is root).
    pub fn enter(&self) -> Result<(), String> {
        if let Some((uid, gid)) = self.fs_ids {
            set_fs_ids(uid, gid);
            if current_fs_ids() != (uid, gid) {
                return Err(format!("could not switch file-system uid to {uid}"));
            }
        }
        Ok(())
    }

    /// The input a path names, when it names one (relative paths only from the current
    /// directory: a directory the program opened holds no inputs).
    fn input(&self, start: Start, path: &CStr) -> Option<&Path> {
        let bytes = path.to_bytes();
        if matches!(start, Start::Dir(_)) && !bytes.starts_with(b"/") {
            return None;
        }
        self.inputs.get(&normalise(bytes)?).map(PathBuf::as_path)
    }

    /// Runs `f` with tierscope's own file rights (to open an input the experiment names).
    fn as_tierscope<T>(&self, f: impl FnOnce() -> T) -> T {
        if self.fs_ids.is_none() {
            return f();
        }
        let (uid, gid) = current_fs_ids();
        set_fs_ids(euid(), egid());
        let r = f();
        set_fs_ids(uid, gid);
        r
    }

    /// Resolves `path` inside the jail with `openat2`: the descriptor, or a negative errno.
    fn resolve(&self, start: Start, path: &CStr, flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
        let dirfd = match start {
            Start::Dir(fd) if !path.to_bytes().starts_with(b"/") => fd,
            _ => self.root.as_raw_fd(),
        };
        let creates = flags & (libc::O_CREAT | libc::O_TMPFILE) != 0;
        // SAFETY: all-zero is a valid open_how; its fields are set below.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_CLOEXEC) as u32 as u64;
        how.mode = if creates { u64::from(mode & 0o7777) } else { 0 };
        how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_XDEV;
        for _ in 0..16 {
            // SAFETY: a NUL-terminated path and an open_how of the size passed.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    dirfd,
                    path.as_ptr(),
                    &how as *const libc::open_how,
                    std::mem::size_of::<libc::open_how>(),
                )
            };
            if r >= 0 {
                // SAFETY: a descriptor openat2 just returned, owned by nobody else.
                return Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) });
            }
            let e = last_errno();
            // EAGAIN: a rename raced the lookup (openat2(2)); try again.
            if e != neg(libc::EAGAIN) {
                // A mount crossing: outside what the program may reach.
                return Err(if e == neg(libc::EXDEV) {
                    neg(libc::EACCES)
                } else {
                    e
                });
            }
        }
        Err(neg(libc::EAGAIN))
    }

    /// `openat` for the program: a host descriptor it may use, or a negative errno.
    pub fn open(&self, start: Start, path: &CStr, flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
        if let Some(host) = self.input(start, path) {
            if flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC | libc::O_APPEND) != 0
                || flags & libc::O_TMPFILE == libc::O_TMPFILE
            {
                return Err(neg(libc::EACCES));
            }
            let keep = flags & (libc::O_NONBLOCK | libc::O_DIRECTORY | libc::O_NOATIME);
            let c = CString::new(host.as_os_str().as_bytes()).map_err(|_| neg(libc::EINVAL))?;
            return self.as_tierscope(|| {
                // SAFETY: a NUL-terminated path; read-only flags.
                let r = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC | keep) };
                if r < 0 {
                    Err(last_errno())
                } else {
                    // SAFETY: a descriptor open just returned.
                    Ok(unsafe { OwnedFd::from_raw_fd(r) })
                }
            });
        }
        self.resolve(start, path, flags, mode)
    }

    /// `stat` / `lstat` / `newfstatat` for the program.
    pub fn stat(&self, start: Start, path: &CStr, nofollow: bool) -> Result<libc::stat, Errno> {
        if let Some(host) = self.input(start, path) {
            let c = CString::new(host.as_os_str().as_bytes()).map_err(|_| neg(libc::EINVAL))?;
            return self.as_tierscope(|| {
                // SAFETY: all-zero is a valid stat; a NUL-terminated path and out-pointer.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                if unsafe { libc::stat(c.as_ptr(), &mut st) } < 0 {
                    Err(last_errno())
                } else {
                    Ok(st)
                }
            });
        }
        let nofollow = if nofollow { libc::O_NOFOLLOW } else { 0 };
        let fd = self.resolve(start, path, libc::O_PATH | nofollow, 0)?;
        fstat(fd.as_raw_fd())
    }

    /// `access` / `faccessat` for the program (checked with the rights its calls run with).
    pub fn access(&self, start: Start, path: &CStr, mode: i32) -> Result<(), Errno> {
        if let Some(host) = self.input(start, path) {
            if mode & libc::W_OK != 0 {
                return Err(neg(libc::EACCES));
            }
            let c = CString::new(host.as_os_str().as_bytes()).map_err(|_| neg(libc::EINVAL))?;
            // SAFETY: a NUL-terminated path.
            let r = self.as_tierscope(|| unsafe { libc::access(c.as_ptr(), mode) });
            return if r < 0 { Err(last_errno()) } else { Ok(()) };
        }
        let fd = self.resolve(start, path, libc::O_PATH, 0)?;
        // SAFETY: an O_PATH descriptor and an empty path (AT_EMPTY_PATH).
        let r = unsafe {
            libc::syscall(
                libc::SYS_faccessat2,
                fd.as_raw_fd(),
                c"".as_ptr(),
                mode,
                libc::AT_EMPTY_PATH | libc::AT_EACCESS,
            )
        };
        if r < 0 {
            Err(last_errno())
        } else {
            Ok(())
        }
    }
}

impl Drop for Jail {
    fn drop(&mut self) {
        if self.temporary {
            // Ours: made by `make_temp_dir` for this run; what the program left goes too.
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `fstat` of a host descriptor.
pub fn fstat(fd: RawFd) -> Result<libc::stat, Errno> {
    // SAFETY: all-zero is a valid stat; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        Err(last_errno())
    } else {
        Ok(st)
    }
}

/// A path as the program names it, relative to its root: `.` and empty parts dropped,
/// `..` stopping at the root, as the kernel resolves it under `RESOLVE_IN_ROOT` (without
/// symbolic links). `None` for a path with a NUL.
fn normalise(path: &[u8]) -> Option<Vec<u8>> {
    if path.contains(&0) {
        return None;
    }
    let mut parts: Vec<&[u8]> = vec![];
    for p in path.split(|&b| b == b'/') {
        match p {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    Some(parts.join(&b'/'))
}

fn open_dir(dir: &Path) -> Result<OwnedFd, String> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| format!("{}: a path with a NUL byte", dir.display()))?;
    // SAFETY: a NUL-terminated path.
    let r = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if r < 0 {
        return Err(format!(
            "working directory {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: a descriptor open just returned.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

fn make_temp_dir() -> Result<PathBuf, String> {
    let mut template = std::env::temp_dir()
        .join("tierscope-program-XXXXXX")
        .into_os_string()
        .into_vec();
    template.push(0);
    // SAFETY: a writable NUL-terminated template ending in XXXXXX.
    let r = unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) };
    if r.is_null() {
        return Err(format!(
            "cannot create a working directory in {}: {}",
            std::env::temp_dir().display(),
            std::io::Error::last_os_error()
        ));
    }
    template.pop();
    Ok(PathBuf::from(std::ffi::OsString::from_vec(template)))
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

fn egid() -> u32 {
    // SAFETY: as above.
    unsafe { libc::getegid() }
}

/// The calling thread's file-system ids (the raw system calls: per thread, unlike the
/// process-wide setuid family).
fn set_fs_ids(uid: u32, gid: u32) {
    // SAFETY: setfsgid/setfsuid take an id and touch no memory; the group first, while
    // the thread may still change it.
    unsafe {
        libc::syscall(libc::SYS_setfsgid, gid);
        libc::syscall(libc::SYS_setfsuid, uid);
    }
}

/// The calling thread's file-system user and group.
fn current_fs_ids() -> (u32, u32) {
    // SAFETY: setfsuid(-1) and setfsgid(-1) fail and return the current id, changing
    // nothing.
    unsafe {
        (
            libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32,
            libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tierscope-jail-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    #[test]
    fn paths_are_normalised_as_under_a_root() {
        let n = |p: &str| String::from_utf8(normalise(p.as_bytes()).unwrap()).unwrap();
        assert_eq!(n("/a/./b//c"), "a/b/c");
        assert_eq!(n("../../etc/shadow"), "etc/shadow");
        assert_eq!(n("a/../b"), "b");
        assert_eq!(n("/"), "");
    }

    #[test]
    fn nothing_outside_the_working_directory_can_be_reached() {
        let base = tmpdir("escape");
        let work = base.join("work");
        std::fs::create_dir(&work).unwrap();
        std::fs::write(base.join("secret"), b"s").unwrap();
        std::fs::write(work.join("mine"), b"m").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", work.join("abs-link")).unwrap();
        std::os::unix::fs::symlink("../secret", work.join("rel-link")).unwrap();
        let jail = Jail::new(Some(&work), &[]).unwrap();
        let rd = libc::O_RDONLY;
        for p in [
            "/etc/passwd",
            "/proc/self/mem",
            "/proc/self/environ",
            "../secret",
            "/../secret",
            "abs-link",
            "rel-link",
        ] {
            let e = jail.open(Start::Cwd, &c(p), rd, 0).err();
            assert!(
                e == Some(neg(libc::ENOENT)) || e == Some(neg(libc::EACCES)),
                "{p}: {e:?}"
            );
            assert!(jail.stat(Start::Cwd, &c(p), false).is_err(), "{p}");
        }
        // A file created at an absolute path lands inside the working directory.
        let fd = jail
            .open(
                Start::Cwd,
                &c("/etc-not-really"),
                libc::O_CREAT | libc::O_WRONLY,
                0o644,
            )
            .unwrap();
        drop(fd);
        assert!(work.join("etc-not-really").is_file());
        assert!(jail.open(Start::Cwd, &c("/mine"), rd, 0).is_ok());
        assert!(jail.access(Start::Cwd, &c("mine"), libc::R_OK).is_ok());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn inputs_are_read_only_at_their_names() {
        let base = tmpdir("inputs");
        std::fs::write(base.join("in.bin"), b"data").unwrap();
        let inputs = [Input {
            name: "d/in.bin".into(),
            host: base.join("in.bin"),
        }];
        let jail = Jail::new(None, &inputs).unwrap();
        let work = jail.dir().to_path_buf();
        for p in ["d/in.bin", "/d/in.bin", "./d/../d/in.bin"] {
            assert!(
                jail.open(Start::Cwd, &c(p), libc::O_RDONLY, 0).is_ok(),
                "{p}"
            );
            assert_eq!(jail.stat(Start::Cwd, &c(p), false).unwrap().st_size, 4);
        }
        for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_RDONLY | libc::O_TRUNC] {
            let e = jail.open(Start::Cwd, &c("d/in.bin"), flags, 0).err();
            assert_eq!(e, Some(neg(libc::EACCES)));
        }
        assert!(jail.access(Start::Cwd, &c("d/in.bin"), libc::W_OK).is_err());
        assert!(work.is_dir());
        drop(jail);
        assert!(!work.exists(), "the temporary working directory is removed");
        assert_eq!(std::fs::read(base.join("in.bin")).unwrap(), b"data");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn as_root_the_calls_thread_loses_roots_rights_over_files() {
        if euid() != 0 {
            return; // nothing to drop
        }
        let jail = Jail::new(None, &[]).unwrap();
        let private = jail.dir().join("root-only");
        std::fs::write(&private, b"x").unwrap();
        std::fs::set_permissions(
            &private,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        // Root reads it; the thread that entered the jail (as `nobody`) cannot.
        assert!(jail
            .open(Start::Cwd, &c("root-only"), libc::O_RDONLY, 0)
            .is_ok());
        std::thread::scope(|s| {
            s.spawn(|| {
                jail.enter().unwrap();
                let e = jail
                    .open(Start::Cwd, &c("root-only"), libc::O_RDONLY, 0)
                    .err();
                assert_eq!(e, Some(neg(libc::EACCES)));
                // Its own files it may create.
                assert!(jail
                    .open(Start::Cwd, &c("new"), libc::O_CREAT | libc::O_WRONLY, 0o644)
                    .is_ok());
            });
        });
        // The other threads kept their rights.
        assert!(jail
            .open(Start::Cwd, &c("root-only"), libc::O_RDONLY, 0)
            .is_ok());
    }
}
