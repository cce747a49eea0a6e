//! MASIM's access generator: per phase, pick a pattern by weight, run a batch of accesses
//! in its region (random: an offset per access drawn from the pattern's density, uniform
//! as in masim or hotspot / gaussian / zipf; sequential: offset += stride, wrapping),
//! repeat; phases follow each other by time and repeat when the run is longer.
//! Access number `i` of a thread happens at `i * 1e9 / rate` ns.

use tierscope_core::rng::Rng;
use tierscope_core::workload::{trace, AccessMode, PatternKind, RegionDensity, WorkloadSpec};
use tierscope_core::Nanos;

/// Accesses per pattern pick, masim's default.
pub const MASIM_BATCH: u64 = 131_072;

#[derive(Debug, Clone)]
struct Pattern {
    base: u64,
    size: u64,
    kind: PatternKind,
    density: RegionDensity,
    stride: u64,
    mode: AccessMode,
    /// Sum of the weights of this and the earlier patterns of the phase.
    cumulative_weight: u64,
    offset: u64,
}

#[derive(Debug, Clone)]
struct Phase {
    patterns: Vec<Pattern>,
    total_weight: u64,
    /// End of the phase within one pass over the phases.
    end_ns: Nanos,
}

/// One workload thread's deterministic access stream. Aligned so that the streams of
/// cores running on different host threads never share a cache line (the generator's
/// state changes on every access).
#[derive(Debug, Clone)]
#[repr(align(128))]
pub struct AccessStream {
    phases: Vec<Phase>,
    cycle_ns: Nanos,
    rate: u64,
    rng: Rng,
    phase: usize,
    cycle: u64,
    phase_end_count: u64,
    pattern: usize,
    batch_left: u64,
    store_next: bool,
    issued: u64,
    /// A recorded trace replayed instead of the phases (`address | STORE` records, placed
    /// in the heap), looping; and the next record.
    trace: Option<std::sync::Arc<[u64]>>,
    trace_pos: usize,
}

impl AccessStream {
    /// `region_starts[i]` is where region `i` of `spec` is mapped.
    pub fn new(spec: &WorkloadSpec, region_starts: &[u64], rate: u64, rng: Rng) -> Self {
        let mut end_ns = 0;
        let index = spec.region_indices();
        let phases: Vec<Phase> = spec
            .phases
            .iter()
            .map(|p| {
                end_ns += p.duration.0;
                let mut cumulative_weight = 0;
                let patterns = p
                    .patterns
                    .iter()
                    .map(|pat| {
                        let r = index[pat.region.as_str()];
                        cumulative_weight += pat.weight as u64;
                        Pattern {
                            base: region_starts[r],
                            size: spec.regions[r].size.0,
                            kind: pat.kind,
                            density: RegionDensity::of_region(spec, pat, r),
                            stride: pat.stride.0,
                            mode: pat.mode,
                            cumulative_weight,
                            offset: 0,
                        }
                    })
                    .collect();
                Phase {
                    patterns,
                    total_weight: cumulative_weight,
                    end_ns,
                }
            })
            .collect();
        let mut s = AccessStream {
            phases,
            cycle_ns: end_ns,
            rate,
            rng,
            phase: 0,
            cycle: 0,
            phase_end_count: 0,
            pattern: 0,
            batch_left: 0,
            store_next: false,
            issued: 0,
            trace: None,
            trace_pos: 0,
        };
        s.phase_end_count = s.count_at(s.phases[0].end_ns);
        s
    }

    /// A stream replaying `records` (`address | trace::STORE`, already placed in the
    /// heap) in order at `rate` accesses per second, from the start again when they run
    /// out.
    pub fn from_trace(records: std::sync::Arc<[u64]>, rate: u64) -> Self {
        assert!(!records.is_empty(), "an empty trace");
        AccessStream {
            phases: vec![],
            cycle_ns: 0,
            rate,
            rng: Rng::new(0),
            phase: 0,
            cycle: 0,
            phase_end_count: u64::MAX,
            pattern: 0,
            batch_left: 0,
            store_next: false,
            issued: 0,
            trace: Some(records),
            trace_pos: 0,
        }
    }

    /// Accesses issued before time `t`.
    pub fn count_at(&self, t: Nanos) -> u64 {
        ((t as u128 * self.rate as u128).div_ceil(1_000_000_000)) as u64
    }

    /// Accesses per second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    pub fn issued(&self) -> u64 {
        self.issued
    }

    fn next_phase(&mut self) {
        self.phase += 1;
        if self.phase == self.phases.len() {
            self.phase = 0;
            self.cycle += 1;
        }
        let end = self.cycle * self.cycle_ns + self.phases[self.phase].end_ns;
        self.phase_end_count = self.count_at(end);
        self.batch_left = 0;
    }

    fn pick_pattern(&mut self) {
        let phase = &self.phases[self.phase];
        let x = self.rng.below(phase.total_weight);
        self.pattern = phase
            .patterns
            .iter()
            .position(|p| x < p.cumulative_weight)
            .expect("x is below the total weight");
        self.batch_left = MASIM_BATCH;
    }

    /// Issues the next accesses into `buf` (as `va | STORE` records, [`trace::STORE`] for
    /// a store), stopping when `until` have been issued in all or `buf` is full; returns
    /// how many. The engine executes accesses in such batches: generating them is
    /// independent of the machine's state, and a batch lets it look ahead.
    #[inline]
    pub fn fill(&mut self, until: u64, buf: &mut [u64]) -> usize {
        let end = until.min(self.issued + buf.len() as u64);
        let mut n = 0;
        self.run(end, |va, w| {
            buf[n] = va | if w { trace::STORE } else { 0 };
            n += 1;
        });
        n
    }

    /// Issues accesses until `until` have been issued in all, calling `f(va, is_store)`.
    #[inline]
    pub fn run<F: FnMut(u64, bool)>(&mut self, until: u64, mut f: F) {
        if let Some(records) = &self.trace {
            while self.issued < until {
                let r = records[self.trace_pos];
                self.trace_pos += 1;
                if self.trace_pos == records.len() {
                    self.trace_pos = 0;
                }
                self.issued += 1;
                f(r & trace::ADDR, r & trace::STORE != 0);
            }
            return;
        }
        while self.issued < until {
            while self.issued >= self.phase_end_count {
                self.next_phase();
            }
            if self.batch_left == 0 {
                self.pick_pattern();
            }
            let n = (until - self.issued)
                .min(self.phase_end_count - self.issued)
                .min(self.batch_left);
            self.batch_left -= n;
            self.issued += n;
            let p = &mut self.phases[self.phase].patterns[self.pattern];
            let rng = &mut self.rng;
            let mut store = self.store_next;
            // Uniform random offsets (masim's random pattern) get a loop of their own: the
            // pattern's kind and density model are then matched once per batch, not per
            // access. The draws are the same.
            if p.kind == PatternKind::Random && p.density.is_uniform() {
                let (base, size) = (p.base, p.density.size());
                issue(n, p.mode, &mut store, &mut f, || {
                    base + RegionDensity::uniform_offset(size, rng)
                });
            } else {
                issue(n, p.mode, &mut store, &mut f, || match p.kind {
                    PatternKind::Random => p.base + p.density.sample(rng),
                    PatternKind::Sequential => {
                        let va = p.base + p.offset;
                        p.offset += p.stride;
                        if p.offset >= p.size {
                            p.offset %= p.size;
                        }
                        va
                    }
                });
            }
            self.store_next = store;
        }
    }
}

/// Issues `n` accesses at the addresses `next_va` gives, loads or stores as `mode` says
/// (read-write alternates, continuing from `store`), through `f`. One loop per mode.
#[inline(always)]
fn issue<F: FnMut(u64, bool)>(
    n: u64,
    mode: AccessMode,
    store: &mut bool,
    f: &mut F,
    mut next_va: impl FnMut() -> u64,
) {
    match mode {
        AccessMode::Ro => (0..n).for_each(|_| f(next_va(), false)),
        AccessMode::Wo => (0..n).for_each(|_| f(next_va(), true)),
        AccessMode::Rw => (0..n).for_each(|_| {
            *store = !*store;
            f(next_va(), *store)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::workload::parse_masim;

    #[test]
    fn phases_switch_at_their_time_and_repeat() {
        // 1 ms phases at 1M/s: 1000 accesses each, a then b then a again.
        let spec = parse_masim("a, 4096\nb, 4096\n\np1\n1\na, 0, 8, 1\n\np2\n1\nb, 0, 8, 1, ro\n")
            .unwrap();
        let mut s = AccessStream::new(&spec, &[0x1000, 0x10_0000], 1_000_000, Rng::new(1));
        let mut seen = vec![];
        s.run(3000, |va, w| seen.push((va, w)));
        assert!(seen[..1000]
            .iter()
            .all(|&(va, w)| (0x1000..0x2000).contains(&va) && w));
        assert!(seen[1000..2000]
            .iter()
            .all(|&(va, w)| (0x10_0000..0x10_1000).contains(&va) && !w));
        assert!(seen[2000..]
            .iter()
            .all(|&(va, _)| (0x1000..0x2000).contains(&va)));
        // Sequential with stride 8 wraps at the region end (512 accesses per lap).
        assert_eq!(seen[0].0, 0x1000);
        assert_eq!(seen[512].0, 0x1000);
        assert_eq!(s.count_at(3_000_000), 3000);
    }

    #[test]
    fn weights_and_rw_mode() {
        let spec =
            parse_masim("a, 1MiB\nb, 1MiB\n\np\n100000\na, 1, 4096, 3, rw\nb, 1, 4096, 1, rw\n")
                .unwrap();
        let mut s = AccessStream::new(&spec, &[0, 1 << 30], 10_000_000, Rng::new(3));
        let (mut in_a, mut stores, mut n) = (0u64, 0u64, 0u64);
        s.run(MASIM_BATCH * 400, |va, w| {
            n += 1;
            in_a += (va < (1 << 20)) as u64;
            stores += w as u64;
        });
        let frac_a = in_a as f64 / n as f64;
        assert!((0.68..0.82).contains(&frac_a), "{frac_a}");
        assert_eq!(stores * 2, n);
    }

    #[test]
    fn same_seed_same_stream() {
        let spec = parse_masim("a, 64GiB\n\np\n1000\na, 1, 4096, 1\n").unwrap();
        let collect = |seed| {
            let mut s = AccessStream::new(&spec, &[0], 10_000_000, Rng::new(seed));
            let mut v = vec![];
            s.run(1000, |va, _| v.push(va));
            v
        };
        assert_eq!(collect(5), collect(5));
        assert_ne!(collect(5), collect(6));
        // 64-bit offsets: addresses beyond 4 GiB occur.
        assert!(collect(5).iter().any(|&va| va > (4 << 30)));
    }

    #[test]
    fn hotspot_accesses_land_on_hot_pages_only() {
        use tierscope_core::workload::Density;
        let mut spec =
            parse_masim("a, 1GiB\nb, 64MiB\n\np\n1000\na, 1, 4096, 1\nb, 1, 4096, 1\n").unwrap();
        spec.phases[0].patterns[0].density = Density::Hotspot { hot_fraction: 0.01 };
        let hot = RegionDensity::of_pattern(&spec, &spec.phases[0].patterns[0]);
        let mut s = AccessStream::new(&spec, &[0, 1 << 40], 10_000_000, Rng::new(2));
        let (mut pages, mut in_b) = (std::collections::HashSet::new(), 0u64);
        s.run(MASIM_BATCH * 16, |va, _| {
            if va < 1 << 30 {
                let page = va & !4095;
                assert!(hot.mass(page, page + 4096) > 0.0, "{va:#x} is cold");
                pages.insert(page);
            } else {
                in_b += 1;
            }
        });
        // About half the batches each; 1M accesses reach nearly all 2621 hot pages.
        assert!(in_b > 0 && pages.len() > 2500, "{} {in_b}", pages.len());
    }
}
