//! DAMOS tiering schemes with damo's meanings: `migrate_hot` / `migrate_cold` to a
//! target node (tier), access-rate, region-size and age ranges, a space quota per
//! interval, a quota goal on a node's memory use, an apply interval and filters.
//!
//! Three ways to write them, which may be mixed (`schemes` first, then `damo`, then
//! `damo_json`):
//! - `schemes`: tables (fields below; docs/techniques/DAMOS.md);
//! - `damo`: damo's own command line, read as damo 3.4.3 reads it (`args.rs`): the i-th
//!   `--damos_age` belongs to the i-th `--damos_action` wherever it is written, times and
//!   sizes in damo's units (`units.rs`: a bare `--damos_age` is microseconds, a bare
//!   `--damos_quota_interval` milliseconds, `200MB` is 200 MiB);
//! - `damo_json`: the JSON damo prints (`damo args damon --format json`: a kdamonds
//!   document, a list of schemes or one scheme; `json.rs`).
//!
//! What damo accepts and tierscope cannot model (other actions, time quotas, priority
//! weights, watermarks, most filters, ...) is refused with one line naming the option; a
//! scheme that can never match (a minimum above its maximum, an access rate above 100 %,
//! an age beyond the run, every region filtered out, a goal always met) is an error, not a
//! policy that silently does nothing.
//!
//! Like DAMON, a scheme is applied at the end of aggregation windows (every window, or
//! every apply interval), to the regions it matches, hottest first for `migrate_hot` and
//! coldest first for `migrate_cold`, until its quota for the current interval is spent.
//! Access rates become `nr_accesses` bounds and ages aggregation-interval bounds exactly as
//! damo converts them for the kernel, with the feeding monitor's intervals. One
//! simplification (docs/techniques/DAMOS.md): DAMON tunes the effective quota by feedback towards
//! the goal; here the goal gates the scheme: it applies while the goal's metric is below
//! the target.

mod args;
mod json;
pub mod units;

pub use args::parse_damo;
pub use json::parse_damo_json;

use super::{due_if, head, Policy, View};
use crate::migration::Move;
use crate::registry::{PolicyContext, PolicyTechnique};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tierscope_core::units::{format_duration, Duration, Size};
use tierscope_core::{
    AddrRange, FeedKind, FieldError, Intervals, Nanos, PolicyInput, RegionReport, Snapshot,
};
use units::ULONG_MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    MigrateHot,
    MigrateCold,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::MigrateHot => "migrate_hot",
            Action::MigrateCold => "migrate_cold",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalMetric {
    /// Used bytes of the node in basis points of its capacity.
    NodeMemUsedBp,
    /// Free bytes of the node in basis points of its capacity.
    NodeMemFreeBp,
}

impl GoalMetric {
    fn name(self) -> &'static str {
        match self {
            GoalMetric::NodeMemUsedBp => "node_mem_used_bp",
            GoalMetric::NodeMemFreeBp => "node_mem_free_bp",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    pub metric: GoalMetric,
    /// Target in basis points (10000 = 100 %).
    pub target_bp: u32,
    pub node: u8,
}

/// One end of an access-rate range: percent of the most a region can score in a window
/// (aggregation / sampling interval; damo's unit), or `nr_accesses` itself (damo's
/// `samples`). In a table a number is percent; a string is read as damo reads it
/// (`"5%"`, `"max"`, `"3 samples"`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Accesses {
    Percent(f64),
    Samples(u64),
}

/// One end of an age range: aggregation intervals, or microseconds (damo's unit on its
/// command line). In a table a number is aggregation intervals; a string is read as damo
/// reads `--damos_age` (`"5s"`, `"1500000"` microseconds, `"max"`, `"3 aggr_intervals"`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Age {
    Windows(u64),
    Micros(f64),
}

/// A DAMOS filter (damo's `--damos_filter allow|reject [none] TYPE ...`). The types that
/// can be modelled on a tierscope heap are those every page answers alike: `anon` (the
/// heap is anonymous memory) and `target` (one monitoring target, index 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// `allow` (true) or `reject` (false) the memory the filter matches.
    pub allow: bool,
    /// False for damo's `none`: the filter matches memory that is not of the type.
    #[serde(default = "yes")]
    pub matching: bool,
    #[serde(rename = "type")]
    pub kind: FilterKind,
    /// The target index of a `target` filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<u64>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterKind {
    Anon,
    Target,
}

impl Filter {
    /// Whether the filter's type describes the (all anonymous, single-target) heap.
    fn type_holds(&self) -> bool {
        match self.kind {
            FilterKind::Anon => true,
            FilterKind::Target => self.target == Some(0),
        }
    }
}

/// Whether DAMON applies the scheme to the heap's memory through `filters`: the first
/// filter that matches decides; memory no filter matches is rejected when the last filter
/// allows, and allowed when it rejects (the kernel's default of filters).
fn filters_pass(filters: &[Filter]) -> bool {
    for f in filters {
        if f.type_holds() == f.matching {
            return f.allow;
        }
    }
    filters.last().is_none_or(|f| !f.allow)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scheme {
    pub action: Action,
    /// The destination tier (damo's target node id).
    pub target: u8,
    /// Access-rate range, inclusive.
    #[serde(default = "any_rate")]
    pub access_rate: [Accesses; 2],
    /// Region size range, bytes, inclusive.
    #[serde(default = "any_size")]
    pub size: [Size; 2],
    /// Age range, inclusive.
    #[serde(default = "any_age")]
    pub age: [Age; 2],
    /// Bytes the scheme may migrate per quota interval (0: no limit).
    #[serde(default)]
    pub quota_space: Size,
    #[serde(default = "one_second")]
    pub quota_interval: Duration,
    #[serde(default)]
    pub goal: Option<Goal>,
    /// How often the scheme is applied: 0 for every aggregation window, else a multiple
    /// of the feeding monitor's aggregation interval.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub apply_interval: Duration,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Filter>,
}

fn is_zero(d: &Duration) -> bool {
    d.0 == 0
}
fn any_rate() -> [Accesses; 2] {
    [Accesses::Percent(0.0), Accesses::Percent(ULONG_MAX as f64)]
}
fn any_size() -> [Size; 2] {
    [Size(0), Size(u64::MAX)]
}
fn any_age() -> [Age; 2] {
    [Age::Micros(0.0), Age::Micros(ULONG_MAX as f64)]
}
fn one_second() -> Duration {
    Duration(1_000_000_000)
}

impl Scheme {
    /// A scheme of `action` to `target` matching everything, without quota (damo's
    /// defaults: no quota, its interval `max`).
    pub fn new(action: Action, target: u8) -> Scheme {
        Scheme {
            action,
            target,
            access_rate: any_rate(),
            size: any_size(),
            age: any_age(),
            quota_space: Size(0),
            quota_interval: Duration(u64::MAX),
            goal: None,
            apply_interval: Duration(0),
            filters: vec![],
        }
    }

    /// The `nr_accesses` and age (aggregation intervals) bounds the kernel would get from
    /// damo for this scheme under `intervals`, inclusive.
    pub fn kernel_bounds(&self, intervals: Intervals) -> ([u64; 2], [u64; 2]) {
        let b = bounds(self, intervals);
        (b.nr, b.age)
    }

    /// The scheme in the shape and units of `damo args damon --format json --raw`, for
    /// the keys tierscope models (tests compare it with damo's own output).
    pub fn damo_raw(&self) -> serde_json::Value {
        let rate = |a: Accesses| match a {
            // damo prints a percentage as `'%d %%'`: truncated.
            Accesses::Percent(p) if p >= ULONG_MAX as f64 => format!("{ULONG_MAX} %"),
            Accesses::Percent(p) => format!("{} %", p.trunc() as i128),
            Accesses::Samples(n) => format!("{n} samples"),
        };
        let age = |a: Age| match a {
            // Microseconds printed as nanoseconds (`format_time_us_exact`, raw).
            Age::Micros(u) if u >= ULONG_MAX as f64 => format!("{}", ULONG_MAX * 1000),
            Age::Micros(u) => format!("{}", (u * 1e3) as i128),
            Age::Windows(n) => format!("{n} aggr_intervals"),
        };
        let reset_ns = if self.quota_interval.0 == u64::MAX {
            // damo's `max` milliseconds, printed as nanoseconds.
            format!("{}", ULONG_MAX * 1_000_000)
        } else {
            format!("{}", self.quota_interval.0)
        };
        serde_json::json!({
            "action": self.action.name(),
            "target_nid": self.target,
            "access_pattern": {
                "sz_bytes": {"min": self.size[0].0.to_string(), "max": self.size[1].0.to_string()},
                "nr_accesses": {"min": rate(self.access_rate[0]), "max": rate(self.access_rate[1])},
                "age": {"min": age(self.age[0]), "max": age(self.age[1])},
            },
            "apply_interval_us": (self.apply_interval.0 / 1000).to_string(),
            "quotas": {
                "time_ms": "0",
                "sz_bytes": self.quota_space.0.to_string(),
                "reset_interval_ms": reset_ns,
                "goals": self.goal.iter().map(|g| serde_json::json!({
                    "metric": g.metric.name(),
                    "nid": g.node.to_string(),
                    "target_value": g.target_bp.to_string(),
                })).collect::<Vec<_>>(),
            },
            "filters": self.filters.iter().map(|f| serde_json::json!({
                "filter_type": match f.kind { FilterKind::Anon => "anon", FilterKind::Target => "target" },
                "matching": f.matching,
                "allow": f.allow,
                "damon_target_idx": f.target.map(|t| t.to_string()),
            })).collect::<Vec<_>>(),
        })
    }
}

// Serde of the range ends: numbers in a table's own unit, strings as damo reads them.

#[derive(Deserialize)]
#[serde(untagged)]
enum RawEnd {
    U(u64),
    F(f64),
    S(String),
}

/// An access-rate end from damo's text: a percentage, or `N samples` / `N percent`.
pub fn accesses_from_text(text: &str) -> Result<Accesses, String> {
    if let Ok(p) = units::text_to_percent(text) {
        return Ok(Accesses::Percent(p.f64()));
    }
    match units::text_to_nr_unit(text) {
        Some((n, "samples")) => Ok(Accesses::Samples(n.ulong("a number of samples")?)),
        Some((n, "percent")) => Ok(Accesses::Percent(n.f64())),
        _ => Err(format!(
            "`{text}` is not an access rate (a percentage such as 5%, min, max, or N samples)"
        )),
    }
}

/// An age end from damo's text: a time or microseconds, or `N aggr_intervals` / `N usec`.
pub fn age_from_text(text: &str) -> Result<Age, String> {
    if let Ok(u) = units::text_to_us(text) {
        return Ok(Age::Micros(u.f64()));
    }
    match units::text_to_nr_unit(text) {
        Some((n, "aggr_intervals")) => Ok(Age::Windows(n.ulong("a number of intervals")?)),
        Some((n, "usec")) => Ok(Age::Micros(n.f64())),
        _ => Err(format!(
            "`{text}` is not an age (a time such as 5s, microseconds, min, max, or N \
             aggr_intervals)"
        )),
    }
}

impl<'de> Deserialize<'de> for Accesses {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match RawEnd::deserialize(d)? {
            RawEnd::U(n) => Ok(Accesses::Percent(n as f64)),
            RawEnd::F(f) if f.is_finite() => Ok(Accesses::Percent(f)),
            RawEnd::F(f) => Err(D::Error::custom(format!("`{f}` is not a percentage"))),
            RawEnd::S(s) => accesses_from_text(&s).map_err(D::Error::custom),
        }
    }
}

impl Serialize for Accesses {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Accesses::Percent(p) if p >= ULONG_MAX as f64 => s.serialize_str("max"),
            Accesses::Percent(p) if p.fract() == 0.0 && p >= 0.0 => s.serialize_u64(p as u64),
            Accesses::Percent(p) => s.serialize_f64(p),
            Accesses::Samples(n) => s.serialize_str(&format!("{n} samples")),
        }
    }
}

impl<'de> Deserialize<'de> for Age {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match RawEnd::deserialize(d)? {
            RawEnd::U(n) => Ok(Age::Windows(n)),
            RawEnd::F(f) => Err(D::Error::custom(format!(
                "`{f}`: a number is a count of aggregation intervals (a whole number); a \
                 time is a string such as \"5s\""
            ))),
            RawEnd::S(s) => age_from_text(&s).map_err(D::Error::custom),
        }
    }
}

impl Serialize for Age {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Age::Windows(n) => s.serialize_u64(n),
            Age::Micros(u) if u >= ULONG_MAX as f64 => s.serialize_str("max"),
            // With a unit where it reads back exactly, else bare microseconds.
            Age::Micros(u) if (u * 1e3) / 1e3 == u => s.serialize_str(&format!("{u}us")),
            Age::Micros(u) => s.serialize_str(&format!("{u}")),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DamosConfig {
    pub schemes: Vec<Scheme>,
    /// The schemes as a damo command line (after `schemes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damo: Option<String>,
    /// The schemes as damo's JSON (`damo args damon --format json`): a JSON text, or the
    /// document itself in a JSON experiment (after `damo`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damo_json: Option<serde_json::Value>,
}

/// Where a scheme was written, to name the field of an error.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Origin {
    Table(usize),
    Line(usize),
    Json(usize),
}

/// The part of a scheme an error is about.
#[derive(Debug, Clone, Copy)]
enum Part {
    Target,
    Rate,
    Size,
    Age,
    Goal,
    Filters,
    Apply,
}

impl Origin {
    /// The field (and the prefix of the message) naming `part` of the scheme.
    fn locate(self, part: Part, message: String) -> FieldError {
        match self {
            Origin::Table(i) => {
                let f = match part {
                    Part::Target => "target",
                    Part::Rate => "access_rate",
                    Part::Size => "size",
                    Part::Age => "age",
                    Part::Goal => "goal",
                    Part::Filters => "filters",
                    Part::Apply => "apply_interval",
                };
                FieldError::new(format!("schemes[{i}].{f}"), message)
            }
            Origin::Line(k) => {
                let o = match part {
                    Part::Target => "--damos_action",
                    Part::Rate => "--damos_access_rate",
                    Part::Size => "--damos_sz_region",
                    Part::Age => "--damos_age",
                    Part::Goal => "--damos_quota_goal",
                    Part::Filters => "--damos_filter",
                    Part::Apply => "--damos_apply_interval",
                };
                FieldError::new("damo", format!("scheme {k} ({o}): {message}"))
            }
            Origin::Json(k) => {
                let o = match part {
                    Part::Target => "target_nid",
                    Part::Rate => "access_pattern.nr_accesses",
                    Part::Size => "access_pattern.sz_bytes",
                    Part::Age => "access_pattern.age",
                    Part::Goal => "quotas.goals",
                    Part::Filters => "filters",
                    Part::Apply => "apply_interval_us",
                };
                FieldError::new("damo_json", format!("scheme {k}: {o}: {message}"))
            }
        }
    }
}

impl DamosConfig {
    /// Every scheme, the damo line's and the JSON's included.
    pub fn all_schemes(&self) -> Result<Vec<Scheme>, FieldError> {
        Ok(self.located()?.into_iter().map(|(_, s)| s).collect())
    }

    fn located(&self) -> Result<Vec<(Origin, Scheme)>, FieldError> {
        let mut out: Vec<(Origin, Scheme)> = self
            .schemes
            .iter()
            .enumerate()
            .map(|(i, s)| (Origin::Table(i), s.clone()))
            .collect();
        if let Some(line) = &self.damo {
            let schemes = parse_damo(line).map_err(|m| FieldError::new("damo", m))?;
            out.extend(
                schemes
                    .into_iter()
                    .enumerate()
                    .map(|(k, s)| (Origin::Line(k), s)),
            );
        }
        if let Some(doc) = &self.damo_json {
            let schemes = parse_damo_json(doc).map_err(|m| FieldError::new("damo_json", m))?;
            out.extend(
                schemes
                    .into_iter()
                    .enumerate()
                    .map(|(k, s)| (Origin::Json(k), s)),
            );
        }
        Ok(out)
    }
}

/// Why a scheme can never match whatever the monitor (`Err((part, message))`).
fn never_matches(s: &Scheme, tiers: usize) -> Result<(), (Part, String)> {
    if s.target as usize >= tiers {
        return Err((
            Part::Target,
            format!(
                "node {} does not exist: the machine has {tiers} tiers",
                s.target
            ),
        ));
    }
    let never = "the scheme could never match";
    match s.access_rate {
        [Accesses::Percent(a), Accesses::Percent(b)] => {
            if a < 0.0 || b < 0.0 {
                return Err((Part::Rate, "a percentage is negative".into()));
            }
            if a > b {
                return Err((Part::Rate, format!("min {a}% is above max {b}%: {never}")));
            }
            if a > 100.0 {
                return Err((
                    Part::Rate,
                    format!("min {a}% is above 100% (every sample of a window): {never}"),
                ));
            }
        }
        [Accesses::Samples(a), Accesses::Samples(b)] if a > b => {
            return Err((
                Part::Rate,
                format!("min {a} samples is above max {b}: {never}"),
            ));
        }
        [Accesses::Samples(_), Accesses::Samples(_)] => {}
        _ => {
            return Err((
                Part::Rate,
                "min and max in different units (percent and samples)".into(),
            ))
        }
    }
    if s.size[0].0 > s.size[1].0 {
        return Err((
            Part::Size,
            format!(
                "min {} B is above max {} B: {never}",
                s.size[0].0, s.size[1].0
            ),
        ));
    }
    match s.age {
        [Age::Windows(a), Age::Windows(b)] if a > b => {
            return Err((
                Part::Age,
                format!("min {a} intervals is above max {b}: {never}"),
            ))
        }
        [Age::Micros(a), Age::Micros(b)] if a > b => {
            return Err((Part::Age, format!("min {a} us is above max {b} us: {never}")))
        }
        [Age::Micros(a), Age::Micros(_)] if a < 0.0 => {
            return Err((Part::Age, "a negative age".into()))
        }
        [Age::Windows(_), Age::Windows(_)] | [Age::Micros(_), Age::Micros(_)] => {}
        _ => {
            return Err((
                Part::Age,
                "min and max in different units (a time and aggregation intervals)".into(),
            ))
        }
    }
    if let Some(g) = &s.goal {
        if g.node as usize >= tiers || g.target_bp > 10_000 {
            return Err((
                Part::Goal,
                format!("node below {tiers} and target at most 100% expected"),
            ));
        }
        if g.target_bp == 0 {
            return Err((
                Part::Goal,
                format!(
                    "a target of 0 is always met, and the goal gates the scheme (it applies \
                     while {} is below the target): the scheme would never apply",
                    g.metric.name()
                ),
            ));
        }
    }
    if !filters_pass(&s.filters) {
        return Err((
            Part::Filters,
            "the filters reject every page of the heap (all anonymous, one target): the \
             scheme would never apply"
                .into(),
        ));
    }
    Ok(())
}

/// `nr_accesses` and age bounds of a scheme under a monitor's intervals, as damo
/// converts them for the kernel (`add_unset_unit`): samples = int(percent * (aggr /
/// sample) / 100), aggregation intervals = int(us / aggr_us).
#[derive(Debug, Clone, Copy)]
struct Bounds {
    nr: [u64; 2],
    age: [u64; 2],
    max_nr: u64,
}

fn bounds(s: &Scheme, iv: Intervals) -> Bounds {
    let per_window = iv.aggr as f64 / iv.sample.max(1) as f64;
    let aggr_us = iv.aggr.max(1) as f64 / 1e3;
    let nr = |a: Accesses| match a {
        Accesses::Percent(p) => (p * per_window / 100.0).trunc() as u64,
        Accesses::Samples(n) => n,
    };
    let age = |a: Age| match a {
        Age::Micros(u) => (u / aggr_us).trunc() as u64,
        Age::Windows(n) => n,
    };
    Bounds {
        nr: [nr(s.access_rate[0]), nr(s.access_rate[1])],
        age: [age(s.age[0]), age(s.age[1])],
        max_nr: (iv.aggr / iv.sample.max(1)).max(1),
    }
}

impl PolicyTechnique for DamosConfig {
    const HELP: &'static str =
        "DAMOS migrate_hot / migrate_cold schemes, as tables, a damo command line or damo's JSON";

    /// Any monitor of accesses: DAMOS's access rates are relative to what its regions
    /// can score in a window.
    fn input(&self) -> PolicyInput {
        PolicyInput::Monitor(FeedKind::ACCESSES)
    }

    /// Checks against the machine's number of tiers.
    fn check(&self, tiers: usize) -> Result<(), FieldError> {
        let schemes = self.located()?;
        if schemes.is_empty() {
            return Err(FieldError::new(
                "schemes",
                "a damos policy needs at least one scheme (`schemes`, `damo` or `damo_json`)",
            ));
        }
        for (origin, s) in &schemes {
            never_matches(s, tiers).map_err(|(part, m)| origin.locate(part, m))?;
        }
        Ok(())
    }

    /// Checks against a feeding monitor's intervals and the run's length.
    fn check_feed(
        &self,
        monitor: &str,
        intervals: Intervals,
        duration_ns: u64,
    ) -> Result<(), FieldError> {
        let windows = duration_ns / intervals.aggr.max(1);
        let aggr = format_duration(intervals.aggr);
        for (origin, s) in self.located()? {
            let b = bounds(&s, intervals);
            if b.nr[0] > b.max_nr {
                return Err(origin.locate(
                    Part::Rate,
                    format!(
                        "min {} samples is above the {} a window of `{monitor}` holds ({aggr} \
                         / {}): the scheme could never match",
                        b.nr[0],
                        b.max_nr,
                        format_duration(intervals.sample)
                    ),
                ));
            }
            if b.age[0] > windows {
                return Err(origin.locate(
                    Part::Age,
                    format!(
                        "a min age of {} aggregation intervals of `{monitor}` ({aggr} each) is \
                         beyond the run ({windows} intervals): the scheme could never match",
                        b.age[0]
                    ),
                ));
            }
            let apply = s.apply_interval.0;
            if apply != 0 && !apply.is_multiple_of(intervals.aggr.max(1)) {
                return Err(origin.locate(
                    Part::Apply,
                    format!(
                        "{} is not a multiple of `{monitor}`'s aggregation interval ({aggr}): \
                         tierscope applies schemes at the ends of aggregation windows",
                        format_duration(apply)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn policy(&self, ctx: &PolicyContext) -> Box<dyn Policy> {
        let schemes = self.all_schemes().expect("validated");
        Box::new(Damos {
            states: schemes
                .into_iter()
                .map(|scheme| SchemeState {
                    bounds: bounds(&scheme, ctx.intervals),
                    scheme,
                    interval_start: 0,
                    charged: 0,
                    applied: 0,
                })
                .collect(),
            pending: None,
        })
    }
}

struct SchemeState {
    scheme: Scheme,
    bounds: Bounds,
    interval_start: Nanos,
    charged: u64,
    /// When the scheme was last applied (the run's start before it ever was).
    applied: Nanos,
}

pub struct Damos {
    states: Vec<SchemeState>,
    pending: Option<Snapshot>,
}

fn matches(s: &Scheme, b: &Bounds, r: &RegionReport) -> bool {
    let size = r.end - r.start;
    (b.nr[0]..=b.nr[1]).contains(&u64::from(r.nr_accesses))
        && (s.size[0].0..=s.size[1].0).contains(&size)
        && (b.age[0]..=b.age[1]).contains(&u64::from(r.age))
}

fn goal_met(goal: &Goal, view: &View) -> bool {
    let cap = view.tiers[goal.node as usize]
        .capacity
        .min(view.placement.range().len());
    let used = view.placement.bytes_on(goal.node);
    let bp = |b: u64| (b as u128 * 10_000 / cap.max(1) as u128) as u32;
    match goal.metric {
        GoalMetric::NodeMemUsedBp => bp(used) >= goal.target_bp,
        GoalMetric::NodeMemFreeBp => bp(cap.saturating_sub(used)) >= goal.target_bp,
    }
}

impl Policy for Damos {
    fn observe(&mut self, snapshot: &Snapshot) {
        self.pending = Some(snapshot.clone());
    }

    fn next_action(&self) -> Nanos {
        due_if(self.pending.is_some())
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        let Some(snap) = self.pending.take() else {
            return;
        };
        for st in &mut self.states {
            let scheme = &st.scheme;
            let apply = scheme.apply_interval.0;
            if apply != 0 {
                if view.now < st.applied.saturating_add(apply) {
                    continue;
                }
                st.applied = view.now;
            }
            if view.now >= st.interval_start.saturating_add(scheme.quota_interval.0) {
                st.interval_start = view.now;
                st.charged = 0;
            }
            if scheme.goal.as_ref().is_some_and(|g| goal_met(g, view)) {
                continue;
            }
            let mut picked: Vec<RegionReport> = snap
                .regions
                .iter()
                .filter(|r| matches(scheme, &st.bounds, r))
                .copied()
                .collect();
            match scheme.action {
                Action::MigrateHot => picked.sort_by(|a, b| {
                    b.nr_accesses
                        .cmp(&a.nr_accesses)
                        .then(b.age.cmp(&a.age))
                        .then(a.start.cmp(&b.start))
                }),
                Action::MigrateCold => picked.sort_by(|a, b| {
                    a.nr_accesses
                        .cmp(&b.nr_accesses)
                        .then(b.age.cmp(&a.age))
                        .then(a.start.cmp(&b.start))
                }),
            }
            let quota = match scheme.quota_space.0 {
                0 => u64::MAX,
                q => q,
            };
            for r in picked {
                if st.charged >= quota {
                    break;
                }
                let range = AddrRange::new(r.start, r.end);
                let off = view.bytes_off(range, scheme.target);
                if off == 0 {
                    continue;
                }
                let take = off.min(quota - st.charged);
                st.charged += take;
                out.push(Move {
                    range: head(range, off, take),
                    to: scheme.target,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IV: Intervals = Intervals {
        sample: 5_000_000,
        aggr: 100_000_000,
        ops_update: 1_000_000_000,
    };

    #[test]
    fn damo_line_reads_as_damo_users_write_it() {
        let s = parse_damo(
            "--damos_action migrate_hot 0 --damos_access_rate 5% max \
             --damos_quota_interval 1s --damos_quota_space 200MB \
             --damos_quota_goal node_mem_used_bp 99.7% 0",
        )
        .unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].action, Action::MigrateHot);
        assert_eq!(
            s[0].access_rate,
            [Accesses::Percent(5.0), Accesses::Percent(ULONG_MAX as f64)]
        );
        // damo's MB is 2^20 bytes.
        assert_eq!(s[0].quota_space, Size(200 << 20));
        assert_eq!(s[0].quota_interval, Duration(1_000_000_000));
        assert_eq!(
            s[0].goal,
            Some(Goal {
                metric: GoalMetric::NodeMemUsedBp,
                target_bp: 9970,
                node: 0
            })
        );
    }

    #[test]
    fn options_belong_to_schemes_by_position_as_in_damo() {
        // damo gives the i-th --damos_age to the i-th scheme, wherever it is written.
        let s = parse_damo(
            "--damos_action migrate_hot 0 --damos_action migrate_cold 1 \
             --damos_access_rate 5% max --damos_age 5s max",
        )
        .unwrap();
        assert_eq!(s[0].age[0], Age::Micros(5e6));
        assert_eq!(s[1].age, any_age());
        assert_eq!(s[1].access_rate, any_rate());
    }

    #[test]
    fn rates_and_ages_become_bounds_as_damo_converts_them() {
        let s = parse_damo(
            "--damos_action migrate_hot 0 --damos_access_rate 7% 50% --damos_age 1000000 max",
        )
        .unwrap();
        let b = bounds(&s[0], IV);
        // 20 samples per window: int(7 * 20 / 100) = 1, int(50 * 20 / 100) = 10.
        assert_eq!(b.nr, [1, 10]);
        // 1,000,000 us of 100 ms windows: 10 windows (a bare age is microseconds); `max`
        // is ulong_max microseconds, int(ulong_max / 100,000) windows as in damo.
        assert_eq!(b.age, [10, 184_467_440_737_095]);
    }

    #[test]
    fn schemes_that_never_match_are_errors() {
        let line = |l: &str| DamosConfig {
            damo: Some(l.into()),
            ..Default::default()
        };
        for (l, want) in [
            (
                "--damos_action migrate_hot 0 --damos_access_rate 50% 5%",
                "above max",
            ),
            (
                "--damos_action migrate_hot 0 --damos_access_rate 150% max",
                "above 100%",
            ),
            ("--damos_action migrate_hot 0 --damos_sz_region 2M 1M", "above max"),
            ("--damos_action migrate_hot 0 --damos_age 5s 1s", "above max"),
            (
                "--damos_action migrate_hot 0 --damos_filter reject anon",
                "reject every page",
            ),
            ("--damos_action migrate_hot 5", "does not exist"),
        ] {
            let e = line(l).check(2).unwrap_err();
            assert_eq!(e.field, "damo", "{l}");
            assert!(e.message.contains(want), "{l}: {e}");
        }
        // An age beyond the run, with the monitor's intervals.
        let c = line("--damos_action migrate_hot 0 --damos_age 60s max");
        c.check(2).unwrap();
        let e = c.check_feed("damon-mod", IV, 30_000_000_000).unwrap_err();
        assert!(e.message.contains("beyond the run"), "{e}");
        c.check_feed("damon-mod", IV, 90_000_000_000).unwrap();
        let c = line("--damos_action migrate_hot 0 --damos_apply_interval 150ms");
        let e = c.check_feed("damon-mod", IV, 30_000_000_000).unwrap_err();
        assert!(e.message.contains("not a multiple"), "{e}");
    }

    #[test]
    fn tables_keep_their_units_and_round_trip() {
        let table: Scheme = serde_json::from_value(serde_json::json!({
            "action": "migrate_cold", "target": 1, "access_rate": [0, 0], "age": [5, "max"],
        }))
        .unwrap();
        assert_eq!(table.age, [Age::Windows(5), Age::Micros(ULONG_MAX as f64)]);
        assert_eq!(bounds(&table, IV).age, [5, 184_467_440_737_095]);
        let timed: Scheme = serde_json::from_value(serde_json::json!({
            "action": "migrate_hot", "target": 0, "access_rate": ["5%", "max"], "age": ["5s", "max"],
        }))
        .unwrap();
        assert_eq!(timed.age[0], Age::Micros(5e6));
        for s in [table, timed] {
            let back: Scheme = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
            assert_eq!(back, s);
        }
    }
}
