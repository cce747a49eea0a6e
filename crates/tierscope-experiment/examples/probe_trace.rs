//! Per-window trace of one monitor's bit operations on one engine: what the summary's
//! bits cleared and region counts are made of, for comparing the exact and statistical
//! engines window by window (docs/models/FIDELITY.md, "Root causes of the two stat-vs-exact
//! gaps"; `scripts/engine_gap.py` runs it over seeds and engines).
//!
//! `cargo run --release --example probe_trace -- FILE.toml ENGINE SEED [MONITOR]`
//!
//! ENGINE (`exact` or `stat`) and SEED replace the file's; MONITOR (default: the first)
//! names the monitor to run, alone. Prints one tab-separated line per aggregation window:
//!
//! - `end_s`, `phase` (index of the workload phase at the window's end);
//! - `regions` (reported, after merging), `regions_active` (of them, those overlapping
//!   memory a pattern of the window's phase accesses), `hot_regions` (nr_accesses at or
//!   above the experiment's hot threshold), `max_nr` (the largest nr_accesses: DAMON merges
//!   neighbours within a tenth of it), `small_regions` (regions of at most 64 KiB), and
//!   the regions in accessed memory by nr_accesses: `nr0`, `nr1`, `nr2`, `nr3`, `nr4p`
//!   (4 or more);
//! - `clears`, `bits` (test-and-clear operations and the bits they found set), then the
//!   same and the reads (`reads`, `set`) split into `_act` (addresses in memory a pattern
//!   of the current phase accesses) and `_oth` (everything else: dead memory and regions
//!   other phases access);
//! - per class and per age (the time since the same entry was last cleared by this
//!   monitor: `never`, up to 2 ms, 10 ms, 50 ms, 200 ms, 1 s, longer), the clears and the
//!   bits they found set: `c_act_2ms`, `b_act_2ms`, ... The bit found at a clear is the
//!   probability that the page was accessed (and walked) since its previous clear, which
//!   these columns give as a function of that time, whatever the regions were.
//!
//! The monitor runs on the engine through a recording proxy that only counts.
use std::collections::HashMap;
use std::path::Path;
use tierscope_core::memtel::MemTelemetry;
use tierscope_core::tiers::Tiers;
use tierscope_core::{
    AddrRange, CostCounters, Flush, Level, Machine, Mapping, Nanos, Paging, Pmu, WriteLog,
};
use tierscope_experiment::config::EngineKind;
use tierscope_experiment::{build, parse_experiment, Format};

/// Upper bounds of the age buckets (ns) after `never`; the last bucket is open.
const AGE_BOUNDS: [Nanos; 5] = [
    2_000_000,
    10_000_000,
    50_000_000,
    200_000_000,
    1_000_000_000,
];
const AGE_NAMES: [&str; 7] = ["never", "2ms", "10ms", "50ms", "200ms", "1s", "long"];

/// Counts of one class of addresses.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    clears: u64,
    bits: u64,
    reads: u64,
    set: u64,
    /// Per age bucket: clears and bits found set.
    by_age: [(u64, u64); 7],
}

/// Delegates to the engine, counting ACCESSED reads and clears by address class.
struct Recorder<'a> {
    inner: &'a mut dyn Machine,
    /// Memory the current phase's patterns access.
    active: &'a [AddrRange],
    /// `[active, other]`.
    counts: &'a mut [Counts; 2],
    /// When each entry (level and entry number) was last cleared.
    last_clear: &'a mut HashMap<u64, Nanos>,
}

impl Recorder<'_> {
    fn class(&self, va: u64) -> usize {
        usize::from(!self.active.iter().any(|r| r.contains(va)))
    }
}

impl Machine for Recorder<'_> {
    fn paging(&self) -> Paging {
        self.inner.paging()
    }
    fn now(&self) -> Nanos {
        self.inner.now()
    }
    fn mappings(&self) -> &[Mapping] {
        self.inner.mappings()
    }
    fn leaf_level(&mut self, va: u64) -> Option<Level> {
        self.inner.leaf_level(va)
    }
    fn accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let r = self.inner.accessed(level, va);
        if let Some(b) = r {
            let c = &mut self.counts[self.class(va)];
            c.reads += 1;
            c.set += b as u64;
        }
        r
    }
    fn test_and_clear_accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let r = self.inner.test_and_clear_accessed(level, va);
        if let Some(b) = r {
            let now = self.inner.now();
            let key = (level.index() as u64) << 58 | va >> level.span_shift();
            let age = match self.last_clear.insert(key, now) {
                None => 0,
                Some(t) => 1 + AGE_BOUNDS.iter().take_while(|&&x| now - t > x).count(),
            };
            let c = &mut self.counts[self.class(va)];
            c.clears += 1;
            c.bits += b as u64;
            c.by_age[age].0 += 1;
            c.by_age[age].1 += b as u64;
        }
        r
    }
    fn dirty(&mut self, va: u64) -> Option<bool> {
        self.inner.dirty(va)
    }
    fn test_and_clear_dirty(&mut self, va: u64) -> Option<bool> {
        self.inner.test_and_clear_dirty(va)
    }
    fn flush(&mut self, what: Flush) {
        self.inner.flush(what)
    }
    fn pmu(&mut self) -> Option<&mut dyn Pmu> {
        self.inner.pmu()
    }
    fn write_log(&mut self) -> Option<&mut dyn WriteLog> {
        self.inner.write_log()
    }
    fn split_huge(&mut self, va: u64) -> bool {
        self.inner.split_huge(va)
    }
    fn collapse_huge(&mut self, va: u64) -> bool {
        self.inner.collapse_huge(va)
    }
    fn tiers(&mut self) -> Option<&mut dyn Tiers> {
        self.inner.tiers()
    }
    fn mem_telemetry(&mut self) -> Option<&mut dyn MemTelemetry> {
        self.inner.mem_telemetry()
    }
    fn phys_addr(&self, va: u64) -> Option<u64> {
        self.inner.phys_addr(va)
    }
    fn cost(&self) -> &CostCounters {
        self.inner.cost()
    }
    fn cost_mut(&mut self) -> &mut CostCounters {
        self.inner.cost_mut()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: probe_trace EXPERIMENT.toml exact|stat SEED [MONITOR]");
        std::process::exit(2);
    }
    let path = &args[1];
    let text = std::fs::read_to_string(path).expect("readable file");
    let base = Path::new(path).parent().unwrap_or(Path::new("."));
    let mut exp = match parse_experiment(&text, path, base, Format::Toml) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    exp.machine.engine = match args[2].as_str() {
        "exact" => EngineKind::Exact,
        "stat" => EngineKind::Stat,
        other => panic!("engine {other}: exact or stat"),
    };
    exp.seed = args[3].parse().expect("a seed");
    let index = match args.get(4) {
        Some(name) => exp
            .monitors
            .iter()
            .position(|m| &m.name == name)
            .expect("a monitor of the file"),
        None => 0,
    };
    let (mut engine, mut monitor) = build::monitor(&exp, index).expect("engine and monitor");
    let spec = &exp.workload.spec;
    // Per phase: the mapped ranges of the regions its patterns access.
    let mappings = engine.as_machine().mappings().to_vec();
    let range_of = |name: &str| {
        mappings
            .iter()
            .find(|m| m.name == format!("heap:{name}"))
            .expect("every region is mapped")
            .range
    };
    let active: Vec<Vec<AddrRange>> = spec
        .phases
        .iter()
        .map(|ph| ph.patterns.iter().map(|p| range_of(&p.region)).collect())
        .collect();
    let cycle = spec.phases_duration();
    let phase_at = |t: Nanos| {
        let mut x = t % cycle;
        for (i, ph) in spec.phases.iter().enumerate() {
            if x < ph.duration.0 {
                return i;
            }
            x -= ph.duration.0;
        }
        spec.phases.len() - 1
    };
    let ages: Vec<String> = ["act", "oth"]
        .iter()
        .flat_map(|c| {
            AGE_NAMES
                .iter()
                .map(move |a| format!("c_{c}_{a}\tb_{c}_{a}"))
        })
        .collect();
    println!(
        "end_s\tphase\tregions\tregions_active\thot_regions\tclears\tbits\t\
         clears_act\tbits_act\treads_act\tset_act\tclears_oth\tbits_oth\treads_oth\tset_oth\t{}\t\
         max_nr\tsmall_regions\tnr0\tnr1\tnr2\tnr3\tnr4p",
        ages.join("\t")
    );
    let mut counts = [Counts::default(); 2];
    let mut last_clear = HashMap::new();
    loop {
        let t = monitor.next_wakeup();
        if t > exp.duration_ns {
            break;
        }
        engine.advance_to(t);
        let ph = phase_at(t);
        let snapshot = monitor.wake(&mut Recorder {
            inner: engine.as_machine(),
            active: &active[ph],
            counts: &mut counts,
            last_clear: &mut last_clear,
        });
        let Some(s) = snapshot else { continue };
        engine.take_truth();
        // The phase the window mostly ran in.
        let wph = phase_at(s.end.saturating_sub(1));
        let regions_active = s
            .regions
            .iter()
            .filter(|r| {
                let rr = AddrRange::new(r.start, r.end);
                active[wph].iter().any(|a| a.overlap(&rr) > 0)
            })
            .count();
        let hot = s
            .regions
            .iter()
            .filter(|r| r.nr_accesses >= exp.hot_threshold)
            .count();
        let max_nr = s.regions.iter().map(|r| r.nr_accesses).max().unwrap_or(0);
        let small = s
            .regions
            .iter()
            .filter(|r| r.end - r.start <= 64 << 10)
            .count();
        let mut by_nr = [0u32; 5];
        for r in s.regions.iter().filter(|r| {
            let rr = AddrRange::new(r.start, r.end);
            active[wph].iter().any(|a| a.overlap(&rr) > 0)
        }) {
            by_nr[(r.nr_accesses as usize).min(4)] += 1;
        }
        let by_nr: Vec<String> = by_nr.iter().map(u32::to_string).collect();
        let [a, o] = counts;
        let by_age: Vec<String> = [a, o]
            .iter()
            .flat_map(|c| c.by_age.iter().map(|(n, b)| format!("{n}\t{b}")))
            .collect();
        println!(
            "{:.3}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            s.end as f64 / 1e9,
            wph,
            s.regions.len(),
            regions_active,
            hot,
            a.clears + o.clears,
            a.bits + o.bits,
            a.clears,
            a.bits,
            a.reads,
            a.set,
            o.clears,
            o.bits,
            o.reads,
            o.set,
            by_age.join("\t"),
            max_nr,
            small,
            by_nr.join("\t")
        );
        counts = [Counts::default(); 2];
    }
}
