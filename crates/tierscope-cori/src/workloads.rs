//! Seeded address-trace generators shaped like the access patterns of the paper's Figure 2
//! (Doudali et al., IPDPS 2021), each built to have a known page reuse. The paper's own
//! traces (cori-sim's `traces/pin_traces/`) are not in the repository snapshot we have, so
//! these stand in for them; they imitate a pattern's shape, not the benchmark's numbers.
//!
//! A "visit" to a page is `LINES` = 64 consecutive requests to it, as many as a 4 KiB page
//! has 64-byte cache lines: what a sequential sweep over an array sends to memory. (A
//! first version used 8; under cori-sim's count binning by 20, a page visited 8 times per
//! pass is never ranked at periods shorter than three passes, so the swept arrays never
//! moved and the strided and iterative curves measured period overheads only: see
//! docs/techniques/CORI.md, "Tuning evaluation".) Logical pages map to page numbers by a seeded permutation of a region, and each
//! request picks a seeded cache line in its page: the seed therefore changes which page
//! numbers the model's ties are broken by (`hottest_first`) as well as every random choice
//! a workload makes. A reuse distance is the difference of two request indices (cori-sim's
//! `np.diff`), so consecutive requests to a page are at distance 1.

use crate::trace::Trace;
use tierscope_core::rng::Rng;

/// Largest scale of a generated workload: 100 x 300 K = 30 M requests (a few hundred MB
/// while generated).
pub const MAX_SCALE: u64 = 100;
/// Requests per page visit: one per cache line of a 4 KiB page.
pub const LINES: u64 = 64;
/// Hot pages of the strided workload, touched round-robin between array visits.
pub const STRIDED_HOT: u64 = 4;
/// Requests per row visit of the triangular workload.
pub const TRIANGULAR_LINES: u64 = 60;
/// Internal (index) pages of the random workload's tree.
pub const RANDOM_INTERNAL: u64 = 16;
/// Phases per cycle of the irregular workload, each on its own zone of pages.
pub const IRREGULAR_PHASES: u64 = 8;
/// Repetitions of the irregular workload's cycle.
pub const IRREGULAR_REPEATS: u64 = 10;
/// Centroid pages of the iterative workload, one touched after each data-page visit.
pub const ITERATIVE_CENTROIDS: u64 = 16;

/// The shipped workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Strided,
    Triangular,
    Random,
    Irregular,
    Iterative,
}

impl Workload {
    pub const ALL: [Workload; 5] = [
        Workload::Strided,
        Workload::Triangular,
        Workload::Random,
        Workload::Irregular,
        Workload::Iterative,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Strided => "strided",
            Workload::Triangular => "triangular",
            Workload::Random => "random",
            Workload::Irregular => "irregular",
            Workload::Iterative => "iterative",
        }
    }

    /// The workload at `scale` (1 to [`MAX_SCALE`]): about `scale * 300,000` requests,
    /// pages growing with the scale (the triangular's rows as its square root, its requests
    /// being quadratic in them). A scale out of range is an error (10^9 asked for an 8 TB
    /// allocation).
    pub fn generate(self, seed: u64, scale: u64) -> Result<Trace, String> {
        if !(1..=MAX_SCALE).contains(&scale) {
            return Err(format!(
                "scale {scale} is out of range: 1 to {MAX_SCALE} (x 300 K requests)"
            ));
        }
        Ok(self.generate_unchecked(seed, scale))
    }

    fn generate_unchecked(self, seed: u64, scale: u64) -> Trace {
        let s = scale;
        match self {
            Workload::Strided => strided(seed, 300 * s, 16),
            Workload::Triangular => triangular(seed, (100.0 * (s as f64).sqrt()).round() as u64),
            Workload::Random => random(seed, 1000 * s, 100_000 * s),
            Workload::Irregular => irregular(seed, 4000 * s, 30_000 * s),
            Workload::Iterative => iterative(seed, 385 * s, 12),
        }
    }
}

/// Logical pages to addresses: a seeded permutation of a region of page numbers and a
/// seeded cache line per request.
struct Pages {
    numbers: Vec<u64>,
    rng: Rng,
    out: Vec<u64>,
}

impl Pages {
    /// The region starts at page 0x7f00_0000 (an mmap-like address, 0x7f00_0000_0000).
    const BASE: u64 = 0x7f00_0000;

    fn new(seed: u64, pages: u64) -> Pages {
        let mut rng = Rng::for_stream(seed, "workload-pages");
        let mut numbers: Vec<u64> = (0..pages).map(|p| Pages::BASE + p).collect();
        for i in (1..numbers.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            numbers.swap(i, j);
        }
        Pages {
            numbers,
            rng,
            out: vec![],
        }
    }

    fn touch(&mut self, page: u64, times: u64) {
        for _ in 0..times {
            let line = self.rng.below(64);
            self.out
                .push((self.numbers[page as usize] << 12) | (line << 6));
        }
    }

    fn finish(self) -> Trace {
        match Trace::from_addresses(self.out) {
            Ok(t) => t,
            Err(e) => unreachable!("a generated trace has addresses: {e}"),
        }
    }
}

/// Strided (backprop-like): `sweeps` passes over an array of `pages` pages, each page
/// visited (`LINES` requests) once per pass in the same order, every visit followed by one
/// request to one of `STRIDED_HOT` hot pages, round-robin (a small working set, such as
/// the layer's weights). Repeats: the whole pass, of `pages * (LINES + 1)` requests.
///
/// Reuse: an array page's last request in one pass and its first in the next are
/// `pages * (LINES + 1) - (LINES - 1)` apart, `sweeps - 1` times per page (the paper's
/// backprop: 16 strides, a reuse of 20,000 requests seen 15 times); its reuses within a
/// visit are 1, and a hot page's `STRIDED_HOT * (LINES + 1)` = 260, both in the first
/// bucket, which Cori drops. So the pass is the only bar, and the dominant reuse is its
/// bucket's lower edge.
pub fn strided(seed: u64, pages: u64, sweeps: u64) -> Trace {
    let mut out = Pages::new(seed, pages + STRIDED_HOT);
    let mut hot = 0;
    for _ in 0..sweeps {
        for p in 0..pages {
            out.touch(p, LINES);
            out.touch(pages + hot, 1);
            hot = (hot + 1) % STRIDED_HOT;
        }
    }
    out.finish()
}

/// Triangular (lud-like): `rows` row pages; iteration `k` (0 .. rows) visits rows `k ..
/// rows` in order, `TRIANGULAR_LINES` requests each, so the iterations shrink and later
/// rows are used more. Repeats: each row, in every iteration up to its own index.
///
/// Reuse: row `r` comes back from iteration `k` to `k + 1` (for `k < r`) after
/// `(rows - k - 2) * TRIANGULAR_LINES + 1` requests: a gradually shrinking reuse, seen by
/// fewer rows as it grows (row `r` sees the `r` longest), as the paper describes lud.
pub fn triangular(seed: u64, rows: u64) -> Trace {
    let mut out = Pages::new(seed, rows);
    for k in 0..rows {
        for r in k..rows {
            out.touch(r, TRIANGULAR_LINES);
        }
    }
    out.finish()
}

/// Random (bfs/bptree-like): `lookups` tree lookups, each three requests: the root page,
/// one of `RANDOM_INTERNAL` internal pages and one of `leaves` leaf pages, both chosen
/// uniformly. Nothing repeats in order.
///
/// Reuse: the root's is 3 and an internal page's 3 times a geometric number of lookups
/// with mean `RANDOM_INTERNAL` (first bucket, dropped, but for a tail of
/// `(15/16)^333 ~ 5e-10`); a leaf's is 3 times a geometric number of lookups with mean
/// `leaves`, spread over many buckets with counts falling exponentially. Eq. 1's weights
/// favour the short buckets, but a bar's height is the mean over pages reusing more than
/// once in it, never below 2, so the long tail keeps its say: the dominant reuse lands
/// near the mean leaf reuse `3 * leaves`.
pub fn random(seed: u64, leaves: u64, lookups: u64) -> Trace {
    let mut out = Pages::new(seed, 1 + RANDOM_INTERNAL + leaves);
    let mut rng = Rng::for_stream(seed, "random-lookups");
    for _ in 0..lookups {
        out.touch(0, 1);
        out.touch(1 + rng.below(RANDOM_INTERNAL), 1);
        out.touch(1 + RANDOM_INTERNAL + rng.below(leaves), 1);
    }
    out.finish()
}

/// Irregular repeating (pennant-like): one cycle of `cycle` requests made of
/// `IRREGULAR_PHASES` phases, each phase drawing uniformly random pages from its own zone
/// (a seeded window of `pages / IRREGULAR_PHASES` pages, windows free to overlap), then
/// the same cycle `IRREGULAR_REPEATS` times: irregular accesses over a fixed number of
/// repetitive cycles.
///
/// Reuse: within a phase, geometric with mean the zone size (short); between phases and
/// from one cycle to the next, whatever the cycle's layout gives, the same in every
/// repetition: the distances are those of one cycle taken cyclically.
pub fn irregular(seed: u64, pages: u64, cycle: u64) -> Trace {
    let mut rng = Rng::for_stream(seed, "irregular-cycle");
    let zone = (pages / IRREGULAR_PHASES).max(1);
    let per_phase = cycle / IRREGULAR_PHASES;
    let mut one: Vec<u64> = Vec::with_capacity(cycle as usize);
    for _ in 0..IRREGULAR_PHASES {
        let start = rng.below(pages - zone + 1);
        one.extend((0..per_phase).map(|_| start + rng.below(zone)));
    }
    let mut out = Pages::new(seed, pages);
    for _ in 0..IRREGULAR_REPEATS {
        for &p in &one {
            out.touch(p, 1);
        }
    }
    out.finish()
}

/// Iterative (kmeans-like): `iterations` passes over `pages` data pages (the points), each
/// data-page visit (`LINES` requests) followed by one request to a centroid page, cycling
/// through `ITERATIVE_CENTROIDS` of them without restarting at a pass's end. Repeats: the
/// pass, and the centroids within it.
///
/// Reuse: a centroid page's is `ITERATIVE_CENTROIDS * (LINES + 1)` = 1040 requests, many
/// times per page; a data page's, pass to pass, `pages * (LINES + 1) - (LINES - 1)`,
/// `iterations - 1` times. Two bars, and Eq. 1 gives the longer no weight: the dominant
/// reuse is the centroids' (1000), far shorter than the pass.
pub fn iterative(seed: u64, pages: u64, iterations: u64) -> Trace {
    let mut out = Pages::new(seed, pages + ITERATIVE_CENTROIDS);
    let mut c = 0;
    for _ in 0..iterations {
        for p in 0..pages {
            out.touch(p, LINES);
            out.touch(pages + c, 1);
            c = (c + 1) % ITERATIVE_CENTROIDS;
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frequency::dominant_reuse;
    use crate::reuse::{Bar, Edges, ReuseHistogram, CORI_BUCKET};

    fn dr(t: &Trace) -> Option<u64> {
        dominant_reuse(&ReuseHistogram::new(t, CORI_BUCKET, Edges::CoriSim).cori_bars())
    }

    /// Cori's bars from per-page reuse distances known from a construction, by the rules
    /// docs/techniques/CORI.md lists (buckets of 1000, numpy's closed last edge, bucket 0 dropped,
    /// the mean over pages with more than one reuse in a bucket, kept above 2).
    fn bars_from_distances(per_page: &[Vec<u64>], requests: u64) -> Vec<Bar> {
        let k = requests.div_ceil(CORI_BUCKET) - 1;
        let (mut repeats, mut pages) = (vec![0u64; k as usize], vec![0u64; k as usize]);
        for dists in per_page {
            let mut c = vec![0u64; k as usize];
            for &d in dists {
                if d <= k * CORI_BUCKET {
                    c[(d / CORI_BUCKET).min(k - 1) as usize] += 1;
                }
            }
            for (b, &n) in c.iter().enumerate().filter(|(_, &n)| n > 1) {
                repeats[b] += n;
                pages[b] += 1;
            }
        }
        (1..k as usize)
            .filter(|&b| pages[b] > 0)
            .map(|b| Bar {
                reuse: b as u64 * CORI_BUCKET,
                height: repeats[b] as f64 / pages[b] as f64,
            })
            .filter(|b| b.height > 2.0)
            .collect()
    }

    #[test]
    fn strided_reuse_is_the_pass() {
        // 300 pages, 16 passes: 16 * 300 * 65 = 312,000 requests; 304 pages.
        let t = strided(1, 300, 16);
        assert_eq!((t.len(), t.num_pages()), (312_000, 304));
        // Pass reuse 300 * 65 - 63 = 19,437: bucket 19; the only bar, height 15.
        let bars = ReuseHistogram::new(&t, CORI_BUCKET, Edges::CoriSim).cori_bars();
        assert_eq!(
            bars,
            [Bar {
                reuse: 19_000,
                height: 15.0
            }]
        );
        assert_eq!(dr(&t), Some(19_000));
        // 150 pages: 150 * 65 - 63 = 9687, bucket 9.
        assert_eq!(dr(&strided(5, 150, 16)), Some(9000));
    }

    #[test]
    fn iterative_reuse_is_the_centroids() {
        // 385 pages, 12 passes: 12 * 385 * 65 = 300,300 requests, 401 pages. Centroid reuse
        // 16 * 65 = 1040: bucket 1; pass reuse 385 * 65 - 63 = 24,962: bucket 24. Two bars:
        // the second has weight 0.
        let t = iterative(1, 385, 12);
        assert_eq!((t.len(), t.num_pages()), (300_300, 401));
        let bars = ReuseHistogram::new(&t, CORI_BUCKET, Edges::CoriSim).cori_bars();
        assert_eq!(bars.len(), 2);
        assert_eq!((bars[0].reuse, bars[1].reuse), (1000, 24_000));
        // Data pages: 11 reuses each.
        assert_eq!(bars[1].height, 11.0);
        assert_eq!(dr(&t), Some(1000));
    }

    #[test]
    fn triangular_reuse_follows_the_shrinking_rows() {
        let rows = 100;
        let t = triangular(3, rows);
        // 60 * (100 + 99 + ... + 1) = 60 * 5050.
        assert_eq!((t.len(), t.num_pages()), (303_000, 100));
        // Row r: 59 reuses of 1 per visit, r + 1 visits, and (rows - k - 2) * 60 + 1 from
        // iteration k to k + 1 for k < r.
        let per_page: Vec<Vec<u64>> = (0..rows)
            .map(|r| {
                let mut d = vec![1; (59 * (r + 1)) as usize];
                d.extend((0..r).map(|k| (rows - k - 2) * 60 + 1));
                d
            })
            .collect();
        let want = dominant_reuse(&bars_from_distances(&per_page, t.len() as u64));
        assert!(want.is_some());
        assert_eq!(dr(&t), want);
    }

    #[test]
    fn irregular_repeats_its_cycle_and_its_reuse() {
        let (pages, cycle) = (4000, 30_000);
        let t = irregular(2, pages, cycle);
        let ids = t.ids();
        assert_eq!(ids.len() as u64, cycle * IRREGULAR_REPEATS);
        let c = cycle as usize;
        assert!((c..ids.len()).all(|i| ids[i] == ids[i - c]));
        // Each page's distances from one cycle: consecutive positions within it (every
        // repetition) and from its last position to its first in the next (all but the
        // last repetition).
        let mut positions = vec![vec![]; t.num_pages()];
        for (i, &p) in ids[..c].iter().enumerate() {
            positions[p as usize].push(i as u64);
        }
        let per_page: Vec<Vec<u64>> = positions
            .iter()
            .map(|pos| {
                let mut d = vec![];
                for _ in 0..IRREGULAR_REPEATS {
                    d.extend(pos.windows(2).map(|w| w[1] - w[0]));
                }
                let wrap = cycle - pos[pos.len() - 1] + pos[0];
                d.extend((1..IRREGULAR_REPEATS).map(|_| wrap));
                d
            })
            .collect();
        let want = dominant_reuse(&bars_from_distances(&per_page, t.len() as u64));
        assert!(want.is_some());
        assert_eq!(dr(&t), want);
    }

    #[test]
    fn random_reuse_lies_where_the_geometric_leaves_put_it() {
        // Leaf reuse: 3 K requests, K geometric with p = 1 / leaves (P(K >= m) =
        // q^(m - 1)); a leaf's count in a bucket is about Poisson with mean mu = (its
        // reuses) * P(bucket), and the bar's height is E[X | X > 1] =
        // (mu - mu e^-mu) / (1 - e^-mu - mu e^-mu). Buckets kept while some leaf is
        // expected to reuse 3 times in them (leaves * P(X >= 3) >= 1).
        let (leaves, lookups) = (1000u64, 100_000u64);
        let t = random(4, leaves, lookups);
        assert_eq!(t.len() as u64, 3 * lookups);
        let q = 1.0 - 1.0 / leaves as f64;
        let at_least = |m: u64| q.powf(m.max(1) as f64 - 1.0);
        let reuses = lookups as f64 / leaves as f64 - 1.0;
        let mut bars = vec![];
        for b in 1u64.. {
            let (lo, hi) = (b * 1000, (b + 1) * 1000);
            let mu = reuses * (at_least(lo.div_ceil(3)) - at_least(hi.div_ceil(3)));
            let e = (-mu).exp();
            let three_or_more = 1.0 - e - mu * e - mu * mu / 2.0 * e;
            if leaves as f64 * three_or_more < 1.0 {
                break;
            }
            bars.push(Bar {
                reuse: lo,
                height: (mu - mu * e) / (1.0 - e - mu * e),
            });
        }
        let want = dominant_reuse(&bars).unwrap() as f64;
        let got = dr(&t).unwrap() as f64;
        // The estimate is 3021 (14 bars); seeds 4 to 8 give 2992 to 3144.
        assert!((got - want).abs() <= 500.0, "got {got}, want {want}");
    }

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        for w in Workload::ALL {
            let a = w.generate(9, 1).unwrap();
            assert_eq!(a, w.generate(9, 1).unwrap(), "{}", w.name());
            assert_ne!(
                a.page_numbers(),
                w.generate(10, 1).unwrap().page_numbers(),
                "{}",
                w.name()
            );
        }
    }

    /// Issue 28: `tierscope tune --scale 1000000000` asked for an 8 TB allocation.
    #[test]
    fn scales_out_of_range_are_errors() {
        for scale in [0, MAX_SCALE + 1, 1_000_000_000, u64::MAX] {
            let e = Workload::Random.generate(1, scale).unwrap_err();
            assert!(e.contains("1 to 100"), "{e}");
        }
    }
}
