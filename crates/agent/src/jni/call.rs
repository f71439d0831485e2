//! Java method calls by name and descriptor: what `JNIEnv::call_method` and
//! `call_static_method` do (the method looked up, the arguments checked against the descriptor
//! before the call), through one instantiation each of jni's unchecked calls.
//!
//! Why not jni's own: each receiver type and each way of naming the method made one more copy of
//! jni's 10 KB call in the shipped library, and its descriptor check parses with a parser crate
//! (issue 41, the library's size). The descriptor is read here by hand: the argument types
//! (`Z B C S I J F D`, `L…;` and `[…` for references) and the return type.

use jni::errors::{Error, Result};
use jni::objects::{JClass, JObject, JString, JValue, JValueOwned};
use jni::signature::{Primitive, ReturnType};
use jni::sys::jvalue;
use jni::JNIEnv;

/// `obj.name(args)`, the method found on `obj`'s class by `name` and `sig`.
pub(crate) fn method<'l>(
    env: &mut JNIEnv<'l>,
    obj: &JObject<'_>,
    name: &str,
    sig: &str,
    args: &[JValue<'_, '_>],
) -> Result<JValueOwned<'l>> {
    if obj.is_null() {
        return Err(Error::NullPtr("call_method obj argument"));
    }
    let (ret, raw) = checked(sig, args)?;
    let class = env.get_object_class(obj)?;
    let id = env.get_method_id(&class, name, sig);
    let _ = env.delete_local_ref(class);
    let id = id?;
    // SAFETY: `id` is the method `name` with descriptor `sig` of `obj`'s own class, and
    // `checked` matched `args` to `sig` in number and kind and gave `sig`'s return type.
    unsafe { env.call_method_unchecked(obj, id, ret, &raw) }
}

/// The static `class.name(args)`.
pub(crate) fn static_method<'l>(
    env: &mut JNIEnv<'l>,
    class: &JClass<'_>,
    name: &str,
    sig: &str,
    args: &[JValue<'_, '_>],
) -> Result<JValueOwned<'l>> {
    let (ret, raw) = checked(sig, args)?;
    let id = env.get_static_method_id(class, name, sig)?;
    // SAFETY: `id` is the static method `name` with descriptor `sig` of `class`, and `checked`
    // matched `args` to `sig` in number and kind and gave `sig`'s return type.
    unsafe { env.call_static_method_unchecked(class, id, ret, &raw) }
}

/// The text of `s`, a `java.lang.String`: what a method whose descriptor returns
/// `Ljava/lang/String;` gave, or a native method's `String` parameter. An error for null.
///
/// Why not `JNIEnv::get_string`: jni 0.21 checks the object's class first (`FindClass` and
/// `GetObjectClass`), two lookups and two local references it never deletes, per string. A
/// Java stack's 32 lines took 64 of them in a local frame made for 16, which HotSpot's
/// `-Xcheck:jni` reported for every thread listed ("JNI local refs: 52, exceeds capacity:
/// 51").
pub(crate) fn string(env: &mut JNIEnv<'_>, s: &JString<'_>) -> Result<String> {
    // SAFETY: `s` is null (refused with `NullPtr`) or a java.lang.String: the VM checks a
    // method's return value against its descriptor, and a native method's arguments against
    // its declared parameter types.
    unsafe { env.get_string_unchecked(s) }.map(String::from)
}

/// The pending Java exception as text (its `toString`), cleared: for an error message after a
/// call that threw.
pub(crate) fn take_exception(env: &mut JNIEnv) -> String {
    let Ok(t) = env.exception_occurred() else {
        return "a Java exception".into();
    };
    let _ = env.exception_clear();
    if t.is_null() {
        return "a JNI error without a Java exception".into();
    }
    let text = method(env, &t, "toString", "()Ljava/lang/String;", &[])
        .and_then(|v| v.l())
        .and_then(|s| string(env, &s.into()));
    let _ = env.exception_clear();
    let _ = env.delete_local_ref(t);
    text.unwrap_or_else(|_| "a Java exception (its toString failed too)".into())
}

/// The return type of the method descriptor `sig` and the arguments as JNI values, when `args`
/// match its parameters in number and kind (each primitive its own type, a reference for
/// `L…;`/`[…`); an error naming the descriptor otherwise.
fn checked(sig: &str, args: &[JValue<'_, '_>]) -> Result<(ReturnType, Vec<jvalue>)> {
    let bad = || Error::WrongJValueType("the arguments of the method descriptor", "others");
    let b = sig.as_bytes();
    if b.first() != Some(&b'(') {
        return Err(bad());
    }
    let mut at = 1;
    let mut n = 0;
    while b.get(at) != Some(&b')') {
        let (kind, next) = one_type(b, at).ok_or_else(bad)?;
        let arg = args.get(n).ok_or_else(bad)?;
        // A primitive parameter takes that primitive, a reference parameter a reference.
        if arg.primitive_type() != kind {
            return Err(bad());
        }
        (at, n) = (next, n + 1);
    }
    if n != args.len() {
        return Err(bad());
    }
    let ret = match b.get(at + 1) {
        Some(b'V') if at + 2 == b.len() => ReturnType::Primitive(Primitive::Void),
        _ => match one_type(b, at + 1) {
            Some((Some(p), end)) if end == b.len() => ReturnType::Primitive(p),
            Some((None, end)) if end == b.len() => ReturnType::Object,
            _ => return Err(bad()),
        },
    };
    Ok((ret, args.iter().map(|a| a.as_jni()).collect()))
}

/// The type that starts at `b[at]`: its primitive (`None` for a reference) and where the next
/// starts.
fn one_type(b: &[u8], at: usize) -> Option<(Option<Primitive>, usize)> {
    let p = match *b.get(at)? {
        b'Z' => Primitive::Boolean,
        b'B' => Primitive::Byte,
        b'C' => Primitive::Char,
        b'S' => Primitive::Short,
        b'I' => Primitive::Int,
        b'J' => Primitive::Long,
        b'F' => Primitive::Float,
        b'D' => Primitive::Double,
        b'L' => {
            let end = at + b[at..].iter().position(|&c| c == b';')?;
            return (end > at + 1).then_some((None, end + 1));
        }
        b'[' => {
            let (_, next) = one_type(b, at + 1)?;
            return Some((None, next));
        }
        _ => return None,
    };
    Some((Some(p), at + 1))
}

#[cfg(test)]
mod tests {
    use super::checked;
    use jni::objects::{JObject, JValue};
    use jni::signature::{Primitive, ReturnType};

    /// Descriptors are read as the JVM reads them, and arguments that do not match them in
    /// number or kind are refused before any call.
    #[test]
    fn arguments_are_checked_against_the_descriptor() {
        let null = JObject::null();
        let o = JValue::Object(&null);
        let ret = |sig: &str, args: &[JValue]| checked(sig, args).map(|(r, _)| r).ok();
        assert!(matches!(
            ret("()V", &[]),
            Some(ReturnType::Primitive(Primitive::Void))
        ));
        assert!(matches!(
            ret("()J", &[]),
            Some(ReturnType::Primitive(Primitive::Long))
        ));
        assert!(matches!(
            ret("()Ljava/lang/String;", &[]),
            Some(ReturnType::Object)
        ));
        assert!(matches!(ret("()[[I", &[]), Some(ReturnType::Object)));
        assert!(ret("(Ljava/lang/String;Z)V", &[o, JValue::Bool(1)]).is_some());
        assert!(ret("([Ljava/lang/Thread;Z)I", &[o, JValue::Bool(1)]).is_some());
        assert!(ret("(I)Ljava/lang/String;", &[JValue::Int(7)]).is_some());
        assert!(ret("(JI[B)[B", &[JValue::Long(1), JValue::Int(2), o]).is_some());
        // Wrong number, wrong kind, a primitive for a reference, bad descriptors.
        assert!(ret("(I)V", &[]).is_none());
        assert!(ret("()V", &[JValue::Int(1)]).is_none());
        assert!(ret("(I)V", &[JValue::Long(1)]).is_none());
        assert!(ret("(Ljava/lang/String;)V", &[JValue::Int(1)]).is_none());
        assert!(ret("(I)V", &[o]).is_none());
        // Every primitive by its letter.
        let all = [
            JValue::Bool(1),
            JValue::Byte(2),
            JValue::Char(3),
            JValue::Short(4),
            JValue::Int(5),
            JValue::Long(6),
            JValue::Float(7.0),
            JValue::Double(8.0),
        ];
        assert!(ret("(ZBCSIJFD)V", &all).is_some());
        for (sig, p) in [
            ("()C", Primitive::Char),
            ("()S", Primitive::Short),
            ("()F", Primitive::Float),
            ("()D", Primitive::Double),
        ] {
            assert!(
                matches!(ret(sig, &[]), Some(ReturnType::Primitive(q)) if q == p),
                "{sig}"
            );
        }
        // Bad descriptors with arguments that would otherwise fit: a class name that is empty,
        // a return type followed by more.
        assert!(ret("(L;)V", &[o]).is_none());
        assert!(ret("(La;)V", &[o]).is_some());
        assert!(ret("()II", &[]).is_none());
        assert!(ret("()Ljava/lang/String;I", &[]).is_none());
        for bad in [
            "",
            "V",
            "(",
            "()",
            "(I",
            "()VV",
            "(L;)V",
            "(Ljava/lang/String)V",
            "()Q",
        ] {
            assert!(checked(bad, &[]).is_err(), "{bad:?}");
        }
    }
}
