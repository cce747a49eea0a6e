//! The tenants of the noisy-neighbour use case (NEMO paper §5.3): each owns huge pages
//! of the device's physical memory and asks memory for bytes at some rate; the noisy
//! neighbour alternates on and off. This module says where a tenant's pages are and
//! which line each of its requests touches; how much each gets served is `contention`.

use crate::pipeline::Request;
use tierscope_core::rng::Rng;
use tierscope_core::FieldError;

/// A huge page: the unit of the tenants' memory and of Listing 3's translation keys.
pub const HUGE_PAGE: u64 = 2 << 20;
/// A memory request moves one cache line.
pub const LINE: u64 = 64;
const LINES_PER_PAGE: u64 = HUGE_PAGE / LINE;

/// How a tenant walks its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// Uniformly random lines: a key-value store's lookups.
    Random,
    /// Line after line, wrapping at the end: the paper's antagonist streams
    /// non-temporal stores over its buffer (`ctl/antagonist.c` of the public code).
    Sequential,
}

/// One tenant's memory and demand.
#[derive(Debug, Clone, PartialEq)]
pub struct Tenant {
    pub name: String,
    /// Huge pages it owns.
    pub huge_pages: u64,
    /// Bytes per second it asks of memory at a full CPU quota while running.
    pub demand: f64,
    /// Share of its requests that are writes.
    pub write_share: f64,
    pub walk: Walk,
    /// Per-step demand noise: each step's demand is `demand x (1 + jitter x U(-1, 1))`.
    pub jitter: f64,
}

impl Tenant {
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.huge_pages == 0 {
            return Err(FieldError::new("huge_pages", "must be at least 1"));
        }
        if !(self.demand.is_finite() && self.demand >= 0.0) {
            return Err(FieldError::new(
                "demand",
                format!("must be a bandwidth >= 0 bytes/s, got {}", self.demand),
            ));
        }
        if !(0.0..=1.0).contains(&self.write_share) {
            return Err(FieldError::new(
                "write_share",
                format!("must be in [0, 1], got {}", self.write_share),
            ));
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return Err(FieldError::new(
                "jitter",
                format!("must be in [0, 1), got {}", self.jitter),
            ));
        }
        Ok(())
    }
}

/// The noisy neighbour's shape: `on_s` seconds running, `off_s` asleep, starting
/// `offset_s` into a period (§5.3: "alternates every 0.5 s between high-bandwidth
/// execution and sleep").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OnOff {
    pub on_s: f64,
    pub off_s: f64,
    pub offset_s: f64,
}

impl OnOff {
    pub fn period(&self) -> f64 {
        self.on_s + self.off_s
    }

    pub fn is_on(&self, t: f64) -> bool {
        (t + self.offset_s).rem_euclid(self.period()) < self.on_s
    }
}

/// Which physical huge pages each tenant owns. Frames are dealt round-robin to the
/// tenants that still need pages, so every tenant's memory is spread over the device
/// (and, by the interleave, over every controller and channel) and no tenant is one
/// contiguous range: Listing 3's many-to-one translation is needed to gather it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    frames: Vec<Vec<u64>>,
}

impl Layout {
    pub fn new(pages: &[u64], device_pages: u64) -> Result<Self, FieldError> {
        let total: u64 = pages.iter().sum();
        if total > device_pages {
            return Err(FieldError::new(
                "huge_pages",
                format!("the tenants own {total} huge pages, the device has {device_pages}"),
            ));
        }
        let mut frames: Vec<Vec<u64>> = pages
            .iter()
            .map(|&n| Vec::with_capacity(n as usize))
            .collect();
        let mut next = 0;
        while next < total {
            for (t, f) in frames.iter_mut().enumerate() {
                if (f.len() as u64) < pages[t] {
                    f.push(next);
                    next += 1;
                }
            }
        }
        Ok(Layout { frames })
    }

    /// Huge-page frame numbers (`paddr >> 21`) of tenant `t`.
    pub fn frames(&self, t: usize) -> &[u64] {
        &self.frames[t]
    }

    pub fn tenants(&self) -> usize {
        self.frames.len()
    }
}

/// One tenant's request stream: which line the next request touches, read or write.
#[derive(Debug, Clone)]
pub struct Stream {
    walk: Walk,
    write_share: f64,
    rng: Rng,
    cursor: u64,
}

impl Stream {
    pub fn new(tenant: &Tenant, rng: Rng) -> Self {
        Stream {
            walk: tenant.walk,
            write_share: tenant.write_share,
            rng,
            cursor: 0,
        }
    }

    /// The next request of a tenant owning `frames`. No allocation.
    #[inline]
    pub fn next(&mut self, frames: &[u64]) -> Request {
        let n = frames.len() as u64;
        let (page, line) = match self.walk {
            Walk::Random => (self.rng.below(n), self.rng.below(LINES_PER_PAGE)),
            Walk::Sequential => {
                let c = self.cursor;
                self.cursor = (c + 1) % (n * LINES_PER_PAGE);
                (c / LINES_PER_PAGE, c % LINES_PER_PAGE)
            }
        };
        // A pure reader or writer draws no number for the kind.
        let write = self.write_share >= 1.0
            || (self.write_share > 0.0 && self.rng.unit() < self.write_share);
        Request {
            addr: frames[page as usize] * HUGE_PAGE + line * LINE,
            write,
            bytes: LINE as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_dealt_round_robin_and_bounded() {
        let l = Layout::new(&[3, 1, 2], 8).unwrap();
        assert_eq!(l.frames(0), &[0, 3, 5]);
        assert_eq!(l.frames(1), &[1]);
        assert_eq!(l.frames(2), &[2, 4]);
        let e = Layout::new(&[5, 4], 8).unwrap_err();
        assert_eq!(e.field, "huge_pages");
    }

    #[test]
    fn on_off_by_hand() {
        let p = OnOff {
            on_s: 0.5,
            off_s: 0.5,
            offset_s: 0.25,
        };
        // Shifted by 0.25 s: on in [0, 0.25) and [0.75, 1.25), off in [0.25, 0.75).
        assert!(p.is_on(0.0) && p.is_on(0.2) && p.is_on(0.8) && p.is_on(1.2));
        assert!(!p.is_on(0.3) && !p.is_on(0.7) && !p.is_on(1.3));
    }

    #[test]
    fn sequential_stream_walks_lines_then_pages_and_wraps() {
        let t = Tenant {
            name: "n".into(),
            huge_pages: 2,
            demand: 1.0,
            write_share: 1.0,
            walk: Walk::Sequential,
            jitter: 0.0,
        };
        let mut s = Stream::new(&t, Rng::new(1));
        let frames = [7, 9];
        let first = s.next(&frames);
        assert_eq!(first.addr, 7 * HUGE_PAGE);
        assert!(first.write);
        assert_eq!(s.next(&frames).addr, 7 * HUGE_PAGE + 64);
        for _ in 2..LINES_PER_PAGE {
            s.next(&frames);
        }
        assert_eq!(s.next(&frames).addr, 9 * HUGE_PAGE);
        for _ in 1..LINES_PER_PAGE {
            s.next(&frames);
        }
        assert_eq!(
            s.next(&frames).addr,
            7 * HUGE_PAGE,
            "wraps to the first line"
        );
    }

    #[test]
    fn random_stream_stays_in_its_pages_with_its_write_share() {
        let t = Tenant {
            name: "v".into(),
            huge_pages: 3,
            demand: 1.0,
            write_share: 0.25,
            walk: Walk::Random,
            jitter: 0.0,
        };
        let mut s = Stream::new(&t, Rng::new(3));
        let frames = [1, 4, 6];
        let mut writes = 0;
        for _ in 0..40_000 {
            let r = s.next(&frames);
            assert!(frames.contains(&(r.addr / HUGE_PAGE)));
            assert_eq!(r.addr % LINE, 0);
            writes += r.write as u32;
        }
        // Binomial(40000, 0.25): sd ~87, so 5 sd is ~433.
        assert!((writes as i64 - 10_000).abs() < 433, "{writes}");
    }
}
