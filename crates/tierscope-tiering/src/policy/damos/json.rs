//! damo's JSON schemes (`Damos.from_kvpairs` of damo 3.4.3): what `damo args damon
//! --format json` prints, with or without `--raw`. Accepted: a kdamonds document (every
//! scheme of every context), a list of schemes (damo's `--schemes` input) or one scheme;
//! as a JSON text or the value itself. Numbers may be JSON numbers or damo's texts
//! (`"5 %"`, `"4.000 KiB"`, `"1 s"`, `"max"`, `"18,446,744,073,709,551,615 %"`).

use super::units::{text_to_bool, text_to_bp, text_to_bytes, text_to_ms, text_to_nr, text_to_permil, text_to_us, Num};
use super::{accesses_from_text, age_from_text, Accesses, Action, Age, Goal, GoalMetric, Scheme};
use serde_json::{Map, Value};
use tierscope_core::units::{Duration, Size};

/// A JSON number or damo text read by `read`.
fn num(v: &Value, at: &str, read: fn(&str) -> Result<Num, String>) -> Result<Num, String> {
    match v {
        Value::Number(n) => Ok(match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Num::Int(i.into()),
            (None, Some(f)) if n.is_u64() => Num::Int(n.as_u64().map_or(f as i128, i128::from)),
            (None, Some(f)) => Num::Float(f),
            _ => return Err(format!("{at}: `{n}` is not a number")),
        }),
        Value::String(s) => read(s).map_err(|e| format!("{at}: {e}")),
        other => Err(format!("{at}: expected a number or a string, got {other}")),
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{at}: expected an object, got {v}"))
}

/// Refuses keys damo does not read (damo ignores them: a misspelt key would silently
/// leave its default).
fn known(m: &Map<String, Value>, at: &str, keys: &[&str]) -> Result<(), String> {
    match m.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{at}: `{k}` is not a key damo reads here ({}){}",
            keys.join(", "),
            tierscope_core::did_you_mean(k, keys)
        )),
        None => Ok(()),
    }
}

fn min_max<'a>(v: &'a Value, at: &str) -> Result<(&'a Value, &'a Value), String> {
    let m = object(v, at)?;
    known(m, at, &["min", "max"])?;
    match (m.get("min"), m.get("max")) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(format!("{at}: expected min and max")),
    }
}

fn accesses(v: &Value, at: &str) -> Result<Accesses, String> {
    match v {
        Value::Number(_) => Ok(Accesses::Percent(num(v, at, text_to_nr)?.f64())),
        Value::String(s) => accesses_from_text(s).map_err(|e| format!("{at}: {e}")),
        other => Err(format!("{at}: expected a number or a string, got {other}")),
    }
}

fn age(v: &Value, at: &str) -> Result<Age, String> {
    match v {
        Value::Number(_) => Ok(Age::Micros(num(v, at, text_to_nr)?.f64())),
        Value::String(s) => age_from_text(s).map_err(|e| format!("{at}: {e}")),
        other => Err(format!("{at}: expected a number or a string, got {other}")),
    }
}

fn scheme(v: &Value, at: &str) -> Result<Scheme, String> {
    let m = object(v, at)?;
    known(
        m,
        at,
        &[
            "action",
            "dests",
            "target_nid",
            "access_pattern",
            "apply_interval_us",
            "quotas",
            "watermarks",
            "filters",
            "stats",
            "comments",
        ],
    )?;
    let action = match m.get("action").and_then(Value::as_str) {
        Some("migrate_hot") => Action::MigrateHot,
        Some("migrate_cold") => Action::MigrateCold,
        // damo's default action is `stat`.
        other => {
            return Err(format!(
                "{at}.action: `{}` is not modelled: tierscope's DAMOS schemes migrate between \
                 tiers (migrate_hot, migrate_cold)",
                other.unwrap_or("stat")
            ))
        }
    };
    if m
        .get("dests")
        .and_then(Value::as_array)
        .is_some_and(|d| !d.is_empty())
    {
        return Err(format!(
            "{at}.dests: several destinations are not modelled: give one target_nid"
        ));
    }
    let target = match m.get("target_nid") {
        Some(v) if !v.is_null() => text(v)
            .and_then(|t| t.trim().parse::<u8>().ok())
            .ok_or_else(|| format!("{at}.target_nid: `{v}` is not a node id"))?,
        _ => return Err(format!("{at}.target_nid: a migrate action needs the target node")),
    };
    let mut s = Scheme::new(action, target);
    if let Some(p) = m.get("access_pattern") {
        let pat = format!("{at}.access_pattern");
        let pm = object(p, &pat)?;
        // Older damo wrote the units beside the values; they are ignored there too.
        known(pm, &pat, &["sz_bytes", "nr_accesses", "age", "nr_accesses_unit", "age_unit"])?;
        if let Some(v) = pm.get("sz_bytes") {
            let at = format!("{pat}.sz_bytes");
            let (a, b) = min_max(v, &at)?;
            let size = |v: &Value, end: &str| -> Result<Size, String> {
                let at = format!("{at}.{end}");
                match v {
                    Value::String(t) => text_to_bytes(t).map(Size).map_err(|e| format!("{at}: {e}")),
                    _ => num(v, &at, text_to_nr)?.ulong("a size").map(Size).map_err(|e| format!("{at}: {e}")),
                }
            };
            s.size = [size(a, "min")?, size(b, "max")?];
        }
        if let Some(v) = pm.get("nr_accesses") {
            let at = format!("{pat}.nr_accesses");
            let (a, b) = min_max(v, &at)?;
            s.access_rate = [accesses(a, &format!("{at}.min"))?, accesses(b, &format!("{at}.max"))?];
        }
        if let Some(v) = pm.get("age") {
            let at = format!("{pat}.age");
            let (a, b) = min_max(v, &at)?;
            s.age = [age(a, &format!("{at}.min"))?, age(b, &format!("{at}.max"))?];
        }
    }
    if let Some(v) = m.get("apply_interval_us") {
        let at = format!("{at}.apply_interval_us");
        let us = num(v, &at, text_to_us)?.ulong("a time").map_err(|e| format!("{at}: {e}"))?;
        s.apply_interval = Duration(us.saturating_mul(1_000));
    }
    if let Some(q) = m.get("quotas") {
        quotas(&mut s, q, &format!("{at}.quotas"))?;
    }
    if let Some(w) = m.get("watermarks") {
        let at = format!("{at}.watermarks");
        let wm = object(w, &at)?;
        known(wm, &at, &["metric", "interval_us", "high_permil", "mid_permil", "low_permil"])?;
        match wm.get("metric").and_then(Value::as_str) {
            Some("none") | None => {}
            Some(x) => {
                return Err(format!(
                    "{at}.metric: `{x}` is not modelled (watermarks on free memory: only none is)"
                ))
            }
        }
        for k in ["high_permil", "mid_permil", "low_permil"] {
            if let Some(v) = wm.get(k) {
                num(v, &format!("{at}.{k}"), text_to_permil)?;
            }
        }
    }
    if let Some(f) = m.get("filters") {
        let at = format!("{at}.filters");
        let list = f
            .as_array()
            .ok_or_else(|| format!("{at}: expected a list"))?;
        for (k, f) in list.iter().enumerate() {
            s.filters.push(filter(f, &format!("{at}[{k}]"))?);
        }
    }
    Ok(s)
}

fn quotas(s: &mut Scheme, q: &Value, at: &str) -> Result<(), String> {
    let qm = object(q, at)?;
    known(
        qm,
        at,
        &[
            "time_ms",
            "sz_bytes",
            "reset_interval_ms",
            "fail_charge_num",
            "fail_charge_denom",
            "goals",
            "goal_tuner",
            "effective_sz_bytes",
            "weights",
        ],
    )?;
    if let Some(v) = qm.get("time_ms") {
        if num(v, &format!("{at}.time_ms"), text_to_ms)?.f64() != 0.0 {
            return Err(format!("{at}.time_ms: a time quota is not modelled (give sz_bytes)"));
        }
    }
    if let Some(v) = qm.get("sz_bytes") {
        let at = format!("{at}.sz_bytes");
        s.quota_space = Size(match v {
            Value::String(t) => text_to_bytes(t).map_err(|e| format!("{at}: {e}"))?,
            _ => num(v, &at, text_to_nr)?.ulong("a size").map_err(|e| format!("{at}: {e}"))?,
        });
    }
    if let Some(v) = qm.get("reset_interval_ms") {
        let at = format!("{at}.reset_interval_ms");
        let ms = num(v, &at, text_to_ms)?.ulong("a time").map_err(|e| format!("{at}: {e}"))?;
        s.quota_interval = Duration(ms.saturating_mul(1_000_000));
    }
    for k in ["fail_charge_num", "fail_charge_denom"] {
        if let Some(v) = qm.get(k) {
            if num(v, &format!("{at}.{k}"), text_to_nr)?.f64() != 0.0 {
                return Err(format!("{at}.{k}: a fail charge ratio is not modelled"));
            }
        }
    }
    if let Some(t) = qm.get("goal_tuner").and_then(Value::as_str) {
        if t != "consist" {
            return Err(format!("{at}.goal_tuner: `{t}` is not modelled (the goal gates the scheme)"));
        }
    }
    if let Some(w) = qm.get("weights") {
        let wat = format!("{at}.weights");
        let wm = object(w, &wat)?;
        known(wm, &wat, &["sz_permil", "nr_accesses_permil", "age_permil"])?;
        let mut ws = vec![];
        for k in ["sz_permil", "nr_accesses_permil", "age_permil"] {
            if let Some(v) = wm.get(k) {
                ws.push(num(v, &format!("{wat}.{k}"), text_to_permil)?.f64());
            }
        }
        // damo's defaults: 0 (`--damos_quotas`, JSON) or 1 (`--damos_quota_interval`).
        if !(ws.iter().all(|&x| x == 0.0) || ws.iter().all(|&x| x == 1.0)) {
            return Err(format!(
                "{wat}: priority weights are not modelled: tierscope takes matched regions \
                 hottest (migrate_hot) or coldest (migrate_cold) first"
            ));
        }
    }
    if let Some(g) = qm.get("goals") {
        let gat = format!("{at}.goals");
        let list = g
            .as_array()
            .ok_or_else(|| format!("{gat}: expected a list"))?;
        match &list[..] {
            [] => {}
            [one] => s.goal = Some(goal(one, &format!("{gat}[0]"))?),
            _ => return Err(format!("{gat}: {} goals: one per scheme is modelled", list.len())),
        }
    }
    Ok(())
}

fn goal(v: &Value, at: &str) -> Result<Goal, String> {
    let m = object(v, at)?;
    known(
        m,
        at,
        &["metric", "complement", "nid", "memcg_path", "target_value", "current_value"],
    )?;
    let metric = match m.get("metric").and_then(Value::as_str) {
        Some("node_mem_used_bp") => GoalMetric::NodeMemUsedBp,
        Some("node_mem_free_bp") => GoalMetric::NodeMemFreeBp,
        other => {
            return Err(format!(
                "{at}.metric: `{}` is not modelled (node_mem_used_bp and node_mem_free_bp are)",
                other.unwrap_or("user_input")
            ))
        }
    };
    if let Some(c) = m.get("complement") {
        let on = match c {
            Value::Bool(b) => *b,
            Value::String(t) => text_to_bool(t).map_err(|e| format!("{at}.complement: {e}"))?,
            _ => return Err(format!("{at}.complement: expected a boolean")),
        };
        if on {
            return Err(format!("{at}.complement: not modelled (write the opposite metric)"));
        }
    }
    let target = m
        .get("target_value")
        .ok_or_else(|| format!("{at}: no target_value"))?;
    let target_bp = num(target, &format!("{at}.target_value"), text_to_bp)?;
    let target_bp = Some(target_bp.f64())
        .filter(|t| (0.0..=10_000.0).contains(t))
        .map(|_| target_bp.trunc() as u32)
        .ok_or_else(|| format!("{at}.target_value: `{target}` is not a goal target (0 to 100%)"))?;
    let node = m
        .get("nid")
        .filter(|v| !v.is_null())
        .ok_or_else(|| format!("{at}.nid: the goal needs the node id"))?;
    let node = num(node, &format!("{at}.nid"), text_to_nr)
        .ok()
        .and_then(|n| u8::try_from(n.trunc()).ok())
        .ok_or_else(|| format!("{at}.nid: `{node}` is not a node id"))?;
    Ok(Goal {
        metric,
        target_bp,
        node,
    })
}

fn filter(v: &Value, at: &str) -> Result<super::Filter, String> {
    let m = object(v, at)?;
    known(
        m,
        at,
        &[
            "filter_type",
            "matching",
            "allow",
            "filter_pass",
            "memcg_path",
            "address_range",
            "damon_target_idx",
            "hugepage_size",
            "probe_hits_wsum_range",
        ],
    )?;
    let boolean = |k: &str| -> Result<bool, String> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(t)) => text_to_bool(t).map_err(|e| format!("{at}.{k}: {e}")),
            Some(o) => Err(format!("{at}.{k}: expected a boolean, got {o}")),
        }
    };
    let allow = if m.contains_key("allow") {
        boolean("allow")?
    } else {
        boolean("filter_pass")?
    };
    let matching = if m.contains_key("matching") {
        boolean("matching")?
    } else {
        return Err(format!("{at}: no matching"));
    };
    let kind = m
        .get("filter_type")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{at}: no filter_type"))?;
    let mut words = vec![
        if allow { "allow" } else { "reject" }.to_string(),
    ];
    if !matching {
        words.push("none".into());
    }
    words.push(kind.to_string());
    if kind == "target" {
        let idx = m
            .get("damon_target_idx")
            .and_then(text)
            .ok_or_else(|| format!("{at}: a target filter needs damon_target_idx"))?;
        words.push(idx);
    }
    super::args::filter(&words).map_err(|e| format!("{at}: {e}"))
}

/// Reads damo's JSON schemes (a kdamonds document, a list of schemes or one scheme; or a
/// JSON text of one).
pub fn parse_damo_json(doc: &Value) -> Result<Vec<Scheme>, String> {
    let parsed;
    let doc = match doc {
        Value::String(t) => {
            parsed = serde_json::from_str::<Value>(t)
                .map_err(|e| format!("not valid JSON: {e}"))?;
            &parsed
        }
        v => v,
    };
    let mut out = vec![];
    match doc {
        Value::Object(m) if m.contains_key("kdamonds") => {
            let kds = m["kdamonds"]
                .as_array()
                .ok_or("kdamonds: expected a list")?;
            for (i, kd) in kds.iter().enumerate() {
                let ctxs = kd
                    .get("contexts")
                    .and_then(Value::as_array)
                    .ok_or_else(|| format!("kdamonds[{i}].contexts: expected a list"))?;
                for (j, c) in ctxs.iter().enumerate() {
                    let at = format!("kdamonds[{i}].contexts[{j}].schemes");
                    let list = c
                        .get("schemes")
                        .and_then(Value::as_array)
                        .ok_or_else(|| format!("{at}: expected a list"))?;
                    for (k, s) in list.iter().enumerate() {
                        out.push(scheme(s, &format!("{at}[{k}]"))?);
                    }
                }
            }
        }
        Value::Array(list) => {
            for (k, s) in list.iter().enumerate() {
                out.push(scheme(s, &format!("[{k}]"))?);
            }
        }
        Value::Object(_) => out.push(scheme(doc, "scheme")?),
        other => return Err(format!("expected damo's JSON (kdamonds, a list of schemes or a scheme), got {other}")),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damo_human_json_reads_back() {
        let doc = serde_json::json!([{
            "action": "migrate_hot",
            "target_nid": 0,
            "access_pattern": {
                "sz_bytes": {"min": "4.000 KiB", "max": "max"},
                "nr_accesses": {"min": "5 %", "max": "18,446,744,073,709,551,615 %"},
                "age": {"min": "1 m 30 s", "max": "max"}
            },
            "apply_interval_us": "1 s",
            "quotas": {"time_ms": "0 ns", "sz_bytes": "200.000 MiB", "reset_interval_ms": "1 s",
                "goals": [{"metric": "node_mem_used_bp", "nid": "0", "target_value": "9,970",
                    "current_value": "0", "complement": false, "memcg_path": null}],
                "weights": {"sz_permil": "0 %", "nr_accesses_permil": "0 %", "age_permil": "0 %"}},
            "watermarks": {"metric": "none", "interval_us": "0 ns", "high_permil": "0 %",
                "mid_permil": "0 %", "low_permil": "0 %"},
            "filters": []
        }]);
        let s = &parse_damo_json(&doc).unwrap()[0];
        assert_eq!(s.size[0], Size(4096));
        assert_eq!(s.access_rate[0], Accesses::Percent(5.0));
        assert_eq!(s.age[0], Age::Micros(9e7));
        assert_eq!(s.apply_interval, Duration(1_000_000_000));
        assert_eq!(s.quota_space, Size(200 << 20));
        assert_eq!(s.quota_interval, Duration(1_000_000_000));
        assert_eq!(s.goal.as_ref().unwrap().target_bp, 9970);
        let samples = serde_json::json!({"action": "migrate_cold", "target_nid": 1,
            "access_pattern": {"sz_bytes": {"min": 0, "max": "max"},
                "nr_accesses": {"min": "0 samples", "max": "2 samples"},
                "age": {"min": "3 aggr_intervals", "max": "max aggr_intervals"}}});
        let s = &parse_damo_json(&samples).unwrap()[0];
        assert_eq!(s.access_rate, [Accesses::Samples(0), Accesses::Samples(2)]);
        assert_eq!(s.age, [Age::Windows(3), Age::Windows(u64::MAX)]);
        let e = parse_damo_json(&serde_json::json!({"action": "migrate_hot", "target_nid": 0,
            "acess_pattern": {}})).unwrap_err();
        assert!(e.contains("`acess_pattern` is not a key"), "{e}");
    }
}
