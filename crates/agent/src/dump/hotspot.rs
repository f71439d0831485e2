//! The HotSpot dumper: `HotSpotDiagnosticMXBean.dumpHeap` through JNI, in process (the VM stops
//! every Java thread for the dump), with the tee hooked into `libjvm.so`'s `open64`/`write`.
//!
//! This is the test bed for the tee on a real VM. HotSpot cannot be forked and dumped by the
//! child (its dumper needs a safepoint, worker threads and the VM thread, which a forked child
//! does not have); see `scripts/bench/dump.sh` for what an outside dump of a frozen fork costs.

use super::{DumpOutcome, DumpRequest, Dumper, Error, Result};
use crate::hook::{tee::HOTSPOT_LIBS, Tee, TeeConfig};
use crate::jni::call;
use jni::objects::JValue;
use jni::{JNIEnv, JavaVM};
use std::time::{Duration, Instant};

/// The stripper runs on a thread of its own, fed through a ring of this size: during the
/// dump's safepoint every Java thread is stopped, so it has a core to itself, and the VM's
/// writing thread only pays for a copy.
pub const RING_BYTES: usize = 16 << 20;

/// Call `HotSpotDiagnosticMXBean.dumpHeap(path, live)`; a Java exception becomes an error with
/// its `toString()`, and is cleared. The local references it makes live in a local frame of
/// their own: the agent's thread stays attached for good, where they would pile up.
pub fn dump_heap(env: &mut JNIEnv, path: &str, live: bool) -> Result<()> {
    let r = env.with_local_frame(8, |env| -> jni::errors::Result<()> {
        let diag = env.find_class("com/sun/management/HotSpotDiagnosticMXBean")?;
        let factory = env.find_class("java/lang/management/ManagementFactory")?;
        let bean = call::static_method(
            env,
            &factory,
            "getPlatformMXBean",
            "(Ljava/lang/Class;)Ljava/lang/management/PlatformManagedObject;",
            &[JValue::Object(&diag)],
        )?
        .l()?;
        let jpath = env.new_string(path)?;
        call::method(
            env,
            &bean,
            "dumpHeap",
            "(Ljava/lang/String;Z)V",
            &[JValue::Object(&jpath), JValue::Bool(live as u8)],
        )?;
        Ok(())
    });
    match r {
        Ok(()) => Ok(()),
        Err(jni::errors::Error::JavaException) => Err(Error::Vm(call::take_exception(env))),
        Err(e) => Err(Error::Vm(format!("JNI: {e}"))),
    }
}

/// In-process HotSpot dumps, teed when a mini file is asked for.
pub struct HotSpotDumper {
    vm: JavaVM,
    tee: Option<Tee>,
    /// `dumpHeap(live)`: a full GC first, so only reachable objects are dumped.
    pub live: bool,
}

impl HotSpotDumper {
    pub fn new(vm: JavaVM) -> HotSpotDumper {
        HotSpotDumper {
            vm,
            tee: None,
            live: true,
        }
    }

    /// Remove the hooks from `libjvm.so`.
    pub fn unhook(&mut self) -> Result<()> {
        if let Some(t) = self.tee.take() {
            t.uninstall()?;
        }
        Ok(())
    }
}

impl Dumper for HotSpotDumper {
    fn name(&self) -> &'static str {
        "hotspot-in-process"
    }

    fn check(&mut self) -> Result<()> {
        let mut env = self
            .vm
            .attach_current_thread()
            .map_err(|e| Error::Unsupported(format!("cannot attach to the JVM: {e}")))?;
        // A local frame: the class reference goes when the frame does.
        let found = env.with_local_frame(4, |env| -> jni::errors::Result<()> {
            env.find_class("com/sun/management/HotSpotDiagnosticMXBean")
                .map(|_| ())
        });
        match found {
            Ok(()) => Ok(()),
            Err(_) => {
                let _ = env.exception_clear();
                Err(Error::Unsupported(
                    "no com.sun.management.HotSpotDiagnosticMXBean (not HotSpot)".into(),
                ))
            }
        }
    }

    fn dump(&mut self, req: &DumpRequest) -> Result<DumpOutcome> {
        let start = Instant::now();
        let _ = std::fs::remove_file(&req.full_path); // dumpHeap refuses an existing file
        let teed = req.mini_path.is_some() || !req.keep_full;
        if teed && self.tee.is_none() {
            self.tee = Some(Tee::install(HOTSPOT_LIBS)?);
        }
        let path = req.full_path.to_string_lossy().into_owned();
        if teed {
            if let Some(t) = &self.tee {
                t.arm(&TeeConfig {
                    full_path: req.full_path.clone(),
                    mini_path: req.mini_path.clone(),
                    level: req.level,
                    keep_full: req.keep_full,
                    ring_bytes: RING_BYTES,
                })?;
            }
        }
        let r = match self.vm.attach_current_thread() {
            Ok(mut env) => dump_heap(&mut env, &path, self.live),
            Err(e) => Err(Error::Vm(format!("cannot attach to the JVM: {e}"))),
        };
        let report = match (&self.tee, teed) {
            (Some(t), true) => Some(t.disarm(req.mini_path.as_deref())),
            _ => None,
        };
        r?;
        let pause = start.elapsed();
        let full_bytes = match &report {
            Some(rep) => rep.full_bytes,
            None => std::fs::metadata(&req.full_path)
                .map(|m| m.len())
                .unwrap_or(0),
        };
        if let Some(rep) = &report {
            if !rep.opened {
                tracing::warn!("the tee saw no open of the dump path in libjvm.so");
            }
        }
        let full = super::keep_or_remove_full(req);
        Ok(DumpOutcome {
            dumper: self.name(),
            full,
            full_bytes,
            mini: report.as_ref().and_then(|r| r.mini.clone()),
            caught_by: report.map(|r| r.caught_by).unwrap_or_default(),
            pause,
            gc_wait: Duration::ZERO,
            total: start.elapsed(),
        })
    }
}
