//! The workload types (regions, phases, patterns and their densities) as experiment
//! files write them, and their validation.

use super::density::RegionDensity;
use crate::error::FieldError;
use crate::limits::{
    human_bytes, MAX_DURATION_NS, MAX_HEAP, MAX_PATTERNS, MAX_PHASES, MAX_REGIONS,
};
use crate::units::{Duration, Nanos, Size};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How a pattern walks its region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatternKind {
    /// An independent random offset per access, drawn from the pattern's [`Density`].
    Random,
    /// `offset += stride`, wrapping at the region's end.
    Sequential,
}

/// Where a random pattern's accesses land in its region (offsets are 8-byte aligned).
/// Experiment files name it with the pattern's `kind`; MASIM files only have `Uniform`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Density {
    /// A uniformly random 64-bit offset (`kind = "random"` or `"uniform"`).
    Uniform,
    /// One hot 4 KiB page in each run of `round(1 / hot_fraction)` pages, each access on a
    /// hot page chosen uniformly (`kind = "hotspot"`).
    Hotspot { hot_fraction: f64 },
    /// A normal distribution truncated to the region; `mean` and `sigma` are fractions of
    /// the region size (`kind = "gaussian"`).
    Gaussian { mean: f64, sigma: f64 },
    /// 4 KiB page `k` from the region start drawn with probability proportional to
    /// `1 / (k + 1)^exponent` (`kind = "zipf"`).
    Zipf { exponent: f64 },
    /// YCSB's scrambled zipfian over 4 KiB pages: the zipf ranks are permuted over the
    /// region's pages by a bijection hashed from the region, so the hot pages are
    /// scattered (`kind = "scrambled-zipf"`). The [`SCRAMBLED_HEAD`] hottest ranks keep
    /// their own weights; the rest share their total evenly (docs/reference/EXPERIMENTS.md).
    ///
    /// [`SCRAMBLED_HEAD`]: super::density::SCRAMBLED_HEAD
    ScrambledZipf { exponent: f64 },
    /// YCSB's latest: a zipf anchored at the region's end, the last 4 KiB page of rank
    /// `newer_pages` (pages of newer keys past the region, in regions of their own), each
    /// page towards the start one rank colder: page `k` from the end drawn with
    /// probability proportional to `1 / (newer_pages + k + 1)^exponent` (`kind = "latest"`).
    Latest { exponent: f64, newer_pages: u64 },
}

/// Whether accesses load, store, or alternate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessMode {
    /// Loads only (masim `ro`).
    Ro,
    /// Stores only (masim `wo`, masim's default).
    Wo,
    /// Alternating load and store (masim `rw`).
    Rw,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionSpec {
    pub name: String,
    pub size: Size,
}

/// One access pattern. In files it is one table whose `kind` names both the walk and the
/// density (`random`/`uniform`, `hotspot`, `gaussian`, `zipf`, `scrambled-zipf`, `latest`,
/// `sequential`), with the density's parameters beside it (`PatternFile` below).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PatternFile", into = "PatternFile")]
pub struct PatternSpec {
    pub region: String,
    pub kind: PatternKind,
    /// Random patterns only; `Uniform` for sequential ones.
    pub density: Density,
    /// Bytes between consecutive sequential accesses (ignored by random patterns).
    pub stride: Size,
    /// Relative weight among the phase's patterns (masim's "probability").
    pub weight: u32,
    pub mode: AccessMode,
}

/// `kind` as written in experiment files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum KindName {
    #[serde(alias = "uniform")]
    Random,
    Sequential,
    Hotspot,
    Gaussian,
    Zipf,
    #[serde(rename = "scrambled-zipf")]
    ScrambledZipf,
    Latest,
}

/// A pattern as written in experiment files. Which parameters a kind needs or forbids is
/// checked here (a serde error, so it carries the table's line); their ranges are checked
/// by [`WorkloadSpec::validate`], which names the pattern's path.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternFile {
    region: String,
    kind: KindName,
    #[serde(default = "default_stride")]
    stride: Size,
    #[serde(default = "default_weight")]
    weight: u32,
    #[serde(default = "default_mode")]
    mode: AccessMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hot_fraction: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sigma: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exponent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    newer_pages: Option<u64>,
}

/// Defaults of the optional density parameters (docs/reference/EXPERIMENTS.md).
pub const DEFAULT_GAUSSIAN_MEAN: f64 = 0.5;
pub const DEFAULT_GAUSSIAN_SIGMA: f64 = 0.125;
pub const DEFAULT_ZIPF_EXPONENT: f64 = 1.0;
/// Largest `newer_pages` of a latest density (2^40 pages: 4 EiB).
pub const MAX_NEWER_PAGES: u64 = 1 << 40;

impl TryFrom<PatternFile> for PatternSpec {
    type Error = String;

    fn try_from(f: PatternFile) -> Result<Self, String> {
        let kind_name = serde_name(f.kind);
        let given = [
            ("hot_fraction", f.hot_fraction.is_some()),
            ("mean", f.mean.is_some()),
            ("sigma", f.sigma.is_some()),
            ("exponent", f.exponent.is_some()),
            ("newer_pages", f.newer_pages.is_some()),
        ];
        let allowed: &[&str] = match f.kind {
            KindName::Random | KindName::Sequential => &[],
            KindName::Hotspot => &["hot_fraction"],
            KindName::Gaussian => &["mean", "sigma"],
            KindName::Zipf | KindName::ScrambledZipf => &["exponent"],
            KindName::Latest => &["exponent", "newer_pages"],
        };
        if let Some((name, _)) = given.iter().find(|(n, g)| *g && !allowed.contains(n)) {
            return Err(format!(
                "{name}: not a parameter of kind = \"{kind_name}\" (hot_fraction is hotspot's, \
                 mean and sigma gaussian's, exponent the zipfs', newer_pages latest's)"
            ));
        }
        let (kind, density) = match f.kind {
            KindName::Random => (PatternKind::Random, Density::Uniform),
            KindName::Sequential => (PatternKind::Sequential, Density::Uniform),
            KindName::Hotspot => {
                let hot_fraction = f.hot_fraction.ok_or_else(|| {
                    "hot_fraction: kind = \"hotspot\" needs it (the share of 4 KiB pages that \
                     are hot, 0 < hot_fraction <= 1)"
                        .to_string()
                })?;
                (PatternKind::Random, Density::Hotspot { hot_fraction })
            }
            KindName::Gaussian => (
                PatternKind::Random,
                Density::Gaussian {
                    mean: f.mean.unwrap_or(DEFAULT_GAUSSIAN_MEAN),
                    sigma: f.sigma.unwrap_or(DEFAULT_GAUSSIAN_SIGMA),
                },
            ),
            KindName::Zipf => (
                PatternKind::Random,
                Density::Zipf {
                    exponent: f.exponent.unwrap_or(DEFAULT_ZIPF_EXPONENT),
                },
            ),
            KindName::ScrambledZipf => (
                PatternKind::Random,
                Density::ScrambledZipf {
                    exponent: f.exponent.unwrap_or(DEFAULT_ZIPF_EXPONENT),
                },
            ),
            KindName::Latest => (
                PatternKind::Random,
                Density::Latest {
                    exponent: f.exponent.unwrap_or(DEFAULT_ZIPF_EXPONENT),
                    newer_pages: f.newer_pages.unwrap_or(0),
                },
            ),
        };
        Ok(PatternSpec {
            region: f.region,
            kind,
            density,
            stride: f.stride,
            weight: f.weight,
            mode: f.mode,
        })
    }
}

impl From<PatternSpec> for PatternFile {
    fn from(p: PatternSpec) -> Self {
        let mut f = PatternFile {
            region: p.region,
            kind: KindName::Random,
            stride: p.stride,
            weight: p.weight,
            mode: p.mode,
            hot_fraction: None,
            mean: None,
            sigma: None,
            exponent: None,
            newer_pages: None,
        };
        match (p.kind, p.density) {
            (PatternKind::Sequential, _) => f.kind = KindName::Sequential,
            (PatternKind::Random, Density::Uniform) => {}
            (PatternKind::Random, Density::Hotspot { hot_fraction }) => {
                f.kind = KindName::Hotspot;
                f.hot_fraction = Some(hot_fraction);
            }
            (PatternKind::Random, Density::Gaussian { mean, sigma }) => {
                f.kind = KindName::Gaussian;
                (f.mean, f.sigma) = (Some(mean), Some(sigma));
            }
            (PatternKind::Random, Density::Zipf { exponent }) => {
                f.kind = KindName::Zipf;
                f.exponent = Some(exponent);
            }
            (PatternKind::Random, Density::ScrambledZipf { exponent }) => {
                f.kind = KindName::ScrambledZipf;
                f.exponent = Some(exponent);
            }
            (
                PatternKind::Random,
                Density::Latest {
                    exponent,
                    newer_pages,
                },
            ) => {
                f.kind = KindName::Latest;
                (f.exponent, f.newer_pages) = (Some(exponent), Some(newer_pages));
            }
        }
        f
    }
}

fn serde_name(k: KindName) -> &'static str {
    match k {
        KindName::Random => "random",
        KindName::Sequential => "sequential",
        KindName::Hotspot => "hotspot",
        KindName::Gaussian => "gaussian",
        KindName::Zipf => "zipf",
        KindName::ScrambledZipf => "scrambled-zipf",
        KindName::Latest => "latest",
    }
}

fn default_stride() -> Size {
    Size(4096)
}
fn default_weight() -> u32 {
    1
}
fn default_mode() -> AccessMode {
    AccessMode::Wo
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    pub name: String,
    pub duration: Duration,
    pub patterns: Vec<PatternSpec>,
}

/// A MASIM workload: named regions and a sequence of phases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    pub regions: Vec<RegionSpec>,
    pub phases: Vec<PhaseSpec>,
}

/// A workload that cannot be used: the field path and why (MASIM parse errors also carry
/// the file and line).
pub type SpecError = FieldError;

impl WorkloadSpec {
    /// Total bytes of all regions (at most [`MAX_HEAP`] in a validated spec; saturating
    /// otherwise).
    pub fn total_size(&self) -> u64 {
        self.regions
            .iter()
            .fold(0u64, |sum, r| sum.saturating_add(r.size.0))
    }

    /// Duration of one pass over all phases (at most [`MAX_DURATION_NS`] in a validated
    /// spec; saturating otherwise).
    pub fn phases_duration(&self) -> Nanos {
        self.phases
            .iter()
            .fold(0u64, |sum, p| sum.saturating_add(p.duration.0))
    }

    /// Index of the region named `name` (a linear search: for many lookups, see
    /// [`WorkloadSpec::region_indices`]).
    pub fn region_index(&self, name: &str) -> Option<usize> {
        self.regions.iter().position(|r| r.name == name)
    }

    /// Every region's index by name (the first of a name defined twice).
    pub fn region_indices(&self) -> HashMap<&str, usize> {
        let mut map = HashMap::with_capacity(self.regions.len());
        for (i, r) in self.regions.iter().enumerate() {
            map.entry(r.name.as_str()).or_insert(i);
        }
        map
    }

    /// Checks references, values and the limits of docs/reference/EXPERIMENTS.md ("Limits"); errors
    /// name the field path. Linear in the size of the spec.
    pub fn validate(&self) -> Result<(), SpecError> {
        let err = |field: String, message: String| SpecError {
            file: None,
            line: None,
            field,
            message,
        };
        if self.regions.is_empty() {
            return Err(err("regions".into(), "no regions defined".into()));
        }
        if self.regions.len() > MAX_REGIONS {
            return Err(err(
                "regions".into(),
                format!(
                    "{} regions: more than the limit of {MAX_REGIONS}",
                    self.regions.len()
                ),
            ));
        }
        let mut names: HashMap<&str, usize> = HashMap::with_capacity(self.regions.len());
        // Each region is rounded up to 2 MiB in the address space; the sum is checked.
        let mut heap: u64 = 0;
        for (i, r) in self.regions.iter().enumerate() {
            if r.size.0 == 0 {
                return Err(err(format!("regions[{i}].size"), "must be positive".into()));
            }
            if names.insert(r.name.as_str(), i).is_some() {
                return Err(err(
                    format!("regions[{i}].name"),
                    format!("region `{}` is defined twice", r.name),
                ));
            }
            heap = r
                .size
                .0
                .checked_next_multiple_of(2 << 20)
                .and_then(|s| heap.checked_add(s))
                .filter(|&h| h <= MAX_HEAP)
                .ok_or_else(|| {
                    err(
                        format!("regions[{i}].size"),
                        format!(
                            "the regions up to this one take more than the limit of {}                              ({} bytes, each region rounded up to 2 MiB)",
                            human_bytes(MAX_HEAP),
                            MAX_HEAP
                        ),
                    )
                })?;
        }
        if self.phases.is_empty() {
            return Err(err("phases".into(), "no phases defined".into()));
        }
        if self.phases.len() > MAX_PHASES {
            return Err(err(
                "phases".into(),
                format!(
                    "{} phases: more than the limit of {MAX_PHASES}",
                    self.phases.len()
                ),
            ));
        }
        let mut pass: u64 = 0;
        let mut patterns = 0usize;
        for (p, phase) in self.phases.iter().enumerate() {
            if phase.duration.0 == 0 {
                return Err(err(
                    format!("phases[{p}].duration"),
                    "must be positive".into(),
                ));
            }
            pass = pass
                .checked_add(phase.duration.0)
                .filter(|&d| d <= MAX_DURATION_NS)
                .ok_or_else(|| {
                    err(
                        format!("phases[{p}].duration"),
                        format!(
                            "the phases up to this one last more than the limit of 30 days                              ({MAX_DURATION_NS} ns)"
                        ),
                    )
                })?;
            patterns = patterns.saturating_add(phase.patterns.len());
            if patterns > MAX_PATTERNS {
                return Err(err(
                    format!("phases[{p}].patterns"),
                    format!("the phases up to this one have more than {MAX_PATTERNS} patterns"),
                ));
            }
            if phase.patterns.iter().all(|pat| pat.weight == 0) {
                return Err(err(
                    format!("phases[{p}].patterns"),
                    format!(
                        "phase `{}` has no pattern with a positive weight",
                        phase.name
                    ),
                ));
            }
            for (i, pat) in phase.patterns.iter().enumerate() {
                let Some(&r) = names.get(pat.region.as_str()) else {
                    return Err(err(
                        format!("phases[{p}].patterns[{i}].region"),
                        format!("unknown region `{}`", pat.region),
                    ));
                };
                if pat.kind == PatternKind::Sequential && pat.stride.0 == 0 {
                    return Err(err(
                        format!("phases[{p}].patterns[{i}].stride"),
                        "a sequential pattern needs a positive stride".into(),
                    ));
                }
                // Past its region a stride wraps: it would walk as `stride mod size`.
                let size = self.regions[r].size.0;
                if pat.kind == PatternKind::Sequential && pat.stride.0 > size {
                    return Err(err(
                        format!("phases[{p}].patterns[{i}].stride"),
                        format!(
                            "{} bytes is more than region `{}` ({size} bytes)",
                            pat.stride.0, pat.region
                        ),
                    ));
                }
                if pat.stride.0 > MAX_HEAP {
                    return Err(err(
                        format!("phases[{p}].patterns[{i}].stride"),
                        format!(
                            "{} bytes is more than the limit of {} ({MAX_HEAP} bytes)",
                            pat.stride.0,
                            human_bytes(MAX_HEAP)
                        ),
                    ));
                }
                if let Some((name, message)) = density_error(pat.density) {
                    return Err(err(format!("phases[{p}].patterns[{i}].{name}"), message));
                }
                let d = match pat.kind {
                    PatternKind::Random => pat.density,
                    PatternKind::Sequential => Density::Uniform,
                };
                if let Some((run, 0)) = RegionDensity::new(d, size, r).hotspot_runs() {
                    return Err(err(
                        format!("phases[{p}].patterns[{i}].hot_fraction"),
                        format!(
                            "region `{}` is one partial run of {run} pages whose hot page \
                             falls outside it: no page is hot (raise hot_fraction)",
                            pat.region
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The parameter of `d` that is out of range, and why.
fn density_error(d: Density) -> Option<(&'static str, String)> {
    let bad = |name: &'static str, range: &str, v: f64| {
        Some((name, format!("must be in {range}, got {v}")))
    };
    match d {
        Density::Uniform => None,
        Density::Hotspot { hot_fraction: f } if !(f > 0.0 && f <= 1.0) => {
            bad("hot_fraction", "(0, 1]", f)
        }
        Density::Hotspot { .. } => None,
        // Wider than the region is close to uniform and would make the truncated normal's
        // rejection sampling slow: use `random` for that.
        Density::Gaussian { sigma, .. } if !(sigma > 0.0 && sigma <= 1.0) => {
            bad("sigma", "(0, 1] (a fraction of the region size)", sigma)
        }
        Density::Gaussian { mean, .. } if !(0.0..=1.0).contains(&mean) => {
            bad("mean", "[0, 1] (a fraction of the region size)", mean)
        }
        Density::Gaussian { .. } => None,
        Density::Zipf { exponent }
        | Density::ScrambledZipf { exponent }
        | Density::Latest { exponent, .. }
            if !(exponent > 0.0 && exponent.is_finite()) =>
        {
            bad("exponent", "(0, inf)", exponent)
        }
        // Ranks stay far below 2^53, where f64 still counts them one by one.
        Density::Latest { newer_pages, .. } if newer_pages > MAX_NEWER_PAGES => Some((
            "newer_pages",
            format!("must be at most {MAX_NEWER_PAGES}, got {newer_pages}"),
        )),
        Density::Zipf { .. } | Density::ScrambledZipf { .. } | Density::Latest { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::parse_masim;

    #[test]
    fn density_parameters_are_range_checked() {
        let spec = |d: Density| {
            let mut w = parse_masim("a, 1GiB\n\np\n10\na, 1, 4096, 1\n").unwrap();
            w.phases[0].patterns[0].density = d;
            w.validate()
        };
        assert!(spec(Density::Hotspot { hot_fraction: 0.01 }).is_ok());
        let e = spec(Density::Hotspot { hot_fraction: 0.0 }).unwrap_err();
        assert_eq!(e.field, "phases[0].patterns[0].hot_fraction");
        let e = spec(Density::Hotspot { hot_fraction: 1.5 }).unwrap_err();
        assert!(e.message.contains("(0, 1]"), "{e}");
        let e = spec(Density::Gaussian {
            mean: 0.5,
            sigma: -1.0,
        })
        .unwrap_err();
        assert_eq!(e.field, "phases[0].patterns[0].sigma");
        let e = spec(Density::Gaussian {
            mean: 1.2,
            sigma: 0.1,
        })
        .unwrap_err();
        assert_eq!(e.field, "phases[0].patterns[0].mean");
        let e = spec(Density::Zipf { exponent: 0.0 }).unwrap_err();
        assert_eq!(e.field, "phases[0].patterns[0].exponent");
        // A region smaller than one run may hold no hot page at all.
        let tiny = (0..64)
            .map(|r| RegionDensity::new(Density::Hotspot { hot_fraction: 1e-6 }, 4096 * 10, r))
            .filter(|d| d.hotspot_runs() == Some((1_000_000, 0)))
            .count();
        assert!(tiny > 50, "{tiny}");
        let e = spec(Density::Hotspot { hot_fraction: 1e-9 }).unwrap_err();
        assert!(e.message.contains("no page is hot"), "{e}");
    }
}
