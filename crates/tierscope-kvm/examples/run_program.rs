//! Runs a static program in the micro-VM and prints what it did (stdout and stderr pass
//! through): `cargo run --release -p tierscope-kvm --example run_program -- PROG [ARGS...]`.
//! The program's working directory (its `/`, all it can reach) is the current directory.

use std::time::Duration;
use tierscope_kvm::program::{syscall_name, ProgramEngine, ProgramParams};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: run_program PROG [ARGS...]");
        std::process::exit(2);
    };
    let mut p = ProgramParams::new(path, args.clone());
    p.workdir = std::env::current_dir().ok();
    let mut e = match ProgramEngine::new(&p) {
        Ok(e) => e,
        Err(err) => {
            eprintln!("run_program: {err}");
            std::process::exit(2);
        }
    };
    e.wait(Duration::from_secs(3600));
    let r = e.report();
    eprintln!(
        "run_program: {:?} after {:.3} s; {} syscall sites rewritten",
        r.outcome,
        r.elapsed_ns as f64 * 1e-9,
        r.syscall_sites
    );
    for (nr, n) in &r.syscalls.done {
        eprintln!("  {:<16} {n}", syscall_name(*nr).unwrap_or("?"));
    }
    for (nr, n) in &r.syscalls.unsupported {
        eprintln!("  unsupported {nr}: {n} (ENOSYS)");
    }
}
