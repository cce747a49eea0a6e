//! One run per technique, stepped through time. Each step: the quota in force sets the
//! neighbour's demand, `contention` serves everyone and gives the victim's latency law
//! at that load, the served requests reach the telemetry (every request through the
//! NEMO driver, or byte counts for MBM), and at the step's end the controller gets
//! whatever samples the technique delivers: an interrupt drained, a window read, a poll.
//! Deterministic: the only randomness is the seeded streams named below.

use std::fmt;

use tierscope_core::rng::Rng;
use tierscope_core::FieldError;

use super::contention::{Contention, LatencyMix};
use super::controller::QuotaController;
use super::telemetry::{mbm_cpu_share, Mbm, NemoBandwidth};
use super::tenants::{Layout, OnOff, Stream, HUGE_PAGE, LINE};
use super::Config;

/// How the neighbour is watched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Technique {
    /// The victim with no neighbour: the baseline of the p99 increase.
    Alone,
    /// The neighbour never throttled.
    Unthrottled,
    /// NEMO with notifications as interrupts (the design, §3.1) and window reads.
    Nemo,
    /// NEMO as the prototype ran it: notifications emulated by polling the counter every
    /// `nemo_emulated_poll_s` (§4).
    NemoEmulated,
    /// MBM polled every `interval_s`.
    Mbm { interval_s: f64 },
}

impl Technique {
    pub fn name(&self) -> String {
        match self {
            Technique::Alone => "victim alone".into(),
            Technique::Unthrottled => "unthrottled".into(),
            Technique::Nemo => "NEMO (notify interrupt)".into(),
            Technique::NemoEmulated => "NEMO (notify emulated, polled)".into(),
            Technique::Mbm { interval_s } => format!("MBM {} ms", interval_s * 1e3),
        }
    }

    /// The paper's numbers for this technique (§5.3, Figures 8 and 9), for the table.
    pub fn paper(&self) -> &'static str {
        match self {
            Technique::Alone => "",
            Technique::Unthrottled => "p99 +22%",
            Technique::Nemo => "",
            Technique::NemoEmulated => "p99 +5.2%, CPU 0.09%",
            Technique::Mbm { interval_s } if (interval_s - 0.001).abs() < 1e-12 => {
                "p99 +5.5%, CPU 32%"
            }
            Technique::Mbm { interval_s } if (interval_s - 0.1).abs() < 1e-12 => {
                "p99 +13%, CPU 0.7%"
            }
            Technique::Mbm { .. } => "",
        }
    }
}

/// One technique's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub technique: Technique,
    pub victim_p50_ns: f64,
    pub victim_p99_ns: f64,
    /// `p99 / p99 alone - 1`, set by [`run`].
    pub p99_increase: Option<f64>,
    /// The neighbour's served bandwidth over the run, bytes/s.
    pub neighbour_bandwidth: f64,
    /// Telemetry CPU time as a share of one core (0.01 = 1%).
    pub cpu_share: Option<f64>,
    /// Mean time from an on-phase's start to the controller's first quota cut in it, s.
    pub detection_s: Option<f64>,
    /// On-phases started, and those in which the controller cut the quota.
    pub on_phases: u64,
    pub detected: u64,
    /// Mean quota in force when an on-phase starts: how far the controller let the
    /// neighbour back up while it slept.
    pub start_quota: Option<f64>,
    /// The neighbour's bytes as the telemetry measured them over the run, relative to
    /// the bytes it moved: `measured / truth - 1`.
    pub bandwidth_error: Option<f64>,
    /// Bandwidth samples the controller received, quota writes it made.
    pub samples: u64,
    pub quota_writes: u64,
}

/// Every technique's row, victim-alone first.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub rows: Vec<Row>,
}

/// Runs every technique on `config`: victim alone, unthrottled, NEMO with interrupts and
/// with emulated notifications, and MBM at each interval.
pub fn run(config: &Config) -> Result<Table, FieldError> {
    config.validate()?;
    let mut techniques = vec![
        Technique::Alone,
        Technique::Unthrottled,
        Technique::Nemo,
        Technique::NemoEmulated,
    ];
    techniques.extend(
        config
            .mbm_intervals_s
            .iter()
            .map(|&interval_s| Technique::Mbm { interval_s }),
    );
    let mut rows = techniques
        .iter()
        .map(|&t| run_one(config, t))
        .collect::<Result<Vec<_>, _>>()?;
    let alone = rows[0].victim_p99_ns;
    for r in &mut rows {
        r.p99_increase = Some(r.victim_p99_ns / alone - 1.0);
    }
    Ok(Table { rows })
}

/// The telemetry a technique keeps, and its bookkeeping.
enum Watch {
    None,
    Nemo {
        nemo: Box<NemoBandwidth>,
        flagged: Vec<bool>,
        /// Requests read per window at which the neighbour's predicate fires.
        cap_requests: u64,
        emulated: bool,
        /// Emulated: the neighbour's count since the controller's last sample.
        pending: u64,
    },
    Mbm {
        mbm: Mbm,
        deltas: Vec<u64>,
        every: u64,
    },
}

/// The neighbour's index among the tenants (`Config::tenants`).
const NEIGHBOUR: usize = 1;

/// One technique's run.
pub fn run_one(config: &Config, technique: Technique) -> Result<Row, FieldError> {
    config.validate()?;
    let tenants = config.tenants();
    let n = tenants.len();
    let dt = config.step_s;
    let steps = config.steps("duration_s", config.duration_s)?;
    let window = config.steps("nemo_window_s", config.nemo_window_s)?;
    let poll = config.steps("nemo_emulated_poll_s", config.nemo_emulated_poll_s)?;
    let pages: Vec<u64> = tenants.iter().map(|t| t.huge_pages).collect();
    let layout = Layout::new(&pages, config.device.capacity / HUGE_PAGE)?;
    let contention = Contention {
        device: config.device.clone(),
    };
    let phase = OnOff {
        on_s: config.on_s,
        off_s: config.off_s,
        offset_s: config.offset_s.unwrap_or_else(|| {
            Rng::for_stream(config.seed, "noisy/phase").unit() * (config.on_s + config.off_s)
        }),
    };
    let cap_requests = (config.controller.target * config.nemo_window_s / LINE as f64) as u64;
    let mut watch = match technique {
        Technique::Alone | Technique::Unthrottled => Watch::None,
        Technique::Nemo | Technique::NemoEmulated => {
            let emulated = technique == Technique::NemoEmulated;
            // Only the neighbour is capped; the emulated version has no predicate (the
            // prototype has none) and compares in software.
            let mut caps = vec![None; n];
            if !emulated {
                caps[NEIGHBOUR] = Some(cap_requests);
            }
            let nemo = NemoBandwidth::new(config.nemo, config.device.capacity, &layout, &caps)?;
            Watch::Nemo {
                nemo: Box::new(nemo),
                flagged: vec![false; n],
                cap_requests,
                emulated,
                pending: 0,
            }
        }
        Technique::Mbm { interval_s } => Watch::Mbm {
            mbm: Mbm::new(n),
            deltas: vec![0; n],
            every: config.steps("mbm_intervals_s", interval_s)?,
        },
    };
    // At most one quota write per step, so the writes in flight fit one actuation.
    let in_flight = (config.controller.actuation_s / dt).ceil() as usize + 2;
    let mut ctl = QuotaController::new(config.controller, in_flight);
    let throttled = !matches!(technique, Technique::Alone | Technique::Unthrottled);

    let mut demand_rng = Rng::for_stream(config.seed, "noisy/demand");
    let mut streams: Vec<Stream> = tenants
        .iter()
        .enumerate()
        .map(|(i, t)| Stream::new(t, Rng::for_stream(config.seed, &format!("noisy/addr/{i}"))))
        .collect();
    let mut offered = vec![0.0; n];
    let mut served = vec![0.0; n];
    let mut carry = vec![0.0; n];
    let mut truth = vec![0u64; n];
    let mut measured: u64 = 0; // the neighbour's bytes as the telemetry saw them
    let mut mix = LatencyMix::with_capacity(steps as usize);
    let mut last_sample = 0.0;
    let (mut on_phases, mut detected, mut detection_sum) = (0u64, 0u64, 0.0);
    let mut phase_start: Option<f64> = None;
    let mut quota_sum = 0.0;
    let mut was_on = false;

    for k in 0..steps {
        let (t0, t1) = (k as f64 * dt, (k + 1) as f64 * dt);
        let quota = if throttled { ctl.applied_at(t0) } else { 1.0 };
        let on = technique != Technique::Alone && phase.is_on(t0);
        if on && !was_on {
            on_phases += 1;
            quota_sum += quota;
            phase_start = Some(t0);
        }
        was_on = on;
        for (i, t) in tenants.iter().enumerate() {
            let noise = if t.jitter > 0.0 {
                1.0 + t.jitter * (2.0 * demand_rng.unit() - 1.0)
            } else {
                1.0
            };
            offered[i] = match i {
                NEIGHBOUR if !on => 0.0,
                NEIGHBOUR => t.demand * quota * noise,
                _ => t.demand * noise,
            };
        }
        let u = contention.serve(&offered, &mut served);
        for i in 0..n {
            let lines = served[i] * dt / LINE as f64 + carry[i];
            let whole = lines.floor();
            carry[i] = lines - whole;
            let requests = whole as u64;
            truth[i] += requests * LINE;
            if i == 0 {
                mix.push(u, whole);
            }
            match &mut watch {
                Watch::Nemo { nemo, .. } => {
                    let frames = layout.frames(i);
                    for _ in 0..requests {
                        nemo.access(&streams[i].next(frames));
                    }
                }
                Watch::Mbm { mbm, .. } => mbm.count(i, requests),
                Watch::None => {}
            }
        }

        // The end of the step: samples for the controller.
        let mut sample: Option<f64> = None;
        match &mut watch {
            Watch::None => {}
            Watch::Nemo {
                nemo,
                flagged,
                cap_requests,
                emulated,
                pending,
            } => {
                let window_end = (k + 1) % window == 0;
                if *emulated {
                    // The polling core reads the neighbour's counter every `poll`.
                    if (k + 1) % poll == 0 || window_end {
                        let c = nemo.read(NEIGHBOUR);
                        measured += c * LINE;
                        *pending += c;
                    }
                    if *pending >= *cap_requests || window_end {
                        sample = Some(*pending as f64 * LINE as f64 / (t1 - last_sample));
                        *pending = 0;
                    }
                } else if nemo.drain(flagged) && flagged[NEIGHBOUR] || window_end {
                    let c = nemo.read(NEIGHBOUR);
                    measured += c * LINE;
                    sample = Some(c as f64 * LINE as f64 / (t1 - last_sample));
                }
                if window_end {
                    // The other tenants' counters are read each window too (their bandwidth
                    // is reported, and the read resets them).
                    for i in (0..n).filter(|&i| i != NEIGHBOUR) {
                        nemo.read(i);
                    }
                }
            }
            Watch::Mbm { mbm, deltas, every } => {
                if (k + 1) % *every == 0 {
                    mbm.poll(deltas);
                    measured += deltas[NEIGHBOUR];
                    sample = Some(deltas[NEIGHBOUR] as f64 / (t1 - last_sample));
                }
            }
        }
        if let Some(b) = sample {
            last_sample = t1;
            if ctl.observe(t1, b) {
                if let Some(start) = phase_start.take() {
                    detected += 1;
                    detection_sum += t1 - start;
                }
            }
        }
    }

    // Whatever the telemetry holds at the end belongs to the measured total.
    let cpu_share = match &mut watch {
        Watch::None => None,
        Watch::Nemo { nemo, .. } => {
            // Costed before the final read, which is the experiment's, not the loop's.
            let cycles = nemo.reads as f64 * config.cost.nemo_state_read
                + nemo.interrupts as f64 * config.cost.nemo_interrupt;
            measured += nemo.read(NEIGHBOUR) * LINE;
            Some(cycles / config.cost.cpu_hz / config.duration_s)
        }
        Watch::Mbm { mbm, deltas, .. } => {
            let polls = mbm.polls;
            mbm.poll(deltas);
            measured += deltas[NEIGHBOUR];
            Some(mbm_cpu_share(
                polls,
                config.mbm_poll_cost_s,
                config.duration_s,
            ))
        }
    };
    let bandwidth_error = match (&watch, truth[NEIGHBOUR]) {
        (Watch::None, _) | (_, 0) => None,
        (_, t) => Some(measured as f64 / t as f64 - 1.0),
    };
    Ok(Row {
        technique,
        victim_p50_ns: mix.quantile(&contention, 0.50),
        victim_p99_ns: mix.quantile(&contention, 0.99),
        p99_increase: None,
        neighbour_bandwidth: truth[NEIGHBOUR] as f64 / config.duration_s,
        cpu_share,
        detection_s: (detected > 0).then(|| detection_sum / detected as f64),
        on_phases,
        detected,
        start_quota: (on_phases > 0).then(|| quota_sum / on_phases as f64),
        bandwidth_error,
        samples: ctl.samples,
        quota_writes: ctl.writes,
    })
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "| technique | victim p50 (ns) | victim p99 (ns) | p99 vs alone | neighbour (GiB/s) \
             | telemetry CPU (% of a core) | detection (ms, detected/on-phases) \
             | quota at on-phase start | neighbour bandwidth error | paper |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|---|---|")?;
        let opt = |v: Option<f64>, scale: f64, digits: usize| {
            v.map_or("-".to_string(), |x| format!("{:.*}", digits, x * scale))
        };
        for r in &self.rows {
            writeln!(
                f,
                "| {} | {:.0} | {:.0} | {} | {:.3} | {} | {} | {} | {} | {} |",
                r.technique.name(),
                r.victim_p50_ns,
                r.victim_p99_ns,
                r.p99_increase
                    .map_or("-".into(), |x| format!("{:+.1}%", x * 100.0)),
                r.neighbour_bandwidth / (1u64 << 30) as f64,
                opt(r.cpu_share, 100.0, 3),
                match r.detection_s {
                    Some(d) => format!("{:.1} ({}/{})", d * 1e3, r.detected, r.on_phases),
                    None => "-".into(),
                },
                opt(r.start_quota, 1.0, 2),
                r.bandwidth_error
                    .map_or("-".into(), |x| format!("{:.4}%", x * 100.0)),
                r.technique.paper(),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// §5.3's setup for 1 s (one on-phase and one off-phase), the phase fixed.
    fn short() -> Config {
        Config {
            duration_s: 1.0,
            offset_s: Some(0.75),
            ..Config::paper()
        }
    }

    #[test]
    fn victim_alone_by_hand() {
        // No jitter: every step has the victim alone at u = 2 / 16.4, so the run's
        // quantiles are that load's: p50 idle (u < 0.5), p99 from the closed form.
        let mut c = short();
        c.victim.jitter = 0.0;
        let r = run_one(&c, Technique::Alone).unwrap();
        let u = c.victim.demand / c.device.bandwidth;
        let s = c.device.queueing * c.device.latency_ns;
        let p99 = c.device.latency_ns + s / (1.0 - u) * (u / 0.01).ln();
        assert!(
            (r.victim_p99_ns - p99).abs() < 1e-4,
            "{} vs {p99}",
            r.victim_p99_ns
        );
        assert_eq!(r.victim_p50_ns, c.device.latency_ns);
        assert_eq!((r.neighbour_bandwidth, r.on_phases), (0.0, 0));
    }

    #[test]
    fn same_seed_same_rows_and_another_seed_differs() {
        let c = short();
        for t in [Technique::Nemo, Technique::Mbm { interval_s: 0.01 }] {
            assert_eq!(run_one(&c, t).unwrap(), run_one(&c, t).unwrap());
        }
        let other = Config { seed: 2, ..short() };
        assert_ne!(
            run_one(&c, Technique::Nemo).unwrap().victim_p99_ns,
            run_one(&other, Technique::Nemo).unwrap().victim_p99_ns
        );
    }

    #[test]
    fn throttling_lowers_the_victims_p99_and_the_neighbours_bandwidth() {
        let c = short();
        let free = run_one(&c, Technique::Unthrottled).unwrap();
        for t in [
            Technique::Nemo,
            Technique::NemoEmulated,
            Technique::Mbm { interval_s: 0.001 },
        ] {
            let r = run_one(&c, t).unwrap();
            assert!(
                r.victim_p99_ns < 0.5 * free.victim_p99_ns,
                "{}: p99 {} vs unthrottled {}",
                t.name(),
                r.victim_p99_ns,
                free.victim_p99_ns
            );
            // Throttled to about the 1 GiB/s cap half the time, bursts aside.
            assert!(r.neighbour_bandwidth < 0.3 * free.neighbour_bandwidth);
            assert_eq!((r.on_phases, r.detected), (1, 1));
        }
    }

    #[test]
    fn telemetry_sees_exactly_the_bytes_moved_and_costs_by_hand() {
        let c = short();
        let nemo = run_one(&c, Technique::Nemo).unwrap();
        assert_eq!(nemo.bandwidth_error, Some(0.0));
        let mbm = run_one(&c, Technique::Mbm { interval_s: 0.01 }).unwrap();
        assert_eq!(mbm.bandwidth_error, Some(0.0));
        // 1 s at 10 ms: 100 polls of 320 us = 3.2% of a core, and 100 samples.
        assert!((mbm.cpu_share.unwrap() - 0.032).abs() < 1e-12);
        assert_eq!(mbm.samples, 100);
        // The emulated NEMO reads the neighbour every 1 ms (1000) and the victim every
        // 50 ms window (20): 1020 reads of 150 cycles at 2.1 GHz.
        let emu = run_one(&c, Technique::NemoEmulated).unwrap();
        let share = 1020.0 * 150.0 / 2.1e9;
        assert!((emu.cpu_share.unwrap() - share).abs() < 1e-15);
    }

    #[test]
    fn bad_configs_name_their_field() {
        let field = |c: Config| run(&c).unwrap_err().field;
        assert_eq!(
            field(Config {
                mbm_intervals_s: vec![0.001, 0.00025],
                ..short()
            }),
            "mbm_intervals_s[1]"
        );
        let mut c = short();
        c.device.capacity = 12 << 30;
        assert_eq!(field(c), "device.capacity");
        let mut c = short();
        c.victim.huge_pages = 8000;
        assert_eq!(field(c), "huge_pages");
        let mut c = short();
        c.neighbour.write_share = 2.0;
        assert_eq!(field(c), "neighbour.write_share");
        let mut c = short();
        c.controller.gain = 0.0;
        assert_eq!(field(c), "controller.gain");
    }
}
