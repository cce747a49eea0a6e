//! NEMO's second use case (paper §5.2, Figure 7b): how soon MEMTIS's skewness score finds
//! the huge pages worth splitting, fed by PEBS samples (MEMTIS-PEBS) or by NEMO's
//! per-base-page counters swept over the heap, 16 huge pages per pipeline and 7
//! pipelines reprogrammed every 500 ms (MEMTIS-NEMO, Listing 1 with the multiplexer).
//!
//! Readings (docs/NEMO.md, "Use case 2"):
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
use crate::run::RunError;
use std::collections::BTreeMap;
use tierscope_core::memtel::{
    Filter, Kinds, MaskShift, Operand, Overflow, ReadEffect, TelemetrySpec, Translation, Update,
    UpdateOp,
};
use tierscope_core::rng::Rng;
use tierscope_core::{AddrRange, Capabilities, Capability, CostCounters, Engine, Nanos};
use tierscope_monitors::registry::Truth;
use tierscope_monitors::MonitorConfig;
use tierscope_nemo::Multiplexer;
use tierscope_tiering::policy::counts::PageCounts;
use tierscope_tiering::policy::memtis::skew_buckets;

const HUGE: u64 = 2 << 20;
const BASE: u64 = 4096;

#[derive(Debug, Clone)]
pub struct ThpSplitOptions {
    /// The fast tier's share of the heap (1:8 is 1/9).
    pub fast_share: f64,
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
            fast_share: 1.0 / 9.0,
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
    pub technique: &'static str,
    pub candidates: usize,
    /// Simulated seconds until 95 % of the candidates were identified (None: never).
    pub found_95_s: Option<f64>,
    /// Share of the candidates identified by the end.
    pub found_end: f64,
    /// Pages given a non-zero bucket that are not candidates, at the end.
    pub false_candidates: usize,
    /// The technique's CPU, % of one core (docs/COST_MODEL.md).
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
        update: Update {
            op: UpdateOp::Add,
            operand: Operand::Const(1),
            overflow: Overflow::Wrap,
        },
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

/// Candidates and the bucket of every page, from the expected per-4 KiB counts of the
/// whole run.
fn truth(
    exp: &Experiment,
    capacity: u64,
    opts: &ThpSplitOptions,
) -> Result<BTreeMap<u64, usize>, RunError> {
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
    Ok(
        skew_buckets(&normalised(&pc, opts.cooling_samples), HUGE, capacity)
            .into_iter()
            .filter(|&(_, idx)| idx > 0)
            .collect(),
    )
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
struct Found {
    /// Candidate block -> its true bucket.
    candidates: BTreeMap<u64, usize>,
    /// When each candidate's bucket was first estimated within one of the truth.
    first: BTreeMap<u64, Nanos>,
    /// Blocks the last scoring gave a non-zero bucket.
    last_flagged: Vec<u64>,
    /// Pages per bucket at the last scoring.
    buckets: Vec<usize>,
    pages: usize,
    total: u64,
}

impl Found {
    fn score(&mut self, counts: &PageCounts, capacity: u64, now: Nanos) {
        self.last_flagged.clear();
        self.buckets = vec![0; 21];
        self.buckets[0] = self.pages;
        for (block, idx) in skew_buckets(&normalised(counts, self.total), HUGE, capacity) {
            self.buckets[0] -= 1;
            self.buckets[idx] += 1;
            if idx == 0 {
                continue;
            }
            self.last_flagged.push(block);
            if let Some(&truth) = self.candidates.get(&block) {
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
            technique,
            candidates: n,
            found_95_s: (need > 0 && times.len() >= need).then(|| times[need - 1] as f64 * 1e-9),
            found_end: if n == 0 {
                0.0
            } else {
                times.len() as f64 / n as f64
            },
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

fn memtis_pebs(
    exp: &Experiment,
    capacity: u64,
    found: &mut Found,
    opts: &ThpSplitOptions,
) -> Result<f64, RunError> {
    let config = MonitorConfig::preset("pebs-memtis").expect("registered preset");
    let mut e = build::engine(exp, config.requires(), Truth::Accessed)?;
    let mut mon = config.build(Rng::for_stream(exp.seed, "monitor/pebs-memtis"), &exp.cost);
    let mut counts = PageCounts::default();
    let mut next_score = opts.step;
    loop {
        let t = mon.next_wakeup();
        if t > exp.duration_ns {
            break;
        }
        e.advance_to(t);
        if let Some(s) = mon.wake(e.as_machine()) {
            counts.add(&s);
            if counts.since_cooling >= opts.cooling_samples {
                counts.cool();
            }
        }
        if t >= next_score {
            found.score(&counts, capacity, t);
            next_score += opts.step;
        }
    }
    Ok(exp.cost.cpu_percent(e.as_machine().cost(), exp.duration_ns))
}

fn memtis_nemo(
    exp: &Experiment,
    capacity: u64,
    found: &mut Found,
    opts: &ThpSplitOptions,
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
    let mut hot_mux = Multiplexer::new(nemo, vec![hot_id], keys.clone()).expect("keys fit");
    let mut mux = Multiplexer::new(nemo, ids, keys).expect("keys fit");
    let va_of: BTreeMap<u64, u64> = pages.iter().map(|&(va, k)| (k, va)).collect();
    let mut counts = PageCounts::default();
    let mut cost = CostCounters::default();
    cost.nemo_translation_writes += (mux.programmed().len() + hot_mux.programmed().len()) as u64;
    let mut next_score = opts.step;
    let mut t = 0;
    while t + opts.period <= exp.duration_ns {
        t += opts.period;
        e.advance_to(t);
        let nemo = e
            .as_machine()
            .mem_telemetry()
            .expect("capability requested");
        let before = (mux.programmed().len() + hot_mux.programmed().len()) as u64;
        hot_mux.scan(nemo, |_, _| {}).expect("valid keys");
        mux.scan(nemo, |key, states| {
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
        let after = (mux.programmed().len() + hot_mux.programmed().len()) as u64;
        cost.nemo_state_reads +=
            mux.programmed().len() as u64 * 512 + hot_mux.programmed().len() as u64;
        cost.nemo_translation_writes += before + after;
        if t >= next_score {
            found.score(&counts, capacity, t);
            next_score += opts.step;
        }
    }
    Ok(exp.cost.cpu_percent(&cost, exp.duration_ns))
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
    let capacity = ((heap as f64 * opts.fast_share) as u64).max(HUGE);
    let candidates = truth(exp, capacity, opts)?;
    let pages = (heap / HUGE) as usize;
    let mut buckets = vec![0; 21];
    buckets[0] = pages - candidates.len();
    for &b in candidates.values() {
        buckets[b] += 1;
    }
    let mut rows = vec![ThpSplitRow {
        technique: "truth",
        candidates: candidates.len(),
        found_95_s: None,
        found_end: 1.0,
        false_candidates: 0,
        cpu_percent: 0.0,
        buckets,
    }];
    let fresh = |c: &BTreeMap<u64, usize>| Found {
        candidates: c.clone(),
        first: BTreeMap::new(),
        last_flagged: vec![],
        buckets: vec![0; 21],
        pages,
        total: opts.cooling_samples,
    };
    let mut found = fresh(&candidates);
    let cpu = memtis_pebs(exp, capacity, &mut found, opts)?;
    rows.push(found.row("memtis-pebs", cpu));
    let mut found = fresh(&candidates);
    let cpu = memtis_nemo(exp, capacity, &mut found, opts)?;
    rows.push(found.row("memtis-nemo", cpu));
    Ok(rows)
}
