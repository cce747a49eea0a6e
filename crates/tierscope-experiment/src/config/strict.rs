//! Documents read strictly: the JSON value of a TOML or JSON text, refusing what the
//! value would silently change. A key given twice in one table is an error in JSON as TOML
//! already makes it (serde_json keeps the last), and so is a float that is not finite
//! (TOML's `nan` and `inf`: a JSON value cannot hold them and became `null`, which an
//! optional field reads as absent, so `sigma = nan` ran with the default sigma).
//!
//! The errors are raised while the parser reads the value, so they carry its position
//! (line) like any syntax error.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// A document value read strictly (see the module's documentation).
pub struct Strict(pub Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v).map(Value::Number).ok_or_else(|| {
            E::custom(format!(
                "`{v}` is not a number tierscope accepts (nan and inf are refused)"
            ))
        })
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Strict::deserialize(d).map(|s| s.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = vec![];
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "duplicate key `{key}` (a key may be given once per table)"
                )));
            }
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{read_document, Format};

    #[test]
    fn duplicate_keys_and_non_finite_floats_are_refused_with_their_line() {
        let e = read_document(
            "{\n \"seed\": 1,\n \"name\": \"a\",\n \"seed\": 2\n}",
            "e.json",
            Format::Json,
        )
        .unwrap_err();
        assert_eq!(
            (e.file.as_deref(), e.line),
            (Some("e.json"), Some(4)),
            "{e}"
        );
        assert!(e.message.contains("duplicate key `seed`"), "{e}");
        // Nested tables too, and TOML already refuses them.
        let e = read_document(
            "{\"workload\": {\n \"rate\": \"1M/s\",\n \"rate\": \"2M/s\"}}",
            "e.json",
            Format::Json,
        )
        .unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(read_document("seed = 1\nseed = 2\n", "e.toml", Format::Toml).is_err());
        for text in [
            "a = 1\nsigma = nan\n",
            "a = 1\n[t]\nexponent = inf\n",
            "x = [1.0, -inf]\n",
        ] {
            let e = read_document(text, "e.toml", Format::Toml).unwrap_err();
            assert!(e.message.contains("nan and inf are refused"), "{text}: {e}");
            assert_eq!(e.line, Some(text.lines().count()), "{text}: {e}");
        }
        // What was accepted still is.
        let (doc, _) = read_document(
            "a = 1.5\nb = -3\nc = [true, \"x\"]\nd = 1979-05-27\n[t]\ne = { f = 9 }\n",
            "e.toml",
            Format::Toml,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(doc["a"], 1.5);
        assert_eq!(doc["b"], -3);
        assert_eq!(doc["c"][1], "x");
        assert_eq!(doc["t"]["e"]["f"], 9);
        let (doc, _) = read_document(
            "{\"a\": [1, 2.5, null, 18446744073709551615]}",
            "e.json",
            Format::Json,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(doc["a"][3], u64::MAX);
    }
}
