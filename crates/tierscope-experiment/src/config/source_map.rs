//! Where each field of an experiment document is written: the 1-based line of every key
//! and list item, by field path (`monitors[1].sample`). Errors found after parsing (a bad
//! value, a failed range check) name a field path; this turns it into a line, for TOML and
//! JSON alike, from the parsers' own positions rather than by searching the text.

use std::collections::HashMap;

#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    lines: HashMap<String, usize>,
}

impl SourceMap {
    /// The map of a TOML document (empty when it does not parse: the parse error carries
    /// its own position).
    pub fn toml(text: &str) -> SourceMap {
        let mut map = SourceMap::default();
        if let Ok(root) = toml::de::DeTable::parse(text) {
            let lines = LineIndex::new(text);
            map.toml_table("", root.get_ref(), &lines);
        }
        map
    }

    fn toml_table(&mut self, prefix: &str, table: &toml::de::DeTable<'_>, lines: &LineIndex) {
        for (key, value) in table {
            let path = tierscope_core::error::join_path(prefix, key.get_ref());
            self.lines
                .insert(path.clone(), lines.line(key.span().start));
            self.toml_value(&path, value, lines);
        }
    }

    fn toml_value(
        &mut self,
        path: &str,
        value: &toml::Spanned<toml::de::DeValue<'_>>,
        lines: &LineIndex,
    ) {
        match value.get_ref() {
            toml::de::DeValue::Table(t) => self.toml_table(path, t, lines),
            toml::de::DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    self.lines.insert(p.clone(), lines.line(item.span().start));
                    self.toml_value(&p, item, lines);
                }
            }
            _ => {}
        }
    }

    /// The map of a JSON document (best effort on malformed text: the parse error carries
    /// its own position).
    pub fn json(text: &str) -> SourceMap {
        let mut map = SourceMap::default();
        JsonWalker {
            bytes: text.as_bytes(),
            pos: 0,
            line: 1,
            map: &mut map,
        }
        .value("");
        map
    }

    /// The line of `path`, or of its nearest enclosing field written in the document.
    pub fn line(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some(&l) = self.lines.get(p) {
                return Some(l);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

/// Byte offset to line number.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

/// A minimal JSON reader that records the line where each value starts. It trusts the
/// document's structure (serde_json parses it for real) and stops at the first surprise.
struct JsonWalker<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: usize,
    map: &'a mut SourceMap,
}

impl JsonWalker<'_> {
    fn skip_ws(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            match b {
                b'\n' => self.line += 1,
                b' ' | b'\t' | b'\r' => {}
                _ => return,
            }
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes.get(self.pos).copied()
    }

    /// Reads a string starting at `pos` (on its quote); returns its raw contents.
    fn string(&mut self) -> Option<String> {
        self.pos += 1;
        let start = self.pos;
        while let Some(&b) = self.bytes.get(self.pos) {
            match b {
                b'\\' => self.pos += 2,
                b'"' => {
                    let s = String::from_utf8_lossy(&self.bytes[start..self.pos]).into_owned();
                    self.pos += 1;
                    return Some(s);
                }
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                _ => self.pos += 1,
            }
        }
        None
    }

    /// Walks one value at `path`; false at malformed input.
    fn value(&mut self, path: &str) -> bool {
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                loop {
                    match self.peek() {
                        Some(b'}') => {
                            self.pos += 1;
                            return true;
                        }
                        Some(b',') => self.pos += 1,
                        Some(b'"') => {
                            let line = self.line;
                            let Some(key) = self.string() else {
                                return false;
                            };
                            let p = tierscope_core::error::join_path(path, &key);
                            self.map.lines.insert(p.clone(), line);
                            if self.peek() != Some(b':') {
                                return false;
                            }
                            self.pos += 1;
                            if !self.value(&p) {
                                return false;
                            }
                        }
                        _ => return false,
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                let mut i = 0;
                loop {
                    match self.peek() {
                        Some(b']') => {
                            self.pos += 1;
                            return true;
                        }
                        Some(b',') => self.pos += 1,
                        Some(_) => {
                            let p = format!("{path}[{i}]");
                            self.map.lines.insert(p.clone(), self.line);
                            if !self.value(&p) {
                                return false;
                            }
                            i += 1;
                        }
                        None => return false,
                    }
                }
            }
            Some(b'"') => self.string().is_some(),
            Some(_) => {
                while let Some(&b) = self.bytes.get(self.pos) {
                    if matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace() {
                        break;
                    }
                    self.pos += 1;
                }
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_and_json_lines_by_path() {
        let toml = "seed = 1\n[workload]\nrate = \"1M/s\"\nregions = [\n  { name = \"a\", size = 1 },\n  { name = \"b\", size = 2 },\n]\n\n[[monitors]]\npreset = \"damon-mod\"\n\n[[monitors]]\npreset = \"telescope-flx\"\nsample = \"10ms\"\n";
        let m = SourceMap::toml(toml);
        assert_eq!(m.line("seed"), Some(1));
        assert_eq!(m.line("workload.rate"), Some(3));
        assert_eq!(m.line("workload.regions[1]"), Some(6));
        assert_eq!(m.line("workload.regions[1].size"), Some(6));
        assert_eq!(m.line("monitors[1].sample"), Some(14));
        // A field the file does not write: its nearest written ancestor.
        assert_eq!(m.line("monitors[0].sample"), Some(9));
        assert_eq!(m.line("nothing.here"), None);

        let json = "{\n \"seed\": 1,\n \"workload\": {\n  \"rate\": \"1M/s\",\n  \"regions\": [\n   {\"name\": \"a\\\"q\", \"size\": 1},\n   {\"name\": \"b\",\n    \"size\": 2}\n  ]\n },\n \"monitors\": [{\"preset\": \"x\"}]\n}";
        let m = SourceMap::json(json);
        assert_eq!(m.line("seed"), Some(2));
        assert_eq!(m.line("workload.rate"), Some(4));
        assert_eq!(m.line("workload.regions[0].size"), Some(6));
        assert_eq!(m.line("workload.regions[1].size"), Some(8));
        assert_eq!(m.line("monitors[0].sample"), Some(11));
    }
}
