//! Per-tenant bandwidth telemetry, two ways.
//!
//! NEMO (Listing 3, one telemetry per tenant so each tenant has its own cap): every
//! huge page of the tenant translates to the telemetry's single state, each request adds
//! 1 (one 64 B line; Listing 3's `.operand=1`), a `>=` predicate raises a notification
//! when one controller-channel copy reaches its share of the cap, and a read returns
//! the merged count and resets it (`.read_effect = RESET 0`).
//!
//! MBM-style polling (§5.3's baseline, Intel MBM through PQoS): a per-tenant byte counter
//! the hardware keeps exactly (the paper found MBM within 0.1% on this workload too; its
//! known inaccuracy elsewhere is not modelled), read by a user-space poller whose every
//! poll costs CPU time.

use crate::driver::{Driver, MemTelemetry, NemoConfig, Notification, TelemetryId};
use crate::ops::{Operand, Overflow, Predicate, ReadEffect, UpdateOp};
use crate::pipeline::{
    Filter, Kinds, MaskShift, Notify, Request, TelemetrySpec, Translation, Update,
};
use tierscope_core::{AddrRange, FieldError};

use super::tenants::{Layout, HUGE_PAGE, LINE};

/// Listing 3's rule for one tenant on a device of `device_bytes` (a power of two):
/// the primary key is the huge-page frame over all of memory (`NEMO_ALL_MEM`,
/// `HP_SHIFT`), no sub-region, add 1, notify at `>= per_copy_cap` (none if `None`),
/// reset to 0 on read. One state; the table has an entry per huge page of the device.
pub fn listing3_spec(device_bytes: u64, per_copy_cap: Option<u64>) -> TelemetrySpec {
    let hi = device_bytes.trailing_zeros();
    TelemetrySpec {
        filter: Filter {
            kinds: Kinds::Both,
            range: AddrRange::new(0, device_bytes),
        },
        translation: Translation {
            primary: MaskShift::bits(HUGE_PAGE.trailing_zeros(), hi),
            sub: None,
        },
        update: Update {
            op: UpdateOp::Add,
            operand: Operand::Const(1),
            overflow: Overflow::Wrap,
        },
        notify: per_copy_cap.map(|operand| Notify {
            predicate: Predicate::Ge,
            operand,
        }),
        read_effect: ReadEffect::Reset(0),
        entries: (device_bytes / HUGE_PAGE) as u32,
        states: 1,
        width: 64,
    }
}

/// NEMO's per-tenant bandwidth: the driver with one Listing 3 telemetry per tenant.
#[derive(Debug, Clone)]
pub struct NemoBandwidth {
    driver: Driver,
    ids: Vec<TelemetryId>,
    notes: Vec<Notification>,
    /// Merged state reads issued (each one state).
    pub reads: u64,
    /// Drains that found at least one notification: one interrupt each.
    pub interrupts: u64,
}

impl NemoBandwidth {
    /// Registers one telemetry per tenant of `layout` and maps its huge pages to its
    /// state. `caps[t]` is tenant `t`'s cap in requests per read window over all
    /// copies; the predicate fires when one copy reaches `ceil(cap / copies)`: with fine
    /// interleaving every copy sees an equal slice (§3.1, "alerts thus act as hints").
    pub fn new(
        config: NemoConfig,
        device_bytes: u64,
        layout: &Layout,
        caps: &[Option<u64>],
    ) -> Result<Self, FieldError> {
        let copies = (config.interleave.controllers() * config.interleave.channels()) as u64;
        let mut driver = Driver::new(config);
        let mut ids = Vec::with_capacity(layout.tenants());
        for (t, cap) in caps.iter().enumerate().take(layout.tenants()) {
            let spec = listing3_spec(device_bytes, cap.map(|c| c.div_ceil(copies)));
            let id = driver
                .register(&spec)
                .map_err(|e| e.under(&format!("tenants[{t}].telemetry")))?;
            for &frame in layout.frames(t) {
                driver.set_translation(id, frame, 0).map_err(|e| {
                    FieldError::new(format!("tenants[{t}].huge_pages"), e.to_string())
                })?;
            }
            ids.push(id);
        }
        Ok(NemoBandwidth {
            driver,
            ids,
            notes: Vec::with_capacity(caps.len() * copies as usize),
            reads: 0,
            interrupts: 0,
        })
    }

    /// A request reaching the controllers (the hardware side).
    #[inline]
    pub fn access(&mut self, req: &Request) {
        self.driver.access(req);
    }

    /// Tenant `t`'s requests since its last read, merged over every copy; resets it.
    pub fn read(&mut self, t: usize) -> u64 {
        self.reads += 1;
        self.driver
            .read(self.ids[t], 0)
            .expect("the telemetry and its state 0 exist")
    }

    /// The interrupt handler: marks in `flagged` the tenants whose predicate held since
    /// the last drain; true if any did (one interrupt).
    pub fn drain(&mut self, flagged: &mut [bool]) -> bool {
        self.notes.clear();
        self.driver.drain_notifications(&mut self.notes);
        flagged.fill(false);
        for n in &self.notes {
            if let Some(t) = self.ids.iter().position(|&id| id == n.telemetry) {
                flagged[t] = true;
            }
        }
        let any = !self.notes.is_empty();
        self.interrupts += any as u64;
        any
    }
}

/// MBM-style per-tenant counters (bytes) and a poller that reads their deltas.
#[derive(Debug, Clone)]
pub struct Mbm {
    counters: Vec<u64>,
    last: Vec<u64>,
    pub polls: u64,
}

impl Mbm {
    pub fn new(tenants: usize) -> Self {
        Mbm {
            counters: vec![0; tenants],
            last: vec![0; tenants],
            polls: 0,
        }
    }

    /// The hardware counts `requests` lines of tenant `t`.
    #[inline]
    pub fn count(&mut self, t: usize, requests: u64) {
        self.counters[t] += requests * LINE;
    }

    /// One poll: every tenant's bytes since the previous poll into `out`.
    pub fn poll(&mut self, out: &mut [u64]) {
        self.polls += 1;
        for ((o, c), l) in out.iter_mut().zip(&self.counters).zip(self.last.iter_mut()) {
            *o = c - *l;
            *l = *c;
        }
    }
}

/// CPU time of MBM polling as a share of one core: `polls x cost` over `seconds`. The
/// cost per poll is a constant, so the share scales as 1 / interval.
pub fn mbm_cpu_share(polls: u64, poll_cost_s: f64, seconds: f64) -> f64 {
    polls as f64 * poll_cost_s / seconds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interleave::Interleave;
    use crate::noisy::tenants::{Stream, Tenant, Walk};
    use tierscope_core::rng::Rng;

    fn tenant(walk: Walk, pages: u64) -> Tenant {
        Tenant {
            name: "t".into(),
            huge_pages: pages,
            demand: 1.0,
            write_share: 0.3,
            walk,
            jitter: 0.0,
        }
    }

    /// 2 controllers x 2 channels at 256 B: a tenant's lines spread over 4 copies.
    fn nemo_config() -> NemoConfig {
        NemoConfig {
            interleave: Interleave::new(2, 2, 256).unwrap(),
            ..NemoConfig::prototype()
        }
    }

    #[test]
    fn nemo_counts_equal_the_brute_force_byte_sum() {
        let device = 1u64 << 30; // 512 huge pages
        let layout = Layout::new(&[40, 25, 10], 512).unwrap();
        let mut nemo = NemoBandwidth::new(nemo_config(), device, &layout, &[None; 3]).unwrap();
        let walks = [Walk::Random, Walk::Sequential, Walk::Random];
        let mut streams: Vec<Stream> = (0..3)
            .map(|t| Stream::new(&tenant(walks[t], 1), Rng::new(t as u64 + 7)))
            .collect();
        let mut rng = Rng::new(99);
        let mut truth = [0u64; 3];
        let mut measured = [0u64; 3];
        for round in 0..5 {
            for _ in 0..20_000 {
                // Tenants interleave in a random order; the oracle adds bytes per owner,
                // found by searching the owners' frame lists.
                let t = rng.below(3) as usize;
                let r = streams[t].next(layout.frames(t));
                let owner = (0..3)
                    .find(|&o| layout.frames(o).contains(&(r.addr / HUGE_PAGE)))
                    .unwrap();
                truth[owner] += r.bytes as u64;
                nemo.access(&r);
            }
            for (t, m) in measured.iter_mut().enumerate() {
                *m += nemo.read(t) * LINE;
            }
            assert_eq!(measured, truth, "after round {round}");
        }
        assert_eq!(nemo.reads, 15);
    }

    #[test]
    fn a_tenant_over_its_cap_notifies_and_one_under_it_does_not() {
        let device = 1u64 << 30;
        let layout = Layout::new(&[8, 8], 512).unwrap();
        // Cap of 4000 requests per window over 4 copies: each copy fires at 1000.
        let mut nemo =
            NemoBandwidth::new(nemo_config(), device, &layout, &[Some(4000), Some(4000)]).unwrap();
        let mut over = Stream::new(&tenant(Walk::Sequential, 8), Rng::new(1));
        let mut under = Stream::new(&tenant(Walk::Sequential, 8), Rng::new(2));
        // Sequential lines at 256 B interleave rotate over the 4 copies in chunks of 4
        // lines: 3984 requests are 996 chunks, 249 per copy, 996 lines on every copy:
        // none reaches 1000 (3996 would not do: chunks 0..999 give copies 0-2 a 250th).
        for _ in 0..3984 {
            nemo.access(&under.next(layout.frames(1)));
        }
        let mut flagged = [false; 2];
        assert!(!nemo.drain(&mut flagged));
        assert_eq!(flagged, [false, false]);
        // 4400 requests of the other tenant: 1100 chunks, 1100 lines per copy >= 1000.
        for _ in 0..4400 {
            nemo.access(&over.next(layout.frames(0)));
        }
        assert!(nemo.drain(&mut flagged));
        assert_eq!(flagged, [true, false]);
        assert_eq!(nemo.interrupts, 1);
        // Read resets the count: the next window starts below the cap again.
        assert_eq!(nemo.read(0), 4400);
        assert_eq!(nemo.read(1), 3984);
        // 400 more: 100 per copy.
        for _ in 0..400 {
            nemo.access(&over.next(layout.frames(0)));
        }
        assert!(!nemo.drain(&mut flagged));
    }

    #[test]
    fn mbm_polls_deltas_and_its_cost_scales_as_one_over_the_interval() {
        let mut m = Mbm::new(2);
        let mut out = [0; 2];
        m.count(0, 10);
        m.count(1, 1);
        m.poll(&mut out);
        assert_eq!(out, [640, 64]);
        m.count(0, 2);
        m.poll(&mut out);
        assert_eq!(out, [128, 0]);
        assert_eq!(m.polls, 2);
        // 10 s at 1, 10, 100 ms: 10,000, 1,000, 100 polls of 320 us.
        let share = |interval_s: f64| {
            let polls = (10.0 / interval_s).round() as u64;
            mbm_cpu_share(polls, 320e-6, 10.0)
        };
        assert!((share(1e-3) - 0.32).abs() < 1e-12);
        assert!((share(1e-2) - 0.032).abs() < 1e-12);
        assert!((share(1e-1) - 0.0032).abs() < 1e-12);
    }
}
