//! damo's rules for turning text into numbers (`_damo_fmt_str.py` of damo 3.4.3:
//! `text_to_nr`, `text_to_bytes`, `text_to_ns` / `_us` / `_ms`, `text_to_percent`,
//! `text_to_bp`, `text_to_bool`), so that a damo line or JSON scheme means here what it
//! means to damo: `200MB` is 200 MiB, a bare `--damos_age` is microseconds, a bare
//! `--damos_quota_interval` milliseconds, `min` / `max` the ends of the range.

/// damo's `ulong_max` (64-bit hosts): what `max` stands for.
pub const ULONG_MAX: i128 = u64::MAX as i128;

/// A number as Python holds it: an exact integer or a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    pub fn f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    /// `self * k` as Python computes it (an int stays exact).
    fn times(self, k: i128) -> Num {
        match self {
            Num::Int(i) => Num::Int(i.saturating_mul(k)),
            Num::Float(f) => Num::Float(f * k as f64),
        }
    }

    /// Python's true division: always a float.
    pub fn over(self, k: f64) -> Num {
        Num::Float(self.f64() / k)
    }

    /// Python's `int(x)` (towards zero), saturating at the ends of i128.
    pub fn trunc(self) -> i128 {
        match self {
            Num::Int(i) => i,
            Num::Float(f) => f.trunc() as i128,
        }
    }

    /// The number as a u64 (`'%d' % min(x, ulong_max)`, as damo writes it to the
    /// kernel), or an error for a negative or non-finite one.
    pub fn ulong(self, what: &str) -> Result<u64, String> {
        if let Num::Float(f) = self {
            if !f.is_finite() {
                return Err(format!("`{f}` is not {what}"));
            }
        }
        let i = self.trunc();
        if i < 0 {
            return Err(format!("{i} is not {what} (negative)"));
        }
        Ok(i.min(ULONG_MAX) as u64)
    }
}

/// Python's `int(text)` then `float(text)`: surrounding blanks allowed, commas removed.
pub fn text_to_nr(text: &str) -> Result<Num, String> {
    if text == "max" {
        return Ok(Num::Int(ULONG_MAX));
    }
    let t: String = text.chars().filter(|&c| c != ',').collect();
    let t = t.trim();
    if let Ok(i) = t.parse::<i128>() {
        return Ok(Num::Int(i));
    }
    match t.parse::<f64>() {
        // Python's float() reads "inf" and "nan" too; they are no use to a scheme.
        Ok(f) if f.is_finite() => Ok(Num::Float(f)),
        _ => Err(format!("`{text}` is not a number")),
    }
}

/// damo's `try_common_input`: `min`, `max`, or a plain number.
fn common(text: &str, min: Num, max: Num) -> Option<Num> {
    match text {
        "min" => Some(min),
        "max" => Some(max),
        _ => text_to_nr(text).ok(),
    }
}

const ZERO: Num = Num::Int(0);
const MAX: Num = Num::Int(ULONG_MAX);

fn byte_unit(u: &str) -> Option<i128> {
    Some(match u {
        "B" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        "T" | "TB" | "TiB" => 1 << 40,
        "P" | "PB" | "PiB" => 1 << 50,
        "E" | "EB" | "EiB" => 1 << 60,
        _ => return None,
    })
}

/// Bytes: a number, `min` / `max`, or a number with a binary unit (`K`, `KB` and `KiB`
/// are all 1024).
pub fn text_to_bytes(text: &str) -> Result<u64, String> {
    if let Some(n) = common(text, ZERO, MAX) {
        return n.ulong("a size");
    }
    let bad = || format!("`{text}` is not a size (damo's units: B, K, KB, KiB, M, ... E)");
    let n = text.len();
    let (number, unit) = [3, 2, 1]
        .into_iter()
        .filter(|&k| n > k || (k == 1 && n >= 1))
        .find_map(|k| {
            let (num, unit) = text.split_at_checked(n - k)?;
            byte_unit(unit).map(|u| (num, u))
        })
        .ok_or_else(bad)?;
    let number = text_to_nr(number).map_err(|_| bad())?;
    number.times(unit).ulong("a size")
}

fn ns_unit(u: &str) -> Option<i128> {
    Some(match u {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return None,
    })
}

/// Nanoseconds: a number (ns), `min` / `max`, a number with a unit (`ns`, `us`, `ms`,
/// `s`, `m`, `h`, `d`), or several such separated by blanks (`1 m 30 s`).
pub fn text_to_ns(text: &str) -> Result<Num, String> {
    if let Some(n) = common(text, ZERO, MAX) {
        return Ok(n);
    }
    let bad = || format!("`{text}` is not a time (e.g. 5s, 100ms, 1 m 30 s)");
    let fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() > 1 {
        let mut sum = Num::Int(0);
        for pair in fields.chunks(2) {
            let part = text_to_ns(&pair.concat())?;
            sum = match (sum, part) {
                (Num::Int(a), Num::Int(b)) => Num::Int(a.saturating_add(b)),
                (a, b) => Num::Float(a.f64() + b.f64()),
            };
        }
        return Ok(sum);
    }
    let n = text.len();
    let last2 = text.get(n.saturating_sub(2)..).unwrap_or("");
    let last1 = text.get(n.saturating_sub(1)..).unwrap_or("");
    if ns_unit(last2).is_none() && ns_unit(last1).is_none() {
        return text_to_nr(text).map_err(|_| bad());
    }
    let (number, unit) = if ["ns", "us", "ms"].contains(&last2) {
        (&text[..n - 2], last2)
    } else {
        (&text[..n - 1], last1)
    };
    let number = text_to_nr(number).map_err(|_| bad())?;
    Ok(number.times(ns_unit(unit).ok_or_else(bad)?))
}

/// Microseconds: a plain number is microseconds; with a unit, a time.
pub fn text_to_us(text: &str) -> Result<Num, String> {
    if let Some(n) = common(text, ZERO, MAX) {
        return Ok(n);
    }
    Ok(text_to_ns(text)?.over(1e3))
}

/// Milliseconds: a plain number is milliseconds; with a unit, a time.
pub fn text_to_ms(text: &str) -> Result<Num, String> {
    if let Some(n) = common(text, ZERO, MAX) {
        return Ok(n);
    }
    Ok(text_to_us(text)?.over(1e3))
}

/// A ratio: a plain number, or a percentage (`5%`).
fn text_to_ratio(text: &str) -> Result<Num, String> {
    if let Some(n) = common(text, Num::Float(0.0), MAX) {
        return Ok(n);
    }
    match text.strip_suffix('%') {
        Some(p) => Ok(text_to_nr(p)?.over(100.0)),
        None => text_to_nr(text),
    }
}

fn scaled(r: Num, k: i128) -> Num {
    r.times(k)
}

/// Percent: a plain number is percent (`5` and `5%` are the same).
pub fn text_to_percent(text: &str) -> Result<Num, String> {
    if let Some(n) = common(text, ZERO, MAX) {
        return Ok(n);
    }
    text_to_ratio(text)
        .map(|r| scaled(r, 100))
        .map_err(|_| format!("`{text}` is not a percentage"))
}

/// Basis points: a plain number is basis points; `99.7%` is 9970.
pub fn text_to_bp(text: &str) -> Result<Num, String> {
    if let Some(n) = common(text, ZERO, MAX) {
        return Ok(n);
    }
    text_to_ratio(text)
        .map(|r| scaled(r, 10_000))
        .map_err(|_| format!("`{text}` is not a goal target (basis points, or a %)"))
}

/// Permil: a plain number is permil; `50%` is 500.
pub fn text_to_permil(text: &str) -> Result<Num, String> {
    if let Some(n) = common(text, ZERO, MAX) {
        return Ok(n);
    }
    text_to_ratio(text)
        .map(|r| scaled(r, 1_000))
        .map_err(|_| format!("`{text}` is not a permil value"))
}

/// `y`, `yes`, `true` or `n`, `no`, `false`, in any case.
pub fn text_to_bool(text: &str) -> Result<bool, String> {
    match text.to_lowercase().as_str() {
        "y" | "yes" | "true" => Ok(true),
        "n" | "no" | "false" => Ok(false),
        _ => Err(format!("`{text}` is not y, yes, true, n, no or false")),
    }
}

/// `"N unit"` (damo's `text_to_nr_unit`): `3 samples`, `2 aggr_intervals`.
pub fn text_to_nr_unit(text: &str) -> Option<(Num, &str)> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    match fields[..] {
        [n, unit] => text_to_nr(n).ok().map(|n| (n, unit)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_damo_reads_them() {
        assert_eq!(text_to_bytes("200MB"), Ok(200 << 20));
        assert_eq!(text_to_bytes("4K"), Ok(4096));
        assert_eq!(text_to_bytes("4.000 KiB"), Ok(4096));
        assert_eq!(text_to_bytes("1.5G"), Ok(3 << 29));
        assert_eq!(text_to_bytes("max"), Ok(u64::MAX));
        assert_eq!(text_to_bytes("1,024"), Ok(1024));
        assert!(text_to_bytes("lots").is_err());
        assert!(text_to_bytes("-4K").is_err());
        assert_eq!(text_to_us("5s"), Ok(Num::Float(5e6)));
        assert_eq!(text_to_us("1000000"), Ok(Num::Int(1_000_000)));
        assert_eq!(text_to_us("1 m 30 s"), Ok(Num::Float(9e7)));
        assert_eq!(text_to_us("5 s"), Ok(Num::Float(5e6)));
        assert_eq!(text_to_ms("1000"), Ok(Num::Int(1000)));
        assert_eq!(text_to_ms("1s"), Ok(Num::Float(1000.0)));
        assert!(text_to_us("3 aggr_intervals").is_err());
        assert_eq!(text_to_percent("5%").map(Num::f64), Ok(5.0));
        assert_eq!(text_to_percent("5").map(Num::f64), Ok(5.0));
        assert_eq!(
            text_to_percent("18,446,744,073,709,551,615 %").map(Num::f64),
            Ok(u64::MAX as f64)
        );
        assert_eq!(text_to_bp("99.7%").map(Num::trunc), Ok(9970));
        assert_eq!(text_to_bp("0.5%").map(Num::trunc), Ok(50));
        assert_eq!(text_to_nr_unit("3 samples"), Some((Num::Int(3), "samples")));
        assert!(text_to_nr("nan").is_err());
    }
}
