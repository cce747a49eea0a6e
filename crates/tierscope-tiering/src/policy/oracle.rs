//! The oracle: before each window it is told which blocks the window will access at least
//! the truth threshold times (the runner reads them from a second engine running one
//! window ahead on the same seed: the access stream does not depend on placement), puts
//! them on the fast tier in address order up to its capacity and everything else on the
//! slowest tier, and its moves cost nothing. It bounds policies that pack hot data into
//! the fast tier, not policies that balance load across tiers (docs/TIERING.md).

use super::{Policy, View};
use crate::migration::Move;
use tierscope_core::{AddrRange, Nanos, Snapshot};

pub struct Oracle {
    coming: Option<Snapshot>,
}

impl Oracle {
    pub fn new() -> Self {
        Oracle { coming: None }
    }
}

impl Default for Oracle {
    fn default() -> Self {
        Self::new()
    }
}

impl Policy for Oracle {
    fn observe(&mut self, snapshot: &Snapshot) {
        self.coming = Some(snapshot.clone());
    }

    fn next_action(&self) -> Nanos {
        if self.coming.is_some() {
            0
        } else {
            Nanos::MAX
        }
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        let Some(s) = self.coming.take() else {
            return;
        };
        out.push(Move {
            range: view.placement.range(),
            to: view.slowest(),
        });
        let mut room = view.tiers[0].capacity;
        for r in &s.regions {
            let range = AddrRange::new(r.start, r.end);
            let len = range.overlap(&view.placement.range()).min(room);
            if len == 0 {
                break;
            }
            room -= len;
            out.push(Move {
                range: AddrRange::new(
                    range.start.max(view.placement.range().start),
                    range.start.max(view.placement.range().start) + len,
                ),
                to: 0,
            });
        }
    }
}
