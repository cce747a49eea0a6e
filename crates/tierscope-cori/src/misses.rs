//! A real program's trace as cori-sim wants it. The Cori paper's traces are not a
//! program's loads and stores but "the memory address of the last level cache misses out
//! of a simulated three level data cache hierarchy" (section II-B, Intel Pin): the
//! requests that reach memory. Here a program's loads and stores (valgrind lackey's
//! output, read by `tierscope_core::workload::trace`) go through one last-level cache,
//! NEMO's (`tierscope_nemo::Llc`: set-associative, 64 B lines, LRU, a store miss is a
//! read for ownership), and its misses become the trace. One level stands for the
//! hierarchy: every access updates its recency, as in an inclusive hierarchy whose upper
//! levels pass their hits down; the paper names neither its caches' sizes nor the scale
//! it shrank them by, so the size is an input (docs/techniques/CORI.md, "Real programs").

use crate::trace::Trace;
use std::io::Write;
use tierscope_core::workload::trace::ADDR;
use tierscope_core::FieldError;
use tierscope_nemo::{Llc, LlcConfig};

/// The requests of `records` (a lackey trace's records: an address, bit 63 set for a
/// store) that miss a cold cache of shape `llc`, in order; with `None`, every request.
/// Errors when nothing misses (a trace needs one request).
pub fn llc_misses(records: &[u64], llc: Option<&LlcConfig>) -> Result<Trace, FieldError> {
    let mut cache = llc.map(Llc::new);
    let misses = records
        .iter()
        .map(|r| r & ADDR)
        .filter(|&a| cache.as_mut().is_none_or(|c| !c.access(a)));
    Trace::from_addresses(misses)
}

impl Trace {
    /// Writes the trace in cori-sim's format, one `0x...` address a line: each request
    /// as its page's first byte (cori-sim reads only the page), so reading the file back
    /// gives this trace.
    pub fn write_cori_sim(&self, mut out: impl Write) -> std::io::Result<()> {
        let pages = self.page_numbers();
        for &id in self.ids() {
            writeln!(out, "{:#x}", pages[id as usize] << crate::trace::PAGE_SHIFT)?;
        }
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::units::Size;
    use tierscope_core::workload::trace::STORE;

    const PAGE: u64 = 4096;

    #[test]
    fn only_the_misses_of_the_cache_reach_the_trace() {
        // One set of two 64 B lines. Pages 1, 2 and 3 (a line each at offset 0).
        let two_lines = LlcConfig {
            size: Size(128),
            ways: 2,
        };
        let (a, b, c) = (PAGE, 2 * PAGE, 3 * PAGE);
        let records = [
            a,         // miss: a
            a + 8,     // hit: the same line
            b | STORE, // miss (a store's read for ownership): a b
            a + 63,    // hit, a most recent: b a
            c,         // miss, evicts b: a c
            b,         // miss, evicts a: c b
            a | STORE, // miss, evicts c
            a + 64,    // another line of page 1: miss
        ];
        let t = llc_misses(&records, Some(&two_lines)).unwrap();
        // Misses a, b, c, b, a, a+64: pages 1 2 3 2 1 1 as ids in first-touch order.
        assert_eq!(t.ids(), &[0, 1, 2, 1, 0, 0]);
        assert_eq!(t.page_numbers(), &[1, 2, 3]);
        // Without a cache every request is one, the store bit dropped.
        let all = llc_misses(&records, None).unwrap();
        assert_eq!(all.len(), records.len());
        assert_eq!(all.ids(), &[0, 0, 1, 0, 2, 1, 0, 0]);
    }

    #[test]
    fn a_larger_cache_never_misses_more_on_a_loop() {
        // LRU is a stack algorithm: on any trace, more ways over the same sets never
        // miss more. A loop over 40 lines, three times: 16 lines miss every time, 64 only
        // the first pass.
        let records: Vec<u64> = (0..3).flat_map(|_| (0..40u64).map(|l| l * 64)).collect();
        let small = LlcConfig {
            size: Size(16 * 64),
            ways: 16,
        };
        let large = LlcConfig {
            size: Size(64 * 64),
            ways: 64,
        };
        assert_eq!(llc_misses(&records, Some(&small)).unwrap().len(), 120);
        assert_eq!(llc_misses(&records, Some(&large)).unwrap().len(), 40);
    }

    #[test]
    fn nothing_missing_is_an_error() {
        assert!(llc_misses(&[], None).is_err());
    }

    #[test]
    fn the_written_trace_reads_back_the_same() {
        let t = llc_misses(&[5 * PAGE + 17, 0x7f00_0000_1234, 5 * PAGE, 3], None).unwrap();
        let mut text = Vec::new();
        t.write_cori_sim(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(text, "0x5000\n0x7f0000001000\n0x5000\n0x0\n");
        assert_eq!(Trace::parse(&text).unwrap(), t);
    }
}
