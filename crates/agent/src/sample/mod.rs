//! Reading the numbers: one [`Sample`] per poll, and the raw lists behind an inventory.
//!
//! Owns the reads of `/proc/self/{fd,status,statm,limits,task}` and `/proc/sys/kernel/threads-max`,
//! of the memory cgroup ([`cgroup`]: one to three more reads per poll where there is one),
//! and the [`HeapSource`] / [`StackSource`] traits through which the VM is asked (JNI in the app,
//! scripted fakes in tests). It decides nothing: thresholds live in `trigger`.
//!
//! Invariants:
//! - [`Sampler::take`] allocates nothing after [`Sampler::new`], and makes three system calls
//!   (plus one every [`SLOW_EVERY`] polls) besides the heap source:
//!   - the fd count is `st_size` of `/proc/self/fd`, which Linux ≥ 6.2 sets to the number of open
//!     fds, read by `fstat` on the directory kept open (one syscall, no path walk, whatever the
//!     count); on older kernels (size 0) the kept directory is rewound and its entries counted
//!     from a stack `dirent`, never materialised (about 0.3 µs per open fd);
//!   - the thread count is `st_nlink` of `/proc/self/task` minus 2 (procfs adds a link per
//!     thread), by `fstat` on the kept directory, and `VmSize`/`VmRSS` come from
//!     `/proc/self/statm` (pages × page size), re-read with `pread`: no walk of the task list and
//!     no formatting of `status`'s ~55 lines. The link count is checked against `status`'s
//!     `Threads` at start; where they disagree, `status` is used instead.
//!   - Every kept `/proc` file is re-read with `pread` at offset 0 into one preallocated buffer.
//!   - The fds this sampler holds count as the process's, except the `/proc/self/fd` directory.
//! - The max heap and the soft fd limit change rarely (never, for the max heap): they are read
//!   on the first sample and every [`SLOW_EVERY`] samples; threads and memory on every sample.
//! - Every parse of `/proc` text tolerates missing or malformed lines (the field reads as 0 /
//!   unknown); nothing here panics on input from the kernel.
#![forbid(unsafe_code)]

pub mod cgroup;

use nix::dir::Dir;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use serde::Serialize;
use std::os::unix::fs::FileExt;

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// A `/proc` file could not be opened or read.
    #[error("{path}: {what}; this sample is skipped")]
    Proc { path: &'static str, what: String },
    /// The VM could not answer (pending exception, detached thread...).
    #[error("asking the VM for {what} failed: {why}; this sample is skipped")]
    Vm { what: &'static str, why: String },
}

/// The Java heap as the VM reports it (`Runtime.maxMemory/totalMemory/freeMemory`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Heap {
    /// The most the heap may grow to, bytes.
    pub max: u64,
    /// The heap currently reserved, bytes.
    pub total: u64,
    /// Free bytes within `total`.
    pub free: u64,
}

impl Heap {
    /// Used bytes: `total - free`.
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }
}

/// Where heap numbers come from.
pub trait HeapSource {
    /// All three numbers; must be cheap (about a microsecond per number) and allocate nothing.
    fn heap(&mut self) -> Result<Heap, SampleError>;

    /// `total` and `free` only, with `max` 0 when the source skips it (the max heap is fixed
    /// for the life of a VM, so the sampler asks for it only every [`SLOW_EVERY`] polls).
    /// Defaults to [`HeapSource::heap`].
    fn usage(&mut self) -> Result<Heap, SampleError> {
        self.heap()
    }
}

/// One Java thread's stack, as `StackTraceElement.toString()` lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JavaStack {
    pub thread: String,
    pub frames: Vec<String>,
}

/// One live Java thread: its id (`Thread.getId()`, the `tid` field a heap dump holds) and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JavaThread {
    pub id: i64,
    pub name: String,
}

/// Where Java stacks come from (`Thread.getAllStackTraces` in the app).
pub trait StackSource {
    /// The process's live Java threads, at most `max` of them (the names of the threads a
    /// report's paths start on: see `analyze::trace`). None by default.
    fn threads(&mut self, _max: usize) -> Result<Vec<JavaThread>, SampleError> {
        Ok(Vec::new())
    }

    /// Stacks of the live threads whose name satisfies `wanted`, at most `max_threads` of them,
    /// each cut to `max_frames` frames.
    fn stacks(
        &mut self,
        wanted: &dyn Fn(&str) -> bool,
        max_threads: usize,
        max_frames: usize,
    ) -> Result<Vec<JavaStack>, SampleError>;
}

/// A [`HeapSource`] that replays a script, then repeats its last entry. For tests and benches.
#[derive(Debug, Clone, Default)]
pub struct ScriptedHeap {
    script: Vec<Heap>,
    next: usize,
}

impl ScriptedHeap {
    pub fn new(script: Vec<Heap>) -> Self {
        ScriptedHeap { script, next: 0 }
    }
}

impl HeapSource for ScriptedHeap {
    fn heap(&mut self) -> Result<Heap, SampleError> {
        let h = self.script.get(self.next).or(self.script.last()).copied();
        self.next += 1;
        h.ok_or(SampleError::Vm {
            what: "heap",
            why: "the script is empty".into(),
        })
    }
}

/// A [`StackSource`] with no threads (where no VM is at hand).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStacks;

impl StackSource for NoStacks {
    fn stacks(
        &mut self,
        _: &dyn Fn(&str) -> bool,
        _: usize,
        _: usize,
    ) -> Result<Vec<JavaStack>, SampleError> {
        Ok(Vec::new())
    }
}

/// One poll's numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// Poll number, from 1.
    pub seq: u64,
    /// Wall-clock ms.
    pub at_ms: u64,
    /// Java heap used, bytes.
    pub heap_used: u64,
    /// Java heap max, bytes.
    pub heap_max: u64,
    /// Open file descriptors.
    pub fds: u64,
    /// Soft `Max open files`; `u64::MAX` when unlimited, 0 when unknown.
    pub fd_soft_limit: u64,
    /// Threads of the process.
    pub threads: u64,
    /// `/proc/sys/kernel/threads-max`, 0 when unknown.
    pub threads_max: u64,
    /// `VmSize`, kB.
    pub vm_size_kb: u64,
    /// `VmRSS`, kB.
    pub vm_rss_kb: u64,
    /// The memory cgroup's usage (`memory.current`), bytes; `None` where not sampled
    /// ([`cgroup`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_current: Option<u64>,
    /// That usage less `inactive_file`, bytes: what the trigger compares with the limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_working_set: Option<u64>,
    /// The cgroup limit that binds (v2: the lower of `memory.max` and `memory.high`), bytes;
    /// `None` where none is set or nothing is sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_limit: Option<u64>,
    /// The cgroup's swap (`memory.swap.current`), bytes; `None` where not accounted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_swap: Option<u64>,
}

/// Fields of `/proc/self/status` we use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    pub threads: u64,
    pub vm_size_kb: u64,
    pub vm_rss_kb: u64,
}

/// Parse `/proc/PID/status` text; missing fields read as 0.
pub fn parse_status(text: &[u8]) -> Status {
    let mut s = Status::default();
    for line in text.split(|&b| b == b'\n') {
        if let Some(v) = line.strip_prefix(b"Threads:") {
            s.threads = first_number(v);
        } else if let Some(v) = line.strip_prefix(b"VmSize:") {
            s.vm_size_kb = first_number(v);
        } else if let Some(v) = line.strip_prefix(b"VmRSS:") {
            s.vm_rss_kb = first_number(v);
        }
    }
    s
}

/// The soft `Max open files` from `/proc/PID/limits` text: `u64::MAX` for `unlimited`, 0 when
/// the line is missing.
pub fn parse_fd_soft_limit(text: &[u8]) -> u64 {
    for line in text.split(|&b| b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"Max open files") {
            let rest = trim_start(rest);
            if rest.starts_with(b"unlimited") {
                return u64::MAX;
            }
            return first_number(rest);
        }
    }
    0
}

fn trim_start(mut b: &[u8]) -> &[u8] {
    while let [c, rest @ ..] = b {
        if c.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    b
}

/// The first run of decimal digits after optional blanks; 0 if none (saturating on overflow).
fn first_number(b: &[u8]) -> u64 {
    let b = trim_start(b);
    let mut n: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            break;
        }
        n = n.saturating_mul(10).saturating_add(u64::from(c - b'0'));
    }
    n
}

/// Every this many samples the slow-changing numbers (max heap, soft fd limit) are read again;
/// in between the last reading is reused.
pub const SLOW_EVERY: u64 = 12;

const STATUS: &str = "/proc/self/status";
const STATM: &str = "/proc/self/statm";
const LIMITS: &str = "/proc/self/limits";
const FD_DIR: &str = "/proc/self/fd";
const TASK_DIR: &str = "/proc/self/task";
const THREADS_MAX: &str = "/proc/sys/kernel/threads-max";

#[derive(Clone, Copy)]
enum ProcFile {
    Status,
    Statm,
    Limits,
}

/// How the fd count is obtained on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FdCountMethod {
    /// `st_size` of `/proc/self/fd` (Linux ≥ 6.2).
    StatSize,
    /// Counting directory entries.
    Readdir,
}

/// How the thread count and memory sizes are obtained on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadCountMethod {
    /// `st_nlink` of `/proc/self/task` minus 2 (procfs adds one link per thread), with
    /// `VmSize`/`VmRSS` from `/proc/self/statm`: two cheap reads instead of formatting the
    /// ~55 lines of `status`.
    TaskLinks,
    /// The `Threads`, `VmSize` and `VmRSS` lines of `/proc/self/status`.
    Status,
}

/// Time spent in each part of the last [`Sampler::take`], ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SampleParts {
    /// Asking the VM ([`HeapSource`]).
    pub heap_ns: u64,
    /// Counting fds.
    pub fds_ns: u64,
    /// Threads, memory sizes and (every [`SLOW_EVERY`]) the fd limit.
    pub proc_ns: u64,
}

/// Takes samples. Holds its `/proc` files open and a reusable buffer.
pub struct Sampler {
    /// The fd directory, kept open for the readdir method (older kernels, or forced).
    fd_dir: Option<Dir>,
    /// The fd directory, kept open for `fstat` (its `st_size` is the fd count, Linux ≥ 6.2).
    fd_dir_file: Option<std::fs::File>,
    /// `/proc/self/task`, kept open for `fstat` (its `st_nlink` is 2 + the thread count), when
    /// [`ThreadCountMethod::TaskLinks`] was validated at start.
    task_dir: Option<std::fs::File>,
    /// `/proc/self/{status,statm,limits}`, opened once and re-read with `pread` at offset 0
    /// (procfs regenerates them), which saves the path walk of an open per poll.
    status_file: std::fs::File,
    statm_file: std::fs::File,
    limits_file: std::fs::File,
    page_kb: u64,
    buf: Vec<u8>,
    threads_max: u64,
    seq: u64,
    parts: SampleParts,
    heap_max: u64,
    fd_soft_limit: u64,
    /// The memory cgroup read each poll, or why there is none.
    cgroup: Result<cgroup::CgroupMemory, String>,
    /// Its limit, re-read every [`SLOW_EVERY`] polls.
    cgroup_limit: Option<u64>,
    /// The usage, in percent of the limit, from which the working set is read.
    cgroup_percent: u64,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler").field("seq", &self.seq).finish()
    }
}

/// Read `f` whole from offset 0 into `buf`, doubling it whenever the file fills it (a kept
/// `/proc` or cgroup file, which the kernel writes anew at each read); the bytes read.
fn pread_whole(f: &std::fs::File, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize((buf.len() * 2).max(64), 0);
        }
        match f.read_at(&mut buf[len..], len as u64) {
            Ok(0) => return Ok(len),
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn proc_err(path: &'static str, e: impl std::fmt::Display) -> SampleError {
    SampleError::Proc {
        path,
        what: e.to_string(),
    }
}

/// `(size, resident)` pages from `/proc/PID/statm` text; missing fields read as 0.
pub fn parse_statm(text: &[u8]) -> (u64, u64) {
    let mut it = text
        .split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let size = it.next().map_or(0, first_number);
    let resident = it.next().map_or(0, first_number);
    (size, resident)
}

fn open_proc(path: &'static str) -> Result<std::fs::File, SampleError> {
    std::fs::File::open(path).map_err(|e| proc_err(path, e))
}

fn nlink(f: &std::fs::File, path: &'static str) -> Result<u64, SampleError> {
    use std::os::unix::fs::MetadataExt;
    f.metadata()
        .map(|m| m.nlink())
        .map_err(|e| proc_err(path, e))
}

impl Sampler {
    pub fn new() -> Result<Self, SampleError> {
        // The fast path needs only the directory's size; a size of 0 means an older kernel.
        let fd_file = open_proc(FD_DIR)?;
        let by_stat = fd_file.metadata().map(|m| m.len()).unwrap_or(0) > 0;
        let (fd_dir, fd_dir_file) = if by_stat {
            (None, Some(fd_file))
        } else {
            drop(fd_file);
            (Some(open_fd_dir()?), None)
        };
        let page_kb = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .map_or(4, |b| (b as u64 / 1024).max(1));
        let mut s = Sampler {
            fd_dir,
            fd_dir_file,
            task_dir: None,
            status_file: open_proc(STATUS)?,
            statm_file: open_proc(STATM)?,
            limits_file: open_proc(LIMITS)?,
            page_kb,
            buf: vec![0; 8192],
            threads_max: 0,
            seq: 0,
            parts: SampleParts::default(),
            heap_max: 0,
            fd_soft_limit: 0,
            cgroup: cgroup::CgroupMemory::open(),
            cgroup_limit: None,
            cgroup_percent: 0,
        };
        s.threads_max = std::fs::read(THREADS_MAX)
            .map(|b| first_number(&b))
            .unwrap_or(0);
        s.task_dir = s.validate_task_links();
        Ok(s)
    }

    /// `/proc/self/task`, if its link count tells the thread count on this kernel: it must
    /// agree with `status`'s `Threads` line (threads may start or end between the two reads,
    /// hence a few tries). `None` keeps the `status` method.
    fn validate_task_links(&mut self) -> Option<std::fs::File> {
        let dir = std::fs::File::open(TASK_DIR).ok()?;
        (0..5)
            .any(|_| {
                let links = nlink(&dir, TASK_DIR).unwrap_or(0);
                let threads = self
                    .reread(ProcFile::Status)
                    .map(|t| parse_status(t).threads)
                    .unwrap_or(0);
                threads > 0 && links == threads + 2
            })
            .then_some(dir)
    }

    /// Read `c` instead of the process's own memory cgroup (for tests).
    pub fn with_cgroup(mut self, c: Result<cgroup::CgroupMemory, String>) -> Self {
        self.cgroup = c;
        self.cgroup_limit = None;
        self
    }

    /// Read the cgroup's working set (its `memory.stat`, the costly file) only while its usage is
    /// over `percent` of its limit: the trigger's threshold (the working set never exceeds the
    /// usage).
    pub fn set_cgroup_percent(&mut self, percent: u64) {
        self.cgroup_percent = percent;
    }

    /// What the sampler reads of the memory cgroup, for `status.json`: its directory and
    /// limit, or why the cgroup-memory trigger is off.
    pub fn cgroup_state(&self) -> String {
        match &self.cgroup {
            Err(why) => format!("off: {why}"),
            Ok(c) => {
                let v = match c.version() {
                    cgroup::Version::V1 => "v1",
                    cgroup::Version::V2 => "v2",
                };
                match self.cgroup_limit {
                    Some(l) => format!("on: cgroup {v} {}, limit {} MB", c.dir().display(), l >> 20),
                    None if self.seq == 0 => format!("on: cgroup {v} {}", c.dir().display()),
                    None => format!(
                        "sampled, but never fires: cgroup {v} {} and its ancestors set no memory limit",
                        c.dir().display()
                    ),
                }
            }
        }
    }

    /// Force the readdir method (to compare both in tests and benches).
    pub fn with_readdir() -> Result<Self, SampleError> {
        let mut s = Self::new()?;
        if s.fd_dir.is_none() {
            s.fd_dir_file = None;
            s.fd_dir = Some(open_fd_dir()?);
        }
        Ok(s)
    }

    /// Force the `status` method for threads and memory sizes (to compare in tests and benches).
    pub fn with_status() -> Result<Self, SampleError> {
        let mut s = Self::new()?;
        s.task_dir = None;
        Ok(s)
    }

    /// Time the last [`HeapSource::heap`] call took, ns (part of the sample's cost).
    pub fn last_heap_ns(&self) -> u64 {
        self.parts.heap_ns
    }

    /// Time each part of the last [`Sampler::take`] took.
    pub fn last_parts(&self) -> SampleParts {
        self.parts
    }

    /// The method this sampler uses for the fd count.
    pub fn fd_count_method(&self) -> FdCountMethod {
        if self.fd_dir.is_some() {
            FdCountMethod::Readdir
        } else {
            FdCountMethod::StatSize
        }
    }

    /// The method this sampler uses for the thread count and memory sizes.
    pub fn thread_count_method(&self) -> ThreadCountMethod {
        if self.task_dir.is_some() {
            ThreadCountMethod::TaskLinks
        } else {
            ThreadCountMethod::Status
        }
    }

    /// Re-read a kept `/proc` file from offset 0 into the buffer (grown only if a file ever
    /// outgrows it).
    fn reread(&mut self, which: ProcFile) -> Result<&[u8], SampleError> {
        let (file, path) = match which {
            ProcFile::Status => (&self.status_file, STATUS),
            ProcFile::Statm => (&self.statm_file, STATM),
            ProcFile::Limits => (&self.limits_file, LIMITS),
        };
        let len = pread_whole(file, &mut self.buf).map_err(|e| proc_err(path, e))?;
        Ok(&self.buf[..len])
    }

    /// Open file descriptors, not counting the one this sampler holds on `/proc/self/fd`.
    pub fn count_fds(&mut self) -> Result<u64, SampleError> {
        if let Some(f) = &self.fd_dir_file {
            return f
                .metadata()
                .map(|m| m.len().saturating_sub(1))
                .map_err(|e| proc_err(FD_DIR, e));
        }
        let Some(dir) = self.fd_dir.as_mut() else {
            return Ok(0);
        };
        let mut n: u64 = 0;
        for e in dir.iter() {
            let e = e.map_err(|e| proc_err(FD_DIR, e))?;
            let name = e.file_name().to_bytes();
            if name != b"." && name != b".." {
                n += 1;
            }
        }
        Ok(n.saturating_sub(1))
    }

    /// Threads, `VmSize` and `VmRSS` by this sampler's method.
    fn threads_and_memory(&mut self) -> Result<Status, SampleError> {
        let Some(task) = &self.task_dir else {
            return Ok(parse_status(self.reread(ProcFile::Status)?));
        };
        let threads = nlink(task, TASK_DIR)?.saturating_sub(2);
        let page_kb = self.page_kb;
        let (size, resident) = parse_statm(self.reread(ProcFile::Statm)?);
        Ok(Status {
            threads,
            vm_size_kb: size.saturating_mul(page_kb),
            vm_rss_kb: resident.saturating_mul(page_kb),
        })
    }

    /// One full sample: heap, fds, limits, threads and memory. Allocates nothing.
    pub fn take(&mut self, heap: &mut dyn HeapSource, now_ms: u64) -> Result<Sample, SampleError> {
        let slow = self.seq % SLOW_EVERY == 0 || self.heap_max == 0;
        self.parts = SampleParts::default();
        let t0 = std::time::Instant::now();
        let h = if slow { heap.heap()? } else { heap.usage()? };
        let t1 = std::time::Instant::now();
        if h.max != 0 {
            self.heap_max = h.max;
        }
        let fds = self.count_fds()?;
        let t2 = std::time::Instant::now();
        let st = self.threads_and_memory()?;
        if slow {
            self.fd_soft_limit = parse_fd_soft_limit(self.reread(ProcFile::Limits)?);
        }
        let cg = match &mut self.cgroup {
            Ok(c) => {
                if slow {
                    self.cgroup_limit = c.limit();
                }
                c.read(self.cgroup_limit, self.cgroup_percent)
            }
            Err(_) => None,
        };
        let t3 = std::time::Instant::now();
        self.parts = SampleParts {
            heap_ns: (t1 - t0).as_nanos() as u64,
            fds_ns: (t2 - t1).as_nanos() as u64,
            proc_ns: (t3 - t2).as_nanos() as u64,
        };
        let limit = self.fd_soft_limit;
        self.seq += 1;
        Ok(Sample {
            seq: self.seq,
            at_ms: now_ms,
            heap_used: h.used(),
            heap_max: self.heap_max,
            fds,
            fd_soft_limit: limit,
            threads: st.threads,
            threads_max: self.threads_max,
            vm_size_kb: st.vm_size_kb,
            vm_rss_kb: st.vm_rss_kb,
            cgroup_current: cg.map(|c| c.current),
            cgroup_working_set: cg.and_then(|c| c.working_set),
            cgroup_limit: cg.and_then(|c| c.limit),
            cgroup_swap: cg.and_then(|c| c.swap),
        })
    }
}

fn open_fd_dir() -> Result<Dir, SampleError> {
    Dir::open(
        FD_DIR,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| proc_err(FD_DIR, e))
}

/// The target of every open fd (`readlink /proc/self/fd/N`), for an fd inventory. Allocates;
/// only called on a verdict.
pub fn fd_targets() -> Result<Vec<String>, SampleError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(FD_DIR).map_err(|e| proc_err(FD_DIR, e))? {
        let Ok(e) = e else { continue };
        // An fd closed between readdir and readlink is simply skipped.
        if let Ok(t) = std::fs::read_link(e.path()) {
            out.push(t.to_string_lossy().into_owned());
        }
    }
    Ok(out)
}

/// The name (`comm`) of every thread of the process, for a thread inventory. Allocates; only
/// called on a verdict.
pub fn thread_names() -> Result<Vec<String>, SampleError> {
    const TASK: &str = "/proc/self/task";
    let mut out = Vec::new();
    for e in std::fs::read_dir(TASK).map_err(|e| proc_err(TASK, e))? {
        let Ok(e) = e else { continue };
        if let Ok(name) = std::fs::read_to_string(e.path().join("comm")) {
            out.push(name.trim_end_matches('\n').to_string());
        }
    }
    Ok(out)
}

/// This process's name as Android gives it (`/proc/self/cmdline`'s first string: the package,
/// or `package:service` for a second process), else the executable's file name (`java` on a
/// JVM). Empty when unreadable.
pub fn process_name() -> String {
    let Ok(b) = std::fs::read("/proc/self/cmdline") else {
        return String::new();
    };
    let first = b.split(|&c| c == 0).next().unwrap_or(&[]);
    let name = String::from_utf8_lossy(first);
    name.rsplit('/').next().unwrap_or("").to_string()
}

/// When this process started, in ms since the epoch (from `/proc/self/stat`'s start time and
/// the boot time in `/proc/stat`); `None` when unreadable.
pub fn process_start_ms() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let ticks = parse_start_ticks(&stat)?;
    let btime = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse::<u64>()
        .ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&h| h > 0)? as u64;
    Some(btime * 1000 + ticks * 1000 / hz)
}

/// Field 22 (`starttime`, clock ticks after boot) of a `/proc/PID/stat` line. The command name
/// (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
fn parse_start_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status() {
        let t = b"Name:\tjava\nVmPeak:\t 100 kB\nVmSize:\t  3742000 kB\nVmRSS:\t   51234 kB\nThreads:\t812\nSigQ:\t0/1\n";
        assert_eq!(
            parse_status(t),
            Status {
                threads: 812,
                vm_size_kb: 3_742_000,
                vm_rss_kb: 51_234
            }
        );
        assert_eq!(parse_status(b"garbage\n\nThreads:\tx\n"), Status::default());
        assert_eq!(
            parse_status(b"Threads:\t99999999999999999999999999\n").threads,
            u64::MAX
        );
    }

    #[test]
    fn parses_limits() {
        let t = b"Limit                     Soft Limit           Hard Limit           Units     \nMax processes             63321                63321                processes \nMax open files            512                  1048576              files     \n";
        assert_eq!(parse_fd_soft_limit(t), 512);
        assert_eq!(
            parse_fd_soft_limit(
                b"Max open files            unlimited            unlimited            files\n"
            ),
            u64::MAX
        );
        assert_eq!(parse_fd_soft_limit(b"nothing"), 0);
    }

    #[test]
    fn real_proc_sample_sees_new_fds_and_threads() {
        let mut s = Sampler::new().unwrap();
        let mut heap = ScriptedHeap::new(vec![Heap {
            max: 100,
            total: 80,
            free: 30,
        }]);
        let a = s.take(&mut heap, 1).unwrap();
        let files: Vec<_> = (0..40)
            .map(|_| std::fs::File::open("/proc/self/status").unwrap())
            .collect();
        let b = s.take(&mut heap, 2).unwrap();
        // Other test threads may open files concurrently; ours are certainly there.
        assert!(b.fds + 8 >= a.fds + 40, "{} -> {}", a.fds, b.fds);
        drop(files);
        // The kept status fd yields fresh numbers: 20 new threads show up (other tests' threads
        // may come and go meanwhile, hence the margin).
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let threads: Vec<_> = (0..20)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || {
                    let _ = rx.lock().map(|r| r.recv());
                })
            })
            .collect();
        let with_threads = s.take(&mut heap, 3).unwrap();
        assert!(
            with_threads.threads >= b.threads + 10,
            "{} -> {}",
            b.threads,
            with_threads.threads
        );
        drop(tx);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!((a.seq, b.seq), (1, 2));
        assert_eq!(a.heap_used, 50);
        assert!(a.threads >= 1 && a.vm_size_kb > 0 && a.vm_rss_kb > 0);
        assert!(a.fd_soft_limit > 0);
        let lim = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .unwrap()
            .0;
        assert_eq!(
            a.fd_soft_limit,
            if lim == nix::sys::resource::RLIM_INFINITY {
                u64::MAX
            } else {
                lim
            }
        );
        // Matches the count of a plain directory listing (minus the listing's own fd).
        let listed = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
        let c = s.take(&mut heap, 3).unwrap();
        assert!(
            c.fds.abs_diff(listed - 1) <= 8,
            "{} vs {}",
            c.fds,
            listed - 1
        );
    }

    /// Where this process's memory cgroup is readable (this machine: v1, a hybrid host) each
    /// sample carries its usage; where it is not, none does and the state says why.
    #[test]
    fn the_memory_cgroup_is_sampled_where_readable() {
        let mut s = Sampler::new().unwrap();
        let before = s.cgroup_state();
        let mut heap = ScriptedHeap::new(vec![Heap::default()]);
        let x = s.take(&mut heap, 1).unwrap();
        if before.starts_with("on: cgroup") {
            assert!(x.cgroup_current.is_some_and(|c| c > 0), "{before}: {x:?}");
            // memory.stat is read only where a limit exists (from 0 % of it by default).
            assert_eq!(
                x.cgroup_working_set.is_some(),
                x.cgroup_limit.is_some(),
                "{before}: {x:?}"
            );
            assert!(x.cgroup_working_set <= x.cgroup_current);
        } else {
            assert!(before.starts_with("off: "), "{before}");
            assert_eq!(x.cgroup_current, None);
        }
        println!("{}", s.cgroup_state());
    }

    /// A cgroup of files in a temporary directory (v2's names): `current` bytes used, `max`
    /// its limit, 300 bytes of inactive file pages.
    fn fake_cgroup(current: u64, max: &str) -> (tempfile::TempDir, cgroup::CgroupMemory) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("memory.current"), format!("{current}\n")).unwrap();
        std::fs::write(d.path().join("memory.max"), format!("{max}\n")).unwrap();
        std::fs::write(d.path().join("memory.stat"), "anon 5\ninactive_file 300\n").unwrap();
        let c = cgroup::CgroupMemory::open_chain(cgroup::Version::V2, &[d.path().into()]);
        (d, c.unwrap())
    }

    /// The working set (`memory.stat`, the costly read) is read only while the usage is over
    /// the trigger's percent of the limit; the state says the limit, or, once a sample found
    /// none, that the trigger can never fire.
    #[test]
    fn the_cgroup_working_set_is_read_over_the_percent_and_the_state_says_why_not() {
        let mut heap = ScriptedHeap::new(vec![Heap::default()]);
        let (d, c) = fake_cgroup(60 << 20, "104857600");
        let mut s = Sampler::new().unwrap().with_cgroup(Ok(c));
        let dir = d.path().display();
        s.set_cgroup_percent(90);
        let x = s.take(&mut heap, 1).unwrap();
        assert_eq!(
            (x.cgroup_current, x.cgroup_limit, x.cgroup_working_set),
            (Some(60 << 20), Some(100 << 20), None),
            "60 % of the limit, under 90 %"
        );
        s.set_cgroup_percent(50);
        let x = s.take(&mut heap, 2).unwrap();
        assert_eq!(x.cgroup_working_set, Some((60 << 20) - 300));
        assert_eq!(
            s.cgroup_state(),
            format!("on: cgroup v2 {dir}, limit 100 MB")
        );

        let (d, c) = fake_cgroup(60 << 20, "max");
        let mut s = Sampler::new().unwrap().with_cgroup(Ok(c));
        let dir = d.path().display();
        assert_eq!(s.cgroup_state(), format!("on: cgroup v2 {dir}"));
        let x = s.take(&mut heap, 1).unwrap();
        assert_eq!((x.cgroup_limit, x.cgroup_working_set), (None, None));
        assert_eq!(
            s.cgroup_state(),
            format!(
                "sampled, but never fires: cgroup v2 {dir} and its ancestors set no memory limit"
            )
        );
        let s = Sampler::new()
            .unwrap()
            .with_cgroup(Err("no memory controller".into()));
        assert_eq!(s.cgroup_state(), "off: no memory controller");
    }

    /// Between the slow polls the sampler asks only for the usage; a source that has no
    /// cheaper way answers it with its whole figures (`HeapSource::usage`'s default).
    #[test]
    fn the_usage_defaults_to_the_whole_figures() {
        let h = Heap {
            max: 100,
            total: 80,
            free: 30,
        };
        let mut heap = ScriptedHeap::new(vec![h]);
        assert_eq!(heap.usage().unwrap(), h);
        let mut s = Sampler::new().unwrap();
        let (a, b) = (s.take(&mut heap, 1).unwrap(), s.take(&mut heap, 2).unwrap());
        assert_eq!((a.heap_used, b.heap_used), (50, 50));
        assert_eq!((a.heap_max, b.heap_max), (100, 100));
    }

    /// A sample's cost is told part by part: the VM's answer, the fd count, the rest of
    /// `/proc`.
    #[test]
    fn a_samples_cost_is_told_by_part() {
        struct Slow;
        impl HeapSource for Slow {
            fn heap(&mut self) -> Result<Heap, SampleError> {
                std::thread::sleep(std::time::Duration::from_millis(3));
                Ok(Heap::default())
            }
        }
        let mut s = Sampler::new().unwrap();
        assert_eq!(s.last_parts(), SampleParts::default(), "nothing taken yet");
        s.take(&mut Slow, 1).unwrap();
        let p = s.last_parts();
        assert!(p.heap_ns >= 3_000_000, "{p:?}");
        assert_eq!(s.last_heap_ns(), p.heap_ns);
        // Each is a system call or more.
        assert!(p.fds_ns > 0 && p.proc_ns > 0, "{p:?}");
    }

    /// A kept `/proc` file longer than the buffer is read whole: the buffer grows.
    #[test]
    fn a_proc_file_longer_than_the_buffer_is_read_whole() {
        let mut s = Sampler::new().unwrap();
        s.buf = vec![0; 16];
        let got = s.reread(ProcFile::Limits).unwrap().to_vec();
        assert!(got.len() > 16 * 8, "{} bytes", got.len());
        assert_eq!(got, std::fs::read("/proc/self/limits").unwrap());
    }

    /// The fd directory the readdir method keeps open is not handed to a child the app
    /// starts (the analysis child, or any exec).
    #[test]
    fn the_kept_fd_directory_closes_on_exec() {
        use std::os::fd::AsRawFd;
        let s = Sampler::with_readdir().unwrap();
        let fd = s.fd_dir.as_ref().unwrap().as_raw_fd();
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|v| u64::from_str_radix(v.trim(), 8).unwrap())
            .unwrap();
        let (cloexec, directory) = (libc::O_CLOEXEC as u64, libc::O_DIRECTORY as u64);
        assert_eq!(flags & cloexec, cloexec, "flags {flags:o}");
        assert_eq!(flags & directory, directory, "flags {flags:o}");
    }

    /// The process's name is the executable's file name here (a JVM's `java`, the test
    /// binary's own), and it started after boot and before now.
    #[test]
    fn the_process_is_named_and_dated() {
        let exe = std::env::args().next().unwrap();
        assert_eq!(process_name(), exe.rsplit('/').next().unwrap());
        let start = process_start_ms().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let up_s: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        // Clock ticks are 10 ms; the boot time is in whole seconds.
        assert!(start <= now + 1_000, "started {start}, now {now}");
        let ago = now.saturating_sub(start);
        assert!(
            ago <= (up_s * 1_000.0) as u64 + 2_000,
            "started {} s ago, booted {up_s} s ago",
            ago / 1_000
        );
        // This test binary has not run for an hour; a start time read as the boot's would say
        // it had, on a machine up for longer.
        if up_s > 7_200.0 {
            assert!(ago < 3_600_000, "started {} s ago", ago / 1_000);
        }
    }

    #[test]
    fn both_fd_count_methods_agree() {
        let mut fast = Sampler::new().unwrap();
        let mut slow = Sampler::with_readdir().unwrap();
        assert_eq!(slow.fd_count_method(), FdCountMethod::Readdir);
        let _files: Vec<_> = (0..100)
            .map(|_| std::fs::File::open("/proc/self/status").unwrap())
            .collect();
        // Other tests open and close files concurrently: retry until two reads agree, pausing
        // between tries so that a burst of them (a test reading files in a loop) can pass.
        let mut seen = Vec::new();
        let agreed = (0..400).any(|i| {
            if i > 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let (a, b) = (fast.count_fds().unwrap(), slow.count_fds().unwrap());
            seen.push((a, b));
            // Each excludes its own directory fd and sees the other's.
            a == b && a >= 100
        });
        assert!(
            agreed,
            "never agreed: {:?}",
            &seen[seen.len().saturating_sub(10)..]
        );
    }

    #[test]
    fn parses_statm() {
        assert_eq!(
            parse_statm(b"935524 12808 5034 1 0 41240 0\n"),
            (935_524, 12_808)
        );
        assert_eq!(parse_statm(b"17"), (17, 0));
        assert_eq!(parse_statm(b""), (0, 0));
    }

    #[test]
    fn both_thread_count_methods_agree() {
        let mut fast = Sampler::new().unwrap();
        let mut slow = Sampler::with_status().unwrap();
        assert_eq!(slow.thread_count_method(), ThreadCountMethod::Status);
        assert_eq!(fast.thread_count_method(), ThreadCountMethod::TaskLinks);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let threads: Vec<_> = (0..30)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || {
                    let _ = rx.lock().map(|r| r.recv());
                })
            })
            .collect();
        // Other tests start and end threads concurrently: retry until two reads agree.
        let agreed = (0..50).any(|_| {
            let (a, b) = (
                fast.threads_and_memory().unwrap(),
                slow.threads_and_memory().unwrap(),
            );
            a.threads == b.threads
                && a.threads >= 31
                && a.vm_size_kb == b.vm_size_kb
                && a.vm_rss_kb.abs_diff(b.vm_rss_kb) <= 1024
        });
        drop(tx);
        for t in threads {
            t.join().unwrap();
        }
        assert!(agreed);
    }

    #[test]
    fn inventories_read_real_proc() {
        let f = std::fs::File::open("/proc/self/limits").unwrap();
        let t = fd_targets().unwrap();
        assert!(
            t.iter()
                .any(|x| x == "/proc/self/limits" || x.ends_with("/limits")),
            "{t:?}"
        );
        drop(f);
        let h = std::thread::Builder::new()
            .name("probe-thread-42".into())
            .spawn(|| std::thread::sleep(std::time::Duration::from_millis(300)))
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let names = thread_names().unwrap();
        assert!(names.iter().any(|n| n == "probe-thread-42"), "{names:?}");
        h.join().unwrap();
    }

    /// Counts which method the sampler called.
    struct Counting {
        full: u32,
        usage: u32,
    }

    impl HeapSource for Counting {
        fn heap(&mut self) -> Result<Heap, SampleError> {
            self.full += 1;
            Ok(Heap {
                max: 1000 + u64::from(self.full),
                total: 10,
                free: 5,
            })
        }
        fn usage(&mut self) -> Result<Heap, SampleError> {
            self.usage += 1;
            Ok(Heap {
                max: 0,
                total: 10,
                free: 5,
            })
        }
    }

    #[test]
    fn max_heap_and_limit_are_reread_every_slow_every_samples() {
        let mut s = Sampler::new().unwrap();
        let mut h = Counting { full: 0, usage: 0 };
        let maxes: Vec<u64> = (0..2 * SLOW_EVERY + 1)
            .map(|i| s.take(&mut h, i).unwrap().heap_max)
            .collect();
        assert_eq!((h.full, h.usage), (3, 2 * SLOW_EVERY as u32 - 2));
        assert_eq!(maxes[0], 1001);
        assert_eq!(maxes[SLOW_EVERY as usize - 1], 1001);
        assert_eq!(maxes[SLOW_EVERY as usize], 1002);
        assert_eq!(maxes[2 * SLOW_EVERY as usize], 1003);
    }

    #[test]
    fn scripted_heap_repeats_last() {
        let mut h = ScriptedHeap::new(vec![
            Heap {
                max: 1,
                total: 1,
                free: 0,
            },
            Heap {
                max: 2,
                total: 2,
                free: 0,
            },
        ]);
        assert_eq!(h.heap().unwrap().max, 1);
        assert_eq!(h.heap().unwrap().max, 2);
        assert_eq!(h.heap().unwrap().max, 2);
        assert!(ScriptedHeap::default().heap().is_err());
    }

    #[test]
    fn process_start_is_read_after_the_last_parenthesis() {
        let line = "123 (we (are) odd) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 19 20";
        assert_eq!(parse_start_ticks(line), Some(4242));
        assert_eq!(parse_start_ticks("garbage"), None);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let start = process_start_ms().expect("readable on Linux");
        assert!(
            start <= now + 1000 && start + 86_400_000 * 365 > now,
            "{start} vs {now}"
        );
        assert!(!process_name().is_empty());
    }
}
