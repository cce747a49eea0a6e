//! NEMO's second use case (paper §5.2, Figure 7b): how soon MEMTIS's skewness score finds
//! the huge pages worth splitting, fed by PEBS samples (MEMTIS-PEBS) or by NEMO's
//! per-base-page counters swept over the heap, 16 huge pages per pipeline and 7
//! pipelines reprogrammed every 500 ms (MEMTIS-NEMO, Listing 1 with the multiplexer).
//!
//! Readings (docs/techniques/NEMO.md, "Use case 2"):
//! - A **split candidate** is a huge page whose MEMTIS skewness bucket is non-zero on the
//!   truth: the per-4 KiB access counts of the whole run (a counter per base page read
//!   once at the end: the statistical engine's Poisson draw around the workload's
//!   densities), scored by `tierscope_tiering::policy::memtis::skew_buckets` (MEMTIS's
//!   formula and its base-page threshold for the fast tier's capacity).
//! - A technique **identifies** a candidate the first time its own counts put the page
//!   within one bucket of the truth, evaluated every `step`. MEMTIS-PEBS's counts are its
//!   samples with MEMTIS's cooling; MEMTIS-NEMO's are each page's per-base-page counts
//!   from the last period it was tracked. MEMTIS's buckets depend on the counts' scale,
//!   so the truth and every estimate are scaled to one cooling period of samples
//!   (`cooling_samples`) in all before they are scored.
//! - MEMTIS's active/inactive LRU lists are not modelled: NEMO sweeps every huge page
//!   round-robin (§6.1's uniform coverage, the worst case).

use crate::build;
use crate::config::{EngineKind, Experiment};
use crate::drive::{drive, Participant};
use crate::result::Progress;
use crate::run::RunError;
use std::collections::BTreeMap;
use tierscope_core::memtel::{
    Filter, Kinds, MaskShift, ReadEffect, TelemetrySpec, Translation, Update,
};
use tierscope_core::rng::Rng;
use tierscope_core::{AddrRange, Capabilities, Capability, CostCounters, Engine, Monitor, Nanos};
use tierscope_monitors::nemo::{NEMO_STATE_READS, NEMO_TRANSLATION_WRITES};
use tierscope_monitors::registry::Truth;
use tierscope_monitors::MonitorConfig;
use tierscope_nemo::Multiplexer;
use tierscope_tiering::policy::counts::PageCounts;
use tierscope_tiering::policy::memtis::skew_buckets;

const HUGE: u64 = 2 << 20;
const BASE: u64 = 4096;

#[derive(Debug, Clone)]
pub struct ThpSplitOptions {
    /// The fast tiers' shares of the heap to score against (1:8 is 1/9): the
    /// techniques run once, their counts are scored for each.
    pub fast_shares: Vec<f64>,
    /// How often the techniques' counts are scored.
    pub step: Nanos,
    /// MEMTIS-NEMO: skewness pipelines, huge pages per pipeline, reprogramming period.
    pub skew_pipelines: u32,
    pub pages_per_pipeline: u32,
    pub period: Nanos,
    /// MEMTIS's samples between coolings (2,000,000).
    pub cooling_samples: u64,
}

impl Default for ThpSplitOptions {
    fn default() -> Self {
        ThpSplitOptions {
            fast_shares: vec![1.0 / 3.0, 1.0 / 9.0],
            step: 5_000_000_000,
            skew_pipelines: 7,
            pages_per_pipeline: 16,
            period: 500_000_000,
            cooling_samples: 2_000_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ThpSplitRow {
    /// The fast tier's share of the heap this row was scored for.
    pub fast_share: f64,
    pub technique: &'static str,
    pub candidates: usize,
    /// Simulated seconds until 95 % of the candidates were identified (None: never).
    pub found_95_s: Option<f64>,
    /// Share of the candidates identified by the end.
    pub found_end: f64,
    /// Share of the candidates whose bucket equals the truth's at the last scoring.
    pub exact_end: f64,
    /// Pages given a non-zero bucket that are not candidates, at the end.
    pub false_candidates: usize,
    /// The technique's CPU, % of one core (docs/models/COST_MODEL.md).
    pub cpu_percent: f64,
    /// Pages per skewness bucket (0..=20) at the end (Figure 7a); the truth's row has
    /// the candidates' buckets (bucket 0: the pages that are not candidates).
    pub buckets: Vec<usize>,
}

/// Per-4 KiB counters for `pages` huge pages from physical address 0 (sub-regions of the
/// huge-page key, reset on read): Listing 1's telemetry.
fn basepage_spec(table_pages: u64, states: u64) -> TelemetrySpec {
    let bits = table_pages.next_power_of_two().trailing_zeros();
    TelemetrySpec {
        filter: Filter {
            kinds: Kinds::Both,
            range: AddrRange::new(0, table_pages.next_power_of_two() * HUGE),
        },
        translation: Translation {
            primary: MaskShift::bits(21, 21 + bits),
            sub: Some(MaskShift::bits(12, 21)),
        },
        update: Update::COUNT,
        notify: None,
        read_effect: ReadEffect::Reset(0),
        entries: 1 << bits,
        states: states as u32,
        width: 64,
    }
}

/// The heap's huge pages as (virtual start, physical key).
fn huge_pages(e: &mut dyn Engine) -> Vec<(u64, u64)> {
    let heap = e.heap();
    let m = e.as_machine();
    let mut out = vec![];
    let mut va = heap.start.next_multiple_of(HUGE);
    while va + HUGE <= heap.end {
        if let Some(pa) = m.phys_addr(va) {
            out.push((va, pa >> 21));
        }
        va += HUGE;
    }
    out
}

/// Every base page's count over the whole run, scaled to one cooling period.
fn truth(exp: &Experiment, opts: &ThpSplitOptions) -> Result<PageCounts, RunError> {
    let caps = Capabilities::of(&[Capability::MemTelemetry]);
    let mut e = build::engine(exp, caps, Truth::Accessed)?;
    let pages = huge_pages(e.as_mut());
    let spec = basepage_spec(pages.len() as u64, pages.len() as u64 * 512);
    let nemo = e.as_machine().mem_telemetry().expect("stat engine has it");
    let t = nemo
        .register(&spec)
        .map_err(|err| RunError::Engine(format!("truth telemetry: {err}")))?;
    for (i, &(_, key)) in pages.iter().enumerate() {
        nemo.set_translation(t, key, i as u64)
            .map_err(|err| RunError::Engine(format!("truth telemetry: {err}")))?;
    }
    e.advance_to(exp.duration_ns);
    let nemo = e.as_machine().mem_telemetry().expect("stat engine has it");
    let mut counts = vec![0u64; pages.len() * 512];
    for (i, c) in counts.iter_mut().enumerate() {
        *c = nemo.read(t, i as u64).expect("index within the states");
    }
    let mut pc = PageCounts::default();
    for (p, &(va, _)) in pages.iter().enumerate() {
        for j in 0..512 {
            let s = va + j as u64 * BASE;
            pc.pages.insert(s, (s + BASE, counts[p * 512 + j]));
        }
    }
    Ok(normalised(&pc, opts.cooling_samples))
}

/// The split candidates for a fast tier of `capacity` bytes and their true buckets.
fn candidates(truth: &PageCounts, capacity: u64) -> BTreeMap<u64, usize> {
    skew_buckets(truth, HUGE, capacity)
        .into_iter()
        .filter(|&(_, idx)| idx > 0)
        .collect()
}

/// `counts` scaled to `total` samples in all: MEMTIS's buckets depend on the counts'
/// scale, so every estimate is scored at one cooling period's worth of samples.
fn normalised(counts: &PageCounts, total: u64) -> PageCounts {
    let sum: u64 = counts.pages.values().map(|v| v.1).sum();
    let scale = total as f64 / sum.max(1) as f64;
    let mut out = PageCounts::default();
    for (&s, &(e, c)) in &counts.pages {
        let c = (c as f64 * scale).round() as u64;
        if c > 0 {
            out.pages.insert(s, (e, c));
        }
    }
    out
}

/// Identification bookkeeping shared by both techniques.
#[derive(Clone)]
struct Found {
    /// Candidate block -> its true bucket.
    candidates: BTreeMap<u64, usize>,
    /// When each candidate's bucket was first estimated within one of the truth.
    first: BTreeMap<u64, Nanos>,
    /// Blocks the last scoring gave a non-zero bucket.
    last_flagged: Vec<u64>,
    /// Pages per bucket at the last scoring.
    buckets: Vec<usize>,
    /// Candidates whose bucket equals the truth's at the last scoring.
    exact: usize,
    pages: usize,
    total: u64,
    fast_share: f64,
    capacity: u64,
}

impl Found {
    fn score(&mut self, counts: &PageCounts, now: Nanos) {
        let capacity = self.capacity;
        self.last_flagged.clear();
        self.buckets = vec![0; 21];
        self.buckets[0] = self.pages;
        self.exact = 0;
        for (block, idx) in skew_buckets(&normalised(counts, self.total), HUGE, capacity) {
            self.buckets[0] -= 1;
            self.buckets[idx] += 1;
            if idx == 0 {
                continue;
            }
            self.last_flagged.push(block);
            if let Some(&truth) = self.candidates.get(&block) {
                self.exact += (idx == truth) as usize;
                if idx.abs_diff(truth) <= 1 {
                    self.first.entry(block).or_insert(now);
                }
            }
        }
    }

    fn row(&self, technique: &'static str, cpu_percent: f64) -> ThpSplitRow {
        let n = self.candidates.len();
        let mut times: Vec<Nanos> = self.first.values().copied().collect();
        times.sort_unstable();
        let need = (n * 95).div_ceil(100);
        ThpSplitRow {
            fast_share: self.fast_share,
            technique,
            candidates: n,
            found_95_s: (need > 0 && times.len() >= need).then(|| times[need - 1] as f64 * 1e-9),
            found_end: if n == 0 {
                0.0
            } else {
                times.len() as f64 / n as f64
            },
            exact_end: self.exact as f64 / n.max(1) as f64,
            false_candidates: self
                .last_flagged
                .iter()
                .filter(|b| !self.candidates.contains_key(b))
                .count(),
            cpu_percent,
            buckets: self.buckets.clone(),
        }
    }
}

/// MEMTIS's counts scored every `step`, checked when the counts change (the first wake-up
/// at or after each step).
struct Scoring<'a> {
    found: &'a mut [Found],
    step: Nanos,
    next: Nanos,
}

impl Scoring<'_> {
    fn at(&mut self, counts: &PageCounts, now: Nanos) {
        if now >= self.next {
            for f in self.found.iter_mut() {
                f.score(counts, now);
            }
            self.next += self.step;
        }
    }
}

/// MEMTIS-PEBS: the `pebs-memtis` monitor's samples with MEMTIS's cooling.
struct MemtisPebs {
    monitor: Box<dyn Monitor>,
    counts: PageCounts,
    cooling_samples: u64,
}

impl Participant<Scoring<'_>> for MemtisPebs {
    fn next_wakeup(&self) -> Nanos {
        self.monitor.next_wakeup()
    }

    fn wake(
        &mut self,
        e: &mut dyn Engine,
        scoring: &mut Scoring,
        now: Nanos,
    ) -> Result<(), RunError> {
        if let Some(s) = self.monitor.wake(e.as_machine()) {
            self.counts.add(&s);
            if self.counts.since_cooling >= self.cooling_samples {
                self.counts.cool();
            }
        }
        scoring.at(&self.counts, now);
        Ok(())
    }
}

/// MEMTIS-PEBS's sampler: the experiment's first `pebs` monitor (so a sensitivity run can
/// set its `period`, which MEMTIS's controller steps along a list of primes from 199 up to
/// hold its sampling thread near 3 % of a core), else the `pebs-memtis` preset.
fn pebs_config(exp: &Experiment) -> MonitorConfig {
    exp.monitors
        .iter()
        .find(|m| m.config.kind() == "pebs")
        .map(|m| m.config.clone())
        .unwrap_or_else(|| MonitorConfig::preset("pebs-memtis").expect("registered preset"))
}

fn memtis_pebs(
    exp: &Experiment,
    found: &mut [Found],
    opts: &ThpSplitOptions,
    progress: &Progress,
) -> Result<f64, RunError> {
    let config = pebs_config(exp);
    let mut e = build::engine(exp, config.requires(), Truth::Accessed)?;
    let mut pebs = MemtisPebs {
        monitor: config.build(Rng::for_stream(exp.seed, "monitor/pebs-memtis"), &exp.cost),
        counts: PageCounts::default(),
        cooling_samples: opts.cooling_samples,
    };
    let mut scoring = Scoring {
        found,
        step: opts.step,
        next: opts.step,
    };
    let mut parts: [&mut dyn Participant<Scoring>; 1] = [&mut pebs];
    drive(
        e.as_mut(),
        &mut parts,
        &mut scoring,
        exp.duration_ns,
        progress,
        None,
    )?;
    Ok(exp.cost.cpu_percent(e.as_machine().cost(), exp.duration_ns))
}

/// MEMTIS-NEMO: every `period`, the multiplexers sweep the skewness pipelines over the next
/// huge pages (and the hotness pipeline, read for its cost) and keep each page's per-4 KiB
/// counts from the last period it was tracked.
struct MemtisNemo {
    hot_mux: Multiplexer,
    mux: Multiplexer,
    va_of: BTreeMap<u64, u64>,
    counts: PageCounts,
    cost: CostCounters,
    period: Nanos,
    next: Nanos,
}

impl Participant<Scoring<'_>> for MemtisNemo {
    fn next_wakeup(&self) -> Nanos {
        self.next
    }

    fn wake(
        &mut self,
        e: &mut dyn Engine,
        scoring: &mut Scoring,
        now: Nanos,
    ) -> Result<(), RunError> {
        let nemo = e
            .as_machine()
            .mem_telemetry()
            .expect("capability requested");
        let writes_before = self.mux.writes() + self.hot_mux.writes();
        self.hot_mux.scan(nemo, |_, _| {}).expect("valid keys");
        let (va_of, counts) = (&self.va_of, &mut self.counts);
        self.mux
            .scan(nemo, |key, states| {
                let va = va_of[&key];
                for (j, &c) in states.iter().enumerate() {
                    let s = va + j as u64 * BASE;
                    if c > 0 {
                        counts.pages.insert(s, (s + BASE, c));
                    } else {
                        counts.pages.remove(&s);
                    }
                }
            })
            .expect("valid keys");
        self.cost.charge(
            &NEMO_STATE_READS,
            self.mux.programmed().len() as u64 * 512 + self.hot_mux.programmed().len() as u64,
        );
        self.cost.charge(
            &NEMO_TRANSLATION_WRITES,
            self.mux.writes() + self.hot_mux.writes() - writes_before,
        );
        scoring.at(&self.counts, now);
        self.next += self.period;
        Ok(())
    }
}

fn memtis_nemo(
    exp: &Experiment,
    found: &mut [Found],
    opts: &ThpSplitOptions,
    progress: &Progress,
) -> Result<f64, RunError> {
    let caps = Capabilities::of(&[Capability::MemTelemetry]);
    let mut e = build::engine(exp, caps, Truth::Accessed)?;
    let pages = huge_pages(e.as_mut());
    let per = opts.pages_per_pipeline as u64;
    let spec = basepage_spec(pages.len() as u64, per * 512);
    // The hotness pipeline (one add-1 counter per huge page) that MEMTIS-NEMO reads for
    // its ranking: installed and read for its cost; the skewness score does not use it.
    let mut hot = basepage_spec(pages.len() as u64, (pages.len() as u64).min(8192));
    hot.translation.sub = None;
    tierscope_nemo::NemoConfig::prototype()
        .check_fits(&[vec![hot], vec![spec; opts.skew_pipelines as usize]].concat())
        .map_err(|err| RunError::Engine(format!("MEMTIS-NEMO does not fit: {err}")))?;
    let nemo = e
        .as_machine()
        .mem_telemetry()
        .expect("capability requested");
    let reg = |n: &mut dyn tierscope_core::memtel::MemTelemetry, s| {
        n.register(s)
            .map_err(|err| RunError::Engine(err.to_string()))
    };
    let hot_id = reg(nemo, &hot)?;
    let ids = (0..opts.skew_pipelines)
        .map(|_| reg(nemo, &spec))
        .collect::<Result<Vec<_>, _>>()?;
    let keys: Vec<u64> = pages.iter().map(|p| p.1).collect();
    let hot_mux = Multiplexer::new(nemo, vec![hot_id], keys.clone()).expect("keys fit");
    let mux = Multiplexer::new(nemo, ids, keys).expect("keys fit");
    let mut cost = CostCounters::default();
    cost.charge(&NEMO_TRANSLATION_WRITES, mux.writes() + hot_mux.writes());
    let mut sweep = MemtisNemo {
        hot_mux,
        mux,
        va_of: pages.iter().map(|&(va, k)| (k, va)).collect(),
        counts: PageCounts::default(),
        cost,
        period: opts.period,
        next: opts.period,
    };
    let mut scoring = Scoring {
        found,
        step: opts.step,
        next: opts.step,
    };
    let mut parts: [&mut dyn Participant<Scoring>; 1] = [&mut sweep];
    drive(
        e.as_mut(),
        &mut parts,
        &mut scoring,
        exp.duration_ns,
        progress,
        None,
    )?;
    Ok(exp.cost.cpu_percent(&sweep.cost, exp.duration_ns))
}

/// Runs the comparison on `exp` (statistical engine, a huge-page heap).
pub fn run(exp: &Experiment, opts: &ThpSplitOptions) -> Result<Vec<ThpSplitRow>, RunError> {
    if exp.machine.engine != EngineKind::Stat {
        return Err(RunError::Engine(
            "the THP split use case runs on the statistical engine (its truth is the expected \
             per-4 KiB counts)"
                .into(),
        ));
    }
    let heap = {
        let e = build::engine(exp, Capabilities::default(), Truth::Accessed)?;
        e.heap().len()
    };
    let pages = (heap / HUGE) as usize;
    let truth = truth(exp, opts)?;
    let mut found = vec![];
    let mut truth_rows = vec![];
    for &share in &opts.fast_shares {
        let capacity = ((heap as f64 * share) as u64).max(HUGE);
        let candidates = candidates(&truth, capacity);
        let mut buckets = vec![0; 21];
        buckets[0] = pages - candidates.len();
        for &b in candidates.values() {
            buckets[b] += 1;
        }
        truth_rows.push(ThpSplitRow {
            fast_share: share,
            technique: "truth",
            candidates: candidates.len(),
            found_95_s: None,
            found_end: 1.0,
            exact_end: 1.0,
            false_candidates: 0,
            cpu_percent: 0.0,
            buckets,
        });
        found.push(Found {
            candidates,
            first: BTreeMap::new(),
            last_flagged: vec![],
            buckets: vec![0; 21],
            exact: 0,
            pages,
            total: opts.cooling_samples,
            fast_share: share,
            capacity,
        });
    }
    let mut nemo_found = found.clone();
    // Nothing watches this study's progress or cancels it.
    let progress = Progress::new(0, exp.duration_ns);
    let pebs_cpu = memtis_pebs(exp, &mut found, opts, &progress)?;
    let nemo_cpu = memtis_nemo(exp, &mut nemo_found, opts, &progress)?;
    let mut rows = vec![];
    for (i, truth_row) in truth_rows.into_iter().enumerate() {
        rows.push(truth_row);
        rows.push(found[i].row("memtis-pebs", pebs_cpu));
        rows.push(nemo_found[i].row("memtis-nemo", nemo_cpu));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_experiment, Format};
    use std::path::Path;

    /// A 400 MB Silo-like store (2 M items of 164 B: ~170 huge pages), 20 s.
    fn small() -> Experiment {
        let text = r#"
name = "thp-small"
duration = "20s"
warmup = "0s"
[machine]
engine = "stat"
page_size = "2MiB"
[workload]
rate = "10M/s"
kv = { keys = 2000000, key_size = "64B", value_size = "100B", header = "0B", mix = "ycsb-c", distribution = "scrambled-zipfian", duration = "20s" }
[[monitors]]
preset = "pebs-memtis"
"#;
        parse_experiment(text, "small.toml", Path::new("."), Format::Toml).unwrap()
    }

    #[test]
    fn rows_are_consistent_deterministic_and_nemo_costs_what_it_reads() {
        let exp = small();
        let opts = ThpSplitOptions {
            step: 1_000_000_000,
            fast_shares: vec![1.0 / 9.0],
            ..ThpSplitOptions::default()
        };
        let rows = run(&exp, &opts).unwrap();
        assert_eq!(rows.len(), 3);
        let pages = rows[0].buckets.iter().sum::<usize>();
        let heap = build::engine(&exp, Capabilities::default(), Truth::Accessed)
            .unwrap()
            .heap()
            .len();
        assert_eq!(pages as u64, heap / HUGE);
        for r in &rows {
            // Every page has one bucket; the candidates are the truth's non-zero ones.
            assert_eq!(r.buckets.iter().sum::<usize>(), pages, "{r:?}");
            assert_eq!(r.candidates, pages - rows[0].buckets[0]);
            assert!((0.0..=1.0).contains(&r.found_end) && r.exact_end <= r.found_end + 1e-12);
        }
        assert!(rows[0].candidates > 0);
        // NEMO sweeps all pages every ceil(pages / 112) periods of 0.5 s (2 s here):
        // every candidate has been counted whole several times in 20 s.
        let nemo = &rows[2];
        assert!(nemo.found_end >= 0.95, "{nemo:?}");
        // Its CPU by hand: per period, 112 x 512 skewness states and every page's
        // hotness state read (150 cycles each); translation entries written when first
        // programmed, then each period's clear + set of the skewness batch (200 cycles
        // each); the hotness pipeline holds every page at once, so it is never rewritten.
        let (skew, hot) = (112u64.min(pages as u64), pages as u64);
        let periods = exp.duration_ns / opts.period;
        let reads = periods * (skew * 512 + hot);
        let writes = (skew + hot) + periods * 2 * skew;
        let cycles = reads as f64 * 150.0 + writes as f64 * 200.0;
        let cpu = 100.0 * cycles / (2.1e9 * exp.duration_ns as f64 * 1e-9);
        assert!(
            (nemo.cpu_percent - cpu).abs() < 1e-9,
            "{} vs {cpu}",
            nemo.cpu_percent
        );
        // Same seed, same rows.
        assert_eq!(run(&exp, &opts).unwrap(), rows);
    }

    /// MEMTIS-PEBS samples with the experiment's `pebs` monitor, so its period can be set
    /// (a sensitivity run: MEMTIS's controller raises the period to hold its CPU near 3 %);
    /// ten times the period takes about a tenth of the samples, hence of the CPU.
    #[test]
    fn memtis_pebs_samples_at_the_experiments_period() {
        let period_of = |c: &MonitorConfig| match c {
            MonitorConfig::Pebs(p) => p.period,
            other => panic!("not pebs: {other:?}"),
        };
        let preset = MonitorConfig::preset("pebs-memtis").unwrap();
        let mut exp = small();
        exp.duration_ns = 4_000_000_000;
        assert_eq!(period_of(&pebs_config(&exp)), period_of(&preset));
        let opts = ThpSplitOptions {
            step: 1_000_000_000,
            fast_shares: vec![1.0 / 9.0],
            ..ThpSplitOptions::default()
        };
        let cpu = |exp: &Experiment| run(exp, &opts).unwrap()[1].cpu_percent;
        let base = cpu(&exp);
        if let MonitorConfig::Pebs(p) = &mut exp.monitors[0].config {
            p.period = p.period.map(|x| 10 * x);
        }
        assert_eq!(
            period_of(&pebs_config(&exp)),
            period_of(&preset).map(|x| 10 * x)
        );
        let slow = cpu(&exp);
        assert!(slow > base / 20.0 && slow < base / 5.0, "{slow} vs {base}");
        // Without a pebs monitor, the preset.
        exp.monitors.clear();
        assert_eq!(period_of(&pebs_config(&exp)), period_of(&preset));
    }
}
