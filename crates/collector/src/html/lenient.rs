//! Reading a bounded JSON value ([`capped`](super::capped)) into `analyze`'s report types,
//! leniently, so that the pages and summaries read reports of older and newer versions
//! through the one schema (`analyze::report`) rather than by string keys.
//!
//! Invariants:
//! - A field of another type than the schema's reads as its default (a count that is a string
//!   is 0, a text that is a number is "", an object that is a list is all defaults); a field
//!   missing reads as its default (the types are `#[serde(default)]`); a field the schema does
//!   not know is ignored; a status the schema does not know is `UNKNOWN`.
//! - In a list that holds objects, an element that is not one is read past; the marker entries
//!   of [`capped`](super::capped) are never read as elements: [`Omitted`] counts them, by the
//!   list's place (a JSON pointer such as `/gcPaths/3/trace/nodes`).
//! - Nothing here allocates more than the value read already holds.
#![forbid(unsafe_code)]

use super::capped::{omitted, OMITTED};
use serde::de::value::{BorrowedStrDeserializer, Error};
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::Value;
use std::collections::BTreeMap;

/// Read `v` as `T` (see the module doc); `T::default()` if even that fails (a number out of
/// the field's range).
pub fn read<T: DeserializeOwned + Default>(v: &Value) -> T {
    T::deserialize(Lenient(v)).unwrap_or_default()
}

/// The entries [`capped`](super::capped) left out of each list of a value, by the list's JSON
/// pointer, counted as [`read`] reads the lists (elements read past do not count as places).
#[derive(Debug, Default)]
pub struct Omitted(BTreeMap<String, u64>);

impl Omitted {
    pub fn of(v: &Value) -> Omitted {
        let mut o = Omitted::default();
        o.walk(v, &mut String::new());
        o
    }

    /// Entries left out of the list at `pointer` (0 if none or no list).
    pub fn at(&self, pointer: &str) -> u64 {
        self.0.get(pointer).copied().unwrap_or(0)
    }

    fn walk(&mut self, v: &Value, at: &mut String) {
        let len = at.len();
        match v {
            Value::Array(a) => {
                let left: u64 = a.iter().filter_map(omitted).sum();
                if left > 0 {
                    self.0.insert(at.clone(), left);
                }
                for (i, e) in elements(a).enumerate() {
                    at.push_str(&format!("/{i}"));
                    self.walk(e, at);
                    at.truncate(len);
                }
            }
            Value::Object(m) => {
                for (k, e) in m {
                    if k != OMITTED {
                        at.push('/');
                        at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                        self.walk(e, at);
                        at.truncate(len);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The elements of a list as read: no marker entry, and in a list that holds objects, only
/// the objects.
fn elements(a: &[Value]) -> impl Iterator<Item = &Value> {
    let objects = a.iter().any(|e| e.is_object() && omitted(e).is_none());
    a.iter()
        .filter(move |e| omitted(e).is_none() && (!objects || e.is_object()))
}

/// A value as a forgiving deserializer (see the module doc).
#[derive(Clone, Copy)]
struct Lenient<'a>(&'a Value);

struct Seq<'a, I: Iterator<Item = &'a Value>>(I);

impl<'de, I: Iterator<Item = &'de Value>> de::SeqAccess<'de> for Seq<'de, I> {
    type Error = Error;
    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(Lenient(v)))
            .transpose()
    }
}

struct Map<'a, I: Iterator<Item = (&'a String, &'a Value)>> {
    it: I,
    value: Option<&'a Value>,
}

impl<'de, I: Iterator<Item = (&'de String, &'de Value)>> de::MapAccess<'de> for Map<'de, I> {
    type Error = Error;
    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.it.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(BorrowedStrDeserializer::new(k)).map(Some)
            }
            None => Ok(None),
        }
    }
    fn next_value_seed<V: de::DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(Lenient(self.value.take().unwrap_or(&Value::Null)))
    }
}

impl<'de> Lenient<'de> {
    fn seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        let empty: &[Value] = &[];
        let a = self.0.as_array().map_or(empty, Vec::as_slice);
        v.visit_seq(Seq(elements(a)))
    }

    fn map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        static EMPTY: std::sync::OnceLock<serde_json::Map<String, Value>> =
            std::sync::OnceLock::new();
        let m = match self.0.as_object() {
            Some(m) => m,
            None => EMPTY.get_or_init(serde_json::Map::new),
        };
        v.visit_map(Map {
            it: m.iter().filter(|(k, _)| *k != OMITTED),
            value: None,
        })
    }
}

macro_rules! unsigned {
    ($($f:ident),*) => {$(
        fn $f<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
            v.visit_u64(self.0.as_u64().unwrap_or(0))
        }
    )*};
}

macro_rules! signed {
    ($($f:ident),*) => {$(
        fn $f<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
            v.visit_i64(self.0.as_i64().unwrap_or(0))
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Lenient<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => v.visit_u64(u),
                (_, Some(i), _) => v.visit_i64(i),
                (_, _, f) => v.visit_f64(f.unwrap_or(0.0)),
            },
            Value::String(s) => v.visit_borrowed_str(s),
            Value::Array(_) => self.seq(v),
            Value::Object(_) => self.map(v),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_bool(self.0.as_bool().unwrap_or(false))
    }

    unsigned!(
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64
    );
    signed!(
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64
    );

    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_f64(self.0.as_f64().unwrap_or(0.0))
    }

    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_f64(self.0.as_f64().unwrap_or(0.0))
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_borrowed_str(self.0.as_str().unwrap_or(""))
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_str(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.map(v)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        self.map(v)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        // A unit variant by name; anything else is a name no variant has (an enum with a
        // `#[serde(other)]` variant reads it as that one).
        let name: &'de str = self.0.as_str().unwrap_or("");
        v.visit_enum(name.into_deserializer())
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }

    forward_to_deserialize_any! {
        i128 u128 char bytes byte_buf unit_struct tuple tuple_struct identifier
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyze::report::{DominatorGroup, GcPath, Report};
    use analyze::trace::Status;
    use serde_json::json;

    /// Fields of another type read as their defaults, lists of objects read past what is not
    /// one, unknown fields and statuses are taken in stride, and what the capped reader left
    /// out is counted by place.
    #[test]
    fn reads_what_it_can() {
        let v = json!({
            "gcPaths": [
                {"className": 7, "retainedSize": "x", "instanceCount": 3, "newField": [1],
                 "path": [{"reference": "a.B.c", "declaredClass": "a.B"}, "odd",
                          {OMITTED: 4}],
                 "trace": {"rootKind": "thread", "nodes": [{"status": "SOMEDAY"}]}},
                "not a leak",
                {"className": "a.C", "trace": "not one"},
                {OMITTED: 9}],
            "dominators": {"not": "a list"},
        });
        let r: Report = read(&v);
        assert_eq!(r.gc_paths.len(), 2);
        let g = &r.gc_paths[0];
        assert_eq!(
            (g.class_name.as_str(), g.retained_size, g.instance_count),
            ("", 0, 3)
        );
        assert_eq!(g.path.len(), 1);
        assert_eq!(g.path[0].declared_class, "a.B");
        assert_eq!(g.trace.nodes[0].status, Status::Unknown);
        assert_eq!(r.gc_paths[1].class_name, "a.C");
        assert!(r.gc_paths[1].trace.nodes.is_empty());
        assert!(r.dominators.is_empty());
        let o = Omitted::of(&v);
        assert_eq!((o.at("/gcPaths"), o.at("/gcPaths/0/path")), (9, 4));
        assert_eq!(o.at("/dominators"), 0);
        let d: DominatorGroup = read(&json!({"className": "a.D", "count": -1}));
        assert_eq!((d.class_name.as_str(), d.count), ("a.D", 0));
        let _: GcPath = read(&Value::Null);
    }
}
