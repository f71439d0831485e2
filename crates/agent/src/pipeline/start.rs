//! One start of the agent: the object graph (sampler sources, dumper, [`Pipeline`], [`Agent`])
//! built on a thread of its own named `oomguard`, and the [`Handle`] `jni` keeps to stop it.
//!
//! What decides what:
//! - **The dumper** is chosen by the runtime that is loaded in this process
//!   ([`loaded_runtime`]: the loader's list, else `/proc/self/maps`): ART's fork dumper when
//!   `libart.so` is loaded, the in-process HotSpot dumper when `libjvm.so` is. Neither (or ART
//!   with an unknown API level) is an explicit error, logged once, and every dump is then
//!   refused with its reason; the verdicts are still reported without a dump.
//! - **The API level** the app passes is what it truly is, Android's: the ART dumper's symbol
//!   probing and suspend sequence (below 30: `Dbg::SuspendVM`), the trigger's Huawei thread
//!   limit, and the network assumed before the app reports one (metered on Android).
//!
//! The VM itself is reached only through [`Vm`], which `jni` implements: this module speaks no
//! JNI and holds no unsafe code.
//!
//! Invariants:
//! - [`start`] does no I/O and no policy work on the caller's thread (the app's main thread):
//!   it spawns the `oomguard` thread and returns.
//! - The agent thread's end (also by a panic, caught here and written to the status as
//!   `failed`) is always signalled, so that [`Stopping::wait`] is bounded.

use super::{NetworkState, Pipeline};
use crate::agent::{panic_message, Agent, Command, Config, Shared};
use crate::dump::{self, DumpOutcome, DumpRequest, Dumper};
use crate::recorder::{ExitInfoSource, Flight};
use crate::sample::{Heap, HeapSource, JavaStack, JavaThread, SampleError, StackSource};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use tracing::{error, info};

/// What went wrong starting the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot spawn the oomguard thread: {0}")]
    Spawn(std::io::Error),
}

/// The agent's body, run by [`Vm::attached`] with the VM's heap numbers and Java stacks.
pub type AgentBody<'a> =
    Box<dyn FnOnce(&mut dyn HeapSource, &mut dyn StackSource) -> Result<(), String> + 'a>;

/// The VM as the agent needs it; implemented by `jni`, the only module that speaks JNI.
pub trait Vm: Send + 'static {
    /// On the calling thread (the new `oomguard` thread): attach to the VM (as a daemon), and
    /// run `agent` with the VM's heap numbers and Java stacks; its result, or why the VM could
    /// not be reached.
    fn attached(&self, agent: AgentBody<'_>) -> Result<(), String>;
    /// A handle on the VM for the HotSpot dumper, which calls into Java from the agent thread.
    fn java_vm(&self) -> Result<jni::JavaVM, String>;
    /// Where the system's word on the previous process's end is asked (Android's exit
    /// records, through the facade); `None` when it cannot be.
    fn exit_info(&self) -> Option<Box<dyn ExitInfoSource + Send>>;
}

/// What [`start`] needs: the app's arguments, the process's network reports and flight
/// recorder (both outlive one start), and the VM.
pub struct StartArgs {
    pub config: Config,
    pub network: Arc<NetworkState>,
    pub flight: Flight,
    pub vm: Box<dyn Vm>,
}

/// The runtime loaded in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// `libart.so` is mapped: Android's runtime (or Debian's ART on Linux).
    Art,
    /// `libjvm.so` is mapped: HotSpot.
    HotSpot,
}

/// The runtime whose library is loaded in this process: by the loader's list (the name the
/// dumpers look their symbols up by), else by `/proc/self/maps` (which shows the file a link
/// such as Debian's `libart.so` → `libart.so.0` resolves to); an error saying what was looked
/// for when neither is there.
pub fn loaded_runtime() -> Result<Runtime, String> {
    if crate::hook::got::find_loaded("libart.so").is_some() {
        return Ok(Runtime::Art);
    }
    if crate::hook::got::find_loaded("libjvm.so").is_some() {
        return Ok(Runtime::HotSpot);
    }
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("/proc/self/maps: {e}: the runtime cannot be told"))?;
    runtime_in(&maps).ok_or_else(|| {
        "neither libart.so (ART) nor libjvm.so (HotSpot) is loaded in this process: no dumper for this runtime".to_string()
    })
}

/// The runtime in a `/proc/PID/maps` text: a file named `libart.so` (or `libart.so.N`) is ART,
/// else one named `libjvm.so` is HotSpot (a process holds one VM).
fn runtime_in(maps: &str) -> Option<Runtime> {
    let mapped = |lib: &str| {
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .map(|p| p.rsplit('/').next().unwrap_or(p))
            .any(|name| {
                name.strip_prefix(lib)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
            })
    };
    if mapped("libart.so") {
        Some(Runtime::Art)
    } else if mapped("libjvm.so") {
        Some(Runtime::HotSpot)
    } else {
        None
    }
}

/// The dumper for the runtime that is loaded; one that refuses with the reason (logged here,
/// once) when there is none.
fn runtime_dumper(vm: &dyn Vm, api_level: u32) -> Box<dyn Dumper> {
    let chosen = match loaded_runtime() {
        Ok(Runtime::Art) if api_level == 0 => Err(
            "ART is loaded but the app passed no API level: its fork dumper's symbols and suspend sequence depend on it".to_string(),
        ),
        Ok(Runtime::Art) => Ok(Box::new(dump::art::ArtForkDumper::new(api_level)) as Box<dyn Dumper>),
        Ok(Runtime::HotSpot) => vm
            .java_vm()
            .map(|j| Box::new(dump::hotspot::HotSpotDumper::new(j)) as Box<dyn Dumper>)
            .map_err(|e| format!("no JavaVM handle for the dumper: {e}")),
        Err(why) => Err(why),
    };
    chosen.unwrap_or_else(|why| {
        error!("{why}; dumps are refused, verdicts are reported without one");
        Box::new(NoDumper(why))
    })
}

/// A runtime where no dumper could be set up: every dump is refused with the reason.
struct NoDumper(String);

impl Dumper for NoDumper {
    fn name(&self) -> &'static str {
        "none"
    }
    fn check(&mut self) -> dump::Result<()> {
        Err(dump::Error::Unsupported(self.0.clone()))
    }
    fn dump(&mut self, _: &DumpRequest) -> dump::Result<DumpOutcome> {
        Err(dump::Error::Unsupported(self.0.clone()))
    }
}

/// The agent thread of this process, from [`start`] until it is joined.
pub struct Handle {
    tx: crate::agent::inbox::Commands,
    thread: std::thread::JoinHandle<()>,
    ended: Arc<Ended>,
    /// A stop was asked: the agent is on its way out.
    stopping: bool,
    shared: Arc<Shared>,
}

/// Set as the agent thread's last step (also when it panicked), so that a stop can wait for it
/// with a bound.
#[derive(Default)]
struct Ended {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Ended {
    fn set(&self) {
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }

    /// Wait at most `limit`; true once the thread has ended.
    fn wait(&self, limit: Duration) -> bool {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let (done, _) = self
            .cv
            .wait_timeout_while(done, limit, |d| !*d)
            .unwrap_or_else(|p| p.into_inner());
        *done
    }
}

/// Sets [`Ended`] when dropped: at the end of the agent thread's body, whatever happened in it.
struct SetOnDrop(Arc<Ended>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// A stop under way: what [`Handle::stop`] hands back to wait on without holding the handle.
pub struct Stopping(Arc<Ended>);

impl Stopping {
    /// Wait at most `limit` for the agent thread to end; true once it has.
    pub fn wait(&self, limit: Duration) -> bool {
        self.0.wait(limit)
    }
}

impl Handle {
    /// The state `status`, `setCurrentPage` and the agent share.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The agent thread has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// A stop was asked.
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Ask the agent to leave its loop; wait on what comes back (not under a lock).
    pub fn stop(&mut self) -> Stopping {
        let _ = self.tx.send(Command::Stop);
        self.stopping = true;
        Stopping(self.ended.clone())
    }

    /// This handle is the agent `stopping` waits for.
    pub fn is(&self, stopping: &Stopping) -> bool {
        Arc::ptr_eq(&self.ended, &stopping.0)
    }

    /// Ask for a dump now; false when the agent is stopping or gone.
    pub fn dump_now(&self, reason: String) -> bool {
        !self.stopping && self.tx.send(Command::DumpNow(reason)).is_ok()
    }

    /// Wait for the agent thread; `Err` (the panic's message) when it panicked outside its
    /// own fence.
    pub fn join(self) -> Result<(), String> {
        self.thread.join().map_err(|p| panic_message(&*p))
    }
}

/// Start the agent: spawn the `oomguard` thread, which attaches to the VM, builds the sampler
/// sources, the runtime's dumper, the [`Pipeline`] and the [`Agent`], and runs its loop.
pub fn start(args: StartArgs) -> Result<Handle, Error> {
    let shared = Arc::new(Shared::default().with_flight(args.flight));
    let (tx, rx) = crate::agent::inbox::channel();
    let ended = Arc::new(Ended::default());
    let on_end = SetOnDrop(ended.clone());
    let thread_shared = shared.clone();
    let thread = std::thread::Builder::new()
        .name("oomguard".into())
        .spawn(move || {
            let _on_end = on_end;
            agent_thread(args.vm, args.config, args.network, thread_shared, rx)
        })
        .map_err(Error::Spawn)?;
    Ok(Handle {
        tx,
        thread,
        ended,
        stopping: false,
        shared,
    })
}

/// A `&mut dyn HeapSource` as the agent's heap source.
struct HeapOf<'a>(&'a mut dyn HeapSource);

impl HeapSource for HeapOf<'_> {
    fn heap(&mut self) -> Result<Heap, SampleError> {
        self.0.heap()
    }
    fn usage(&mut self) -> Result<Heap, SampleError> {
        self.0.usage()
    }
}

/// A `&mut dyn StackSource` as the agent's stack source.
struct StacksOf<'a>(&'a mut dyn StackSource);

impl StackSource for StacksOf<'_> {
    fn threads(&mut self, max: usize) -> Result<Vec<JavaThread>, SampleError> {
        self.0.threads(max)
    }
    fn stacks(
        &mut self,
        wanted: &dyn Fn(&str) -> bool,
        max_threads: usize,
        max_frames: usize,
    ) -> Result<Vec<JavaStack>, SampleError> {
        self.0.stacks(wanted, max_threads, max_frames)
    }
}

/// The body of the `oomguard` thread: attach, build, run; a failure or panic is logged and
/// written to the status as `failed`, never propagated.
fn agent_thread(
    vm: Box<dyn Vm>,
    cfg: Config,
    network: Arc<NetworkState>,
    shared: Arc<Shared>,
    rx: crate::agent::inbox::Inbox,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
        let vm = &*vm;
        let body_shared = shared.clone();
        vm.attached(Box::new(move |heap, stacks| {
            let pipeline = Pipeline::new(
                &cfg.data_dir,
                &cfg.app_version,
                runtime_dumper(vm, cfg.device.api_level),
                None,
            )
            .with_network(network);
            let agent = Agent::new(cfg, HeapOf(heap), StacksOf(stacks), pipeline, body_shared)
                .map_err(|e| e.to_string())?;
            info!("agent started");
            match vm.exit_info() {
                Some(exits) => agent.run_with(rx, exits),
                None => agent.run(rx),
            }
            .map_err(|e| e.to_string())
        }))
    }));
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(p) => Some(format!("panicked: {}", panic_message(&*p))),
    };
    if let Some(e) = failure {
        error!("agent failed: {e}; it is not running, the app is unaffected");
        let json = serde_json::json!({ "state": "failed", "error": e }).to_string();
        shared.set_status_json(json);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{NoStacks, ScriptedHeap};

    /// A VM for the agent thread: it runs the body with a scripted heap (after `gate`, when
    /// given, says go), fails to attach, or panics.
    enum TestVm {
        Runs(Option<std::sync::mpsc::Receiver<()>>),
        Fails,
        Panics,
    }

    impl Vm for TestVm {
        fn attached(&self, agent: AgentBody<'_>) -> Result<(), String> {
            match self {
                TestVm::Runs(gate) => {
                    if let Some(g) = gate {
                        let _ = g.recv();
                    }
                    let heap = Heap {
                        max: 256 << 20,
                        total: 10 << 20,
                        free: 0,
                    };
                    agent(&mut ScriptedHeap::new(vec![heap]), &mut NoStacks)
                }
                TestVm::Fails => Err("no VM to attach to".into()),
                TestVm::Panics => panic!("the VM went away"),
            }
        }
        fn java_vm(&self) -> Result<jni::JavaVM, String> {
            Err("no JavaVM in this test".into())
        }
        fn exit_info(&self) -> Option<Box<dyn ExitInfoSource + Send>> {
            None
        }
    }

    fn started(dir: &std::path::Path, vm: TestVm) -> Handle {
        start(StartArgs {
            config: Config {
                policy_json: r#"{"poll_interval_ms": 100}"#.into(),
                data_dir: dir.to_path_buf(),
                app_version: "1.0".into(),
                ..Config::default()
            },
            network: Arc::new(NetworkState::default()),
            flight: Flight::default(),
            vm: Box::new(vm),
        })
        .unwrap()
    }

    /// A stop is asked without waiting, then waited for with a bound: false while the agent
    /// thread runs on, true once it has ended; no dump is taken once a stop was asked.
    #[test]
    fn a_stop_is_waited_for_with_a_bound_until_the_agent_thread_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = started(dir.path(), TestVm::Runs(None));
        // The agent polls the VM's heap numbers (256 MiB at most).
        let t0 = std::time::Instant::now();
        while !h
            .shared()
            .status_json()
            .contains(&(256u64 << 20).to_string())
        {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{}",
                h.shared().status_json()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!h.is_stopping());
        assert!(h.dump_now("before the stop".into()));
        let stopping = h.stop();
        assert!(h.is_stopping() && h.is(&stopping));
        assert!(!h.dump_now("after the stop".into()));
        assert!(stopping.wait(Duration::from_secs(30)));
        assert!(stopping.wait(Duration::ZERO), "ended stays ended");
        while !h.is_finished() {
            assert!(t0.elapsed() < Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(10));
        }

        // Held at its start: the stop's wait ends with the bound, false, until it has ended.
        let (go, gate) = std::sync::mpsc::channel();
        let mut held = started(dir.path(), TestVm::Runs(Some(gate)));
        let waiting = held.stop();
        assert!(held.is(&waiting) && !h.is(&waiting) && !held.is(&stopping));
        assert!(!waiting.wait(Duration::from_millis(200)));
        assert!(!held.is_finished());
        go.send(()).unwrap();
        assert!(waiting.wait(Duration::from_secs(30)));
        h.join().unwrap();
        held.join().unwrap();
    }

    /// An agent thread that cannot attach, or panics, still ends for whoever waits, and says
    /// why in the status; the app's thread is not touched.
    #[test]
    fn an_agent_that_fails_or_panics_ends_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        for (vm, want) in [
            (TestVm::Fails, "no VM to attach to"),
            (TestVm::Panics, "panicked: the VM went away"),
        ] {
            let mut h = started(dir.path(), vm);
            let stopping = h.stop();
            assert!(stopping.wait(Duration::from_secs(30)), "{want}");
            let status: serde_json::Value =
                serde_json::from_str(&h.shared().status_json()).unwrap();
            assert_eq!(status["state"], "failed", "{status}");
            assert_eq!(status["error"], want, "{status}");
            assert!(h.join().is_ok());
        }
    }

    /// With no runtime this dumper knows loaded, every dump is refused with the reason.
    #[test]
    fn without_a_known_runtime_every_dump_is_refused_with_the_reason() {
        let mut d = runtime_dumper(&TestVm::Fails, 33);
        assert_eq!(d.name(), "none");
        let why = d.check().unwrap_err().to_string();
        assert!(
            why.contains("neither libart.so (ART) nor libjvm.so"),
            "{why}"
        );
        let req = DumpRequest {
            full_path: "/nonexistent/d.hprof".into(),
            mini_path: None,
            level: hprof::Level::None,
            keep_full: true,
            deadline: Duration::from_secs(1),
        };
        assert_eq!(d.dump(&req).unwrap_err().to_string(), why);
    }

    #[test]
    fn the_runtime_is_told_by_the_library_mapped() {
        let line =
            |path: &str| format!("7f0000000000-7f0000001000 r-xp 00000000 08:01 42 {path}\n");
        let jvm = line("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so");
        let art = line("/usr/lib/x86_64-linux-gnu/android/libart.so.0");
        let other = line("/usr/lib/x86_64-linux-gnu/libc.so.6")
            + "7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n";
        assert_eq!(runtime_in(&jvm), Some(Runtime::HotSpot));
        assert_eq!(runtime_in(&(other.clone() + &art)), Some(Runtime::Art));
        assert_eq!(runtime_in(&other), None);
        // Not a library of that name, only one that ends alike.
        assert_eq!(runtime_in(&line("/data/app/libmyjvm.so")), None);
        assert_eq!(
            runtime_in(&line("/apex/com.android.art/lib64/libart.so")),
            Some(Runtime::Art)
        );
        assert_eq!(runtime_in(&line("/system/lib64/libartbase.so")), None);
        // The test process itself runs no VM.
        assert!(loaded_runtime().unwrap_err().contains("neither libart.so"));
    }
}
