//! TPP (Linux's memory tiering with NUMA balancing, `numa_balancing = 2`): promote a page
//! off the top tier when its NUMA hint fault came within the hot threshold of its scan
//! (what a `numa_hint` monitor reports, one scan batch per snapshot), at most
//! `promote_rate` bytes per second (`numa_balancing_promote_rate_limit_MBps`); keep
//! `demote_watermark` of the top tier free by demoting its least recently promoted pages
//! to the slowest tier (kswapd's demotion, `demote_scale_factor` 2 % in the TPP paper).
//!
//! What is modelled rather than Linux's: kswapd picks demotion victims from the inactive
//! LRU list, aged by the pages' accessed bits through reverse mapping; here the victims
//! are the pages promoted longest ago (pages already on the top tier at the start count
//! as the oldest, in address order), since top-tier pages take no hint faults in tiering
//! mode and so report nothing. Promotions within one batch go in address order (Linux:
//! fault order, which the batch's read does not give).

use super::{due_if, Policy, View};
use crate::migration::Move;
use std::collections::{HashMap, VecDeque};
use tierscope_core::units::Size;
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::{FeedKind, PolicyInput, AddrRange, FieldError, Nanos, Snapshot};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TppConfig {
    /// Promotion rate limit, bytes per second (Linux's default 65536 MB/s: no limit in
    /// practice; the migration engine's own limits still apply).
    pub promote_rate: Size,
    /// Share of the top tier kept free by demotion (TPP: 2 %).
    pub demote_watermark: f64,
}

impl Default for TppConfig {
    fn default() -> Self {
        TppConfig {
            promote_rate: Size(65536 << 20),
            demote_watermark: 0.02,
        }
    }
}

impl PolicyTechnique for TppConfig {
    const HELP: &'static str =
        "TPP: promote on a NUMA hint fault within 1 s of the scan, demote the oldest \
         promotions to keep 2% of the fast tier free";

    fn by_name() -> Option<Self> {
        Some(Self::default())
    }

    fn input(&self) -> PolicyInput {
        PolicyInput::Monitor(&[FeedKind::HintFaults])
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        if self.promote_rate.0 == 0 {
            return Err(FieldError::new("promote_rate", "must be positive"));
        }
        if !(0.0..1.0).contains(&self.demote_watermark) {
            return Err(FieldError::new(
                "demote_watermark",
                format!("must be in [0, 1), got {}", self.demote_watermark),
            ));
        }
        Ok(())
    }

    fn policy(&self, _: &PolicyContext) -> Box<dyn Policy> {
        Box::new(Tpp {
            config: self.clone(),
            hot: vec![],
            pending: false,
            last_act: None,
            lru: VecDeque::new(),
            latest: HashMap::new(),
            seq: 0,
            seeded: false,
        })
    }
}

pub struct Tpp {
    config: TppConfig,
    /// Faulted pages of the batches reported since the last act.
    hot: Vec<AddrRange>,
    pending: bool,
    last_act: Option<Nanos>,
    /// Top-tier ranges, oldest first, each with the promotion it came from.
    lru: VecDeque<(AddrRange, u64)>,
    /// Range start -> its latest promotion (older queue entries of it are stale).
    latest: HashMap<u64, u64>,
    seq: u64,
    seeded: bool,
}

impl Tpp {
    fn remember(&mut self, r: AddrRange) {
        self.seq += 1;
        self.latest.insert(r.start, self.seq);
        self.lru.push_back((r, self.seq));
    }
}

impl Policy for Tpp {
    fn observe(&mut self, snapshot: &Snapshot) {
        self.hot.extend(
            snapshot
                .regions
                .iter()
                .filter(|r| r.nr_accesses > 0)
                .map(|r| AddrRange::new(r.start, r.end)),
        );
        self.pending = true;
    }

    fn next_action(&self) -> Nanos {
        due_if(self.pending)
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        self.pending = false;
        if !self.seeded {
            // What started on the top tier is the oldest, in address order.
            self.seeded = true;
            for r in view.runs_on(0) {
                self.remember(r);
            }
        }
        let elapsed = view.now - self.last_act.unwrap_or(0);
        self.last_act = Some(view.now);
        let mut budget =
            (self.config.promote_rate.0 as f64 * elapsed as f64 * 1e-9).min(u64::MAX as f64) as u64;
        let mut promote = vec![];
        let mut need = 0u64;
        for r in std::mem::take(&mut self.hot) {
            let off = view.bytes_off(r, 0);
            if off == 0 || budget == 0 {
                continue;
            }
            let take = off.min(budget);
            budget -= take;
            need += take;
            promote.push(super::head(r, off, take));
        }
        // Demote until the watermark is free with the promotions in place (kswapd also
        // demotes with nothing to promote when the tier is above its watermark).
        let capacity = view.tiers[0].capacity;
        let reserve = (capacity as f64 * self.config.demote_watermark) as u64;
        let mut free = view.room(0);
        let slow = view.slowest();
        while free < reserve + need {
            let Some((r, seq)) = self.lru.pop_front() else {
                break;
            };
            if self.latest.get(&r.start) != Some(&seq) {
                continue;
            }
            self.latest.remove(&r.start);
            let on = view.bytes_on(r, 0);
            if on == 0 {
                continue;
            }
            free += on;
            out.push(Move { range: r, to: slow });
        }
        let mut left = free.saturating_sub(reserve).min(need);
        for r in promote {
            if left == 0 {
                break;
            }
            let off = view.bytes_off(r, 0);
            let take = off.min(left);
            let r = super::head(r, off, take);
            left -= take;
            out.push(Move { range: r, to: 0 });
            self.remember(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::{Placement, RegionReport};

    fn snapshot(hot: &[(u64, u64)]) -> Snapshot {
        Snapshot {
            start: 0,
            end: 1,
            regions: hot
                .iter()
                .map(|&(s, e)| RegionReport {
                    start: s,
                    end: e,
                    nr_accesses: 1,
                    age: 0,
                })
                .collect(),
        }
    }

    fn apply(p: &mut Placement, moves: &[Move]) {
        for m in moves {
            p.set(m.range, m.to);
        }
    }

    #[test]
    fn promotes_faulted_pages_and_demotes_the_oldest_above_the_watermark() {
        // 1 MiB heap, a 256 KiB top tier (5 % watermark: 13107 bytes reserved) holding
        // the first 192 KiB.
        let heap = AddrRange::new(0, 1 << 20);
        let tiers = super::super::test_tiers(256 << 10);
        let mut placement = Placement::new(heap, 1, 2);
        placement.set(AddrRange::new(0, 192 << 10), 0);
        let mut tpp = TppConfig {
            demote_watermark: 0.05,
            ..TppConfig::default()
        }
        .policy(&PolicyContext::for_tests());
        // 96 KiB faulted: only 64 KiB - 13107 bytes fit, so the oldest range (the first
        // 192 KiB, whole) goes down first.
        tpp.observe(&snapshot(&[(512 << 10, 608 << 10)]));
        assert_eq!(tpp.next_action(), 0);
        let view = View {
            now: 1_000_000_000,
            tiers: &tiers,
            placement: &placement,
            latency_ns: &[100.0, 100.0],
        };
        let mut out = vec![];
        tpp.act(&view, &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].to, 1);
        assert_eq!(
            out[0].range,
            AddrRange::new(0, 192 << 10),
            "whole oldest range"
        );
        assert_eq!(out[1].to, 0);
        assert_eq!(out[1].range, AddrRange::new(512 << 10, 608 << 10));
        apply(&mut placement, &out);
        assert_eq!(tpp.next_action(), Nanos::MAX, "nothing pending");
        // The promoted range is now the only, newest entry: a later demotion takes it.
        tpp.observe(&snapshot(&[(700 << 10, 960 << 10)]));
        let view = View {
            now: 2_000_000_000,
            tiers: &tiers,
            placement: &placement,
            latency_ns: &[100.0, 100.0],
        };
        out.clear();
        tpp.act(&view, &mut out);
        assert_eq!(out[0].range, AddrRange::new(512 << 10, 608 << 10));
        assert_eq!(out[0].to, 1);
        // Never above capacity less the reserve (to the page: promotions are whole pages).
        apply(&mut placement, &out);
        assert!(placement.bytes_on(0) <= (256 << 10) - 13107 + 4096);
        assert!(placement.bytes_on(0) > (256 << 10) - 13107 - 4096);
    }

    #[test]
    fn the_rate_limit_caps_promotions_per_second() {
        let heap = AddrRange::new(0, 1 << 30);
        let tiers = super::super::test_tiers(1 << 30);
        let placement = Placement::new(heap, 1, 2);
        let mut tpp = TppConfig {
            promote_rate: Size(1 << 20),
            demote_watermark: 0.0,
        }
        .policy(&PolicyContext::for_tests());
        tpp.observe(&snapshot(&[(0, 64 << 20)]));
        let view = View {
            now: 500_000_000,
            tiers: &tiers,
            placement: &placement,
            latency_ns: &[100.0, 100.0],
        };
        let mut out = vec![];
        tpp.act(&view, &mut out);
        let promoted: u64 = out.iter().map(|m| m.range.len()).sum();
        // Half a second at 1 MiB/s, to the page.
        assert_eq!(promoted, 512 << 10);
    }
}
