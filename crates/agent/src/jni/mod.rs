//! Every `Java_…` export of the library, and the guard that keeps panics and errors from crossing
//! into the VM.
//!
//! Holds no logic and builds nothing: each entry converts its arguments, makes one call
//! (`nativeStart`: [`crate::pipeline::start()`], given the VM through [`Vm`], which this module
//! implements as the only one that speaks JNI; the others: the running agent's [`Handle`] or the
//! process's shared state), and converts the result into an error code.
//!
//! Invariants:
//! - Every entry runs inside `guard`: a panic becomes [`CODE_PANIC`] (or `null`) plus an error
//!   log line; no Java exception is ever left pending by us.
//! - `nativeStart` does no I/O and no policy work on the caller's thread: it reads its string
//!   arguments, has the pipeline spawn the `oomguard` thread and returns (well under 1 ms). A
//!   second start while the agent runs is refused with [`CODE_ALREADY_RUNNING`].
//! - `nativeStop` asks the agent to leave its loop and waits at most [`STOP_WAIT`] for its thread
//!   (it may be called on the app's main thread, and the agent may be in the middle of a dump or a
//!   policy fetch that takes far longer); past that the agent ends on its own thread as soon as it
//!   is done. Until its thread has ended, `start` is refused with [`CODE_ALREADY_RUNNING`] (never
//!   two agents in one process) and `dumpNow` and `stop` answer [`CODE_NOT_RUNNING`] at once (a
//!   second stop does not wait again; once the thread has ended, it is joined).
//! - Logging is set up once, here: liblog's `__android_log_write` (tag `OomGuard`) on Android and
//!   wherever the process has liblog loaded (ART off Android), else stderr; the level comes from
//!   `OOMGUARD_LOG` (default `info`).
//! - `nativeSetNetwork` only stores the report (lock-free) and, on a change to a connected network,
//!   queues a pass for the `oomguard-io` thread: it never does I/O on the caller's thread, and
//!   works before `start` too (the report is kept for the next start).
//! - The test-only panic hook (`OOMGUARD_TEST_PANIC=<entry>`) exists in debug builds only.
//! - The flight recorder (`FLIGHT`) is the process's, not one start's: `nativeLastWords` and
//!   `nativeExiting` reach it even while an agent is stopping; each is a lock and a copy.

pub(crate) mod call;
mod http;
mod log;
/// Test-only exports, built with the `test-probe` feature only: never in a shipped library.
#[cfg(feature = "test-probe")]
pub mod probe;
/// Test-only exports for the ART dump benchmark (`test-probe` feature).
#[cfg(feature = "test-probe")]
pub mod probe_art;
mod vm;

use crate::agent::{panic_message, Config, Shared};
use crate::pipeline::start::{AgentBody, Handle, StartArgs, Vm};
use crate::pipeline::NetworkState;
use crate::recorder::ExitInfoSource;
use crate::recorder::{Flight, LastWords, State};
use crate::trigger::Device;
use crate::upload::Network;
use jni::objects::{JClass, JObject, JString, JThrowable};
use jni::sys::{jboolean, jint, jstring};
use jni::JNIEnv;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tracing::{debug, error, info, warn};

pub use vm::{JniExitInfo, JniVm};

/// Success.
pub const CODE_OK: jint = 0;
/// `start` while the agent runs.
pub const CODE_ALREADY_RUNNING: jint = 1;
/// `stop`/`dumpNow` while the agent does not run.
pub const CODE_NOT_RUNNING: jint = 2;
/// A required argument is null or empty.
pub const CODE_BAD_ARGUMENT: jint = 3;
/// A panic was caught.
pub const CODE_PANIC: jint = 4;
/// Another error (logged).
pub const CODE_ERROR: jint = 5;

/// How long `stop` waits for the agent's thread to end. An idle agent ends within
/// milliseconds; one in a dump or a policy fetch finishes that first (up to the policy's
/// `dump.child_deadline_s` or `remote.timeout_ms`), which `stop` does not wait for.
pub const STOP_WAIT: Duration = Duration::from_secs(2);

/// The agent of this process, from `start` until a `stop` or `start` joins it.
static RUNNING: Mutex<Option<Handle>> = Mutex::new(None);
static SHARED: Mutex<Option<Arc<Shared>>> = Mutex::new(None);
/// The app's network reports: process-wide, so that a report made before `start` (or between
/// two starts) is kept.
static NETWORK: LazyLock<Arc<NetworkState>> = LazyLock::new(Default::default);

/// The process's flight recorder: the agent installs its ring here; the last words and the
/// exit mark reach it even while the agent is stopping.
static FLIGHT: LazyLock<Flight> = LazyLock::new(Default::default);

/// Set up the library's log once for the process (`log`: liblog or stderr, `OOMGUARD_LOG`).
pub fn init_logging() {
    log::init();
}

/// Run one JNI entry with a panic fence: a panic returns `on_panic` and logs an error.
fn guard<T>(entry: &'static str, on_panic: T, f: impl FnOnce() -> T) -> T {
    init_logging();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            error!(
                "{entry} panicked: {}; returned an error to the app, which is unaffected",
                panic_message(&*p)
            );
            on_panic
        }
    }
}

/// Test-only: panic in `entry` when `OOMGUARD_TEST_PANIC` names it (debug builds only).
fn maybe_panic(entry: &str) {
    if cfg!(debug_assertions) && std::env::var("OOMGUARD_TEST_PANIC").is_ok_and(|v| v == entry) {
        panic!("forced panic in {entry} (OOMGUARD_TEST_PANIC)");
    }
}

/// A Java string argument; `None` for null. Clears any exception it caused.
fn string_arg(env: &mut JNIEnv, s: &JString) -> Option<String> {
    if s.is_null() {
        return None;
    }
    match call::string(env, s) {
        Ok(text) => Some(text),
        Err(_) => {
            let _ = env.exception_clear();
            None
        }
    }
}

fn shared() -> Option<Arc<Shared>> {
    SHARED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// `OomGuard.nativeStart(policyJson, dataDir, appVersion, publicKey, manufacturer, apiLevel)`.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_OomGuard_nativeStart<'l>(
    mut env: JNIEnv<'l>,
    class: JClass<'l>,
    policy_json: JString<'l>,
    data_dir: JString<'l>,
    app_version: JString<'l>,
    public_key: JString<'l>,
    manufacturer: JString<'l>,
    api_level: jint,
) -> jint {
    guard("start", CODE_PANIC, || {
        maybe_panic("start");
        let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = running.as_ref() {
            if !r.is_finished() {
                if r.is_stopping() {
                    warn!("start refused: the agent is still stopping (it finishes the dump or policy fetch in flight first); start again later");
                } else {
                    warn!("start refused: the agent is already running");
                }
                return CODE_ALREADY_RUNNING;
            }
        }
        if let Some(old) = running.take() {
            let _ = old.join();
        }
        let Some(data_dir) = string_arg(&mut env, &data_dir).filter(|d| !d.is_empty()) else {
            warn!("start refused: dataDir is null or empty");
            return CODE_BAD_ARGUMENT;
        };
        let config = Config {
            policy_json: string_arg(&mut env, &policy_json).unwrap_or_default(),
            data_dir: data_dir.into(),
            app_version: string_arg(&mut env, &app_version).unwrap_or_default(),
            public_key: string_arg(&mut env, &public_key),
            device: Device::this(
                &string_arg(&mut env, &manufacturer).unwrap_or_default(),
                u32::try_from(api_level).unwrap_or(0),
            ),
        };
        let jvm = match env.get_java_vm() {
            Ok(vm) => vm,
            Err(e) => {
                error!("start failed: no JavaVM: {e}");
                return CODE_ERROR;
            }
        };
        // The agent thread cannot find the facade by name on Android (a native thread's
        // FindClass sees only the boot class path).
        let facade = match env.new_global_ref(&class) {
            Ok(c) => Some(c),
            Err(e) => {
                let _ = env.exception_clear();
                warn!("no global reference to the OomGuard class ({e}): a death report will not carry the system's exit record");
                None
            }
        };
        install_transport(&mut env, facade.as_ref());
        let args = StartArgs {
            config,
            network: NETWORK.clone(),
            flight: FLIGHT.clone(),
            vm: Box::new(JniRuntime { jvm, facade }),
        };
        match crate::pipeline::start(args) {
            Ok(handle) => {
                *SHARED.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle.shared().clone());
                *running = Some(handle);
                CODE_OK
            }
            Err(e) => {
                error!("start failed: {e}");
                CODE_ERROR
            }
        }
    })
}

/// Install the platform transport (the facade's `OomGuard.http`) for the agent's HTTP, or,
/// when the facade has none, leave the fallback (the loopback twin, which can reach nothing off
/// this machine; on Android none at all): said once in the log either way.
fn install_transport(env: &mut JNIEnv, facade: Option<&jni::objects::GlobalRef>) {
    match facade.and_then(|f| http::JniTransport::find(env, f)) {
        Some(t) => {
            info!("network: the platform's HttpURLConnection (OomGuard.http)");
            crate::net::install(Some(Arc::new(t)));
        }
        None => {
            #[cfg(not(target_os = "android"))]
            warn!("network: the facade has no OomGuard.http (minified away, or a VM without java.net): the built-in client is used, plain http to a loopback address only");
            #[cfg(target_os = "android")]
            warn!("network: the facade has no OomGuard.http (minified away without the consumer rules?): nothing can be fetched or uploaded");
            crate::net::install(None);
        }
    }
}

/// The VM as the pipeline sees it: the `JavaVM` `start` was called in, and the facade's class.
struct JniRuntime {
    jvm: jni::JavaVM,
    facade: Option<jni::objects::GlobalRef>,
}

impl JniRuntime {
    /// Another handle on the same VM.
    fn handle(&self) -> jni::errors::Result<jni::JavaVM> {
        // SAFETY: the pointer comes from a live JavaVM, which outlives the process's agent;
        // the holder only attaches threads through it.
        unsafe { jni::JavaVM::from_raw(self.jvm.get_java_vm_pointer()) }
    }
}

impl Vm for JniRuntime {
    fn attached(&self, agent: AgentBody<'_>) -> Result<(), String> {
        let mut env = self
            .jvm
            .attach_current_thread_as_daemon()
            .map_err(|e| format!("attaching to the VM: {e}"))?;
        name_java_thread(&mut env, "oomguard");
        let vm = JniVm::new(env).map_err(|e| format!("looking up Runtime/Thread methods: {e}"))?;
        info!("heap numbers read through {}", vm.heap_method());
        let (mut heap, mut stacks) = (&vm, &vm);
        agent(&mut heap, &mut stacks)
    }

    fn java_vm(&self) -> Result<jni::JavaVM, String> {
        self.handle().map_err(|e| e.to_string())
    }

    fn exit_info(&self) -> Option<Box<dyn ExitInfoSource + Send>> {
        let facade = self.facade.clone()?;
        let vm = self.handle().ok()?;
        Some(Box::new(JniExitInfo::new(vm, facade)))
    }
}

/// Names the calling thread's Java peer `name`: the VM attached it unnamed ("Thread-N" on
/// HotSpot, no name on ART), and thread lists, ANR traces and an incident's `javaThreads` should
/// say what it is. A VM without `Thread.setName` leaves it as it was.
fn name_java_thread(env: &mut JNIEnv, name: &str) {
    let r = env.with_local_frame(4, |env| -> jni::errors::Result<()> {
        let class = env.find_class("java/lang/Thread")?;
        let me =
            call::static_method(env, &class, "currentThread", "()Ljava/lang/Thread;", &[])?.l()?;
        let name = env.new_string(name)?;
        call::method(
            env,
            &me,
            "setName",
            "(Ljava/lang/String;)V",
            &[jni::objects::JValue::Object(&name)],
        )?;
        Ok(())
    });
    if let Err(e) = r {
        let _ = env.exception_clear();
        debug!("the agent thread keeps the VM's name: {e}");
    }
}

/// `OomGuard.nativeStop()`: stop the loop; join the thread if it ends within [`STOP_WAIT`].
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_OomGuard_nativeStop<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jint {
    guard("stop", CODE_PANIC, || {
        maybe_panic("stop");
        let stopping = {
            let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
            let Some(r) = running.as_mut() else {
                return CODE_NOT_RUNNING;
            };
            if r.is_stopping() {
                // An earlier stop is still under way: the agent no longer runs (as `dumpNow`
                // says too), and it ends on its own. This call does not wait for it again.
                if r.is_finished() {
                    if let Some(r) = running.take() {
                        let _ = r.join();
                    }
                }
                return CODE_NOT_RUNNING;
            }
            r.stop()
        };
        // Not under the lock: `status`, `dumpNow` and other threads' calls go on meanwhile.
        if !stopping.wait(STOP_WAIT) {
            warn!(
                "stop: the agent is finishing a dump or a policy fetch; it stops as soon as that is done (start is refused until then)"
            );
            return CODE_OK;
        }
        // Join this agent unless another `stop` (or a `start`) already did.
        let taken = RUNNING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_if(|r| r.is(&stopping));
        match taken.map(|r| r.join()) {
            Some(Err(_)) => CODE_ERROR,
            _ => CODE_OK,
        }
    })
}

/// `OomGuard.nativeDumpNow(reason)`: act now, on the agent thread.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_OomGuard_nativeDumpNow<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    reason: JString<'l>,
) -> jint {
    guard("dumpNow", CODE_PANIC, || {
        maybe_panic("dumpNow");
        let reason = string_arg(&mut env, &reason).unwrap_or_default();
        let running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        match running.as_ref() {
            Some(r) if r.dump_now(reason) => CODE_OK,
            _ => CODE_NOT_RUNNING,
        }
    })
}

/// `OomGuard.nativeStatus()`: the status JSON, or `null` if something went wrong.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_OomGuard_nativeStatus<'l>(
    env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jstring {
    guard("status", std::ptr::null_mut(), || {
        maybe_panic("status");
        let json = shared()
            .map(|s| s.status_json())
            .unwrap_or_else(|| r#"{"state":"not_started"}"#.to_string());
        match env.new_string(json) {
            Ok(s) => s.into_raw(),
            Err(_) => {
                let _ = env.exception_clear();
                std::ptr::null_mut()
            }
        }
    })
}

/// `OomGuard.nativeSetCurrentPage(page)`: remembered and recorded with the next verdict.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_OomGuard_nativeSetCurrentPage<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    page: JString<'l>,
) -> jint {
    guard("setCurrentPage", CODE_PANIC, || {
        maybe_panic("setCurrentPage");
        let page = string_arg(&mut env, &page).unwrap_or_default();
        match shared() {
            Some(s) => {
                s.set_page(&page);
                CODE_OK
            }
            None => CODE_NOT_RUNNING,
        }
    })
}

/// `OomGuard.nativeSetNetwork(connected, metered)`: the app's report on the network, used by
/// the next upload pass (a change to a connected network starts one).
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_OomGuard_nativeSetNetwork<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
    connected: jboolean,
    metered: jboolean,
) -> jint {
    guard("setNetwork", CODE_PANIC, || {
        maybe_panic("setNetwork");
        let n = Network {
            connected: connected != 0,
            metered: metered != 0,
        };
        NETWORK.set(n);
        debug!(
            connected = n.connected,
            metered = n.metered,
            "network reported by the app"
        );
        CODE_OK
    })
}

/// `OomGuard.nativeExiting(exiting)`: the VM is exiting normally (the facade's shutdown hook).
/// Marks the flight ring so that the next launch does not report a death (unless last words
/// were recorded before the exit). With `false`, nothing: the facade binds the method early.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_OomGuard_nativeExiting<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
    exiting: jboolean,
) -> jint {
    guard("exiting", CODE_PANIC, || {
        if exiting != 0 {
            FLIGHT.set_state(State::Exited);
        }
        CODE_OK
    })
}

/// How many frames of the fatal error the last words keep.
const LAST_WORDS_FRAMES: i32 = 16;

/// `OomGuard.nativeLastWords(thread, throwable)`: the facade's uncaught-exception handler saw a
/// memory-related fatal error. Its class, message, thread and top frames go into the flight ring's
/// trailer (a null `throwable` records nothing). Reading them may need the Java heap (the frames'
/// strings); whatever cannot be read (an allocation failing in an exhausted heap) is left out, and
/// nothing is left pending.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_OomGuard_nativeLastWords<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    thread: JObject<'l>,
    throwable: JThrowable<'l>,
) -> jint {
    guard("lastWords", CODE_PANIC, || {
        if throwable.is_null() {
            // The facade binds the method early with nulls.
            return CODE_BAD_ARGUMENT;
        }
        let w = read_last_words(&mut env, &thread, &throwable);
        if env.exception_check().unwrap_or(false) {
            let _ = env.exception_clear();
        }
        if FLIGHT.last_words(&w) {
            CODE_OK
        } else {
            CODE_NOT_RUNNING
        }
    })
}

/// The call's string result, or empty when it fails (its exception cleared).
fn call_string(env: &mut JNIEnv<'_>, obj: &JObject<'_>, method: &str) -> String {
    let r = call::method(env, obj, method, "()Ljava/lang/String;", &[]).and_then(|v| v.l());
    match r {
        Ok(o) if !o.is_null() => {
            let js = JString::from(o);
            let out = call::string(env, &js).unwrap_or_default();
            let _ = env.delete_local_ref(js);
            out
        }
        _ => {
            let _ = env.exception_clear();
            String::new()
        }
    }
}

fn read_last_words(env: &mut JNIEnv<'_>, thread: &JObject<'_>, t: &JThrowable<'_>) -> LastWords {
    let at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut w = LastWords {
        at_ms,
        class: String::new(),
        message: String::new(),
        thread: String::new(),
        frames: Vec::new(),
    };
    if t.is_null() {
        return w;
    }
    let _ = env.with_local_frame(LAST_WORDS_FRAMES + 8, |env| -> jni::errors::Result<()> {
        if let Ok(class) = env.get_object_class(t) {
            w.class = call_string(env, &class, "getName");
        }
        w.message = call_string(env, t, "getMessage");
        if !thread.is_null() {
            w.thread = call_string(env, thread, "getName");
        }
        let frames = call::method(
            env,
            t,
            "getStackTrace",
            "()[Ljava/lang/StackTraceElement;",
            &[],
        )
        .and_then(|v| v.l());
        let Ok(frames) = frames else {
            let _ = env.exception_clear();
            return Ok(());
        };
        if frames.is_null() {
            return Ok(());
        }
        let arr = jni::objects::JObjectArray::from(frames);
        let n = env
            .get_array_length(&arr)
            .unwrap_or(0)
            .min(LAST_WORDS_FRAMES);
        for i in 0..n {
            let Ok(f) = env.get_object_array_element(&arr, i) else {
                let _ = env.exception_clear();
                break;
            };
            let line = call_string(env, &f, "toString");
            let _ = env.delete_local_ref(f);
            if line.is_empty() {
                break;
            }
            w.frames.push(line);
        }
        Ok(())
    });
    w
}
