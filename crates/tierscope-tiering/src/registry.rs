//! How policies are registered. Each policy lives in its own file in `policy/` with its
//! config, which implements [`PolicyTechnique`] (its help line, what it accepts as input,
//! its checks, building it); the `registry!` list in policy/mod.rs names every policy once
//! (its module, config type and `type` tag), and the rest is derived from that: the
//! [`PolicyConfig`](crate::PolicyConfig) enum experiment files parse into, the list of
//! tags with their help ([`PolicyConfig::POLICIES`](crate::PolicyConfig::POLICIES)), the
//! default configurations a bare name stands for, and the dispatch below.
//!
//! Adding a policy: write `policy/foo.rs` (config struct + `impl PolicyTechnique` + the
//! policy) and add one line `Foo(foo::FooConfig) = "foo",` to `registry!` in policy/mod.rs.

use crate::policy::Policy;
use tierscope_core::{FeedKind, FieldError, Intervals, PolicyInput};

/// What building a policy may use besides its config.
pub struct PolicyContext {
    /// The intervals of the monitor feeding it (the sampling and aggregation intervals
    /// DAMOS's access rates are relative to); for a policy not fed by a monitor, its
    /// period as every interval.
    pub intervals: Intervals,
    /// What the feeding monitor emits (`None` for a policy not fed by a monitor): a policy
    /// accepting several kinds reads them each its own way (MEMTIS on PEBS or on NEMO).
    pub feed: Option<FeedKind>,
}

#[cfg(test)]
impl PolicyContext {
    /// A context for policies' unit tests: 5 ms samples, 100 ms windows.
    pub fn for_tests() -> Self {
        PolicyContext {
            intervals: Intervals {
                sample: 5_000_000,
                aggr: 100_000_000,
                ops_update: 1_000_000_000,
            },
            feed: None,
        }
    }
}

/// What every policy's config provides to the registry.
pub trait PolicyTechnique: Sized {
    /// One line for `--help` and docs.
    const HELP: &'static str;

    /// Its configuration when an experiment names it without a table
    /// (`policies = ["hemem"]`); `None` when it needs settings.
    fn by_name() -> Option<Self> {
        None
    }

    /// What it acts on: the kinds of monitor output it accepts (checked by type when an
    /// experiment is parsed), or an input of the engine's.
    fn input(&self) -> PolicyInput;

    /// How often it acts when it is not fed by a monitor (its period), ns.
    fn period_ns(&self) -> Option<u64> {
        None
    }

    /// Whether its moves are free (placed directly: no copy, no flush, no stall).
    fn free_moves(&self) -> bool {
        false
    }

    /// Range checks against a machine of `tiers` tiers; field paths relative to the
    /// policy's table.
    fn check(&self, tiers: usize) -> Result<(), FieldError>;

    /// Checks against a monitor feeding it (its name and intervals) in a run of
    /// `duration_ns`: what depends on the monitor, such as a scheme that could never
    /// match at its intervals. Field paths relative to the policy's table.
    fn check_feed(
        &self,
        _monitor: &str,
        _intervals: Intervals,
        _duration_ns: u64,
    ) -> Result<(), FieldError> {
        Ok(())
    }

    fn policy(&self, ctx: &PolicyContext) -> Box<dyn Policy>;
}

/// [`PolicyTechnique`] without its `Sized` constructors, so the enum can hand out one
/// object.
pub(crate) trait PolicyTechniqueDyn {
    fn input(&self) -> PolicyInput;
    fn period_ns(&self) -> Option<u64>;
    fn free_moves(&self) -> bool;
    fn check(&self, tiers: usize) -> Result<(), FieldError>;
    fn check_feed(
        &self,
        monitor: &str,
        intervals: Intervals,
        duration_ns: u64,
    ) -> Result<(), FieldError>;
    fn policy(&self, ctx: &PolicyContext) -> Box<dyn Policy>;
}

impl<T: PolicyTechnique> PolicyTechniqueDyn for T {
    fn input(&self) -> PolicyInput {
        PolicyTechnique::input(self)
    }
    fn period_ns(&self) -> Option<u64> {
        PolicyTechnique::period_ns(self)
    }
    fn free_moves(&self) -> bool {
        PolicyTechnique::free_moves(self)
    }
    fn check(&self, tiers: usize) -> Result<(), FieldError> {
        PolicyTechnique::check(self, tiers)
    }
    fn check_feed(
        &self,
        monitor: &str,
        intervals: Intervals,
        duration_ns: u64,
    ) -> Result<(), FieldError> {
        PolicyTechnique::check_feed(self, monitor, intervals, duration_ns)
    }
    fn policy(&self, ctx: &PolicyContext) -> Box<dyn Policy> {
        PolicyTechnique::policy(self, ctx)
    }
}

/// Declares every policy module and the [`crate::PolicyConfig`] enum from one line each:
/// `Variant(module::Config) = "tag",`.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident($module:ident :: $config:ident) = $tag:literal,)*) => {
        $(pub mod $module;)*

        /// Every policy tierscope has, by its `type` tag.
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "type")]
        pub enum PolicyConfig {
            $($(#[$doc])* #[serde(rename = $tag)] $variant($module::$config),)*
        }

        impl PolicyConfig {
            /// Every policy: its `type` tag and one line of help, in registry order.
            pub const POLICIES: &'static [(&'static str, &'static str)] = &[
                $(($tag, <$module::$config as $crate::registry::PolicyTechnique>::HELP),)*
            ];

            /// The `type` tag.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(PolicyConfig::$variant(_) => $tag,)*
                }
            }

            /// The configuration a bare name stands for (`None`: unknown, or it needs
            /// settings).
            pub fn named(kind: &str) -> Option<PolicyConfig> {
                use $crate::registry::PolicyTechnique;
                match kind {
                    $($tag => $module::$config::by_name().map(PolicyConfig::$variant),)*
                    _ => None,
                }
            }

            pub(crate) fn technique(&self) -> &dyn $crate::registry::PolicyTechniqueDyn {
                match self {
                    $(PolicyConfig::$variant(c) => c,)*
                }
            }
        }
    };
}
pub(crate) use registry;

impl crate::PolicyConfig {
    /// What it acts on.
    pub fn input(&self) -> PolicyInput {
        self.technique().input()
    }

    /// Its period when not fed by a monitor, ns.
    pub fn period_ns(&self) -> Option<u64> {
        self.technique().period_ns()
    }

    /// Whether its moves are free (only the oracle bound's).
    pub fn free_moves(&self) -> bool {
        self.technique().free_moves()
    }

    /// Range checks against a machine of `tiers` tiers.
    pub fn validate(&self, tiers: usize) -> Result<(), FieldError> {
        self.technique().check(tiers)
    }

    /// Checks against a feeding monitor's intervals and the run's length.
    pub fn validate_feed(
        &self,
        monitor: &str,
        intervals: Intervals,
        duration_ns: u64,
    ) -> Result<(), FieldError> {
        self.technique().check_feed(monitor, intervals, duration_ns)
    }

    /// The policy, fed by a monitor running at `intervals` and emitting `feed` (a policy
    /// with a period of its own is given that period as every interval).
    pub fn build(&self, monitor: Option<(Intervals, FeedKind)>) -> Box<dyn Policy> {
        let intervals = monitor.map(|m| m.0).unwrap_or_else(|| {
            let p = self.period_ns().unwrap_or(0);
            Intervals {
                sample: p,
                aggr: p,
                ops_update: p,
            }
        });
        self.technique().policy(&PolicyContext {
            intervals,
            feed: monitor.map(|m| m.1),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::PolicyConfig;

    #[test]
    fn every_policy_is_listed_once_with_help_and_round_trips_by_name() {
        let tags: Vec<&str> = PolicyConfig::POLICIES.iter().map(|p| p.0).collect();
        for (i, (tag, help)) in PolicyConfig::POLICIES.iter().enumerate() {
            assert!(!tags[..i].contains(tag), "{tag} twice");
            assert!(!help.is_empty(), "{tag} has no help");
            if let Some(c) = PolicyConfig::named(tag) {
                assert_eq!(c.kind(), *tag);
                c.validate(2).unwrap_or_else(|e| panic!("{tag}: {e}"));
                let json = serde_json::to_value(&c).unwrap();
                assert_eq!(json["type"], *tag);
                let back: PolicyConfig = serde_json::from_value(json).unwrap();
                assert_eq!(back, c);
            }
        }
        assert!(PolicyConfig::named("no-such-policy").is_none());
    }
}
