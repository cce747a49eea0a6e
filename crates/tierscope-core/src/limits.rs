//! The limits every input is checked against (docs/reference/EXPERIMENTS.md, "Limits"), and reading
//! files within them.
//!
//! Each limit is there so that what it bounds cannot overflow the arithmetic that uses it,
//! exhaust the host's memory or run without end; where quantities add or multiply, the
//! comment says why the result stays within `u64`.

use crate::error::FieldError;
use crate::units::NS_PER_S;
use std::io::{BufRead, Read};
use std::path::Path;

/// Largest heap: all regions of a workload together, each rounded up to 2 MiB (64 PiB, the
/// user address space of 5-level paging). At most [`MAX_REGIONS`] regions of at most this
/// each: their sum, at most 2^20 x (2^56 + 2^21) < 2^77, is added in `u128`, or checked.
pub const MAX_HEAP: u64 = 1 << 56;
/// Most regions of a workload.
pub const MAX_REGIONS: usize = 1 << 20;
/// Most phases of a workload.
pub const MAX_PHASES: usize = 1 << 20;
/// Most patterns of all the phases of a workload together.
pub const MAX_PATTERNS: usize = 1 << 20;
/// Longest duration: an experiment's `duration` and `warmup`, a phase, and one pass over
/// all phases (30 days). With at most [`MAX_PHASES`] phases, their sum is added checked;
/// 30 days are 2.6e15 ns, far below `u64::MAX` (1.8e19).
pub const MAX_DURATION_NS: u64 = 30 * 24 * 3600 * NS_PER_S;
/// Highest access rate of a workload thread (10 G/s). With [`MAX_DURATION_NS`], a
/// thread's accesses, at most 1e10 x 2.6e6 s = 2.6e16, stay below `u64::MAX`.
pub const MAX_RATE: u64 = 10_000_000_000;
/// Largest experiment, sweep or MASIM file read (64 MiB), checked on the file's metadata
/// and again while reading (a device or a pipe has no size).
pub const MAX_CONFIG_FILE: u64 = 64 << 20;
/// Largest trace file read (lackey, tierscope's binary format, cori-sim's format): 16 GiB.
pub const MAX_TRACE_FILE: u64 = 16 << 30;
/// Longest line of a text trace (lackey, cori-sim): 4 KiB.
pub const MAX_TRACE_LINE: usize = 4096;
/// Most accesses of a trace (2^28: 2 GiB of records in memory, and a placed copy of them
/// in each engine replaying it).
pub const MAX_TRACE_ACCESSES: u64 = 1 << 28;
/// Most seeds of a sweep, and most runs of a sweep (axes x seeds x bases, multiplied
/// checked).
pub const MAX_SWEEP_RUNS: usize = 100_000;
/// Most per-window data (snapshots' regions, truth intervals, the window series) one
/// monitor's run keeps for its outputs: 1 GiB. A run reaching it stops with an error
/// naming the simulated time reached (a long run's memory grows with its windows).
pub const MAX_KEPT_BYTES: u64 = 1 << 30;
/// Most windows of a tiering policy's run (`duration` / `[tiering] window`): each keeps
/// its per-tier row for the outputs.
pub const MAX_POLICY_WINDOWS: u64 = 1_000_000;
/// Share of the host's available memory (`MemAvailable` in /proc/meminfo) the exact
/// engines of a run may take together, in quarters: 3/4, the rest left to the outputs
/// and to other processes.
pub const HOST_MEMORY_QUARTERS: u64 = 3;

/// The host's available memory in bytes (`MemAvailable` of /proc/meminfo), or None where
/// it cannot be read.
pub fn host_available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line
        .trim_start_matches("MemAvailable:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// How much of `available` bytes of host memory a run may use (three quarters).
pub fn usable_memory(available: u64) -> u64 {
    (available / 4).saturating_mul(HOST_MEMORY_QUARTERS)
}

/// Bytes in a short human form (`1.5 GiB`), for messages.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn file_error(file: &str, message: String) -> FieldError {
    FieldError::new("", message).in_file(file)
}

/// Opens `path` for reading at most `max` bytes: refused when its metadata says it is
/// larger. Devices and pipes report no size; [`Limited`] stops them while reading.
pub fn open_limited(
    path: &Path,
    max: u64,
    what: &str,
) -> Result<Limited<std::fs::File>, FieldError> {
    let file = path.display().to_string();
    let f = std::fs::File::open(path)
        .map_err(|e| file_error(&file, format!("cannot read the {what}: {e}")))?;
    let meta = f
        .metadata()
        .map_err(|e| file_error(&file, format!("cannot read the {what}: {e}")))?;
    if meta.is_dir() {
        return Err(file_error(
            &file,
            format!("cannot read the {what}: it is a directory"),
        ));
    }
    if meta.len() > max {
        return Err(too_large(&file, what, max));
    }
    Ok(Limited {
        inner: f,
        left: max,
        max,
        file,
        what: what.to_string(),
    })
}

fn too_large(file: &str, what: &str, max: u64) -> FieldError {
    file_error(
        file,
        format!(
            "the {what} is larger than {} (the limit: docs/reference/EXPERIMENTS.md, \"Limits\")",
            human_bytes(max)
        ),
    )
}

/// Reads the text file `path` of at most `max` bytes (UTF-8).
pub fn read_text_limited(path: &Path, max: u64, what: &str) -> Result<String, FieldError> {
    let mut r = open_limited(path, max, what)?;
    let mut bytes = vec![];
    r.read_to_end(&mut bytes).map_err(|e| r.error_of(e))?;
    String::from_utf8(bytes).map_err(|e| {
        file_error(
            &r.file,
            format!("cannot read the {what}: not UTF-8 text ({e})"),
        )
    })
}

/// A reader that fails, with [`Limited::error_of`]'s message, once more than its limit
/// has been read.
pub struct Limited<R> {
    inner: R,
    left: u64,
    max: u64,
    file: String,
    what: String,
}

/// The error a [`Limited`] reader returns past its limit.
#[derive(Debug)]
struct OverLimit;

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("over the size limit")
    }
}

impl std::error::Error for OverLimit {}

impl<R> Limited<R> {
    /// A limited reader over any input (`file` and `what` name it in errors).
    pub fn new(inner: R, max: u64, file: &str, what: &str) -> Self {
        Limited {
            inner,
            left: max,
            max,
            file: file.to_string(),
            what: what.to_string(),
        }
    }

    /// The one-line error for an I/O error of this reader: over the limit, or the
    /// reason.
    pub fn error_of(&self, e: std::io::Error) -> FieldError {
        read_error(&self.file, &self.what, self.max, e)
    }

    /// The file it reads, as named in errors.
    pub fn file(&self) -> &str {
        &self.file
    }
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            // One byte more tells a file of exactly the limit from a longer one.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::Error::other(OverLimit)),
            };
        }
        let n = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let got = self.inner.read(&mut buf[..n])?;
        self.left -= got as u64;
        Ok(got)
    }
}

/// The one-line error for an I/O error `e` met reading `file` (a `what` of at most `max`
/// bytes, read through a [`Limited`] reader): over the limit, or the reason.
pub fn read_error(file: &str, what: &str, max: u64, e: std::io::Error) -> FieldError {
    if e.get_ref().is_some_and(|inner| inner.is::<OverLimit>()) {
        too_large(file, what, max)
    } else {
        file_error(file, format!("cannot read the {what}: {e}"))
    }
}

/// Lines of a text input, each at most `max_line` bytes, with their 1-based numbers;
/// errors name the file and the line.
pub struct BoundedLines<R> {
    input: R,
    max_line: usize,
    line: usize,
    buf: Vec<u8>,
}

impl<R: BufRead> BoundedLines<R> {
    pub fn new(input: R, max_line: usize) -> Self {
        BoundedLines {
            input,
            max_line,
            line: 0,
            buf: vec![],
        }
    }

    /// The next line without its `\n` (and `\r`), or None at the end. `on_error` turns an
    /// I/O error into the caller's message.
    pub fn next_line(
        &mut self,
        file: &str,
        on_error: impl Fn(std::io::Error) -> FieldError,
    ) -> Result<Option<(usize, &str)>, FieldError> {
        self.buf.clear();
        self.line += 1;
        let limit = self.max_line as u64 + 2;
        let n = (&mut self.input)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(&on_error)?;
        if n == 0 {
            return Ok(None);
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        }
        if self.buf.len() > self.max_line {
            return Err(FieldError::new(
                "",
                format!("the line is longer than {} bytes", self.max_line),
            )
            .in_file(file)
            .at_line(Some(self.line)));
        }
        let text = std::str::from_utf8(&self.buf).map_err(|_| {
            FieldError::new("", "the line is not UTF-8 text")
                .in_file(file)
                .at_line(Some(self.line))
        })?;
        Ok(Some((self.line, text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limited_reads_stop_past_the_limit() {
        let mut r = Limited::new(std::io::repeat(0), 1000, "/dev/zero", "trace");
        let mut out = vec![];
        let e = r.read_to_end(&mut out).unwrap_err();
        assert_eq!(out.len(), 1000);
        let e = r.error_of(e);
        assert_eq!(e.file.as_deref(), Some("/dev/zero"));
        assert!(e.message.contains("larger than 1000 B"), "{e}");
        // Exactly the limit is fine.
        let mut r = Limited::new(&[1u8; 1000][..], 1000, "f", "trace");
        assert_eq!(r.read_to_end(&mut out).unwrap(), 1000);
    }

    #[test]
    fn dev_zero_is_refused_not_read_forever() {
        let path = Path::new("/dev/zero");
        if !path.exists() {
            return;
        }
        let e = read_text_limited(path, 1 << 20, "MASIM config").unwrap_err();
        assert!(e.message.contains("larger than 1.0 MiB"), "{e}");
        assert_eq!(e.file.as_deref(), Some("/dev/zero"));
    }

    #[test]
    fn lines_are_bounded() {
        let text = "short\r\nthis line is long\nend";
        let mut lines = BoundedLines::new(text.as_bytes(), 10);
        let io = |e: std::io::Error| FieldError::new("", e.to_string());
        assert_eq!(lines.next_line("f", io).unwrap(), Some((1, "short")));
        let e = lines.next_line("f", io).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("longer than 10 bytes"), "{e}");
        // An endless line stops at the bound.
        let mut lines = BoundedLines::new(std::io::BufReader::new(std::io::repeat(b'x')), 64);
        assert!(lines.next_line("f", io).is_err());
    }

    #[test]
    fn memory_helpers() {
        assert_eq!(usable_memory(4 << 30), 3 << 30);
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(12), "12 B");
        if Path::new("/proc/meminfo").exists() {
            assert!(host_available_memory().is_some_and(|m| m > 0));
        }
    }
}
