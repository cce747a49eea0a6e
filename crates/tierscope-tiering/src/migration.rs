//! The migration engine: carries out a policy's moves on a machine with tiers, under rate
//! limits and capacities, and counts what they cost.
//!
//! A move of a range to a tier copies every page of the range that is elsewhere (read on
//! the source tier, written on the destination: both carry the bytes), unmaps and remaps
//! it, and shoots down the stale translations with a real flush of the range on the
//! machine (the exact engine drops TLB entries, so the workload re-walks). The kernel
//! thread's CPU per page and the application's stall (cori-sim charges 1 us per page and
//! 3 us per period on the application) are parameters; docs/models/TIERING.md gives the defaults'
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
    /// On a heap of 2 MiB pages: split a huge page when a move covers part of it, and
    /// move its 4 KiB pages (false: huge pages move whole, moves are trimmed to them).
    pub split_huge: bool,
    /// Kernel-thread CPU per split (page-table allocation, 512 entries written, the
    /// huge page's metadata split).
    pub cpu_per_split: Duration,
    /// After each round, collapse every split huge page whose base pages all sit on one
    /// tier again (khugepaged; its copy of 2 MiB loads that tier twice, its CPU is
    /// `cpu_per_page` per base page).
    pub collapse_huge: bool,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        MigrationConfig {
            max_rate: Size(0),
            max_per_round: Size(0),
            cpu_per_page: Duration(2_000),
            stall_per_page: Duration(0),
            stall_per_round: Duration(0),
            split_huge: false,
            cpu_per_split: Duration(10_000),
            collapse_huge: false,
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
    /// Huge pages split, and collapsed again.
    pub splits: u64,
    pub collapses: u64,
}

/// A huge page's bytes.
const HUGE: u64 = 2 << 20;

pub struct Migrator {
    config: MigrationConfig,
    /// Moves are trimmed to multiples of this: the heap's page size (a huge page moves
    /// whole), or 4 KiB when huge pages are split.
    granule: u64,
    /// Huge pages split and not collapsed since (block start addresses).
    split: std::collections::BTreeSet<u64>,
    /// Rate-limit budget in bytes, refilled with time up to one second's worth.
    budget: f64,
    last_refill: Nanos,
    pub stats: MigrationStats,
    /// Copy bytes per tier since the last [`Migrator::take_copy_bytes`].
    copy_bytes: Vec<f64>,
}

impl Migrator {
    pub fn new(config: MigrationConfig, granule: u64, tiers: usize) -> Self {
        let splits = config.split_huge && granule == HUGE;
        Migrator {
            config,
            granule: if splits { 4096 } else { granule },
            split: Default::default(),
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
                let placement = tiers_of(machine).placement();
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
                let tiers = tiers_of(machine);
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
                for edge in [part.start, part.end] {
                    self.split_at(machine, edge);
                }
                let tiers = tiers_of(machine);
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
        if self.config.collapse_huge {
            self.collapse_uniform(machine);
        }
        let pages = moved_total / 4096;
        self.stats.pages += pages;
        self.stats.cpu_ns += pages * self.config.cpu_per_page.0;
        // Every round costs its fixed part, moved or not (cori-sim's 3 us per period).
        self.stats.rounds += 1;
        self.stats.stall_ns += pages * self.config.stall_per_page.0 + self.config.stall_per_round.0;
        moved_total
    }

    /// Splits the huge page a move's edge at `va` cuts through, unless it is split
    /// already (or the heap has no huge pages: the machine says no).
    fn split_at(&mut self, machine: &mut dyn Machine, va: u64) {
        let block = va & !(HUGE - 1);
        if self.granule == HUGE || va == block || self.split.contains(&block) {
            return;
        }
        if !self.config.split_huge || !machine.split_huge(block) {
            return;
        }
        self.split.insert(block);
        self.stats.splits += 1;
        self.stats.cpu_ns += self.config.cpu_per_split.0;
        machine.flush(Flush::Range {
            start: block,
            end: block + HUGE,
        });
        self.stats.shootdowns += 1;
    }

    /// Collapses every split huge page whose base pages all sit on one tier.
    fn collapse_uniform(&mut self, machine: &mut dyn Machine) {
        let blocks: Vec<u64> = self.split.iter().copied().collect();
        for block in blocks {
            let range = AddrRange::new(block, block + HUGE);
            let mut tiers_seen = 0u32;
            let mut tier = 0u8;
            tiers_of(machine).placement().runs(range, |_, t| {
                tiers_seen += 1;
                tier = t;
            });
            if tiers_seen != 1 || !machine.collapse_huge(block) {
                continue;
            }
            self.split.remove(&block);
            self.stats.collapses += 1;
            // khugepaged copies the 512 base pages into a new huge page on the same tier.
            self.copy_bytes[tier as usize] += 2.0 * HUGE as f64;
            self.stats.cpu_ns += HUGE / 4096 * self.config.cpu_per_page.0;
            machine.flush(Flush::Range {
                start: block,
                end: block + HUGE,
            });
            self.stats.shootdowns += 1;
        }
    }

    /// Puts `moves` in place at no cost: no copy, no flush, no stall, no limit (the
    /// oracle bound's moves).
    pub fn place_free(machine: &mut dyn Machine, moves: &[Move]) {
        let tiers = tiers_of(machine);
        for mv in moves {
            let heap = tiers.placement().range();
            let r = AddrRange::new(mv.range.start.max(heap.start), mv.range.end.min(heap.end));
            if !r.is_empty() {
                tiers.place(r, mv.to);
            }
        }
    }

    /// Copy bytes per tier since the last call (they load the tiers' bandwidth in the
    /// performance model's window); restarts the count.
    pub fn take_copy_bytes(&mut self, out: &mut [f64]) {
        for (o, c) in out.iter_mut().zip(&mut self.copy_bytes) {
            *o += std::mem::take(c);
        }
    }
}

/// The machine's tiers: the migration engine only runs on machines that have them (the
/// experiment is rejected at parse time otherwise).
fn tiers_of(machine: &mut dyn Machine) -> &mut dyn tierscope_core::Tiers {
    machine
        .tiers()
        .expect("the migration engine runs on machines with tiers")
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

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::testing::{FakeMachine, FakeTiers};
    use tierscope_core::Placement;

    const MIB: u64 = 1 << 20;
    const BASE: u64 = 1 << 40;

    /// A machine that is only tiers: 64 MiB on the slow tier, a fast tier of `fast` bytes.
    fn machine(fast: u64) -> FakeMachine {
        let t = crate::test_support::tier;
        FakeMachine {
            tiers: Some(FakeTiers {
                specs: vec![t(fast), t(u64::MAX)],
                placement: Placement::new(AddrRange::new(BASE, BASE + 64 * MIB), 1, 2),
            }),
            ..FakeMachine::default()
        }
    }

    fn up(from_mib: u64, to_mib: u64) -> Move {
        Move {
            range: AddrRange::new(BASE + from_mib * MIB, BASE + to_mib * MIB),
            to: 0,
        }
    }

    #[test]
    fn huge_pages_split_where_a_move_cuts_them_and_collapse_when_uniform() {
        let mut m = machine(64 * MIB);
        m.huge = Some(Default::default());
        let config = MigrationConfig {
            split_huge: true,
            collapse_huge: true,
            ..MigrationConfig::default()
        };
        let mut mig = Migrator::new(config, 2 * MIB, 2);
        // 1 MiB .. 5 MiB cuts the huge pages at 0 and 4 MiB; the one at 2 MiB moves whole.
        let part = |a: u64, b: u64| Move {
            range: AddrRange::new(BASE + a, BASE + b),
            to: 0,
        };
        assert_eq!(mig.apply(&mut m, &[part(MIB, 5 * MIB)]), 4 * MIB);
        let split: Vec<u64> = m.huge.as_ref().unwrap().iter().map(|b| b - BASE).collect();
        assert_eq!(split, [0, 4 * MIB]);
        assert_eq!((mig.stats.splits, mig.stats.collapses), (2, 0));
        assert_eq!(mig.stats.cpu_ns, 2 * 10_000 + 1024 * 2_000);
        // Two split flushes (their whole 2 MiB) and the move's.
        assert_eq!(m.flushes.len(), 3);
        // The rest of the first huge page follows: it is uniform again and collapses,
        // its 2 MiB copied once more on the fast tier; the other stays split.
        mig.take_copy_bytes(&mut [0.0; 2]);
        assert_eq!(mig.apply(&mut m, &[part(0, MIB)]), MIB);
        let split: Vec<u64> = m.huge.as_ref().unwrap().iter().map(|b| b - BASE).collect();
        assert_eq!(split, [4 * MIB]);
        assert_eq!((mig.stats.splits, mig.stats.collapses), (2, 1));
        let mut copied = [0.0; 2];
        mig.take_copy_bytes(&mut copied);
        assert_eq!(copied, [(MIB + 4 * MIB) as f64, MIB as f64]);
        // Without splitting, moves are trimmed to whole huge pages.
        let mut m = machine(64 * MIB);
        let mut mig = Migrator::new(MigrationConfig::default(), 2 * MIB, 2);
        assert_eq!(mig.apply(&mut m, &[part(MIB, 5 * MIB)]), 2 * MIB);
        assert_eq!(mig.stats.splits, 0);
    }

    #[test]
    fn moves_copy_flush_and_charge_whole_pages() {
        let mut m = machine(64 * MIB);
        let config = MigrationConfig {
            stall_per_page: Duration(1_000),
            stall_per_round: Duration(3_000),
            ..MigrationConfig::default()
        };
        let mut mig = Migrator::new(config, 4096, 2);
        // The second move overlaps the first: only its new part is copied.
        assert_eq!(mig.apply(&mut m, &[up(0, 2), up(1, 3)]), 3 * MIB);
        assert_eq!(m.tiers.as_ref().unwrap().placement.bytes_on(0), 3 * MIB);
        assert_eq!(m.flushes.len(), 2, "one range flush per piece moved");
        let s = mig.stats;
        assert_eq!(
            (s.promoted_bytes, s.demoted_bytes, s.pages),
            (3 * MIB, 0, 768)
        );
        assert_eq!(s.cpu_ns, 768 * 2_000);
        assert_eq!(s.stall_ns, 768 * 1_000 + 3_000);
        let mut copied = [0.0; 2];
        mig.take_copy_bytes(&mut copied);
        assert_eq!(
            copied,
            [(3 * MIB) as f64; 2],
            "read on one tier, written on the other"
        );
        // A round that moves nothing still costs its fixed stall.
        assert_eq!(mig.apply(&mut m, &[up(0, 3)]), 0);
        assert_eq!(mig.stats.stall_ns, 768 * 1_000 + 2 * 3_000);
        assert_eq!(mig.stats.rounds, 2);
    }

    #[test]
    fn capacity_round_and_rate_limits_refuse_the_rest() {
        // Capacity: 2 MiB of fast tier.
        let mut m = machine(2 * MIB);
        let mut mig = Migrator::new(MigrationConfig::default(), 4096, 2);
        assert_eq!(mig.apply(&mut m, &[up(0, 8)]), 2 * MIB);
        assert_eq!(mig.stats.refused_bytes, 6 * MIB);
        // Per round: 1 MiB, then the next round another.
        let mut m = machine(64 * MIB);
        let config = MigrationConfig {
            max_per_round: Size(MIB),
            ..MigrationConfig::default()
        };
        let mut mig = Migrator::new(config, 4096, 2);
        assert_eq!(mig.apply(&mut m, &[up(0, 4)]), MIB);
        assert_eq!(mig.apply(&mut m, &[up(0, 4)]), MIB);
        // Rate: 4 MiB/s holds one second's worth; half a second later, 2 MiB more.
        let mut m = machine(64 * MIB);
        let config = MigrationConfig {
            max_rate: Size(4 * MIB),
            ..MigrationConfig::default()
        };
        let mut mig = Migrator::new(config, 4096, 2);
        assert_eq!(mig.apply(&mut m, &[up(0, 16)]), 4 * MIB);
        m.now = 500_000_000;
        assert_eq!(mig.apply(&mut m, &[up(0, 16)]), 2 * MIB);
        // Huge pages move whole: a 2 MiB granule trims a 3 MiB move to 2 MiB.
        let mut m = machine(64 * MIB);
        let mut mig = Migrator::new(MigrationConfig::default(), 2 * MIB, 2);
        assert_eq!(mig.apply(&mut m, &[up(0, 3)]), 2 * MIB);
    }

    #[test]
    fn free_placement_costs_nothing() {
        let mut m = machine(MIB);
        Migrator::place_free(&mut m, &[up(0, 8)]);
        assert_eq!(
            m.tiers.as_ref().unwrap().placement.bytes_on(0),
            8 * MIB,
            "no capacity check either"
        );
        assert!(m.flushes.is_empty());
    }
}
