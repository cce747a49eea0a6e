//! What the crate's unit tests share.

use tierscope_core::tiers::TierSpec;

/// A tier of `capacity` bytes for tests in which its speed plays no part: 1 ns, 1 byte a
/// second, no queueing.
pub fn tier(capacity: u64) -> TierSpec {
    TierSpec {
        name: "t".into(),
        capacity,
        latency_ns: 1.0,
        bandwidth: 1.0,
        queueing: 0.0,
        curve: Vec::new(),
        background: 0.0,
    }
}
