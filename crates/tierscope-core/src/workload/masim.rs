//! MASIM's config format (sjp38/masim): paragraphs of regions and phases; see
//! docs/reference/EXPERIMENTS.md.

use super::spec::{AccessMode, Density, PatternKind, PatternSpec, PhaseSpec, RegionSpec};
use super::spec::{SpecError, WorkloadSpec};
use crate::limits::{
    human_bytes, read_text_limited, MAX_CONFIG_FILE, MAX_DURATION_NS, MAX_HEAP, MAX_REGIONS,
};
use crate::units::{parse_size, Duration, Size, NS_PER_MS};
use std::collections::HashMap;
use std::path::Path;

impl WorkloadSpec {
    /// Reads a MASIM config file (at most [`MAX_CONFIG_FILE`] bytes).
    pub fn from_masim_file(path: &Path) -> Result<WorkloadSpec, SpecError> {
        let text =
            read_text_limited(path, MAX_CONFIG_FILE, "MASIM config").map_err(|e| SpecError {
                field: "file".into(),
                ..e
            })?;
        parse_masim(&text).map_err(|mut e| {
            e.file = Some(path.display().to_string());
            e
        })
    }
}

/// One non-comment line with its 1-based number.
struct Line<'a> {
    no: usize,
    text: &'a str,
}

fn masim_err(line: usize, field: &str, message: String) -> SpecError {
    SpecError {
        file: None,
        line: Some(line),
        field: field.into(),
        message,
    }
}

/// Parses MASIM's config format (see docs/reference/EXPERIMENTS.md): paragraphs separated by blank
/// lines, `#` comment lines, the first paragraph lists regions, each later one is a phase.
/// A missing trailing blank line and repeated blank lines are accepted.
pub fn parse_masim(text: &str) -> Result<WorkloadSpec, SpecError> {
    let mut paragraphs: Vec<Vec<Line>> = vec![];
    let mut current: Vec<Line> = vec![];
    for (i, raw) in text.lines().enumerate() {
        let t = raw.trim();
        if t.starts_with('#') {
            continue;
        }
        if t.is_empty() {
            if !current.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
            continue;
        }
        current.push(Line { no: i + 1, text: t });
    }
    if !current.is_empty() {
        paragraphs.push(current);
    }
    let mut paragraphs = paragraphs.into_iter();
    let region_lines = paragraphs.next().ok_or_else(|| SpecError {
        file: None,
        line: None,
        field: "regions".into(),
        message: "the file is empty (expected a paragraph of `name, size` lines)".into(),
    })?;

    let mut regions = vec![];
    // Region sizes by name, and the heap so far (regions rounded up to 2 MiB, checked):
    // the limits are checked here too, so that their errors name the line.
    let mut names: HashMap<&str, u64> = HashMap::new();
    let mut heap: u64 = 0;
    for l in &region_lines {
        let fields: Vec<&str> = l.text.split(',').map(str::trim).collect();
        if fields.len() < 2 || fields.len() > 3 {
            return Err(masim_err(
                l.no,
                "region",
                format!(
                    "expected `name, size_in_bytes[, init_data_file]`, got `{}`",
                    l.text
                ),
            ));
        }
        if fields[0].is_empty() {
            return Err(masim_err(l.no, "name", "region name is empty".into()));
        }
        let size = parse_size(fields[1]).map_err(|e| masim_err(l.no, "size", e.0))?;
        if size == 0 {
            return Err(masim_err(l.no, "size", "must be positive".into()));
        }
        heap = size
            .checked_next_multiple_of(2 << 20)
            .and_then(|s| heap.checked_add(s))
            .filter(|&h| h <= MAX_HEAP)
            .ok_or_else(|| {
                masim_err(
                    l.no,
                    "size",
                    format!(
                        "the regions up to this one take more than the limit of {} ({MAX_HEAP} \
                         bytes, each region rounded up to 2 MiB)",
                        human_bytes(MAX_HEAP)
                    ),
                )
            })?;
        if names.insert(fields[0], size).is_some() {
            return Err(masim_err(
                l.no,
                "name",
                format!("region `{}` is defined twice", fields[0]),
            ));
        }
        if regions.len() == MAX_REGIONS {
            return Err(masim_err(
                l.no,
                "region",
                format!("more than {MAX_REGIONS} regions"),
            ));
        }
        regions.push(RegionSpec {
            name: fields[0].to_string(),
            size: Size(size),
        });
    }

    let mut phases = vec![];
    for para in paragraphs {
        let name_line = &para[0];
        let Some(dur_line) = para.get(1) else {
            return Err(masim_err(
                name_line.no + 1,
                "duration",
                format!(
                    "phase `{}` has no duration line (milliseconds)",
                    name_line.text
                ),
            ));
        };
        let ms: u64 = dur_line.text.parse().map_err(|_| {
            masim_err(
                dur_line.no,
                "duration",
                format!(
                    "expected a whole number of milliseconds, got `{}`",
                    dur_line.text
                ),
            )
        })?;
        if ms == 0 {
            return Err(masim_err(
                dur_line.no,
                "duration",
                "must be positive".into(),
            ));
        }
        let max_ms = MAX_DURATION_NS / NS_PER_MS;
        if ms > max_ms {
            return Err(masim_err(
                dur_line.no,
                "duration",
                format!("{ms} ms is longer than the limit of {max_ms} ms (30 days)"),
            ));
        }
        if para.len() < 3 {
            return Err(masim_err(
                dur_line.no + 1,
                "pattern",
                format!("phase `{}` has no access pattern lines", name_line.text),
            ));
        }
        let mut patterns = vec![];
        for l in &para[2..] {
            patterns.push(parse_pattern(l, &names)?);
        }
        if patterns.iter().all(|p| p.weight == 0) {
            return Err(masim_err(
                para[2].no,
                "probability",
                format!(
                    "phase `{}` has no pattern with a positive probability",
                    name_line.text
                ),
            ));
        }
        phases.push(PhaseSpec {
            name: name_line.text.to_string(),
            duration: Duration(ms * NS_PER_MS),
            patterns,
        });
    }
    if phases.is_empty() {
        let last = region_lines.last().map(|l| l.no).unwrap_or(1);
        return Err(masim_err(
            last + 1,
            "phase",
            "no phases after the region paragraph (separate paragraphs with a blank line)".into(),
        ));
    }
    Ok(WorkloadSpec { regions, phases })
}

fn parse_pattern(l: &Line, regions: &HashMap<&str, u64>) -> Result<PatternSpec, SpecError> {
    let fields: Vec<&str> = l.text.split(',').map(str::trim).collect();
    if fields.len() < 4 || fields.len() > 5 {
        return Err(masim_err(
            l.no,
            "pattern",
            format!(
                "expected `region, random(1)|sequential(0), stride, probability[, ro|wo|rw]`, got `{}`",
                l.text
            ),
        ));
    }
    let Some(&region_size) = regions.get(fields[0]) else {
        return Err(masim_err(
            l.no,
            "region",
            format!("unknown region `{}`", fields[0]),
        ));
    };
    let kind = match fields[1] {
        "1" | "random" => PatternKind::Random,
        "0" | "sequential" => PatternKind::Sequential,
        other => {
            return Err(masim_err(
                l.no,
                "random",
                format!("expected 1 (random) or 0 (sequential), got `{other}`"),
            ))
        }
    };
    let stride = parse_size(fields[2]).map_err(|e| masim_err(l.no, "stride", e.0))?;
    if kind == PatternKind::Sequential && stride == 0 {
        return Err(masim_err(
            l.no,
            "stride",
            "a sequential pattern needs a positive stride".into(),
        ));
    }
    if kind == PatternKind::Sequential && stride > region_size {
        return Err(masim_err(
            l.no,
            "stride",
            format!(
                "{stride} bytes is more than region `{}` ({region_size} bytes)",
                fields[0]
            ),
        ));
    }
    if stride > MAX_HEAP {
        return Err(masim_err(
            l.no,
            "stride",
            format!(
                "{stride} bytes is more than the limit of {}",
                human_bytes(MAX_HEAP)
            ),
        ));
    }
    let weight: u32 = fields[3].parse().map_err(|_| {
        masim_err(
            l.no,
            "probability",
            format!(
                "expected a non-negative integer weight, got `{}`",
                fields[3]
            ),
        )
    })?;
    let mode = match fields.get(4).copied() {
        None | Some("wo") => AccessMode::Wo,
        Some("ro") => AccessMode::Ro,
        Some("rw") => AccessMode::Rw,
        Some(other) => {
            return Err(masim_err(
                l.no,
                "mode",
                format!("expected ro, wo or rw, got `{other}`"),
            ))
        }
    };
    Ok(PatternSpec {
        region: fields[0].to_string(),
        kind,
        density: Density::Uniform,
        stride: Size(stride),
        weight,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZIGZAG: &str = "#regions\na, 100000000\nb, 100000000\n\n#phases\ninitial phase\n10000\na, 0, 4096, 1\nb, 0, 4096, 1\n\nlow phase 0\n5000\na, 1, 4096, 50, ro";

    #[test]
    fn parses_masim_without_trailing_blank_line() {
        let w = parse_masim(ZIGZAG).unwrap();
        assert_eq!(w.regions.len(), 2);
        assert_eq!(w.regions[1].size.0, 100_000_000);
        assert_eq!(w.phases.len(), 2);
        assert_eq!(w.phases[0].duration.0, 10_000 * NS_PER_MS);
        assert_eq!(w.phases[0].patterns[1].kind, PatternKind::Sequential);
        assert_eq!(w.phases[0].patterns[1].mode, AccessMode::Wo);
        assert_eq!(w.phases[1].patterns[0].kind, PatternKind::Random);
        assert_eq!(w.phases[1].patterns[0].weight, 50);
        assert_eq!(w.phases[1].patterns[0].mode, AccessMode::Ro);
        w.validate().unwrap();
        // Extra blank lines between and after paragraphs are fine.
        let padded = format!("\n\n{}\n\n\n", ZIGZAG.replace("\n\n", "\n\n\n"));
        assert_eq!(parse_masim(&padded).unwrap(), w);
    }

    #[test]
    fn errors_name_line_and_field() {
        let bad = "a, 1GiB\n\np\n100\nzz, 1, 4096, 1\n";
        let e = parse_masim(bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(5), "region"));
        let bad = "a, lots\n\np\n100\na, 1, 4096, 1\n";
        let e = parse_masim(bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(1), "size"));
        let bad = "a, 4096\n\np\nsoon\na, 1, 4096, 1\n";
        let e = parse_masim(bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(4), "duration"));
        let bad = "a, 4096\n\np\n10\na, 2, 4096, 1\n";
        let e = parse_masim(bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(5), "random"));
        let bad = "a, 4096\n\np\n10\na, 1, 4096, 1, rx\n";
        let e = parse_masim(bad).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(5), "mode"));
        let e = parse_masim("a, 4096\n").unwrap_err();
        assert_eq!(e.field, "phase");
        assert!(e.to_string().starts_with("line 2: phase: "), "{e}");
    }

    #[test]
    fn sizes_durations_and_strides_past_their_limits_are_refused() {
        // A region of 2^64 - 1 bytes parsed, then overflowed the layout's rounding
        // (a panic in page_table.rs); it is now over the heap limit.
        let e = parse_masim("a, 18446744073709551615\n\np\n10\na, 1, 4096, 1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(1), "size"), "{e}");
        assert!(e.message.contains("64.0 PiB"), "{e}");
        // 2^64 bytes does not even parse (it was clamped to 2^64 - 1).
        let e = parse_masim("a, 18446744073709551616\n\np\n10\na, 1, 4096, 1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(1), "size"), "{e}");
        // Two regions that fit each but not together.
        let e = parse_masim("a, 40PiB\nb, 40PiB\n\np\n10\na, 1, 4096, 1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(2), "size"), "{e}");
        // A phase of 2^64 - 1 ms overflowed to a wrong duration.
        let e = parse_masim("a, 1GiB\n\np\n18446744073709551615\na, 1, 4096, 1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(4), "duration"), "{e}");
        let e = parse_masim("a, 1GiB\n\np\n2592000001\na, 1, 4096, 1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(4), "duration"), "{e}");
        assert!(e.message.contains("30 days"), "{e}");
        assert!(parse_masim("a, 1GiB\n\np\n2592000000\na, 1, 4096, 1\n").is_ok());
        // Phases that each fit but not one after the other.
        let w = parse_masim("a, 1GiB\n\np\n2592000000\na, 1, 4096, 1\n\nq\n1\na, 1, 4096, 1\n")
            .unwrap();
        assert_eq!(w.validate().unwrap_err().field, "phases[1].duration");
        // A stride of 2^64 was clamped to 2^64 - 1; one past the region would wrap.
        let e = parse_masim("a, 1GiB\n\np\n10\na, 0, 18446744073709551616, 1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(5), "stride"), "{e}");
        let e = parse_masim("a, 1GiB\n\np\n10\na, 0, 2GiB, 1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(5), "stride"), "{e}");
        let e = parse_masim("a, 1GiB\n\np\n10\na, 1, 128PiB, 1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(5), "stride"), "{e}");
        // validate() checks the same for specs written inline.
        let mut w = parse_masim("a, 1GiB\n\np\n10\na, 0, 4096, 1\n").unwrap();
        w.phases[0].patterns[0].stride = Size(2 << 30);
        assert_eq!(
            w.validate().unwrap_err().field,
            "phases[0].patterns[0].stride"
        );
        w.phases[0].patterns[0].stride = Size(4096);
        w.regions[0].size = Size(u64::MAX);
        assert_eq!(w.validate().unwrap_err().field, "regions[0].size");
    }

    #[test]
    fn many_regions_parse_in_linear_time() {
        // 400 k regions (about 10 MB) took minutes with a quadratic duplicate check.
        let n = 400_000;
        let mut text = String::with_capacity(n * 24);
        for i in 0..n {
            text.push_str(&format!("region{i}, 4096\n"));
        }
        text.push_str("\np\n10\nregion7, 1, 4096, 1\nregion399999, 1, 4096, 1\n");
        let t = std::time::Instant::now();
        let w = parse_masim(&text).unwrap();
        w.validate().unwrap();
        assert_eq!(w.regions.len(), n);
        let s = t.elapsed().as_secs_f64();
        assert!(s < 5.0, "{s} s");
        // A name defined twice is still found, at its second line.
        let dup = text.replacen("region5, 4096", "region3, 4096", 1);
        let e = parse_masim(&dup).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(6), "name"), "{e}");
        assert!(MAX_REGIONS > n);
    }

    #[test]
    fn a_device_is_not_read_without_end() {
        let path = Path::new("/dev/zero");
        if !path.exists() {
            return;
        }
        let e = WorkloadSpec::from_masim_file(path).unwrap_err();
        assert_eq!(
            (e.file.as_deref(), e.field.as_str()),
            (Some("/dev/zero"), "file")
        );
        assert!(e.message.contains("larger than 64.0 MiB"), "{e}");
    }
}
