//! Traces in cori-sim's format (`sim/traffic.py`, `TrafficGen.parse_pin_trace`): one
//! address per line, as `traces/memtrace.cpp` writes them (`fprintf(trace, "%p\n", addr)`:
//! `0x7f...`). cori-sim takes the line's first space-separated field and parses it with
//! `int(x, 0)`; the page is the address rounded down to 4 KiB
//! (`paddr - (paddr % 4096)`, the same as `address >> 12` for the non-negative addresses we
//! accept), and pages get dense ids in first-touch order (`page_map`), which matter: the
//! initial placement interleaves them and the LRU list starts in their order.
//!
//! Where we differ, each rejected with file:line instead of a Python traceback:
//! - leading whitespace is skipped (cori-sim's `line.split(' ')` makes a line starting with
//!   a space an empty first field and crashes);
//! - blank lines are errors, as in cori-sim (`int('\n', 0)` raises);
//! - the grammar is Python 3's `int(x, 0)` (underscores between digits), although cori-sim
//!   is Python 2 (no underscores). A decimal with a leading zero (`017`) is rejected:
//!   Python 2 reads it as octal, Python 3 refuses it, so either reading would surprise;
//! - negative numbers (Python accepts them) and values above 2^64 - 1 are not addresses;
//! - glibc's `%p` of a null pointer, `(nil)`, is rejected like any other non-number.

use std::collections::HashMap;
use std::path::Path;
use tierscope_core::limits::{
    open_limited, read_error, BoundedLines, MAX_TRACE_ACCESSES, MAX_TRACE_FILE, MAX_TRACE_LINE,
};
use tierscope_core::FieldError;

/// cori-sim's page: 4 KiB (`traffic.py`: `paddr % 4096`).
pub const PAGE_SHIFT: u32 = 12;

/// A trace: the page of every request, as dense ids in first-touch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// Dense page id of each request, in trace order.
    ids: Vec<u32>,
    /// Page number (`address >> 12`) of each dense id.
    page_numbers: Vec<u64>,
}

impl Trace {
    /// Reads a trace file (at most [`MAX_TRACE_FILE`] bytes, lines of at most
    /// [`MAX_TRACE_LINE`] bytes, at most [`MAX_TRACE_ACCESSES`] requests); errors carry
    /// the file and the 1-based line. The file is read as it comes, not held whole.
    pub fn from_file(path: &Path) -> Result<Trace, FieldError> {
        let file = path.display().to_string();
        let input = open_limited(path, MAX_TRACE_FILE, "trace")?;
        Trace::read(std::io::BufReader::new(input), &file).map_err(|e| e.in_file(file))
    }

    /// Parses a trace's text; errors carry the 1-based line.
    pub fn parse(text: &str) -> Result<Trace, FieldError> {
        Trace::read(text.as_bytes(), "").map_err(|e| FieldError { file: None, ..e })
    }

    /// Reads a trace line by line (`file` names it in errors). As cori-sim's
    /// `readlines()`, a final newline ends the last line rather than starting an empty one.
    fn read(input: impl std::io::BufRead, file: &str) -> Result<Trace, FieldError> {
        let mut builder = Builder::default();
        let mut lines = BoundedLines::new(input, MAX_TRACE_LINE);
        let io = |e| read_error(file, "trace", MAX_TRACE_FILE, e);
        while let Some((n, line)) = lines.next_line(file, io)? {
            let at = |message: String| FieldError::new("address", message).at_line(Some(n));
            // cori-sim's first field: up to the first space (`line.split(' ')[0]`).
            let line = line.trim_start();
            let field = line.split(' ').next().unwrap_or("");
            let address = parse_address(field).map_err(at)?;
            if builder.ids.len() as u64 >= MAX_TRACE_ACCESSES {
                return Err(at(format!(
                    "more than {MAX_TRACE_ACCESSES} requests (the limit of a trace)"
                )));
            }
            builder.push(address).map_err(at)?;
        }
        if builder.ids.is_empty() {
            return Err(FieldError::new("", "the trace has no addresses"));
        }
        Ok(builder.finish())
    }

    /// A trace of the given addresses (tests, generated traces).
    pub fn from_addresses(addresses: impl IntoIterator<Item = u64>) -> Result<Trace, FieldError> {
        let mut builder = Builder::default();
        for a in addresses {
            builder.push(a).map_err(|m| FieldError::new("address", m))?;
        }
        let trace = builder.finish();
        if trace.ids.is_empty() {
            return Err(FieldError::new("", "the trace has no addresses"));
        }
        Ok(trace)
    }

    /// Dense page id of each request.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Page number (`address >> 12`) of each dense id.
    pub fn page_numbers(&self) -> &[u64] {
        &self.page_numbers
    }

    /// Requests in the trace (never zero).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Always false: a trace has at least one request. Here because clippy asks for it
    /// beside `len`.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Distinct pages.
    pub fn num_pages(&self) -> usize {
        self.page_numbers.len()
    }
}

#[derive(Default)]
struct Builder {
    ids: Vec<u32>,
    page_numbers: Vec<u64>,
    dense: HashMap<u64, u32>,
}

impl Builder {
    fn push(&mut self, address: u64) -> Result<(), String> {
        let page = address >> PAGE_SHIFT;
        let next = self.page_numbers.len();
        let id = match self.dense.get(&page) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(next)
                    .map_err(|_| "more than 2^32 distinct pages in one trace".to_string())?;
                self.dense.insert(page, id);
                self.page_numbers.push(page);
                id
            }
        };
        self.ids.push(id);
        Ok(())
    }

    fn finish(self) -> Trace {
        Trace {
            ids: self.ids,
            page_numbers: self.page_numbers,
        }
    }
}

/// One address as Python 3's `int(x, 0)` reads it: surrounding whitespace ignored, an
/// optional `+`, `0x`/`0o`/`0b` prefixes in either case, single underscores between digits
/// (and after a prefix), decimal without leading zeros unless all zeros.
pub fn parse_address(field: &str) -> Result<u64, String> {
    let expected = || {
        format!(
            "expected an address (decimal, 0x hex, 0o octal or 0b binary, as Python's \
             int(x, 0) reads it), found `{}`",
            field.escape_debug()
        )
    };
    let s = field.trim();
    if s.is_empty() {
        return Err("expected an address, found a blank line".into());
    }
    let s = match s.as_bytes()[0] {
        b'+' => &s[1..],
        b'-' => return Err(format!("an address cannot be negative, found `{s}`")),
        _ => s,
    };
    let bytes = s.as_bytes();
    let (radix, digits, after_prefix) = match bytes {
        [b'0', b'x' | b'X', ..] => (16, &s[2..], true),
        [b'0', b'o' | b'O', ..] => (8, &s[2..], true),
        [b'0', b'b' | b'B', ..] => (2, &s[2..], true),
        _ => (10, s, false),
    };
    // Python allows one underscore before each digit after a prefix (`0x_1f`), and
    // between digits otherwise; never two in a row, never at the end.
    let mut value: u64 = 0;
    let mut seen_digit = false;
    let mut underscore = false;
    for c in digits.chars() {
        if c == '_' {
            if underscore || (!seen_digit && !after_prefix) {
                return Err(expected());
            }
            underscore = true;
            continue;
        }
        let d = c.to_digit(radix).ok_or_else(expected)?;
        underscore = false;
        seen_digit = true;
        value = value
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or_else(|| format!("`{s}` is larger than 2^64 - 1, not an address"))?;
    }
    if !seen_digit || underscore {
        return Err(expected());
    }
    if radix == 10 && value != 0 && digits.starts_with('0') {
        return Err(format!(
            "`{s}`: a decimal with a leading zero is octal in Python 2 (cori-sim) and an \
             error in Python 3; write 0o{} for octal or drop the zeros",
            digits.trim_start_matches(['0', '_'])
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_pythons_int_base_0() {
        // Each value worked out from Python's grammar by hand.
        let ok = [
            ("0x7ffd1000", 0x7ffd_1000),
            ("0X1F", 31),
            ("  0x1f\t", 31),
            ("0x_1f", 31),
            ("0x1_f", 31),
            ("0o17", 15),
            ("0O17", 15),
            ("0b101", 5),
            ("0B1_0_1", 5),
            ("4096", 4096),
            ("1_000", 1000),
            ("+12", 12),
            ("0", 0),
            ("00", 0),
            ("0_0", 0),
            ("18446744073709551615", u64::MAX),
            ("0xffffffffffffffff", u64::MAX),
        ];
        for (text, want) in ok {
            assert_eq!(parse_address(text), Ok(want), "{text}");
        }
        let bad = [
            "",
            "  ",
            "-16",
            "017",
            "1__0",
            "_1",
            "1_",
            "0x",
            "0x1f_",
            "0x__1",
            "0b2",
            "0o8",
            "12a",
            "(nil)",
            "0x10000000000000000",
            "18446744073709551616",
            "٣",
        ];
        for text in bad {
            assert!(parse_address(text).is_err(), "{text} should be rejected");
        }
    }

    #[test]
    fn pages_are_dense_in_first_touch_order() {
        // Pages 0x5, 0x1, 0x5, 0x2: ids 0, 1, 0, 2; the extra field after a space is
        // ignored as cori-sim's `split(' ')[0]` ignores it, and the last line has no newline.
        let t = Trace::parse("0x5000\n0x1fff R\n0x5abc\n 0x2000").unwrap();
        assert_eq!(t.ids(), &[0, 1, 0, 2]);
        assert_eq!(t.page_numbers(), &[5, 1, 2]);
        assert_eq!(t.len(), 4);
        assert_eq!(t.num_pages(), 3);
    }

    #[test]
    fn errors_name_the_file_the_line_and_what_was_expected() {
        let dir = std::env::temp_dir().join(format!("tierscope-cori-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            (
                "bad.txt",
                "0x1000\n0x2000\nzz\n",
                ":3: address: expected an address",
            ),
            (
                "blank.txt",
                "0x1000\n\n0x2000\n",
                ":2: address: expected an address, found a blank line",
            ),
            (
                "neg.txt",
                "-4096\n",
                ":1: address: an address cannot be negative",
            ),
            (
                "octal.txt",
                "1\n2\n3\n017\n",
                ":4: address: `017`: a decimal with a leading zero",
            ),
            ("empty.txt", "", ": the trace has no addresses"),
        ];
        for (name, text, want) in cases {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            let err = Trace::from_file(&path).unwrap_err();
            assert_eq!(
                err.file.as_deref(),
                Some(path.display().to_string().as_str())
            );
            let shown = err.to_string();
            assert!(
                shown.starts_with(&path.display().to_string()) && shown.contains(want),
                "{shown} should contain {want}"
            );
        }
        let missing = Trace::from_file(&dir.join("absent.txt")).unwrap_err();
        assert!(missing.to_string().contains("absent.txt: cannot read"));
        // A device is read within the limits, not until the host's memory is gone.
        if Path::new("/dev/zero").exists() {
            let e = Trace::from_file(Path::new("/dev/zero")).unwrap_err();
            assert!(e.to_string().contains("longer than 4096 bytes"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
