//! Where a random pattern's accesses land: the densities (uniform, hotspot, gaussian,
//! zipf, scrambled zipf, latest) placed over a region, for sampling offsets (the exact
//! engine) and for the mass of offset spans (the statistical engine).

use super::spec::{Density, PatternKind, PatternSpec, WorkloadSpec};
use crate::rng::{mix64, Rng, GOLDEN};
use std::sync::Arc;

/// Bytes of the pages that hotspot and zipf densities pick.
pub const DENSITY_PAGE: u64 = 4096;

/// Pages of a zipf region whose partial sums are tabulated; beyond, Euler-Maclaurin.
const ZIPF_HEAD: u64 = 1024;

/// Ranks of a scrambled zipf whose pages keep their own weight (2^18 pages: the hottest
/// GiB). The other ranks' total is spread evenly over the remaining pages, so the exact
/// engine samples and the statistical engine integrates the same density with 16 bytes
/// of memory per head page, masses of any span in O(log) and exact additivity. Beyond the
/// head nothing tells pages apart: a policy can rank the hottest GiB page by page and the
/// rest only as one flat tail (at exponent 0.99 the head carries 63 % of the accesses of
/// a 1 TiB region, 74 % of a 64 GiB one).
pub const SCRAMBLED_HEAD: u64 = 1 << 18;

/// A random pattern's [`Density`] placed over its region: draws offsets (the exact engine)
/// and gives the probability mass of offset spans (the statistical engine). Both engines
/// build it from the spec alone (hotspot positions hash the region, never the random
/// stream), so they agree on which pages are hot. Memory is constant in the region size.
#[derive(Debug, Clone)]
pub struct RegionDensity {
    size: u64,
    model: Model,
}

/// [`RegionDensity::spread`]: how a density changes over a range's strata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// Alike within a stratum (uniform; a gaussian at least two strata wide per sigma).
    Gentle,
    /// A gaussian narrower than that, whose densest offset in the range is this one.
    Peaked(u64),
    /// Hot pages among cold ones (hotspots, scrambled zipf) or a steep head (zipf).
    Rough,
}

#[derive(Debug, Clone)]
enum Model {
    Uniform,
    Hotspot(Hotspot),
    Gaussian(Gaussian),
    Zipf(Zipf),
    /// A zipf whose rank 0 is the region's last page (`Density::Latest`).
    Latest(Zipf),
    Scrambled(Scrambled),
}

impl RegionDensity {
    /// `density` over a region of `size` bytes; `region` (the region's index in the spec)
    /// and `size` salt the hotspot hash, so each region has its own hot pages and every
    /// hotspot pattern of one region agrees on them.
    pub fn new(density: Density, size: u64, region: usize) -> Self {
        let model = match density {
            Density::Uniform => Model::Uniform,
            Density::Hotspot { hot_fraction } => Model::Hotspot(Hotspot::new(
                hot_fraction,
                size,
                mix64(size ^ mix64(region as u64)),
            )),
            Density::Gaussian { mean, sigma } => Model::Gaussian(Gaussian::new(mean, sigma, size)),
            Density::Zipf { exponent } => Model::Zipf(Zipf::new(exponent, pages(size), 0)),
            Density::Latest {
                exponent,
                newer_pages,
            } => Model::Latest(Zipf::new(exponent, pages(size), newer_pages)),
            // Salted apart from the hotspot's hash of the same region.
            Density::ScrambledZipf { exponent } => Model::Scrambled(Scrambled::new(
                exponent,
                pages(size),
                mix64(size ^ mix64(region as u64 ^ 0x7363_7261_6d62_6c65)),
            )),
        };
        RegionDensity { size, model }
    }

    /// The density of one pattern of `spec` (uniform for sequential patterns, which sweep).
    /// A linear search for the region: for many patterns, see [`RegionDensity::of_region`].
    pub fn of_pattern(spec: &WorkloadSpec, pat: &PatternSpec) -> Self {
        let r = spec.region_index(&pat.region).expect("validated spec");
        Self::of_region(spec, pat, r)
    }

    /// The density of one pattern of `spec` whose region is region `r`.
    pub fn of_region(spec: &WorkloadSpec, pat: &PatternSpec, r: usize) -> Self {
        let d = match pat.kind {
            PatternKind::Random => pat.density,
            PatternKind::Sequential => Density::Uniform,
        };
        RegionDensity::new(d, spec.regions[r].size.0, r)
    }

    pub fn is_uniform(&self) -> bool {
        matches!(self.model, Model::Uniform)
    }

    /// How the density changes over the offsets `[lo, hi)` cut into strata of `stratum`
    /// bytes: whether a few points spread over the strata stand for all of its pages.
    pub fn spread(&self, lo: u64, hi: u64, stratum: u64) -> Spread {
        match &self.model {
            Model::Uniform => Spread::Gentle,
            // Within half a sigma the density changes by at most a factor e^(z/2 + 1/8).
            Model::Gaussian(g) if 2.0 * stratum as f64 <= g.sigma => Spread::Gentle,
            Model::Gaussian(g) => {
                Spread::Peaked((g.mu.max(0.0) as u64).clamp(lo, hi.saturating_sub(1).max(lo)))
            }
            _ => Spread::Rough,
        }
    }

    /// Bytes of the region.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Offsets `(below, from)` such that [`Self::mass`] of every span `[lo, hi)` of at
    /// most `max_len` bytes with `hi <= below` or `lo >= from` is exactly 0: a gaussian's
    /// far tails, found once so that a caller asking about many small spans (a scan's
    /// pages) can skip the arithmetic there. None for other densities, and for spans too
    /// wide against the gaussian's sigma to be sure of it.
    pub fn zero_mass_outside(&self, max_len: u64) -> Option<(u64, u64)> {
        match &self.model {
            Model::Gaussian(g) => g.zero_outside(max_len, self.size),
            _ => None,
        }
    }

    /// Offsets `(below, from)` such that [`Self::mass`] of every span of exactly `len`
    /// bytes inside the region that ends at or below `below` or starts at or above `from`
    /// is at most `eps * (1 + 1e-6)`: a gaussian's tails, where a caller that only needs a
    /// bound on a span's mass (to rule out an access there) can skip its three
    /// exponentials. None for other densities and for spans too wide against sigma.
    pub fn small_mass_outside(&self, len: u64, eps: f64) -> Option<(u64, u64)> {
        match &self.model {
            Model::Gaussian(g) => g.small_outside(len, eps, self.size),
            _ => None,
        }
    }

    /// What [`RegionDensity::sample`] draws for a uniform density over `size` bytes, for
    /// callers that matched the model once for many draws.
    #[inline(always)]
    pub fn uniform_offset(size: u64, rng: &mut Rng) -> u64 {
        rng.below(size) & !7
    }

    /// Hotspot densities: the run length in pages and the number of hot pages.
    pub fn hotspot_runs(&self) -> Option<(u64, u64)> {
        match &self.model {
            Model::Hotspot(h) => Some((h.run, h.hot)),
            _ => None,
        }
    }

    /// Hotspot densities: the hot page (index from the region start) of run `j`, `j` below
    /// the number of hot pages.
    pub fn hot_page(&self, j: u64) -> Option<u64> {
        match &self.model {
            Model::Hotspot(h) => Some(h.hot_page(j)),
            _ => None,
        }
    }

    /// Scrambled zipf densities: the pages of the hottest ranks, which keep their own
    /// weights, and the flat tail's mass per page.
    pub fn scattered(&self) -> Option<Scattered<'_>> {
        match &self.model {
            Model::Scrambled(z) => Some(Scattered { z }),
            _ => None,
        }
    }

    /// Whether the density is heaviest at the region's end (latest) rather than at its
    /// start or spread out.
    pub fn peaks_at_end(&self) -> bool {
        matches!(self.model, Model::Latest(_))
    }

    /// An offset in `[0, size)`, 8-byte aligned.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        match &self.model {
            Model::Uniform => Self::uniform_offset(self.size, rng),
            Model::Hotspot(h) => self.in_page(h.hot_page(rng.below(h.hot)), rng),
            Model::Gaussian(g) => g.sample(rng).min(self.size - 1) & !7,
            Model::Zipf(z) => self.in_page(z.sample(rng), rng),
            Model::Latest(z) => self.in_page(z.pages - 1 - z.sample(rng), rng),
            Model::Scrambled(z) => self.in_page(z.sample(rng), rng),
        }
    }

    fn page_len(&self, page: u64) -> u64 {
        (self.size - page * DENSITY_PAGE).min(DENSITY_PAGE)
    }

    #[inline]
    fn in_page(&self, page: u64, rng: &mut Rng) -> u64 {
        page * DENSITY_PAGE + (rng.below(self.page_len(page)) & !7)
    }

    /// Probability that an access lands in the offsets `[lo, hi)` (clamped to the region).
    /// Within a hotspot or zipf page the mass is spread evenly over the page's bytes.
    pub fn mass(&self, lo: u64, hi: u64) -> f64 {
        let hi = hi.min(self.size);
        if hi <= lo {
            return 0.0;
        }
        match &self.model {
            Model::Uniform => (hi - lo) as f64 / self.size as f64,
            Model::Hotspot(h) => self.paged(lo, hi, |a, b| h.hot_in(a, b) as f64) / h.hot as f64,
            Model::Gaussian(g) => g.mass(lo, hi),
            Model::Zipf(z) => self.paged(lo, hi, |a, b| z.sum(a, b)) / z.total,
            // Pages [a, b) from the start are ranks [pages - b, pages - a) from the end.
            Model::Latest(z) => {
                self.paged(lo, hi, |a, b| {
                    z.sum(z.offset + z.pages - b, z.offset + z.pages - a)
                }) / z.total
            }
            Model::Scrambled(z) => self.paged(lo, hi, |a, b| z.weight(a, b)) / z.zipf.total,
        }
    }

    /// The weight of the pages overlapping `[lo, hi)` (`hi > lo`), partly covered pages pro
    /// rata to their bytes; `pages(a, b)` is the weight of the whole pages `[a, b)`.
    fn paged(&self, lo: u64, hi: u64, pages: impl Fn(u64, u64) -> f64) -> f64 {
        let (pa, pb) = (lo / DENSITY_PAGE, (hi - 1) / DENSITY_PAGE);
        let part = |p: u64, a: u64, b: u64| {
            let w = pages(p, p + 1);
            if w == 0.0 {
                0.0
            } else {
                w * (b - a) as f64 / self.page_len(p) as f64
            }
        };
        if pa == pb {
            return part(pa, lo, hi);
        }
        part(pa, lo, (pa + 1) * DENSITY_PAGE) + pages(pa + 1, pb) + part(pb, pb * DENSITY_PAGE, hi)
    }
}

/// The zipf weight of ranks `offset + 1 ..= offset + pages`: `sum k^-exponent`, by the
/// same sums the densities use (a latest pattern split over regions weighs its parts by
/// it).
pub fn zipf_weight(exponent: f64, offset: u64, pages: u64) -> f64 {
    Zipf::new(exponent, pages, offset).total
}

fn pages(size: u64) -> u64 {
    size.div_ceil(DENSITY_PAGE)
}

/// A bijection of `[0, n)` hashed from a salt: a four-round Feistel network over the
/// smallest even number of bits covering `n`, cycle-walked back into `[0, n)` (the domain
/// is below `4 n`, so under four rounds of walking on average). Balanced Feistel rounds
/// are invertible whatever the round function, so this is a permutation of the domain, and
/// walking a value's cycle until it re-enters `[0, n)` restricts it to one of `[0, n)`.
#[derive(Debug, Clone)]
struct Feistel {
    n: u64,
    half: u32,
    mask: u64,
    keys: [u64; 4],
}

impl Feistel {
    fn new(n: u64, salt: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half = bits.div_ceil(2).max(1);
        let keys = std::array::from_fn(|i| mix64(salt ^ (i as u64 + 1).wrapping_mul(GOLDEN)));
        Feistel {
            n,
            half,
            mask: (1 << half) - 1,
            keys,
        }
    }

    fn round_trip(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half, x & self.mask);
        for k in self.keys {
            (l, r) = (r, l ^ (mix64(r ^ k) & self.mask));
        }
        (l << self.half) | r
    }

    /// The image of `x < n`.
    fn apply(&self, x: u64) -> u64 {
        let mut y = self.round_trip(x);
        while y >= self.n {
            y = self.round_trip(y);
        }
        y
    }
}

/// A zipf over ranks whose pages come from a [`Feistel`] permutation of the region's
/// pages; the [`SCRAMBLED_HEAD`] hottest ranks exact, the others flattened.
#[derive(Debug, Clone)]
struct Scrambled {
    /// The rank distribution (ranks 1..=pages, page-free).
    zipf: Zipf,
    perm: Feistel,
    /// Shared by clones: the caches' models keep a copy per cache level.
    head: Arc<Head>,
    /// Weight of each page outside the head.
    tail: f64,
}

/// The head ranks' pages in page order, and their weights' running sums.
#[derive(Debug)]
struct Head {
    pages: Vec<u64>,
    /// `prefix[i]`: the weight of `pages[..i]`.
    prefix: Vec<f64>,
}

impl Scrambled {
    fn new(s: f64, pages: u64, salt: u64) -> Self {
        let zipf = Zipf::new(s, pages, 0);
        let perm = Feistel::new(pages, salt);
        let h = SCRAMBLED_HEAD.min(pages);
        let mut head: Vec<(u64, f64)> = (0..h)
            .map(|r| (perm.apply(r), ((r + 1) as f64).powf(-s)))
            .collect();
        head.sort_unstable_by_key(|e| e.0);
        let mut prefix = Vec::with_capacity(head.len() + 1);
        prefix.push(0.0);
        for e in &head {
            prefix.push(prefix.last().expect("non-empty") + e.1);
        }
        let tail = if pages > h {
            zipf.sum(h, pages) / (pages - h) as f64
        } else {
            0.0
        };
        Scrambled {
            zipf,
            perm,
            head: Arc::new(Head {
                pages: head.into_iter().map(|e| e.0).collect(),
                prefix,
            }),
            tail,
        }
    }

    /// Head pages below page `x`.
    fn head_below(&self, x: u64) -> usize {
        self.head.pages.partition_point(|&p| p < x)
    }

    /// The weight of pages `[a, b)`: head pages by their running sums, the others flat.
    fn weight(&self, a: u64, b: u64) -> f64 {
        let (i, j) = (self.head_below(a), self.head_below(b));
        let tail_pages = (b - a) - (j - i) as u64;
        self.head.prefix[j] - self.head.prefix[i] + tail_pages as f64 * self.tail
    }

    /// A page: a zipf rank; a head rank goes to its permuted page, a tail rank to a
    /// uniformly chosen page outside the head (the flattened tail).
    #[inline]
    fn sample(&self, rng: &mut Rng) -> u64 {
        let r = self.zipf.sample(rng);
        let h = self.head.pages.len() as u64;
        if r < h {
            return self.perm.apply(r);
        }
        // The i-th page outside the head: `pages[k] - k` counts the non-head pages below
        // head page k, so i lands after the head pages whose count is at most i.
        let i = rng.below(self.zipf.pages - h);
        let pages = &self.head.pages;
        let (mut lo, mut hi) = (0, pages.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if pages[mid] - mid as u64 <= i {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        i + lo as u64
    }
}

/// A scrambled zipf's head and tail, for the statistical engine's cache models.
#[derive(Debug, Clone, Copy)]
pub struct Scattered<'a> {
    z: &'a Scrambled,
}

impl Scattered<'_> {
    /// The head ranks' pages (from the region start), sorted.
    pub fn head_pages(&self) -> &[u64] {
        &self.z.head.pages
    }

    /// Mass of head page `pages()[i]` (as a whole page).
    pub fn head_mass(&self, i: usize) -> f64 {
        (self.z.head.prefix[i + 1] - self.z.head.prefix[i]) / self.z.zipf.total
    }

    /// Mass of each page outside the head.
    pub fn tail_mass(&self) -> f64 {
        self.z.tail / self.z.zipf.total
    }

    /// Pages outside the head.
    pub fn tail_pages(&self) -> u64 {
        self.z.zipf.pages - self.z.head.pages.len() as u64
    }

    /// The head ranks cut into at most `n` runs of ranks, geometrically growing, as
    /// `(pages, mean mass per page)`: within a run the rates differ by a factor of at most
    /// `head^(1 / n)`.
    pub fn head_classes(&self, n: u64) -> Vec<(f64, f64)> {
        let h = self.z.head.pages.len() as u64;
        let ratio = (h as f64).powf(1.0 / n.max(1) as f64);
        let mut out = vec![];
        let (mut a, mut x) = (0u64, 1.0f64);
        while a < h {
            x *= ratio;
            let b = (x.ceil() as u64).clamp(a + 1, h);
            let w = self.z.zipf.sum(a, b) / self.z.zipf.total;
            out.push(((b - a) as f64, w / (b - a) as f64));
            a = b;
        }
        out
    }
}

/// One hot page per run of `run` pages, at a hashed position.
#[derive(Debug, Clone)]
struct Hotspot {
    run: u64,
    pages: u64,
    /// Hot pages in the region (the last run's only if its position falls inside).
    hot: u64,
    salt: u64,
}

impl Hotspot {
    fn new(hot_fraction: f64, size: u64, salt: u64) -> Self {
        // `as` saturates: a tiny fraction gives one run longer than any region.
        let run = ((1.0 / hot_fraction).round() as u64).max(1);
        let mut h = Hotspot {
            run,
            pages: size.div_ceil(DENSITY_PAGE),
            hot: 0,
            salt,
        };
        h.hot = h.hot_below(h.pages);
        h
    }

    /// Position of run `j`'s hot page within the run.
    fn position(&self, j: u64) -> u64 {
        mix64(self.salt ^ j.wrapping_mul(GOLDEN)) % self.run
    }

    /// The hot page of run `j`.
    fn hot_page(&self, j: u64) -> u64 {
        j * self.run + self.position(j)
    }

    /// Hot pages below page `x` (`x <= pages`): one per whole run, plus the current run's
    /// when its position is below `x`.
    fn hot_below(&self, x: u64) -> u64 {
        let j = x / self.run;
        j + u64::from(x % self.run > self.position(j))
    }

    fn hot_in(&self, a: u64, b: u64) -> u64 {
        self.hot_below(b) - self.hot_below(a)
    }
}

/// A normal distribution over offsets, truncated to the region.
#[derive(Debug, Clone)]
struct Gaussian {
    mu: f64,
    sigma: f64,
    size: f64,
    /// The untruncated distribution's mass inside the region.
    inside: f64,
}

/// Numerical Recipes' `erfcc` (Chebyshev fit; fractional error below 1.2e-7 everywhere):
/// written here because std has no erfc and the workspace no libm.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * (-z * z + poly).exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Standard normal upper tail `P(X > x)`.
fn normal_tail(x: f64) -> f64 {
    0.5 * erfc(x / std::f64::consts::SQRT_2)
}

fn normal_pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Where [`normal_pdf`] is exactly 0: `exp(-0.5 * 39^2) = exp(-760.5)` is below the
/// smallest subnormal.
const FAR_TAIL: f64 = 39.0;

/// Standard normal mass of `[a, b)`. Narrow spans (a 4 KiB page) by Simpson's rule,
/// whose relative error there is below 1e-8, where a difference of two tails would lose
/// erfc's 1e-7 to cancellation; wide ones from the tail on the far side of the mode.
pub fn normal_mass(a: f64, b: f64) -> f64 {
    if b <= a {
        0.0
    } else if b - a < 0.05 {
        // Beyond 39 standard deviations every point's density is exactly 0 in f64
        // (exp(-760) underflows): skip the three exponentials' underflow paths.
        if a >= FAR_TAIL || b <= -FAR_TAIL {
            return 0.0;
        }
        (b - a) / 6.0 * (normal_pdf(a) + 4.0 * normal_pdf(0.5 * (a + b)) + normal_pdf(b))
    } else if a >= 0.0 {
        normal_tail(a) - normal_tail(b)
    } else if b <= 0.0 {
        normal_tail(-b) - normal_tail(-a)
    } else {
        1.0 - normal_tail(-a) - normal_tail(b)
    }
}

impl Gaussian {
    fn new(mean: f64, sigma: f64, size: u64) -> Self {
        let size = size as f64;
        let (mu, sigma) = (mean * size, sigma * size);
        Gaussian {
            mu,
            sigma,
            size,
            inside: normal_mass(-mu / sigma, (size - mu) / sigma),
        }
    }

    /// Box-Muller (one of the pair), redrawn until inside the region: validation keeps
    /// `sigma <= 1` region, so at least a third of the draws land inside.
    #[inline]
    fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let r = (-2.0 * (1.0 - rng.unit()).ln()).sqrt();
            let x = self.mu + self.sigma * r * (std::f64::consts::TAU * rng.unit()).cos();
            if x >= 0.0 && x < self.size {
                return x as u64;
            }
        }
    }

    /// The standard score of offset `x`, as [`Gaussian::mass`] computes it.
    fn z(&self, x: u64) -> f64 {
        (x as f64 - self.mu) / self.sigma
    }

    fn mass(&self, lo: u64, hi: u64) -> f64 {
        normal_mass(self.z(lo), self.z(hi)) / self.inside
    }

    /// [`RegionDensity::zero_mass_outside`]. `z` never decreases with `x` (each of its
    /// three roundings is monotone, sigma is positive), so past the first offset whose
    /// score is at least [`FAR_TAIL`] every span starts there; a span of at most
    /// `max_len` bytes spans less than 0.05 in score when that is under 0.04 sigma (the
    /// roundings add about 1e-14), so [`normal_mass`] takes its narrow branch, which
    /// returns 0 beyond the far tail. Likewise below the last offset whose score is at
    /// most `-FAR_TAIL`, for the span's end. Spans beyond the region's end are empty.
    fn zero_outside(&self, max_len: u64, size: u64) -> Option<(u64, u64)> {
        if max_len as f64 >= 0.04 * self.sigma {
            return None;
        }
        // The first offset in [0, size] where `past` holds (size when none does).
        let first = |past: &dyn Fn(u64) -> bool| {
            let (mut lo, mut hi) = (0, size);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if past(mid) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            lo
        };
        let from = first(&|x| self.z(x) >= FAR_TAIL);
        let below = first(&|x| self.z(x) > -FAR_TAIL).saturating_sub(1);
        Some((below, from))
    }

    /// [`RegionDensity::small_mass_outside`]. A span of `len` bytes under 0.04 sigma takes
    /// [`normal_mass`]'s narrow branch, Simpson's rule on three points of the span; on the
    /// mode's right every point's density falls as the span moves right (on its left as it
    /// moves left), so the mass is monotone there but for roundings (of the scores and the
    /// exponentials, relative 1e-9 at most against the span's width in score), which the
    /// bound's 1e-6 covers. The edges are found by bisection on that monotone side.
    fn small_outside(&self, len: u64, eps: f64, size: u64) -> Option<(u64, u64)> {
        if len == 0 || len > size || len as f64 >= 0.04 * self.sigma {
            return None;
        }
        let small = |lo: u64| self.mass(lo, lo + len) <= eps;
        // The first start in [lo, hi) where `past` holds (hi when none does).
        let first = |mut lo: u64, mut hi: u64, past: &dyn Fn(u64) -> bool| {
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if past(mid) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            lo
        };
        let last_start = size - len;
        // Starts from which a span lies wholly on the mode's right, and ends up to which
        // it lies wholly on its left.
        let right = self.mu.max(0.0).ceil().min(last_start as f64 + 1.0) as u64;
        let left_end = self.mu.min(size as f64).floor().max(0.0) as u64;
        let from = first(right, last_start + 1, &small);
        // Ends in [len, left_end]: the first whose span's mass is above `eps`, less one.
        let below = if left_end < len {
            0
        } else {
            first(len, left_end + 1, &|end| !small(end - len)) - 1
        };
        Some((below, from))
    }
}

/// `pages` pages ranked `offset + 1 ..= offset + pages`, rank `k` with weight `k^-s`
/// (`offset` is 0 but for a latest density, whose newest pages lie in other regions).
#[derive(Debug, Clone)]
struct Zipf {
    s: f64,
    pages: u64,
    offset: u64,
    /// `head[k]`: the weight of ranks `1..=k`, for `k <= ZIPF_HEAD`.
    head: Vec<f64>,
    /// The weight of every page.
    total: f64,
    // Rejection-inversion constants (Hörmann and Derflinger 1996, as in Apache Commons'
    // `RejectionInversionZipfSampler`), for ranks `1..=pages`.
    h_x1: f64,
    h_n: f64,
    squeeze: f64,
}

/// `ln(1 + x) / x`, continuous at 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(exp(x) - 1) / x`, continuous at 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + 0.5 * x * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

impl Zipf {
    fn new(s: f64, pages: u64, offset: u64) -> Self {
        let last = offset + pages;
        let mut head = vec![0.0; ZIPF_HEAD.min(last) as usize + 1];
        for k in 1..head.len() {
            head[k] = head[k - 1] + (k as f64).powf(-s);
        }
        let mut z = Zipf {
            s,
            pages,
            offset,
            head,
            total: 0.0,
            h_x1: 0.0,
            h_n: 0.0,
            squeeze: 0.0,
        };
        z.total = z.sum(offset, last);
        // The first rank `m` takes the whole interval [H(m + 1/2) - h(m), H(m + 1/2)],
        // of length its weight (Apache's `hIntegralX1` for m = 1).
        let m = (offset + 1) as f64;
        z.h_x1 = z.h_integral(m + 0.5) - z.h(m);
        z.h_n = z.h_integral(last as f64 + 0.5);
        z.squeeze = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// `∫_1^x t^-s dt`.
    fn h_integral(&self, x: f64) -> f64 {
        let lx = x.ln();
        helper2((1.0 - self.s) * lx) * lx
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        // Rounding can take the argument just below -1.
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }

    /// A rank from the hottest, 0-based: O(1) expected draws (the acceptance rate is above
    /// 90%). The squeeze holds for ranks from 2, and the first rank always accepts.
    #[inline]
    fn sample(&self, rng: &mut Rng) -> u64 {
        let first = (self.offset + 1) as f64;
        let last = (self.offset + self.pages) as f64;
        loop {
            let u = self.h_n + rng.unit() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).clamp(first, last) as u64;
            let kf = k as f64;
            if kf - x <= self.squeeze || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k - 1 - self.offset;
            }
        }
    }

    /// The weight of ranks `a + 1 ..= b`: `sum_{k=a+1}^{b} k^-s`. Short runs directly, the
    /// tabulated head by difference, the tail by Euler-Maclaurin to the third derivative
    /// (remainder below 1e-15 relative from rank 1024 on).
    fn sum(&self, a: u64, b: u64) -> f64 {
        if b <= a {
            0.0
        } else if b - a <= 64 {
            (a + 1..=b).map(|k| (k as f64).powf(-self.s)).sum()
        } else if b < self.head.len() as u64 {
            self.head[b as usize] - self.head[a as usize]
        } else if a >= ZIPF_HEAD {
            self.euler_maclaurin(a as f64, b as f64)
        } else {
            let h = ZIPF_HEAD.min(self.offset + self.pages);
            self.head[h as usize] - self.head[a as usize] + self.euler_maclaurin(h as f64, b as f64)
        }
    }

    /// `sum_{k=a+1}^{b} k^-s` for `1 <= a < b`.
    fn euler_maclaurin(&self, a: f64, b: f64) -> f64 {
        let s = self.s;
        // ∫_a^b x^-s dx = a^(1-s) * ((b/a)^(1-s) - 1) / (1-s), without cancellation.
        let l = ((b - a) / a).ln_1p();
        let integral = a.powf(1.0 - s) * helper2((1.0 - s) * l) * l;
        let f = |x: f64| x.powf(-s);
        let f1 = |x: f64| -s * x.powf(-s - 1.0);
        let f3 = |x: f64| -s * (s + 1.0) * (s + 2.0) * x.powf(-s - 3.0);
        integral + (f(b) - f(a)) / 2.0 + (f1(b) - f1(a)) / 12.0 - (f3(b) - f3(a)) / 720.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_far_tail_is_exactly_zero() {
        // What the guard in normal_mass skips: every density value there underflows.
        for x in [FAR_TAIL, 39.5, 60.0, 1e6] {
            assert_eq!(normal_pdf(x), 0.0);
            assert_eq!(normal_pdf(-x), 0.0);
        }
        assert!(normal_pdf(38.5) > 0.0);
        assert_eq!(normal_mass(FAR_TAIL, FAR_TAIL + 0.01), 0.0);
        assert_eq!(normal_mass(-FAR_TAIL - 0.01, -FAR_TAIL), 0.0);
        assert!(normal_mass(38.0, 38.01) > 0.0);
    }

    /// The start of a span of `len` bytes inside a region of `size`: within 4 KiB of
    /// either edge of the zone `(below, from)` half the time, anywhere otherwise.
    fn start_near_edges(rng: &mut Rng, (below, from): (u64, u64), len: u64, size: u64) -> u64 {
        match rng.below(4) {
            0 => from.saturating_sub(4096) + rng.below(8192),
            1 => (below + rng.below(8192)).saturating_sub(4096 + len),
            _ => rng.below(size - len + 1),
        }
        .min(size - len)
    }

    #[test]
    fn no_mass_outside_a_gaussians_far_tails() {
        // Narrow and wide gaussians, centred and off the region's ends; spans of every
        // allowed length at and around both edges of the zero zone, and all through it.
        let mut rng = Rng::new(11);
        for (mean, sigma, size) in [
            (0.5, 0.01, 1u64 << 40),
            (0.5, 0.001, 1 << 40),
            (0.1, 0.002, 5 << 40),
            (0.0, 0.005, 1 << 38),
            (1.0, 0.005, 1 << 38),
        ] {
            let d = RegionDensity::new(Density::Gaussian { mean, sigma }, size, 0);
            let max_len = 2 << 20;
            let (below, from) = d.zero_mass_outside(max_len).expect("narrow spans");
            assert!(below < from && from <= size);
            let Model::Gaussian(g) = &d.model else {
                unreachable!()
            };
            // The zone is the tails' own: just inside it the score is within them.
            assert!(from == size || g.z(from - 1) < FAR_TAIL);
            assert!(below == 0 || g.z(below + 1) > -FAR_TAIL);
            let mut zero_spans = 0;
            for _ in 0..20_000 {
                let len = 1 + rng.below(max_len);
                let lo = start_near_edges(&mut rng, (below, from), len, size);
                let hi = lo + len;
                if hi <= below || lo >= from {
                    assert_eq!(d.mass(lo, hi), 0.0, "{mean} {sigma} [{lo}, {hi})");
                    zero_spans += 1;
                }
            }
            assert!(zero_spans > 5_000, "{zero_spans}");
        }
        // Too wide a span against sigma: no promise.
        let d = RegionDensity::new(
            Density::Gaussian {
                mean: 0.5,
                sigma: 1e-6,
            },
            1 << 30,
            0,
        );
        assert_eq!(d.zero_mass_outside(2 << 20), None);
        let u = RegionDensity::new(Density::Uniform, 1 << 30, 0);
        assert_eq!(u.zero_mass_outside(4096), None);
    }

    #[test]
    fn small_mass_outside_a_gaussians_small_mass_zones() {
        // Gaussians centred and off the region's ends, levels from near the mode to the
        // far tails: spans of the zone's length at and around both edges and anywhere
        // have at most the bound there, and the edges are tight (just inside, above it).
        let mut rng = Rng::new(12);
        for (mean, sigma, size) in [
            (0.5, 0.0005, 1u64 << 40),
            (0.1, 0.002, 5 << 40),
            (0.0, 0.005, 1 << 38),
            (1.0, 0.005, 1 << 38),
            (0.3, 0.01, 1 << 30),
        ] {
            let d = RegionDensity::new(Density::Gaussian { mean, sigma }, size, 0);
            for len in [4096, 2 << 20] {
                let Some((below0, from0)) = d.zero_mass_outside(len) else {
                    assert!(len as f64 >= 0.04 * sigma * size as f64);
                    continue;
                };
                let Model::Gaussian(g) = &d.model else {
                    unreachable!()
                };
                let mut nearer = (u64::MAX, 0);
                for eps in [1e-6, 1e-9, 1e-12, 1e-20, 1e-100, 1e-300, 0.0] {
                    let (below, from) = d.small_mass_outside(len, eps).unwrap();
                    // Smaller levels lie farther out, the last (0) no farther than the
                    // zero zone (where every score is beyond 39 sigma).
                    assert!(below <= nearer.0 && from >= nearer.1);
                    nearer = (below, from);
                    assert!(eps > 0.0 || (below >= below0 && from <= from0));
                    let bound = eps * (1.0 + 1e-6);
                    let mut inside = 0;
                    for _ in 0..2_000 {
                        let lo = start_near_edges(&mut rng, (below, from), len, size);
                        let hi = lo + len;
                        if hi <= below || lo >= from {
                            assert!(d.mass(lo, hi) <= bound, "{mean} {sigma} {eps} {lo}");
                            inside += 1;
                        }
                    }
                    assert!(inside > 200, "{mean} {sigma} {eps} {len}: {inside}");
                    // Tight: the span just before each edge is above the level.
                    if from > 0 && from <= size - len && (from - 1) as f64 >= g.mu {
                        assert!(d.mass(from - 1, from - 1 + len) > eps);
                    }
                    if below >= len && ((below + 1) as f64) <= g.mu {
                        assert!(d.mass(below + 1 - len, below + 1) > eps);
                    }
                }
            }
        }
        let u = RegionDensity::new(Density::Uniform, 1 << 30, 0);
        assert_eq!(u.small_mass_outside(4096, 1e-9), None);
    }

    /// Empirical page-bucket frequencies of `n` draws against the analytic masses: every
    /// bucket within `tol` absolute, and the masses summing to 1.
    fn check_histogram(d: &RegionDensity, buckets: &[(u64, u64)], n: u64, tol: f64) {
        let mut rng = Rng::new(7);
        let mut counts = vec![0u64; buckets.len()];
        for _ in 0..n {
            let off = d.sample(&mut rng);
            assert_eq!(off % 8, 0);
            assert!(off < d.size);
            if let Some(b) = buckets.iter().position(|&(lo, hi)| (lo..hi).contains(&off)) {
                counts[b] += 1;
            }
        }
        for (&(lo, hi), &c) in buckets.iter().zip(&counts) {
            let (emp, mass) = (c as f64 / n as f64, d.mass(lo, hi));
            assert!((emp - mass).abs() < tol, "[{lo}, {hi}): {emp} vs {mass}");
        }
    }

    #[test]
    fn hotspot_pages_one_per_run_and_every_access_hot() {
        // 1 GiB at 1%: runs of 100 pages, the last one partial (262144 = 2621 * 100 + 44).
        let size = 1u64 << 30;
        let d = RegionDensity::new(Density::Hotspot { hot_fraction: 0.01 }, size, 3);
        let Model::Hotspot(h) = &d.model else {
            unreachable!()
        };
        assert_eq!(h.run, 100);
        let hot: Vec<u64> = (0..h.pages)
            .filter(|&p| d.mass(p * 4096, p * 4096 + 4096) > 0.0)
            .collect();
        assert_eq!(hot.len() as u64, h.hot);
        assert_eq!(h.hot, 2621 + u64::from(h.position(2621) < 44));
        for run in 0..2621 {
            assert_eq!(
                hot.iter().filter(|&&p| p / 100 == run).count(),
                1,
                "run {run}"
            );
        }
        // Hot-page counts over any span are O(1) arithmetic: they match the scan.
        for (a, b) in [(0, 1), (5, 777), (1000, 262_144), (262_100, 262_144)] {
            let scan = hot.iter().filter(|&&p| (a..b).contains(&p)).count() as u64;
            assert_eq!(h.hot_in(a, b), scan, "[{a}, {b})");
        }
        // Each hot page holds 1/H of the mass, partial pages pro rata.
        let p = hot[10] * 4096;
        assert!((d.mass(p, p + 4096) * h.hot as f64 - 1.0).abs() < 1e-12);
        assert!((d.mass(p + 1024, p + 3072) * h.hot as f64 - 0.5).abs() < 1e-12);
        assert!((d.mass(0, size) - 1.0).abs() < 1e-12);
        let mut rng = Rng::new(1);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200_000 {
            let off = d.sample(&mut rng);
            assert!(hot.binary_search(&(off / 4096)).is_ok(), "{off:#x} is cold");
            seen.insert(off / 4096);
        }
        assert_eq!(seen.len() as u64, h.hot, "every hot page gets accesses");
        // Another region gets other hot pages; the same spec always the same ones.
        let other = RegionDensity::new(Density::Hotspot { hot_fraction: 0.01 }, size, 4);
        let same = RegionDensity::new(Density::Hotspot { hot_fraction: 0.01 }, size, 3);
        let pages = |d: &RegionDensity| -> Vec<u64> {
            (0..1000)
                .filter(|&p| d.mass(p * 4096, p * 4096 + 1) > 0.0)
                .collect()
        };
        assert_ne!(pages(&other), pages(&d));
        assert_eq!(pages(&same), pages(&d));
    }

    #[test]
    fn gaussian_histogram_matches_the_normal_masses() {
        let size = 1u64 << 30;
        let d = RegionDensity::new(
            Density::Gaussian {
                mean: 0.3,
                sigma: 0.125,
            },
            size,
            0,
        );
        // 16 equal buckets and a few pages around the mean; truncation renormalises.
        let mut buckets: Vec<(u64, u64)> = (0..16)
            .map(|i| (i * size / 16, (i + 1) * size / 16))
            .collect();
        let m = (0.3 * size as f64) as u64 & !4095;
        buckets.extend((0..4).map(|i| (m + i * 4096, m + (i + 1) * 4096)));
        check_histogram(&d, &buckets[..16], 400_000, 0.003);
        let total: f64 = buckets[..16].iter().map(|&(a, b)| d.mass(a, b)).sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
        // A page at the mean: the truncated normal's density times 4 KiB.
        let pdf = 1.0 / (0.125 * size as f64 * (2.0 * std::f64::consts::PI).sqrt());
        let inside = normal_mass(-0.3 / 0.125, 0.7 / 0.125);
        let page = d.mass(m, m + 4096);
        assert!(
            (page / (pdf * 4096.0 / inside) - 1.0).abs() < 1e-4,
            "{page}"
        );
        // erfc against known values.
        assert!((normal_tail(1.0) - 0.158_655_253_931_457).abs() < 1e-7);
        assert!((normal_tail(-2.0) - 0.977_249_868_051_821).abs() < 1e-7);
        assert!((normal_mass(-1.0, 1.0) - 0.682_689_492_137_086).abs() < 1e-7);
    }

    #[test]
    fn zipf_histogram_matches_the_harmonic_masses() {
        for (s, size) in [(1.0, 1u64 << 30), (0.6, 64 << 20), (1.4, 3 << 20)] {
            let d = RegionDensity::new(Density::Zipf { exponent: s }, size, 0);
            let Model::Zipf(z) = &d.model else {
                unreachable!()
            };
            // Partial sums: Euler-Maclaurin against direct summation across the head.
            for (a, b) in [(0, 5000), (900, 3000), (2000, 2100), (100, 200)] {
                let b = b.min(z.pages);
                if b <= a {
                    continue;
                }
                let direct: f64 = (a + 1..=b).map(|k| (k as f64).powf(-s)).sum();
                assert!((z.sum(a, b) / direct - 1.0).abs() < 1e-12, "{s} [{a}, {b})");
            }
            let pages = |a: u64, b: u64| (a * 4096, (b * 4096).min(size));
            let mut buckets = vec![pages(0, 1), pages(1, 2), pages(2, 10), pages(10, 100)];
            buckets.push(pages(100, 1000));
            buckets.push(pages(1000, z.pages));
            check_histogram(&d, &buckets, 400_000, 0.003);
            assert!((d.mass(0, size) - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn feistel_is_a_bijection_of_every_size() {
        for n in [1u64, 2, 3, 5, 1000, 4096, 5001, 65_537] {
            for salt in [0, 1, 0xdead_beef] {
                let f = Feistel::new(n, salt);
                let mut seen = vec![false; n as usize];
                for x in 0..n {
                    let y = f.apply(x);
                    assert!(y < n && !seen[y as usize], "n {n}: {x} -> {y}");
                    seen[y as usize] = true;
                }
            }
        }
        // Scattered: the first 64 ranks of a large region are not a run of pages.
        let f = Feistel::new(1 << 20, 9);
        let mut first: Vec<u64> = (0..64).map(|r| f.apply(r)).collect();
        first.sort_unstable();
        assert!(first[63] - first[0] > 1 << 18, "{first:?}");
    }

    /// Pearson's statistic of `n` draws over every page of `d` (all pages one bucket each,
    /// pages of tiny mass pooled) against `mass`: below its mean plus six deviations.
    fn chi_square_pages(d: &RegionDensity, n: u64) {
        let pages = d.size.div_ceil(DENSITY_PAGE);
        let mut counts = vec![0u64; pages as usize];
        let mut rng = Rng::new(11);
        for _ in 0..n {
            let off = d.sample(&mut rng);
            assert!(off < d.size && off.is_multiple_of(8));
            counts[(off / DENSITY_PAGE) as usize] += 1;
        }
        let (mut stat, mut df) = (0.0, 0u64);
        let (mut pool_c, mut pool_e) = (0.0, 0.0);
        for (p, &c) in counts.iter().enumerate() {
            let e = n as f64 * d.mass(p as u64 * DENSITY_PAGE, (p as u64 + 1) * DENSITY_PAGE);
            if e < 5.0 {
                (pool_c, pool_e) = (pool_c + c as f64, pool_e + e);
                continue;
            }
            stat += (c as f64 - e).powi(2) / e;
            df += 1;
        }
        if pool_e > 0.0 {
            stat += (pool_c - pool_e).powi(2) / pool_e;
        }
        let df = df as f64;
        assert!(stat < df + 6.0 * (2.0 * df).sqrt(), "chi2 {stat} on {df}");
    }

    #[test]
    fn scrambled_zipf_samples_follow_its_masses() {
        // All ranks exact (1000 pages), then a region past the head (a flat tail).
        let small = RegionDensity::new(Density::ScrambledZipf { exponent: 0.99 }, 4_096_000, 2);
        chi_square_pages(&small, 2_000_000);
        assert!((small.mass(0, small.size) - 1.0).abs() < 1e-12);
        let size = (SCRAMBLED_HEAD + 50_000) * DENSITY_PAGE - 100;
        let d = RegionDensity::new(Density::ScrambledZipf { exponent: 0.99 }, size, 0);
        let sc = d.scattered().unwrap();
        assert_eq!(sc.head_pages().len() as u64, SCRAMBLED_HEAD);
        assert_eq!(sc.tail_pages(), 50_000);
        // The hottest page (rank 0) is where the permutation sends rank 0, not page 0.
        let Model::Scrambled(z) = &d.model else {
            unreachable!()
        };
        let top = z.perm.apply(0);
        let m0 = d.mass(top * 4096, top * 4096 + 4096);
        assert!((m0 * z.zipf.total - 1.0).abs() < 1e-9, "{m0}");
        // Buckets: the ten hottest pages, then the head and the tail pages in chunks.
        let mut buckets: Vec<(u64, u64)> = (0..10)
            .map(|r| z.perm.apply(r) * 4096)
            .map(|o| (o, o + 4096))
            .collect();
        buckets.extend((0..8).map(|i| (i * size / 8, (i + 1) * size / 8)));
        check_histogram(&d, &buckets[..10], 400_000, 0.002);
        check_histogram(&d, &buckets[10..], 400_000, 0.003);
        // Tail pages all carry the flat mass; the coldest head rank more.
        let tail_page = (0..)
            .find(|p| sc.head_pages().binary_search(p).is_err())
            .unwrap();
        let m = d.mass(tail_page * 4096, tail_page * 4096 + 4096);
        assert!((m / sc.tail_mass() - 1.0).abs() < 1e-12);
        let h = sc.head_mass(sc.head_pages().len() - 1);
        assert!(h > sc.tail_mass());
        // Head classes account for every head rank and their mass.
        let classes = sc.head_classes(256);
        let (n, w) = classes
            .iter()
            .fold((0.0, 0.0), |(n, w), c| (n + c.0, w + c.0 * c.1));
        assert_eq!(n, SCRAMBLED_HEAD as f64);
        let head: f64 = (0..sc.head_pages().len()).map(|i| sc.head_mass(i)).sum();
        assert!((w / head - 1.0).abs() < 1e-9, "{w} {head}");
        assert!((head + sc.tail_mass() * 50_000.0 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn scrambled_pages_depend_on_the_spec_only() {
        let hot = |region: usize, size: u64| {
            let d = RegionDensity::new(Density::ScrambledZipf { exponent: 0.99 }, size, region);
            let Model::Scrambled(z) = &d.model else {
                unreachable!()
            };
            (0..32).map(|r| z.perm.apply(r)).collect::<Vec<u64>>()
        };
        assert_eq!(hot(1, 1 << 30), hot(1, 1 << 30));
        assert_ne!(hot(1, 1 << 30), hot(2, 1 << 30));
        assert_ne!(hot(1, 1 << 30), hot(1, 1 << 31));
    }

    #[test]
    fn latest_is_a_zipf_from_the_end_after_newer_pages() {
        for (newer, size) in [(0u64, 4_000_000u64), (300, 4_000_000), (5000, 1 << 26)] {
            let d = RegionDensity::new(
                Density::Latest {
                    exponent: 0.99,
                    newer_pages: newer,
                },
                size,
                0,
            );
            assert!(d.peaks_at_end());
            chi_square_pages(&d, 1_000_000);
            let pages = size.div_ceil(4096);
            let last = (pages - 1) * 4096;
            let first = d.mass(0, 4096) / d.mass(last, size);
            // The first page's rank against the last page's rank (the last page may be
            // partial: its mass is its whole weight).
            let want = ((newer + pages) as f64 / (newer + 1) as f64).powf(-0.99);
            assert!((first / want - 1.0).abs() < 1e-9, "{first} {want}");
            let total = zipf_weight(0.99, newer, pages);
            let direct: f64 = (newer + 1..=newer + pages)
                .map(|k| (k as f64).powf(-0.99))
                .sum();
            assert!((total / direct - 1.0).abs() < 1e-12);
        }
    }

    proptest::proptest! {
        #[test]
        fn masses_add_up_over_any_partition(
            cuts in proptest::collection::vec(0u64..(3 << 30), 1..40),
            kind in 0usize..3,
        ) {
            let size = 3u64 << 30;
            let density = [
                Density::ScrambledZipf { exponent: 0.99 },
                Density::Latest { exponent: 0.99, newer_pages: 777 },
                Density::Zipf { exponent: 0.99 },
            ][kind];
            let d = RegionDensity::new(density, size, 1);
            let mut cuts = cuts;
            cuts.push(0);
            cuts.push(size);
            cuts.sort_unstable();
            let sum: f64 = cuts.windows(2).map(|w| d.mass(w[0], w[1])).sum();
            proptest::prop_assert!((sum - 1.0).abs() < 1e-12, "{}", sum);
            // Any span equals the sum of its two halves.
            let (a, b) = (cuts[1], cuts[cuts.len() - 2]);
            if a < b {
                let mid = a + (b - a) / 3;
                let whole = d.mass(a, b);
                let parts = d.mass(a, mid) + d.mass(mid, b);
                proptest::prop_assert!((whole - parts).abs() < 1e-14, "{} {}", whole, parts);
            }
        }
    }
}
