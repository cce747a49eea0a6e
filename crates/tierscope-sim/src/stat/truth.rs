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
//! the statistical one all of it or none (docs/models/FIDELITY.md).
//!
//! A non-uniform density (hotspot, gaussian, zipf) enters as one piece per block of its
//! region, each with the block's expected count, so the threshold applies per block as in
//! the exact engine; a region of more than [`MAX_DENSITY_PIECES`] blocks is cut into that
//! many equal runs of blocks, each with its mean (memory and time stay bounded at any
//! heap size, at the price of averaging within a run). Such densities always have sparse
//! blocks (a gaussian's or zipf's tail), so a block they reach with its own piece and an
//! expectation `mu` below `draw_bound` is hot with the exact engine's probability
//! `P(Poisson(mu) >= threshold)`, drawn from a hash of (seed, block, window): the count of
//! tail blocks then matches the exact engine's instead of falling short by the blocks
//! below the threshold that real accesses happen to reach. Averaged runs of blocks and
//! blocks only uniform patterns reach keep the plain threshold (drawing blocks one by one
//! there would fragment a huge region's truth into millions of intervals).

use super::density::{Schedule, Workload};
use super::engine::unit;
use std::collections::BTreeMap;
use tierscope_core::rng::mix64;
use tierscope_core::workload::PatternKind;
use tierscope_core::{AddrRange, BlockIntervals};

/// Most pieces a non-uniform pattern adds to one window's truth.
pub const MAX_DENSITY_PIECES: u64 = 1 << 16;

/// A piece of the window's access density: `[start, end)` with `per_byte` expected
/// accesses per byte.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: u64,
    end: u64,
    per_byte: f64,
    /// From a non-uniform density.
    shaped: bool,
}

/// Expectations from which a block is hot for certain (`P(Poisson(mu) < threshold)` is
/// below 1e-9 from there).
fn draw_bound(threshold: u32) -> f64 {
    let t = f64::from(threshold);
    t + 10.0 * t.sqrt() + 10.0
}

/// `P(Poisson(mu) >= threshold)`.
fn poisson_at_least(mu: f64, threshold: u32) -> f64 {
    let mut term = (-mu).exp();
    let mut below = 0.0;
    for k in 0..threshold {
        below += term;
        term *= mu / f64::from(k + 1);
    }
    (1.0 - below).max(0.0)
}

fn pieces(w: &Workload, schedules: &[Schedule], ia: u64, ib: u64, shift: u32) -> Vec<Piece> {
    let mut out = vec![];
    // Accesses of each non-uniform pattern in the window, spread once per pattern below.
    let mut shaped: BTreeMap<u32, u64> = BTreeMap::new();
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
                PatternKind::Random if !p.density.is_uniform() => {
                    *shaped.entry(seg.pattern).or_default() += y - x;
                }
                PatternKind::Random => out.push(Piece {
                    start: base,
                    end: p.region.end,
                    per_byte: n / size as f64,
                    shaped: false,
                }),
                PatternKind::Sequential => {
                    let swept = (y - x) as u128 * p.stride as u128;
                    if swept >= size as u128 {
                        out.push(Piece {
                            start: base,
                            end: p.region.end,
                            per_byte: n / size as f64,
                            shaped: false,
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
                        shaped: false,
                    });
                    if end > size {
                        out.push(Piece {
                            start: base,
                            end: base + (end - size),
                            per_byte,
                            shaped: false,
                        });
                    }
                }
            }
        }
    }
    for (id, n) in shaped {
        let p = &w.patterns[id as usize];
        let r = p.region;
        let (b0, b1) = (r.start >> shift, ((r.end - 1) >> shift) + 1);
        let width = (b1 - b0).div_ceil(MAX_DENSITY_PIECES) << shift;
        let mut at = b0 << shift;
        while at < r.end {
            let piece = AddrRange::new(at.max(r.start), (at + width).min(r.end));
            let mass = p.mass(piece);
            if mass > 0.0 {
                out.push(Piece {
                    start: piece.start,
                    end: piece.end,
                    per_byte: n as f64 * mass / piece.len() as f64,
                    shaped: true,
                });
            }
            at += width;
        }
    }
    out
}

/// The expected accesses per byte of `[ia, ib)` of every thread, as disjoint
/// constant-density ranges, sorted (the oracle's view of a window).
pub fn heat(
    w: &Workload,
    schedules: &[Schedule],
    (ia, ib): (u64, u64),
    shift: u32,
) -> Vec<(AddrRange, f64)> {
    let ps = pieces(w, schedules, ia, ib, shift);
    let mut cuts: Vec<(u64, f64)> = vec![];
    for p in &ps {
        cuts.push((p.start, p.per_byte));
        cuts.push((p.end, -p.per_byte));
    }
    cuts.sort_by_key(|c| c.0);
    let mut out = vec![];
    let mut d = 0.0f64;
    let mut i = 0;
    while i < cuts.len() {
        let at = cuts[i].0;
        while i < cuts.len() && cuts[i].0 == at {
            d += cuts[i].1;
            i += 1;
        }
        if let Some(&(next, _)) = cuts.get(i) {
            if d > 1e-300 && next > at {
                out.push((AddrRange::new(at, next), d));
            }
        }
    }
    out
}

/// Hot blocks (`address >> shift`) of the accesses `[ia, ib)` of every thread; `seed`
/// seeds the draws of sparse blocks of non-uniform densities.
pub fn hot_blocks(
    w: &Workload,
    schedules: &[Schedule],
    (ia, ib): (u64, u64),
    shift: u32,
    threshold: u32,
    seed: u64,
) -> BlockIntervals {
    let ps = pieces(w, schedules, ia, ib, shift);
    // Constant-density intervals from the pieces' breakpoints, counting the non-uniform
    // pieces open at each.
    let mut cuts: Vec<(u64, f64, i32)> = vec![];
    for p in &ps {
        let shaped = i32::from(p.shaped);
        cuts.push((p.start, p.per_byte, shaped));
        cuts.push((p.end, -p.per_byte, -shaped));
    }
    cuts.sort_by_key(|c| c.0);
    let thr = threshold as f64 * (1.0 - 1e-9);
    let bound = draw_bound(threshold);
    let is_hot = |b: u64, mu: f64, shaped: bool| {
        if shaped && mu < bound {
            unit(mix64(seed ^ mix64(b ^ mix64(ia ^ 0x7275_7468)))) < poisson_at_least(mu, threshold)
        } else {
            mu >= thr
        }
    };
    let bs = 1u64 << shift;
    let mut full: Vec<(u64, u64)> = vec![];
    let mut partial: BTreeMap<u64, (f64, bool)> = BTreeMap::new();
    let mut d = 0.0f64;
    let mut shaped = 0i32;
    let mut i = 0;
    while i < cuts.len() {
        let at = cuts[i].0;
        while i < cuts.len() && cuts[i].0 == at {
            d += cuts[i].1;
            shaped += cuts[i].2;
            i += 1;
        }
        let Some(&(next, _, _)) = cuts.get(i) else {
            break;
        };
        if d <= 1e-300 || next <= at {
            continue;
        }
        // Blocks fully inside [at, next) have d * bs expected accesses.
        let (b0, b1) = (at.div_ceil(bs), next / bs);
        let mu = d * bs as f64;
        if shaped > 0 && mu < bound && b1 == b0 + 1 {
            if is_hot(b0, mu, true) {
                full.push((b0, b1));
            }
        } else if b1 > b0 && mu >= thr {
            full.push((b0, b1));
        }
        // The partly covered blocks at either end accumulate.
        let mut add = |b: u64, lo: u64, hi: u64| {
            let e = partial.entry(b).or_default();
            e.0 += d * (hi - lo) as f64;
            e.1 |= shaped > 0;
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
    for (b, (mu, shaped)) in partial {
        if is_hot(b, mu, shaped) {
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
