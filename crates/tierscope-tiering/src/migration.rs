//! The migration engine: carries out a policy's moves on a machine with tiers, under rate
//! limits and capacities, and counts what they cost.
//!
//! A move of a range to a tier copies every page of the range that is elsewhere (read on
//! the source tier, written on the destination: both carry the bytes), unmaps and remaps
//! it, and shoots down the stale translations with a real flush of the range on the
//! machine (the exact engine drops TLB entries, so the workload re-walks). The kernel
//! thread's CPU per page and the application's stall (cori-sim charges 1 us per page and
//! 3 us per period on the application) are parameters; docs/TIERING.md gives the defaults'
//! sources.

use tierscope_core::units::{Duration, Size};
use tierscope_core::{AddrRange, FieldError, Flush, Machine, Nanos};

/// A policy's request: put `range` on tier `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub range: AddrRange,
    pub to: u8,
}

/// Limits and costs of migration.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MigrationConfig {
    /// Bytes copied per second of run time at most (0: no limit).
    pub max_rate: Size,
    /// Bytes copied per policy round at most (0: no limit).
    pub max_per_round: Size,
    /// Kernel-thread CPU per 4 KiB page moved (unmap, copy, remap).
    pub cpu_per_page: Duration,
    /// Time the application waits per 4 KiB page moved.
    pub stall_per_page: Duration,
    /// Time the application waits per policy round (each time a policy acts).
    pub stall_per_round: Duration,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        MigrationConfig {
            max_rate: Size(0),
            max_per_round: Size(0),
            cpu_per_page: Duration(2_000),
            stall_per_page: Duration(0),
            stall_per_round: Duration(0),
        }
    }
}

impl MigrationConfig {
    pub fn validate(&self) -> Result<(), FieldError> {
        for (field, v) in [
            ("max_rate", self.max_rate),
            ("max_per_round", self.max_per_round),
        ] {
            if v.0 != 0 && v.0 < 4096 {
                return Err(FieldError::new(
                    field,
                    format!(
                        "{} bytes is less than one 4 KiB page (0 means no limit)",
                        v.0
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// What migration did over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MigrationStats {
    /// Bytes moved to a faster tier (lower number) and to a slower one.
    pub promoted_bytes: u64,
    pub demoted_bytes: u64,
    /// 4 KiB pages moved.
    pub pages: u64,
    /// Policy rounds (times a policy acted).
    pub rounds: u64,
    /// Bytes requested but not moved: over the rate limit or the destination's capacity.
    pub refused_bytes: u64,
    /// Range flushes issued (TLB shootdowns).
    pub shootdowns: u64,
    /// Kernel-thread CPU, ns.
    pub cpu_ns: u64,
    /// Application stall, ns.
    pub stall_ns: u64,
}

pub struct Migrator {
    config: MigrationConfig,
    /// Moves are trimmed to multiples of this (the heap's page size: a huge page moves
    /// whole).
    granule: u64,
    /// Rate-limit budget in bytes, refilled with time up to one second's worth.
    budget: f64,
    last_refill: Nanos,
    pub stats: MigrationStats,
    /// Copy bytes per tier since the last [`Migrator::take_copy_bytes`].
    copy_bytes: Vec<f64>,
}

impl Migrator {
    pub fn new(config: MigrationConfig, granule: u64, tiers: usize) -> Self {
        Migrator {
            config,
            granule,
            budget: config.max_rate.0 as f64,
            last_refill: 0,
            stats: MigrationStats::default(),
            copy_bytes: vec![0.0; tiers],
        }
    }

    /// Carries out `moves` in order at the machine's current time, as far as the limits
    /// and the destinations' capacities allow. Returns the bytes moved.
    pub fn apply(&mut self, machine: &mut dyn Machine, moves: &[Move]) -> u64 {
        let now = machine.now();
        if self.config.max_rate.0 > 0 {
            let rate = self.config.max_rate.0 as f64;
            let refill = rate * now.saturating_sub(self.last_refill) as f64 * 1e-9;
            self.budget = (self.budget + refill).min(rate);
            self.last_refill = now;
        }
        let mut round_left = match self.config.max_per_round.0 {
            0 => u64::MAX,
            n => n,
        };
        let mut moved_total = 0u64;
        let mut pieces: Vec<(AddrRange, u8)> = vec![];
        for mv in moves {
            pieces.clear();
            {
                let Some(tiers) = machine.tiers() else {
                    return 0;
                };
                let placement = tiers.placement();
                let r = clip(mv.range, placement.range(), self.granule);
                if r.is_empty() {
                    continue;
                }
                // The parts of `r` not yet on the destination, with their tier.
                placement.runs(r, |run, t| {
                    if t != mv.to {
                        pieces.push((run, t));
                    }
                });
            }
            for &(piece, from) in &pieces {
                let tiers = machine.tiers().expect("checked above");
                let capacity = tiers.specs()[mv.to as usize].capacity;
                let room = capacity.saturating_sub(tiers.placement().bytes_on(mv.to));
                let mut allowed = piece.len().min(room).min(round_left);
                if self.config.max_rate.0 > 0 {
                    allowed = allowed.min(self.budget.max(0.0) as u64);
                }
                allowed -= allowed % self.granule;
                self.stats.refused_bytes += piece.len() - allowed;
                if allowed == 0 {
                    continue;
                }
                let part = AddrRange::new(piece.start, piece.start + allowed);
                let changed = tiers.place(part, mv.to);
                debug_assert_eq!(changed, allowed);
                round_left -= allowed;
                self.budget -= allowed as f64;
                moved_total += allowed;
                if mv.to < from {
                    self.stats.promoted_bytes += allowed;
                } else {
                    self.stats.demoted_bytes += allowed;
                }
                self.copy_bytes[from as usize] += allowed as f64;
                self.copy_bytes[mv.to as usize] += allowed as f64;
                machine.flush(Flush::Range {
                    start: part.start,
                    end: part.end,
                });
                self.stats.shootdowns += 1;
            }
        }
        let pages = moved_total / 4096;
        self.stats.pages += pages;
        self.stats.cpu_ns += pages * self.config.cpu_per_page.0;
        // Every round costs its fixed part, moved or not (cori-sim's 3 us per period).
        self.stats.rounds += 1;
        self.stats.stall_ns += pages * self.config.stall_per_page.0 + self.config.stall_per_round.0;
        moved_total
    }

    /// Copy bytes per tier since the last call (they load the tiers' bandwidth in the
    /// performance model's window); restarts the count.
    pub fn take_copy_bytes(&mut self, out: &mut [f64]) {
        for (o, c) in out.iter_mut().zip(&mut self.copy_bytes) {
            *o += std::mem::take(c);
        }
    }
}

/// `r` within `bounds`, shrunk to whole granules.
fn clip(r: AddrRange, bounds: AddrRange, granule: u64) -> AddrRange {
    let start = r.start.max(bounds.start).next_multiple_of(granule);
    let end = r.end.min(bounds.end) / granule * granule;
    if end <= start {
        AddrRange::new(start, start)
    } else {
        AddrRange::new(start, end)
    }
}
