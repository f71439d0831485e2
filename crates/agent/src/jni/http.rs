//! The platform transport: the agent's HTTP exchanges made by the facade's static
//! `OomGuard.http` (`java.net.HttpURLConnection`), called through JNI from the agent's I/O
//! thread. Why the platform's stack, and what stays in Rust: [`crate::net`].
//!
//! Invariants:
//! - The method id and the facade's class are looked up once, by `nativeStart` on the app's
//!   thread ([`JniTransport::find`]): on Android a native thread's `FindClass` sees only the boot
//!   class path. A facade without `http` (the ART tests' smali facade, or one minified without
//!   the consumer rules) gives no transport, and the caller falls back to the loopback twin.
//! - The calling thread is attached to the VM as a daemon on its first exchange (detached when
//!   it ends). Every local reference of an exchange lives in one local frame, popped before
//!   returning.
//! - A Java exception (the facade catches `Exception`; an `Error` such as `OutOfMemoryError`
//!   can still come through) is cleared and becomes a [`NetError`]: never a crash, never left
//!   pending.
//! - Java is handed the URL as the URL standard's parser writes it (`net::weburl`, the parser
//!   the rules judged it by): `java.net.URL` reads some spellings otherwise (a backslash in an
//!   http authority, percent-encoded hosts), and would contact another host than the one judged.
//! - A file body crosses as its path, offset and length: `OomGuard.http` streams it from the
//!   file in 64 KiB chunks, so a PATCH never puts a whole chunk of the spool into the Java heap
//!   of an app near its limit. The response comes back as one bounded `byte[]` (the wanted
//!   headers, at most `max_body` bytes of body), decoded by [`decode`].

use super::call;
use crate::net::{Body, NetError, Request, Response, Transport, USER_AGENT};
use jni::objects::{GlobalRef, JByteArray, JClass, JObject, JStaticMethodID, JValue};
use jni::signature::ReturnType;
use jni::JNIEnv;

/// `OomGuard.http`'s name and descriptor (the consumer ProGuard rules must keep both).
pub const HTTP_METHOD: &str = "http";
pub const HTTP_SIGNATURE: &str = "(Ljava/lang/String;Ljava/lang/String;[Ljava/lang/String;[BLjava/lang/String;JJIII[Ljava/lang/String;I)[B";

/// The facade's `http` method, callable from any thread of the process.
pub struct JniTransport {
    vm: jni::JavaVM,
    facade: GlobalRef,
    method: JStaticMethodID,
}

impl std::fmt::Debug for JniTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JniTransport(OomGuard.http)")
    }
}

impl JniTransport {
    /// The facade's `http` method, looked up on the calling thread; `None` (the lookup's
    /// exception cleared) when the facade has none.
    pub fn find(env: &mut JNIEnv, facade: &GlobalRef) -> Option<JniTransport> {
        let class: &JClass = <&JClass>::from(facade.as_obj());
        let method = match env.get_static_method_id(class, HTTP_METHOD, HTTP_SIGNATURE) {
            Ok(m) => m,
            Err(_) => {
                let _ = env.exception_clear();
                return None;
            }
        };
        let vm = env.get_java_vm().ok()?;
        Some(JniTransport {
            vm,
            facade: facade.clone(),
            method,
        })
    }

    fn call(&self, env: &mut JNIEnv, req: &Request<'_>) -> jni::errors::Result<Vec<u8>> {
        env.with_local_frame(16, |env| -> jni::errors::Result<Vec<u8>> {
            let method = env.new_string(req.method)?;
            let url = env.new_string(req.url)?;
            let mut pairs: Vec<(&str, &str)> = vec![("User-Agent", USER_AGENT)];
            pairs.extend(req.headers.iter().map(|(k, v)| (*k, v.as_str())));
            let headers = strings(env, pairs.iter().flat_map(|(k, v)| [*k, *v]))?;
            let want = strings(env, req.want.iter().copied())?;
            let (bytes, path, offset, len) = match req.body {
                Body::None => (JObject::null(), JObject::null(), 0, 0),
                Body::Bytes(b) => (env.byte_array_from_slice(b)?.into(), JObject::null(), 0, 0),
                Body::File { path, offset, len } => {
                    let p = env.new_string(path.to_string_lossy())?;
                    (JObject::null(), p.into(), offset, len)
                }
            };
            let ms = |d: std::time::Duration| d.as_millis().clamp(1, i32::MAX as u128) as i32;
            let args = [
                JValue::Object(&method),
                JValue::Object(&url),
                JValue::Object(&headers),
                JValue::Object(&bytes),
                JValue::Object(&path),
                JValue::Long(offset.min(i64::MAX as u64) as i64),
                JValue::Long(len.min(i64::MAX as u64) as i64),
                JValue::Int(ms(req.connect_timeout)),
                JValue::Int(ms(req.read_timeout)),
                JValue::Int(ms(req.deadline)),
                JValue::Object(&want),
                JValue::Int(req.max_body.min(i32::MAX as usize - 1) as i32),
            ]
            .map(|a| a.as_jni());
            let class: &JClass = <&JClass>::from(self.facade.as_obj());
            // SAFETY: `self.method` is `OomGuard.http` with HTTP_SIGNATURE, looked up on this
            // very class; `args` match that descriptor in number, order and type.
            let out = unsafe {
                env.call_static_method_unchecked(class, self.method, ReturnType::Array, &args)
            }?
            .l()?;
            if out.is_null() {
                return Ok(Vec::new());
            }
            env.convert_byte_array(JByteArray::from(out))
        })
    }
}

/// A `String[]` of `items`.
fn strings<'l, 'a>(
    env: &mut JNIEnv<'l>,
    items: impl Iterator<Item = &'a str>,
) -> jni::errors::Result<JObject<'l>> {
    let items: Vec<&str> = items.collect();
    let arr = env.new_object_array(items.len() as i32, "java/lang/String", JObject::null())?;
    for (i, s) in items.iter().enumerate() {
        let js = env.new_string(s)?;
        env.set_object_array_element(&arr, i as i32, &js)?;
        env.delete_local_ref(js)?;
    }
    Ok(arr.into())
}

impl Transport for JniTransport {
    fn name(&self) -> &'static str {
        "platform"
    }

    fn exchange(&self, req: &Request<'_>) -> Result<Response, NetError> {
        // The URL as the URL standard's parser (the one the rules judged it by) writes it:
        // `java.net.URL` reads some spellings otherwise (`http://a\@b/` is user info and
        // host b to it, host a to the standard; `%31` in a host), so it is given the
        // unambiguous form, in which both find the same host.
        let canonical = crate::net::weburl::Url::parse(req.url)
            .map_err(|e| NetError::new(format!("{}: not a URL ({e})", req.url)))?;
        let req = &Request {
            url: canonical.as_str(),
            ..req.clone()
        };
        let mut env = self
            .vm
            .attach_current_thread_as_daemon()
            .map_err(|e| NetError::new(format!("{}: attaching to the VM: {e}", req.url)))?;
        match self.call(&mut env, req) {
            Ok(frame) => decode(&frame, req.max_body)
                .map_err(|e| NetError::new(format!("{}: OomGuard.http: {e}", req.url)))?,
            Err(jni::errors::Error::JavaException) => {
                let what = call::take_exception(&mut env);
                Err(NetError::new(format!(
                    "{}: OomGuard.http threw {what}",
                    req.url
                )))
            }
            Err(e) => {
                let _ = env.exception_clear();
                Err(NetError::new(format!("{}: OomGuard.http: {e}", req.url)))
            }
        }
    }
}

/// Reads the frame `OomGuard.Http.frame` writes (big-endian `DataOutputStream`).
struct Frame<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Frame<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len());
        let end = end.ok_or_else(|| format!("frame cut short at byte {}", self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().unwrap_or_default(),
        ))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }
    /// `writeUTF`'s modified UTF-8 is UTF-8 for what headers and messages hold.
    fn utf(&mut self) -> Result<String, String> {
        let n = self.u16()? as usize;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
}

/// The facade's answer: `Ok(Ok(response))`, `Ok(Err(the exchange's error))`, or `Err` when
/// the frame itself is malformed.
pub fn decode(frame: &[u8], max_body: usize) -> Result<Result<Response, NetError>, String> {
    let mut f = Frame { b: frame, at: 0 };
    let status = f.i32()?;
    let sent = u64::try_from(f.i64()?).unwrap_or(0);
    if status < 0 {
        return Ok(Err(NetError {
            what: f.utf()?,
            sent,
        }));
    }
    let status = u16::try_from(status)
        .ok()
        .filter(|s| (100..1000).contains(s))
        .ok_or_else(|| format!("status {status} is not an HTTP status"))?;
    let n = f.i32()?;
    let mut headers = Vec::new();
    for _ in 0..n.clamp(0, 64) {
        headers.push((f.utf()?, f.utf()?));
    }
    let len = usize::try_from(f.i32()?).map_err(|_| "negative body length".to_string())?;
    if len > max_body {
        return Err(format!("body of {len} bytes over the {max_body} asked"));
    }
    let body = f.take(len)?.to_vec();
    let truncated = f.take(1)?[0] != 0;
    Ok(Ok(Response {
        status,
        headers,
        body,
        truncated,
        sent,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u16).to_be_bytes());
        out.extend(s.as_bytes());
    }

    #[test]
    fn frames_decode_and_bad_ones_are_errors() {
        let mut ok = Vec::new();
        ok.extend(201i32.to_be_bytes());
        ok.extend(7i64.to_be_bytes());
        ok.extend(1i32.to_be_bytes());
        utf(&mut ok, "Location");
        utf(&mut ok, "/files/ab");
        ok.extend(2i32.to_be_bytes());
        ok.extend(b"hi");
        ok.push(1);
        let r = decode(&ok, 100).unwrap().unwrap();
        assert_eq!((r.status, r.sent, r.truncated), (201, 7, true));
        assert_eq!(r.header("location"), Some("/files/ab"));
        assert_eq!(r.body, b"hi");
        assert!(decode(&ok, 1).unwrap_err().contains("over the 1 asked"));
        // A body of exactly the bytes asked for is read.
        assert_eq!(decode(&ok, 2).unwrap().unwrap().body, b"hi");
        // Status 0 (no exchange error is 0) and statuses outside 100..1000 are malformed.
        for status in [0i32, 99, 1000] {
            let mut bad = ok.clone();
            bad[..4].copy_from_slice(&status.to_be_bytes());
            let e = decode(&bad, 100).unwrap_err();
            assert_eq!(e, format!("status {status} is not an HTTP status"));
        }
        for cut in 0..ok.len() {
            assert!(decode(&ok[..cut], 100).is_err(), "cut at {cut}");
        }
        let mut err = Vec::new();
        err.extend((-1i32).to_be_bytes());
        err.extend(4096i64.to_be_bytes());
        utf(&mut err, "java.net.ConnectException: Connection refused");
        let e = decode(&err, 100).unwrap().unwrap_err();
        assert_eq!(e.sent, 4096);
        assert!(e.what.contains("Connection refused"));
    }
}
