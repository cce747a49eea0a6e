//! NEMO's noisy-neighbour use case (paper §5.3): prints the table of docs/techniques/NEMO.md.
//!
//! `cargo run --release -p tierscope-nemo --example noisy_neighbour -- [seed] [duration_s]
//! [hold]` (defaults: seed 1, 10 s, hold true; `hold false` lets the controller write a
//! quota while the last one is still actuating). Bad arguments: one line on stderr,
//! exit 2.

use std::process::ExitCode;
use std::time::Instant;
use tierscope_nemo::noisy::{run, Config};

fn arg<T: std::str::FromStr>(
    args: &[String],
    i: usize,
    name: &str,
    default: T,
) -> Result<T, String> {
    match args.get(i) {
        None => Ok(default),
        Some(s) => s.parse().map_err(|_| format!("{name}: cannot read `{s}`")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = Config::paper();
    let parsed = arg(&args, 0, "seed", config.seed).and_then(|seed| {
        Ok((
            seed,
            arg(&args, 1, "duration_s", config.duration_s)?,
            arg(&args, 2, "hold", true)?,
        ))
    });
    let (seed, duration_s, hold) = match parsed {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    config.seed = seed;
    config.duration_s = duration_s;
    config.controller.hold_while_actuating = hold;
    let start = Instant::now();
    match run(&config) {
        Ok(table) => {
            print!("{table}");
            eprintln!(
                "seed {seed}, {duration_s} s simulated in {:.1} s",
                start.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
