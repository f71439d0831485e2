//! The machinery of the policy's one declaration (the `schema!` table in
//! [`schema`](super::schema)): the macro that turns a section's table of fields (name, type,
//! default, what it accepts, doc) into the section's struct, its `Default`, its reading and
//! validation, and its rows of the generated reference (`config/POLICY.md`); and the [`Spec`]s
//! that say what a field accepts.
//!
//! Invariants:
//! - A field's name, type, default, accepted values and doc are written once, in `schema!`;
//!   everything else about it (struct field, default, check, error message, reference row)
//!   comes from that line.
//! - Reading a field never fails the read: a bad field is recorded in [`Cx`] (naming its dotted
//!   path) and its default is kept, so every bad field of a document is named at once.
#![forbid(unsafe_code)]

use super::parse::{Cx, Obj};
use super::HeapThreshold;
use std::ops::RangeInclusive;

/// What one field accepts: reads it from its section (its default when missing; when bad, an
/// error naming it and its default) and describes it for the reference.
pub(crate) trait Spec<T> {
    /// Read `key` of `o`, `def` when missing or bad.
    fn read(&self, o: &mut Obj<'_>, cx: &mut Cx, key: &'static str, def: T) -> T;
    /// What the field accepts, in words, for the reference.
    #[cfg(test)]
    fn describe(&self) -> String;
    /// The fields of a nested section (none for a plain field).
    #[cfg(test)]
    fn fields(&self) -> Vec<FieldDoc> {
        Vec::new()
    }
}

/// A section of the document (an object): its fields are read and documented from `schema!`.
pub(crate) trait Section: Sized {
    /// Read every declared field of `o`, each defaulting to `d`'s.
    fn read_fields(o: &mut Obj<'_>, cx: &mut Cx, d: Self) -> Self;
    /// The declared fields, in order.
    #[cfg(test)]
    fn fields() -> Vec<FieldDoc>;
}

/// One declared field, as the reference shows it (built by tests only: the docs are not
/// shipped in the library).
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct FieldDoc {
    pub name: &'static str,
    /// The doc comment of the declaration, one line per source line.
    pub doc: &'static str,
    /// What it accepts ([`Spec::describe`]).
    pub accepts: String,
    /// Of a section: its fields; empty for a plain field.
    pub children: Vec<FieldDoc>,
}

#[cfg(test)]
impl FieldDoc {
    pub fn new<T, S: Spec<T>>(name: &'static str, doc: &'static str, spec: &S) -> FieldDoc {
        FieldDoc {
            name,
            doc,
            accepts: spec.describe(),
            children: spec.fields(),
        }
    }
}

/// Declares sections of the policy: for each `pub struct Name { /// doc  field: Type = default,
/// spec; ... }` it makes the struct (each field documented with its doc, default and spec), its
/// `Default`, and its [`Section`] impl (reading and validation, reference rows).
macro_rules! schema {
    ($(
        $(#[doc = $sdoc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident: $ty:ty = $def:expr, $spec:expr;
            )*
        }
    )*) => {$(
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!("Default `", stringify!($def), "`; accepts `", stringify!($spec), "`.")]
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $def,)* }
            }
        }

        impl $crate::policy::field::Section for $name {
            fn read_fields(
                o: &mut $crate::policy::parse::Obj<'_>,
                cx: &mut $crate::policy::parse::Cx,
                d: Self,
            ) -> Self {
                use $crate::policy::field::Spec;
                $name {
                    $($field: Spec::<$ty>::read(&$spec, o, cx, stringify!($field), d.$field),)*
                }
            }

            #[cfg(test)]
            fn fields() -> Vec<$crate::policy::field::FieldDoc> {
                vec![$(
                    $crate::policy::field::FieldDoc::new::<$ty, _>(
                        stringify!($field),
                        concat!($($doc, "\n",)*),
                        &$spec,
                    ),
                )*]
            }
        }
    )*};
}
pub(crate) use schema;

/// A whole number in the range.
impl Spec<u64> for RangeInclusive<u64> {
    fn read(&self, o: &mut Obj<'_>, cx: &mut Cx, key: &'static str, def: u64) -> u64 {
        o.u64(cx, key, def, self.clone())
    }
    #[cfg(test)]
    fn describe(&self) -> String {
        format!("whole number {}..={}", self.start(), self.end())
    }
}

/// A whole number in the range.
impl Spec<u32> for RangeInclusive<u32> {
    fn read(&self, o: &mut Obj<'_>, cx: &mut Cx, key: &'static str, def: u32) -> u32 {
        o.u32(cx, key, def, self.clone())
    }
    #[cfg(test)]
    fn describe(&self) -> String {
        format!("whole number {}..={}", self.start(), self.end())
    }
}

/// `true` or `false`.
pub(crate) struct Flag;

impl Spec<bool> for Flag {
    fn read(&self, o: &mut Obj<'_>, cx: &mut Cx, key: &'static str, def: bool) -> bool {
        o.bool(cx, key, def)
    }
    #[cfg(test)]
    fn describe(&self) -> String {
        "true or false".into()
    }
}

/// A whole number in the range, or null.
pub(crate) struct OrNull(pub RangeInclusive<u64>);

impl Spec<Option<u64>> for OrNull {
    fn read(
        &self,
        o: &mut Obj<'_>,
        cx: &mut Cx,
        key: &'static str,
        def: Option<u64>,
    ) -> Option<u64> {
        o.opt_u64(cx, key, def, self.0.clone())
    }
    #[cfg(test)]
    fn describe(&self) -> String {
        format!(
            "whole number {}..={}, or null",
            self.0.start(),
            self.0.end()
        )
    }
}

/// A URL the agent may contact (see [`super::url::check_url`]) of at most [`Url::MAX_BYTES`],
/// or null.
pub(crate) struct Url;

impl Url {
    /// The longest URL accepted.
    pub const MAX_BYTES: usize = 2048;
}

impl Spec<Option<String>> for Url {
    fn read(
        &self,
        o: &mut Obj<'_>,
        cx: &mut Cx,
        key: &'static str,
        def: Option<String>,
    ) -> Option<String> {
        o.url(cx, key, def, Url::MAX_BYTES)
    }
    #[cfg(test)]
    fn describe(&self) -> String {
        format!(
            "`https://` URL (plain `http://` only to a loopback address) of at most {} bytes, or null",
            Url::MAX_BYTES
        )
    }
}

/// One of the named values.
pub(crate) struct OneOf<T: 'static>(pub &'static [(&'static str, T)]);

impl<T: Copy> Spec<T> for OneOf<T> {
    fn read(&self, o: &mut Obj<'_>, cx: &mut Cx, key: &'static str, def: T) -> T {
        o.choice(cx, key, def, self.0)
    }
    #[cfg(test)]
    fn describe(&self) -> String {
        let names: Vec<String> = self.0.iter().map(|(n, _)| format!("`\"{n}\"`")).collect();
        format!("one of {}", names.join(", "))
    }
}

/// The heap's tiers: an array of [`HeapThreshold`]s, one of which has `min_max_heap_mb` 0.
pub(crate) struct Tiers;

impl Spec<Vec<HeapThreshold>> for Tiers {
    fn read(
        &self,
        o: &mut Obj<'_>,
        cx: &mut Cx,
        key: &'static str,
        def: Vec<HeapThreshold>,
    ) -> Vec<HeapThreshold> {
        o.thresholds(cx, key, def)
    }
    #[cfg(test)]
    fn describe(&self) -> String {
        let (n, m, p) = (
            HeapThreshold::COUNT,
            HeapThreshold::MIN_MAX_HEAP_MB,
            HeapThreshold::PERCENT,
        );
        format!(
            "array of {}..={} tiers `{{\"min_max_heap_mb\": {}..={}, \"percent\": {}..={}}}` (both required), one of them with `min_max_heap_mb` 0",
            n.start(),
            n.end(),
            m.start(),
            m.end(),
            p.start(),
            p.end()
        )
    }
}

/// A nested section (an object); missing, it is all defaults.
pub(crate) struct Nested;

impl<T: Section> Spec<T> for Nested {
    fn read(&self, o: &mut Obj<'_>, cx: &mut Cx, key: &'static str, def: T) -> T {
        let mut s = o.section(cx, key);
        let v = T::read_fields(&mut s, cx, def);
        s.finish(cx);
        v
    }
    #[cfg(test)]
    fn describe(&self) -> String {
        "object".into()
    }
    #[cfg(test)]
    fn fields(&self) -> Vec<FieldDoc> {
        T::fields()
    }
}
