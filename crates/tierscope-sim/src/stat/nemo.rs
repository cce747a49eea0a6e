//! Memory-controller telemetry on the statistical engine, which never executes accesses:
//! a counting telemetry's state is its start value plus the operand times the expected
//! number of matching requests, from the batch segments and the patterns' densities (as
//! `tiers.rs` computes each tier's traffic). Only rules whose state is linear in the
//! request count have an expected state; the rest are rejected when registered:
//! - update: `add` or `sub`, operand a constant or the request's bytes (64 per access);
//! - no notify predicate (whether it held depends on the order of the updates);
//! - read effect: none or a reset (an op on read would act on a rounded expectation);
//! - contiguous masks (`MaskShift::bits`), so a translated region is a set of ranges.
//!
//! There is one copy per state: the merge of controllers and channels is by definition
//! the state one controller would hold had it seen every request. A read draws the
//! number of matching requests since the last reset from a Poisson distribution of the
//! expected count (the requests of a random access stream, as the statistical engine's
//! PEBS samples are drawn), times the operand, wrapped or saturated at the width. A rule
//! without a reset reads a fresh draw of its whole expectation each time.
//! Physical addresses are the heap's virtual addresses minus its start, as on the exact
//! engine.

use super::density::{Schedule, Workload};
use crate::tiers::Sweep;
use tierscope_core::memtel::ops::width_mask;
use tierscope_core::memtel::{check_region, translation_base};
use tierscope_core::memtel::{
    DriverError, Kinds, MaskShift, MemTelemetry, Notification, Operand, Overflow, ReadEffect,
    Slots, TelemetryId, TelemetrySpec, UpdateOp,
};
use tierscope_core::rng::Rng;
use tierscope_core::workload::PatternKind;
use tierscope_core::{AddrRange, FieldError};

/// Bytes of one request: every access is one cache line reaching memory.
const LINE_BYTES: f64 = 64.0;

fn overlaps(a: AddrRange, b: AddrRange) -> bool {
    a.start < b.end && b.start < a.end
}

/// The positions of the set bits of `w`, ascending.
fn set_bits(mut w: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (w != 0).then(|| {
            let b = w.trailing_zeros() as usize;
            w &= w - 1;
            b
        })
    })
}

/// What the statistical engine keeps per telemetry (its spec is in [`Slots`]).
#[derive(Debug, Clone)]
struct Expected {
    /// Primary key -> base state index, direct-mapped like the hardware table; valid
    /// where `programmed` has the key's bit (a state index is below `states`, a u32:
    /// half the bytes of an `Option<u64>`, and clearing an entry writes only its bit).
    table: Vec<u32>,
    /// One bit per key of `table`, set where it holds an entry: accounting visits the
    /// programmed keys (a few thousand) in key order without scanning the table (2^19
    /// entries for a terabyte heap, every time the engine advances).
    programmed: Vec<u64>,
    /// Expected requests of random patterns counted into each state since it was last
    /// reset, times the operand (signed by the op at read).
    expected: Vec<f64>,
    /// The same from sequential sweeps, which are not random.
    swept: Vec<f64>,
    /// Per key, alias, sub-range and pattern, in that order: the pattern's mass of the
    /// range, NaN until computed (empty when there would be more than [`MAX_MASSES`]). A
    /// key's physical ranges are fixed, so each random pattern's mass over them (a
    /// gaussian's costs exponentials) is computed once, not at every advance while the
    /// key is programmed (the multiplexer brings every key back once per round).
    masses: Vec<f64>,
    /// Most masses to keep ([`MAX_MASSES`]; 0 in a test: none).
    mass_limit: usize,
    /// One bit per key, set once its kept masses are known to be all zero: no random
    /// pattern ever reaches it, so accounting adds nothing to its state and can skip it
    /// (a gaussian's keys beyond its tails, nearly all of a terabyte heap's).
    unreached: Vec<u64>,
}

impl Expected {
    /// Programs `key` (checked) to the states from `base`.
    fn set(&mut self, key: u64, base: u64) {
        self.table[key as usize] =
            u32::try_from(base).expect("a base state index is below the u32 states");
        self.programmed[key as usize / 64] |= 1 << (key % 64);
    }

    /// Empties `key`'s (checked) entry.
    fn clear(&mut self, key: u64) {
        self.programmed[key as usize / 64] &= !(1 << (key % 64));
    }
}

/// Most masses kept per telemetry (32 MiB); beyond, they are computed each time.
const MAX_MASSES: usize = 1 << 22;

/// The statistical engine's [`MemTelemetry`].
#[derive(Debug, Clone)]
pub struct StatNemo {
    telemetries: Slots<Expected>,
    /// Draws the counts read.
    rng: Rng,
}

/// Checks that `spec` has an expected state (see the module comment).
pub fn check_supported(spec: &TelemetrySpec) -> Result<(), FieldError> {
    const WHY: &str = "on the statistical engine";
    if !matches!(spec.update.op, UpdateOp::Add | UpdateOp::Sub) {
        return Err(FieldError::new(
            "update.op",
            format!("{WHY} only add and sub telemetries are supported (their state is linear in the request count)"),
        ));
    }
    if spec.notify.is_some() {
        return Err(FieldError::new(
            "notify",
            format!(
                "{WHY} notifications are not supported (they depend on the order of the updates)"
            ),
        ));
    }
    if matches!(spec.read_effect, ReadEffect::Op(..)) {
        return Err(FieldError::new(
            "read_effect",
            format!("{WHY} a read effect must be none or a reset"),
        ));
    }
    let contiguous =
        |m: &MaskShift| m.mask == m.max() << m.shift && (m.max() + 1).is_power_of_two();
    if !contiguous(&spec.translation.primary) {
        return Err(FieldError::new(
            "translation.primary.mask",
            format!("{WHY} the mask must be one run of bits"),
        ));
    }
    if spec.translation.sub.is_some_and(|s| !contiguous(&s)) {
        return Err(FieldError::new(
            "translation.sub.mask",
            format!("{WHY} the mask must be one run of bits"),
        ));
    }
    Ok(())
}

impl StatNemo {
    pub fn new(rng: Rng) -> Self {
        StatNemo {
            telemetries: Slots::default(),
            rng,
        }
    }

    /// Whether any telemetry is registered (else the engine skips accounting).
    pub fn active(&self) -> bool {
        self.telemetries.any()
    }

    /// Adds the expected requests of accesses `[ia, ib)` of every thread to every
    /// programmed state. `heap` is the heap's virtual range; physical 0 is its start.
    pub fn account_segments(
        &mut self,
        w: &Workload,
        schedules: &[Schedule],
        ia: u64,
        ib: u64,
        heap: AddrRange,
    ) {
        if !self.active() {
            return;
        }
        // Random patterns land by density wherever their segments fall, so their
        // segments fold into one count per pattern (reads and writes by its store
        // share); sequential segments keep their swept bytes.
        let mut random = vec![0.0f64; w.patterns.len()];
        let mut sweeps = Vec::new();
        for (seg, x, y) in schedules.iter().flat_map(|s| s.overlapping(ia, ib)) {
            let p = &w.patterns[seg.pattern as usize];
            if p.kind == PatternKind::Sequential {
                sweeps.push((
                    seg.pattern as usize,
                    (y - x) as f64,
                    Sweep::of(p, &seg, x, y),
                ));
            } else {
                random[seg.pattern as usize] += (y - x) as f64;
            }
        }
        for (&spec, t) in self.telemetries.states_mut() {
            let k = match spec.update.operand {
                Operand::Const(k) => k as f64,
                Operand::RequestBytes => LINE_BYTES,
            };
            let admits = |store: f64| {
                let (r, wr) = match spec.filter.kinds {
                    Kinds::Read => (1.0, 0.0),
                    Kinds::Write => (0.0, 1.0),
                    Kinds::Both => (1.0, 1.0),
                };
                r * (1.0 - store) + wr * store
            };
            let primary = spec.translation.primary;
            // Address bits above the primary mask alias keys: a key covers one range
            // per aliasing block of the heap's physical span.
            let top = 64 - primary.mask.leading_zeros();
            let aliases = if top >= 64 {
                1
            } else {
                heap.len().div_ceil(1 << top).max(1)
            };
            let (sub_shift, span) = match spec.translation.sub {
                Some(s) => (s.shift, s.max() + 1),
                None => (primary.shift, 1),
            };
            let ranges = |key: u64| {
                (0..aliases).flat_map(move |alias| {
                    let region_pa = (alias << top) | (key << primary.shift);
                    (0..span).map(move |j| {
                        let lo = region_pa + (j << sub_shift);
                        let pa = AddrRange::new(lo, lo + (1 << sub_shift));
                        let (lo, hi) = (
                            pa.start.max(spec.filter.range.start),
                            pa.end.min(spec.filter.range.end).min(heap.len()),
                        );
                        AddrRange::new(heap.start + lo, heap.start + hi.max(lo))
                    })
                })
            };
            let per_key = (aliases * span) as usize * w.patterns.len();
            if t.masses.is_empty() && per_key * t.table.len() <= t.mass_limit {
                t.masses = vec![f64::NAN; per_key * t.table.len()];
            }
            // Sweeps reach keys whatever their masses: then every programmed key.
            let skip = sweeps.is_empty() && !t.masses.is_empty();
            for word in 0..t.programmed.len() {
                let (p, u) = (t.programmed[word], t.unreached[word]);
                // Read before the keys below may mark more of this word unreached.
                let keys = if skip { p & !u } else { p };
                for key in set_bits(keys).map(|b| word * 64 + b) {
                    let base = t.table[key] as u64;
                    let at = (!t.masses.is_empty()).then_some(key * per_key);
                    if let Some(at) = at.filter(|&at| t.masses[at].is_nan()) {
                        let block = &mut t.masses[at..at + per_key];
                        let all = ranges(key as u64)
                            .flat_map(|r| w.patterns.iter().map(move |p| p.mass(r)));
                        for (m, v) in block.iter_mut().zip(all) {
                            *m = v;
                        }
                        // Adding `count x 0 x admits` (+0.0) to a state leaves it unchanged,
                        // so skipping such a key changes no count.
                        if block.iter().all(|&m| m == 0.0) {
                            t.unreached[key / 64] |= 1 << (key % 64);
                        }
                    }
                    let mut next = at;
                    for alias in 0..aliases {
                        let region_pa = (alias << top) | ((key as u64) << primary.shift);
                        for j in 0..span {
                            let lo = region_pa + (j << sub_shift);
                            let pa = AddrRange::new(lo, lo + (1 << sub_shift));
                            let (lo, hi) = (
                                pa.start.max(spec.filter.range.start),
                                pa.end.min(spec.filter.range.end).min(heap.len()),
                            );
                            let masses = next.map(|at| &t.masses[at..at + w.patterns.len()]);
                            next = next.map(|at| at + w.patterns.len());
                            if hi <= lo {
                                continue;
                            }
                            let r = AddrRange::new(heap.start + lo, heap.start + hi);
                            let (mut n, mut swept) = (0.0, 0.0);
                            for (i, &count) in random.iter().enumerate() {
                                let p = &w.patterns[i];
                                if count > 0.0 && overlaps(p.region, r) {
                                    let mass = masses.map_or_else(|| p.mass(r), |m| m[i]);
                                    n += count * mass * admits(p.store_share());
                                }
                            }
                            for (i, count, sweep) in &sweeps {
                                let p = &w.patterns[*i];
                                if overlaps(p.region, r) {
                                    let share = sweep.bytes_in(p.region, r) / sweep.bytes(p.region);
                                    swept += count * share * admits(p.store_share());
                                }
                            }
                            t.expected[(base + j) as usize] += k * n;
                            t.swept[(base + j) as usize] += k * swept;
                        }
                    }
                }
            }
        }
    }
}

/// Reads state `index` (in range) of a telemetry: random patterns' requests of `k` each
/// are a Poisson number around the expectation; sequential sweeps' are not random.
#[inline]
fn read_state(spec: &TelemetrySpec, installed: &mut Expected, rng: &mut Rng, index: usize) -> u64 {
    let e = &mut installed.expected[index];
    let k = match spec.update.operand {
        Operand::Const(k) => k as f64,
        Operand::RequestBytes => LINE_BYTES,
    };
    // A zero expectation draws nothing (`Rng::poisson` of 0 takes no number).
    let drawn = if k == 0.0 || *e == 0.0 {
        0.0
    } else {
        rng.poisson(*e / k) as f64 * k
    };
    let swept = &mut installed.swept[index];
    // `drawn` is a whole number (k is one), which rounding leaves as it is: round only
    // with a sweep's fraction (libm's `round` is a call, once per state read).
    let change = if *swept == 0.0 {
        drawn as u64
    } else {
        (drawn + *swept).round() as u64
    };
    if let ReadEffect::Reset(_) = spec.read_effect {
        *e = 0.0;
        *swept = 0.0;
    }
    state_after(spec, change)
}

/// The value of a state that `change` requests updated since its initial value.
#[inline]
fn state_after(spec: &TelemetrySpec, change: u64) -> u64 {
    let (init, mask) = (spec.initial(), width_mask(spec.width));
    let saturate = spec.update.overflow == Overflow::Saturate;
    match (spec.update.op, saturate) {
        (UpdateOp::Sub, true) => init.saturating_sub(change),
        (UpdateOp::Sub, false) => init.wrapping_sub(change) & mask,
        (_, true) => init.saturating_add(change).min(mask),
        (_, false) => init.wrapping_add(change) & mask,
    }
}

impl MemTelemetry for StatNemo {
    fn register(&mut self, spec: &TelemetrySpec) -> Result<TelemetryId, FieldError> {
        spec.validate()?;
        check_supported(spec)?;
        let expected = Expected {
            table: vec![0; spec.entries as usize],
            programmed: vec![0; (spec.entries as usize).div_ceil(64)],
            expected: vec![0.0; spec.states as usize],
            swept: vec![0.0; spec.states as usize],
            masses: vec![],
            mass_limit: MAX_MASSES,
            unreached: vec![0; (spec.entries as usize).div_ceil(64)],
        };
        Ok(self.telemetries.install(*spec, expected))
    }

    fn unregister(&mut self, t: TelemetryId) -> Result<(), DriverError> {
        self.telemetries.remove(t).map(|_| ())
    }

    fn spec(&self, t: TelemetryId) -> Result<&TelemetrySpec, DriverError> {
        Ok(self.telemetries.get(t)?.0)
    }

    fn set_translation(
        &mut self,
        t: TelemetryId,
        key: u64,
        region_idx: u64,
    ) -> Result<(), DriverError> {
        let (base, installed) = self.telemetries.with_translation(t, key, region_idx)?;
        installed.set(key, base);
        Ok(())
    }

    fn clear_translation(&mut self, t: TelemetryId, key: u64) -> Result<(), DriverError> {
        let (_, installed) = self.telemetries.with_key(t, key)?;
        installed.clear(key);
        Ok(())
    }

    fn read(&mut self, t: TelemetryId, index: u64) -> Result<u64, DriverError> {
        let (spec, installed) = self.telemetries.with_index(t, index)?;
        Ok(read_state(spec, installed, &mut self.rng, index as usize))
    }

    fn read_region(
        &mut self,
        t: TelemetryId,
        region_idx: u64,
        out: &mut Vec<u64>,
    ) -> Result<(), DriverError> {
        self.read_regions(t, region_idx, 1, out)
    }

    /// [`MemTelemetry::read`] of each state of the regions, the telemetry looked up once
    /// (the multiplexer reads a region per programmed key every scan).
    fn read_regions(
        &mut self,
        t: TelemetryId,
        first: u64,
        count: u64,
        out: &mut Vec<u64>,
    ) -> Result<(), DriverError> {
        let (spec, installed) = self.telemetries.get_mut(t)?;
        if count > 0 {
            check_region(spec, first)?;
            check_region(spec, first + count - 1)?;
        }
        out.clear();
        let span = spec.span() as usize;
        let states = first as usize * span..(first + count) as usize * span;
        out.reserve(states.len());
        // Most states of a batch have nothing expected and nothing swept (pages outside
        // the hot set): their read draws no number and its reset changes nothing, so they
        // take the value of no request without `read_state`'s work and stores.
        let quiet = state_after(spec, 0);
        for i in states {
            out.push(
                if installed.expected[i] == 0.0 && installed.swept[i] == 0.0 {
                    quiet
                } else {
                    read_state(spec, installed, &mut self.rng, i)
                },
            );
        }
        Ok(())
    }

    /// [`MemTelemetry::set_translation`] of each key, the telemetry looked up once.
    fn set_translations(
        &mut self,
        t: TelemetryId,
        keys: &[u64],
        first: u64,
    ) -> Result<(), DriverError> {
        let (spec, installed) = self.telemetries.get_mut(t)?;
        for (r, &key) in (first..).zip(keys) {
            let base = translation_base(spec, key, r)?;
            installed.set(key, base);
        }
        Ok(())
    }

    /// [`MemTelemetry::clear_translation`] of each key, the telemetry looked up once.
    fn clear_translations(&mut self, t: TelemetryId, keys: &[u64]) -> Result<(), DriverError> {
        let (spec, installed) = self.telemetries.get_mut(t)?;
        let max = spec.translation.primary.max();
        for &key in keys {
            if key > max {
                return Err(DriverError::KeyOutsideMask { key, max });
            }
            installed.clear(key);
        }
        Ok(())
    }

    /// Never any: notifying telemetries are rejected at registration.
    fn drain_notifications(&mut self, _out: &mut Vec<Notification>) {}
}

#[cfg(test)]
mod tests {
    use crate::config::SimMachine;
    use crate::exact::ExactEngine;
    use crate::stat::StatEngine;
    use crate::WorkloadParams;
    use tierscope_core::memtel::{
        Filter, Kinds, MaskShift, MemTelemetry, Operand, Overflow, Predicate, ReadEffect,
        TelemetrySpec, Translation, Update, UpdateOp,
    };
    use tierscope_core::workload::{parse_masim, WorkloadSpec};
    use tierscope_core::{AddrRange, Engine, Machine};

    const MIB2: u64 = 2 << 20;

    /// One add-1 counter per 2 MiB page of the first 16 GiB, reset on read (Listing 2).
    fn hotness(kinds: Kinds) -> TelemetrySpec {
        TelemetrySpec {
            filter: Filter {
                kinds,
                range: AddrRange::new(0, 16 << 30),
            },
            translation: Translation {
                primary: MaskShift::bits(21, 34),
                sub: None,
            },
            update: Update {
                op: UpdateOp::Add,
                operand: Operand::Const(1),
                overflow: Overflow::Wrap,
            },
            notify: None,
            read_effect: ReadEffect::Reset(0),
            entries: 8192,
            states: 8192,
            width: 64,
        }
    }

    fn params(spec: &WorkloadSpec) -> WorkloadParams<'_> {
        WorkloadParams {
            spec,
            rate: 1_024_000,
            threads: 2,
            seed: 5,
            block_size: MIB2,
            truth_threshold: 1,
        }
    }

    /// Registers `spec` on `e`, maps every 2 MiB page of the heap to its own state,
    /// runs 200 ms and returns each page's count, in heap order.
    fn counts(e: &mut dyn Engine, spec: &TelemetrySpec) -> Vec<u64> {
        let heap = e.heap();
        let pages = heap.len() / MIB2;
        let m = e.as_machine();
        let key = |m: &dyn Machine, i: u64| m.phys_addr(heap.start + i * MIB2).unwrap() >> 21;
        let keys: Vec<u64> = (0..pages).map(|i| key(m, i)).collect();
        let nemo = m.mem_telemetry().unwrap();
        let t = nemo.register(spec).unwrap();
        for (i, &k) in keys.iter().enumerate() {
            nemo.set_translation(t, k, i as u64).unwrap();
        }
        e.advance_to(200_000_000);
        let nemo = e.as_machine().mem_telemetry().unwrap();
        (0..pages).map(|i| nemo.read(t, i).unwrap()).collect()
    }

    /// Three phases over a cold 64 MiB region (heap pages 0..32) and a hot 8 MiB one
    /// (pages 32..36): 60 ms random read-write over the hot one, 76 ms random reads over
    /// the cold one, 64 ms of sequential 4 KiB-stride writes over the cold one. At
    /// 1,024,000 accesses/s a lap of the cold region (16,384 accesses) takes 16 ms, so
    /// the last phase is 4 whole laps per thread whatever its start offset: every cold
    /// page gets 4 x 512 writes per thread on either engine.
    fn workload() -> WorkloadSpec {
        parse_masim(
            "hot, 8MiB\ncold, 64MiB\n\nhot\n60\nhot, 1, 4096, 1, rw\n\ncold\n76\ncold, 1, 4096, 1, ro\n\nsweep\n64\ncold, 0, 4096, 1, wo\n",
        )
        .unwrap()
    }

    #[test]
    fn exact_counts_equal_the_executed_accesses() {
        let spec = workload();
        let mut e = ExactEngine::new(&SimMachine::default(), &params(&spec)).unwrap();
        let heap = e.heap();
        let got = counts(&mut e, &hotness(Kinds::Both));
        // The truth counts every executed access per 2 MiB block.
        let mut truth = vec![0u64; got.len()];
        for (r, per_byte) in e.take_truth_heat() {
            let mut b = r.start;
            while b < r.end {
                truth[((b - heap.start) / MIB2) as usize] = (per_byte * MIB2 as f64) as u64;
                b += MIB2;
            }
        }
        assert_eq!(got, truth);
        assert_eq!(got.iter().sum::<u64>(), e.stats().accesses);
        // Reset on read: a second read sees nothing new.
        let nemo = e.mem_telemetry().unwrap();
        assert_eq!(
            nemo.read(tierscope_core::memtel::TelemetryId(0), 0)
                .unwrap(),
            0
        );
    }

    #[test]
    fn exact_llc_passes_only_its_misses() {
        // 256 KiB (4,096 lines) read at random by 2 threads for 200 ms (409,600
        // accesses): behind a 1 MiB LLC every line misses once and then always hits, so
        // NEMO counts at most 4,096 requests, exactly the LLC's misses; without it, all.
        let spec = parse_masim("small, 256KiB\n\np\n1000\nsmall, 1, 64, 1, ro\n").unwrap();
        let llc = tierscope_nemo::LlcConfig {
            size: tierscope_core::units::Size(1 << 20),
            ways: 16,
        };
        let machine = SimMachine {
            llc: Some(llc),
            ..SimMachine::default()
        };
        let mut e = ExactEngine::new(&machine, &params(&spec)).unwrap();
        let total: u64 = counts(&mut e, &hotness(Kinds::Both)).iter().sum();
        let accesses = e.stats().accesses;
        assert_eq!(accesses, 409_600);
        assert!(total > 4_000 && total <= 4_096, "{total}");
        let mut plain = ExactEngine::new(&SimMachine::default(), &params(&spec)).unwrap();
        let all: u64 = counts(&mut plain, &hotness(Kinds::Both)).iter().sum();
        assert_eq!(all, accesses);
    }

    #[test]
    fn exact_reads_and_writes_split_the_total() {
        let spec = workload();
        let run = |kinds| {
            let mut e = ExactEngine::new(&SimMachine::default(), &params(&spec)).unwrap();
            counts(&mut e, &hotness(kinds))
        };
        let (both, reads, writes) = (run(Kinds::Both), run(Kinds::Read), run(Kinds::Write));
        for i in 0..both.len() {
            assert_eq!(reads[i] + writes[i], both[i], "page {i}");
        }
        // Writes: 2 threads x 4 laps x 512 per cold page, and about half of the hot
        // region's 2 x 61,440 read-write accesses.
        assert!(writes[..32].iter().all(|&w| w == 4096), "{writes:?}");
        let hot_writes: u64 = writes[32..].iter().sum();
        assert!((58_000..65_000).contains(&hot_writes), "{hot_writes}");
        assert!(reads[..32].iter().all(|&r| r > 0));
    }

    #[test]
    fn stat_expected_counts_agree_with_the_exact_engine() {
        let spec = workload();
        for kinds in [Kinds::Both, Kinds::Read, Kinds::Write] {
            let mut exact = ExactEngine::new(&SimMachine::default(), &params(&spec)).unwrap();
            let mut stat = StatEngine::new(&SimMachine::default(), &params(&spec)).unwrap();
            let x = counts(&mut exact, &hotness(kinds));
            let s = counts(&mut stat, &hotness(kinds));
            // 2 threads x 200k accesses. Both engines' counts of a page are random with
            // variance at most its mean mu (a sum of Bernoulli draws; a Poisson draw), so
            // their difference has a standard deviation of at most sqrt(2 mu): the bound
            // 5 sqrt(mu) + 1 is 3.5 of those, exceeded with probability ~5e-4 per page;
            // the test is seeded, so it does not flake, and a wrong share per page
            // (e.g. the hot region's 90 %) fails it.
            for (i, (&x, &s)) in x.iter().zip(&s).enumerate() {
                let bound = 5.0 * (s as f64).sqrt() + 1.0;
                assert!(
                    (x as f64 - s as f64).abs() <= bound,
                    "{kinds:?} page {i}: exact {x} stat {s} bound {bound}"
                );
            }
            if kinds == Kinds::Write {
                // Whole laps of the sequential writer: exact on both engines.
                assert!(s[..32].iter().all(|&w| w == 4096), "{s:?}");
            }
            let (tx, ts) = (x.iter().sum::<u64>(), s.iter().sum::<u64>());
            assert!(
                tx.abs_diff(ts) <= 5 * (ts as f64).sqrt() as u64 + 32,
                "{tx} {ts}"
            );
        }
    }

    #[test]
    fn stat_cached_masses_change_no_count() {
        // Two gaussian patterns of one region; every 2 MiB key programmed, accounted,
        // then programmed to other states and accounted again. Keeping each key's masses
        // must give every state exactly the count computing them each time gives.
        use super::super::density::{Schedule, Workload};
        use super::StatNemo;
        use tierscope_core::rng::Rng;
        use tierscope_core::workload::Density;
        let mut spec =
            parse_masim("a, 64MiB\n\np\n1000\na, 1, 4096, 1, rw\na, 1, 4096, 1, ro\n").unwrap();
        // Narrow enough that the keys beyond its tails (about 40 sigma, 26 MiB) get no
        // mass: accounting skips them once their masses are kept.
        for p in &mut spec.phases[0].patterns {
            p.density = Density::Gaussian {
                mean: 0.4,
                sigma: 0.01,
            };
        }
        let heap = AddrRange::new(1 << 30, (1 << 30) + (64 << 20));
        let w = Workload::new(&spec, &[heap.start], 1_000_000);
        let mut s = Schedule::new(&w, Rng::new(2));
        s.run(&w, 200_000);
        let run = |limit: usize| {
            let mut nemo = StatNemo::new(Rng::new(1));
            let t = nemo.register(&hotness(Kinds::Both)).unwrap();
            for (_, e) in nemo.telemetries.states_mut() {
                e.mass_limit = limit;
            }
            for k in 0..32 {
                nemo.set_translation(t, k, k).unwrap();
            }
            nemo.account_segments(&w, std::slice::from_ref(&s), 0, 100_000, heap);
            for k in 0..32 {
                nemo.clear_translation(t, k).unwrap();
                nemo.set_translation(t, k, 31 - k).unwrap();
            }
            nemo.account_segments(&w, std::slice::from_ref(&s), 100_000, 200_000, heap);
            let (_, e) = nemo.telemetries.states_mut().next().unwrap();
            let unreached: u32 = e.unreached.iter().map(|w| w.count_ones()).sum();
            (e.expected.clone(), e.masses.len(), unreached)
        };
        let ((cached, kept, skipped), (direct, none, unskipped)) = (run(super::MAX_MASSES), run(0));
        assert!(kept > 0 && none == 0, "{kept} {none}");
        assert!((1..32).contains(&skipped) && unskipped == 0, "{skipped}");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&cached), bits(&direct));
        // The gaussian's centre (key 12 of 32) got most of the 200 K accesses.
        let total: f64 = cached.iter().sum();
        assert!((total - 200_000.0).abs() < 1.0, "{total}");
        assert!(cached[12] + cached[19] > 0.2 * total, "{cached:?}");
    }

    #[test]
    fn stat_batched_calls_equal_one_at_a_time() {
        // Two engines, one seed: one programs, reads and clears its keys one call each,
        // the other in batches; every count read (the same Poisson draws in the same
        // order) and every later count must agree.
        let spec = workload();
        let run = |batched: bool| {
            let mut e = StatEngine::new(&SimMachine::default(), &params(&spec)).unwrap();
            let nemo = e.mem_telemetry().unwrap();
            let mut rule = hotness(Kinds::Both);
            rule.states = 64;
            rule.translation.sub = Some(MaskShift::bits(20, 21));
            let t = nemo.register(&rule).unwrap();
            let keys: Vec<u64> = (0..32).collect();
            let mut out = vec![];
            let mut all = vec![];
            for step in 1..=3u64 {
                let nemo = e.mem_telemetry().unwrap();
                if batched {
                    nemo.set_translations(t, &keys, 0).unwrap();
                } else {
                    for (r, &k) in keys.iter().enumerate() {
                        nemo.set_translation(t, k, r as u64).unwrap();
                    }
                }
                e.advance_to(step * 50_000_000);
                let nemo = e.mem_telemetry().unwrap();
                if batched {
                    nemo.read_regions(t, 0, 32, &mut out).unwrap();
                    all.extend_from_slice(&out);
                    nemo.clear_translations(t, &keys).unwrap();
                } else {
                    for i in 0..64 {
                        all.push(nemo.read(t, i).unwrap());
                    }
                    for &k in &keys {
                        nemo.clear_translation(t, k).unwrap();
                    }
                }
            }
            let nemo = e.mem_telemetry().unwrap();
            assert!(nemo.read_regions(t, 31, 2, &mut out).is_err());
            assert!(nemo.clear_translations(t, &[1 << 13]).is_err());
            all
        };
        let (one, batched) = (run(false), run(true));
        assert_eq!(one.len(), 3 * 64);
        assert!(one.iter().sum::<u64>() > 0);
        assert_eq!(one, batched);
    }

    #[test]
    fn stat_rejects_rules_without_an_expected_state() {
        let spec = workload();
        let mut stat = StatEngine::new(&SimMachine::default(), &params(&spec)).unwrap();
        let nemo = stat.mem_telemetry().unwrap();
        let field = |nemo: &mut dyn MemTelemetry, f: &dyn Fn(&mut TelemetrySpec)| {
            let mut s = hotness(Kinds::Both);
            f(&mut s);
            nemo.register(&s).unwrap_err().field
        };
        let xor = |s: &mut TelemetrySpec| s.update.op = UpdateOp::Xor;
        assert_eq!(field(nemo, &xor), "update.op");
        let notify = |s: &mut TelemetrySpec| {
            s.notify = Some(tierscope_core::memtel::Notify {
                predicate: Predicate::Ge,
                operand: 10,
            })
        };
        assert_eq!(field(nemo, &notify), "notify");
        let halve = |s: &mut TelemetrySpec| s.read_effect = ReadEffect::Op(UpdateOp::Shr, 1);
        assert_eq!(field(nemo, &halve), "read_effect");
        let holes = |s: &mut TelemetrySpec| {
            s.translation.primary = MaskShift {
                mask: 0b101 << 21,
                shift: 21,
            }
        };
        assert_eq!(field(nemo, &holes), "translation.primary.mask");
        // The driver's own checks come first and name their field alike.
        assert_eq!(field(nemo, &|s| s.width = 0), "width");
    }
}
