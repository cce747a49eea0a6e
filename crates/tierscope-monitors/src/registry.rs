//! The one registry of monitors. Each technique lives in its own file with its config,
//! which implements [`Technique`]; the `registry!` list below names every technique once
//! (its enum arm and `type` tag), and everything else (config parsing, presets, what a
//! monitor requires of the machine, whether it flushes, building it) is derived from that.
//!
//! Adding a monitor: write `src/foo.rs` (config struct + `impl Technique` + the monitor),
//! add `pub mod foo;` to lib.rs and one line `Foo(foo::FooConfig) = "foo",` below.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tierscope_core::rng::Rng;
use tierscope_core::{Capabilities, CostModel, FeedKind, FieldError, Monitor, OpCounter};

/// What an engine's ground truth measures for a monitor: follows from what it emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    /// Blocks accessed at least the truth threshold in a window (every telemetry of
    /// accesses).
    Accessed,
    /// Blocks with at least one 4 KiB page written in a window (write logging: a write
    /// log cannot see reads, so it is scored on what it can see).
    Written,
}

/// What building a monitor may use besides its config.
pub struct BuildContext<'a> {
    /// The monitor's own random stream.
    pub rng: Rng,
    /// The experiment's cost model (a linear scan's batches take the time it charges).
    pub cost: &'a CostModel,
}

/// A named configuration of a technique.
pub struct Preset<C> {
    pub name: &'static str,
    /// One line for `--help` and docs.
    pub help: &'static str,
    pub config: C,
}

/// What every technique's config provides to the registry.
pub trait Technique: Sized {
    /// Its named configurations, in the order `--help` lists them.
    fn presets() -> Vec<Preset<Self>> {
        vec![]
    }

    /// Optional hardware the monitor needs (experiments on engines without it are
    /// rejected when they are parsed).
    fn requires(&self) -> Capabilities {
        Capabilities::NONE
    }

    /// Whether it can flush translations (then the runner also runs the workload
    /// unmonitored, to count the walks the flushes add).
    fn flushes(&self) -> bool;

    /// What its snapshots' `nr_accesses` count (the type policies are fitted by).
    fn emits(&self) -> FeedKind;

    /// The operations only this technique counts, declared as `static`s in its file
    /// (core's cost counters keep the generic ones): a run's `cost` output lists each.
    fn counters() -> &'static [&'static OpCounter] {
        &[]
    }

    /// Range checks; field paths relative to the monitor's table.
    fn validate(&self) -> Result<(), FieldError>;

    fn build(&self, ctx: BuildContext) -> Box<dyn Monitor>;
}

/// A preset of any technique.
pub struct AnyPreset {
    pub name: &'static str,
    pub help: &'static str,
    pub config: MonitorConfig,
}

macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident($config:ty) = $tag:literal,)*) => {
        /// Every monitor tierscope has, by its `type` tag.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type")]
        pub enum MonitorConfig {
            $($(#[$doc])* #[serde(rename = $tag)] $variant($config),)*
        }

        impl MonitorConfig {
            /// Every `type` tag, in registry order.
            pub const KINDS: &'static [&'static str] = &[$($tag),*];

            /// The `type` tag.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(MonitorConfig::$variant(_) => $tag,)*
                }
            }

            fn technique(&self) -> &dyn TechniqueDyn {
                match self {
                    $(MonitorConfig::$variant(c) => c,)*
                }
            }

            /// Reads a monitor table: its `type` tag picks the technique, whose config is
            /// read from the other keys (errors name the field, unknown keys included).
            pub fn from_table(mut table: Map<String, Value>) -> Result<MonitorConfig, FieldError> {
                let kind = match table.remove("type") {
                    Some(Value::String(s)) => s,
                    Some(other) => {
                        return Err(FieldError::new("type", format!("expected a string, got {other}")))
                    }
                    None => return Err(FieldError::new("type", "missing")),
                };
                match kind.as_str() {
                    $($tag => serde_path_to_error::deserialize::<_, $config>(Value::Object(table))
                        .map(MonitorConfig::$variant)
                        .map_err(FieldError::from),)*
                    other => Err(FieldError::new(
                        "type",
                        format!(
                            "unknown monitor type `{other}`{} (expected one of {})",
                            tierscope_core::did_you_mean(other, Self::KINDS),
                            Self::KINDS.join(", ")
                        ),
                    )),
                }
            }

            /// Every technique's own cost counters, in registry order, each once (two
            /// techniques may share a counter: nemo and nemo_rule).
            pub fn counters() -> Vec<&'static OpCounter> {
                let mut out: Vec<&'static OpCounter> = vec![];
                $(
                    for &op in <$config as Technique>::counters() {
                        if !out.iter().any(|o| std::ptr::eq(*o, op)) {
                            out.push(op);
                        }
                    }
                )*
                out
            }

            /// Every preset, technique by technique in registry order.
            pub fn presets() -> Vec<AnyPreset> {
                let mut out = vec![];
                $(
                    out.extend(<$config as Technique>::presets().into_iter().map(|p| AnyPreset {
                        name: p.name,
                        help: p.help,
                        config: MonitorConfig::$variant(p.config),
                    }));
                )*
                out
            }
        }
    };
}

registry! {
    Damon(crate::damon::DamonConfig) = "damon",
    Telescope(crate::telescope::TelescopeConfig) = "telescope",
    /// Telescope-BND with page-level checks of sparse regions and adaptive intervals
    /// (beyond the paper: docs/techniques/SPLIT_HINT.md).
    SplitHint(crate::split_hint::SplitHintConfig) = "split_hint",
    /// The page tables read top-down once per window where ACCESSED bits lead (beyond the
    /// paper: docs/techniques/PRUNED_WALK.md).
    PrunedWalk(crate::pruned_walk::PrunedWalkConfig) = "pruned_walk",
    Scan(crate::scan::ScanConfig) = "scan",
    Pebs(crate::pebs::PebsConfig) = "pebs",
    Nemo(crate::nemo::NemoConfig) = "nemo",
    /// A NEMO telemetry rule written in the experiment file.
    NemoRule(crate::nemo_rule::NemoRuleConfig) = "nemo_rule",
    Pml(crate::pml::PmlConfig) = "pml",
    /// NUMA balancing's hint faults in tiering mode (what TPP promotes with).
    NumaHint(crate::numa_hint::NumaHintConfig) = "numa_hint",
}

/// [`Technique`] without its `Sized` constructors, so the enum can hand out one object.
trait TechniqueDyn {
    fn requires(&self) -> Capabilities;
    fn flushes(&self) -> bool;
    fn emits(&self) -> FeedKind;
    fn validate(&self) -> Result<(), FieldError>;
    fn build(&self, ctx: BuildContext) -> Box<dyn Monitor>;
}

impl<T: Technique> TechniqueDyn for T {
    fn requires(&self) -> Capabilities {
        Technique::requires(self)
    }
    fn flushes(&self) -> bool {
        Technique::flushes(self)
    }
    fn emits(&self) -> FeedKind {
        Technique::emits(self)
    }
    fn validate(&self) -> Result<(), FieldError> {
        Technique::validate(self)
    }
    fn build(&self, ctx: BuildContext) -> Box<dyn Monitor> {
        Technique::build(self, ctx)
    }
}

/// The presets the quick form runs when no `--monitor` is given.
pub const DEFAULT_PRESETS: [&str; 4] = ["damon-mod", "damon-agg", "telescope-bnd", "telescope-flx"];

impl MonitorConfig {
    /// The configuration a preset name stands for.
    pub fn preset(name: &str) -> Option<MonitorConfig> {
        Self::presets()
            .into_iter()
            .find(|p| p.name == name)
            .map(|p| p.config)
    }

    /// Every preset name, in registry order.
    pub fn preset_names() -> Vec<&'static str> {
        Self::presets().iter().map(|p| p.name).collect()
    }

    /// The presets whose monitors emit one of `kinds`, in registry order (for messages).
    pub fn presets_emitting(kinds: &[FeedKind]) -> Vec<&'static str> {
        Self::presets()
            .iter()
            .filter(|p| kinds.contains(&p.config.emits()))
            .map(|p| p.name)
            .collect()
    }

    pub fn requires(&self) -> Capabilities {
        self.technique().requires()
    }

    pub fn flushes(&self) -> bool {
        self.technique().flushes()
    }

    pub fn emits(&self) -> FeedKind {
        self.technique().emits()
    }

    /// What it is scored on: the blocks written for a monitor of writes (a write log
    /// cannot see reads), the blocks accessed for every other.
    pub fn truth(&self) -> Truth {
        match self.emits() {
            FeedKind::Writes => Truth::Written,
            _ => Truth::Accessed,
        }
    }

    pub fn validate(&self) -> Result<(), FieldError> {
        self.technique().validate()
    }

    /// The monitor, drawing its random numbers from `rng`.
    pub fn build(&self, rng: Rng, cost: &CostModel) -> Box<dyn Monitor> {
        self.technique().build(BuildContext { rng, cost })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_unique_valid_and_round_trip() {
        let presets = MonitorConfig::presets();
        let names = MonitorConfig::preset_names();
        for (i, p) in presets.iter().enumerate() {
            assert!(!names[..i].contains(&p.name), "{} twice", p.name);
            assert!(!p.help.is_empty(), "{} has no help", p.name);
            p.config
                .validate()
                .unwrap_or_else(|e| panic!("{}: {e}", p.name));
            let json = serde_json::to_value(&p.config).unwrap();
            assert_eq!(json["type"], p.config.kind());
            let back: MonitorConfig = serde_json::from_value(json).unwrap();
            assert_eq!(back, p.config, "{}", p.name);
        }
        for d in DEFAULT_PRESETS {
            assert!(names.contains(&d), "{d}");
        }
        // Every technique has at least one preset.
        for kind in MonitorConfig::KINDS {
            assert!(presets.iter().any(|p| p.config.kind() == *kind), "{kind}");
        }
    }
}
