//! The guards against silently wrong results on a real KVM guest (docs/models/KVM.md): the engine
//! measures the rate it reached and each window's real length, and the ACCESSED probe
//! gives a definite answer. Where /dev/kvm could not be opened when the crate was built
//! (build.rs sets `cfg(kvm_host)`), they are reported as ignored.

use std::time::{Duration, Instant};
use tierscope_core::workload::parse_masim;
use tierscope_core::{Engine, Machine};
use tierscope_kvm::guard::{check, MAX_STRETCH};
use tierscope_kvm::probe::{run_probe, PROBED};
use tierscope_kvm::{accessed_probe, KvmEngine, KvmParams};

const MS: u64 = 1_000_000;

#[test]
#[cfg_attr(not(kvm_host), ignore = "needs /dev/kvm")]
fn an_impossible_rate_and_slow_wake_ups_are_measured_and_flagged() {
    let w = parse_masim("hot, 8MiB\n\np\n100000\nhot, 1, 4096, 1, ro\n").unwrap();
    let mut p = KvmParams::new(&w);
    p.threads = 2;
    p.rate = 10e9; // 10 G accesses/s per vCPU: no guest reaches that.
    let mut e = KvmEngine::new(&p).unwrap();
    // A runner whose monitor, at each wake-up, asks for the next 20 ms later, and whose
    // wake-ups take 40 ms (as a slow monitor, or one starved by a busy host, would): every
    // window lasts about twice its nominal length.
    let mut woke = 0;
    for _ in 0..4 {
        e.advance_to(woke + 20 * MS);
        woke = e.now();
        std::thread::sleep(Duration::from_millis(40));
        let _ = e.take_truth();
    }
    e.check().unwrap();
    let r = e.real_time_report().expect("the kvm engine reports");
    assert_eq!((r.rate_requested, r.threads, r.windows.len()), (10e9, 2, 4));
    for (i, w) in r.windows.iter().enumerate() {
        let real = w.end_ns - w.start_ns;
        // Each window asked for 20 ms (from the previous return to the target, which
        // this loop reads a moment after that return) and lasted at least the 40 ms of
        // its wake-up.
        assert!(
            (20 * MS..21 * MS).contains(&w.nominal_ns),
            "window {i}: {w:?}"
        );
        assert!(real >= 40 * MS, "window {i}: {w:?}");
        assert!(
            real as f64 > MAX_STRETCH * w.nominal_ns as f64,
            "window {i}: {w:?}"
        );
        assert_eq!(w.accesses.len(), 2);
        for (v, &n) in w.accesses.iter().enumerate() {
            // The guest ran, but far below the rate asked.
            assert!(n > 0, "window {i} vCPU {v} did nothing");
            assert!(
                (n as f64) < 0.5 * 10e9 * real as f64 * 1e-9,
                "window {i}: {n}"
            );
        }
    }
    assert_eq!(r.windows[0].start_ns, 0);
    assert!(r.windows.windows(2).all(|w| w[0].end_ns == w[1].start_ns));
    let total: u64 = r.windows.iter().flat_map(|w| &w.accesses).sum();
    assert!(total <= e.accesses());

    let c = check(&r, 0, false, None);
    assert!(!c.valid, "{c:?}");
    let reason = c.invalid_reason.clone().unwrap();
    assert!(reason.contains("of the 10.0 G/s asked"), "{reason}");
    assert!(reason.contains("4 of 4 windows"), "{reason}");
    assert_eq!(c.windows_stretched, 4);
    assert!(c.rate_share.unwrap() < 0.5 && c.rate_achieved.iter().all(|&x| x > 0.0));
    println!("{reason}");
}

#[test]
#[cfg_attr(not(kvm_host), ignore = "needs /dev/kvm")]
fn a_guest_that_keeps_up_passes_the_guards() {
    // 200 k/s per vCPU over a small region, a runner that wakes every 50 ms and takes no
    // time: valid whatever the host's load (short of a stall).
    let w = parse_masim("hot, 2MiB\n\np\n100000\nhot, 1, 4096, 1, ro\n").unwrap();
    let mut p = KvmParams::new(&w);
    p.rate = 200e3;
    let mut e = KvmEngine::new(&p).unwrap();
    for k in 1..=6 {
        e.advance_to(k * 50 * MS);
        let _ = e.take_truth();
    }
    let r = e.real_time_report().unwrap();
    let c = check(&r, 100 * MS, false, None);
    // The two windows before 100 ms are left out.
    assert_eq!(c.windows_checked, 4);
    assert!(c.valid, "{c:?}");
    let share = c.rate_share.unwrap();
    // Paced: never much faster than asked (the pacer's budget is rate x time + 256).
    assert!((0.5..1.1).contains(&share), "{share}");
}

#[test]
#[cfg_attr(not(kvm_host), ignore = "needs /dev/kvm")]
fn the_accessed_probe_gives_a_definite_answer_quickly_and_once() {
    let t0 = Instant::now();
    let p = run_probe().expect("a definite answer");
    let took = t0.elapsed();
    println!("{} (wall {took:?})", p.line());
    assert_eq!(p.pages, PROBED);
    assert!(p.rearmed <= p.pages && p.passes >= 1);
    if p.rearmed < p.pages {
        // The control: the bits that did not come back without a flush came back after
        // one, so the guest did touch them and the answer is about the flush.
        let back = p.after_flush.expect("a flush was tried");
        assert!(2 * back >= p.pages - p.rearmed, "{p:?}");
    } else {
        assert_eq!(p.after_flush, None);
    }
    assert!(took < Duration::from_secs(2), "the probe took {took:?}");
    // Cached per process: the second call does not start a VM.
    let first = accessed_probe();
    let t1 = Instant::now();
    let second = accessed_probe();
    assert!(std::ptr::eq(first, second));
    assert!(t1.elapsed() < Duration::from_millis(5));
    let cached = first.as_ref().expect("a definite answer");
    assert_eq!(cached.pages, PROBED);
}
