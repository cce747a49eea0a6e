//! A recorded trace replayed on the exact engine: the pages it stores to reach the write
//! log (simulated PML) and the blocks it touches the truth, each at the same offset from
//! its region's start as from its run of touched 2 MiB areas in the trace (worked out here
//! from the trace alone), and the replay loops when the run outlasts the trace.

use std::collections::BTreeSet;
use tierscope_core::workload::trace::{Trace, STORE};
use tierscope_core::{Engine, Machine};
use tierscope_sim::config::SimMachine;
use tierscope_sim::exact::ExactEngine;
use tierscope_sim::WorkloadParams;

#[test]
fn replayed_stores_and_blocks_keep_their_offsets() {
    // Two runs of areas: [6 MiB, 10 MiB) (two adjacent 2 MiB areas) and a stack-like
    // area far above.
    let stack = 0x7ff0_0000_0000u64;
    let records = vec![
        0x60_1008 | STORE,
        0x60_1010,
        0x80_0040 | STORE,
        0x9f_f000,
        (stack + 0x1_0000) | STORE,
        stack + 0x1_0008,
    ];
    let trace = Trace {
        records: records.clone(),
        markers: vec![],
    };
    let rate = 1_000_000;
    let spec = trace.spec(rate);
    let params = WorkloadParams {
        spec: &spec,
        rate,
        threads: 1,
        seed: 1,
        block_size: 2 << 20,
        truth_threshold: 1,
    };
    let mut e = ExactEngine::new(&SimMachine::default(), &params).unwrap();
    e.replay(&trace);
    // Region 0 is the highest run (the stack area), region 1 the low run.
    let maps = e.mappings().to_vec();
    let start_of = |name: &str| {
        maps.iter()
            .find(|m| m.name.ends_with(name))
            .unwrap()
            .range
            .start
    };
    let (hi, lo) = (start_of("trace0"), start_of("trace1"));
    let place = |a: u64| {
        if a >= stack {
            hi + (a - stack)
        } else {
            lo + (a - 0x60_0000)
        }
    };
    let mut log = vec![];
    e.write_log().unwrap().drain_written(&mut log);
    // 6 accesses at 1 M/s take 6 us; run two laps.
    e.advance_to(12_000);
    let mut written = vec![];
    e.write_log().unwrap().drain_written(&mut written);
    let want: BTreeSet<u64> = records
        .iter()
        .filter(|&&r| r & STORE != 0)
        .map(|&r| place(r & !STORE) & !4095)
        .collect();
    assert_eq!(written, want.into_iter().collect::<Vec<_>>());
    let blocks: BTreeSet<u64> = records.iter().map(|&r| place(r & !STORE) >> 21).collect();
    let truth: BTreeSet<u64> = e.take_truth().iter().flat_map(|&(a, b)| a..b).collect();
    assert_eq!(truth, blocks);
    assert_eq!(e.stats().accesses, 12, "two laps of the trace");
}
