//! Does this host set a cleared ACCESSED bit again when the guest touches the page again,
//! without a TLB flush? On bare metal with EPT/NPT the hardware walker does as soon as the
//! translation leaves the TLB; under a shadow-paging hypervisor (this host's PVM) only a
//! shadow fault walks the guest tables, so the bit stays clear (docs/models/KVM.md). Monitors
//! that clear ACCESSED bits and never flush (DAMON, the linear scan) then see each page
//! accessed about once. [`accessed_probe`] measures it once per process.

use crate::{KvmEngine, KvmError, KvmParams};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tierscope_core::workload::parse_masim;
use tierscope_core::{Level, Machine, PageSize};

/// The probe's region: 16 MiB of 4 KiB pages (4096 translations, more than the STLB of
/// current x86 cores holds, so on hardware that re-sets bits a sequential pass misses the
/// TLB on every page), read sequentially one access per page.
const REGION: u64 = 16 << 20;
const PAGES: u64 = REGION / 4096;
/// Pages whose bit is cleared, evenly spread over the region.
pub const PROBED: u32 = 64;
/// Passes of the guest over the whole region after the clear before the bits are read.
pub const PASSES: u64 = 3;
/// The shortest wait after the clear, and the longest for the passes.
const MIN_WAIT: Duration = Duration::from_millis(10);
const MAX_WAIT: Duration = Duration::from_millis(300);

/// The probe's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessedProbe {
    /// Pages whose leaf (PTE) ACCESSED bit was cleared while the guest kept reading them.
    pub pages: u32,
    /// Of those, the bits set again by the guest's reads within `wait_ns`, without a
    /// flush.
    pub rearmed: u32,
    /// Passes of the guest over all its pages (each probed page read once per pass)
    /// between the clear and the check.
    pub passes: u64,
    /// Time between the clear and the check.
    pub wait_ns: u64,
    /// When fewer than all came back: of the rest, those set again after a host flush
    /// (the control: the bits are real and the guest touched the pages).
    pub after_flush: Option<u32>,
    /// How long the probe took, VM start and stop included.
    pub took_ns: u64,
}

impl AccessedProbe {
    /// Whether this host sets cleared ACCESSED bits again without a flush: at least half
    /// of the probed pages' bits came back.
    pub fn rearms_without_flush(&self) -> bool {
        2 * self.rearmed >= self.pages
    }

    /// One line: the answer and its numbers.
    pub fn line(&self) -> String {
        let answer = if self.rearms_without_flush() {
            "sets cleared ACCESSED bits again without a flush"
        } else {
            "does not set cleared ACCESSED bits again without a flush"
        };
        let control = match self.after_flush {
            Some(n) => format!(
                "; {n}/{} of the rest after a host flush",
                self.pages - self.rearmed
            ),
            None => String::new(),
        };
        format!(
            "this host {answer}: {}/{} leaf bits set again by {} guest passes in {:.1} ms{control} \
             (probe took {:.0} ms)",
            self.rearmed,
            self.pages,
            self.passes,
            self.wait_ns as f64 * 1e-6,
            self.took_ns as f64 * 1e-6
        )
    }
}

/// The probe's answer, measured at the first call in this process and kept (an error:
/// why it could not tell, one line).
pub fn accessed_probe() -> &'static Result<AccessedProbe, String> {
    static PROBE: OnceLock<Result<AccessedProbe, String>> = OnceLock::new();
    PROBE.get_or_init(|| run_probe().map_err(|e| e.to_string()))
}

/// Waits until `f` or `timeout`; whether `f` held.
fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if f() {
            return true;
        }
        if t0.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Measures once (about 0.1-0.4 s here; see docs/models/KVM.md).
pub fn run_probe() -> Result<AccessedProbe, KvmError> {
    let t0 = Instant::now();
    let spec = parse_masim(&format!(
        "probe, {REGION}\n\nread\n3600000\nprobe, 0, 4096, 1, ro\n"
    ))
    .map_err(|e| KvmError::Config(format!("probe workload: {e}")))?;
    let mut p = KvmParams::new(&spec);
    p.page_size = PageSize::Base4K;
    p.options.batch = PAGES;
    let mut e = KvmEngine::new(&p)?;
    let base = e.mappings()[0].range.start;
    let probed: Vec<u64> = (0..PROBED as u64)
        .map(|i| base + i * (PAGES / PROBED as u64) * 4096)
        .collect();
    let guest = |e: &KvmEngine| e.accesses();
    let fail = |e: &KvmEngine, what: &str| {
        e.check().err().unwrap_or_else(|| {
            KvmError::Guest(format!(
                "ACCESSED probe: {what} (guest did {} accesses)",
                e.accesses()
            ))
        })
    };
    // Warm-up: every page once (a shadow fault each on this host), then every probed
    // bit is set.
    if !wait_for(Duration::from_secs(3), || guest(&e) >= PAGES) {
        return Err(fail(&e, "the guest did not read its pages within 3 s"));
    }
    let all_set = wait_for(Duration::from_secs(1), || {
        probed
            .iter()
            .all(|&va| e.accessed(Level::Pte, va) == Some(true))
    });
    if !all_set {
        return Err(fail(&e, "the probed pages' ACCESSED bits were not set"));
    }
    for &va in &probed {
        e.test_and_clear_accessed(Level::Pte, va);
    }
    let cleared = Instant::now();
    let n0 = guest(&e);
    wait_for(MAX_WAIT, || {
        cleared.elapsed() >= MIN_WAIT && guest(&e) >= n0 + PASSES * PAGES
    });
    let passes = (guest(&e) - n0) / PAGES;
    let wait_ns = cleared.elapsed().as_nanos() as u64;
    let rest: Vec<u64> = probed
        .iter()
        .copied()
        .filter(|&va| e.accessed(Level::Pte, va) != Some(true))
        .collect();
    let rearmed = PROBED - rest.len() as u32;
    if passes == 0 {
        return Err(fail(
            &e,
            "the guest did not pass over its pages after the clear",
        ));
    }
    let mut after_flush = None;
    if !rest.is_empty() {
        e.host_flush();
        wait_for(Duration::from_secs(1), || {
            rest.iter()
                .all(|&va| e.accessed(Level::Pte, va) == Some(true))
        });
        let back = rest
            .iter()
            .filter(|&&va| e.accessed(Level::Pte, va) == Some(true))
            .count() as u32;
        after_flush = Some(back);
        if 2 * back < rest.len() as u32 {
            return Err(KvmError::Guest(format!(
                "ACCESSED probe: inconclusive: {rearmed}/{PROBED} bits set again without a \
                 flush and only {back}/{} of the rest after one",
                rest.len()
            )));
        }
    }
    e.check()?;
    drop(e);
    Ok(AccessedProbe {
        pages: PROBED,
        rearmed,
        passes,
        wait_ns,
        after_flush,
        took_ns: t0.elapsed().as_nanos() as u64,
    })
}
