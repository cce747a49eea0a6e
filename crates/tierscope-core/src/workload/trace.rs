//! Memory traces of real programs: valgrind lackey's text output and tierscope's compact
//! binary format (docs/models/TRACES.md), read into loads and stores with phase markers, and the
//! placement of the trace's sparse address space into a heap.
//!
//! A trace has no timing: replay issues its accesses at a stated rate (accesses per
//! simulated second), in order, looping when the run is longer than the trace.

use super::spec::{AccessMode, Density, PatternKind, PatternSpec, PhaseSpec, RegionSpec};
use super::WorkloadSpec;
use crate::limits::{
    open_limited, read_error, BoundedLines, MAX_PHASES, MAX_TRACE_ACCESSES, MAX_TRACE_FILE,
    MAX_TRACE_LINE,
};
use crate::units::{Duration, Size, NS_PER_S};
use crate::FieldError;
use std::io::{BufRead, Read, Write};
use std::path::Path;

/// Bit of a record that marks a store.
pub const STORE: u64 = 1 << 63;
/// Mask of a record's address.
pub const ADDR: u64 = (1 << 57) - 1;
/// The binary format's magic and version.
pub const MAGIC: &[u8; 8] = b"TSTRACE\0";
pub const VERSION: u32 = 1;
/// Placement granule: the trace's touched 2 MiB areas are kept whole.
const AREA: u64 = 2 << 20;

/// A trace: accesses in order and the phase markers between them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trace {
    /// `address | STORE` for a store.
    pub records: Vec<u64>,
    /// (index of the first access of the phase, its name), in order; the first phase starts
    /// at 0 (named `start` when the trace does not name it).
    pub markers: Vec<(u64, String)>,
}

/// Which lines of lackey's output become accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LackeyOptions {
    /// Count instruction fetches (`I` lines) as loads.
    pub instructions: bool,
}

/// An error about the trace file: its field is `workload.trace`.
fn at_trace(e: FieldError, file: &str) -> FieldError {
    FieldError {
        field: "workload.trace".into(),
        file: Some(file.to_string()),
        ..e
    }
}

fn bad(file: &str, line: usize, what: String) -> FieldError {
    FieldError::new("workload.trace", what)
        .in_file(file)
        .at_line(Some(line))
}

impl Trace {
    /// Reads a lackey trace file (at most [`MAX_TRACE_FILE`] bytes; `shown` names it in
    /// errors).
    pub fn read_lackey_file(
        path: &Path,
        shown: &str,
        opts: LackeyOptions,
    ) -> Result<Trace, FieldError> {
        let input = open_limited(path, MAX_TRACE_FILE, "trace").map_err(|e| at_trace(e, shown))?;
        Trace::read_lackey(std::io::BufReader::new(input), shown, opts)
    }

    /// Reads a trace file in the binary format (at most [`MAX_TRACE_FILE`] bytes).
    pub fn read_binary_file(path: &Path, shown: &str) -> Result<Trace, FieldError> {
        let input = open_limited(path, MAX_TRACE_FILE, "trace").map_err(|e| at_trace(e, shown))?;
        Trace::read_binary(std::io::BufReader::new(input), shown)
    }

    /// Reads lackey's `--trace-mem=yes` output: ` L addr,size`, ` S addr,size`, ` M addr,size`
    /// (a load then a store), `I  addr,size` (instruction fetch), and our marker lines
    /// `# phase NAME`; valgrind's own lines (`==pid== ...`) and blank lines are skipped.
    /// Lines are at most [`MAX_TRACE_LINE`] bytes, accesses at most [`MAX_TRACE_ACCESSES`]
    /// and markers at most [`MAX_PHASES`].
    pub fn read_lackey(
        input: impl BufRead,
        file: &str,
        opts: LackeyOptions,
    ) -> Result<Trace, FieldError> {
        let mut t = Trace::default();
        let mut lines = BoundedLines::new(input, MAX_TRACE_LINE);
        let io = |e| at_trace(read_error(file, "trace", MAX_TRACE_FILE, e), file);
        while let Some((n, line)) = lines.next_line(file, io).map_err(|e| at_trace(e, file))? {
            let s = line.trim_end();
            if s.is_empty() || s.starts_with("==") || s.starts_with("--") {
                continue;
            }
            if let Some(name) = s.strip_prefix("# phase ") {
                if t.markers.len() >= MAX_PHASES {
                    return Err(bad(
                        file,
                        n,
                        format!("more than {MAX_PHASES} phase markers"),
                    ));
                }
                t.mark(name.trim());
                continue;
            }
            if s.starts_with('#') {
                continue;
            }
            let s = s.trim_start();
            let Some(kind) = s.get(..1) else {
                return Err(bad(
                    file,
                    n,
                    format!("expected `K addr,size` (K one of I, L, S, M), got `{s}`"),
                ));
            };
            let rest = &s[1..];
            let Some((addr, size)) = rest.trim().split_once(',') else {
                return Err(bad(
                    file,
                    n,
                    format!("expected `K addr,size` (K one of I, L, S, M), got `{s}`"),
                ));
            };
            let addr = u64::from_str_radix(addr.trim(), 16).map_err(|_| {
                bad(
                    file,
                    n,
                    format!("`{}` is not a hexadecimal address", addr.trim()),
                )
            })?;
            size.trim()
                .parse::<u32>()
                .map_err(|_| bad(file, n, format!("`{}` is not an access size", size.trim())))?;
            if addr > ADDR {
                return Err(bad(file, n, format!("address {addr:#x} is above 2^57")));
            }
            match kind {
                "L" => t.records.push(addr),
                "S" => t.records.push(addr | STORE),
                "M" => t.records.extend([addr, addr | STORE]),
                "I" if opts.instructions => t.records.push(addr),
                "I" => {}
                k => {
                    return Err(bad(
                        file,
                        n,
                        format!("unknown access kind `{k}` (expected I, L, S or M)"),
                    ))
                }
            }
            if t.records.len() as u64 > MAX_TRACE_ACCESSES {
                return Err(bad(
                    file,
                    n,
                    format!("more than {MAX_TRACE_ACCESSES} accesses (the limit of a trace)"),
                ));
            }
        }
        if t.records.is_empty() {
            return Err(FieldError::new("workload.trace", "the trace has no access").in_file(file));
        }
        Ok(t)
    }

    /// A phase named `name` starts at the next access.
    pub fn mark(&mut self, name: &str) {
        let at = self.records.len() as u64;
        if let Some(last) = self.markers.last_mut() {
            if last.0 == at {
                last.1 = name.to_string();
                return;
            }
        }
        self.markers.push((at, name.to_string()));
    }

    /// Writes the binary format (docs/models/TRACES.md): the magic, the version (u32 LE), the
    /// number of markers (u32 LE), each marker as its access index (u64 LE), name length
    /// (u32 LE) and UTF-8 name, then the number of records (u64 LE) and the records (u64 LE:
    /// address in bits 0-56, bit 63 set for a store).
    pub fn write_binary(&self, mut out: impl Write) -> std::io::Result<()> {
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&(self.markers.len() as u32).to_le_bytes())?;
        for (at, name) in &self.markers {
            out.write_all(&at.to_le_bytes())?;
            out.write_all(&(name.len() as u32).to_le_bytes())?;
            out.write_all(name.as_bytes())?;
        }
        out.write_all(&(self.records.len() as u64).to_le_bytes())?;
        let mut buf = Vec::with_capacity(8 << 10);
        for chunk in self.records.chunks(1024) {
            buf.clear();
            for r in chunk {
                buf.extend_from_slice(&r.to_le_bytes());
            }
            out.write_all(&buf)?;
        }
        Ok(())
    }

    /// Reads the binary format. Counts are checked before anything is allocated for
    /// them: at most [`MAX_PHASES`] markers with names of at most [`MAX_TRACE_LINE`]
    /// bytes, at most [`MAX_TRACE_ACCESSES`] records, and the records are read as they
    /// come (a short file is an error, not an allocation of what its header claims).
    pub fn read_binary(mut input: impl Read, file: &str) -> Result<Trace, FieldError> {
        let err = |m: String| FieldError::new("workload.trace", m).in_file(file);
        let io = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                err(format!("truncated binary trace: {e}"))
            } else {
                at_trace(read_error(file, "trace", MAX_TRACE_FILE, e), file)
            }
        };
        let mut read = |n: usize| -> Result<Vec<u8>, FieldError> {
            let mut b = vec![0; n];
            input.read_exact(&mut b).map_err(io)?;
            Ok(b)
        };
        if read(8)?.as_slice() != MAGIC {
            return Err(err("not a tierscope binary trace (bad magic)".into()));
        }
        let u32_of = |b: Vec<u8>| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        let u64_of = |b: Vec<u8>| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let version = u32_of(read(4)?);
        if version != VERSION {
            return Err(err(format!(
                "binary trace version {version}, expected {VERSION}"
            )));
        }
        let nmarkers = u32_of(read(4)?);
        if nmarkers as usize > MAX_PHASES {
            return Err(err(format!(
                "{nmarkers} markers: more than the limit of {MAX_PHASES}"
            )));
        }
        let mut t = Trace::default();
        for _ in 0..nmarkers {
            let at = u64_of(read(8)?);
            let len = u32_of(read(4)?) as usize;
            if len > MAX_TRACE_LINE {
                return Err(err(format!(
                    "a marker name of {len} bytes: more than the limit of {MAX_TRACE_LINE}"
                )));
            }
            let name = String::from_utf8(read(len)?)
                .map_err(|_| err("a marker name is not UTF-8".into()))?;
            t.markers.push((at, name));
        }
        let n = u64_of(read(8)?);
        if n > MAX_TRACE_ACCESSES {
            return Err(err(format!(
                "{n} accesses: more than the limit of {MAX_TRACE_ACCESSES}"
            )));
        }
        let mut bytes = vec![];
        input.take(n * 8).read_to_end(&mut bytes).map_err(io)?;
        if bytes.len() as u64 != n * 8 {
            return Err(err(format!(
                "truncated binary trace: {} of {n} accesses",
                bytes.len() / 8
            )));
        }
        t.records = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if t.records.is_empty() {
            return Err(err("the trace has no access".into()));
        }
        if t.markers.windows(2).any(|w| w[0].0 > w[1].0)
            || t.markers.last().is_some_and(|m| m.0 > n)
        {
            return Err(err("markers out of order or past the last access".into()));
        }
        Ok(t)
    }

    /// The trace's touched address space: maximal runs of adjacent touched 2 MiB areas,
    /// as (start, end), ascending.
    pub fn runs(&self) -> Vec<(u64, u64)> {
        let mut areas: Vec<u64> = self.records.iter().map(|r| (r & ADDR) / AREA).collect();
        areas.sort_unstable();
        areas.dedup();
        let mut out: Vec<(u64, u64)> = vec![];
        for a in areas {
            match out.last_mut() {
                Some(last) if last.1 == a * AREA => last.1 = (a + 1) * AREA,
                _ => out.push((a * AREA, (a + 1) * AREA)),
            }
        }
        out
    }

    /// The workload the trace replays as: one region per run of touched areas (highest
    /// address first, so the engine's top-down layout keeps their order), one phase per
    /// marker segment lasting its accesses at `rate` per second. The phases' patterns are
    /// placeholders the replay does not use (the engine replays the records).
    pub fn spec(&self, rate: u64) -> WorkloadSpec {
        let runs = self.runs();
        let regions: Vec<RegionSpec> = runs
            .iter()
            .rev()
            .enumerate()
            .map(|(i, &(s, e))| RegionSpec {
                name: format!("trace{i}"),
                size: Size(e - s),
            })
            .collect();
        let n = self.records.len() as u64;
        let mut bounds: Vec<(u64, String)> = self.markers.clone();
        if bounds.first().is_none_or(|m| m.0 > 0) {
            bounds.insert(0, (0, "start".into()));
        }
        let phases = bounds
            .iter()
            .enumerate()
            .filter_map(|(i, (at, name))| {
                let end = bounds.get(i + 1).map_or(n, |b| b.0);
                let ns = (end.saturating_sub(*at) as u128 * u128::from(NS_PER_S)
                    / u128::from(rate.max(1))) as u64;
                (ns > 0).then(|| PhaseSpec {
                    name: name.clone(),
                    duration: Duration(ns),
                    patterns: vec![PatternSpec {
                        region: regions[0].name.clone(),
                        kind: PatternKind::Random,
                        density: Density::Uniform,
                        stride: Size(8),
                        weight: 1,
                        mode: AccessMode::Ro,
                    }],
                })
            })
            .collect();
        WorkloadSpec { regions, phases }
    }

    /// The records with addresses moved into a heap whose region `i` of [`Trace::spec`]
    /// starts at `region_starts[i]` (store bits kept).
    pub fn placed(&self, region_starts: &[u64]) -> Vec<u64> {
        let runs = self.runs();
        // Region i of the spec is run (len - 1 - i).
        let starts: Vec<(u64, u64)> = runs
            .iter()
            .enumerate()
            .map(|(k, &(s, _))| (s, region_starts[runs.len() - 1 - k]))
            .collect();
        self.records
            .iter()
            .map(|&r| {
                let a = r & ADDR;
                let k = starts.partition_point(|&(s, _)| s <= a) - 1;
                (starts[k].1 + (a - starts[k].0)) | (r & STORE)
            })
            .collect()
    }
}

/// How a stream of accesses spreads over 4 KiB pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageStats {
    pub accesses: u64,
    /// Distinct pages touched.
    pub pages: u64,
    /// The fewest pages that take 80 % of the accesses (the hottest first).
    pub pages_80: u64,
}

impl PageStats {
    /// Of the page numbers of every access (any order; sorted in place).
    pub fn of_pages(pages: &mut [u64]) -> PageStats {
        pages.sort_unstable();
        let mut counts: Vec<u64> = pages
            .chunk_by(|a, b| a == b)
            .map(|run| run.len() as u64)
            .collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let accesses = pages.len() as u64;
        // 80 % of the accesses, rounded up.
        let goal = (accesses * 4).div_ceil(5);
        let mut sum = 0;
        let pages_80 = counts
            .iter()
            .take_while(|&&c| {
                let before = sum;
                sum += c;
                before < goal
            })
            .count() as u64;
        PageStats {
            accesses,
            pages: counts.len() as u64,
            pages_80,
        }
    }
}

impl Trace {
    /// The page statistics of the accesses of phase `phase` (every phase of that name), or
    /// of the whole trace; None when no marker has that name.
    pub fn page_stats(&self, phase: Option<&str>) -> Option<PageStats> {
        let n = self.records.len() as u64;
        let ranges: Vec<(u64, u64)> = match phase {
            None => vec![(0, n)],
            Some(name) => self
                .markers
                .iter()
                .enumerate()
                .filter(|(_, m)| m.1 == name)
                .map(|(i, m)| (m.0, self.markers.get(i + 1).map_or(n, |x| x.0)))
                .collect(),
        };
        if ranges.is_empty() {
            return None;
        }
        let mut pages: Vec<u64> = ranges
            .iter()
            .flat_map(|&(a, b)| self.records[a as usize..b as usize].iter())
            .map(|r| (r & ADDR) >> 12)
            .collect();
        Some(PageStats::of_pages(&mut pages))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LACKEY: &str = "==123== Lackey, an example Valgrind tool\n\
I  04000000,3\n L 7ff000010,8\n S 7ff000018,4\n# phase compute\n M 0601000,8\n\
==123== \n L 0601008,1\n";

    #[test]
    fn lackey_lines_become_loads_and_stores_with_markers() {
        let t = Trace::read_lackey(
            LACKEY.as_bytes(),
            "t.txt",
            LackeyOptions {
                instructions: false,
            },
        )
        .unwrap();
        assert_eq!(
            t.records,
            vec![
                0x7ff000010,
                0x7ff000018 | STORE,
                0x601000,
                0x601000 | STORE,
                0x601008
            ]
        );
        assert_eq!(t.markers, vec![(2, "compute".to_string())]);
        let with_i = Trace::read_lackey(
            LACKEY.as_bytes(),
            "t.txt",
            LackeyOptions { instructions: true },
        )
        .unwrap();
        assert_eq!(with_i.records[0], 0x4000000);
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        for (text, says) in [
            (" L zz,8\n", "not a hexadecimal"),
            (" X 10,8\n", "unknown access kind"),
            (" L 10\n", "expected `K addr,size`"),
            (" L 10,big\n", "not an access size"),
        ] {
            let e = Trace::read_lackey(
                format!(" L 10,8\n{text}").as_bytes(),
                "t.txt",
                LackeyOptions {
                    instructions: false,
                },
            )
            .unwrap_err();
            assert_eq!((e.file.as_deref(), e.line), (Some("t.txt"), Some(2)), "{e}");
            assert!(e.message.contains(says), "{e}");
        }
        assert!(Trace::read_lackey(
            "==1== x\n".as_bytes(),
            "t",
            LackeyOptions {
                instructions: false
            }
        )
        .is_err());
    }

    #[test]
    fn binary_round_trip_and_refusals() {
        let t = Trace::read_lackey(
            LACKEY.as_bytes(),
            "t.txt",
            LackeyOptions {
                instructions: false,
            },
        )
        .unwrap();
        let mut b = vec![];
        t.write_binary(&mut b).unwrap();
        assert_eq!(b.len(), 8 + 4 + 4 + (8 + 4 + 7) + 8 + 8 * t.records.len());
        assert_eq!(Trace::read_binary(b.as_slice(), "t.bin").unwrap(), t);
        let e = Trace::read_binary(&b[..b.len() - 3], "t.bin").unwrap_err();
        assert!(e.message.contains("truncated"), "{e}");
        let e = Trace::read_binary(&b"NOTTRACE"[..], "t.bin").unwrap_err();
        assert!(e.message.contains("bad magic"), "{e}");
    }

    #[test]
    fn page_stats_count_the_hottest_pages_to_80_percent() {
        // Page 1: 6 accesses, page 2: 2, pages 3 and 4: 1 each (10 in all).
        let mut pages = vec![1, 2, 1, 1, 3, 1, 2, 1, 4, 1];
        let s = PageStats::of_pages(&mut pages);
        assert_eq!((s.accesses, s.pages, s.pages_80), (10, 4, 2));
        let t = Trace {
            records: vec![0x1000, 0x1008, 0x2000 | STORE, 0x3000],
            markers: vec![(0, "a".into()), (2, "b".into())],
        };
        let b = t.page_stats(Some("b")).unwrap();
        assert_eq!((b.accesses, b.pages, b.pages_80), (2, 2, 2));
        assert_eq!(t.page_stats(Some("a")).unwrap().pages, 1);
        assert_eq!(t.page_stats(None).unwrap().accesses, 4);
        assert!(t.page_stats(Some("c")).is_none());
    }

    #[test]
    fn placement_keeps_offsets_within_each_run_of_areas() {
        let t = Trace {
            records: vec![0x601000, 0x7ff000018 | STORE, 0x800000 + 5, 0x601000],
            markers: vec![],
        };
        // Areas 0x600000 and 0x800000 are adjacent: one run; the stack area another.
        assert_eq!(
            t.runs(),
            vec![(0x600000, 0xa00000), (0x7ff000000, 0x7ff200000)]
        );
        let spec = t.spec(1_000_000);
        assert_eq!(spec.regions.len(), 2);
        assert_eq!(spec.regions[0].size, Size(2 << 20)); // the highest run first
        assert_eq!(spec.phases.len(), 1);
        assert_eq!(spec.phases[0].duration, Duration(4_000)); // 4 accesses at 1 M/s
                                                              // Region 0 (the stack run) at 0x1000_0000, region 1 at 0x2000_0000.
        let placed = t.placed(&[0x1000_0000, 0x2000_0000]);
        assert_eq!(
            placed,
            vec![0x2000_1000, 0x1000_0018 | STORE, 0x2020_0005, 0x2000_1000]
        );
    }

    #[test]
    fn malformed_traces_are_errors_not_panics_or_huge_allocations() {
        let opts = LackeyOptions {
            instructions: false,
        };
        // A first character of several bytes was split inside it (a panic).
        let e = Trace::read_lackey(" L 10,8\n\u{e9} 10,8\n".as_bytes(), "t", opts).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        // An endless line (a device) stops at the line limit.
        let endless = std::io::BufReader::new(std::io::repeat(b'L'));
        let e = Trace::read_lackey(endless, "/dev/zero", opts).unwrap_err();
        assert!(e.message.contains("longer than 4096 bytes"), "{e}");
        assert_eq!(e.field, "workload.trace");
        // Headers claiming 2^64 - 1 records, 4 G markers or a 4 GiB marker name: refused
        // before anything is allocated for them.
        let header = |markers: u32, name_len: u32, records: u64| {
            let mut b = MAGIC.to_vec();
            b.extend(VERSION.to_le_bytes());
            b.extend(markers.to_le_bytes());
            if markers > 0 {
                b.extend(0u64.to_le_bytes());
                b.extend(name_len.to_le_bytes());
            }
            b.extend(records.to_le_bytes());
            b
        };
        for (bytes, says) in [
            (header(0, 0, u64::MAX), "more than the limit"),
            (header(0, 0, 1 << 27), "truncated"),
            (header(u32::MAX, 0, 1), "more than the limit"),
            (header(1, u32::MAX, 1), "more than the limit"),
        ] {
            let e = Trace::read_binary(bytes.as_slice(), "t.bin").unwrap_err();
            assert!(e.message.contains(says), "{e}");
        }
    }
}
