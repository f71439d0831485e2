//! The VM seen from the agent thread: `Runtime` heap numbers through cached method ids and a
//! `GlobalRef`, and Java stacks through `Thread.getAllStackTraces`.
//!
//! Invariants:
//! - Method ids and the `Runtime`/`Thread` references are looked up once, in [`JniVm::new`]; a
//!   heap poll through JNI is two `CallLongMethodA` calls (three when the max heap is re-read)
//!   plus one `ExceptionCheck` each, and nothing else (no lookup by name, no local ref, no
//!   `GetEnv`, no local frame, no tracing span).
//! - Every local reference made while listing stacks lives in a local frame that is popped
//!   before returning, so nothing piles up on the long-lived agent thread.
//! - Any pending Java exception we caused is cleared before returning an error.
//! - The system's word on the previous process's end ([`JniExitInfo`]) is asked of the facade's
//!   static `exitRecord(int)`, through the `OomGuard` class reference `nativeStart` was called
//!   with: on Android a native thread's `FindClass` sees only the boot class path, never the
//!   app's classes.
//! - On HotSpot the heap numbers come from `JVM_TotalMemory`/`JVM_FreeMemory`/`JVM_MaxMemory`,
//!   the `libjvm.so` exports that `Runtime`'s own natives call (`Runtime.c` in libjava), found
//!   once through the library that holds the JNI function table. Each is one native→VM state
//!   transition, no Java call: measured in the JVM, the first `CallLongMethodA` after the agent
//!   thread slept costs ~20 µs (the JavaCalls/interpreter path is cold; warm it is ~0.2 µs),
//!   the direct call ~2 µs. Elsewhere (ART, or `OOMGUARD_HEAP_VIA_JNI=1`) the JNI calls are used.

use super::call;
use crate::recorder::exit_info::{self, ExitInfo, ExitInfoSource};
use crate::sample::{Heap, HeapSource, JavaStack, JavaThread, SampleError, StackSource};
use jni::objects::{
    GlobalRef, JClass, JMethodID, JObject, JObjectArray, JStaticMethodID, JString, JValue,
};
use jni::signature::{Primitive, ReturnType};
use jni::JNIEnv;
use std::cell::RefCell;
use std::ffi::CStr;

/// `jlong JVM_TotalMemory(void)` and its siblings, from HotSpot's `jvm.h`.
type JvmLongFn = unsafe extern "C" fn() -> jni::sys::jlong;

/// HotSpot's heap entry points, when this VM is HotSpot.
#[derive(Clone, Copy)]
struct HotSpotHeap {
    total: JvmLongFn,
    free: JvmLongFn,
    max: JvmLongFn,
}

impl HotSpotHeap {
    /// The entry points of the `libjvm.so` that implements `env`'s function table; `None` on
    /// any other VM, or when `OOMGUARD_HEAP_VIA_JNI` is set.
    fn find(env: &JNIEnv) -> Option<HotSpotHeap> {
        if std::env::var_os("OOMGUARD_HEAP_VIA_JNI").is_some() {
            return None;
        }
        let raw = env.get_raw();
        // SAFETY: `raw` is the live JNIEnv of this thread; its function table is the VM's.
        let get_version = unsafe { (**raw).GetVersion }? as *const libc::c_void;
        // SAFETY: Dl_info is plain C data, for which all-zero is a valid value.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only reads the loader's tables; `info` is a valid out-parameter.
        if unsafe { libc::dladdr(get_version, &mut info) } == 0 || info.dli_fname.is_null() {
            return None;
        }
        // SAFETY: dladdr returned a NUL-terminated file name owned by the loader.
        let file = unsafe { CStr::from_ptr(info.dli_fname) };
        if !file.to_bytes().ends_with(b"/libjvm.so") {
            return None;
        }
        // SAFETY: RTLD_NOLOAD only returns a handle to the already loaded libjvm.so (its
        // reference count is raised, so it stays loaded: it never unloads anyway).
        let lib = unsafe { libc::dlopen(file.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if lib.is_null() {
            return None;
        }
        let sym = |name: &CStr| -> Option<JvmLongFn> {
            // SAFETY: `lib` is a valid handle and `name` a C string.
            let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
            // SAFETY: these jvm.h exports take no arguments and return a jlong.
            (!p.is_null())
                .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, JvmLongFn>(p) })
        };
        Some(HotSpotHeap {
            total: sym(c"JVM_TotalMemory")?,
            free: sym(c"JVM_FreeMemory")?,
            max: sym(c"JVM_MaxMemory")?,
        })
    }
}

/// Handles to the VM for one attached thread. Implements both sample traits through `&JniVm`.
pub struct JniVm<'l> {
    env: RefCell<JNIEnv<'l>>,
    runtime: GlobalRef,
    max_memory: JMethodID,
    total_memory: JMethodID,
    free_memory: JMethodID,
    thread_class: GlobalRef,
    get_all_stack_traces: JStaticMethodID,
    hotspot: Option<HotSpotHeap>,
}

impl<'l> JniVm<'l> {
    /// Look everything up once. Must run on the thread `env` belongs to.
    pub fn new(mut env: JNIEnv<'l>) -> jni::errors::Result<Self> {
        let r = Self::lookup(&mut env);
        if r.is_err() {
            let _ = env.exception_clear();
        }
        let (runtime, max_memory, total_memory, free_memory, thread_class, get_all_stack_traces) =
            r?;
        let hotspot = HotSpotHeap::find(&env);
        Ok(JniVm {
            env: RefCell::new(env),
            runtime,
            max_memory,
            total_memory,
            free_memory,
            thread_class,
            get_all_stack_traces,
            hotspot,
        })
    }

    #[allow(clippy::type_complexity)]
    fn lookup(
        env: &mut JNIEnv<'l>,
    ) -> jni::errors::Result<(
        GlobalRef,
        JMethodID,
        JMethodID,
        JMethodID,
        GlobalRef,
        JStaticMethodID,
    )> {
        env.with_local_frame(8, |env| {
            let rt_class = env.find_class("java/lang/Runtime")?;
            let rt =
                call::static_method(env, &rt_class, "getRuntime", "()Ljava/lang/Runtime;", &[])?
                    .l()?;
            let runtime = env.new_global_ref(&rt)?;
            let max = env.get_method_id(&rt_class, "maxMemory", "()J")?;
            let total = env.get_method_id(&rt_class, "totalMemory", "()J")?;
            let free = env.get_method_id(&rt_class, "freeMemory", "()J")?;
            let th_class = env.find_class("java/lang/Thread")?;
            let get_all =
                env.get_static_method_id(&th_class, "getAllStackTraces", "()Ljava/util/Map;")?;
            let thread_class = env.new_global_ref(&th_class)?;
            Ok((runtime, max, total, free, thread_class, get_all))
        })
    }

    /// How heap numbers are read: `"hotspot"` (direct `JVM_*` calls) or `"jni"`.
    pub fn heap_method(&self) -> &'static str {
        if self.hotspot.is_some() {
            "hotspot"
        } else {
            "jni"
        }
    }

    fn long(&self, what: &'static str, mid: JMethodID) -> Result<u64, SampleError> {
        let mut env = self.env.borrow_mut();
        // SAFETY: `mid` was looked up on java.lang.Runtime with signature "()J" (no arguments,
        // returns long) and `self.runtime` is a global reference to a java.lang.Runtime.
        let r = unsafe {
            env.call_method_unchecked(
                self.runtime.as_obj(),
                mid,
                ReturnType::Primitive(Primitive::Long),
                &[],
            )
        };
        match r.and_then(|v| v.j()) {
            Ok(v) => Ok(u64::try_from(v).unwrap_or(0)),
            Err(e) => {
                let _ = env.exception_clear();
                Err(SampleError::Vm {
                    what,
                    why: e.to_string(),
                })
            }
        }
    }

    fn list_stacks(
        &self,
        wanted: &dyn Fn(&str) -> bool,
        max_threads: usize,
        max_frames: usize,
    ) -> jni::errors::Result<Vec<JavaStack>> {
        let mut env = self.env.borrow_mut();
        let class: &JClass = <&JClass>::from(self.thread_class.as_obj());
        let get_all = self.get_all_stack_traces;
        env.with_local_frame(16, |env| {
            // SAFETY: `get_all` is Thread.getAllStackTraces, looked up on `class`
            // (java.lang.Thread) with signature "()Ljava/util/Map;": static, no arguments, returns
            // an object.
            let map = unsafe {
                env.call_static_method_unchecked(class, get_all, ReturnType::Object, &[])
            }?
            .l()?;
            let set = call::method(env, &map, "entrySet", "()Ljava/util/Set;", &[])?.l()?;
            let arr = JObjectArray::from(
                call::method(env, &set, "toArray", "()[Ljava/lang/Object;", &[])?.l()?,
            );
            let n = env.get_array_length(&arr)?;
            let mut out = Vec::new();
            for i in 0..n {
                if out.len() >= max_threads {
                    break;
                }
                let one =
                    env.with_local_frame(16, |env| -> jni::errors::Result<Option<JavaStack>> {
                        let entry = env.get_object_array_element(&arr, i)?;
                        let thread =
                            call::method(env, &entry, "getKey", "()Ljava/lang/Object;", &[])?
                                .l()?;
                        let name = JString::from(
                            call::method(env, &thread, "getName", "()Ljava/lang/String;", &[])?
                                .l()?,
                        );
                        let name = call::string(env, &name)?;
                        if !wanted(&name) {
                            return Ok(None);
                        }
                        let frames = JObjectArray::from(
                            call::method(env, &entry, "getValue", "()Ljava/lang/Object;", &[])?
                                .l()?,
                        );
                        let k = env.get_array_length(&frames)?.max(0) as usize;
                        let mut lines = Vec::with_capacity(k.min(max_frames));
                        for j in 0..k.min(max_frames) {
                            let el = env.get_object_array_element(&frames, j as i32)?;
                            let s = JString::from(
                                call::method(env, &el, "toString", "()Ljava/lang/String;", &[])?
                                    .l()?,
                            );
                            lines.push(call::string(env, &s)?);
                            env.delete_local_ref(s)?;
                            env.delete_local_ref(el)?;
                        }
                        lines.extend(left_out(k, max_frames));
                        Ok(Some(JavaStack {
                            thread: name,
                            frames: lines,
                        }))
                    })?;
                out.extend(one);
            }
            Ok(out)
        })
    }
}

/// The line that ends the listing of a stack of `k` frames cut to its top `max`: how many were
/// left out (none when nothing was).
fn left_out(k: usize, max: usize) -> Option<String> {
    (k > max).then(|| format!("... {} more", k - max))
}

/// The first array `ThreadGroup.enumerate` is given: room for the group's estimate of its
/// threads (`activeCount`) and half as many again, and 8, at most `max`.
fn first_room(active: usize, max: usize) -> usize {
    (active + active / 2 + 8).min(max)
}

/// After `enumerate` put `got` threads in an array of `room`: `None` if the listing is whole
/// (the array had room to spare) or as long as it may be (`room` is `max`); else the length of
/// the next array, twice as long, at most `max` (threads started meanwhile, past the estimate).
fn next_room(got: usize, room: usize, max: usize) -> Option<usize> {
    if got < room || room == max {
        None
    } else {
        Some(room.saturating_mul(2).min(max))
    }
}

/// A HotSpot entry point's answer; negative (never seen) reads as 0.
fn hotspot_long(f: JvmLongFn) -> u64 {
    // SAFETY: called on the thread this `JniVm` was made on, which is attached to the VM and in
    // native state, as `JVM_ENTRY_NO_ENV` requires; the function takes no arguments.
    u64::try_from(unsafe { f() }).unwrap_or(0)
}

impl HeapSource for &JniVm<'_> {
    fn heap(&mut self) -> Result<Heap, SampleError> {
        if let Some(h) = self.hotspot {
            return Ok(Heap {
                max: hotspot_long(h.max),
                ..self.usage()?
            });
        }
        Ok(Heap {
            max: self.long("Runtime.maxMemory", self.max_memory)?,
            ..self.usage()?
        })
    }

    fn usage(&mut self) -> Result<Heap, SampleError> {
        // total before free, as Runtime's own accounting does: used = total - free.
        if let Some(h) = self.hotspot {
            let total = hotspot_long(h.total);
            let free = hotspot_long(h.free);
            return Ok(Heap {
                max: 0,
                total,
                free,
            });
        }
        let total = self.long("Runtime.totalMemory", self.total_memory)?;
        let free = self.long("Runtime.freeMemory", self.free_memory)?;
        Ok(Heap {
            max: 0,
            total,
            free,
        })
    }
}

/// A thread name longer than this (in characters) is cut: names go into every incident.
const MAX_THREAD_NAME: usize = 256;

impl JniVm<'_> {
    /// The live Java threads of the root thread group (the agent thread's group, then its
    /// parents), through `ThreadGroup.enumerate(Thread[], true)`: plain Java over the groups'
    /// lists on HotSpot and on ART, which suspends no thread (`Thread.getAllStackTraces` walks
    /// every stack).
    fn list_threads(&self, max: usize) -> jni::errors::Result<Vec<JavaThread>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut env = self.env.borrow_mut();
        let class: &JClass = <&JClass>::from(self.thread_class.as_obj());
        env.with_local_frame(16, |env| {
            let me = call::static_method(env, class, "currentThread", "()Ljava/lang/Thread;", &[])?
                .l()?;
            let mut group =
                call::method(env, &me, "getThreadGroup", "()Ljava/lang/ThreadGroup;", &[])?.l()?;
            if group.is_null() {
                return Ok(Vec::new());
            }
            // Groups nest a few deep; the bound only guards against a cycle.
            for _ in 0..64 {
                let parent =
                    call::method(env, &group, "getParent", "()Ljava/lang/ThreadGroup;", &[])?
                        .l()?;
                if parent.is_null() {
                    break;
                }
                let child = std::mem::replace(&mut group, parent);
                env.delete_local_ref(child)?;
            }
            let active = call::method(env, &group, "activeCount", "()I", &[])?.i()?;
            // activeCount is an estimate, and threads start meanwhile: enumerate stops at the
            // array's end, so an array it fills is made larger, up to `max`.
            let active = usize::try_from(active).unwrap_or(0);
            let max = max.min(i32::MAX as usize);
            let mut room = first_room(active, max);
            let (arr, got) = loop {
                let arr = env.new_object_array(room as i32, class, JObject::null())?;
                let got = call::method(
                    env,
                    &group,
                    "enumerate",
                    "([Ljava/lang/Thread;Z)I",
                    &[JValue::Object(&arr), JValue::Bool(1)],
                )?
                .i()?;
                let got = usize::try_from(got).unwrap_or(0).min(room);
                match next_room(got, room, max) {
                    None => break (arr, got),
                    Some(more) => room = more,
                }
                env.delete_local_ref(arr)?;
            };
            // Looked up once, not per thread (a process near its thread limit has thousands).
            let get_id = env.get_method_id(class, "getId", "()J")?;
            let get_name = env.get_method_id(class, "getName", "()Ljava/lang/String;")?;
            let mut out = Vec::with_capacity(got);
            for i in 0..got {
                let one = env.with_local_frame(4, |env| -> jni::errors::Result<_> {
                    let t = env.get_object_array_element(&arr, i as i32)?;
                    if t.is_null() {
                        return Ok(None);
                    }
                    // SAFETY: `get_id` is java.lang.Thread's "()J" (no arguments, returns long)
                    // and `t` is an element of a Thread[].
                    let id = unsafe {
                        env.call_method_unchecked(
                            &t,
                            get_id,
                            ReturnType::Primitive(Primitive::Long),
                            &[],
                        )
                    }?
                    .j()?;
                    // SAFETY: `get_name` is java.lang.Thread's "()Ljava/lang/String;" (no
                    // arguments, returns an object) and `t` is a Thread.
                    let name = unsafe {
                        env.call_method_unchecked(&t, get_name, ReturnType::Object, &[])
                    }?
                    .l()?;
                    let name = JString::from(name);
                    let name: String = if name.is_null() {
                        String::new()
                    } else {
                        call::string(env, &name)?
                    };
                    Ok(Some(JavaThread {
                        id,
                        name: name.chars().take(MAX_THREAD_NAME).collect(),
                    }))
                })?;
                out.extend(one);
            }
            Ok(out)
        })
    }
}

impl StackSource for &JniVm<'_> {
    fn threads(&mut self, max: usize) -> Result<Vec<JavaThread>, SampleError> {
        self.list_threads(max).map_err(|e| {
            let _ = self.env.borrow_mut().exception_clear();
            SampleError::Vm {
                what: "ThreadGroup.enumerate",
                why: e.to_string(),
            }
        })
    }

    fn stacks(
        &mut self,
        wanted: &dyn Fn(&str) -> bool,
        max_threads: usize,
        max_frames: usize,
    ) -> Result<Vec<JavaStack>, SampleError> {
        self.list_stacks(wanted, max_threads, max_frames)
            .map_err(|e| {
                let _ = self.env.borrow_mut().exception_clear();
                SampleError::Vm {
                    what: "Thread.getAllStackTraces",
                    why: e.to_string(),
                }
            })
    }
}

/// The system's record of a process's end, asked of the facade (`OomGuard.exitRecord(pid)`,
/// which asks `ActivityManager.getHistoricalProcessExitReasons` on API 30+, or the source the
/// app installed with `OomGuard.setExitInfoSource`) and parsed from its `key=value` text. It is
/// asked on a thread of the agent's own (`oomguard-exit`), which it attaches to the VM as a
/// daemon (detached when that thread ends).
pub struct JniExitInfo {
    vm: jni::JavaVM,
    /// The `dev.oomguard.OomGuard` class.
    facade: GlobalRef,
}

impl JniExitInfo {
    pub fn new(vm: jni::JavaVM, facade: GlobalRef) -> Self {
        JniExitInfo { vm, facade }
    }
}

impl ExitInfoSource for JniExitInfo {
    fn exit_info(&mut self, pid: u32) -> Result<Option<ExitInfo>, String> {
        let mut env = self
            .vm
            .attach_current_thread_as_daemon()
            .map_err(|e| format!("attaching to the VM to ask for pid {pid}'s exit record: {e}"))?;
        let class: &JClass = <&JClass>::from(self.facade.as_obj());
        let pid = i32::try_from(pid).map_err(|_| format!("pid {pid} does not fit a Java int"))?;
        let text = env.with_local_frame(4, |env| -> jni::errors::Result<Option<String>> {
            let v = call::static_method(
                env,
                class,
                "exitRecord",
                "(I)Ljava/lang/String;",
                &[jni::objects::JValue::Int(pid)],
            )?
            .l()?;
            if v.is_null() {
                return Ok(None);
            }
            Ok(Some(call::string(env, &JString::from(v))?))
        });
        match text {
            Ok(None) => Ok(None),
            Ok(Some(t)) => exit_info::parse_record(&t).map(Some),
            Err(e) => {
                let _ = env.exception_clear();
                Err(format!("OomGuard.exitRecord({pid}) failed: {e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stack cut to its top `max` frames ends with how many were left out, and only then.
    #[test]
    fn a_cut_stack_says_how_many_frames_it_left_out() {
        assert_eq!(left_out(45, 32).as_deref(), Some("... 13 more"));
        assert_eq!(left_out(33, 32).as_deref(), Some("... 1 more"));
        assert_eq!(left_out(32, 32), None);
        assert_eq!(left_out(3, 32), None);
    }

    /// The threads' array starts at the estimate and half again, plus 8, within `max`; it grows
    /// (twice, within `max`) only while `enumerate` fills it and `max` is not reached.
    #[test]
    fn the_threads_array_grows_only_while_enumerate_fills_it() {
        assert_eq!(first_room(0, 1000), 8);
        assert_eq!(first_room(10, 1000), 23);
        assert_eq!(first_room(800, 1000), 1000);
        assert_eq!(first_room(800, 5000), 1208);
        // Room to spare: the listing is whole.
        assert_eq!(next_room(22, 23, 1000), None);
        assert_eq!(next_room(0, 8, 1000), None);
        // Filled: more threads than the estimate; twice the room, within `max`.
        assert_eq!(next_room(23, 23, 1000), Some(46));
        assert_eq!(next_room(600, 600, 1000), Some(1000));
        // Filled at `max`: as long as it may be.
        assert_eq!(next_room(1000, 1000, 1000), None);
        assert_eq!(next_room(8, 8, 8), None);
    }
}
