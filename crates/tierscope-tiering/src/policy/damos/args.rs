//! damo's `--damos_*` command-line options, read as damo 3.4.3 reads them
//! (`_damon_args.py`: argparse with `action='append'`, then `damos_options_to_schemes`):
//! - every option may be repeated; the i-th occurrence of an option belongs to the i-th
//!   `--damos_action`, wherever it is written (damo: "Those options are allowed to be
//!   specified multiple times for requesting multiple schemes");
//! - quota goals and filters go to the only scheme, or with several schemes to the scheme
//!   whose `--damos_scheme` marker precedes them (or by `--damos_nr_quota_goals` /
//!   `--damos_nr_filters` counts);
//! - `--damos_quota_interval` (ms) takes the i-th `--damos_quota_time` / `_space` /
//!   `_weights` with it; `--damos_quotas TIME [SIZE [INTERVAL [WEIGHTS...]]]` is the other
//!   way, not both;
//! - one `--damos_filter` per scheme (damo 3.4.3 refuses a second one).
//!
//! What damo accepts that tierscope cannot model is refused with one line naming the option.

use super::units::{
    text_to_bp, text_to_bytes, text_to_ms, text_to_nr, text_to_percent,
    text_to_permil, text_to_us, Num,
};
use super::{Accesses, Action, Age, Filter, FilterKind, Goal, GoalMetric, Scheme};
use tierscope_core::units::{Duration, Size};

/// How many arguments an option takes (argparse's nargs).
#[derive(Clone, Copy, PartialEq)]
enum Nargs {
    Zero,
    Exactly(usize),
    OneOrMore,
}

/// damo's scheme options.
const OPTIONS: &[(&str, Nargs)] = &[
    ("--damos_scheme", Nargs::Zero),
    ("--damos_action", Nargs::OneOrMore),
    ("--damos_sz_region", Nargs::Exactly(2)),
    ("--damos_access_rate", Nargs::Exactly(2)),
    ("--damos_age", Nargs::Exactly(2)),
    ("--damos_apply_interval", Nargs::Exactly(1)),
    ("--damos_quotas", Nargs::OneOrMore),
    ("--damos_quota_interval", Nargs::Exactly(1)),
    ("--damos_quota_time", Nargs::Exactly(1)),
    ("--damos_quota_space", Nargs::Exactly(1)),
    ("--damos_quota_weights", Nargs::Exactly(3)),
    ("--damos_quota_fail_charge_ratio", Nargs::Exactly(2)),
    ("--damos_quota_goal", Nargs::OneOrMore),
    ("--damos_quota_goal_tuner", Nargs::Exactly(1)),
    ("--damos_nr_quota_goals", Nargs::OneOrMore),
    ("--damos_filter", Nargs::OneOrMore),
    ("--damos_nr_filters", Nargs::OneOrMore),
    ("--damos_wmarks", Nargs::Exactly(5)),
    ("--damos_max_nr_snapshots", Nargs::Exactly(1)),
];

/// damo's other `args damon` options: they set up monitoring, which the experiment's
/// monitor does here.
const MONITORING_OPTIONS: &[&str] = &[
    "--kdamond",
    "--damon_ctx",
    "--ops",
    "--probe",
    "--probe_prep",
    "--probe_filter",
    "--probe_weight",
    "--pause_ctx",
    "--refresh_stat",
    "--damon_addr_unit",
    "--damon_target",
    "--target_pid",
    "-r",
    "--regions",
    "--numa_node",
    "--monitoring_intervals_autotune",
    "--monitoring_intervals",
    "--monitoring_intervals_goal",
    "--monitoring_nr_regions_range",
    "--obsolete_targets",
    "--nr_targets",
    "--nr_schemes",
    "--nr_ctxs",
    "--sample",
    "--aggr",
    "--updr",
    "--minr",
    "--maxr",
];

/// damo's DAMOS actions (`_damon.damos_actions`).
const ACTIONS: &[&str] = &[
    "willneed",
    "cold",
    "pageout",
    "hugepage",
    "collapse",
    "nohugepage",
    "lru_prio",
    "lru_deprio",
    "migrate_hot",
    "migrate_cold",
    "stat",
];

/// damo's quota goal metrics (`_damon.qgoal_metrics`).
const GOAL_METRICS: &[&str] = &[
    "user_input",
    "some_mem_psi_us",
    "node_mem_used_bp",
    "node_mem_free_bp",
    "node_memcg_used_bp",
    "node_memcg_free_bp",
    "active_mem_bp",
    "inactive_mem_bp",
    "node_eligible_mem_bp",
];

/// Whether argparse takes `t` for an option (it starts with `-` and is not a negative
/// number: damo has no option that looks like one).
fn looks_like_option(t: &str) -> bool {
    if !t.starts_with('-') || t.len() < 2 {
        return false;
    }
    let rest = &t[1..];
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let negative = digits(rest)
        || rest
            .split_once('.')
            .is_some_and(|(a, b)| a.bytes().all(|c| c.is_ascii_digit()) && digits(b));
    !negative
}

/// Every occurrence of each option, in order, with where `--damos_scheme` markers were.
#[derive(Default)]
struct Given {
    /// (option, its arguments, the number of `--damos_scheme` markers before it).
    items: Vec<(&'static str, Vec<String>, usize)>,
    markers: usize,
}

impl Given {
    fn all(&self, opt: &str) -> Vec<&Vec<String>> {
        self.items
            .iter()
            .filter(|(o, _, _)| *o == opt)
            .map(|(_, a, _)| a)
            .collect()
    }

    fn count(&self, opt: &str) -> usize {
        self.items.iter().filter(|(o, _, _)| *o == opt).count()
    }

    /// The arguments of the i-th occurrence of `opt`.
    fn nth(&self, opt: &str, i: usize) -> Option<&Vec<String>> {
        self.all(opt).get(i).copied()
    }
}

fn tokenize(line: &str) -> Result<Given, String> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let mut given = Given::default();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        if !looks_like_option(t) {
            return Err(format!(
                "`{t}` is not an option or an argument of one (damo's --damos_* options only)"
            ));
        }
        let (name, explicit) = match t.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (t, None),
        };
        let Some(&(opt, nargs)) = OPTIONS.iter().find(|(o, _)| *o == name) else {
            if MONITORING_OPTIONS.contains(&name) {
                return Err(format!(
                    "`{name}` sets up DAMON's monitoring, which the experiment's monitor \
                     does here: give only --damos_* options"
                ));
            }
            let prefixed: Vec<&str> = OPTIONS
                .iter()
                .map(|(o, _)| *o)
                .filter(|o| o.starts_with(name) && name.len() > 2)
                .collect();
            if let [full] = prefixed[..] {
                return Err(format!("`{name}`: write the option in full (`{full}`)"));
            }
            let names: Vec<&str> = OPTIONS.iter().map(|(o, _)| *o).collect();
            return Err(format!(
                "`{name}` is not a damo scheme option{}",
                tierscope_core::did_you_mean(name, &names)
            ));
        };
        i += 1;
        let mut args: Vec<String> = vec![];
        if let Some(v) = explicit {
            if nargs != Nargs::Exactly(1) {
                return Err(format!("`{opt}=...`: write its arguments after it, not after `=`"));
            }
            args.push(v);
        } else {
            while i < tokens.len() && !looks_like_option(tokens[i]) {
                let full = match nargs {
                    Nargs::Zero => true,
                    Nargs::Exactly(n) => args.len() == n,
                    Nargs::OneOrMore => false,
                };
                if full {
                    break;
                }
                args.push(tokens[i].to_string());
                i += 1;
            }
        }
        match nargs {
            Nargs::Exactly(n) if args.len() != n => {
                return Err(format!(
                    "`{opt}` expects {n} argument{}, got {}",
                    if n == 1 { "" } else { "s" },
                    args.len()
                ))
            }
            Nargs::OneOrMore if args.is_empty() => {
                return Err(format!("`{opt}` expects at least one argument"))
            }
            _ => {}
        }
        if opt == "--damos_scheme" {
            given.markers += 1;
            continue;
        }
        given.items.push((opt, args, given.markers));
    }
    Ok(given)
}

/// How many of `opt` (goals or filters) each of `n` schemes gets, as damo assigns them.
fn per_scheme(given: &Given, opt: &str, nr_opt: &str, n: usize) -> Result<Vec<usize>, String> {
    let total = given.count(opt);
    let counts: Vec<usize> = if given.markers > 0 {
        if given.count(nr_opt) > 0 {
            return Err(format!("`{nr_opt}` cannot be used with --damos_scheme markers"));
        }
        let mut c = vec![0; given.markers];
        for (o, _, m) in &given.items {
            if *o == opt {
                if *m == 0 {
                    return Err(format!(
                        "`{opt}` comes before the first --damos_scheme marker"
                    ));
                }
                c[m - 1] += 1;
            }
        }
        c
    } else if let Some(nr) = given.all(nr_opt).last() {
        nr.iter()
            .map(|t| t.parse::<usize>().map_err(|_| format!("`{nr_opt}`: `{t}` is not a count")))
            .collect::<Result<_, _>>()?
    } else if n == 1 {
        vec![total]
    } else if total > 0 {
        return Err(format!(
            "`{opt}` with {n} schemes: put --damos_scheme before each scheme's options (damo \
             cannot tell which scheme it belongs to otherwise)"
        ));
    } else {
        vec![0; n]
    };
    if counts.iter().sum::<usize>() != total || counts.len() < n {
        return Err(format!(
            "`{opt}`: the counts per scheme ({}) do not add up to the {total} given for {n} \
             schemes",
            counts
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    Ok(counts)
}

fn range_of<T>(
    opt: &str,
    args: Option<&Vec<String>>,
    read: impl Fn(&str) -> Result<T, String>,
    default: [T; 2],
) -> Result<[T; 2], String> {
    match args {
        None => Ok(default),
        Some(a) => {
            let at = |t: &str| read(t).map_err(|e| format!("`{opt}`: {e}"));
            Ok([at(&a[0])?, at(&a[1])?])
        }
    }
}

fn us_to_duration(opt: &str, n: Num) -> Result<Duration, String> {
    let us = n.ulong("a time").map_err(|e| format!("`{opt}`: {e}"))?;
    Ok(Duration(us.saturating_mul(1_000)))
}

fn ms_to_duration(opt: &str, n: Num) -> Result<Duration, String> {
    let ms = n.ulong("a time").map_err(|e| format!("`{opt}`: {e}"))?;
    Ok(Duration(ms.saturating_mul(1_000_000)))
}

/// A quota goal: `METRIC TARGET [complement] [NID]`.
fn goal(args: &[String]) -> Result<Goal, String> {
    let opt = "--damos_quota_goal";
    if !(2..=4).contains(&args.len()) {
        return Err(format!("`{opt}` expects METRIC TARGET [NODE], got `{}`", args.join(" ")));
    }
    let (metric, target, rest) = (&args[0], &args[1], &args[2..]);
    if rest.first().is_some_and(|r| r == "complement") {
        return Err(format!(
            "`{opt} ... complement` is not modelled (write the opposite metric instead)"
        ));
    }
    let metric = match metric.as_str() {
        "node_mem_used_bp" => GoalMetric::NodeMemUsedBp,
        "node_mem_free_bp" => GoalMetric::NodeMemFreeBp,
        m if GOAL_METRICS.contains(&m) => {
            return Err(format!(
                "`{opt} {m}` is not modelled (node_mem_used_bp and node_mem_free_bp are)"
            ))
        }
        m => {
            return Err(format!(
                "`{opt}`: `{m}` is not a goal metric ({})",
                GOAL_METRICS.join(", ")
            ))
        }
    };
    let [nid] = rest else {
        return Err(format!("`{opt} {}` needs the node id after the target", metric.name()));
    };
    let target_bp = text_to_bp(target)
        .ok()
        .filter(|n| n.f64().is_finite() && (0.0..=10_000.0).contains(&n.f64()))
        .map(|n| n.trunc() as u32)
        .ok_or_else(|| format!("`{opt}`: `{target}` is not a goal target (0 to 100%)"))?;
    let node = text_to_nr(nid)
        .ok()
        .and_then(|n| u8::try_from(n.trunc()).ok())
        .ok_or_else(|| format!("`{opt}`: `{nid}` is not a node id"))?;
    Ok(Goal {
        metric,
        target_bp,
        node,
    })
}

/// A filter in damo's format (`allow|reject [none] TYPE [ARGS]`), or its old one (`TYPE
/// matching|nomatching [ARGS] [allow|reject]`).
pub(super) fn filter(words: &[String]) -> Result<Filter, String> {
    let opt = "--damos_filter";
    let v2 = filter_v2(words);
    let v2 = match v2 {
        Ok(f) => return Ok(f),
        Err(e) => e,
    };
    // The old format, converted as damo converts it.
    if words.len() >= 2 && ["matching", "nomatching"].contains(&words[1].as_str()) {
        let mut rest: Vec<String> = words[2..].to_vec();
        let allow = match rest.last().map(String::as_str) {
            Some("allow" | "pass") => {
                rest.pop();
                "allow"
            }
            Some("reject" | "deny" | "block") => {
                rest.pop();
                "reject"
            }
            _ => "reject",
        };
        let mut converted = vec![allow.to_string()];
        if words[1] != "matching" {
            converted.push("none".into());
        }
        converted.push(words[0].clone());
        converted.extend(rest);
        return filter_v2(&converted);
    }
    Err(format!("`{opt} {}`: {v2}", words.join(" ")))
}

fn filter_v2(words: &[String]) -> Result<Filter, String> {
    let opt = "--damos_filter";
    if words.len() < 2 {
        return Err("expected allow|reject [none] TYPE [ARGS]".into());
    }
    let allow = match words[0].as_str() {
        "allow" => true,
        "reject" | "deny" | "block" => false,
        w => return Err(format!("`{w}` is not allow or reject")),
    };
    let mut k = 1;
    let matching = !["non", "none"].contains(&words[k].as_str());
    if !matching {
        k += 1;
    }
    let Some(kind) = words.get(k) else {
        return Err("no filter type".into());
    };
    let rest = &words[k + 1..];
    let (kind, target, used) = match kind.as_str() {
        "anon" => (FilterKind::Anon, None, 0),
        "target" => {
            let idx = rest
                .first()
                .and_then(|t| text_to_nr(t).ok())
                .and_then(|n| u64::try_from(n.trunc()).ok())
                .ok_or("a target filter needs the target index")?;
            (FilterKind::Target, Some(idx), 1)
        }
        "young" | "active" | "unmapped" | "memcg" | "hugepage_size" | "addr"
        | "probe_hits_wsum" => {
            return Err(format!(
                "`{opt} ... {kind}`: the {kind} filter is not modelled (anon and target are: \
                 every page of the heap is anonymous memory of one target)"
            ))
        }
        other => return Err(format!("`{other}` is not a filter type")),
    };
    if rest.len() != used {
        return Err("one filter per --damos_filter (damo 3.4.3 reads a single one)".into());
    }
    Ok(Filter {
        allow,
        matching,
        kind,
        target,
    })
}

/// Reads damo's `--damos_*` options into schemes.
pub fn parse_damo(line: &str) -> Result<Vec<Scheme>, String> {
    let g = tokenize(line)?;
    let actions = g.all("--damos_action");
    let n = actions.len();
    if n == 0 {
        if let Some((o, _, _)) = g.items.first() {
            return Err(format!("`{o}` without --damos_action"));
        }
        return Ok(vec![]);
    }
    for opt in [
        "--damos_sz_region",
        "--damos_access_rate",
        "--damos_age",
        "--damos_apply_interval",
        "--damos_quotas",
        "--damos_wmarks",
        "--damos_max_nr_snapshots",
        "--damos_quota_goal_tuner",
        "--damos_quota_fail_charge_ratio",
    ] {
        if g.count(opt) > n {
            return Err(format!(
                "`{opt}` is given {} times for {n} --damos_action (the i-th belongs to the \
                 i-th scheme)",
                g.count(opt)
            ));
        }
    }
    // Quotas: --damos_quotas, or --damos_quota_interval with the i-th time, space and
    // weights (damo's set_args_damos_quotas).
    let intervals = g.count("--damos_quota_interval");
    if g.count("--damos_quotas") > 0 && intervals > 0 {
        return Err(
            "`--damos_quotas` and `--damos_quota_interval` cannot be given together (as in damo)"
                .into(),
        );
    }
    for opt in ["--damos_quota_time", "--damos_quota_space", "--damos_quota_weights"] {
        if g.count(opt) > intervals {
            return Err(format!(
                "`{opt}` is given {} times and --damos_quota_interval {intervals}: damo drops \
                 the quota options without an interval (give --damos_quota_interval, e.g. 1s)",
                g.count(opt)
            ));
        }
    }
    if g.count("--damos_quota_weights") > 0 {
        return Err(
            "`--damos_quota_weights` is not modelled: tierscope takes matched regions hottest \
             (migrate_hot) or coldest (migrate_cold) first, then oldest"
                .into(),
        );
    }
    if intervals > n {
        return Err(format!(
            "`--damos_quota_interval` is given {intervals} times for {n} --damos_action"
        ));
    }
    if g.count("--damos_quota_goal") > 0 {
        let quotas = g.all("--damos_quotas");
        if (quotas.is_empty() && intervals == 0) || quotas.iter().any(|q| q.len() < 3) {
            return Err(
                "`--damos_quota_goal` needs a quota reset interval (--damos_quota_interval, or \
                 the third value of --damos_quotas), as in damo"
                    .into(),
            );
        }
    }
    let goals = per_scheme(&g, "--damos_quota_goal", "--damos_nr_quota_goals", n)?;
    let filters = per_scheme(&g, "--damos_filter", "--damos_nr_filters", n)?;
    let all_goals = g.all("--damos_quota_goal");
    let all_filters = g.all("--damos_filter");

    let mut schemes = vec![];
    let (mut goal_at, mut filter_at) = (0, 0);
    for (i, a) in actions.iter().enumerate() {
        let opt = "--damos_action";
        let action = match a[0].as_str() {
            "migrate_hot" => Action::MigrateHot,
            "migrate_cold" => Action::MigrateCold,
            x if ACTIONS.contains(&x) => {
                return Err(format!(
                    "`{opt} {x}` is not modelled: tierscope's DAMOS schemes migrate between \
                     tiers (migrate_hot, migrate_cold)"
                ))
            }
            x => {
                return Err(format!(
                    "`{opt}`: `{x}` is not a DAMOS action ({})",
                    ACTIONS.join(", ")
                ))
            }
        };
        let target = match &a[1..] {
            [nid] => nid
                .parse::<u8>()
                .map_err(|_| format!("`{opt} {}`: `{nid}` is not a node id", a[0]))?,
            [] => {
                return Err(format!(
                    "`{opt} {}` needs the target node id (e.g. `{opt} {} 0`)",
                    a[0], a[0]
                ))
            }
            _ => {
                return Err(format!(
                    "`{opt} {}` with several destinations (node and weight pairs) is not \
                     modelled: give one target node id",
                    a[0]
                ))
            }
        };
        let mut s = Scheme::new(action, target);
        let d = Scheme::new(action, target);
        s.size = range_of(
            "--damos_sz_region",
            g.nth("--damos_sz_region", i),
            |t| text_to_bytes(t).map(Size),
            d.size,
        )?;
        s.access_rate = range_of(
            "--damos_access_rate",
            g.nth("--damos_access_rate", i),
            |t| text_to_percent(t).map(|p| Accesses::Percent(p.f64())),
            d.access_rate,
        )?;
        s.age = range_of(
            "--damos_age",
            g.nth("--damos_age", i),
            |t| text_to_us(t).map(|u| Age::Micros(u.f64())),
            d.age,
        )?;
        if let Some(a) = g.nth("--damos_apply_interval", i) {
            let o = "--damos_apply_interval";
            s.apply_interval = us_to_duration(o, text_to_us(&a[0]).map_err(|e| format!("`{o}`: {e}"))?)?;
        }
        // Quotas as damo builds them: [time, size, interval, weights...].
        let quota: Option<Vec<String>> = if intervals > 0 {
            g.nth("--damos_quota_interval", i).map(|iv| {
                vec![
                    g.nth("--damos_quota_time", i).map_or("0".into(), |t| t[0].clone()),
                    g.nth("--damos_quota_space", i).map_or("0".into(), |t| t[0].clone()),
                    iv[0].clone(),
                ]
            })
        } else {
            g.nth("--damos_quotas", i).cloned()
        };
        if let Some(q) = quota {
            let o = if intervals > 0 {
                "--damos_quota_interval"
            } else {
                "--damos_quotas"
            };
            if q.len() > 6 {
                return Err(format!("`{o}` takes at most 6 values, got {}", q.len()));
            }
            if q.len() > 3 {
                return Err(format!(
                    "`{o}`: priority weights (values 4 to 6) are not modelled: tierscope takes \
                     matched regions hottest (migrate_hot) or coldest (migrate_cold) first"
                ));
            }
            let time = text_to_ms(&q[0]).map_err(|e| format!("`{o}`: {e}"))?;
            if time.f64() != 0.0 {
                return Err(format!(
                    "`{}`: a time quota is not modelled (give a space quota)",
                    if intervals > 0 { "--damos_quota_time" } else { o }
                ));
            }
            if let Some(sz) = q.get(1) {
                s.quota_space = Size(text_to_bytes(sz).map_err(|e| format!("`{o}`: {e}"))?);
            }
            if let Some(iv) = q.get(2) {
                s.quota_interval = ms_to_duration(o, text_to_ms(iv).map_err(|e| format!("`{o}`: {e}"))?)?;
            }
        }
        let mine = &all_goals[goal_at..goal_at + goals[i]];
        goal_at += goals[i];
        match mine {
            [] => {}
            [one] => s.goal = Some(goal(one)?),
            _ => {
                return Err(format!(
                    "scheme {i}: {} quota goals: one per scheme is modelled",
                    mine.len()
                ))
            }
        }
        let mine = &all_filters[filter_at..filter_at + filters[i]];
        filter_at += filters[i];
        if mine.len() > 1 {
            return Err(format!(
                "scheme {i}: {} --damos_filter: damo 3.4.3 reads one per scheme",
                mine.len()
            ));
        }
        for f in mine {
            s.filters.push(filter(f)?);
        }
        if let Some(t) = g.nth("--damos_quota_goal_tuner", i) {
            if t[0] != "consist" {
                return Err(format!(
                    "`--damos_quota_goal_tuner {}` is not modelled (the goal gates the scheme)",
                    t[0]
                ));
            }
        }
        if g.nth("--damos_quota_fail_charge_ratio", i).is_some() {
            return Err("`--damos_quota_fail_charge_ratio` is not modelled".into());
        }
        if let Some(w) = g.nth("--damos_wmarks", i) {
            if w[0] != "none" {
                return Err(format!(
                    "`--damos_wmarks {}` is not modelled (watermarks on free memory: only \
                     `none` is)",
                    w[0]
                ));
            }
            text_to_us(&w[1]).map_err(|e| format!("`--damos_wmarks`: {e}"))?;
            for t in &w[2..] {
                text_to_permil(t).map_err(|e| format!("`--damos_wmarks`: {e}"))?;
            }
        }
        if let Some(m) = g.nth("--damos_max_nr_snapshots", i) {
            // Statistics only: no effect on what the scheme does.
            text_to_nr(&m[0]).map_err(|e| format!("`--damos_max_nr_snapshots`: {e}"))?;
        }
        schemes.push(s);
    }
    Ok(schemes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_damo_lines_say_what_is_wrong() {
        for (line, want) in [
            ("--damos_access_rate 5% max", "without --damos_action"),
            ("--damos_action pageout", "not modelled"),
            ("--damos_action migrate_hot", "needs the target node id"),
            ("--damos_action migrate_hot 0 --damos_quota_interval 1s --damos_quota_space lots", "not a size"),
            ("--damos_action migrate_hot 0 --damos_filter allow young", "young filter is not modelled"),
            ("--damos_action migrate_hot 0 --damos_access_rate -5% max", "expects 2 arguments"),
            ("--damos_action migrate_hot 0 --damos_access_rate nan% max", "not a percentage"),
            ("--damos_action migrate_hot 0 --damos_quota_interval 1s --damos_quota_goal node_mem_used_bp 1e30 0", "not a goal target"),
            ("--damos_action migrate_hot 0 --damos_quota_goal node_mem_used_bp 50% 0", "needs a quota reset interval"),
            ("--damos_action migrate_hot 0 --damos_quota_space 1G", "damo drops"),
            ("--damos_action migrate_hot 0 --damos_acc 5 max", "write the option in full"),
            ("--damos_action migrate_hot 0 --numa_node 1", "sets up DAMON's monitoring"),
            ("--damos_action migrate_hot 0 --damos_quotas 10 1G 1s", "time quota is not modelled"),
            ("--damos_action migrate_hot 0 --damos_wmarks free_mem_rate 5s 800 500 200", "not modelled"),
            ("--damos_action migrate_hot 0 --damos_age 1s max stray", "not an option"),
            ("--damos_action migrate_hot 0 30 1 70", "several destinations"),
        ] {
            let e = parse_damo(line).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn markers_assign_goals_and_filters() {
        let s = parse_damo(
            "--damos_scheme --damos_action migrate_cold 1 --damos_quota_interval 1s \
             --damos_quota_goal node_mem_free_bp 0.5% 0 --damos_filter reject none anon \
             --damos_scheme --damos_action migrate_hot 0 --damos_quota_interval=1000 \
             --damos_quota_goal node_mem_used_bp 99.7% 0 --damos_filter allow anon",
        )
        .unwrap();
        assert_eq!(s[0].goal.as_ref().unwrap().target_bp, 50);
        assert_eq!(s[1].goal.as_ref().unwrap().target_bp, 9970);
        assert!(!s[0].filters[0].matching);
        assert!(s[1].filters[0].allow);
        assert_eq!(s[1].quota_interval, Duration(1_000_000_000));
        let e = parse_damo(
            "--damos_action migrate_cold 1 --damos_action migrate_hot 0 --damos_filter allow anon",
        )
        .unwrap_err();
        assert!(e.contains("--damos_scheme"), "{e}");
    }
}
