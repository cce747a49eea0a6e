//! Cori's Frequency Generator: the dominant reuse (the paper's Eq. 1) and the candidate
//! periods (Eq. 2), as cori-sim's `run_cori.py` computes them (`get_dominant_reuse`,
//! `get_candidates`). Periods are in requests.

use crate::reuse::Bar;

/// The dominant reuse of Cori's bars, in requests, or `None` without bars.
///
/// Eq. 1: `DR = sum (N - i) * repeat_i * reuse_i / sum (N - i) * repeat_i` for bars
/// `i = 1..N` in increasing reuse: the extra weight favours short reuses and gives the
/// longest bar none. cori-sim weighs bar `i` (0-based) by `linspace(0, 1, N)[::-1][i]`,
/// that is `(N - 1 - i) / (N - 1)`: the paper's weights divided by `N - 1`, so the same
/// average. We compute it as numpy does (`np.linspace`: `k * (1 / (N - 1))`, the endpoint
/// exactly 1; `np.average`: the sum of `reuse * (height * weight)` over the sum of the
/// weights) and truncate as cori-sim's `int()` does. numpy sums pairwise and we sum in
/// order: the two can differ in the last bit, which moves DR by one request only when the
/// quotient lies within an ulp of an integer.
///
/// Where cori-sim crashes (`np.average` raises ZeroDivisionError when the weights sum to
/// 0): with no bars there is no dominant reuse (`None`); with one bar, whose weight
/// `linspace(0, 1, 1) = [0]` is zero, the single observed reuse is the dominant one.
pub fn dominant_reuse(bars: &[Bar]) -> Option<u64> {
    match bars {
        [] => None,
        [only] => Some(only.reuse),
        _ => {
            let n = bars.len();
            let step = 1.0 / (n - 1) as f64;
            let (mut num, mut den) = (0.0, 0.0);
            for (i, bar) in bars.iter().enumerate() {
                let w = if i == 0 {
                    1.0
                } else {
                    (n - 1 - i) as f64 * step
                };
                let weight = bar.height * w;
                num += bar.reuse as f64 * weight;
                den += weight;
            }
            Some((num / den) as u64)
        }
    }
}

/// Candidate periods for a run of `num_reqs` requests: `DR, 2 DR, 3 DR, ...` up to
/// `num_reqs / 2` (cori-sim's `max_dur`, the runtime in requests halved), keeping a period
/// only when it gives a number of periods (`int(num_reqs / period)`) no shorter period gave
/// (cori-sim's `period_set`). The counts never grow as the period grows, so comparing with
/// the last kept count is the same test as cori-sim's set. Integer arithmetic: cori-sim's
/// float `int((max_dur * 2) / reuse)` is the same below 2^52 requests.
///
/// A dominant reuse of 0 would loop forever in cori-sim; here it has no candidates.
pub fn candidate_periods(dominant_reuse: u64, num_reqs: u64) -> Vec<u64> {
    let mut out = vec![];
    if dominant_reuse == 0 {
        return out;
    }
    let mut last_count = None;
    let mut period = dominant_reuse;
    // `reuse <= max_dur` with `max_dur = num_reqs / 2.0`: `2 * period <= num_reqs`.
    while period <= num_reqs / 2 {
        let count = num_reqs / period;
        if last_count != Some(count) {
            out.push(period);
            last_count = Some(count);
        }
        period += dominant_reuse;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bars(v: &[(u64, f64)]) -> Vec<Bar> {
        v.iter()
            .map(|&(reuse, height)| Bar { reuse, height })
            .collect()
    }

    #[test]
    fn dominant_reuse_by_hand() {
        // Three bars: weights 1, 1/2, 0 -> 3*1 = 3, 4*0.5 = 2, 5*0 = 0;
        // (1000*3 + 2000*2 + 3000*0) / (3 + 2 + 0) = 7000 / 5 = 1400.
        assert_eq!(
            dominant_reuse(&bars(&[(1000, 3.0), (2000, 4.0), (3000, 5.0)])),
            Some(1400)
        );
        // Eq. 1 with the paper's weights (N - i) = 2, 1, 0 gives the same:
        // (2*3*1000 + 1*4*2000) / (2*3 + 1*4) = 14000 / 10 = 1400.
        // Two bars: the longer has weight 0, so DR is the shorter's reuse.
        assert_eq!(
            dominant_reuse(&bars(&[(5000, 9.0), (8000, 100.0)])),
            Some(5000)
        );
        // Four bars, weights 1, 2/3, 1/3, 0, heights 3: 3, 2, 1, 0;
        // (1000*3 + 2000*2 + 4000*1) / 6 = 11000 / 6 = 1833.33 -> truncated to 1833.
        assert_eq!(
            dominant_reuse(&bars(&[(1000, 3.0), (2000, 3.0), (4000, 3.0), (9000, 3.0)])),
            Some(1833)
        );
    }

    #[test]
    fn dominant_reuse_where_cori_sim_crashes() {
        assert_eq!(dominant_reuse(&[]), None);
        assert_eq!(dominant_reuse(&bars(&[(7000, 2.5)])), Some(7000));
    }

    #[test]
    fn candidates_by_hand() {
        // DR 1400, 10000 requests: periods up to 5000: 1400 (10000/1400 = 7 periods),
        // 2800 (3), 4200 (2); 5600 > 5000.
        assert_eq!(candidate_periods(1400, 10_000), [1400, 2800, 4200]);
        // DR 30, 1000 requests, up to 500: counts 33, 16, 11, 8, 6, 5, 4 (210), then 240
        // gives 4 again (dropped), 270 gives 3, 300 and 330 give 3 (dropped), 360 gives 2,
        // 390 ... 480 give 2 (dropped), 510 > 500.
        assert_eq!(
            candidate_periods(30, 1000),
            [30, 60, 90, 120, 150, 180, 210, 270, 360]
        );
        // The bound is inclusive: 2 * 500 = 1000.
        assert_eq!(candidate_periods(500, 1000), [500]);
        assert!(candidate_periods(501, 1000).is_empty());
        assert!(candidate_periods(0, 1000).is_empty());
    }
}
