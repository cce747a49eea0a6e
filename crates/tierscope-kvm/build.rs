//! Builds the freestanding guest (guest/guest.c) with the system gcc into a flat binary
//! that src/guest.rs embeds with `include_bytes!`, and sets `cfg(kvm_host)` when
//! /dev/kvm can be opened here, so that tests needing KVM are reported as ignored (not
//! passed) where it is missing.

use std::path::PathBuf;
use std::process::Command;

fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("cannot run {cmd:?}: {e} (the KVM guest needs gcc and objcopy)")
    });
    assert!(status.success(), "{cmd:?} failed with {status}");
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(kvm_host)");
    println!("cargo:rerun-if-changed=/dev/kvm");
    let kvm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm");
    if kvm.is_ok() {
        println!("cargo:rustc-cfg=kvm_host");
    }
    // The program tests build C programs with Debian's musl-gcc (`make musl`); where it
    // is missing they are reported as ignored. Checked again when it appears: watched
    // through /usr/bin, whose modification time changes when a package adds a file there
    // (the file itself keeps its package's old time, so cargo would not see it appear).
    println!("cargo::rustc-check-cfg=cfg(musl_gcc)");
    println!("cargo:rerun-if-changed=/usr/bin");
    let musl = Command::new("musl-gcc").arg("--version").output();
    if musl.is_ok_and(|o| o.status.success()) {
        println!("cargo:rustc-cfg=musl_gcc");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let guest = PathBuf::from("guest");
    for f in ["guest.c", "abi.h", "guest.ld"] {
        println!("cargo:rerun-if-changed=guest/{f}");
    }
    let elf = out.join("guest.elf");
    let bin = out.join("guest.bin");
    let cc = std::env::var("TIERSCOPE_GUEST_CC").unwrap_or_else(|_| "gcc".into());
    run(Command::new(&cc)
        .args([
            "-ffreestanding",
            "-nostdlib",
            "-mno-red-zone",
            "-fno-pic",
            "-fno-pie",
            "-no-pie",
            "-O2",
            "-mgeneral-regs-only",
            "-fno-stack-protector",
            "-fno-asynchronous-unwind-tables",
            "-static",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wl,--build-id=none",
            "-T",
        ])
        .arg(guest.join("guest.ld"))
        .arg("-o")
        .arg(&elf)
        .arg(guest.join("guest.c")));
    run(Command::new("objcopy")
        .args(["-O", "binary"])
        .arg(&elf)
        .arg(&bin));
}
