//! A NEMO telemetry written in the experiment file (NEMO paper §3.2, Table 1): the user
//! picks the request kinds, the primary region (the key: physical address over
//! `region`), optional sub-regions (one state per `sub_region` inside each region), the
//! update operator and operand, a notify predicate, the read side effect and the SRAM
//! shape. Each window the monitor reads every programmed region, reports each state that
//! differs from its start value as a region of the address space (`nr_accesses` = the
//! merged state, capped at u32::MAX), and programs the next batch when the heap has more
//! regions than the states hold (time multiplexing, as the `nemo` monitor does).
//!
//! Rules are checked at parse time: Table 1's operators only, because NEMO merges the
//! copies on every controller and channel in any order, which needs associative and
//! commutative updates (§3.1); and the pipeline must fit the prototype controller's SRAM.
//! Notifications are drained every window and counted as `nemo_interrupts` (one per
//! controller whose predicate held during the window: a pending interrupt line).

use crate::nemo::{NEMO_INTERRUPTS, NEMO_STATE_READS, NEMO_TRANSLATION_WRITES};
use crate::registry::{BuildContext, Preset, Technique};
use serde::{Deserialize, Serialize};
use tierscope_core::memtel::{
    Filter, Kinds, MaskShift, Notification, Notify, Operand, Overflow, Predicate, ReadEffect,
    TelemetrySpec, Translation, Update, UpdateOp,
};
use tierscope_core::units::{Duration, Size, NS_PER_MS};
use tierscope_core::FeedKind;
use tierscope_core::{
    AddrRange, Capabilities, Capability, FieldError, Intervals, Machine, Monitor, Nanos, OpCounter,
    RegionReport, Snapshot,
};
use tierscope_nemo::Multiplexer;

/// A user-written telemetry rule on the memory controllers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NemoRuleConfig {
    /// Read (and reprogramming) period: one snapshot each.
    pub aggr: Duration,
    /// Request kinds counted: "read", "write" or "both".
    pub kinds: String,
    /// Primary region: the key is the physical address over this (a power of two).
    pub region: Size,
    /// One state per sub-region of this size inside each region; absent: one per region.
    pub sub_region: Option<Size>,
    /// Table 1's update operator: add, sub, shl, shr or xor.
    pub op: String,
    /// The operand: an integer, or "bytes" (the request's size).
    pub operand: OperandConfig,
    /// Add and sub saturate at the width's top and at 0 instead of wrapping.
    pub saturate: bool,
    /// Raise an interrupt when the updated state satisfies this.
    pub notify: Option<NotifyConfig>,
    /// After each read: "reset" (to `reset_to`), "none", or an operator applied with
    /// `read_operand` ("shr" halves a counter with operand 1).
    pub read_effect: String,
    pub reset_to: u64,
    pub read_operand: u64,
    /// Translation entries T (a power of two: the key is log2(T) address bits).
    pub entries: u32,
    /// States S per channel.
    pub states: u32,
    /// State width W in bits.
    pub width: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OperandConfig {
    Const(u64),
    /// "bytes": the request's size.
    Field(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// "==", ">=", ">", "<" or "<=".
    pub when: String,
    pub value: u64,
}

impl Default for NemoRuleConfig {
    fn default() -> Self {
        NemoRuleConfig {
            aggr: Duration(100 * NS_PER_MS),
            kinds: "both".into(),
            region: Size(2 << 20),
            sub_region: None,
            op: "add".into(),
            operand: OperandConfig::Const(1),
            saturate: false,
            notify: None,
            read_effect: "reset".into(),
            reset_to: 0,
            read_operand: 0,
            entries: 8192,
            states: 8192,
            width: 64,
        }
    }
}

/// Table 1's operators by name; other names get the reason they are refused.
fn update_op(name: &str) -> Result<UpdateOp, String> {
    Ok(match name {
        "add" => UpdateOp::Add,
        "sub" => UpdateOp::Sub,
        "shl" => UpdateOp::Shl,
        "shr" => UpdateOp::Shr,
        "xor" => UpdateOp::Xor,
        "set" | "assign" | "store" | "replace" | "div" | "mod" | "pow" => {
            return Err(format!(
                "`{name}` is not associative and commutative: NEMO merges the copies of \
                 a state on every controller and channel in any order, so only add, sub, \
                 shl, shr and xor are allowed (paper section 3.1, Table 1)"
            ))
        }
        "max" | "min" | "mul" | "or" | "and" => {
            return Err(format!(
                "`{name}` is not one of NEMO's update operators (Table 1: add, sub, shl, \
                 shr, xor)"
            ))
        }
        _ => {
            return Err(format!(
                "unknown operator `{name}` (expected add, sub, shl, shr or xor)"
            ))
        }
    })
}

fn predicate(name: &str) -> Result<Predicate, String> {
    Ok(match name {
        "==" => Predicate::Eq,
        ">=" => Predicate::Ge,
        ">" => Predicate::Gt,
        "<" => Predicate::Lt,
        "<=" => Predicate::Le,
        _ => {
            return Err(format!(
                "unknown predicate `{name}` (expected ==, >=, >, < or <=)"
            ))
        }
    })
}

fn log2_of(size: Size, field: &str) -> Result<u32, FieldError> {
    if size.0 < 64 || !size.0.is_power_of_two() {
        return Err(FieldError::new(
            field,
            format!(
                "must be a power of two of at least 64 B (a cache line), got {} B",
                size.0
            ),
        ));
    }
    Ok(size.0.trailing_zeros())
}

impl NemoRuleConfig {
    /// The memory the table covers: keys index it directly.
    pub fn covered(&self) -> u64 {
        (self.entries as u64).saturating_mul(self.region.0)
    }

    /// The rule as the driver takes it; errors name this config's field.
    pub fn spec(&self) -> Result<TelemetrySpec, FieldError> {
        let kinds = match self.kinds.as_str() {
            "read" => Kinds::Read,
            "write" => Kinds::Write,
            "both" => Kinds::Both,
            other => {
                return Err(FieldError::new(
                    "kinds",
                    format!("expected read, write or both, got `{other}`"),
                ))
            }
        };
        if !self.entries.is_power_of_two() {
            return Err(FieldError::new(
                "entries",
                format!(
                    "must be a power of two (the key is log2(entries) address bits), got {}",
                    self.entries
                ),
            ));
        }
        let lo = log2_of(self.region, "region")?;
        let hi = lo + self.entries.trailing_zeros();
        if hi > 56 {
            return Err(FieldError::new(
                "entries",
                "entries x region pass 2^56 bytes of physical memory",
            ));
        }
        let sub = match self.sub_region {
            None => None,
            Some(s) => {
                let sub_lo = log2_of(s, "sub_region")?;
                if sub_lo >= lo {
                    return Err(FieldError::new(
                        "sub_region",
                        "must be smaller than region (sub-regions lie inside a region)",
                    ));
                }
                Some(MaskShift::bits(sub_lo, lo))
            }
        };
        let op = update_op(&self.op).map_err(|m| FieldError::new("op", m))?;
        let operand = match &self.operand {
            OperandConfig::Const(k) => Operand::Const(*k),
            OperandConfig::Field(f) if f == "bytes" => Operand::RequestBytes,
            OperandConfig::Field(f) => {
                return Err(FieldError::new(
                    "operand",
                    format!("expected an integer or \"bytes\", got `{f}`"),
                ))
            }
        };
        let notify = match &self.notify {
            None => None,
            Some(n) => Some(Notify {
                predicate: predicate(&n.when).map_err(|m| FieldError::new("notify.when", m))?,
                operand: n.value,
            }),
        };
        let read_effect = match self.read_effect.as_str() {
            "reset" => ReadEffect::Reset(self.reset_to),
            "none" => ReadEffect::None,
            other => ReadEffect::Op(
                update_op(other).map_err(|m| FieldError::new("read_effect", m))?,
                self.read_operand,
            ),
        };
        let spec = TelemetrySpec {
            filter: Filter {
                kinds,
                range: AddrRange::new(0, self.covered()),
            },
            translation: Translation {
                primary: MaskShift::bits(lo, hi),
                sub,
            },
            update: Update {
                op,
                operand,
                overflow: if self.saturate {
                    Overflow::Saturate
                } else {
                    Overflow::Wrap
                },
            },
            notify,
            read_effect,
            entries: self.entries,
            states: self.states,
            width: self.width,
        };
        spec.validate()?;
        Ok(spec)
    }
}

impl Technique for NemoRuleConfig {
    fn counters() -> &'static [&'static OpCounter] {
        static OWN: [&OpCounter; 3] = [
            &NEMO_STATE_READS,
            &NEMO_TRANSLATION_WRITES,
            &NEMO_INTERRUPTS,
        ];
        &OWN
    }

    fn presets() -> Vec<Preset<Self>> {
        vec![Preset {
            name: "nemo-write-bytes",
            help: "NEMO rule: bytes written per 2 MiB page, read and reset every 100 ms \
                   (a programmable telemetry; edit any field)",
            config: NemoRuleConfig {
                kinds: "write".into(),
                operand: OperandConfig::Field("bytes".into()),
                ..NemoRuleConfig::default()
            },
        }]
    }

    fn requires(&self) -> Capabilities {
        Capabilities::of(&[Capability::MemTelemetry])
    }

    fn flushes(&self) -> bool {
        false
    }

    /// A rule that sees only writes counts writes (and is scored on the blocks written, as
    /// a write log is); any other rule's values are its own.
    fn emits(&self) -> FeedKind {
        if self.kinds == "write" {
            FeedKind::Writes
        } else {
            FeedKind::CounterReads
        }
    }

    fn validate(&self) -> Result<(), FieldError> {
        if self.aggr.0 == 0 {
            return Err(FieldError::new("aggr", "must be positive"));
        }
        let spec = self.spec()?;
        // The engines' controllers are the prototype's (docs/techniques/NEMO.md).
        tierscope_nemo::NemoConfig::prototype().check_fits(&[spec])
    }

    fn build(&self, _: BuildContext) -> Box<dyn Monitor> {
        let spec = self.spec().expect("validated config");
        Box::new(NemoRuleMonitor {
            aggr: self.aggr.0,
            spec,
            next_wakeup: 0,
            window_start: 0,
            installed: false,
            telemetry: None,
            regions: Vec::new(),
            notifications: Vec::new(),
        })
    }
}

pub struct NemoRuleMonitor {
    aggr: Nanos,
    spec: TelemetrySpec,
    next_wakeup: Nanos,
    window_start: Nanos,
    installed: bool,
    /// The telemetry's multiplexer; `None` on a machine without the capability.
    telemetry: Option<Multiplexer>,
    /// (key, virtual start) of every region of the heap the table covers, by key.
    regions: Vec<(u64, u64)>,
    notifications: Vec<Notification>,
}

impl NemoRuleMonitor {
    fn region_size(&self) -> u64 {
        1 << self.spec.translation.primary.shift
    }

    fn install(&mut self, m: &mut dyn Machine) {
        let size = self.region_size();
        let mut regions = Vec::new();
        for map in m.mappings() {
            let mut va = map.range.start.next_multiple_of(size);
            while va + size <= map.range.end {
                if let Some(pa) = m.phys_addr(va) {
                    if pa < self.spec.filter.range.end {
                        regions.push((self.spec.translation.primary.extract(pa), va));
                    }
                }
                va += size;
            }
        }
        regions.sort_unstable();
        self.regions = regions;
        let Some(nemo) = m.mem_telemetry() else {
            return;
        };
        let t = nemo
            .register(&self.spec)
            .expect("the rule was validated and fits the prototype (parse time)");
        let keys = self.regions.iter().map(|r| r.0).collect();
        let mux = Multiplexer::new(nemo, vec![t], keys).expect("keys within the mask");
        m.cost_mut().charge(&NEMO_TRANSLATION_WRITES, mux.writes());
        self.telemetry = Some(mux);
    }

    fn scan(&mut self, m: &mut dyn Machine) -> Vec<RegionReport> {
        let mut out = Vec::new();
        let sub = self.region_size() / self.spec.span();
        let Some(mux) = &mut self.telemetry else {
            return out;
        };
        let (before, writes_before) = (mux.programmed().len() as u64, mux.writes());
        let nemo = m.mem_telemetry().expect("installed on this machine");
        let (regions, init) = (&self.regions, self.spec.initial());
        mux.scan(nemo, |key, states| {
            let i = regions
                .binary_search_by_key(&key, |r| r.0)
                .expect("programmed keys come from the regions");
            let va = regions[i].1;
            for (j, &s) in states.iter().enumerate() {
                if s != init {
                    let start = va + j as u64 * sub;
                    out.push(RegionReport {
                        start,
                        end: start + sub,
                        nr_accesses: s.min(u32::MAX as u64) as u32,
                        age: 0,
                    });
                }
            }
        })
        .expect("programmed keys and regions are valid");
        // One interrupt per telemetry and controller whose predicate held: hits
        // coalesce on the pending line until it is handled (docs/techniques/NEMO.md).
        nemo.drain_notifications(&mut self.notifications);
        let raised = self.notifications.drain(..).count() as u64;
        let c = m.cost_mut();
        c.charge(&NEMO_STATE_READS, before * self.spec.span());
        c.charge(&NEMO_TRANSLATION_WRITES, mux.writes() - writes_before);
        c.charge(&NEMO_INTERRUPTS, raised);
        out.sort_by_key(|r| r.start);
        out
    }
}

impl Monitor for NemoRuleMonitor {
    fn next_wakeup(&self) -> Nanos {
        self.next_wakeup
    }

    fn wake(&mut self, m: &mut dyn Machine) -> Option<Snapshot> {
        let now = m.now();
        self.next_wakeup = now + self.aggr;
        if !self.installed {
            self.installed = true;
            self.install(m);
            self.window_start = now;
            return None;
        }
        let regions = self.scan(m);
        let snapshot = Snapshot {
            start: self.window_start,
            end: now,
            regions,
        };
        self.window_start = now;
        Some(snapshot)
    }

    fn intervals(&self) -> Intervals {
        Intervals {
            sample: self.aggr,
            aggr: self.aggr,
            ops_update: self.aggr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::workload::parse_masim;
    use tierscope_core::Engine;
    use tierscope_sim::config::SimMachine;
    use tierscope_sim::exact::ExactEngine;
    use tierscope_sim::WorkloadParams;

    const HUGE: u64 = 2 << 20;

    /// The regions are laid out downwards, so `a` (listed last) has the lower addresses
    /// and is tracked first. Region `a` (8 MiB) swept sequentially 64 B at a time, reads and writes
    /// alternating; region `b` (8 MiB) idle. 100k accesses per 10 ms window: 78 % of a
    /// lap of `a` (131,072 lines).
    fn engine() -> ExactEngine {
        let spec = parse_masim("b, 8MiB\na, 8MiB\n\np\n1000\na, 0, 64, 1, rw\n").unwrap();
        let params = WorkloadParams {
            spec: &spec,
            rate: 10_000_000,
            threads: 1,
            seed: 5,
            block_size: HUGE,
            truth_threshold: 1,
        };
        ExactEngine::new(&SimMachine::default(), &params).unwrap()
    }

    fn heap_a(e: &mut ExactEngine) -> AddrRange {
        let m = e
            .as_machine()
            .mappings()
            .iter()
            .find(|m| m.name == "heap:a");
        m.expect("region a is mapped").range
    }

    fn windows(cfg: &NemoRuleConfig, n: usize) -> (Vec<Snapshot>, ExactEngine) {
        cfg.validate().unwrap();
        let mut e = engine();
        let mut mon = cfg.build(BuildContext {
            rng: tierscope_core::rng::Rng::new(1),
            cost: &Default::default(),
        });
        let mut out = vec![];
        while out.len() < n {
            let t = mon.next_wakeup();
            e.advance_to(t);
            out.extend(mon.wake(e.as_machine()));
        }
        (out, e)
    }

    #[test]
    fn bytes_written_per_huge_page_match_the_writes() {
        let cfg = NemoRuleConfig {
            aggr: Duration(10 * NS_PER_MS),
            kinds: "write".into(),
            operand: OperandConfig::Field("bytes".into()),
            ..NemoRuleConfig::default()
        };
        assert_eq!(cfg.emits(), FeedKind::Writes);
        let (snaps, mut e) = windows(&cfg, 3);
        let a = heap_a(&mut e);
        for s in &snaps {
            // Half of the 100k accesses are writes of 64 B: 3.2 MB per window, all in a.
            let total: u64 = s.regions.iter().map(|r| r.nr_accesses as u64).sum();
            assert!((total as i64 - 50_000 * 64).abs() <= 64, "{total}");
            for r in &s.regions {
                assert!(a.start <= r.start && r.end <= a.end && r.end - r.start == HUGE);
                // A 2 MiB page holds 32,768 lines, half of them written per lap.
                assert!(r.nr_accesses as u64 <= 16_384 * 64, "{r:?}");
            }
        }
        // All 8 huge pages of the heap are read every window.
        assert_eq!(e.cost().get(&NEMO_STATE_READS), 3 * 8);
        assert_eq!(e.cost().get(&NEMO_INTERRUPTS), 0);
    }

    #[test]
    fn sub_regions_split_each_page_and_multiplex_when_states_run_out() {
        // 4 KiB counters: 512 states per huge page, 1024 states hold 2 pages at a time,
        // so the 8 pages of the heap take 4 windows to sweep.
        let cfg = NemoRuleConfig {
            aggr: Duration(10 * NS_PER_MS),
            sub_region: Some(Size(4096)),
            states: 1024,
            ..NemoRuleConfig::default()
        };
        let (snaps, mut e) = windows(&cfg, 4);
        let a = heap_a(&mut e);
        // Window 1 tracks a's first 4 MiB, which the first 6.4 MB of the lap cover
        // whole: every 4 KiB page was accessed 64 times (one per line).
        assert_eq!(snaps[0].regions.len(), 1024);
        for (i, r) in snaps[0].regions.iter().enumerate() {
            assert_eq!(r.start, a.start + i as u64 * 4096);
            assert_eq!((r.end - r.start, r.nr_accesses), (4096, 64));
        }
        // Window 2 tracks a's last 4 MiB (lines 65,536..131,072) while accesses
        // 100,000..200,000 run: lines 100,000..131,072, then the next lap's 0..68,928,
        // of which 65,536..68,928 are in the second half: 31,072 + 3,392 line accesses.
        let lines: u64 = snaps[1].regions.iter().map(|r| r.nr_accesses as u64).sum();
        assert_eq!(lines, 31_072 + 3_392);
        // Windows 3 and 4 track b, which is idle: nothing differs from 0.
        assert!(snaps[2].regions.is_empty() && snaps[3].regions.is_empty());
        assert_eq!(e.cost().get(&NEMO_STATE_READS), 4 * 1024);
    }

    #[test]
    fn a_notify_predicate_raises_interrupts() {
        // Reads per 2 MiB page counted; >= 1000 holds on every read page every window
        // (12,500 reads each), never on the written region's pages.
        let mut cfg = NemoRuleConfig {
            aggr: Duration(10 * NS_PER_MS),
            kinds: "read".into(),
            notify: Some(NotifyConfig {
                when: ">=".into(),
                value: 1000,
            }),
            ..NemoRuleConfig::default()
        };
        let (_, e) = windows(&cfg, 3);
        // One controller: one pending interrupt per window.
        assert_eq!(e.cost().get(&NEMO_INTERRUPTS), 3);
        cfg.notify.as_mut().unwrap().value = 1_000_000;
        let (_, e) = windows(&cfg, 3);
        assert_eq!(e.cost().get(&NEMO_INTERRUPTS), 0);
    }

    #[test]
    fn bad_rules_name_their_field() {
        let field = |f: &dyn Fn(&mut NemoRuleConfig)| {
            let mut c = NemoRuleConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            (e.field, e.message)
        };
        let (f, m) = field(&|c| c.op = "set".into());
        assert_eq!(f, "op");
        assert!(m.contains("not associative and commutative"), "{m}");
        assert!(field(&|c| c.op = "max".into())
            .1
            .contains("not one of NEMO's"));
        assert_eq!(field(&|c| c.read_effect = "div".into()).0, "read_effect");
        assert_eq!(field(&|c| c.kinds = "fetch".into()).0, "kinds");
        assert_eq!(field(&|c| c.region = Size(3 << 20)).0, "region");
        assert_eq!(
            field(&|c| c.sub_region = Some(Size(4 << 20))).0,
            "sub_region"
        );
        assert_eq!(
            field(&|c| c.operand = OperandConfig::Field("size".into())).0,
            "operand"
        );
        let (f, m) = field(&|c| {
            c.notify = Some(NotifyConfig {
                when: "!=".into(),
                value: 1,
            })
        });
        assert_eq!(f, "notify.when");
        assert!(m.contains("expected =="), "{m}");
        // SRAM: 2 channels x 65,536 states x 64 bits = 1 MiB of state + 8192 x 18-bit
        // entries (18 KiB) fit the prototype's 1,136 KiB; 73,728 states (1,152 KiB) do not.
        let fits = |states| {
            NemoRuleConfig {
                states,
                ..NemoRuleConfig::default()
            }
            .validate()
        };
        assert!(fits(65_536).is_ok());
        let e = fits(73_728).unwrap_err();
        assert_eq!(e.field, "states");
        assert!(e.message.contains("bytes of SRAM"), "{}", e.message);
        // A shift telemetry must start from a power of two (the merge rule needs it).
        assert_eq!(field(&|c| c.op = "shl".into()).0, "read_effect");
    }
}
