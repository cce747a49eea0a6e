//! Real static programs (programs/*.c, built here with Debian's musl-gcc) in the micro-VM.
//! Where /dev/kvm could not be opened or musl-gcc was missing at build time (`make musl`
//! installs it), they are reported as ignored.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tierscope_core::{Engine, Machine};
use tierscope_kvm::program::{Outcome, ProgramEngine, ProgramParams};

/// Builds programs/NAME.c into a temporary folder; returns the executable.
fn build(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../programs/{name}.c"));
    let out = dir.join(name);
    let status = Command::new("musl-gcc")
        .args(["-static", "-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-lm")
        .status()
        .expect("musl-gcc is needed for the program tests (make musl installs it)");
    assert!(status.success(), "musl-gcc {src:?} failed");
    out
}

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tierscope-prog-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `path` with `args` in `workdir` (a fresh temporary directory when `None`) until it
/// ends.
fn run_in(path: &Path, args: &[&str], workdir: Option<&Path>) -> ProgramEngine {
    let mut argv = vec![path.display().to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let mut p = ProgramParams::new(path, argv);
    p.workdir = workdir.map(Path::to_path_buf);
    let mut e = ProgramEngine::new(&p).unwrap();
    assert!(e.wait(Duration::from_secs(60)), "the program did not end");
    e
}

fn run(path: &Path, args: &[&str]) -> ProgramEngine {
    run_in(path, args, None)
}

/// The host process's open descriptors on files under `dir` (other tests run beside).
fn open_fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

#[test]
#[cfg_attr(
    not(all(kvm_host, musl_gcc)),
    ignore = "needs /dev/kvm and musl-gcc (make musl)"
)]
fn a_program_writes_the_same_file_as_natively_and_its_writes_are_logged() {
    let dir = tmp("hello");
    let exe = build("hello", &dir);
    let native = dir.join("native.txt");
    let guest = dir.join("guest.txt");
    let st = Command::new(&exe)
        .args(["--out", native.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(st.status.success());
    // The program writes into its working directory (its `/`).
    let mut e = run_in(&exe, &["--out", "/guest.txt"], Some(&dir));
    assert_eq!(e.report().outcome, Some(Outcome::Exited(0)));
    assert_eq!(
        std::fs::read(&guest).unwrap(),
        std::fs::read(&native).unwrap()
    );
    // The 8 MiB buffer was written page by page: every one of its pages is in the write
    // log, inside an mmap area (musl's malloc maps large blocks).
    let mut written = vec![];
    e.write_log().unwrap().drain_written(&mut written);
    let maps = e.mappings().to_vec();
    let in_mmap = written
        .iter()
        .filter(|&&p| {
            maps.iter()
                .any(|m| m.name == "program:mmap" && m.range.contains(p))
        })
        .count();
    // The buffer is unmapped (free) by the end; the log still names its pages.
    assert!(written.windows(2).all(|w| w[0] < w[1]));
    assert!(
        written.len() >= 2048,
        "{} pages written, {in_mmap} in mmaps",
        written.len()
    );
    // The truth saw the same writes (its own copy of the log).
    let truth = e.take_truth();
    assert!(!truth.is_empty());
    let report = e.end_report().unwrap().unwrap().line;
    assert!(report.contains("exited with status 0"), "{report}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[cfg_attr(
    not(all(kvm_host, musl_gcc)),
    ignore = "needs /dev/kvm and musl-gcc (make musl)"
)]
fn bad_pointers_and_unknown_calls_fail_the_call_not_the_host() {
    let dir = tmp("misbehave");
    let exe = build("misbehave", &dir);
    // A host buffer that must stay as it is.
    let canary = vec![0x5au8; 1 << 20];
    let mut e = run(&exe, &["badptr"]);
    // The program checks errno itself: status 0 means it saw EFAULT.
    assert_eq!(e.report().outcome, Some(Outcome::Exited(0)));
    let c = e.report().syscalls;
    assert_eq!(c.efaults, 1);
    assert_eq!(c.first_efault, Some((1, 0x1000, 16)));
    let line = e.end_report().unwrap().unwrap().line;
    assert!(line.contains("EFAULT") && !line.contains('\n'), "{line}");

    let mut e = run(&exe, &["enosys"]);
    assert_eq!(e.report().outcome, Some(Outcome::Exited(0)));
    assert_eq!(e.report().syscalls.unsupported.get(&999), Some(&1));
    let line = e.end_report().unwrap().unwrap().line;
    assert!(line.contains("unsupported (ENOSYS): 999 x1"), "{line}");

    let mut e = run(&exe, &["segv"]);
    match e.report().outcome {
        Some(Outcome::Faulted(m)) => assert!(m.contains("unmapped address 0x70000000"), "{m}"),
        other => panic!("expected a fault, got {other:?}"),
    }
    let err = e.end_report().unwrap_err();
    assert!(!err.contains('\n'), "{err}");
    assert!(canary.iter().all(|&b| b == 0x5a));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[cfg_attr(
    not(all(kvm_host, musl_gcc)),
    ignore = "needs /dev/kvm and musl-gcc (make musl)"
)]
fn files_that_are_not_static_programs_are_refused_with_the_reason() {
    let dir = tmp("notelf");
    let script = dir.join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let err = ProgramEngine::new(&ProgramParams::new(&script, vec!["x".into()]))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not an ELF file"), "{err}");
    // A dynamically linked program names an interpreter.
    let dynamic = dir.join("dyn");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../programs/hello.c");
    let ok = Command::new("gcc")
        .arg("-o")
        .arg(&dynamic)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let err = ProgramEngine::new(&ProgramParams::new(&dynamic, vec!["x".into()]))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("only static programs"), "{err}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[cfg_attr(
    not(all(kvm_host, musl_gcc)),
    ignore = "needs /dev/kvm and musl-gcc (make musl)"
)]
fn the_dirty_ring_and_the_dirty_bitmap_log_the_same_pages() {
    let dir = tmp("ring");
    let exe = build("hello", &dir);
    let mut logs = vec![];
    for ring in [true, false] {
        let mut p = ProgramParams::new(&exe, vec!["hello".into(), "x".into()]);
        p.dirty_ring = ring;
        let mut e = ProgramEngine::new(&p).unwrap();
        assert!(e.wait(Duration::from_secs(60)));
        assert_eq!(e.report().outcome, Some(Outcome::Exited(0)));
        let offered = kvm_ioctls::Kvm::new()
            .unwrap()
            .check_extension(kvm_ioctls::Cap::DirtyLogRing);
        assert_eq!(e.logs_to_ring(), ring && offered);
        let mut written = vec![];
        e.write_log().unwrap().drain_written(&mut written);
        logs.push(written);
    }
    assert!(logs[0].len() >= 2048, "{} pages", logs[0].len());
    assert_eq!(logs[0], logs[1], "ring vs bitmap");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[cfg_attr(
    not(all(kvm_host, musl_gcc)),
    ignore = "needs /dev/kvm and musl-gcc (make musl)"
)]
fn a_program_reaches_nothing_outside_its_working_directory() {
    let dir = tmp("escape");
    let exe = build("escape", &dir);
    let work = dir.join("work");
    std::fs::create_dir(&work).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, b"keep me").unwrap();
    std::os::unix::fs::symlink(&victim, work.join("link-abs")).unwrap();
    std::os::unix::fs::symlink("../victim", work.join("link-rel")).unwrap();
    let mut e = run_in(&exe, &[], Some(&work));
    // The program checks each attempt itself: status 0 means every one was refused.
    assert_eq!(e.report().outcome, Some(Outcome::Exited(0)));
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    assert!(!Path::new("/etc/tierscope-escape").exists());
    assert_eq!(std::fs::read(work.join("made-here")).unwrap(), b"ok\n");
    let line = e.end_report().unwrap().unwrap().line;
    assert!(line.contains("exited with status 0"), "{line}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[cfg_attr(
    not(all(kvm_host, musl_gcc)),
    ignore = "needs /dev/kvm and musl-gcc (make musl)"
)]
fn the_host_cleans_up_after_a_program_and_reports_its_status_as_linux_does() {
    let dir = tmp("cleanup");
    let exe = build("misbehave", &dir);
    // Descriptors the program left open are closed when its engine goes.
    let work = dir.join("work");
    std::fs::create_dir(&work).unwrap();
    let e = run_in(&exe, &["leak"], Some(&work));
    assert_eq!(e.report().outcome, Some(Outcome::Exited(0)));
    // Its 20 files and the working directory itself are open while the engine lives.
    assert_eq!(open_fds_under(&work), 21);
    drop(e);
    assert_eq!(open_fds_under(&work), 0, "descriptors left open");
    // O_NONBLOCK set by the program on the caller's stdout is undone.
    // SAFETY: F_GETFL on stdout.
    let flags = || unsafe { libc::fcntl(1, libc::F_GETFL) };
    let was = flags();
    let e = run(&exe, &["nonblock"]);
    assert_eq!(e.report().outcome, Some(Outcome::Exited(0)));
    drop(e);
    assert_eq!(flags(), was);
    // exit(1000) is status 232, as a parent sees it under Linux.
    let e = run(&exe, &["exit", "1000"]);
    assert_eq!(e.report().outcome, Some(Outcome::Exited(232)));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[cfg_attr(
    not(all(kvm_host, musl_gcc)),
    ignore = "needs /dev/kvm and musl-gcc (make musl)"
)]
fn a_syscall_built_at_run_time_is_reported_as_such() {
    let dir = tmp("jit");
    let exe = build("misbehave", &dir);
    let mut e = run(&exe, &["jit"]);
    let err = e.end_report().unwrap_err();
    assert!(
        err.contains("a `syscall` instruction at 0x") && err.contains("the loader did not find"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[cfg_attr(
    not(all(kvm_host, musl_gcc)),
    ignore = "needs /dev/kvm and musl-gcc (make musl)"
)]
fn waiting_ends_with_the_program_or_at_the_timeout_and_counts_its_exits() {
    let dir = tmp("wait");
    let touch = build("touch_pages", &dir);
    let loop_ = build("getpid_loop", &dir);
    // A program far longer than the timeout: wait gives up (false) and the program runs on.
    let argv = vec![loop_.display().to_string(), "1000000000".to_string()];
    let mut long = ProgramEngine::new(&ProgramParams::new(&loop_, argv)).unwrap();
    assert!(!long.wait(Duration::from_millis(50)));
    assert!(!long.finished());
    drop(long);
    // Sleeping until told and looking every 200 us both see the end.
    for poll in [None, Some(Duration::from_micros(200))] {
        let argv = vec![touch.display().to_string(), "300".to_string()];
        let mut e = ProgramEngine::new(&ProgramParams::new(&touch, argv)).unwrap();
        let ended = match poll {
            None => e.wait(Duration::from_secs(60)),
            Some(p) => e.wait_polling(Duration::from_secs(60), p),
        };
        assert!(ended && matches!(e.report().outcome, Some(Outcome::Exited(0))));
        // Where the host has KVM_GET_STATS_FD: each of the 300 first touches exited
        // (a shadow fault on a shadow-paging host, an EPT violation under EPT).
        let stats = e.vcpu_stats();
        if let Some(&(_, exits)) = stats.iter().find(|(k, _)| k == "exits") {
            assert!(exits >= 300, "{exits} exits for 300 first touches");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
