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
//!   order (YCSB scrambles the ranks over the key space; that is not modelled yet: here
//!   the hottest keys are the first ones);
//! - `hotspot`: `hot_ops` of the operations on the first `hot_data` of the keys (YCSB's
//!   hotspot generator picks the hot keys as one contiguous range of key numbers);
//! - `gaussian`: memtier's `G:G` pattern, median key in the middle and standard deviation
//!   `stddev` of the key range (memtier's default is 1/6).
//!
//! With `shift_at`, the hot keys of `hotspot` move to the next disjoint range of keys at
//! that time (NEMO's FlexKVS hot-set change). docs/TIERING.md has the sources.

use super::spec::{AccessMode, Density, PatternKind, PatternSpec, PhaseSpec, RegionSpec};
use super::WorkloadSpec;
use crate::error::FieldError;
use crate::units::{Duration, Size};
use serde::{Deserialize, Serialize};

/// Bytes a cache line moves.
pub const LINE: u64 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyDistribution {
    Uniform,
    Zipfian,
    Hotspot,
    Gaussian,
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
    /// memtier's default SET:GET of 1:10.
    Memtier,
}

impl Mix {
    /// Shares of item accesses that are loads and stores.
    fn load_store(self) -> (f64, f64) {
        match self {
            Mix::YcsbA => (0.5, 0.5),
            Mix::YcsbB => (0.95, 0.05),
            Mix::YcsbC => (1.0, 0.0),
            Mix::YcsbF => (0.5, 0.5),
            Mix::Memtier => (10.0 / 11.0, 1.0 / 11.0),
        }
    }
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
}

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
        (self.header.0 + self.key_size.0 + self.value_size.0).next_multiple_of(LINE)
    }

    /// Memory accesses per operation: the bucket, and every line of the item.
    pub fn accesses_per_op(&self) -> f64 {
        let lines = (self.item_bytes() / LINE) as f64;
        // Read-modify-write touches the item twice.
        let item = if self.mix == Mix::YcsbF {
            2.0 * lines
        } else {
            lines
        };
        1.0 + item
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
        match self.distribution {
            KeyDistribution::Hotspot => {
                share(self.hot_data, "hot_data")?;
                if !(0.0..=1.0).contains(&self.hot_ops) {
                    return Err(FieldError::new("hot_ops", "expected 0 <= hot_ops <= 1"));
                }
                if self.shift_at.is_some() && self.hot_data > 0.5 {
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
            KeyDistribution::Zipfian => {
                if !(self.exponent > 0.0 && self.exponent.is_finite()) {
                    return Err(FieldError::new("exponent", "must be positive"));
                }
            }
            KeyDistribution::Uniform => {}
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

    /// Regions and phases.
    pub fn to_spec(&self) -> WorkloadSpec {
        let item = self.item_bytes();
        let per_op = self.accesses_per_op();
        let bucket_share = 1.0 / per_op;
        let item_share = 1.0 - bucket_share;
        let (loads, stores) = self.mix.load_store();
        let buckets = RegionSpec {
            name: "buckets".into(),
            size: Size((self.keys * 8).next_multiple_of(4096)),
        };
        let keys_bytes = |k: u64| Size(k * item);
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
                let hot = ((self.keys as f64 * self.hot_data).round() as u64).max(1);
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
        let spec = k.to_spec();
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
        let spec = k.to_spec();
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
        let spec = k.to_spec();
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
}
