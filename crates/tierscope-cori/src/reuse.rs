//! Page reuse-distance histograms (Cori's Reuse Collector).
//!
//! A page's reuse distance is cori-sim's: the number of requests between two consecutive
//! accesses to the same page, `np.diff` of the page's request ids (`sim/memory.py`,
//! `AddressSpace.populate`), not the number of distinct pages in between (a stack
//! distance). Each page's distances are histogrammed separately, then summed per bucket
//! (`AddressSpace.get_page_reuse_histogram`), so a bucket knows both how many reuses fell
//! in it and how many pages had them.
//!
//! Cost: O(N + pages + buckets) time for N requests (a counting sort groups the requests
//! by page; each page's distances go into a scratch row of bucket counters that is reset
//! through the list of buckets it touched), O(N + pages + buckets) memory.

use crate::trace::Trace;

/// How distances map to buckets of `size` requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edges {
    /// cori-sim's: `np.histogram(dists, bins=range(0, num_reqs, size))`. The edges are
    /// `0, size, ..., (K-1)*size` with `K = ceil(num_reqs / size)`, so there are `K - 1`
    /// buckets; numpy closes the last one on the right (`[(K-2)*size, (K-1)*size]`) and
    /// drops distances above `(K-1)*size`. A trace of at most `size` requests has no bucket.
    CoriSim,
    /// Every distance counted: bucket `d / size`, as many buckets as the longest distance
    /// needs.
    Open,
}

/// One bucket of the histogram: distances in `[index * size, (index + 1) * size)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bucket {
    /// Reuses in the bucket, over all pages.
    pub reuses: u64,
    /// Pages with at least one reuse in the bucket.
    pub pages: u64,
    /// Reuses of the pages with more than one reuse in the bucket (cori-sim's
    /// `repeats_per_bucket`: `if heights[idx] > 1`).
    pub repeats: u64,
    /// Pages with more than one reuse in the bucket (cori-sim's `num_pages_per_bucket`).
    pub repeating_pages: u64,
}

/// Per-bucket reuse statistics of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct ReuseHistogram {
    pub bucket_size: u64,
    pub buckets: Vec<Bucket>,
}

/// One bar of Cori's histogram: a reuse distance (the bucket's lower edge, in requests)
/// and how often pages repeat it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub reuse: u64,
    pub height: f64,
}

/// cori-sim's bucket size: 1000 requests (`run_cori.py`, `bin_size = 1000`).
pub const CORI_BUCKET: u64 = 1000;

impl ReuseHistogram {
    /// The histogram of `trace`'s page reuse distances in buckets of `bucket_size` (> 0)
    /// requests.
    pub fn new(trace: &Trace, bucket_size: u64, edges: Edges) -> ReuseHistogram {
        assert!(bucket_size > 0, "a bucket holds at least one request");
        let ids = trace.ids();
        let n = ids.len() as u64;
        // Requests grouped by page, in time order within a page (a counting sort).
        let mut start = vec![0usize; trace.num_pages() + 1];
        for &p in ids {
            start[p as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut times = vec![0u64; ids.len()];
        for (t, &p) in ids.iter().enumerate() {
            times[fill[p as usize]] = t as u64;
            fill[p as usize] += 1;
        }
        // The bucket of a distance, or None where cori-sim's numpy drops it.
        let num_buckets = match edges {
            Edges::CoriSim => n.div_ceil(bucket_size).saturating_sub(1),
            // The longest distance is at most n - 1.
            Edges::Open => n.div_ceil(bucket_size),
        };
        let bucket_of = |d: u64| -> Option<usize> {
            let b = d / bucket_size;
            if b < num_buckets {
                Some(b as usize)
            } else if edges == Edges::CoriSim && num_buckets > 0 && d == num_buckets * bucket_size {
                // numpy's last bucket includes its right edge.
                Some(num_buckets as usize - 1)
            } else {
                None
            }
        };
        let mut buckets = vec![Bucket::default(); num_buckets as usize];
        let mut row = vec![0u64; num_buckets as usize];
        let mut touched: Vec<usize> = vec![];
        for page in start.windows(2) {
            let t = &times[page[0]..page[1]];
            for pair in t.windows(2) {
                if let Some(b) = bucket_of(pair[1] - pair[0]) {
                    if row[b] == 0 {
                        touched.push(b);
                    }
                    row[b] += 1;
                }
            }
            for &b in &touched {
                let c = row[b];
                let bucket = &mut buckets[b];
                bucket.reuses += c;
                bucket.pages += 1;
                if c > 1 {
                    bucket.repeats += c;
                    bucket.repeating_pages += 1;
                }
                row[b] = 0;
            }
            touched.clear();
        }
        ReuseHistogram {
            bucket_size,
            buckets,
        }
    }

    /// cori-sim's bars (`get_page_reuse_histogram`): per bucket the mean reuses of the
    /// pages with more than one reuse in it (`repeat / npages`, 0 without such pages); the
    /// first bucket dropped (`range(1, num_buckets)`: reuse within one period), and every
    /// bar of height 2 or less (`if avg_repeats_per_bucket[idx] > 2`). A bar's reuse is its
    /// bucket's lower edge (`dataX.append(buckets[idx])`).
    pub fn cori_bars(&self) -> Vec<Bar> {
        self.buckets
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, b)| b.repeating_pages > 0)
            .map(|(i, b)| Bar {
                reuse: i as u64 * self.bucket_size,
                height: b.repeats as f64 / b.repeating_pages as f64,
            })
            .filter(|bar| bar.height > 2.0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A trace of the given page numbers (one address per page).
    fn trace(pages: &[u64]) -> Trace {
        Trace::from_addresses(pages.iter().map(|p| p << 12)).unwrap()
    }

    /// The 40-request trace of `cori_rules_by_hand`: A at 0, 12, 24, 36; B at 1, 2, 3, 38;
    /// C at 4, 34; D at 5, 16, 27; every other request a page of its own.
    fn hand_trace() -> Trace {
        let mut pages: Vec<u64> = (100..140).collect();
        for (page, times) in [
            (1, &[0, 12, 24, 36][..]),
            (2, &[1, 2, 3, 38]),
            (3, &[4, 34]),
            (4, &[5, 16, 27]),
        ] {
            for &t in times {
                pages[t] = page;
            }
        }
        trace(&pages)
    }

    #[test]
    fn cori_rules_by_hand() {
        // 40 requests, buckets of 10: edges 0, 10, 20, 30 (K = 4), so three buckets
        // [0,10) [10,20) [20,30], and distances above 30 are dropped.
        // A: 12, 12, 12 -> bucket 1 three times. B: 1, 1 -> bucket 0 twice; 35 dropped.
        // C: 30 -> bucket 2 (numpy's closed last edge), once. D: 11, 11 -> bucket 1 twice.
        let h = ReuseHistogram::new(&hand_trace(), 10, Edges::CoriSim);
        let b = |reuses, pages, repeats, repeating_pages| Bucket {
            reuses,
            pages,
            repeats,
            repeating_pages,
        };
        assert_eq!(h.buckets, [b(2, 1, 2, 1), b(5, 2, 5, 2), b(1, 1, 0, 0)]);
        // Bucket 0 dropped; bucket 1: (3 + 2) / 2 = 2.5 > 2 kept; bucket 2: no page with
        // more than one reuse, height 0, dropped.
        assert_eq!(
            h.cori_bars(),
            [Bar {
                reuse: 10,
                height: 2.5
            }]
        );

        // Open edges keep B's 35 in bucket 3 and put C's 30 in bucket 3 too.
        let open = ReuseHistogram::new(&hand_trace(), 10, Edges::Open);
        assert_eq!(
            open.buckets,
            [b(2, 1, 2, 1), b(5, 2, 5, 2), b(0, 0, 0, 0), b(2, 2, 0, 0)]
        );
    }

    #[test]
    fn a_bar_of_exactly_two_is_dropped() {
        // 30 requests, buckets of 10: edges 0, 10, 20; buckets [0,10) [10,20].
        // Pages 1 and 2 each reuse twice at distance 10 -> bucket 1: 4 repeats / 2 pages
        // = 2.0, not above 2.
        let mut pages: Vec<u64> = (100..130).collect();
        for (t, p) in [(0, 1), (10, 1), (20, 1), (1, 2), (11, 2), (21, 2)] {
            pages[t] = p;
        }
        let h = ReuseHistogram::new(&trace(&pages), 10, Edges::CoriSim);
        assert_eq!(h.buckets[1].repeats, 4);
        assert_eq!(h.buckets[1].repeating_pages, 2);
        assert!(h.cori_bars().is_empty());
    }

    #[test]
    fn a_trace_no_longer_than_a_bucket_has_no_cori_bucket() {
        // range(0, 1000, 1000) is one edge: no bucket.
        let h = ReuseHistogram::new(&trace(&vec![7; 1000]), CORI_BUCKET, Edges::CoriSim);
        assert!(h.buckets.is_empty());
        assert!(h.cori_bars().is_empty());
    }

    /// The same statistics by brute force: each request's previous access found by
    /// scanning back, each page's distances bucketed by numpy's rule written out.
    fn brute_force(pages: &[u64], size: u64, edges: Edges) -> Vec<Bucket> {
        let n = pages.len() as u64;
        let k = match edges {
            Edges::CoriSim => n.div_ceil(size).saturating_sub(1),
            Edges::Open => n.div_ceil(size),
        };
        let mut out = vec![Bucket::default(); k as usize];
        let mut distinct: Vec<u64> = pages.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        for &page in &distinct {
            let mut dists = vec![];
            for i in 0..pages.len() {
                if pages[i] != page {
                    continue;
                }
                if let Some(j) = (0..i).rev().find(|&j| pages[j] == page) {
                    dists.push((i - j) as u64);
                }
            }
            for (b, bucket) in out.iter_mut().enumerate() {
                let lo = b as u64 * size;
                let hi = lo + size;
                let last = b as u64 + 1 == k;
                let c = dists
                    .iter()
                    .filter(|&&d| {
                        lo <= d && (d < hi || (edges == Edges::CoriSim && last && d == hi))
                    })
                    .count() as u64;
                if c > 0 {
                    bucket.reuses += c;
                    bucket.pages += 1;
                }
                if c > 1 {
                    bucket.repeats += c;
                    bucket.repeating_pages += 1;
                }
            }
        }
        out
    }

    proptest! {
        #[test]
        fn histogram_matches_brute_force(
            pages in proptest::collection::vec(0u64..12, 1..300),
            size in 1u64..40,
        ) {
            let t = trace(&pages);
            for edges in [Edges::CoriSim, Edges::Open] {
                let h = ReuseHistogram::new(&t, size, edges);
                prop_assert_eq!(h.buckets, brute_force(&pages, size, edges));
            }
        }
    }
}
