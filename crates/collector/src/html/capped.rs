//! A JSON value read with bounded memory: arrays and objects keep at most `max_items` entries,
//! the whole value at most `max_values` values and `max_depth` levels, texts at most
//! `max_text` characters. What is left out is counted, never stored: a trimmed array or object
//! ends with a marker entry (`{OMITTED: n}`, [`omitted`]) that the pages turn into "n more".
//! Each member of the top-level object may take a third of `max_values`, so one long list (a
//! report's `gcPaths`) leaves room for the next (its `dominators`).
//!
//! The reader itself bounds nothing else: a caller reading from outside the process also
//! bounds the length of a single JSON string (the collector's `summary::Guarded`), since the
//! JSON parser holds a string whole before it is cut.
#![forbid(unsafe_code)]

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;
use std::io::Read;

/// The key of the marker entry that says how many entries were left out.
pub const OMITTED: &str = "\u{0}omitted";

/// What a value read with [`read`] may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_items: usize,
    pub max_values: usize,
    pub max_depth: usize,
    pub max_text: usize,
}

impl Limits {
    /// Enough for any page (every list is cut further when rendered), small in memory: at
    /// most about 40 MB whatever the input.
    pub const PAGE: Limits = Limits {
        max_items: 400,
        max_values: 200_000,
        max_depth: 24,
        max_text: 2_000,
    };
}

/// Read one JSON value from `r` within `lim`.
pub fn read<R: Read>(r: R, lim: Limits) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_reader(r);
    let v = Within(lim).deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// One JSON value read within its `Limits`, as a part of a larger document read as a stream
/// (an entry of a report's list).
pub struct Within(pub Limits);

impl<'de> DeserializeSeed<'de> for Within {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        let left = Cell::new(self.0.max_values);
        Seed {
            lim: &self.0,
            left: &left,
            depth: 0,
        }
        .deserialize(d)
    }
}

/// Read one JSON value from bytes within `lim`.
pub fn from_slice(b: &[u8], lim: Limits) -> serde_json::Result<Value> {
    read(b, lim)
}

/// The count a marker entry holds, if `v` is one.
pub fn omitted(v: &Value) -> Option<u64> {
    v.as_object()?.get(OMITTED)?.as_u64()
}

#[derive(Clone, Copy)]
struct Seed<'a> {
    lim: &'a Limits,
    left: &'a Cell<usize>,
    depth: usize,
}

impl Seed<'_> {
    fn room(&self) -> bool {
        self.left.get() > 0 && self.depth < self.lim.max_depth
    }
    fn take(&self) {
        self.left.set(self.left.get().saturating_sub(1));
    }
    fn child(&self) -> Self {
        Seed {
            depth: self.depth + 1,
            ..*self
        }
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// `s` cut to `max` characters, with "…" where it was cut.
pub(super) fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        self.take();
        Ok(Value::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        self.take();
        Ok(Value::from(n))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        self.take();
        Ok(Value::from(n))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        self.take();
        Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        self.take();
        Ok(Value::String(cut(s, self.lim.max_text)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.take();
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        self.take();
        let mut v = Vec::new();
        let mut left_out = 0u64;
        loop {
            if v.len() < self.lim.max_items && self.child().room() {
                match a.next_element_seed(self.child())? {
                    Some(e) => v.push(e),
                    None => break,
                }
            } else {
                match a.next_element::<IgnoredAny>()? {
                    Some(_) => left_out += 1,
                    None => break,
                }
            }
        }
        if left_out > 0 {
            let mut m = Map::new();
            m.insert(OMITTED.to_string(), Value::from(left_out));
            v.push(Value::Object(m));
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        self.take();
        let mut m = Map::new();
        let mut left_out = 0u64;
        while let Some(k) = a.next_key::<String>()? {
            if m.len() < self.lim.max_items && self.child().room() {
                // Each member of the top-level object has a share of the budget, so that one
                // long list (a report's gcPaths) leaves room for the next (its dominators).
                let share = Cell::new(self.left.get().min(self.lim.max_values / 3));
                let before = share.get();
                let child = match self.depth {
                    0 => Seed {
                        left: &share,
                        depth: 1,
                        lim: self.lim,
                    },
                    _ => self.child(),
                };
                let v = a.next_value_seed(child)?;
                if self.depth == 0 {
                    self.left
                        .set(self.left.get().saturating_sub(before - share.get()));
                }
                m.insert(cut(&k, self.lim.max_text), v);
            } else {
                a.next_value::<IgnoredAny>()?;
                left_out += 1;
            }
        }
        if left_out > 0 {
            m.insert(OMITTED.to_string(), Value::from(left_out));
        }
        Ok(Value::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_texts_and_totals_are_cut() {
        let lim = Limits {
            max_items: 3,
            max_values: 12,
            max_depth: 3,
            max_text: 4,
        };
        let v = from_slice(
            br#"{"a":[1,2,3,4,5],"b":"abcdefgh","c":{"d":{"e":{"f":1}}}}"#,
            lim,
        )
        .unwrap();
        let a = v["a"].as_array().unwrap();
        assert_eq!(a.len(), 4);
        assert_eq!(omitted(&a[3]), Some(2));
        assert_eq!(v["b"], "abcd…");
        // Depth 3: the object at "e" is past it.
        assert!(v["c"]["d"].get("e").is_none());
        assert_eq!(v["c"]["d"][OMITTED], 1);
        // The total: 12 values, the rest counted.
        let big = format!("[{}]", ["[1,2]"; 10].join(","));
        let lim = Limits {
            max_items: 100,
            ..lim
        };
        let v = from_slice(big.as_bytes(), lim).unwrap();
        let kept: usize = v.as_array().unwrap().len();
        assert!(kept < 10, "{v}");
        assert!(omitted(v.as_array().unwrap().last().unwrap()).unwrap() > 0);
        assert!(from_slice(b"[1,", lim).is_err());
    }
}
