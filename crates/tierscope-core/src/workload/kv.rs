//! Key-value workloads (memcached / Redis-like stores driven by YCSB or memtier) and GUPS,
//! written as the load generators' parameters and turned into regions and phases.
//!
//! The object model: a hash table of 8-byte bucket pointers (one load per operation,
//! uniformly over the table, as a hash spreads keys) and the items, allocated in key order
//! (the load phase inserts keys in order, so a range of key numbers is a range of
//! memory), each `header + key + value` bytes rounded up to a cache line. An operation
//! touches its bucket and every line of its item: a GET loads them, a SET stores them.
//! Which item an operation touches follows the key distribution:
//! - `uniform`;
//! - `zipfian`: key `k` with probability proportional to `1 / (k + 1)^exponent`, in key
//!   order (the hottest keys are the first ones);
//! - `scrambled-zipfian`: YCSB's default for A-C and E: the same ranks hashed over the key
//!   space (4 KiB pages, `Density::ScrambledZipf`), so the hot keys are scattered;
//! - `latest`: YCSB D's: the newest key is the hottest, zipf over recency
//!   (`Density::Latest`, anchored at the newest inserted item);
//! - `hotspot`: `hot_ops` of the operations on the first `hot_data` of the keys (YCSB's
//!   hotspot generator picks the hot keys as one contiguous range of key numbers);
//! - `gaussian`: memtier's `G:G` pattern, median key in the middle and standard deviation
//!   `stddev` of the key range (memtier's default is 1/6).
//!
//! With `shift_at`, the hot keys of `hotspot` move to the next disjoint range of keys at
//! that time (NEMO's FlexKVS hot-set change).
//!
//! Mixes that insert (`ycsb-d`, `ycsb-e`) write new items after the loaded ones, in key
//! order. The run is cut into `insert_steps` equal phases, each inserting into a region of
//! its own (a sequential store sweep over the step's new items, as many as the step's
//! share of inserts at the workload's operation rate); under `latest` the reads of step
//! `i` follow a zipf anchored at the newest item inserted before the step, so the hot end
//! advances step by step. Other distributions keep drawing from the loaded keys. YCSB E's
//! scans read `1..=max_scan` consecutive items (uniform): the accesses per operation
//! count the mean scan, and the scanned items are drawn from the start key's density (the
//! smear of a start over the next items is not modelled). docs/models/TIERING.md has the
//! sources.

use super::density::{zipf_weight, DENSITY_PAGE};
use super::spec::{AccessMode, Density, PatternKind, PatternSpec, PhaseSpec, RegionSpec};
use super::WorkloadSpec;
use crate::error::FieldError;
use crate::limits::{human_bytes, MAX_HEAP};
use crate::units::{Duration, Size};
use serde::{Deserialize, Serialize};

/// Bytes a cache line moves.
pub const LINE: u64 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyDistribution {
    Uniform,
    Zipfian,
    #[serde(rename = "scrambled-zipfian")]
    ScrambledZipfian,
    Hotspot,
    Gaussian,
    Latest,
}

/// The read share of each operation mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// YCSB A: 50 % reads, 50 % updates.
    YcsbA,
    /// YCSB B: 95 % reads.
    YcsbB,
    /// YCSB C: reads only.
    YcsbC,
    /// YCSB F: read-modify-write (every operation reads then writes its item).
    YcsbF,
    /// YCSB D: 95 % reads, 5 % inserts of new keys.
    YcsbD,
    /// YCSB E: 95 % scans of 1 to `max_scan` consecutive items, 5 % inserts.
    YcsbE,
    /// memtier's default SET:GET of 1:10.
    Memtier,
}

/// Shares of the operations of a mix (they sum to 1).
#[derive(Debug, Clone, Copy, Default)]
struct Ops {
    read: f64,
    update: f64,
    /// Read-modify-write: the item read then written.
    rmw: f64,
    scan: f64,
    insert: f64,
}

impl Mix {
    /// YCSB's core workloads (`workloads/workloada` to `workloadf`) and memtier's ratio.
    fn ops(self) -> Ops {
        let o = Ops::default();
        match self {
            Mix::YcsbA => Ops {
                read: 0.5,
                update: 0.5,
                ..o
            },
            Mix::YcsbB => Ops {
                read: 0.95,
                update: 0.05,
                ..o
            },
            Mix::YcsbC => Ops { read: 1.0, ..o },
            Mix::YcsbD => Ops {
                read: 0.95,
                insert: 0.05,
                ..o
            },
            Mix::YcsbE => Ops {
                scan: 0.95,
                insert: 0.05,
                ..o
            },
            Mix::YcsbF => Ops { rmw: 1.0, ..o },
            Mix::Memtier => Ops {
                read: 10.0 / 11.0,
                update: 1.0 / 11.0,
                ..o
            },
        }
    }

    /// Whether operations add new keys.
    pub fn inserts(self) -> bool {
        self.ops().insert > 0.0
    }
}

/// Item lines an operation mix touches per operation: loads and stores of existing items,
/// stores of new ones.
#[derive(Debug, Clone, Copy)]
struct Lines {
    loads: f64,
    stores: f64,
    inserts: f64,
}

/// `[workload.kv]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvSpec {
    pub keys: u64,
    pub value_size: Size,
    #[serde(default = "default_key_size")]
    pub key_size: Size,
    /// Item header bytes (memcached's item header is 48-56 bytes).
    #[serde(default = "default_header")]
    pub header: Size,
    pub mix: Mix,
    pub distribution: KeyDistribution,
    #[serde(default = "default_hot_data")]
    pub hot_data: f64,
    #[serde(default = "default_hot_ops")]
    pub hot_ops: f64,
    /// Gaussian: standard deviation as a share of the key range.
    #[serde(default = "default_stddev")]
    pub stddev: f64,
    #[serde(default = "default_exponent")]
    pub exponent: f64,
    pub duration: Duration,
    #[serde(default)]
    pub shift_at: Option<Duration>,
    /// Longest scan of `ycsb-e`, in items (YCSB's `maxscanlength` in workloade: 100);
    /// lengths are uniform in `1..=max_scan` (`scanlengthdistribution=uniform`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_scan: Option<u64>,
    /// Phases a run that inserts is cut into (default 10): the inserted items fill one
    /// region per step, and `latest`'s hot end moves once per step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insert_steps: Option<u32>,
}

/// `max_scan` when not given (YCSB's workloade).
pub const DEFAULT_MAX_SCAN: u64 = 100;
/// `insert_steps` when not given.
pub const DEFAULT_INSERT_STEPS: u32 = 10;
/// Most `insert_steps` (step `i` of a `latest` run has `i + 1` item regions to read).
pub const MAX_INSERT_STEPS: u32 = 100;

fn default_key_size() -> Size {
    Size(32)
}
fn default_header() -> Size {
    Size(56)
}
fn default_hot_data() -> f64 {
    0.2
}
fn default_hot_ops() -> f64 {
    0.8
}
fn default_stddev() -> f64 {
    1.0 / 6.0
}
fn default_exponent() -> f64 {
    0.99
}

/// GUPS as HeMem and Colloid run it: random 8-byte read-modify-writes over a field, a
/// share of them on a hot set at the field's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GupsSpec {
    pub size: Size,
    pub hot_size: Size,
    #[serde(default = "default_gups_hot_ops")]
    pub hot_ops: f64,
    pub duration: Duration,
}

fn default_gups_hot_ops() -> f64 {
    0.9
}

/// Weight units per access-share: weights are integers.
const WEIGHT: f64 = 1_000_000.0;

fn weight(share: f64) -> u32 {
    (share * WEIGHT).round() as u32
}

fn random(region: &str, density: Density, w: f64, mode: AccessMode) -> Option<PatternSpec> {
    let weight = weight(w);
    (weight > 0).then(|| PatternSpec {
        region: region.into(),
        kind: PatternKind::Random,
        density,
        stride: Size(4096),
        weight,
        mode,
    })
}

fn share(v: f64, field: &str) -> Result<(), FieldError> {
    if !(v > 0.0 && v < 1.0) {
        return Err(FieldError::new(
            field,
            format!("expected 0 < {field} < 1, got {v}"),
        ));
    }
    Ok(())
}

impl KvSpec {
    /// Bytes of one item, whole cache lines.
    pub fn item_bytes(&self) -> u64 {
        // Saturating: validate() refuses items whose keys do not fit the heap limit.
        self.header
            .0
            .saturating_add(self.key_size.0)
            .saturating_add(self.value_size.0)
            .checked_next_multiple_of(LINE)
            .unwrap_or(u64::MAX)
    }

    /// Keys of the hot set of a hotspot distribution.
    fn hot_keys(&self) -> u64 {
        ((self.keys as f64 * self.hot_data).round() as u64).max(1)
    }

    /// Memory accesses per operation: the bucket (a scan's start key), and every line of
    /// the items it touches (a read-modify-write touches its item twice, a scan the mean
    /// of its uniform length).
    pub fn accesses_per_op(&self) -> f64 {
        let l = self.lines();
        1.0 + l.loads + l.stores + l.inserts
    }

    fn lines(&self) -> Lines {
        let n = (self.item_bytes() / LINE) as f64;
        let o = self.mix.ops();
        let mean_scan = (1 + self.max_scan.unwrap_or(DEFAULT_MAX_SCAN)) as f64 / 2.0;
        Lines {
            loads: (o.read + o.rmw + o.scan * mean_scan) * n,
            stores: (o.update + o.rmw) * n,
            inserts: o.insert * n,
        }
    }

    /// Field paths relative to the `kv` table.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.keys < 2 {
            return Err(FieldError::new("keys", "at least 2 keys are needed"));
        }
        if self.value_size.0 == 0 {
            return Err(FieldError::new("value_size", "must be positive"));
        }
        if self.duration.0 == 0 {
            return Err(FieldError::new("duration", "must be positive"));
        }
        // The loaded items and their buckets within the heap limit, multiplied checked
        // (they wrapped around before: a huge value_size or key count made a small heap).
        let items = self.keys.checked_mul(self.item_bytes());
        let buckets = self.keys.checked_mul(8);
        if items.is_none_or(|b| b > MAX_HEAP) || buckets.is_none_or(|b| b > MAX_HEAP) {
            return Err(FieldError::new(
                "keys",
                format!(
                    "{} keys of {} bytes are more than the heap limit of {}",
                    self.keys,
                    self.item_bytes(),
                    human_bytes(MAX_HEAP)
                ),
            ));
        }
        match self.distribution {
            KeyDistribution::Hotspot => {
                share(self.hot_data, "hot_data")?;
                if !(0.0..=1.0).contains(&self.hot_ops) {
                    return Err(FieldError::new("hot_ops", "expected 0 <= hot_ops <= 1"));
                }
                // Rounded, two hot sets of few keys could overlap (3 keys, 0.5: 2 + 2).
                if self.shift_at.is_some()
                    && (self.hot_data > 0.5 || 2 * self.hot_keys() > self.keys)
                {
                    return Err(FieldError::new(
                        "shift_at",
                        "the hot set moves to the next disjoint key range: hot_data must be at \
                         most 0.5",
                    ));
                }
            }
            KeyDistribution::Gaussian => {
                if !(self.stddev > 0.0 && self.stddev <= 1.0) {
                    return Err(FieldError::new("stddev", "expected 0 < stddev <= 1"));
                }
            }
            KeyDistribution::Zipfian
            | KeyDistribution::ScrambledZipfian
            | KeyDistribution::Latest => {
                if !(self.exponent > 0.0 && self.exponent.is_finite()) {
                    return Err(FieldError::new("exponent", "must be positive"));
                }
            }
            KeyDistribution::Uniform => {}
        }
        if let Some(n) = self.max_scan {
            if self.mix != Mix::YcsbE {
                return Err(FieldError::new(
                    "max_scan",
                    "only ycsb-e scans (mix = \"ycsb-e\")",
                ));
            }
            if !(1..=1_000_000).contains(&n) {
                return Err(FieldError::new(
                    "max_scan",
                    format!("expected 1 to 1000000 items, got {n}"),
                ));
            }
        }
        if let Some(n) = self.insert_steps {
            if !self.mix.inserts() {
                return Err(FieldError::new(
                    "insert_steps",
                    "only mixes that insert have steps (ycsb-d, ycsb-e)",
                ));
            }
            if !(1..=MAX_INSERT_STEPS).contains(&n) {
                return Err(FieldError::new(
                    "insert_steps",
                    format!("expected 1 to {MAX_INSERT_STEPS}, got {n}"),
                ));
            }
        }
        if let Some(t) = self.shift_at {
            if self.distribution != KeyDistribution::Hotspot {
                return Err(FieldError::new(
                    "shift_at",
                    "only a hotspot's hot set can move (distribution = \"hotspot\")",
                ));
            }
            if t.0 == 0 || t.0 >= self.duration.0 {
                return Err(FieldError::new("shift_at", "must fall inside the duration"));
            }
        }
        Ok(())
    }

    /// Regions and phases; `ops_per_second` (all threads) sets how many keys a mix that
    /// inserts adds.
    pub fn to_spec(&self, ops_per_second: f64) -> WorkloadSpec {
        let loaded = self.loaded_spec();
        if self.mix.inserts() {
            self.with_inserts(loaded, ops_per_second)
        } else {
            loaded
        }
    }

    /// The operations on the loaded keys: the whole workload unless the mix inserts.
    fn loaded_spec(&self) -> WorkloadSpec {
        let item = self.item_bytes();
        let per_op = self.accesses_per_op();
        let lines = self.lines();
        let bucket_share = 1.0 / per_op;
        let item_share = (lines.loads + lines.stores) / per_op;
        let loads = lines.loads / (lines.loads + lines.stores);
        let stores = 1.0 - loads;
        let buckets = RegionSpec {
            name: "buckets".into(),
            size: Size((self.keys * 8).next_multiple_of(4096)),
        };
        // Within the heap limit for the loaded keys (validate); saturating for others.
        let keys_bytes = |k: u64| Size(k.saturating_mul(item));
        // Item patterns over `region` with `density`, carrying `w` of the item accesses.
        let items = |out: &mut Vec<PatternSpec>, region: &str, density: Density, w: f64| {
            out.extend(random(
                region,
                density,
                item_share * w * loads,
                AccessMode::Ro,
            ));
            out.extend(random(
                region,
                density,
                item_share * w * stores,
                AccessMode::Wo,
            ));
        };
        let bucket = || random("buckets", Density::Uniform, bucket_share, AccessMode::Ro);
        let phase = |name: &str, duration: u64, patterns: Vec<PatternSpec>| PhaseSpec {
            name: name.into(),
            duration: Duration(duration),
            patterns,
        };
        match self.distribution {
            KeyDistribution::Hotspot => {
                let hot = self.hot_keys();
                let mut regions = vec![
                    buckets,
                    RegionSpec {
                        name: "items_hot".into(),
                        size: keys_bytes(hot),
                    },
                ];
                let shifted = self.shift_at.is_some();
                if shifted {
                    regions.push(RegionSpec {
                        name: "items_next".into(),
                        size: keys_bytes(hot),
                    });
                }
                let rest = self.keys - hot * (1 + shifted as u64);
                if rest > 0 {
                    regions.push(RegionSpec {
                        name: "items_rest".into(),
                        size: keys_bytes(rest),
                    });
                }
                // Hot ops on `hot`; the others uniformly over every other key.
                let patterns_for = |hot_region: &str, cold: &[(&str, u64)]| {
                    let mut p: Vec<PatternSpec> = bucket().into_iter().collect();
                    items(&mut p, hot_region, Density::Uniform, self.hot_ops);
                    let cold_keys: u64 = cold.iter().map(|c| c.1).sum();
                    for &(r, k) in cold {
                        let w = (1.0 - self.hot_ops) * k as f64 / cold_keys.max(1) as f64;
                        items(&mut p, r, Density::Uniform, w);
                    }
                    p
                };
                let phases = match self.shift_at {
                    None => vec![phase(
                        "run",
                        self.duration.0,
                        patterns_for("items_hot", &[("items_rest", rest)]),
                    )],
                    Some(t) => vec![
                        phase(
                            "before-shift",
                            t.0,
                            patterns_for("items_hot", &[("items_next", hot), ("items_rest", rest)]),
                        ),
                        phase(
                            "after-shift",
                            self.duration.0 - t.0,
                            patterns_for("items_next", &[("items_hot", hot), ("items_rest", rest)]),
                        ),
                    ],
                };
                let phases = phases
                    .into_iter()
                    .map(|mut ph| {
                        ph.patterns
                            .retain(|p| regions.iter().any(|r| r.name == p.region));
                        ph
                    })
                    .collect();
                WorkloadSpec { regions, phases }
            }
            d => {
                let density = match d {
                    KeyDistribution::Uniform => Density::Uniform,
                    KeyDistribution::Zipfian => Density::Zipf {
                        exponent: self.exponent,
                    },
                    KeyDistribution::ScrambledZipfian => Density::ScrambledZipf {
                        exponent: self.exponent,
                    },
                    // The newest loaded key is the hottest; `with_inserts` re-anchors it.
                    KeyDistribution::Latest => Density::Latest {
                        exponent: self.exponent,
                        newer_pages: 0,
                    },
                    KeyDistribution::Gaussian => Density::Gaussian {
                        mean: 0.5,
                        sigma: self.stddev,
                    },
                    KeyDistribution::Hotspot => unreachable!("handled above"),
                };
                let mut p: Vec<PatternSpec> = bucket().into_iter().collect();
                items(&mut p, "items", density, 1.0);
                WorkloadSpec {
                    regions: vec![
                        buckets,
                        RegionSpec {
                            name: "items".into(),
                            size: keys_bytes(self.keys),
                        },
                    ],
                    phases: vec![phase("run", self.duration.0, p)],
                }
            }
        }
    }

    /// Cuts the run into `insert_steps` equal steps (and `loaded`'s phases): step `k`
    /// stores its new items sequentially into region `inserts_k`, and under `latest` the
    /// reads of the loaded keys become a zipf over every item inserted before the step,
    /// anchored at the newest.
    fn with_inserts(&self, loaded: WorkloadSpec, ops_per_second: f64) -> WorkloadSpec {
        let steps = u64::from(self.insert_steps.unwrap_or(DEFAULT_INSERT_STEPS));
        let total = self.duration.0;
        let bound = |k: u64| (total as u128 * k as u128 / steps as u128) as u64;
        let item = self.item_bytes();
        let insert_share = self.lines().inserts / self.accesses_per_op();
        let mut regions = loaded.regions.clone();
        for k in 0..steps {
            let secs = (bound(k + 1) - bound(k)) as f64 / 1e9;
            let keys = (ops_per_second * secs * self.mix.ops().insert).round() as u64;
            regions.push(RegionSpec {
                name: format!("inserts_{k}"),
                // Saturating: a size past the heap limit is refused by the spec's check.
                size: Size(keys.max(1).saturating_mul(item)),
            });
        }
        let pages = |name: &str| {
            let r = regions.iter().find(|r| r.name == name).expect("a region");
            r.size.0.div_ceil(DENSITY_PAGE)
        };
        let mut phases = vec![];
        let mut start = 0;
        for ph in &loaded.phases {
            let end = start + ph.duration.0;
            for k in 0..steps {
                let (a, b) = (start.max(bound(k)), end.min(bound(k + 1)));
                if b <= a {
                    continue;
                }
                // Items newest first: the earlier steps' inserts, then the loaded keys.
                let mut newest_first: Vec<String> =
                    (0..k).rev().map(|j| format!("inserts_{j}")).collect();
                newest_first.push("items".into());
                let mut patterns = vec![];
                for p in &ph.patterns {
                    match p.density {
                        Density::Latest { exponent, .. } => {
                            patterns.extend(latest_over(p, exponent, &newest_first, &pages))
                        }
                        _ => patterns.push(p.clone()),
                    }
                }
                let w = weight(insert_share);
                if w > 0 {
                    patterns.push(PatternSpec {
                        region: format!("inserts_{k}"),
                        kind: PatternKind::Sequential,
                        density: Density::Uniform,
                        stride: Size(LINE),
                        weight: w,
                        mode: AccessMode::Wo,
                    });
                }
                phases.push(PhaseSpec {
                    name: format!("{} step {k}", ph.name),
                    duration: Duration(b - a),
                    patterns,
                });
            }
            start = end;
        }
        WorkloadSpec { regions, phases }
    }
}

/// `p` (a latest pattern over the loaded items) spread over the regions `newest_first`
/// as one zipf whose rank 0 is the newest region's last page: each region gets the ranks
/// after its newer regions' pages and the weight of those ranks.
fn latest_over(
    p: &PatternSpec,
    exponent: f64,
    newest_first: &[String],
    pages: &impl Fn(&str) -> u64,
) -> Vec<PatternSpec> {
    let mut newer = 0;
    let parts: Vec<(&String, u64, f64)> = newest_first
        .iter()
        .map(|r| {
            let n = pages(r);
            let part = (r, newer, zipf_weight(exponent, newer, n));
            newer += n;
            part
        })
        .collect();
    let sum: f64 = parts.iter().map(|x| x.2).sum();
    parts
        .into_iter()
        .filter_map(|(r, newer_pages, w)| {
            let weight = (p.weight as f64 * w / sum).round() as u32;
            (weight > 0).then(|| PatternSpec {
                region: r.clone(),
                density: Density::Latest {
                    exponent,
                    newer_pages,
                },
                weight,
                ..p.clone()
            })
        })
        .collect()
}

impl GupsSpec {
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.hot_size.0 == 0 || self.hot_size.0 >= self.size.0 {
            return Err(FieldError::new(
                "hot_size",
                "must be positive and smaller than size",
            ));
        }
        if !(0.0..=1.0).contains(&self.hot_ops) {
            return Err(FieldError::new("hot_ops", "expected 0 <= hot_ops <= 1"));
        }
        if self.duration.0 == 0 {
            return Err(FieldError::new("duration", "must be positive"));
        }
        Ok(())
    }

    /// Two regions, hot first; each update loads and stores its word.
    pub fn to_spec(&self) -> WorkloadSpec {
        let mut patterns = vec![];
        patterns.extend(random(
            "hot",
            Density::Uniform,
            self.hot_ops,
            AccessMode::Rw,
        ));
        patterns.extend(random(
            "cold",
            Density::Uniform,
            1.0 - self.hot_ops,
            AccessMode::Rw,
        ));
        WorkloadSpec {
            regions: vec![
                RegionSpec {
                    name: "hot".into(),
                    size: self.hot_size,
                },
                RegionSpec {
                    name: "cold".into(),
                    size: Size(self.size.0 - self.hot_size.0),
                },
            ],
            phases: vec![PhaseSpec {
                name: "run".into(),
                duration: self.duration,
                patterns,
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(distribution: KeyDistribution, mix: Mix) -> KvSpec {
        KvSpec {
            keys: 1000,
            value_size: Size(4000),
            key_size: Size(32),
            header: Size(56),
            mix,
            distribution,
            hot_data: 0.01,
            hot_ops: 0.99,
            stddev: 1.0 / 6.0,
            exponent: 0.99,
            duration: Duration(10_000_000_000),
            shift_at: None,
            max_scan: None,
            insert_steps: None,
        }
    }

    fn shares(spec: &WorkloadSpec, phase: usize) -> Vec<(String, AccessMode, f64)> {
        let ps = &spec.phases[phase].patterns;
        let total: f64 = ps.iter().map(|p| p.weight as f64).sum();
        ps.iter()
            .map(|p| (p.region.clone(), p.mode, p.weight as f64 / total))
            .collect()
    }

    #[test]
    fn items_are_whole_lines_and_ops_touch_bucket_and_item() {
        let k = kv(KeyDistribution::Uniform, Mix::YcsbC);
        // 56 + 32 + 4000 bytes, rounded up to a line.
        assert_eq!(k.item_bytes(), 4096);
        assert_eq!(k.accesses_per_op(), 1.0 + (k.item_bytes() / 64) as f64);
        let spec = k.to_spec(1000.0);
        spec.validate().unwrap();
        assert_eq!(spec.regions[1].size.0, 1000 * k.item_bytes());
        let s = shares(&spec, 0);
        assert!((s[0].2 - 1.0 / k.accesses_per_op()).abs() < 1e-6, "{s:?}");
        assert!(
            s.iter().skip(1).all(|p| p.1 == AccessMode::Ro),
            "C only reads"
        );
    }

    #[test]
    fn hotspot_puts_hot_ops_on_the_first_keys_and_shifts() {
        let mut k = kv(KeyDistribution::Hotspot, Mix::YcsbB);
        let spec = k.to_spec(1000.0);
        spec.validate().unwrap();
        assert_eq!(spec.regions[1].name, "items_hot");
        assert_eq!(spec.regions[1].size.0, 10 * k.item_bytes());
        let s = shares(&spec, 0);
        let on = |r: &str| s.iter().filter(|p| p.0 == r).map(|p| p.2).sum::<f64>();
        let items = 1.0 - 1.0 / k.accesses_per_op();
        assert!((on("items_hot") - 0.99 * items).abs() < 1e-5);
        assert!((on("items_rest") - 0.01 * items).abs() < 1e-5);
        let stores: f64 = s
            .iter()
            .filter(|p| p.1 == AccessMode::Wo)
            .map(|p| p.2)
            .sum();
        assert!((stores - 0.05 * items).abs() < 1e-5, "B updates 5%");
        k.shift_at = Some(Duration(4_000_000_000));
        let spec = k.to_spec(1000.0);
        spec.validate().unwrap();
        assert_eq!(spec.phases.len(), 2);
        assert_eq!(
            spec.phases[0].duration.0 + spec.phases[1].duration.0,
            10_000_000_000
        );
        let after = shares(&spec, 1);
        let hot_after: f64 = after
            .iter()
            .filter(|p| p.0 == "items_next")
            .map(|p| p.2)
            .sum();
        assert!((hot_after - 0.99 * items).abs() < 1e-5);
    }

    #[test]
    fn bad_kv_input_names_the_field() {
        let mut k = kv(KeyDistribution::Gaussian, Mix::Memtier);
        k.shift_at = Some(Duration(1));
        assert_eq!(k.validate().unwrap_err().field, "shift_at");
        let mut k = kv(KeyDistribution::Hotspot, Mix::YcsbA);
        k.hot_data = 1.5;
        assert_eq!(k.validate().unwrap_err().field, "hot_data");
        let g = GupsSpec {
            size: Size(1 << 30),
            hot_size: Size(2 << 30),
            hot_ops: 0.9,
            duration: Duration(1),
        };
        assert_eq!(g.validate().unwrap_err().field, "hot_size");
    }

    /// Share of a phase's accesses on the patterns matching `f`.
    fn share_of(spec: &WorkloadSpec, phase: usize, f: impl Fn(&PatternSpec) -> bool) -> f64 {
        let ps = &spec.phases[phase].patterns;
        let total: f64 = ps.iter().map(|p| p.weight as f64).sum();
        ps.iter()
            .filter(|p| f(p))
            .map(|p| p.weight as f64)
            .sum::<f64>()
            / total
    }

    #[test]
    fn ycsb_d_reads_latest_and_inserts_five_percent() {
        let mut k = kv(KeyDistribution::Latest, Mix::YcsbD);
        k.insert_steps = Some(4);
        k.validate().unwrap();
        let lines = (k.item_bytes() / LINE) as f64;
        assert_eq!(k.accesses_per_op(), 1.0 + lines);
        // 1000 ops/s for 10 s, 5 % inserts: 500 keys, 125 per step.
        let spec = k.to_spec(1000.0);
        spec.validate().unwrap();
        assert_eq!(spec.phases.len(), 4);
        let dur: u64 = spec.phases.iter().map(|p| p.duration.0).sum();
        assert_eq!(dur, k.duration.0);
        for s in 0..4 {
            let r = &spec.regions[spec.region_index(&format!("inserts_{s}")).unwrap()];
            assert_eq!(r.size.0, 125 * k.item_bytes());
        }
        let per_op = k.accesses_per_op();
        for (step, ph) in spec.phases.iter().enumerate() {
            let inserts = share_of(&spec, step, |p| p.kind == PatternKind::Sequential);
            assert!((inserts - 0.05 * lines / per_op).abs() < 1e-5, "{inserts}");
            let reads = share_of(&spec, step, |p| {
                p.mode == AccessMode::Ro && p.region != "buckets"
            });
            assert!((reads - 0.95 * lines / per_op).abs() < 1e-5, "{reads}");
            // The step inserts into its own region, sequentially, line by line.
            let ins = ph
                .patterns
                .iter()
                .find(|p| p.kind == PatternKind::Sequential)
                .unwrap();
            assert_eq!(ins.region, format!("inserts_{step}"));
            assert_eq!((ins.stride.0, ins.mode), (LINE, AccessMode::Wo));
            // The hot end: the newest region before the step has rank 0 at its end.
            let newest = ph
                .patterns
                .iter()
                .find(|p| matches!(p.density, Density::Latest { newer_pages: 0, .. }))
                .unwrap();
            let want = if step == 0 {
                "items".to_string()
            } else {
                format!("inserts_{}", step - 1)
            };
            assert_eq!(newest.region, want);
            // Nothing reads the items not inserted yet.
            assert!(ph.patterns.iter().all(|p| {
                p.kind == PatternKind::Sequential
                    || !p.region.starts_with("inserts_")
                    || p.region[8..].parse::<usize>().unwrap() < step
            }));
        }
        // The newest step's regions take more of the reads than the loaded keys' far end.
        let last = spec.phases.len() - 1;
        let newest = share_of(&spec, last, |p| p.region == "inserts_2");
        let per_page_loaded = share_of(&spec, last, |p| p.region == "items")
            / spec.regions[1].size.0.div_ceil(4096) as f64;
        let per_page_newest = newest
            / spec.regions[spec.region_index("inserts_2").unwrap()]
                .size
                .0
                .div_ceil(4096) as f64;
        assert!(per_page_newest > 10.0 * per_page_loaded);
    }

    #[test]
    fn ycsb_e_scans_count_the_mean_length_and_insert() {
        let mut k = kv(KeyDistribution::ScrambledZipfian, Mix::YcsbE);
        let lines = (k.item_bytes() / LINE) as f64;
        // YCSB's workloade: scans of 1..=100 items, uniform: 50.5 items on average.
        let want = 1.0 + 0.95 * 50.5 * lines + 0.05 * lines;
        assert!((k.accesses_per_op() - want).abs() < 1e-9);
        k.max_scan = Some(10);
        let want = 1.0 + 0.95 * 5.5 * lines + 0.05 * lines;
        assert!((k.accesses_per_op() - want).abs() < 1e-9);
        k.validate().unwrap();
        let spec = k.to_spec(1000.0);
        spec.validate().unwrap();
        assert_eq!(spec.phases.len(), DEFAULT_INSERT_STEPS as usize);
        let per_op = k.accesses_per_op();
        let scans = share_of(&spec, 3, |p| {
            matches!(p.density, Density::ScrambledZipf { .. }) && p.mode == AccessMode::Ro
        });
        assert!((scans - 0.95 * 5.5 * lines / per_op).abs() < 1e-5);
        assert!(
            share_of(&spec, 3, |p| p.mode == AccessMode::Wo
                && p.region == "items")
                == 0.0
        );
    }

    #[test]
    fn scrambled_zipfian_keeps_zipfian_meaning_apart() {
        let z = kv(KeyDistribution::Zipfian, Mix::YcsbA).to_spec(1000.0);
        let s = kv(KeyDistribution::ScrambledZipfian, Mix::YcsbA).to_spec(1000.0);
        assert!(
            matches!(z.phases[0].patterns[1].density, Density::Zipf { exponent } if exponent == 0.99)
        );
        assert!(
            matches!(s.phases[0].patterns[1].density, Density::ScrambledZipf { exponent } if exponent == 0.99)
        );
        assert_eq!(z.regions, s.regions);
    }

    #[test]
    fn bad_scan_and_step_input_names_the_field() {
        let mut k = kv(KeyDistribution::Uniform, Mix::YcsbA);
        k.max_scan = Some(10);
        assert_eq!(k.validate().unwrap_err().field, "max_scan");
        let mut k = kv(KeyDistribution::Uniform, Mix::YcsbE);
        k.max_scan = Some(0);
        assert_eq!(k.validate().unwrap_err().field, "max_scan");
        let mut k = kv(KeyDistribution::Latest, Mix::YcsbC);
        k.insert_steps = Some(3);
        assert_eq!(k.validate().unwrap_err().field, "insert_steps");
        let mut k = kv(KeyDistribution::Latest, Mix::YcsbD);
        k.insert_steps = Some(MAX_INSERT_STEPS + 1);
        assert_eq!(k.validate().unwrap_err().field, "insert_steps");
        let mut k = kv(KeyDistribution::ScrambledZipfian, Mix::YcsbB);
        k.exponent = -1.0;
        assert_eq!(k.validate().unwrap_err().field, "exponent");
    }

    /// Issue 28: sizes that multiplied past 2^64 wrapped to small heaps, and two rounded
    /// hot sets of few keys overlapped (3 keys at 0.5 underflowed `keys - 2 hot`).
    #[test]
    fn key_counts_and_sizes_are_checked_not_wrapped() {
        let mut k = kv(KeyDistribution::Uniform, Mix::YcsbA);
        k.value_size = Size(u64::MAX);
        assert_eq!(k.validate().unwrap_err().field, "keys");
        k.value_size = Size(4000);
        k.keys = 1 << 62;
        assert_eq!(k.validate().unwrap_err().field, "keys");
        // 2^45 keys of 4 KiB: 128 PiB.
        k.keys = 1 << 45;
        assert!(k.validate().unwrap_err().message.contains("64.0 PiB"));
        let mut k = kv(KeyDistribution::Hotspot, Mix::YcsbA);
        (k.keys, k.hot_data) = (3, 0.5);
        k.shift_at = Some(Duration(1_000_000_000));
        assert_eq!(k.validate().unwrap_err().field, "shift_at");
        (k.keys, k.hot_data) = (4, 0.5);
        k.validate().unwrap();
        k.to_spec(1e6).validate().unwrap();
        // Inserts at the highest rate for 30 days saturate, and the spec refuses them.
        let mut k = kv(KeyDistribution::Latest, Mix::YcsbD);
        k.duration = Duration(crate::limits::MAX_DURATION_NS);
        k.validate().unwrap();
        assert!(k.to_spec(6.4e11).validate().is_err());
    }
}
