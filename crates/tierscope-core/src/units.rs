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

fn split_number(s: &str) -> Result<(f64, &str), UnitError> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    if end == 0 {
        return Err(UnitError(format!("`{s}` does not start with a number")));
    }
    let digits: String = s[..end].chars().filter(|&c| c != '_').collect();
    let value: f64 = digits
        .parse()
        .map_err(|_| UnitError(format!("`{s}` does not start with a number")))?;
    Ok((value, s[end..].trim()))
}

fn checked_round(value: f64, what: &str, text: &str) -> Result<u64, UnitError> {
    if !value.is_finite() || value < 0.0 || value > u64::MAX as f64 {
        return Err(UnitError(format!("{what} `{text}` is out of range")));
    }
    Ok(value.round() as u64)
}

/// Parses a size: a plain integer is bytes; suffixes B, KiB/MiB/GiB/TiB/PiB (powers of
/// 1024), KB/MB/GB/TB/PB (powers of 1000), K/M/G/T/P (taken as binary, like most memory
/// tools).
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text)?;
    let mult: f64 = match unit {
        "" | "B" => 1.0,
        "KiB" | "K" | "k" => 1024.0,
        "MiB" | "M" => 1024.0 * 1024.0,
        "GiB" | "G" => 1024.0f64.powi(3),
        "TiB" | "T" => 1024.0f64.powi(4),
        "PiB" | "P" => 1024.0f64.powi(5),
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "PB" => 1e15,
        _ => {
            return Err(UnitError(format!(
                "`{text}`: unknown size unit `{unit}` (expected B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB or PB)"
            )))
        }
    };
    checked_round(value * mult, "size", text)
}

/// Parses a duration into nanoseconds: units ns, us, ms, s, min, h. A bare number is an
/// error because its unit would be a guess.
pub fn parse_duration(text: &str) -> Result<Nanos, UnitError> {
    let (value, unit) = split_number(text)?;
    let mult: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" | "m" => 60e9,
        "h" => 3600e9,
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
    checked_round(value * mult, "duration", text)
}

/// Parses an event rate per second: "10M/s", "10000000", "500k/s", "5kHz".
pub fn parse_rate(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text)?;
    let unit = unit
        .strip_suffix("/s")
        .or_else(|| unit.strip_suffix("Hz"))
        .unwrap_or(unit)
        .trim();
    let mult: f64 = match unit {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        _ => {
            return Err(UnitError(format!(
                "`{text}`: unknown rate unit (expected e.g. 10M/s, 500k/s, 5kHz or a plain number)"
            )))
        }
    };
    checked_round(value * mult, "rate", text)
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
        assert_eq!(format_size(64 << 30), "64GiB");
        assert_eq!(format_size(4097), "4097B");
    }

    #[test]
    fn durations_need_units() {
        assert_eq!(parse_duration("5ms").unwrap(), 5 * NS_PER_MS);
        assert_eq!(parse_duration("1.5s").unwrap(), 1_500_000_000);
        assert_eq!(parse_duration("2min").unwrap(), 120 * NS_PER_S);
        assert!(parse_duration("5").is_err());
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
