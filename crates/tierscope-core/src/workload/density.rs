//! Where a random pattern's accesses land: the densities (uniform, hotspot, gaussian,
//! zipf) placed over a region, for sampling offsets (the exact engine) and for the mass of
//! offset spans (the statistical engine).

use super::spec::{Density, PatternKind, PatternSpec, WorkloadSpec};
use crate::rng::{mix64, Rng, GOLDEN};

/// Bytes of the pages that hotspot and zipf densities pick.
pub const DENSITY_PAGE: u64 = 4096;

/// Pages of a zipf region whose partial sums are tabulated; beyond, Euler-Maclaurin.
const ZIPF_HEAD: u64 = 1024;

/// A random pattern's [`Density`] placed over its region: draws offsets (the exact engine)
/// and gives the probability mass of offset spans (the statistical engine). Both engines
/// build it from the spec alone (hotspot positions hash the region, never the random
/// stream), so they agree on which pages are hot. Memory is constant in the region size.
#[derive(Debug, Clone)]
pub struct RegionDensity {
    size: u64,
    model: Model,
}

#[derive(Debug, Clone)]
enum Model {
    Uniform,
    Hotspot(Hotspot),
    Gaussian(Gaussian),
    Zipf(Zipf),
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
            Density::Zipf { exponent } => Model::Zipf(Zipf::new(exponent, size)),
        };
        RegionDensity { size, model }
    }

    /// The density of one pattern of `spec` (uniform for sequential patterns, which sweep).
    pub fn of_pattern(spec: &WorkloadSpec, pat: &PatternSpec) -> Self {
        let r = spec.region_index(&pat.region).expect("validated spec");
        let d = match pat.kind {
            PatternKind::Random => pat.density,
            PatternKind::Sequential => Density::Uniform,
        };
        RegionDensity::new(d, spec.regions[r].size.0, r)
    }

    pub fn is_uniform(&self) -> bool {
        matches!(self.model, Model::Uniform)
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

    /// An offset in `[0, size)`, 8-byte aligned.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        match &self.model {
            Model::Uniform => rng.below(self.size) & !7,
            Model::Hotspot(h) => self.in_page(h.hot_page(rng.below(h.hot)), rng),
            Model::Gaussian(g) => g.sample(rng).min(self.size - 1) & !7,
            Model::Zipf(z) => self.in_page(z.sample(rng), rng),
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

/// Standard normal mass of `[a, b)`. Narrow spans (a 4 KiB page) by Simpson's rule,
/// whose relative error there is below 1e-8, where a difference of two tails would lose
/// erfc's 1e-7 to cancellation; wide ones from the tail on the far side of the mode.
pub fn normal_mass(a: f64, b: f64) -> f64 {
    if b <= a {
        0.0
    } else if b - a < 0.05 {
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

    fn mass(&self, lo: u64, hi: u64) -> f64 {
        let z = |x: u64| (x as f64 - self.mu) / self.sigma;
        normal_mass(z(lo), z(hi)) / self.inside
    }
}

/// Pages ranked from the region start, page `k` with weight `(k + 1)^-s`.
#[derive(Debug, Clone)]
struct Zipf {
    s: f64,
    pages: u64,
    /// `head[k]`: the weight of pages `[0, k)`, for `k <= ZIPF_HEAD`.
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
    fn new(s: f64, size: u64) -> Self {
        let pages = size.div_ceil(DENSITY_PAGE);
        let mut head = vec![0.0; ZIPF_HEAD.min(pages) as usize + 1];
        for k in 1..head.len() {
            head[k] = head[k - 1] + (k as f64).powf(-s);
        }
        let mut z = Zipf {
            s,
            pages,
            head,
            total: 0.0,
            h_x1: 0.0,
            h_n: 0.0,
            squeeze: 0.0,
        };
        z.total = z.sum(0, pages);
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(pages as f64 + 0.5);
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

    /// A page index: O(1) expected draws (the acceptance rate is above 90%).
    #[inline]
    fn sample(&self, rng: &mut Rng) -> u64 {
        let n = self.pages as f64;
        loop {
            let u = self.h_n + rng.unit() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).clamp(1.0, n) as u64;
            let kf = k as f64;
            if kf - x <= self.squeeze || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k - 1;
            }
        }
    }

    /// The weight of pages `[a, b)`: `sum_{k=a+1}^{b} k^-s`. Short runs directly, the
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
            let h = ZIPF_HEAD.min(self.pages);
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
}
