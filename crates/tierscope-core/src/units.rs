//! Quantities with units in their text form: sizes ("64GiB"), durations ("5ms") and
//! rates ("10M/s"). Config files use these strings; the core works in bytes, simulated
//! nanoseconds and events per second.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Simulated time in nanoseconds since the start of a run.
pub type Nanos = u64;

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

/// Why a quantity string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

/// The number at the start of `s` (digits, `.`, `_` separators) and the unit after it.
fn split_number(s: &str) -> Result<(Number, &str), UnitError> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    if end == 0 {
        return Err(UnitError(format!("`{s}` does not start with a number")));
    }
    let digits: String = s[..end].chars().filter(|&c| c != '_').collect();
    if digits.is_empty() {
        return Err(UnitError(format!("`{s}` does not start with a number")));
    }
    let number = if digits.contains('.') {
        Number::Decimal(
            digits
                .parse()
                .map_err(|_| UnitError(format!("`{s}` does not start with a number")))?,
        )
    } else {
        // Whole numbers are read exactly (a float would round those above 2^53); more
        // digits than a u128 holds are out of any range anyway.
        Number::Whole(digits.parse().unwrap_or(u128::MAX))
    };
    Ok((number, s[end..].trim()))
}

/// A number as written: whole numbers exactly, decimals as floats.
#[derive(Debug, Clone, Copy)]
enum Number {
    Whole(u128),
    Decimal(f64),
}

/// `number * mult` rounded to a whole count, refused when it does not fit in a u64
/// (never clamped). `mult` is a whole number for every unit.
fn checked_scale(number: Number, mult: u64, what: &str, text: &str) -> Result<u64, UnitError> {
    let out_of_range = || UnitError(format!("{what} `{}` is out of range", text.trim()));
    match number {
        Number::Whole(n) => n
            .checked_mul(u128::from(mult))
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(out_of_range),
        Number::Decimal(v) => {
            let v = v * mult as f64;
            // 2^64 itself is not a u64: `as` would clamp it to u64::MAX.
            if !v.is_finite() || v < 0.0 || v.round() >= 18_446_744_073_709_551_616.0 {
                return Err(out_of_range());
            }
            Ok(v.round() as u64)
        }
    }
}

/// Parses a size: a plain integer is bytes; suffixes B, KiB/MiB/GiB/TiB/PiB (powers of
/// 1024), KB/MB/GB/TB/PB (powers of 1000), K/M/G/T/P (taken as binary, like most memory
/// tools).
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text)?;
    let mult: u64 = match unit {
        "" | "B" => 1,
        "KiB" | "K" | "k" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "TiB" | "T" => 1 << 40,
        "PiB" | "P" => 1 << 50,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "PB" => 1_000_000_000_000_000,
        _ => {
            return Err(UnitError(format!(
                "`{text}`: unknown size unit `{unit}` (expected B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB or PB)"
            )))
        }
    };
    checked_scale(value, mult, "size", text)
}

/// Parses a duration into nanoseconds: units ns, us, ms, s, min, h. A bare number is an
/// error because its unit would be a guess.
pub fn parse_duration(text: &str) -> Result<Nanos, UnitError> {
    let (value, unit) = split_number(text)?;
    let mult: u64 = match unit {
        "ns" => 1,
        "us" | "µs" => NS_PER_US,
        "ms" => NS_PER_MS,
        "s" => NS_PER_S,
        "min" | "m" => 60 * NS_PER_S,
        "h" => 3600 * NS_PER_S,
        "" => {
            return Err(UnitError(format!(
                "duration `{text}` has no unit (expected ns, us, ms, s, min or h)"
            )))
        }
        _ => {
            return Err(UnitError(format!(
                "`{text}`: unknown duration unit `{unit}` (expected ns, us, ms, s, min or h)"
            )))
        }
    };
    checked_scale(value, mult, "duration", text)
}

/// Parses an event rate per second: "10M/s", "10000000", "500k/s", "5kHz".
pub fn parse_rate(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text)?;
    let unit = unit
        .strip_suffix("/s")
        .or_else(|| unit.strip_suffix("Hz"))
        .unwrap_or(unit)
        .trim();
    let mult: u64 = match unit {
        "" => 1,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        _ => {
            return Err(UnitError(format!(
                "`{text}`: unknown rate unit (expected e.g. 10M/s, 500k/s, 5kHz or a plain number)"
            )))
        }
    };
    checked_scale(value, mult, "rate", text)
}

/// Formats bytes with the largest binary unit that divides them, e.g. "64GiB".
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 5] = [
        ("PiB", 1 << 50),
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, mult) in UNITS {
        if bytes >= mult && bytes.is_multiple_of(mult) {
            return format!("{}{name}", bytes / mult);
        }
    }
    format!("{bytes}B")
}

/// Formats nanoseconds with the largest unit that divides them, e.g. "200ms".
pub fn format_duration(ns: Nanos) -> String {
    const UNITS: [(&str, u64); 3] = [("s", NS_PER_S), ("ms", NS_PER_MS), ("us", NS_PER_US)];
    for (name, mult) in UNITS {
        if ns >= mult && ns.is_multiple_of(mult) {
            return format!("{}{name}", ns / mult);
        }
    }
    format!("{ns}ns")
}

macro_rules! quantity {
    ($name:ident, $parse:ident, $format:ident, $doc:literal, $expect:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u64);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expect)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$name, E> {
                        $parse(&v.to_string()).map($name).map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$name, E> {
                        if v < 0 {
                            return Err(E::custom(format!("{v} is negative")));
                        }
                        self.visit_u64(v as u64)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        $parse(v).map($name).map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&$format(self.0))
            }
        }
    };
}

fn format_rate(r: u64) -> String {
    format!("{r}/s")
}

quantity!(
    Size,
    parse_size,
    format_size,
    "Bytes, written as \"64GiB\", \"10GB\" or a plain integer.",
    "a size such as \"64GiB\" or a number of bytes"
);
quantity!(
    Duration,
    parse_duration,
    format_duration,
    "Nanoseconds, written as \"5ms\", \"30s\", ...",
    "a duration with a unit such as \"5ms\" or \"30s\""
);
quantity!(
    Rate,
    parse_rate,
    format_rate,
    "Events per second, written as \"10M/s\", \"5kHz\" or a plain integer.",
    "a rate such as \"10M/s\" or a plain number per second"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("64GiB").unwrap(), 64 << 30);
        assert_eq!(parse_size("10GB").unwrap(), 10_000_000_000);
        assert_eq!(parse_size("1.5MiB").unwrap(), 3 << 19);
        assert_eq!(parse_size("123").unwrap(), 123);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("GiB").is_err());
        // Whole numbers are exact, and a size past u64 is refused, never clamped.
        assert_eq!(parse_size("9007199254740993").unwrap(), (1 << 53) + 1);
        assert_eq!(parse_size("18446744073709551615").unwrap(), u64::MAX);
        for text in [
            "18446744073709551616",
            "16384PiB",
            "16384.0PiB",
            "1e400",
            "99999999999999999999999999999999999999999999",
        ] {
            assert!(parse_size(text).is_err(), "{text}");
        }
        assert_eq!(parse_size("0.5KiB").unwrap(), 512);
        assert_eq!(format_size(64 << 30), "64GiB");
        assert_eq!(format_size(4097), "4097B");
    }

    #[test]
    fn durations_need_units() {
        assert_eq!(parse_duration("5ms").unwrap(), 5 * NS_PER_MS);
        assert_eq!(parse_duration("1.5s").unwrap(), 1_500_000_000);
        assert_eq!(parse_duration("2min").unwrap(), 120 * NS_PER_S);
        assert!(parse_duration("5").is_err());
        // 2^64 - 1 ms is past u64 nanoseconds: refused, not clamped to 584 years.
        assert!(parse_duration("18446744073709551615ms").is_err());
        assert_eq!(parse_duration("18446744073709551615ns").unwrap(), u64::MAX);
        assert_eq!(format_duration(200 * NS_PER_MS), "200ms");
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10M/s").unwrap(), 10_000_000);
        assert_eq!(parse_rate("5kHz").unwrap(), 5_000);
        assert_eq!(parse_rate("1000").unwrap(), 1000);
        assert!(parse_rate("3 per fortnight").is_err());
    }
}
