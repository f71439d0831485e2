//! Stripping a mapped dump on several threads.
//!
//! The file is cut at top-level record boundaries into parts of about [`PART_BYTES`]. Worker
//! threads strip parts side by side, each into memory as a list of pieces (slices of the input
//! and made-up bytes, with its segment lengths already patched); the calling thread writes the
//! parts in file order. At most [`AHEAD`] parts per worker are stripped ahead of the writer, so
//! memory stays bounded whatever the file's size.
//!
//! Invariants:
//! - The output is the same bytes the sequential stripper writes. Levels `none` and `arrays`
//!   keep no state from one heap dump segment to the next. Level `app` does (which heap the
//!   objects are in, and a dropped heap's HEAP_DUMP_INFO waiting for a class dump): each part
//!   starts with the heap names met before its cut and the default heap state, and records
//!   whether anything in it depended on that state before its first HEAP_DUMP_INFO. If it did
//!   and the state actually carried in differs, the writer strips that part again with the
//!   right state.
//! - A parse error is reported at the same byte offset as the sequential stripper reports it:
//!   parts are written in order, so the first failing part is the first failure in the file.

use super::{Carry, Emit, Level, Sink, State, StripStats};
use crate::hprof::parser::Parser;
use crate::hprof::{read_id, read_u32, tag, Error, Result, HEADER_LEN};
use std::collections::BTreeMap;
use std::sync::{mpsc, Mutex};

/// Bytes of input per part.
pub(super) const PART_BYTES: u64 = 8 << 20;
/// Inputs smaller than this are stripped on one thread.
pub(super) const MIN_PARALLEL_BYTES: u64 = 32 << 20;
/// Parts a worker may strip ahead of the writer.
const AHEAD: usize = 3;

/// Where to cut `input` (offsets of top-level records), and the heap names (`app`) met before
/// each cut. `None` if the file cannot be cut into two or more parts of about `part` bytes, or if
/// its top-level records do not chain exactly to its end (the sequential stripper then reports
/// the problem at its offset).
pub(super) fn plan(input: &[u8], part: u64) -> Option<Vec<Cut>> {
    let len = input.len() as u64;
    let mut pos = HEADER_LEN as u64;
    if len <= pos {
        return None;
    }
    let id_size = read_u32(input.get(HEADER_LEN - 12..HEADER_LEN - 8)?);
    // Any other identifier size is an error, which the sequential stripper reports.
    if id_size != 4 && id_size != 8 {
        return None;
    }
    let id_len = id_size as u64;
    let mut cuts = vec![Cut {
        start: pos,
        names: Vec::new(),
    }];
    let mut names = Vec::new();
    let mut next = pos + part;
    while pos < len {
        let h = input.get(pos as usize..pos as usize + 9)?;
        let body = read_u32(&h[5..]) as u64;
        if pos >= next {
            cuts.push(Cut {
                start: pos,
                names: names.clone(),
            });
            next = pos + part;
        }
        if h[0] == tag::UTF8 && body >= id_len {
            let b = pos as usize + 9;
            let text = input.get(b + id_len as usize..b + body as usize)?;
            if super::is_dropped_heap_name(text) {
                names.push(read_id(&input[b..], id_size));
            }
        }
        pos += 9 + body;
    }
    (pos == len && cuts.len() > 1).then_some(cuts)
}

/// A part's start and the ids of the UTF8 records naming a dropped heap before it.
pub(super) struct Cut {
    start: u64,
    names: Vec<u64>,
}

/// A stripped part, in memory.
struct Part {
    out: Vec<u8>,
    stats: StripStats,
    /// Its output depends on the heap state carried in (level `app`).
    depends: bool,
    /// It holds a HEAP_DUMP_INFO, so the state it leaves is its own.
    sets_heap: bool,
    carry: Carry,
}

/// Collects a part's output in one buffer (the copy is made on the worker's core, so the
/// writer has only large writes to make), with patches applied in place.
struct Collect {
    out: Vec<u8>,
}

impl Emit for Collect {
    fn pos(&self) -> u64 {
        self.out.len() as u64
    }
    fn raw(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        self.out.extend_from_slice(b);
        Ok(())
    }
    fn lit(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        self.out.extend_from_slice(b);
        Ok(())
    }
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String> {
        let o = offset as usize;
        match self.out.get_mut(o..o + b.len()) {
            Some(d) => {
                d.copy_from_slice(b);
                Ok(())
            }
            None => Err(format!("internal: patch at {offset} is past the part")),
        }
    }
    fn flush(&mut self) -> std::result::Result<(), String> {
        Ok(())
    }
}

/// Strip the part `[a, b)` of `input`, starting from the heap state `carry`.
fn strip_part(
    input: &[u8],
    level: Level,
    (a, b): (u64, u64),
    names: &[u64],
    carry: &Carry,
) -> Result<Part> {
    let first = a == HEADER_LEN as u64;
    let mut state = State::new(
        level,
        Collect {
            out: Vec::with_capacity(((b - a) / 2) as usize),
        },
    );
    state.part = !first;
    state.resume(carry, names);
    let mut parser = Parser::new();
    // Each parser reads the file header, then the part as if it followed it.
    let fix = |e: Error| {
        let offset = if first {
            e.offset
        } else {
            e.offset.saturating_sub(HEADER_LEN as u64) + a
        };
        Error::new(offset, e.what)
    };
    parser
        .feed(&input[..HEADER_LEN], &mut state)
        .and_then(|_| parser.feed(&input[a as usize..b as usize], &mut state))
        .and_then(|_| parser.finish())
        .map_err(fix)?;
    let (depends, sets_heap, carry) = (state.depends, !state.fresh, state.carry());
    let (out, stats) = state.finish(b).map_err(fix)?;
    Ok(Part {
        out: out.out,
        stats,
        depends,
        sets_heap,
        carry,
    })
}

/// Strip `input` cut at `cuts` to `sink` with `workers` threads.
pub(super) fn strip<S: Sink>(
    input: &[u8],
    level: Level,
    mut sink: S,
    cuts: &[Cut],
    workers: usize,
) -> Result<(S, StripStats)> {
    let end = input.len() as u64;
    let range = |k: usize| {
        let b = cuts.get(k + 1).map_or(end, |c| c.start);
        (cuts[k].start, b)
    };
    let fresh = Carry::default();
    // Tickets: the part numbers workers may strip. The writer hands out one more as it writes
    // each part, so workers stay at most `AHEAD` parts each ahead of it.
    let (ticket_tx, ticket_rx) = mpsc::channel::<usize>();
    let ticket_rx = Mutex::new(ticket_rx);
    let (done_tx, done_rx) = mpsc::channel::<(usize, Result<Part>)>();
    std::thread::scope(|scope| {
        let mut issued = 0;
        while issued < cuts.len() && issued < workers * AHEAD {
            let _ = ticket_tx.send(issued);
            issued += 1;
        }
        for w in 0..workers {
            let (ticket_rx, done_tx, fresh) = (&ticket_rx, done_tx.clone(), &fresh);
            std::thread::Builder::new()
                .name(format!("oomguard-strip{w}"))
                .spawn_scoped(scope, move || loop {
                    let k = match ticket_rx.lock() {
                        Ok(rx) => match rx.recv() {
                            Ok(k) => k,
                            Err(_) => return,
                        },
                        Err(_) => return,
                    };
                    let part = strip_part(input, level, range(k), &cuts[k].names, fresh);
                    if done_tx.send((k, part)).is_err() {
                        return;
                    }
                })
                .map_err(|e| Error::new(0, format!("cannot start a strip thread: {e}")))?;
        }
        drop(done_tx);
        let mut ready: BTreeMap<usize, Result<Part>> = BTreeMap::new();
        let mut stats = StripStats::default();
        let mut carry = fresh;
        let mut written = 0u64;
        let mut next = 0;
        let result = loop {
            if next == cuts.len() {
                break Ok(());
            }
            let part = match ready.remove(&next) {
                Some(p) => p,
                None => match done_rx.recv() {
                    Ok((k, p)) => {
                        ready.insert(k, p);
                        continue;
                    }
                    Err(_) => break Err(Error::new(end, "a strip thread stopped")),
                },
            };
            let part = match part {
                Ok(p) if level == Level::App && p.depends && carry != fresh => {
                    strip_part(input, level, range(next), &cuts[next].names, &carry)
                }
                p => p,
            };
            let part = match part {
                Ok(p) => p,
                Err(e) if next == 0 => break Err(e),
                // The message may quote offsets of the part's own parser: find the error as
                // the sequential stripper meets it.
                Err(e) => break Err(sequential_error(input, level, range(next).1).unwrap_or(e)),
            };
            // The part's segment lengths are patched already; only the header says where the
            // output of the whole file starts.
            if let Err(e) = sink.write_all(&part.out) {
                break Err(Error::new(end, super::write_err(e)));
            }
            written += part.out.len() as u64;
            if part.sets_heap {
                carry = part.carry;
            }
            stats.arrays_stripped += part.stats.arrays_stripped;
            stats.array_bytes_removed += part.stats.array_bytes_removed;
            stats.objects_dropped += part.stats.objects_dropped;
            next += 1;
            if issued < cuts.len() {
                let _ = ticket_tx.send(issued);
                issued += 1;
            }
        };
        // Closing the ticket channel ends the workers once their current part is done.
        drop(ticket_tx);
        result?;
        stats.input_bytes = end;
        stats.output_bytes = written;
        Ok((sink, stats))
    })
}

/// The error the sequential stripper reports on `input[..b]`, if any.
fn sequential_error(input: &[u8], level: Level, b: u64) -> Option<Error> {
    struct Discard;
    impl Sink for Discard {
        fn write_all(&mut self, _: &[u8]) -> std::io::Result<()> {
            Ok(())
        }
        fn patch(&mut self, _: u64, _: &[u8]) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut s = super::Stripper::new(level, Discard);
    s.feed(&input[..b as usize]).err()
}
