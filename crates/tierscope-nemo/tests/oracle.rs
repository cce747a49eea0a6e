//! The driver against a naive per-request oracle (issue 12's acceptance): random rules
//! covering every operator, overflow mode, filter, sub-region translation, notify
//! predicate and read effect, on several controller/channel shapes, fed random requests
//! with reads in between.
//!
//! Three checks, each on every case:
//! 1. A naive model (a map per copy, routing, matching and updating written out from the
//!    paper's rules, not from the crate's code) gives the same merged reads and the same
//!    notification counts per controller.
//! 2. Where read effects leave every copy at the start value or untouched (none, reset),
//!    the merged read equals the state of ONE copy that saw every request: the merge
//!    across controllers and channels is exact.
//! 3. The same requests in another order between two reads give the same merged reads
//!    (updates are associative and commutative, so the state does not depend on order).

use std::collections::HashMap;
use tierscope_core::memtel::{
    Filter, Kinds, MaskShift, Notify, Operand, Overflow, Predicate, ReadEffect, TelemetryId,
    TelemetrySpec, Translation, Update, UpdateOp,
};
use tierscope_core::rng::Rng;
use tierscope_core::AddrRange;
use tierscope_nemo::{Driver, Interleave, MemTelemetry, NemoConfig, Request};

/// Addresses drawn from 64 KiB: 16 primary regions of 4 KiB.
const SPACE: u64 = 64 << 10;
const ENTRIES: u32 = 16;
const STATES: u32 = 64;

fn random_spec(rng: &mut Rng) -> TelemetrySpec {
    let ops = [
        UpdateOp::Add,
        UpdateOp::Sub,
        UpdateOp::Shl,
        UpdateOp::Shr,
        UpdateOp::Xor,
    ];
    let op = ops[rng.below(5) as usize];
    let shift = matches!(op, UpdateOp::Shl | UpdateOp::Shr);
    let width = [8, 16, 64][rng.below(3) as usize];
    let overflow = if matches!(op, UpdateOp::Add | UpdateOp::Sub) && rng.below(2) == 0 {
        Overflow::Saturate
    } else {
        Overflow::Wrap
    };
    let operand = if rng.below(4) == 0 && !shift {
        Operand::RequestBytes
    } else if shift {
        Operand::Const(rng.below(2))
    } else {
        Operand::Const(rng.range(1, 40))
    };
    let read_effect = if shift {
        // A shift telemetry starts from a power of two (the merge needs it).
        ReadEffect::Reset(1 << rng.range(2, width.min(12) as u64 - 1))
    } else {
        match rng.below(3) {
            0 => ReadEffect::None,
            1 => ReadEffect::Reset(rng.below(20)),
            _ => ReadEffect::Op(ops[rng.below(5) as usize], rng.below(3)),
        }
    };
    let predicates = [
        Predicate::Eq,
        Predicate::Ge,
        Predicate::Gt,
        Predicate::Lt,
        Predicate::Le,
    ];
    let notify = (rng.below(2) == 0).then(|| Notify {
        predicate: predicates[rng.below(5) as usize],
        operand: rng.below(200),
    });
    let lo = rng.below(SPACE / 2);
    let hi = rng.range(lo + 64, SPACE + 1);
    TelemetrySpec {
        filter: Filter {
            kinds: [Kinds::Read, Kinds::Write, Kinds::Both][rng.below(3) as usize],
            range: AddrRange::new(lo, hi),
        },
        translation: Translation {
            primary: MaskShift::bits(12, 16),
            // 4 sub-regions of 1 KiB per 4 KiB region, or one state per region.
            sub: (rng.below(2) == 0).then(|| MaskShift::bits(10, 12)),
        },
        update: Update {
            op,
            operand,
            overflow,
        },
        notify,
        read_effect,
        entries: ENTRIES,
        states: STATES,
        width,
    }
}

/// The naive model: every copy (controller, channel) of every state in a map.
struct Oracle {
    specs: Vec<TelemetrySpec>,
    /// (telemetry, key) -> region index.
    translation: HashMap<(usize, u64), u64>,
    /// (telemetry, controller, channel, index) -> state; absent = start value.
    copies: HashMap<(usize, usize, usize, u64), u64>,
    /// (telemetry, controller) -> updates on which the predicate held.
    raised: HashMap<(usize, usize), u64>,
    controllers: usize,
    channels: usize,
    granularity: u64,
}

fn start(spec: &TelemetrySpec) -> u64 {
    match spec.read_effect {
        ReadEffect::Reset(v) => v,
        _ => 0,
    }
}

/// `state op k` on a `width`-bit register, from the rules as the paper and docs state
/// them, in 128-bit arithmetic.
fn naive_update(op: UpdateOp, s: u64, k: u64, width: u32, saturate: bool) -> u64 {
    let top: u128 = (1u128 << width) - 1;
    let (s, k) = (s as u128, k as u128);
    let v: u128 = match op {
        UpdateOp::Add if saturate => (s + k).min(top),
        UpdateOp::Add => (s + k) & top,
        UpdateOp::Sub if saturate => s.saturating_sub(k),
        UpdateOp::Sub => (s + (1u128 << 64) * 2 - k) & top,
        UpdateOp::Shl if k >= 64 => 0,
        UpdateOp::Shl => (s << k) & top,
        UpdateOp::Shr if k >= 64 => 0,
        UpdateOp::Shr => s >> k,
        UpdateOp::Xor => (s ^ k) & top,
    };
    v as u64
}

fn holds(p: Predicate, s: u64, x: u64) -> bool {
    match p {
        Predicate::Eq => s == x,
        Predicate::Ge => s >= x,
        Predicate::Gt => s > x,
        Predicate::Lt => s < x,
        Predicate::Le => s <= x,
    }
}

/// The paper's merge (§3.2): sum for add and sub, XOR for xor, the product for shifts
/// (fixed point with the start value as 1), all relative to the start value.
fn naive_merge(spec: &TelemetrySpec, copies: &[u64]) -> u64 {
    let init = start(spec) as i128;
    let top = (1i128 << spec.width) - 1;
    match spec.update.op {
        UpdateOp::Add | UpdateOp::Sub => {
            let v = init + copies.iter().map(|&c| c as i128 - init).sum::<i128>();
            if spec.update.overflow == Overflow::Saturate {
                v.clamp(0, top) as u64
            } else {
                v.rem_euclid(top + 1) as u64
            }
        }
        UpdateOp::Xor => copies.iter().fold(init, |a, &c| a ^ (c as i128 ^ init)) as u64,
        UpdateOp::Shl | UpdateOp::Shr => {
            // Each copy is init x 2^(+-a_i) or 0; the product over copies, in log2.
            if copies.contains(&0) {
                return 0;
            }
            let p = (init as f64).log2();
            let e: f64 = p + copies.iter().map(|&c| (c as f64).log2() - p).sum::<f64>();
            if !(0.0..spec.width as f64).contains(&e) {
                0
            } else {
                1u64 << e as u32
            }
        }
    }
}

impl Oracle {
    fn route(&self, addr: u64) -> (usize, usize) {
        let chunk = addr / self.granularity;
        let controller = (chunk % self.controllers as u64) as usize;
        let channel = (chunk / self.controllers as u64 % self.channels as u64) as usize;
        (controller, channel)
    }

    fn access(&mut self, r: &Request) {
        let (controller, channel) = self.route(r.addr);
        for (t, spec) in self.specs.iter().enumerate() {
            let kind_ok = match spec.filter.kinds {
                Kinds::Read => !r.write,
                Kinds::Write => r.write,
                Kinds::Both => true,
            };
            let range = spec.filter.range;
            if !kind_ok || r.addr < range.start || r.addr >= range.end {
                continue;
            }
            let key = (r.addr >> 12) & 0xf;
            let Some(&region) = self.translation.get(&(t, key)) else {
                continue;
            };
            let (span, offset) = match spec.translation.sub {
                Some(_) => (4, (r.addr >> 10) & 3),
                None => (1, 0),
            };
            let index = region * span + offset;
            let k = match spec.update.operand {
                Operand::Const(k) => k,
                Operand::RequestBytes => r.bytes as u64,
            };
            let copy = self
                .copies
                .entry((t, controller, channel, index))
                .or_insert(start(spec));
            let saturate = spec.update.overflow == Overflow::Saturate;
            *copy = naive_update(spec.update.op, *copy, k, spec.width, saturate);
            if let Some(n) = spec.notify {
                if holds(n.predicate, *copy, n.operand) {
                    *self.raised.entry((t, controller)).or_default() += 1;
                }
            }
        }
    }

    fn read(&mut self, t: usize, index: u64) -> u64 {
        let spec = self.specs[t];
        let mut copies = vec![];
        for c in 0..self.controllers {
            for ch in 0..self.channels {
                let copy = self.copies.entry((t, c, ch, index)).or_insert(start(&spec));
                copies.push(*copy);
                let saturate = spec.update.overflow == Overflow::Saturate;
                *copy = match spec.read_effect {
                    ReadEffect::None => *copy,
                    ReadEffect::Reset(v) => v,
                    ReadEffect::Op(op, k) => naive_update(op, *copy, k, spec.width, saturate),
                };
            }
        }
        naive_merge(&spec, &copies)
    }
}

/// One state that sees every request, with no routing (check 2).
fn single_copy(
    spec: &TelemetrySpec,
    keys: &HashMap<u64, u64>,
    reqs: &[Request],
    index: u64,
) -> u64 {
    let one = Oracle {
        specs: vec![*spec],
        translation: keys.iter().map(|(&k, &r)| ((0, k), r)).collect(),
        copies: HashMap::new(),
        raised: HashMap::new(),
        controllers: 1,
        channels: 1,
        granularity: 64,
    };
    let mut one = one;
    for r in reqs {
        one.access(r);
    }
    one.read(0, index)
}

struct Case {
    specs: Vec<TelemetrySpec>,
    /// Per telemetry: key -> region.
    keys: Vec<HashMap<u64, u64>>,
    /// Requests between reads.
    epochs: Vec<Vec<Request>>,
}

fn random_case(rng: &mut Rng) -> Case {
    let specs: Vec<_> = (0..1 + rng.below(3)).map(|_| random_spec(rng)).collect();
    let keys = specs
        .iter()
        .map(|s| {
            let regions = s.states as u64 / s.translation.sub.map_or(1, |_| 4);
            // Some keys unmapped, some sharing a region (many-to-one, §5.3).
            let mut keys = HashMap::new();
            for k in 0..ENTRIES as u64 {
                if rng.below(4) != 0 {
                    keys.insert(k, rng.below(regions));
                }
            }
            keys
        })
        .collect();
    let epochs = (0..4)
        .map(|_| {
            (0..rng.range(50, 400))
                .map(|_| Request {
                    addr: rng.below(SPACE) & !63,
                    write: rng.below(2) == 0,
                    bytes: [32, 64][rng.below(2) as usize],
                })
                .collect()
        })
        .collect();
    Case {
        specs,
        keys,
        epochs,
    }
}

/// Runs `case` on a driver of `shape`, returning the merged reads of every state after
/// each epoch and the notifications per (telemetry, controller).
fn run_driver(
    case: &Case,
    shape: Interleave,
    order: &mut Rng,
    shuffle: bool,
) -> (Vec<u64>, HashMap<(usize, usize), u64>) {
    let mut d = Driver::new(NemoConfig {
        interleave: shape,
        ..NemoConfig::prototype()
    });
    let ids: Vec<TelemetryId> = case.specs.iter().map(|s| d.register(s).unwrap()).collect();
    for (t, keys) in case.keys.iter().enumerate() {
        for (&k, &r) in keys {
            d.set_translation(ids[t], k, r).unwrap();
        }
    }
    let mut reads = vec![];
    let mut raised = HashMap::new();
    let mut pending = vec![];
    for epoch in &case.epochs {
        let mut reqs = epoch.clone();
        if shuffle {
            for i in (1..reqs.len()).rev() {
                reqs.swap(i, order.below(i as u64 + 1) as usize);
            }
        }
        for r in &reqs {
            d.access(r);
        }
        for (t, spec) in case.specs.iter().enumerate() {
            for i in 0..spec.states as u64 {
                reads.push(d.read(ids[t], i).unwrap());
            }
        }
        d.drain_notifications(&mut pending);
        for n in pending.drain(..) {
            *raised.entry((n.telemetry.0, n.controller)).or_default() += n.raises;
        }
    }
    (reads, raised)
}

fn check(seed: u64, shape: Interleave) {
    let mut rng = Rng::new(seed);
    let case = random_case(&mut rng);
    let (reads, raised) = run_driver(&case, shape, &mut rng, false);

    // 1. The naive model.
    let mut oracle = Oracle {
        specs: case.specs.clone(),
        translation: case
            .keys
            .iter()
            .enumerate()
            .flat_map(|(t, m)| m.iter().map(move |(&k, &r)| ((t, k), r)))
            .collect(),
        copies: HashMap::new(),
        raised: HashMap::new(),
        controllers: shape.controllers(),
        channels: shape.channels(),
        granularity: shape.granularity(),
    };
    let mut expected = vec![];
    for epoch in &case.epochs {
        for r in epoch {
            oracle.access(r);
        }
        for (t, spec) in case.specs.iter().enumerate() {
            for i in 0..spec.states as u64 {
                expected.push(oracle.read(t, i));
            }
        }
    }
    assert_eq!(reads, expected, "seed {seed} {shape:?}: {:?}", case.specs);
    oracle.raised.retain(|_, n| *n > 0);
    assert_eq!(raised, oracle.raised, "seed {seed} {shape:?}");

    // 2. One copy that saw everything, where reads leave copies at the start or alone.
    let mut at = 0;
    for epoch_end in 1..=case.epochs.len() {
        for (t, spec) in case.specs.iter().enumerate() {
            let resettable = matches!(spec.read_effect, ReadEffect::Reset(_));
            let untouched = matches!(spec.read_effect, ReadEffect::None);
            for i in 0..spec.states as u64 {
                let seen: Vec<Request> = if resettable {
                    case.epochs[epoch_end - 1].clone()
                } else {
                    case.epochs[..epoch_end].concat()
                };
                if resettable || untouched {
                    let one = single_copy(spec, &case.keys[t], &seen, i);
                    assert_eq!(reads[at], one, "seed {seed} {shape:?} t{t} i{i}: {spec:?}");
                }
                at += 1;
            }
        }
    }

    // 3. Another order within each epoch: the same merged reads.
    let (shuffled, _) = run_driver(&case, shape, &mut Rng::new(seed ^ 0xabc), true);
    assert_eq!(reads, shuffled, "seed {seed} {shape:?}");
}

#[test]
fn driver_matches_a_naive_per_request_oracle() {
    let shapes = [
        Interleave::new(1, 2, 64).unwrap(),
        Interleave::new(2, 2, 64).unwrap(),
        Interleave::new(4, 1, 256).unwrap(),
        Interleave::new(3, 2, 128).unwrap(),
        // Odd numbers of copies: XOR-like merges differ from even ones.
        Interleave::new(1, 1, 64).unwrap(),
        Interleave::new(3, 1, 64).unwrap(),
    ];
    for seed in 1..=150 {
        for shape in shapes {
            check(seed, shape);
        }
    }
}
