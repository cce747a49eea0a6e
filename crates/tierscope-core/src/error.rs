//! The error every configuration check returns: which field is at fault and why, and,
//! once the caller knows them, the file and line it came from.
//!
//! Checks deep in the tree (a monitor's config, a workload pattern) only know the field
//! path relative to themselves; callers prefix it ([`FieldError::under`]) on the way up,
//! and the experiment parser, which holds the source text, attaches file and line last.

use std::fmt;

/// A configuration value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The file the value came from, when known.
    pub file: Option<String>,
    /// 1-based line in `file`, when known.
    pub line: Option<usize>,
    /// Dotted path of the field, with `[i]` for list items, e.g. `monitors[1].sample`;
    /// empty when the error is about the document as a whole.
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            file: None,
            line: None,
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error seen from one level up: `prefix` is the path of the table that
    /// holds the field (`monitors[1]`, `workload`, ...).
    pub fn under(mut self, prefix: &str) -> Self {
        self.field = join_path(prefix, &self.field);
        self
    }

    pub fn in_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }

    pub fn at_line(mut self, line: Option<usize>) -> Self {
        self.line = line.or(self.line);
        self
    }
}

/// ` (did you mean `x`?)` when one of `names` is close to `given` (Jaro-Winkler
/// similarity of at least 0.8, the closest), else "". The one did-you-mean of error
/// messages naming something unknown: presets, policies, engines, tier presets, fields.
pub fn did_you_mean<S: AsRef<str>>(given: &str, names: &[S]) -> String {
    names
        .iter()
        .map(|n| (strsim::jaro_winkler(given, n.as_ref()), n.as_ref()))
        .filter(|(score, n)| *score >= 0.8 && *n != given)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| format!(" (did you mean `{n}`?)"))
        .unwrap_or_default()
}

/// `prefix.field`, without a dot before a list index or around an empty side.
pub fn join_path(prefix: &str, field: &str) -> String {
    match (prefix.is_empty(), field.is_empty()) {
        (true, _) => field.to_string(),
        (_, true) => prefix.to_string(),
        _ if field.starts_with('[') => format!("{prefix}{field}"),
        _ => format!("{prefix}.{field}"),
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line}: ")?,
            (Some(file), None) => write!(f, "{file}: ")?,
            (None, Some(line)) => write!(f, "line {line}: ")?,
            (None, None) => {}
        }
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for FieldError {}

/// A serde error with the path of the field where it happened (`.` at the root).
impl<E: fmt::Display> From<serde_path_to_error::Error<E>> for FieldError {
    fn from(e: serde_path_to_error::Error<E>) -> Self {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        FieldError::new(field, suggest(e.inner().to_string()))
    }
}

/// serde's "unknown field `x`, expected one of `a`, `b`" (or `expected `a``, or an
/// unknown variant) with a did-you-mean after the name.
fn suggest(message: String) -> String {
    let unknown = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|p| message.strip_prefix(p));
    let Some(rest) = unknown else {
        return message;
    };
    let Some((given, expected)) = rest.split_once('`') else {
        return message;
    };
    let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let hint = did_you_mean(given, &names);
    if hint.is_empty() {
        return message;
    }
    let head = message.len() - rest.len() + given.len() + 1;
    format!("{}{hint}{}", &message[..head], &message[head..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_get_a_suggestion() {
        assert_eq!(
            suggest("unknown field `agr`, expected one of `sample`, `aggr`".into()),
            "unknown field `agr` (did you mean `aggr`?), expected one of `sample`, `aggr`"
        );
        assert_eq!(
            suggest("unknown variant `stats`, expected `exact` or `stat`".into()),
            "unknown variant `stats` (did you mean `stat`?), expected `exact` or `stat`"
        );
        let far = "unknown field `zzz`, expected `sample`";
        assert_eq!(suggest(far.into()), far);
        assert_eq!(
            did_you_mean("damon-md", &["damon-mod", "damon-agg"]),
            " (did you mean `damon-mod`?)"
        );
        assert_eq!(did_you_mean("xyz", &["damon-mod"]), "");
    }

    #[test]
    fn paths_join_and_display_names_every_part() {
        let e = FieldError::new("sample", "must be positive").under("monitors[1]");
        assert_eq!(e.field, "monitors[1].sample");
        let e = FieldError::new("[0].region", "unknown").under("patterns");
        assert_eq!(e.field, "patterns[0].region");
        assert_eq!(FieldError::new("", "m").under("workload").field, "workload");
        let e = e.in_file("exp.toml").at_line(Some(7));
        assert_eq!(e.to_string(), "exp.toml:7: patterns[0].region: unknown");
        assert_eq!(
            FieldError::new("", "empty").at_line(Some(2)).to_string(),
            "line 2: empty"
        );
    }
}
