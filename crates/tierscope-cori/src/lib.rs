//! Cori (Doudali et al., IPDPS 2021) on memory-access traces, as its public simulator
//! cori-sim (github.com/GTkernel/cori-sim) runs it: read a trace (`trace`), histogram its
//! page reuse distances (`reuse`), derive the dominant reuse and the candidate periods
//! (`frequency`), and estimate the runtime of a periodic page scheduler at each period
//! (`model`); tune the period against the paper's baselines (`tuner`), on traces of one's
//! own or generated ones (`workloads`); a real program's loads and stores become cori-sim's
//! trace through a last-level cache (`misses`). docs/techniques/CORI.md gives every constant's source in
//! cori-sim, where we differ, and the tuning evaluation.

pub mod frequency;
#[cfg(test)]
mod fuzz_tests;
pub mod misses;
pub mod model;
pub mod reuse;
pub mod trace;
pub mod tuner;
pub mod workloads;

pub use frequency::{candidate_periods, dominant_reuse};
pub use model::{run, ModelConfig, Platform, RunStats, Scheduler};
pub use reuse::{Bar, Edges, ReuseHistogram, CORI_BUCKET};
pub use trace::Trace;
