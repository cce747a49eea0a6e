//! The ground truth, analytically: the expected accesses of each block in a window, from
//! the segments that fall in it. A block is truly hot when its expected count reaches the
//! threshold.
//!
//! The exact engine counts real accesses, so a block with an expected count `mu` is hot
//! there with probability `P(Poisson(mu) >= threshold)`. The two agree whenever `mu` is far
//! from the threshold, which is the case for every MASIM workload in the repository (a
//! random pattern at 10 M/s over a region up to 10 GiB puts hundreds of accesses in each
//! 2 MiB block per 200 ms window). They differ for sparse patterns (about one expected
//! access per block per window): there the exact truth is a random subset of the region,
//! the statistical one all of it or none (docs/FIDELITY.md).

use super::density::{Schedule, Workload};
use std::collections::BTreeMap;
use tierscope_core::workload::PatternKind;
use tierscope_core::BlockIntervals;

/// A piece of the window's access density: `[start, end)` with `per_byte` expected
/// accesses per byte.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: u64,
    end: u64,
    per_byte: f64,
}

fn pieces(w: &Workload, schedules: &[Schedule], ia: u64, ib: u64) -> Vec<Piece> {
    let mut out = vec![];
    for s in schedules {
        let mut si = s.find(ia);
        while si < s.segments.len() && s.segments[si].first < ib {
            let seg = s.segments[si];
            si += 1;
            let (x, y) = (seg.first.max(ia), seg.end().min(ib));
            if y <= x {
                continue;
            }
            let n = (y - x) as f64;
            let p = &w.patterns[seg.pattern as usize];
            let (base, size) = (p.region.start, p.region.len());
            match p.kind {
                PatternKind::Random => out.push(Piece {
                    start: base,
                    end: p.region.end,
                    per_byte: n / size as f64,
                }),
                PatternKind::Sequential => {
                    let swept = (y - x) as u128 * p.stride as u128;
                    if swept >= size as u128 {
                        out.push(Piece {
                            start: base,
                            end: p.region.end,
                            per_byte: n / size as f64,
                        });
                        continue;
                    }
                    let off = ((seg.offset as u128 + (x - seg.first) as u128 * p.stride as u128)
                        % size as u128) as u64;
                    let end = off + swept as u64;
                    let per_byte = 1.0 / p.stride as f64;
                    out.push(Piece {
                        start: base + off,
                        end: base + end.min(size),
                        per_byte,
                    });
                    if end > size {
                        out.push(Piece {
                            start: base,
                            end: base + (end - size),
                            per_byte,
                        });
                    }
                }
            }
        }
    }
    out
}

/// Hot blocks (`address >> shift`) of the accesses `[ia, ib)` of every thread.
pub fn hot_blocks(
    w: &Workload,
    schedules: &[Schedule],
    ia: u64,
    ib: u64,
    shift: u32,
    threshold: u32,
) -> BlockIntervals {
    let ps = pieces(w, schedules, ia, ib);
    // Constant-density intervals from the pieces' breakpoints.
    let mut cuts: Vec<(u64, f64)> = vec![];
    for p in &ps {
        cuts.push((p.start, p.per_byte));
        cuts.push((p.end, -p.per_byte));
    }
    cuts.sort_by_key(|c| c.0);
    let thr = threshold as f64 * (1.0 - 1e-9);
    let bs = 1u64 << shift;
    let mut full: Vec<(u64, u64)> = vec![];
    let mut partial: BTreeMap<u64, f64> = BTreeMap::new();
    let mut d = 0.0f64;
    let mut i = 0;
    while i < cuts.len() {
        let at = cuts[i].0;
        while i < cuts.len() && cuts[i].0 == at {
            d += cuts[i].1;
            i += 1;
        }
        let Some(&(next, _)) = cuts.get(i) else { break };
        if d <= 1e-300 || next <= at {
            continue;
        }
        // Blocks fully inside [at, next) have d * bs expected accesses.
        let (b0, b1) = (at.div_ceil(bs), next / bs);
        if b1 > b0 && d * bs as f64 >= thr {
            full.push((b0, b1));
        }
        // The partly covered blocks at either end accumulate.
        let mut add = |b: u64, lo: u64, hi: u64| {
            *partial.entry(b).or_default() += d * (hi - lo) as f64;
        };
        if b1 < b0 {
            add(at >> shift, at, next); // inside one block
        } else {
            if !at.is_multiple_of(bs) {
                add(at >> shift, at, (at >> shift << shift) + bs);
            }
            if next % bs != 0 && b1 >= b0 {
                add(next >> shift, next >> shift << shift, next);
            }
        }
    }
    for (b, mu) in partial {
        if mu >= thr {
            full.push((b, b + 1));
        }
    }
    full.sort_unstable();
    let mut out: BlockIntervals = vec![];
    for (a, b) in full {
        match out.last_mut() {
            Some(last) if last.1 >= a => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}
