//! The oracle: before each window it is told how often every part of the heap will be
//! accessed in it (the runner reads that from a second engine running one window ahead on
//! the same seed: the access stream does not depend on placement), puts the most
//! densely accessed ranges on the fast tier up to its capacity and everything else on the
//! slowest tier, and its moves cost nothing. It bounds policies that pack hot data into
//! the fast tier, not policies that balance load across tiers (docs/models/TIERING.md).

use super::periodic::default_period;
use super::{due_if, Policy, View};
use crate::migration::Move;
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::units::Duration;
use tierscope_core::{AddrRange, FieldError, Nanos, PolicyInput, Snapshot};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleConfig {
    /// How often it re-places the heap, from the coming period's counts (default 100 ms).
    #[serde(default = "default_period")]
    pub period: Duration,
}

impl Default for OracleConfig {
    fn default() -> Self {
        OracleConfig {
            period: default_period(),
        }
    }
}

impl PolicyTechnique for OracleConfig {
    const HELP: &'static str =
        "the coming period's densest ranges on the fast tier, free migration (a bound for packing)";

    fn by_name() -> Option<Self> {
        Some(Self::default())
    }

    fn input(&self) -> PolicyInput {
        PolicyInput::Lookahead
    }

    fn period_ns(&self) -> Option<u64> {
        Some(self.period.0)
    }

    fn free_moves(&self) -> bool {
        true
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        if self.period.0 == 0 {
            return Err(FieldError::new("period", "must be positive"));
        }
        Ok(())
    }

    fn policy(&self, _: &PolicyContext) -> Box<dyn Policy> {
        Box::new(Oracle { coming: None })
    }
}

pub struct Oracle {
    coming: Option<Vec<(AddrRange, f64)>>,
}

impl Policy for Oracle {
    fn observe(&mut self, _: &Snapshot) {}

    fn observe_heat(&mut self, heat: &[(AddrRange, f64)]) {
        self.coming = Some(heat.to_vec());
    }

    fn next_action(&self) -> Nanos {
        due_if(self.coming.is_some())
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        let Some(mut heat) = self.coming.take() else {
            return;
        };
        let heap = view.placement.range();
        out.push(Move {
            range: heap,
            to: view.slowest(),
        });
        // Densest first; equal densities in address order.
        heat.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.start.cmp(&b.0.start)));
        let mut room = view.tiers[0].capacity & !4095;
        for (r, _) in heat {
            let start = r.start.max(heap.start).next_multiple_of(4096);
            let end = r.end.min(heap.end).next_multiple_of(4096).min(heap.end);
            if end <= start {
                continue;
            }
            let len = (end - start).min(room);
            if len == 0 {
                break;
            }
            room -= len;
            out.push(Move {
                range: AddrRange::new(start, start + len),
                to: 0,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::Placement;

    #[test]
    fn densest_ranges_fill_the_fast_tier() {
        let heap = AddrRange::new(1 << 30, (1 << 30) + (10 << 20));
        let placement = Placement::new(heap, 0, 2);
        let t = crate::test_support::tier;
        let tiers = [t(3 << 20), t(u64::MAX)];
        let view = View {
            now: 0,
            tiers: &tiers,
            placement: &placement,
            latency_ns: &[1.0, 1.0],
        };
        let mib = |m: u64| heap.start + (m << 20);
        let mut oracle = Oracle { coming: None };
        oracle.observe_heat(&[
            (AddrRange::new(mib(0), mib(4)), 1.0),
            (AddrRange::new(mib(6), mib(8)), 5.0),
        ]);
        let mut out = vec![];
        oracle.act(&view, &mut out);
        assert_eq!(
            out,
            vec![
                Move { range: heap, to: 1 },
                Move {
                    range: AddrRange::new(mib(6), mib(8)),
                    to: 0
                },
                Move {
                    range: AddrRange::new(mib(0), mib(1)),
                    to: 0
                },
            ]
        );
    }
}
