//! The flight recorder: what the agent saw last, kept where a killed process cannot take it along.
//!
//! Owns the ring file (`flight/<process>.ring` in the data dir), its format, the writer the agent
//! stores each poll's sample into, and the reader the next launch uses to tell whether the last
//! process died without a clean exit and what led up to it ([`Previous`]).
//!
//! The file is [`FILE_LEN`] bytes, little-endian, written only by `pwrite` from an image of it
//! kept in memory: each poll is one copy into the image and one `pwrite` of its slot (128 bytes
//! into the page cache: under 1 µs on ext4 and tmpfs, `examples/flight_cost.rs`, run by
//! `scripts/bench.sh agent`). Nothing is fsynced,
//! because the dirty pages of a process killed by the low-memory killer or `kill -9` stay in the
//! page cache and reach the file anyway (only a power cut loses them, and then the torn parts fail
//! their checks).
//!
//! Why `pwrite` and not a shared writable map (as before): a store into a shared map that needs a
//! block the file system cannot give is answered with SIGBUS on the storing thread, which kills
//! the host app. That happens on a full disk at the first store into a hole (a file made by
//! `set_len` is all holes), and on f2fs (most Android data partitions) even into a page already
//! allocated, because f2fs writes out of place and may need a new block for any rewrite; so
//! reserving the blocks first (`fallocate`) would not make later stores safe there. `pwrite`
//! reserves what it needs inside the system call (ext4's delayed allocation and f2fs reserve at
//! `write_begin`, tmpfs allocates its page there) and answers a full disk with `ENOSPC`, an error
//! return; no write of the recorder can raise a signal. The file is read with `pread` (the
//! previous owner's ring at start, [`Recorder::snapshot`]), never mapped.
//!
//! A fresh ring is one `pwrite` of the whole image over the old file, not a truncation and a
//! rewrite: the blocks of a ring an earlier launch wrote are reused, so a full disk does not stop
//! a recorder that had its file already. When any write fails (`ENOSPC`, `EDQUOT`, `EIO`...), the
//! recorder turns itself off for the rest of the process ([`Flight`] keeps the reason for the
//! agent's status and logs it) and empties the file (`ftruncate` to 0, which needs no block), so
//! that the next launch finds no ring rather than a half-written one or a "running" one whose
//! owner merely stopped recording, and tries again.
//!
//! ```text
//! header   0..512    magic "OOMGRING", version, layout (header/slot/trailer sizes, slot count),
//!                    pid, process start, agent start, app version: sealed once (FNV-1a at 112);
//!                    then the changing part: state (running / stopped / exited), busy flags
//!                    (dump, analysis), policy version, the current page
//! slots    512..     SLOTS slots of SLOT_LEN bytes, written round-robin by sequence number; each
//!                    carries its own checksum, so a torn slot is dropped alone
//! trailer  last      the last words: the fatal error's class, message, thread and top frames,
//!                    with a checksum
//! ```
//!
//! Invariants:
//! - One writer per file: the writer holds an exclusive `flock` on it for its life. A second
//!   process of the same name finds the lock taken and records nothing (its status says why);
//!   the lock also tells the next launch that the file's owner is gone (the kernel drops it on
//!   any death).
//! - A file that is not exactly this format (foreign, truncated, oversized, zeroed, torn header,
//!   another format version) is never trusted: `read_previous` says what is wrong and where,
//!   the caller logs it, and the file is started afresh.
//! - The previous process's content is read before the file is started afresh; the caller
//!   commits what it needs from it first.
//! - The file is never mapped and only ever written by `pwrite` of ranges of the writer's image,
//!   which always equals the file's content after each successful write. A write that fails
//!   leaves the file empty (length 0) and the process without a recorder: the ring is then
//!   never trusted, never half-trusted.
#![forbid(unsafe_code)]

pub mod exit_info;

pub use exit_info::{ExitInfo, ExitInfoSource, NoExitInfo};

use crate::sample::Sample;
use crate::trigger::Strikes;
use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The first bytes of a ring file.
pub const MAGIC: [u8; 8] = *b"OOMGRING";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_LEN: usize = 512;
/// Bytes of one slot.
pub const SLOT_LEN: usize = 128;
/// Slots in the ring: 64 polls, five minutes and more at the default 5 s.
pub const SLOTS: usize = 64;
/// Bytes of the trailer (the last words).
pub const TRAILER_LEN: usize = 2048;
/// Bytes of the whole file.
pub const FILE_LEN: usize = HEADER_LEN + SLOTS * SLOT_LEN + TRAILER_LEN;

// Header fields: the sealed part.
const H_VERSION: usize = 8;
const H_HEADER_LEN: usize = 12;
const H_SLOT_LEN: usize = 16;
const H_SLOTS: usize = 20;
const H_TRAILER_LEN: usize = 24;
const H_PID: usize = 28;
const H_PROCESS_START: usize = 32;
const H_AGENT_START: usize = 40;
const H_APP_VERSION: usize = 48;
const APP_VERSION_LEN: usize = 64;
const H_SEAL: usize = 112;
// The changing part.
const H_STATE: usize = 128;
const H_BUSY: usize = 132;
const H_POLICY_VERSION: usize = 136;
const H_PAGE: usize = 144;
const PAGE_LEN: usize = 128;

// Slot fields.
const S_FIGURES: usize = 8; // 12 u64 after the sequence number
const S_STRIKES: usize = 104;
/// Strike counts kept per slot (the fifth, cgroup memory, sits in bytes that rings written
/// before it left zero, inside the slot's checksum).
const STRIKES: usize = 5;
const S_SUM: usize = 112;

// Trailer fields.
const T_MAGIC: u32 = u32::from_le_bytes(*b"LAST");
const T_LENS: usize = 4; // four u16: class, message, thread, frames
const T_AT: usize = 16;
const T_CLASS: usize = 24;
const CLASS_LEN: usize = 192;
const T_THREAD: usize = T_CLASS + CLASS_LEN;
const THREAD_LEN: usize = 64;
const T_MESSAGE: usize = T_THREAD + THREAD_LEN;
const MESSAGE_LEN: usize = 512;
const T_FRAMES: usize = T_MESSAGE + MESSAGE_LEN;
const FRAMES_LEN: usize = TRAILER_LEN - 8 - T_FRAMES;
const T_SUM: usize = TRAILER_LEN - 8;

/// What the header says of its process's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Still running, as far as the file knows: if its process is gone, it died.
    Running,
    /// The agent was stopped (`stop()`).
    Stopped,
    /// The VM exited normally (the facade's shutdown hook).
    Exited,
}

impl State {
    fn code(self) -> u32 {
        match self {
            State::Running => 1,
            State::Stopped => 2,
            State::Exited => 3,
        }
    }

    fn from_code(c: u32) -> Option<State> {
        Some(match c {
            1 => State::Running,
            2 => State::Stopped,
            3 => State::Exited,
            _ => return None,
        })
    }
}

/// Work in progress when the process ended.
pub const BUSY_DUMP: u32 = 1;
/// An analysis (of an earlier dump) was running in a child of the process.
pub const BUSY_ANALYSIS: u32 = 2;

/// Why a ring file is not trusted. Each names the file and the byte where it goes wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RingError {
    #[error("{path}: {what}")]
    Io { path: String, what: String },
    #[error("{path}: {len} bytes where a flight ring has {FILE_LEN}: {what}; ignored")]
    Length {
        path: String,
        len: u64,
        what: &'static str,
    },
    #[error("{path}: byte {at}: {what}; ignored")]
    Format {
        path: String,
        at: usize,
        what: String,
    },
}

/// The last words: the fatal error that ended the process, recorded by the facade's uncaught
/// exception handler before it passed the error on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastWords {
    pub at_ms: u64,
    /// The throwable's class name, e.g. `java.lang.OutOfMemoryError`.
    pub class: String,
    pub message: String,
    pub thread: String,
    /// Its top frames, one per line (cut to what fits).
    pub frames: Vec<String>,
}

/// One recorded poll: the agent's [`Sample`] (serialized flat, so a death's samples read like
/// any incident's, with a few more fields) and what the recorder adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Slot {
    /// The ring keeps its cgroup figures but the working set (a slot has no room for it).
    #[serde(flatten)]
    pub sample: Sample,
    /// Strike counts at this poll: heap, fd, threads, vm_size, cgroup_memory.
    pub strikes: [u8; STRIKES],
}

/// What the previous process's ring held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Previous {
    pub pid: u32,
    pub process_start_ms: u64,
    pub agent_start_ms: u64,
    pub app_version: String,
    pub policy_version: u64,
    pub state: State,
    pub dump_in_progress: bool,
    pub analysis_in_progress: bool,
    pub page: String,
    /// Oldest first.
    pub samples: Vec<Slot>,
    /// Slots whose checksum failed (dropped).
    pub torn_slots: u32,
    pub last_words: Option<LastWords>,
    /// The trailer was written but fails its checksum (dropped).
    pub torn_last_words: bool,
    /// What the system says of the process's end (Android's `ApplicationExitInfo`), attached
    /// by the agent after reading the ring; never in the ring itself.
    pub exit_info: Option<ExitInfo>,
    /// Why the system could not be asked, when it could not.
    pub exit_info_error: Option<String>,
}

impl Previous {
    /// Whether the process ended without a clean exit: it was still running when it vanished,
    /// or it recorded a fatal error before whatever exit followed (a JVM whose main thread died
    /// of an `OutOfMemoryError` still runs its shutdown hooks).
    pub fn died(&self) -> bool {
        self.state == State::Running || self.last_words.is_some()
    }

    /// One line saying how it ended, for the incident's reason.
    pub fn reason(&self) -> String {
        let how = match &self.last_words {
            Some(w) if w.message.is_empty() => format!("after {} on thread \"{}\"", w.class, w.thread),
            Some(w) => format!("after {}: {} on thread \"{}\"", w.class, w.message, w.thread),
            None => "with no last words (killed: the low-memory killer, a memory limit, kill -9 or a native crash)".to_string(),
        };
        let last = self.samples.last().map(|slot| {
            let s = &slot.sample;
            format!(
                "; last poll: heap {} of {} MB, {} fds, {} threads, VmRSS {} MB",
                s.heap_used >> 20,
                s.heap_max >> 20,
                s.fds,
                s.threads,
                s.vm_rss_kb >> 10
            )
        });
        let system = self
            .exit_info
            .as_ref()
            .map(|e| format!("; the system says {}", e.summary()));
        format!(
            "the previous process (pid {}, app {}) died {how}{}{}",
            self.pid,
            self.app_version,
            system.unwrap_or_default(),
            last.unwrap_or_default()
        )
    }

    /// The change of each figure over the last `window_ms` of samples.
    pub fn trend(&self, window_ms: u64) -> Vec<Trend> {
        let Some(last) = self.samples.last() else {
            return Vec::new();
        };
        let from = last.sample.at_ms.saturating_sub(window_ms);
        let span: Vec<&Slot> = self
            .samples
            .iter()
            .filter(|s| s.sample.at_ms >= from)
            .collect();
        let figures: [(&'static str, Figure); 8] = [
            ("heapUsed", |s| Some(s.sample.heap_used)),
            ("fds", |s| Some(s.sample.fds)),
            ("threads", |s| Some(s.sample.threads)),
            ("vmSizeKb", |s| Some(s.sample.vm_size_kb)),
            ("vmRssKb", |s| Some(s.sample.vm_rss_kb)),
            ("cgroupCurrent", |s| s.sample.cgroup_current),
            ("cgroupSwap", |s| s.sample.cgroup_swap),
            ("heapMax", |s| Some(s.sample.heap_max)),
        ];
        let mut out = Vec::new();
        for (name, get) in figures {
            let vals: Vec<(u64, u64)> = span
                .iter()
                .filter_map(|s| get(s).map(|v| (s.sample.at_ms, v)))
                .collect();
            let (Some(first), Some(end)) = (vals.first(), vals.last()) else {
                continue;
            };
            let ms = end.0.saturating_sub(first.0);
            let change = end.1 as i128 - first.1 as i128;
            out.push(Trend {
                figure: name,
                samples: vals.len() as u32,
                first: first.1,
                last: end.1,
                min: vals.iter().map(|v| v.1).min().unwrap_or(0),
                max: vals.iter().map(|v| v.1).max().unwrap_or(0),
                per_minute: if ms == 0 {
                    0
                } else {
                    (change * 60_000 / ms as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
                },
            });
        }
        out
    }
}

/// Reads one figure of a slot (`None`: not sampled).
type Figure = fn(&Slot) -> Option<u64>;

/// How one figure moved over the window before the death.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trend {
    pub figure: &'static str,
    pub samples: u32,
    pub first: u64,
    pub last: u64,
    pub min: u64,
    pub max: u64,
    /// Change per minute between the first and the last sample of the window.
    pub per_minute: i64,
}

/// FNV-1a, 32 bits: enough to tell a torn or foreign block from a whole one (not an adversary).
fn fnv(b: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &x in b {
        h ^= x as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Store `s` as a length-prefixed-by-field string into `dst`, cut at a char boundary to fit.
fn put_str(dst: &mut [u8], s: &str) -> usize {
    let mut n = s.len().min(dst.len());
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    dst[..n].copy_from_slice(&s.as_bytes()[..n]);
    dst[n..].fill(0);
    n
}

/// A NUL-padded string field, read leniently (invalid UTF-8 replaced).
fn get_padded(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Bytes of the file's `index`th slot.
fn slot_range(index: usize) -> std::ops::Range<usize> {
    let at = HEADER_LEN + index * SLOT_LEN;
    at..at + SLOT_LEN
}

fn trailer_range() -> std::ops::Range<usize> {
    let at = HEADER_LEN + SLOTS * SLOT_LEN;
    at..at + TRAILER_LEN
}

const NONE: u64 = u64::MAX;

fn encode_slot(b: &mut [u8], slot: &Slot) {
    let s = &slot.sample;
    put_u64(b, 0, s.seq);
    let figures = [
        s.at_ms,
        s.heap_used,
        s.heap_max,
        s.fds,
        s.fd_soft_limit,
        s.threads,
        s.threads_max,
        s.vm_size_kb,
        s.vm_rss_kb,
        s.cgroup_current.unwrap_or(NONE),
        s.cgroup_limit.unwrap_or(NONE),
        s.cgroup_swap.unwrap_or(NONE),
    ];
    for (i, v) in figures.iter().enumerate() {
        put_u64(b, S_FIGURES + 8 * i, *v);
    }
    b[S_STRIKES..S_STRIKES + STRIKES].copy_from_slice(&slot.strikes);
    b[S_STRIKES + STRIKES..S_SUM].fill(0);
    let sum = fnv(&b[..S_SUM]);
    put_u32(b, S_SUM, sum);
    b[S_SUM + 4..].fill(0);
}

/// A slot's content, `None` when empty; `Err` when torn.
fn decode_slot(b: &[u8]) -> Result<Option<Slot>, ()> {
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    if fnv(&b[..S_SUM]) != get_u32(b, S_SUM) {
        return Err(());
    }
    let f = |i: usize| get_u64(b, S_FIGURES + 8 * i);
    let opt = |v: u64| (v != NONE).then_some(v);
    let mut strikes = [0u8; STRIKES];
    strikes.copy_from_slice(&b[S_STRIKES..S_STRIKES + STRIKES]);
    Ok(Some(Slot {
        sample: Sample {
            seq: get_u64(b, 0),
            at_ms: f(0),
            heap_used: f(1),
            heap_max: f(2),
            fds: f(3),
            fd_soft_limit: f(4),
            threads: f(5),
            threads_max: f(6),
            vm_size_kb: f(7),
            vm_rss_kb: f(8),
            cgroup_current: opt(f(9)),
            cgroup_working_set: None,
            cgroup_limit: opt(f(10)),
            cgroup_swap: opt(f(11)),
        },
        strikes,
    }))
}

fn encode_last_words(b: &mut [u8], w: &LastWords) {
    b.fill(0);
    put_u64(b, T_AT, w.at_ms);
    let class = put_str(&mut b[T_CLASS..T_CLASS + CLASS_LEN], &w.class);
    let message = put_str(&mut b[T_MESSAGE..T_MESSAGE + MESSAGE_LEN], &w.message);
    let thread = put_str(&mut b[T_THREAD..T_THREAD + THREAD_LEN], &w.thread);
    // Whole frames only, as many as fit.
    let mut frames = String::new();
    for f in &w.frames {
        let line = f.replace('\n', " ");
        if frames.len() + line.len() + 1 > FRAMES_LEN {
            break;
        }
        frames.push_str(&line);
        frames.push('\n');
    }
    let frames = put_str(&mut b[T_FRAMES..T_FRAMES + FRAMES_LEN], &frames);
    for (i, n) in [class, message, thread, frames].into_iter().enumerate() {
        b[T_LENS + 2 * i..T_LENS + 2 * i + 2].copy_from_slice(&(n as u16).to_le_bytes());
    }
    let sum = fnv(&b[4..T_SUM]);
    put_u32(b, T_SUM, sum);
    // The magic last: a trailer without it was never begun.
    put_u32(b, 0, T_MAGIC);
}

/// The last words, `Ok(None)` when never written, `Err` when torn.
fn decode_last_words(b: &[u8]) -> Result<Option<LastWords>, ()> {
    if get_u32(b, 0) != T_MAGIC {
        return Ok(None);
    }
    if fnv(&b[4..T_SUM]) != get_u32(b, T_SUM) {
        return Err(());
    }
    let len = |i: usize| u16::from_le_bytes([b[T_LENS + 2 * i], b[T_LENS + 2 * i + 1]]) as usize;
    let field = |at: usize, cap: usize, n: usize| {
        String::from_utf8_lossy(&b[at..at + n.min(cap)]).into_owned()
    };
    let frames = field(T_FRAMES, FRAMES_LEN, len(3));
    Ok(Some(LastWords {
        at_ms: get_u64(b, T_AT),
        class: field(T_CLASS, CLASS_LEN, len(0)),
        message: field(T_MESSAGE, MESSAGE_LEN, len(1)),
        thread: field(T_THREAD, THREAD_LEN, len(2)),
        frames: frames.lines().map(str::to_string).collect(),
    }))
}

/// Parse a whole ring file's bytes. `path` names it in errors.
pub fn parse(path: &Path, b: &[u8]) -> Result<Previous, RingError> {
    let p = || path.display().to_string();
    let format = |at: usize, what: String| RingError::Format {
        path: p(),
        at,
        what,
    };
    if b.len() != FILE_LEN {
        return Err(RingError::Length {
            path: p(),
            len: b.len() as u64,
            what: if b.len() < FILE_LEN {
                "truncated"
            } else {
                "oversized"
            },
        });
    }
    if b[..8] != MAGIC {
        return Err(format(
            0,
            if b[..8].iter().all(|&x| x == 0) {
                "zeroed where the magic \"OOMGRING\" belongs (never written, or lost in a power cut)"
                    .into()
            } else {
                "not a flight ring (no \"OOMGRING\" magic)".into()
            },
        ));
    }
    let version = get_u32(b, H_VERSION);
    if version != VERSION {
        return Err(format(
            H_VERSION,
            format!("format version {version}, this agent reads {VERSION}"),
        ));
    }
    let layout = [
        (H_HEADER_LEN, HEADER_LEN),
        (H_SLOT_LEN, SLOT_LEN),
        (H_SLOTS, SLOTS),
        (H_TRAILER_LEN, TRAILER_LEN),
    ];
    for (at, want) in layout {
        let got = get_u32(b, at) as usize;
        if got != want {
            return Err(format(
                at,
                format!("layout field is {got}, expected {want}"),
            ));
        }
    }
    if fnv(&b[..H_SEAL]) != get_u32(b, H_SEAL) {
        return Err(format(
            H_SEAL,
            "the header's seal does not match (torn)".into(),
        ));
    }
    let code = get_u32(b, H_STATE);
    let state =
        State::from_code(code).ok_or_else(|| format(H_STATE, format!("unknown state {code}")))?;
    let busy = get_u32(b, H_BUSY);
    let mut samples = Vec::new();
    let mut torn_slots = 0;
    for i in 0..SLOTS {
        match decode_slot(&b[slot_range(i)]) {
            Ok(Some(s)) => samples.push(s),
            Ok(None) => {}
            Err(()) => torn_slots += 1,
        }
    }
    sys::order::sort_by_key(&mut samples, |s| s.sample.seq);
    let (last_words, torn_last_words) = match decode_last_words(&b[trailer_range()]) {
        Ok(w) => (w, false),
        Err(()) => (None, true),
    };
    let page_len = (b[H_PAGE] as usize).min(PAGE_LEN - 1);
    Ok(Previous {
        pid: get_u32(b, H_PID),
        process_start_ms: get_u64(b, H_PROCESS_START),
        agent_start_ms: get_u64(b, H_AGENT_START),
        app_version: get_padded(&b[H_APP_VERSION..H_APP_VERSION + APP_VERSION_LEN]),
        policy_version: get_u64(b, H_POLICY_VERSION),
        state,
        dump_in_progress: busy & BUSY_DUMP != 0,
        analysis_in_progress: busy & BUSY_ANALYSIS != 0,
        page: String::from_utf8_lossy(&b[H_PAGE + 1..H_PAGE + 1 + page_len]).into_owned(),
        samples,
        torn_slots,
        last_words,
        torn_last_words,
        exit_info: None,
        exit_info_error: None,
    })
}

/// Who writes a fresh ring.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub pid: u32,
    pub process_start_ms: u64,
    pub agent_start_ms: u64,
    pub app_version: String,
    pub policy_version: u64,
}

/// A fresh ring's bytes for `id`: sealed header, state running, no slots, no last words.
pub fn fresh(id: &Identity) -> Vec<u8> {
    let mut b = vec![0u8; FILE_LEN];
    b[..8].copy_from_slice(&MAGIC);
    put_u32(&mut b, H_VERSION, VERSION);
    put_u32(&mut b, H_HEADER_LEN, HEADER_LEN as u32);
    put_u32(&mut b, H_SLOT_LEN, SLOT_LEN as u32);
    put_u32(&mut b, H_SLOTS, SLOTS as u32);
    put_u32(&mut b, H_TRAILER_LEN, TRAILER_LEN as u32);
    put_u32(&mut b, H_PID, id.pid);
    put_u64(&mut b, H_PROCESS_START, id.process_start_ms);
    put_u64(&mut b, H_AGENT_START, id.agent_start_ms);
    put_str(
        &mut b[H_APP_VERSION..H_APP_VERSION + APP_VERSION_LEN - 1],
        &id.app_version,
    );
    let seal = fnv(&b[..H_SEAL]);
    put_u32(&mut b, H_SEAL, seal);
    put_u32(&mut b, H_STATE, State::Running.code());
    put_u64(&mut b, H_POLICY_VERSION, id.policy_version);
    b
}

/// The writer: this process's ring file and the image of it that each write changes first.
pub struct Recorder {
    /// Written only by `pwrite` (the module comment says why); holds the `flock` for the
    /// recorder's life.
    file: Flock<File>,
    /// The file's bytes as last written: [`FILE_LEN`] of them.
    image: Vec<u8>,
    path: PathBuf,
    next_slot: usize,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Recorder({}, next slot {})",
            self.path.display(),
            self.next_slot
        )
    }
}

/// The ring file of the process named `process` in `data_dir`.
pub fn ring_path(data_dir: &Path, process: &str) -> PathBuf {
    let mut name: String = process
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if name.is_empty() {
        name.push_str("process");
    }
    data_dir.join("flight").join(format!("{name}.ring"))
}

/// Open this process's ring at `path`: lock it, read what the previous owner left, and — only
/// when `take_over` says so after the caller has dealt with that — start it afresh for `id`.
pub fn open(path: &Path) -> Result<Claimed, RingError> {
    let io = |what: String| RingError::Io {
        path: path.display().to_string(),
        what,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io(format!("creating its directory: {e}")))?;
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io(format!("open: {e}")))?;
    let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => locked,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            return Err(io(
                "locked by another live process of the same name; this one records nothing".into(),
            ))
        }
        Err((_, e)) => return Err(io(format!("flock: {e}"))),
    };
    let len = file.metadata().map_err(|e| io(format!("stat: {e}")))?.len();
    let previous = if len == 0 {
        None
    } else if len > (FILE_LEN as u64) * 4 {
        Some(Err(RingError::Length {
            path: path.display().to_string(),
            len,
            what: "oversized",
        }))
    } else {
        let mut b = Vec::with_capacity(len as usize);
        file.read_to_end(&mut b)
            .map_err(|e| io(format!("read: {e}")))?;
        Some(parse(path, &b))
    };
    Ok(Claimed {
        file,
        path: path.to_path_buf(),
        previous,
    })
}

/// A locked ring file whose old content has been read, not yet started afresh.
#[derive(Debug)]
pub struct Claimed {
    file: Flock<File>,
    path: PathBuf,
    /// What the previous owner left.
    pub previous: Option<Result<Previous, RingError>>,
}

impl Claimed {
    /// Start the ring afresh for `id`: one `pwrite` of the whole fresh image over the file (its
    /// blocks, when an earlier launch wrote them, are reused), then the file cut to
    /// [`FILE_LEN`]. The previous content is gone after this. On a write error (a full disk)
    /// the file is emptied and the error says so; nothing raises a signal.
    pub fn start(self, id: &Identity) -> Result<Recorder, RingError> {
        let image = fresh(id);
        let written = self
            .file
            .write_all_at(&image, 0)
            .map_err(|e| format!("byte 0: writing the fresh ring ({FILE_LEN} bytes): {e}"))
            .and_then(|()| {
                self.file
                    .set_len(FILE_LEN as u64)
                    .map_err(|e| format!("byte {FILE_LEN}: cutting the file there: {e}"))
            });
        if let Err(what) = written {
            return Err(RingError::Io {
                path: self.path.display().to_string(),
                what: format!("{what}; {}", empty(&self.file)),
            });
        }
        Ok(Recorder {
            file: self.file,
            image,
            path: self.path,
            next_slot: 0,
        })
    }
}

/// Empty a ring file that could not be written (a truncation frees blocks and needs none);
/// says what became of it, for the error.
fn empty(file: &File) -> String {
    match file.set_len(0) {
        Ok(()) => "the file is emptied".to_string(),
        Err(e) => format!("emptying the file failed too: {e}"),
    }
}

impl Recorder {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write bytes `r` of the image to the file (one `pwrite`, retried only on `EINTR` and
    /// short writes).
    fn write(&self, r: Range<usize>) -> Result<(), RingError> {
        self.file
            .write_all_at(&self.image[r.clone()], r.start as u64)
            .map_err(|e| RingError::Io {
                path: self.path.display().to_string(),
                what: format!("byte {}: writing {} bytes: {e}", r.start, r.len()),
            })
    }

    /// Store one poll's sample (one copy into the image, one `pwrite` of its slot).
    pub fn record(&mut self, s: &Sample, strikes: &Strikes) -> Result<(), RingError> {
        let clamp = |v: u32| v.min(u8::MAX as u32) as u8;
        let slot = Slot {
            // Sequence 0 marks an empty slot.
            sample: Sample {
                seq: s.seq.max(1),
                ..*s
            },
            strikes: [
                clamp(strikes.heap),
                clamp(strikes.fd),
                clamp(strikes.threads),
                clamp(strikes.vm_size),
                clamp(strikes.cgroup_memory),
            ],
        };
        let r = slot_range(self.next_slot);
        encode_slot(&mut self.image[r.clone()], &slot);
        self.next_slot = (self.next_slot + 1) % SLOTS;
        self.write(r)
    }

    /// Mark how the process is ending (or, with `Running`, that it goes on).
    pub fn set_state(&mut self, st: State) -> Result<(), RingError> {
        put_u32(&mut self.image, H_STATE, st.code());
        self.write(H_STATE..H_STATE + 4)
    }

    /// Set or clear a busy flag ([`BUSY_DUMP`], [`BUSY_ANALYSIS`]).
    pub fn set_busy(&mut self, flag: u32, on: bool) -> Result<(), RingError> {
        let v = get_u32(&self.image, H_BUSY);
        put_u32(
            &mut self.image,
            H_BUSY,
            if on { v | flag } else { v & !flag },
        );
        self.write(H_BUSY..H_BUSY + 4)
    }

    pub fn set_policy_version(&mut self, v: u64) -> Result<(), RingError> {
        put_u64(&mut self.image, H_POLICY_VERSION, v);
        self.write(H_POLICY_VERSION..H_POLICY_VERSION + 8)
    }

    /// The page the app says it shows (cut to fit).
    pub fn set_page(&mut self, page: &str) -> Result<(), RingError> {
        let n = put_str(&mut self.image[H_PAGE + 1..H_PAGE + PAGE_LEN], page);
        self.image[H_PAGE] = n as u8;
        self.write(H_PAGE..H_PAGE + PAGE_LEN)
    }

    /// Record the fatal error that is ending the process.
    pub fn last_words(&mut self, w: &LastWords) -> Result<(), RingError> {
        let r = trailer_range();
        encode_last_words(&mut self.image[r.clone()], w);
        self.write(r)
    }

    /// The ring as the file holds it, read back with `pread` (for tests and `status`).
    pub fn snapshot(&self) -> Result<Previous, RingError> {
        let mut b = vec![0u8; FILE_LEN];
        self.file
            .read_exact_at(&mut b, 0)
            .map_err(|e| RingError::Io {
                path: self.path.display().to_string(),
                what: format!("byte 0: reading {FILE_LEN} bytes back: {e}"),
            })?;
        parse(&self.path, &b)
    }

    /// The polls of the last `window_ms` before the newest, oldest first, read from the image
    /// (which equals the file): no system call.
    pub fn recent(&self, window_ms: u64) -> Vec<Sample> {
        let Ok(p) = parse(&self.path, &self.image) else {
            return Vec::new();
        };
        let newest = p.samples.last().map_or(0, |s| s.sample.at_ms);
        p.samples
            .into_iter()
            .map(|s| s.sample)
            .filter(|s| s.at_ms >= newest.saturating_sub(window_ms))
            .collect()
    }

    /// Give the file up after a failed write: empty it (see the module comment) and release
    /// its lock.
    fn abandon(self) -> String {
        empty(&self.file)
    }
}

#[cfg(test)]
mod tests;

/// The process's recorder, shared by the agent's poll, the incident pipeline (busy flags), and
/// the JNI entries (the page, the last words, the exit mark). Empty while no agent runs, when
/// the ring could not be kept, or after a write to it failed: the recorder is then dropped for
/// the rest of the process and the reason kept until the agent takes it for its status
/// ([`Flight::take_off_reason`]). Each call takes an uncontended lock, copies a few bytes and
/// makes one `pwrite`.
#[derive(Debug, Clone, Default)]
pub struct Flight {
    inner: std::sync::Arc<std::sync::Mutex<FlightInner>>,
}

#[derive(Debug, Default)]
struct FlightInner {
    recorder: Option<Recorder>,
    /// Why the recorder turned itself off, until the agent takes it.
    off: Option<String>,
}

impl Flight {
    fn lock(&self) -> std::sync::MutexGuard<'_, FlightInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run a write on the recorder, if there is one; a failed write turns it off.
    fn with<T>(&self, f: impl FnOnce(&mut Recorder) -> Result<T, RingError>) -> Option<T> {
        let mut g = self.lock();
        let r = g.recorder.as_mut()?;
        match f(r) {
            Ok(v) => Some(v),
            Err(e) => {
                let emptied = g.recorder.take().map(Recorder::abandon).unwrap_or_default();
                let why = format!("{e}; {emptied}; nothing more is recorded in this process (the next launch tries again)");
                tracing::warn!("flight recorder off: {why}");
                g.off = Some(why);
                None
            }
        }
    }

    /// Install this process's recorder (or none).
    pub fn install(&self, r: Option<Recorder>) {
        let mut g = self.lock();
        g.recorder = r;
        g.off = None;
    }

    /// Why the recorder turned itself off after a failed write, once (then `None` again).
    pub fn take_off_reason(&self) -> Option<String> {
        self.lock().off.take()
    }

    /// Mark the end `st` and drop the recorder (releasing its lock).
    pub fn finish(&self, st: State) {
        self.with(|r| r.set_state(st));
        self.lock().recorder = None;
    }

    pub fn record(&self, s: &Sample, strikes: &Strikes) {
        self.with(|r| r.record(s, strikes));
    }

    /// The polls of the last `window_ms` the ring holds, oldest first; none without a
    /// recorder ([`Recorder::recent`]).
    pub fn recent(&self, window_ms: u64) -> Vec<Sample> {
        self.lock()
            .recorder
            .as_ref()
            .map(|r| r.recent(window_ms))
            .unwrap_or_default()
    }

    pub fn set_busy(&self, flag: u32, on: bool) {
        self.with(|r| r.set_busy(flag, on));
    }

    pub fn set_state(&self, st: State) {
        self.with(|r| r.set_state(st));
    }

    pub fn set_page(&self, page: &str) {
        self.with(|r| r.set_page(page));
    }

    pub fn set_policy_version(&self, v: u64) {
        self.with(|r| r.set_policy_version(v));
    }

    /// Record the fatal error ending the process. Returns whether a ring took it.
    pub fn last_words(&self, w: &LastWords) -> bool {
        self.with(|r| r.last_words(w)).is_some()
    }
}
