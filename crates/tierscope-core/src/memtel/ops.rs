//! The operators of a telemetry rule (NEMO paper Table 1): the update applied to a state
//! word, the notify predicate, the read side effect, and how per-controller states merge.
//!
//! Table 1 lists exactly five update operators, `+ - >> << XOR`, each with an operand,
//! and §3.1 restricts per-request updates to associative and commutative ones so that
//! each controller (and each channel) can update its own copy and the OS can fold the
//! copies in any order. Repeating one of these updates commutes: `(s+a)+b = (s+b)+a`,
//! `(s>>a)>>b = s>>(a+b)`, `(s^a)^b = (s^b)^a`. Table 1 has no max/min/or/and operator,
//! so there is no max-like merge here.

/// A state word's bits: `width` low bits of a `u64`, `1 <= width <= 64`.
#[inline]
pub const fn width_mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1 << width) - 1
    }
}

/// The update operator (Table 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOp {
    Add,
    Sub,
    Shl,
    Shr,
    Xor,
}

/// What an update's operand is: a constant, or a field of the request (§3.1: "operators
/// use request fields as operands"); the request field we carry is its size in bytes,
/// which turns an add into a byte counter (bandwidth, §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    Const(u64),
    RequestBytes,
}

/// What an add or subtract does past the state's range. The paper does not say; the
/// prototype's 64-bit counter wraps (`s + 1` in nemo_pipeline_rmw.sv, mode 0) and its
/// 2-bit mode saturates (mode 2); §6.1 suggests saturating narrow counters. Both stay
/// associative and commutative for one operator, so both are offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    #[default]
    Wrap,
    Saturate,
}

/// The notify comparison (Table 1), `state <op> operand`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Predicate {
    Eq,
    Ge,
    Gt,
    Lt,
    Le,
}

impl Predicate {
    #[inline]
    pub fn holds(self, state: u64, operand: u64) -> bool {
        match self {
            Predicate::Eq => state == operand,
            Predicate::Ge => state >= operand,
            Predicate::Gt => state > operand,
            Predicate::Lt => state < operand,
            Predicate::Le => state <= operand,
        }
    }
}

/// What a read does to each state it returned (§3.1, "Telemetry state access"): nothing,
/// one of the update operators with a constant, or reset to a configured value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadEffect {
    None,
    Op(UpdateOp, u64),
    Reset(u64),
}

impl UpdateOp {
    /// `state op k` within `mask` (the state width). Shifts by the width or more empty
    /// the word, as hardware shifting a `width`-bit register would.
    #[inline]
    pub fn apply(self, state: u64, k: u64, mask: u64, overflow: Overflow) -> u64 {
        let saturate = overflow == Overflow::Saturate;
        match self {
            UpdateOp::Add => {
                let sum = state.wrapping_add(k);
                if saturate {
                    // The sum overflowed the word or the width: pin at the top.
                    if sum < state || sum > mask {
                        mask
                    } else {
                        sum
                    }
                } else {
                    sum & mask
                }
            }
            UpdateOp::Sub => {
                if saturate {
                    state.saturating_sub(k)
                } else {
                    state.wrapping_sub(k) & mask
                }
            }
            UpdateOp::Shl => {
                if k >= 64 {
                    0
                } else {
                    (state << k) & mask
                }
            }
            UpdateOp::Shr => {
                if k >= 64 {
                    0
                } else {
                    state >> k
                }
            }
            UpdateOp::Xor => (state ^ k) & mask,
        }
    }

    /// The state one controller would hold had it seen every request that `states` (one
    /// per controller and channel, each started from `init`) saw. §3.2 names the rule per
    /// operator: sum for addition, XOR for XOR, multiplication for right shifts. We fold
    /// each copy's change relative to `init`, which is that rule made exact for any
    /// starting value:
    /// - add, sub: `init + sum(s_i - init)`, wrapped or clamped as the update is (with
    ///   `init = 0`: the sum of the copies);
    /// - xor: `init ^ xor(s_i ^ init)` (with `init = 0`: the XOR of the copies);
    /// - shifts: `init` must be a power of two `2^p` (checked by the spec), so each copy
    ///   is `2^(p -/+ a_i)` or 0 and the merge shifts `init` by `sum(a_i)`; read as fixed
    ///   point with `init` as 1.0, that is the product of the copies (§3.2's
    ///   "multiplication"). A copy that reached 0 makes the merge 0.
    pub fn merge(self, init: u64, states: &[u64], mask: u64, overflow: Overflow) -> u64 {
        match self {
            UpdateOp::Add | UpdateOp::Sub => {
                let delta: i128 = states.iter().map(|&s| s as i128 - init as i128).sum();
                let merged = init as i128 + delta;
                match overflow {
                    Overflow::Saturate => merged.clamp(0, mask as i128) as u64,
                    Overflow::Wrap => (merged as u64) & mask,
                }
            }
            UpdateOp::Xor => init ^ states.iter().fold(0, |acc, &s| acc ^ s ^ init),
            UpdateOp::Shr | UpdateOp::Shl => {
                if states.contains(&0) || init == 0 {
                    return 0;
                }
                let p = init.trailing_zeros() as i64;
                let moved: i64 = states
                    .iter()
                    .map(|&s| (s.trailing_zeros() as i64 - p).abs())
                    .sum();
                let exponent = if self == UpdateOp::Shr {
                    p - moved
                } else {
                    p + moved
                };
                if !(0..64).contains(&exponent) {
                    0
                } else {
                    (1u64 << exponent) & mask
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W8: u64 = 0xff;

    #[test]
    fn each_update_by_hand() {
        use UpdateOp::*;
        let wrap = Overflow::Wrap;
        assert_eq!(Add.apply(5, 3, W8, wrap), 8);
        assert_eq!(Add.apply(250, 10, W8, wrap), 4); // 260 - 256
        assert_eq!(Add.apply(250, 10, W8, Overflow::Saturate), 255);
        assert_eq!(
            Add.apply(u64::MAX - 1, 5, u64::MAX, Overflow::Saturate),
            u64::MAX
        );
        assert_eq!(Add.apply(u64::MAX, 1, u64::MAX, wrap), 0);
        assert_eq!(Sub.apply(8, 3, W8, wrap), 5);
        assert_eq!(Sub.apply(2, 3, W8, wrap), 255); // -1 in 8 bits
        assert_eq!(Sub.apply(2, 3, W8, Overflow::Saturate), 0);
        assert_eq!(Shl.apply(0b0001_0110, 2, W8, wrap), 0b0101_1000);
        assert_eq!(Shl.apply(0b1100_0000, 1, W8, wrap), 0b1000_0000); // top bit leaves
        assert_eq!(Shl.apply(1, 64, u64::MAX, wrap), 0);
        assert_eq!(Shr.apply(0b1011_0000, 4, W8, wrap), 0b1011);
        assert_eq!(Shr.apply(u64::MAX, 70, u64::MAX, wrap), 0);
        assert_eq!(Xor.apply(0b1010, 0b0110, W8, wrap), 0b1100);
        assert_eq!(Xor.apply(0, 0x1ff, W8, wrap), 0xff); // operand cut to the width
    }

    #[test]
    fn each_predicate_by_hand() {
        use Predicate::*;
        let table = [
            // (predicate, state, operand, holds)
            (Eq, 5, 5, true),
            (Eq, 5, 6, false),
            (Ge, 5, 5, true),
            (Ge, 4, 5, false),
            (Gt, 5, 5, false),
            (Gt, 6, 5, true),
            (Lt, 4, 5, true),
            (Lt, 5, 5, false),
            (Le, 5, 5, true),
            (Le, 6, 5, false),
        ];
        for (p, s, k, want) in table {
            assert_eq!(p.holds(s, k), want, "{p:?} {s} {k}");
        }
    }

    /// Applies `n_i` updates to a copy started at `init` for each controller, and `sum n_i`
    /// to a single copy: the merge of the copies must equal the single copy.
    fn merge_matches_one_controller(
        op: UpdateOp,
        init: u64,
        k: u64,
        counts: &[u32],
        mask: u64,
        of: Overflow,
    ) {
        let copies: Vec<u64> = counts
            .iter()
            .map(|&n| (0..n).fold(init, |s, _| op.apply(s, k, mask, of)))
            .collect();
        let total: u32 = counts.iter().sum();
        let single = (0..total).fold(init, |s, _| op.apply(s, k, mask, of));
        assert_eq!(
            op.merge(init, &copies, mask, of),
            single,
            "{op:?} init {init} k {k} counts {counts:?} copies {copies:?}"
        );
    }

    #[test]
    fn merge_rules_by_hand() {
        use UpdateOp::*;
        let wrap = Overflow::Wrap;
        // add from 0: 3 + 4 + 0 = 7 (the sum).
        assert_eq!(Add.merge(0, &[3, 4, 0], W8, wrap), 7);
        // add from 10: copies 13, 14, 10 saw +3, +4, +0 -> 10 + 7 = 17.
        assert_eq!(Add.merge(10, &[13, 14, 10], W8, wrap), 17);
        // wrapping: 200 + 100 = 300 -> 44 in 8 bits.
        assert_eq!(Add.merge(0, &[200, 100], W8, wrap), 44);
        assert_eq!(Add.merge(0, &[200, 100], W8, Overflow::Saturate), 255);
        // sub from 100: copies 90 and 95 -> 100 - 10 - 5 = 85.
        assert_eq!(Sub.merge(100, &[90, 95], W8, wrap), 85);
        // xor from 0: 0b0011 ^ 0b0101 = 0b0110.
        assert_eq!(Xor.merge(0, &[0b0011, 0b0101], W8, wrap), 0b0110);
        // shr from 2^7: copies 2^5 (shifted 2) and 2^6 (shifted 1) -> 2^(7 - 3) = 16,
        // = 128 * (32/128) * (64/128) = 128 * 1/8, the fixed-point product.
        assert_eq!(Shr.merge(128, &[32, 64], W8, wrap), 16);
        assert_eq!(Shr.merge(128, &[32, 0], W8, wrap), 0);
        assert_eq!(Shr.merge(4, &[1, 1], W8, wrap), 0); // 2^(2 - 4): shifted out
                                                        // shl from 2^1: copies 2^3 and 2^2 -> 2^(1 + 2 + 1) = 16.
        assert_eq!(Shl.merge(2, &[8, 4], W8, wrap), 16);
        assert_eq!(Shl.merge(2, &[64, 64], W8, wrap), 0); // 2^(1 + 5 + 5) leaves 8 bits
    }

    #[test]
    fn merge_equals_one_controller_brute_force() {
        use UpdateOp::*;
        let splits: [&[u32]; 5] = [&[0, 0], &[1, 2, 3], &[7], &[40, 1, 0, 30], &[200, 200]];
        for counts in splits {
            for of in [Overflow::Wrap, Overflow::Saturate] {
                merge_matches_one_controller(Add, 0, 3, counts, W8, of);
                merge_matches_one_controller(Add, 17, 1, counts, u64::MAX, of);
                merge_matches_one_controller(Sub, 250, 2, counts, W8, of);
            }
            merge_matches_one_controller(Xor, 0, 0b1011, counts, W8, Overflow::Wrap);
            merge_matches_one_controller(Xor, 0x5a, 0x0f, counts, W8, Overflow::Wrap);
            merge_matches_one_controller(Shr, 1 << 40, 1, counts, u64::MAX, Overflow::Wrap);
            merge_matches_one_controller(Shl, 1, 2, counts, u64::MAX, Overflow::Wrap);
        }
    }
}
