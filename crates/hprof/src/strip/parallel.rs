//! Stripping a mapped dump on several threads.
//!
//! The file is cut at top-level record boundaries into parts of about [`part_bytes`]. Worker
//! threads strip parts side by side, each into memory (short pieces copied together, long runs
//! of verbatim input referred to, its segment lengths already patched); the calling thread
//! writes the parts in file order, as few large iovecs. At most [`AHEAD`] parts per worker are
//! stripped ahead of the writer, so memory stays bounded whatever the file's size.
//!
//! Invariants:
//! - The output is the same bytes the sequential stripper writes. Levels `none` and `arrays`
//!   keep no state from one heap dump segment to the next, so each part is stripped on its own.
//! - Level `app` is never stripped here: it keeps state from one record to the next (which heap
//!   the objects are in) and writes roots that depend on the whole heap dump (`strip::holders`).
//!   [`strip`] refuses it; the callers strip it on one thread.
//! - A parse error is reported at the same byte offset as the sequential stripper reports it:
//!   parts are written in order, so the first failing part is the first failure in the file.

use super::{push_nodata_head, Emit, Level, Pieces, Sink, Span, Stage, State, StripStats};
use crate::parser::Parser;
use crate::{read_u32, Error, Result, HEADER_LEN};
use std::collections::BTreeMap;
use std::sync::Mutex;
use sys::chan;

/// Most bytes of input per part.
const PART_BYTES: u64 = 8 << 20;
/// Fewest bytes of input per part.
const MIN_PART_BYTES: u64 = 256 << 10;
/// Inputs smaller than this are stripped on one thread (and a writer thread): below it, the
/// threads' start and memory cost the process about what they save.
pub(super) const MIN_PARALLEL_BYTES: u64 = 8 << 20;

/// The part size for an input of `len` bytes on `workers` threads: at least two parts per
/// worker, so that a small input (an app's few-MB dump) is spread over all of them too.
pub(super) fn part_bytes(len: u64, workers: usize) -> u64 {
    (len / (2 * workers.max(1) as u64)).clamp(MIN_PART_BYTES, PART_BYTES)
}
/// Parts a worker may strip ahead of the writer.
const AHEAD: usize = 3;
/// Record heads [`plan`] asks for ahead of the one it reads.
const PLAN_GUESSES: u64 = 8;

/// Where to cut `input` (offsets of top-level records). `None` if the file cannot be cut into two
/// or more parts of about `part` bytes, or if its top-level records do not chain exactly to its end
/// (the sequential stripper then reports the problem at its offset).
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
    let mut cuts = vec![Cut { start: pos }];
    let mut next = pos + part;
    while pos < len {
        let h = input.get(pos as usize..pos as usize + 9)?;
        let body = read_u32(&h[5..]) as u64;
        if pos >= next {
            cuts.push(Cut { start: pos });
            next = pos + part;
        }
        pos += 9 + body;
        // Where the next heads are depends on the lengths in this one and those after it, so
        // each waits for memory in turn (ART writes a segment every few KiB). Guess that the
        // next records are as long as this one and ask for their heads now.
        for k in 1..=PLAN_GUESSES {
            sys::mapped::prefetch(input, (pos + k * (9 + body)) as usize);
        }
    }
    (pos == len && cuts.len() > 1).then_some(cuts)
}

/// Whether `cuts` spread an input of `len` bytes over threads well enough to be worth it. A
/// part can only end at a top-level record, and one heap dump segment can be most of the file
/// (HotSpot before 17 writes one): if a part holds over half the input, the others cannot keep
/// the threads busy, and the sequential stripper (whose writer thread overlaps the parsing) is
/// faster.
pub(super) fn balanced(cuts: &[Cut], len: u64) -> bool {
    let ends = cuts.iter().skip(1).map(|c| c.start).chain([len]);
    cuts.iter()
        .zip(ends)
        .all(|(c, end)| end - c.start <= len / 2)
}

/// A part's start.
pub(super) struct Cut {
    start: u64,
}

/// A stripped part, in memory.
struct Part {
    out: Stage,
    /// Output bytes.
    len: u64,
    stats: StripStats,
}

/// Collects a part's output: short pieces are copied together on the worker's core (so the
/// writer hands the kernel a few large iovecs), long runs of verbatim input are referred to and
/// never copied by the stripper. Patches are applied in place.
struct Collect<'a> {
    base: &'a [u8],
    out: Stage,
    /// A run of verbatim input not yet staged: whether it is copied depends on how long it grows.
    run: Option<(usize, usize)>,
    len: u64,
}

impl Collect<'_> {
    #[inline]
    fn end_run(&mut self) {
        if let Some((start, len)) = self.run.take() {
            self.out.input(self.base, start, len);
        }
    }
}

impl Emit for Collect<'_> {
    fn pos(&self) -> u64 {
        self.len
    }
    #[inline]
    fn raw(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        self.len += b.len() as u64;
        let Some(start) = Pieces::offset_in(self.base, b) else {
            self.end_run();
            self.out.copy(b);
            return Ok(());
        };
        match &mut self.run {
            Some((s, l)) if *s + *l == start => *l += b.len(),
            _ => {
                self.end_run();
                self.run = Some((start, b.len()));
            }
        }
        Ok(())
    }
    fn lit(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        self.end_run();
        self.len += b.len() as u64;
        self.out.copy(b);
        Ok(())
    }
    #[inline]
    fn nodata_head(&mut self, head: &[u8]) -> std::result::Result<(), String> {
        self.end_run();
        self.len += head.len() as u64;
        let at = self.out.bytes.len();
        push_nodata_head(&mut self.out.bytes, head);
        self.out.staged(at, head.len());
        Ok(())
    }
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String> {
        // Patches land on a segment's header, a few KiB back: walk back from the end.
        let mut end = self.len - self.run.map_or(0, |(_, l)| l as u64);
        for span in self.out.spans.iter().rev() {
            let (l, staged) = match *span {
                Span::Staged(a, l) => (l, Some(a)),
                Span::Input(_, l) => (l, None),
            };
            let at = end - l as u64;
            if offset >= at {
                let o = (offset - at) as usize;
                return match staged {
                    Some(a) if o + b.len() <= l => {
                        self.out.bytes[a + o..a + o + b.len()].copy_from_slice(b);
                        Ok(())
                    }
                    _ => Err(format!(
                        "internal: patch at {offset} is not in made-up bytes"
                    )),
                };
            }
            end = at;
        }
        Err(format!("internal: patch at {offset} is past the part"))
    }
    fn flush(&mut self) -> std::result::Result<(), String> {
        self.end_run();
        Ok(())
    }
}

/// Strip the part `[a, b)` of `input`.
fn strip_part(input: &[u8], level: Level, (a, b): (u64, u64), mut out: Stage) -> Result<Part> {
    let first = a == HEADER_LEN as u64;
    out.clear();
    let collect = Collect {
        base: input,
        out,
        run: None,
        len: 0,
    };
    let mut state = State::new(level, collect);
    state.part = !first;
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
    let (collect, stats) = state.finish(b).map_err(fix)?;
    Ok(Part {
        out: collect.out,
        len: collect.len,
        stats,
    })
}

/// Strip `input` cut at `cuts` to `sink` with `workers` threads; level `none` or `arrays`.
pub(super) fn strip<S: Sink>(
    input: &[u8],
    level: Level,
    mut sink: S,
    cuts: &[Cut],
    workers: usize,
) -> Result<(S, StripStats)> {
    let end = input.len() as u64;
    if level == Level::App {
        return Err(Error::new(
            0,
            "internal: level app is stripped on one thread",
        ));
    }
    let range = |k: usize| {
        let b = cuts.get(k + 1).map_or(end, |c| c.start);
        (cuts[k].start, b)
    };
    // Tickets: the part numbers workers may strip. The writer hands out one more as it writes
    // each part, so workers stay at most `AHEAD` parts each ahead of it.
    let (ticket_tx, ticket_rx) = chan::channel::<usize>();
    let ticket_rx = Mutex::new(ticket_rx);
    let (done_tx, done_rx) = chan::channel::<(usize, Result<Part>)>();
    // Output buffers the writer has emptied, for the workers to fill again: their pages are
    // faulted in once, not once per part.
    let spare: Mutex<Vec<Stage>> = Mutex::new(Vec::new());
    let buffer = || {
        spare
            .lock()
            .ok()
            .and_then(|mut s| s.pop())
            .unwrap_or_default()
    };
    std::thread::scope(|scope| {
        let mut issued = 0;
        while issued < cuts.len() && issued < workers * AHEAD {
            let _ = ticket_tx.send(issued);
            issued += 1;
        }
        for w in 0..workers {
            let (ticket_rx, done_tx, buffer) = (&ticket_rx, done_tx.clone(), &buffer);
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
                    let part = strip_part(input, level, range(k), buffer());
                    if done_tx.send((k, part)).is_err() {
                        return;
                    }
                })
                .map_err(|e| Error::new(0, format!("cannot start a strip thread: {e}")))?;
        }
        drop(done_tx);
        let mut ready: BTreeMap<usize, Result<Part>> = BTreeMap::new();
        let mut stats = StripStats::default();
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
                Ok(p) => p,
                Err(e) if next == 0 => break Err(e),
                // The message may quote offsets of the part's own parser: find the error as
                // the sequential stripper meets it.
                Err(e) => break Err(sequential_error(input, level, range(next).1).unwrap_or(e)),
            };
            // The part's segment lengths are patched already; only the header says where the
            // output of the whole file starts.
            if let Err(e) = part.out.write(&mut sink, input) {
                break Err(Error::new(end, super::write_err(e)));
            }
            written += part.len;
            if let Ok(mut s) = spare.lock() {
                s.push(part.out);
            }
            stats.arrays_stripped += part.stats.arrays_stripped;
            stats.array_bytes_removed += part.stats.array_bytes_removed;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::{art_dump, ArtSpec};

    fn cut(start: u64) -> Cut {
        Cut { start }
    }

    #[test]
    fn cuts_are_balanced_when_no_part_holds_over_half_the_input() {
        assert!(balanced(&[cut(31), cut(400), cut(700)], 1000));
        assert!(balanced(&[cut(31), cut(500)], 1000));
        // One segment of most of the file: not worth the threads.
        assert!(!balanced(&[cut(31), cut(100), cut(200)], 1000));
        assert!(!balanced(&[cut(31), cut(900)], 1000));
    }

    #[test]
    fn part_sizes_give_each_worker_two_parts_within_bounds() {
        assert_eq!(part_bytes(16 << 20, 4), 2 << 20);
        assert_eq!(part_bytes(1 << 30, 4), PART_BYTES);
        assert_eq!(part_bytes(1 << 20, 4), MIN_PART_BYTES);
        assert_eq!(part_bytes(1 << 20, 0), 512 << 10);
    }

    #[test]
    fn a_dump_of_many_segments_is_planned_into_balanced_parts() {
        let input = art_dump(&ArtSpec::default());
        let len = input.len() as u64;
        let cuts = plan(&input, len / 8).expect("an ART-style dump can be cut");
        assert!((6..=9).contains(&cuts.len()), "{} parts", cuts.len());
        assert!(balanced(&cuts, len));
        // Each part but the last holds at least the size asked for: parts are cut at the
        // first record past it, not at every record.
        for w in cuts.windows(2) {
            assert!(w[1].start - w[0].start >= len / 8);
        }
    }

    /// A part's output collector over `base`, empty.
    fn collect(base: &[u8]) -> Collect<'_> {
        Collect {
            base,
            out: super::super::Stage::default(),
            run: None,
            len: 0,
        }
    }

    /// A part's output is patched in its made-up bytes only (a segment's header): in the last
    /// ones or older ones; a patch that would run into verbatim input is an error, not a write.
    #[test]
    fn a_part_s_patch_lands_in_made_up_bytes_only() {
        use super::super::Emit;
        let base = vec![7u8; 6000];
        let mut c = collect(&base);
        c.lit(&[0; 9]).unwrap();
        c.raw(&base[..5000]).unwrap();
        c.raw(&base[5000..]).unwrap();
        c.lit(&[0; 9]).unwrap();
        c.patch(2, &[1; 4]).unwrap();
        c.patch(6012, &[2; 4]).unwrap();
        assert!(c.patch(7, &[3; 4]).is_err(), "into the verbatim input");
        assert_eq!(c.out.bytes[..9], [0, 0, 1, 1, 1, 1, 0, 0, 0]);
        assert_eq!(c.out.bytes[9..], [0, 0, 0, 2, 2, 2, 2, 0, 0]);
    }

    /// Verbatim input that follows on from the last run extends it (one iovec by reference);
    /// input from another place starts a run of its own, with the bytes of that place.
    #[test]
    fn a_part_s_runs_of_input_extend_only_when_they_follow_on() {
        use super::super::{Emit, Span};
        let base: Vec<u8> = (0..=255u8).cycle().take(12_000).collect();
        let mut c = collect(&base);
        c.raw(&base[..3000]).unwrap();
        c.raw(&base[3000..6000]).unwrap();
        c.raw(&base[7000..12_000]).unwrap();
        c.end_run();
        let spans: Vec<(usize, usize)> = c
            .out
            .spans
            .iter()
            .map(|s| match *s {
                Span::Input(a, l) => (a, l),
                Span::Staged(..) => (usize::MAX, 0),
            })
            .collect();
        assert_eq!(spans, [(0, 6000), (7000, 5000)]);
        assert_eq!(c.len, 11_000);
    }

    /// A dump of 8-byte ids is cut as one of 4-byte ids is; a header naming another size, a
    /// file whose records do not end where it does, or one that makes a single part is not cut
    /// (the sequential stripper strips it, or reports the problem at its offset).
    #[test]
    fn dumps_of_either_id_size_are_planned_and_no_other() {
        use crate::{writer::Writer, BasicType, Format};
        for id_size in [4u32, 8] {
            let mut w = Writer::new(Format::V102, id_size, 0);
            for i in 0..16u64 {
                w.segment(crate::tag::HEAP_DUMP_SEGMENT);
                w.primitive_array(0x100 + i, BasicType::Byte, 1000, &[1; 1000]);
                w.end_segment();
            }
            let mut input = w.finish();
            let cuts = plan(&input, 4000).expect("cut");
            assert_eq!(cuts.len(), 4, "id size {id_size}");
            assert!(plan(&input, 1 << 20).is_none(), "one part: not cut");
            assert!(
                plan(&input[..input.len() - 1], 4000).is_none(),
                "records that do not end where the file does: not cut"
            );
            input[HEADER_LEN - 9] = 6;
            assert!(plan(&input, 4000).is_none(), "id size 6");
        }
    }
}
