//! Runs a static program in the micro-VM and prints what it did (stdout and stderr pass
//! through): `cargo run --release -p tierscope-kvm --example run_program -- [--poll-us N]
//! [--stats] PROG [ARGS...]`. The program's working directory (its `/`, all it can reach)
//! is the current directory. `--poll-us N`: the waiting thread looks every N us whether the
//! program has ended instead of sleeping until it is told (`ProgramEngine::wait_polling`);
//! `--stats`: also print KVM's statistics of the vCPU (exit counts) on one line.

use std::time::Duration;
use tierscope_kvm::program::{syscall_name, ProgramEngine, ProgramParams};

fn usage() -> ! {
    eprintln!("usage: run_program [--poll-us N] [--stats] PROG [ARGS...]");
    std::process::exit(2);
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut poll = None;
    let mut stats = false;
    loop {
        match args.first().map(String::as_str) {
            Some("--poll-us") if args.len() > 1 => {
                let Ok(us) = args[1].parse::<u64>() else {
                    usage()
                };
                poll = Some(Duration::from_micros(us.max(1)));
                args.drain(..2);
            }
            Some("--stats") => {
                stats = true;
                args.remove(0);
            }
            _ => break,
        }
    }
    let Some(path) = args.first() else { usage() };
    let mut p = ProgramParams::new(path, args.clone());
    p.workdir = std::env::current_dir().ok();
    let mut e = match ProgramEngine::new(&p) {
        Ok(e) => e,
        Err(err) => {
            eprintln!("run_program: {err}");
            std::process::exit(2);
        }
    };
    let timeout = Duration::from_secs(3600);
    match poll {
        Some(p) => e.wait_polling(timeout, p),
        None => e.wait(timeout),
    };
    let r = e.report();
    eprintln!(
        "run_program: {:?} after {:.3} s; {} syscall sites rewritten",
        r.outcome,
        r.elapsed_ns as f64 * 1e-9,
        r.syscall_sites
    );
    if stats {
        // One line, `name=value` pairs: kept apart from the call lines below, which
        // scripts parse as `  NAME COUNT`.
        let kv: Vec<String> = e
            .vcpu_stats()
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        eprintln!("run_program: vcpu stats {}", kv.join(" "));
    }
    for (nr, n) in &r.syscalls.done {
        eprintln!("  {:<16} {n}", syscall_name(*nr).unwrap_or("?"));
    }
    for (nr, n) in &r.syscalls.unsupported {
        eprintln!("  unsupported {nr}: {n} (ENOSYS)");
    }
}
