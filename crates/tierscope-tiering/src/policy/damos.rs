//! DAMOS tiering schemes, written as damo users write them: `migrate_hot` / `migrate_cold`
//! to a target node (tier), access-rate, region-size and age ranges, a space quota per
//! interval and a quota goal on a node's memory use.
//!
//! Either as tables or as the damo command line itself:
//! `damo = "--damos_action migrate_hot 0 --damos_access_rate 5% max --damos_quota_interval
//! 1s --damos_quota_space 200MB --damos_quota_goal node_mem_used_bp 99.7% 0"`.
//! Every `--damos_action` starts a new scheme; later options apply to it.
//!
//! Like DAMON, a scheme is applied at the end of every aggregation window, to the regions
//! it matches, hottest first for `migrate_hot` and coldest first for `migrate_cold`, until
//! its quota for the current interval is spent. One simplification (docs/TIERING.md):
//! DAMON tunes the effective quota by feedback towards the goal; here the goal gates the
//! scheme: it applies while the goal's metric is below the target.

use super::{due_if, head, Policy, View};
use crate::migration::Move;
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::units::{parse_duration, parse_size, Duration, Size};
use tierscope_core::{AddrRange, FeedKind, FieldError, Nanos, PolicyInput, RegionReport, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    MigrateHot,
    MigrateCold,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalMetric {
    /// Used bytes of the node in basis points of its capacity.
    NodeMemUsedBp,
    /// Free bytes of the node in basis points of its capacity.
    NodeMemFreeBp,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    pub metric: GoalMetric,
    /// Target in basis points (10000 = 100 %).
    pub target_bp: u32,
    pub node: u8,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scheme {
    pub action: Action,
    /// The destination tier (damo's target node id).
    pub target: u8,
    /// Access rate range in percent of the most a region can score in a window
    /// (aggregation / sampling interval), inclusive.
    #[serde(default = "full_percent")]
    pub access_rate: [u32; 2],
    /// Region size range, bytes, inclusive.
    #[serde(default = "any_size")]
    pub size: [Size; 2],
    /// Age range in aggregation windows, inclusive.
    #[serde(default = "any_age")]
    pub age: [u32; 2],
    /// Bytes the scheme may migrate per quota interval (0: no limit).
    #[serde(default)]
    pub quota_space: Size,
    #[serde(default = "one_second")]
    pub quota_interval: Duration,
    #[serde(default)]
    pub goal: Option<Goal>,
}

fn full_percent() -> [u32; 2] {
    [0, 100]
}
fn any_size() -> [Size; 2] {
    [Size(0), Size(u64::MAX)]
}
fn any_age() -> [u32; 2] {
    [0, u32::MAX]
}
fn one_second() -> Duration {
    Duration(1_000_000_000)
}

#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DamosConfig {
    pub schemes: Vec<Scheme>,
    /// The schemes as a damo command line (added after `schemes`).
    pub damo: Option<String>,
}

impl DamosConfig {
    /// Every scheme, the damo line's included.
    pub fn all_schemes(&self) -> Result<Vec<Scheme>, FieldError> {
        let mut out = self.schemes.clone();
        if let Some(line) = &self.damo {
            out.extend(parse_damo(line).map_err(|m| FieldError::new("damo", m))?);
        }
        Ok(out)
    }
}

impl PolicyTechnique for DamosConfig {
    const HELP: &'static str =
        "DAMOS migrate_hot / migrate_cold schemes, as tables or a damo command line";

    /// Any monitor of accesses: DAMOS's access rates are relative to what its regions
    /// can score in a window.
    fn input(&self) -> PolicyInput {
        PolicyInput::Monitor(FeedKind::ACCESSES)
    }

    /// Checks against the machine's number of tiers.
    fn check(&self, tiers: usize) -> Result<(), FieldError> {
        let schemes = self.all_schemes()?;
        if schemes.is_empty() {
            return Err(FieldError::new(
                "schemes",
                "a damos policy needs at least one scheme (`schemes` or `damo`)",
            ));
        }
        for (i, s) in schemes.iter().enumerate() {
            let at = |f: &str| format!("schemes[{i}].{f}");
            if s.target as usize >= tiers {
                return Err(FieldError::new(
                    at("target"),
                    format!(
                        "node {} does not exist: the machine has {tiers} tiers",
                        s.target
                    ),
                ));
            }
            if s.access_rate[0] > s.access_rate[1] || s.access_rate[1] > 100 {
                return Err(FieldError::new(
                    at("access_rate"),
                    "expected [min, max] percentages with min <= max <= 100",
                ));
            }
            if let Some(g) = &s.goal {
                if g.node as usize >= tiers || g.target_bp > 10_000 {
                    return Err(FieldError::new(
                        at("goal"),
                        format!("node below {tiers} and target at most 100% expected"),
                    ));
                }
            }
        }
        Ok(())
    }

    fn policy(&self, ctx: &PolicyContext) -> Box<dyn Policy> {
        let intervals = ctx.intervals;
        let schemes = self.all_schemes().expect("validated");
        Box::new(Damos {
            states: schemes
                .into_iter()
                .map(|scheme| SchemeState {
                    scheme,
                    interval_start: 0,
                    charged: 0,
                })
                .collect(),
            max_nr_accesses: (intervals.aggr / intervals.sample.max(1)).max(1) as u32,
            pending: None,
        })
    }
}

/// Reads damo's `--damos_*` options.
pub fn parse_damo(line: &str) -> Result<Vec<Scheme>, String> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let mut schemes: Vec<Scheme> = vec![];
    let mut i = 0;
    let arg = |i: usize, what: &str| -> Result<&str, String> {
        tokens
            .get(i)
            .copied()
            .filter(|t| !t.starts_with("--"))
            .ok_or_else(|| format!("`{}` expects {what}", tokens[i - 1]))
    };
    while i < tokens.len() {
        let opt = tokens[i];
        if opt == "--damos_action" {
            let action = match arg(i + 1, "an action")? {
                "migrate_hot" => Action::MigrateHot,
                "migrate_cold" => Action::MigrateCold,
                other => {
                    return Err(format!(
                        "action `{other}` is not a tiering action (migrate_hot, migrate_cold)"
                    ))
                }
            };
            let target = arg(i + 2, "a target node id")?
                .parse()
                .map_err(|_| format!("`{}` is not a node id", tokens[i + 2]))?;
            schemes.push(Scheme {
                action,
                target,
                access_rate: full_percent(),
                size: any_size(),
                age: any_age(),
                quota_space: Size(0),
                quota_interval: one_second(),
                goal: None,
            });
            i += 3;
            continue;
        }
        let s = schemes
            .last_mut()
            .ok_or_else(|| format!("`{opt}` comes before any --damos_action"))?;
        match opt {
            "--damos_access_rate" => {
                let pct = |t: &str| -> Result<u32, String> {
                    match t {
                        "min" => Ok(0),
                        "max" => Ok(100),
                        // A float rounded, never clamped: `-5%` or `nan` became 0 before.
                        _ => t
                            .trim_end_matches('%')
                            .parse::<f64>()
                            .ok()
                            .filter(|v| (0.0..=100.0).contains(v))
                            .map(|v| v.round() as u32)
                            .ok_or_else(|| format!("`{t}` is not a percentage from 0 to 100")),
                    }
                };
                s.access_rate = [pct(arg(i + 1, "MIN MAX")?)?, pct(arg(i + 2, "MIN MAX")?)?];
                i += 3;
            }
            "--damos_sz_region" => {
                let sz = |t: &str| -> Result<Size, String> {
                    match t {
                        "min" => Ok(Size(0)),
                        "max" => Ok(Size(u64::MAX)),
                        _ => parse_size(t).map(Size).map_err(|e| e.0),
                    }
                };
                s.size = [sz(arg(i + 1, "MIN MAX")?)?, sz(arg(i + 2, "MIN MAX")?)?];
                i += 3;
            }
            "--damos_age" => {
                // In aggregation intervals (damo also takes times; tierscope does not).
                let age = |t: &str| -> Result<u32, String> {
                    match t {
                        "min" => Ok(0),
                        "max" => Ok(u32::MAX),
                        _ => t
                            .parse()
                            .map_err(|_| format!("`{t}` is not an age in aggregation intervals")),
                    }
                };
                s.age = [age(arg(i + 1, "MIN MAX")?)?, age(arg(i + 2, "MIN MAX")?)?];
                i += 3;
            }
            "--damos_quota_interval" => {
                s.quota_interval =
                    Duration(parse_duration(arg(i + 1, "a time")?).map_err(|e| e.0)?);
                i += 2;
            }
            "--damos_quota_space" => {
                s.quota_space = Size(parse_size(arg(i + 1, "a size")?).map_err(|e| e.0)?);
                i += 2;
            }
            "--damos_quota_goal" => {
                let metric = match arg(i + 1, "METRIC TARGET [NODE]")? {
                    "node_mem_used_bp" => GoalMetric::NodeMemUsedBp,
                    "node_mem_free_bp" => GoalMetric::NodeMemFreeBp,
                    other => {
                        return Err(format!(
                            "goal metric `{other}` is not supported (node_mem_used_bp, \
                             node_mem_free_bp)"
                        ))
                    }
                };
                let t = arg(i + 2, "METRIC TARGET [NODE]")?;
                let (number, per) = match t.strip_suffix('%') {
                    Some(p) => (p, 100.0),
                    None => (t, 1.0),
                };
                let target_bp = number
                    .parse::<f64>()
                    .ok()
                    .map(|v| v * per)
                    .filter(|bp| (0.0..=10_000.0).contains(bp))
                    .map(|bp| bp.round() as u32)
                    .ok_or_else(|| {
                        format!("`{t}` is not a goal target (0 to 10000 basis points, or a %)")
                    })?;
                let mut used = 3;
                let node = match tokens.get(i + 3) {
                    Some(n) if !n.starts_with("--") => {
                        used = 4;
                        n.parse().map_err(|_| format!("`{n}` is not a node id"))?
                    }
                    _ => 0,
                };
                s.goal = Some(Goal {
                    metric,
                    target_bp,
                    node,
                });
                i += used;
            }
            other => return Err(format!("`{other}` is not a damos option tierscope reads")),
        }
    }
    Ok(schemes)
}

struct SchemeState {
    scheme: Scheme,
    interval_start: Nanos,
    charged: u64,
}

pub struct Damos {
    states: Vec<SchemeState>,
    max_nr_accesses: u32,
    pending: Option<Snapshot>,
}

impl Damos {
    fn matches(&self, s: &Scheme, r: &RegionReport) -> bool {
        let rate = u64::from(r.nr_accesses) * 100 / u64::from(self.max_nr_accesses);
        let size = r.end - r.start;
        (u64::from(s.access_rate[0])..=u64::from(s.access_rate[1])).contains(&rate)
            && (s.size[0].0..=s.size[1].0).contains(&size)
            && (s.age[0]..=s.age[1]).contains(&r.age)
    }
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
        for k in 0..self.states.len() {
            let scheme = self.states[k].scheme.clone();
            let st = &mut self.states[k];
            if view.now >= st.interval_start + scheme.quota_interval.0 {
                st.interval_start = view.now;
                st.charged = 0;
            }
            if scheme.goal.as_ref().is_some_and(|g| goal_met(g, view)) {
                continue;
            }
            let mut picked: Vec<RegionReport> = snap
                .regions
                .iter()
                .filter(|r| self.matches(&scheme, r))
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
            let st = &mut self.states[k];
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

    #[test]
    fn damo_line_reads_as_damo_users_write_it() {
        let s = parse_damo(
            "--damos_action migrate_hot 0 --damos_access_rate 5% max \
             --damos_quota_interval 1s --damos_quota_space 200MB \
             --damos_quota_goal node_mem_used_bp 99.7% 0 \
             --damos_action migrate_cold 1 --damos_access_rate 0% 0% --damos_age 5 max",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].action, Action::MigrateHot);
        assert_eq!(s[0].access_rate, [5, 100]);
        assert_eq!(s[0].quota_space, Size(200_000_000));
        assert_eq!(
            s[0].goal,
            Some(Goal {
                metric: GoalMetric::NodeMemUsedBp,
                target_bp: 9970,
                node: 0
            })
        );
        assert_eq!((s[1].action, s[1].target), (Action::MigrateCold, 1));
        assert_eq!(s[1].age, [5, u32::MAX]);
    }

    #[test]
    fn malformed_damo_lines_say_what_is_wrong() {
        for (line, want) in [
            ("--damos_access_rate 5% max", "before any --damos_action"),
            ("--damos_action pageout 0", "not a tiering action"),
            ("--damos_action migrate_hot", "expects a target node id"),
            (
                "--damos_action migrate_hot 0 --damos_quota_space lots",
                "does not start with a number",
            ),
            (
                "--damos_action migrate_hot 0 --damos_filter anon",
                "not a damos option",
            ),
            // Issue 28: out-of-range numbers were clamped to 0 or u32::MAX.
            (
                "--damos_action migrate_hot 0 --damos_access_rate -5% max",
                "not a percentage from 0 to 100",
            ),
            (
                "--damos_action migrate_hot 0 --damos_access_rate nan% max",
                "not a percentage from 0 to 100",
            ),
            (
                "--damos_action migrate_hot 0 --damos_quota_goal node_mem_used_bp -1% 0",
                "not a goal target",
            ),
            (
                "--damos_action migrate_hot 0 --damos_quota_goal node_mem_used_bp 1e30 0",
                "not a goal target",
            ),
        ] {
            let e = parse_damo(line).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
    }
}
