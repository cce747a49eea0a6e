//! Mutations of text inputs for the fuzz tests of every parser (`src/fuzz_tests.rs` of the
//! core, experiment, tiering and cori crates; issue 28, item 5). The tests draw the
//! operations with proptest, so a failure shrinks to few, small operations; applying them
//! is here so that every crate mutates alike. Nothing here runs outside tests.

/// Values that sit on or past the edge of what parsers accept: numbers at the ends of
/// `u64`, `i64` and `f64`, non-finite floats, units at and past the limits, odd strings.
pub const EDGE_VALUES: &[&str] = &[
    "0",
    "-1",
    "1",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999999999999",
    "1e308",
    "-1e308",
    "1e-320",
    "nan",
    "inf",
    "-inf",
    "0.0",
    "-0.0",
    "0.5",
    "\"\"",
    "\"0B\"",
    "\"1B\"",
    "\"4KiB\"",
    "\"64PiB\"",
    "\"65PiB\"",
    "\"16384PiB\"",
    "\"18446744073709551615B\"",
    "\"18446744073709551616\"",
    "\"0ns\"",
    "\"1ns\"",
    "\"720h\"",
    "\"721h\"",
    "\"18446744073709551615ms\"",
    "\"0/s\"",
    "\"10G/s\"",
    "\"11G/s\"",
    "\"1e400\"",
    "\"nan\"",
    "\"\u{e9}\"",
    "\"/dev/zero\"",
    "\"..\"",
    "[]",
    "{}",
    "[[]]",
    "true",
];

/// Applies `ops` to `text` in order; each is `(kind, a, b)`, with `a` and `b` chosen
/// modulo what they index. Kinds: delete, duplicate or swap lines; replace a value (the
/// text after a `=`, `:` or `,`) with an [`EDGE_VALUES`] entry or with another line's
/// value; insert, delete or change a byte; cut the text. Invalid UTF-8 is replaced, as
/// the CLI would refuse it before any parser sees it.
pub fn mutate(text: &str, ops: &[(u8, u32, u32)]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut out_bytes: Option<Vec<u8>> = None;
    for &(kind, a, b) in ops {
        if let Some(bytes) = &mut out_bytes {
            // Once bytes are edited, later operations edit bytes too.
            byte_op(bytes, kind, a, b);
            continue;
        }
        let n = lines.len().max(1);
        let (i, j) = (a as usize % n, b as usize % n);
        match kind % 9 {
            0 if !lines.is_empty() => {
                lines.remove(i);
            }
            1 if !lines.is_empty() => {
                let l = lines[i].clone();
                lines.insert(j, l);
            }
            2 if !lines.is_empty() => lines.swap(i, j),
            3 | 4 if !lines.is_empty() => {
                let v = EDGE_VALUES[b as usize % EDGE_VALUES.len()];
                lines[i] = replace_value(&lines[i], v, a);
            }
            5 if !lines.is_empty() => {
                let v = value_of(&lines[j]).unwrap_or("1").to_string();
                lines[i] = replace_value(&lines[i], &v, a);
            }
            6 | 7 => {
                let mut bytes = lines.join("\n").into_bytes();
                byte_op(&mut bytes, kind, a, b);
                out_bytes = Some(bytes);
            }
            8 => {
                let mut bytes = lines.join("\n").into_bytes();
                let cut = a as usize % (bytes.len() + 1);
                bytes.truncate(cut);
                out_bytes = Some(bytes);
            }
            _ => {}
        }
    }
    match out_bytes {
        Some(b) => String::from_utf8_lossy(&b).into_owned(),
        None => {
            let mut s = lines.join("\n");
            s.push('\n');
            s
        }
    }
}

/// Inserts, deletes or changes the byte at `a` (modulo the length).
fn byte_op(bytes: &mut Vec<u8>, kind: u8, a: u32, b: u32) {
    let at = a as usize % (bytes.len() + 1);
    match kind % 3 {
        0 => bytes.insert(at, b as u8),
        1 if at < bytes.len() => {
            bytes.remove(at);
        }
        _ if at < bytes.len() => bytes[at] = b as u8,
        _ => bytes.push(b as u8),
    }
}

/// The value part of a line: after its first `=` or `:`, else after its first `,`.
fn value_of(line: &str) -> Option<&str> {
    let cut = line.find(['=', ':']).or_else(|| line.find(','))?;
    Some(line[cut + 1..].trim())
}

/// `line` with one of its values replaced by `v`: the whole value after `=` or `:`, or
/// (for comma-separated lines such as MASIM's) the field `which` modulo their count.
fn replace_value(line: &str, v: &str, which: u32) -> String {
    let eqs: Vec<usize> = line.match_indices(['=', ':']).map(|(i, _)| i).collect();
    if eqs.len() > 1 && which % 2 == 1 {
        // Inside an inline table (`{ a = 1, b = "x" }`): one value up to its `,` or
        // closing bracket.
        let at = eqs[(which as usize / 2) % eqs.len()];
        let rest = &line[at + 1..];
        let end = rest.find([',', '}', ']']).unwrap_or(rest.len());
        return format!("{} {v}{}", &line[..=at], &rest[end..]);
    }
    if let Some(&cut) = eqs.first() {
        return format!("{} {v}", &line[..=cut]);
    }
    let mut fields: Vec<&str> = line.split(',').map(str::trim).collect();
    let k = which as usize % fields.len();
    let v = v.trim_matches('"');
    fields[k] = v;
    fields.join(", ")
}

/// How long a fuzz target searches, and where: `default_cases` proptest cases from seed 28,
/// or `TIERSCOPE_FUZZ_CASES=N` cases from `TIERSCOPE_FUZZ_SEED=N` for a longer or another
/// search. Returns (cases, seed); every crate's fuzz tests build their proptest config
/// from it.
pub fn search(default_cases: u32) -> (u32, u64) {
    fn env<T: std::str::FromStr>(key: &str) -> Option<T> {
        std::env::var(key).ok().and_then(|v| v.parse().ok())
    }
    (
        env("TIERSCOPE_FUZZ_CASES").unwrap_or(default_cases),
        env("TIERSCOPE_FUZZ_SEED").unwrap_or(28),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_do_what_they_say() {
        let text = "a = 1\nb = 2\nc, 3, 4\n";
        assert_eq!(mutate(text, &[]), text);
        assert_eq!(mutate(text, &[(0, 1, 0)]), "a = 1\nc, 3, 4\n");
        assert_eq!(mutate(text, &[(2, 0, 1)]), "b = 2\na = 1\nc, 3, 4\n");
        assert_eq!(mutate(text, &[(3, 0, 12)]), "a = nan\nb = 2\nc, 3, 4\n");
        assert_eq!(mutate(text, &[(3, 5, 1)]), "a = 1\nb = 2\nc, 3, -1\n");
        assert_eq!(mutate(text, &[(8, 3, 0)]), "a =");
        let table = "kv = { keys = 3, value_size = \"5MB\" }\n";
        assert_eq!(
            mutate(table, &[(3, 3, 1)]),
            "kv = { keys = -1, value_size = \"5MB\" }\n"
        );
        // Byte edits keep the text a string.
        assert!(!mutate(text, &[(7, 1, 0xff)]).is_empty());
    }
}
