//! The streaming stripper.
//!
//! It consumes a dump in chunks of any size and writes a smaller, still valid HPROF:
//! - `none`: a validated, byte-identical copy;
//! - `arrays`: every primitive array becomes a PRIMITIVE_ARRAY_NODATA (0xC3) record that keeps its
//!   id, stack serial, length and element type, and no byte of its contents. The header says
//!   `JAVA PROFILE 1.0.3`, the format that defines 0xC3, so the result is a valid file, not a
//!   fragment. Each heap dump segment's length is patched once the segment is complete.
//! - `app`: `arrays`, and the instances and arrays of the `zygote` and `image` heaps are dropped
//!   with their HEAP_DUMP_INFO records. Their class dumps and GC roots stay: app objects are
//!   instances of framework classes, and the analyser needs those classes' field layouts. A
//!   dropped heap's HEAP_DUMP_INFO is written back only in front of the first record of that
//!   heap that is kept (a class dump, or an object [`holders`] cannot account for), so every kept
//!   record stays in the heap it was in. What the dropped objects referenced is kept as GC roots
//!   written before HEAP_DUMP_END ([`holders`]): the strip loses sizes, never a path to an app
//!   object. Level `app` allocates while it feeds (the id table and class layouts of
//!   [`holders`], bounded) and strips on one thread.
//!
//! The output is the same bytes whatever the chunking of the input. Output goes through a
//! preallocated buffer to a [`Sink`]; after construction nothing is allocated while feeding
//! (unless a record head outgrows the parser's preallocated buffer).
//!
//! A dump that is whole in memory (the `strip` command maps it) takes [`strip_mapped`] instead:
//! verbatim input is written by reference (from a writer thread once the dump is 16 MiB or
//! more, on the parsing thread below that), and a large dump is cut at
//! record boundaries into parts stripped side by side ([`parallel`]). Both write the same bytes
//! as [`Stripper`]; the hook, which sees the dump only as the VM writes it, uses [`Stripper`].

use super::parser::{Parser, ParserLimits, Record, Sub, Visitor};
use super::{sub, Error, Header, Result, VERSION_DIGIT_OFFSET};
use sys::chan;

mod holders;
mod output;
mod parallel;

use output::*;
pub(crate) use output::{Emit, Out};
pub use output::{FileSink, Sink};

/// How much to strip.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// A validated copy.
    None,
    /// Primitive array contents removed.
    #[default]
    Arrays,
    /// `arrays`, plus the zygote and image heaps' objects.
    App,
}

impl std::str::FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Level, String> {
        match s {
            "none" => Ok(Level::None),
            "arrays" => Ok(Level::Arrays),
            "app" => Ok(Level::App),
            _ => Err(format!(
                "unknown strip level {s:?} (expected none, arrays or app)"
            )),
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Level::None => "none",
            Level::Arrays => "arrays",
            Level::App => "app",
        })
    }
}

/// What a strip did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StripStats {
    pub input_bytes: u64,
    pub output_bytes: u64,
    /// Primitive arrays whose contents were removed.
    pub arrays_stripped: u64,
    /// Bytes of primitive array contents removed.
    pub array_bytes_removed: u64,
    /// Instances and arrays dropped with the zygote and image heaps (`app`).
    pub objects_dropped: u64,
    /// Objects of those heaps kept because the stripper could not note what they reference (their
    /// class's layout not seen before them, or its table full).
    pub objects_kept_in_dropped_heaps: u64,
    /// GC roots written for the objects the dropped ones referenced (`app`).
    pub holder_roots: u64,
}

/// Most heap names the stripper tracks (ids of the strings "zygote" and "image").
const MAX_DROP_NAMES: usize = 8;

/// Whether a UTF8 record's text names a heap that level `app` drops.
fn is_dropped_heap_name(text: &[u8]) -> bool {
    text == b"zygote" || text == b"image"
}

struct State<E: Emit> {
    level: Level,
    out: E,
    /// Output offset of the current segment's record header.
    seg_head: u64,
    /// The dump's identifier size.
    id_size: u32,
    /// String ids whose text is a heap to drop.
    drop_names: [u64; MAX_DROP_NAMES],
    drop_name_count: usize,
    /// The objects that follow are in a dropped heap.
    dropping: bool,
    /// Skip the current array's elements.
    skip_array: bool,
    /// A dropped heap's HEAP_DUMP_INFO, to write in front of a class dump that is kept.
    pending_info: [u8; 13],
    pending_info_len: usize,
    stats: StripStats,
    /// This state strips a part of a file cut at a record boundary, not its start: the file
    /// header is someone else's to write (see [`parallel`], which never strips level `app`).
    part: bool,
    /// Level `app`: what the dropped objects referenced (made when the header is read).
    holders: Option<Box<holders::Holders>>,
}

impl<E: Emit> State<E> {
    fn new(level: Level, out: E) -> State<E> {
        State {
            level,
            out,
            seg_head: 0,
            id_size: 4,
            drop_names: [0; MAX_DROP_NAMES],
            drop_name_count: 0,
            dropping: false,
            skip_array: false,
            pending_info: [0; 13],
            pending_info_len: 0,
            stats: StripStats::default(),
            part: false,
            holders: None,
        }
    }

    fn finish(mut self, end: u64) -> Result<(E, StripStats)> {
        // A dump without HEAP_DUMP_END: the roots go in a segment of their own at the end.
        self.write_holder_roots().map_err(|e| Error::new(end, e))?;
        self.out.flush().map_err(|e| Error::new(end, e))?;
        let mut stats = self.stats;
        stats.input_bytes = end;
        stats.output_bytes = self.out.pos();
        Ok((self.out, stats))
    }
}

impl<E: Emit> State<E> {
    /// Write a HEAP_DUMP_SEGMENT of GC roots for what the dropped objects referenced (see
    /// [`holders`]), if any, and start afresh for the next heap dump.
    fn write_holder_roots(&mut self) -> std::result::Result<(), String> {
        let Some(h) = self.holders.as_mut() else {
            return Ok(());
        };
        if !h.pending() {
            return Ok(());
        }
        let ids = h.take_wanted();
        if ids.is_empty() {
            return Ok(());
        }
        let n = self.id_size as usize;
        let len = u32::try_from(ids.len() * (1 + 2 * n))
            .map_err(|_| "the stripped objects' roots passed 4 GiB".to_string())?;
        let mut head = [0u8; 9];
        head[0] = super::tag::HEAP_DUMP_SEGMENT;
        head[5..].copy_from_slice(&len.to_be_bytes());
        self.out.lit(&head)?;
        let mark = super::STRIPPED_HOLDER_MARK.to_be_bytes();
        let mut rec = [0u8; 17];
        rec[0] = sub::ROOT_JNI_GLOBAL;
        rec[1 + n..1 + 2 * n].copy_from_slice(&mark[8 - n..]);
        for id in ids {
            rec[1..1 + n].copy_from_slice(&id.to_be_bytes()[8 - n..]);
            self.out.lit(&rec[..1 + 2 * n])?;
            self.stats.holder_roots += 1;
        }
        Ok(())
    }

    /// Write a dropped heap's HEAP_DUMP_INFO waiting for a kept record of that heap.
    fn write_pending_info(&mut self) -> std::result::Result<(), String> {
        if self.pending_info_len > 0 {
            let n = self.pending_info_len;
            self.pending_info_len = 0;
            let info = self.pending_info;
            self.out.lit(&info[..n])?;
        }
        Ok(())
    }
}

impl<E: Emit> Visitor for State<E> {
    fn header(&mut self, h: &Header, raw: &[u8]) -> std::result::Result<(), String> {
        self.id_size = h.id_size;
        if self.level == Level::App {
            self.holders = Some(Box::new(holders::Holders::new(h.id_size)));
        }
        if self.part {
            return Ok(());
        }
        if self.level == Level::None {
            return self.out.raw(raw);
        }
        let mut h = [0u8; super::HEADER_LEN];
        h.copy_from_slice(raw);
        // 0xC3 is defined by 1.0.3: say so.
        h[VERSION_DIGIT_OFFSET] = b'3';
        self.out.lit(&h)
    }

    #[inline(always)]
    fn record(
        &mut self,
        _at: u64,
        rec: &Record<'_>,
        raw: &[u8],
    ) -> std::result::Result<(), String> {
        if self.level == Level::App {
            if let Some((id, text)) = rec.utf8() {
                if is_dropped_heap_name(text) && self.drop_name_count < MAX_DROP_NAMES {
                    self.drop_names[self.drop_name_count] = id;
                    self.drop_name_count += 1;
                }
            } else if rec.tag == super::tag::HEAP_DUMP_END {
                self.write_holder_roots()?;
            }
            if let Some(h) = self.holders.as_mut() {
                if let Some((id, text)) = rec.utf8() {
                    h.string(id, text);
                } else if let Some((_, class_id, _, name_id)) = rec.load_class() {
                    h.load_class(class_id, name_id);
                }
            }
        }
        self.out.raw(raw)
    }

    fn heap_dump_start(
        &mut self,
        _at: u64,
        _tag: u8,
        _len: u32,
        raw: &[u8],
    ) -> std::result::Result<(), String> {
        self.seg_head = self.out.pos();
        // Written as made-up bytes: its length is patched when the segment ends.
        self.out.lit(raw)
    }

    fn heap_dump_end(&mut self) -> std::result::Result<(), String> {
        let len = self.out.pos() - self.seg_head - 9;
        let len =
            u32::try_from(len).map_err(|_| "a heap dump segment grew past 4 GiB".to_string())?;
        self.out.patch(self.seg_head + 5, &len.to_be_bytes())
    }

    #[inline(always)]
    fn sub(&mut self, _at: u64, s: &Sub<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        self.skip_array = false;
        // Only a dump that names a heap to drop (Android's) needs them: a HotSpot dump costs
        // nothing more at level `app` than at `arrays`.
        if let Some(h) = self.holders.as_mut().filter(|_| self.drop_name_count > 0) {
            match *s {
                Sub::Root { tag, id, .. } if tag != sub::ROOT_UNREACHABLE => h.root(id),
                Sub::Class(ref c) => h.class(c),
                _ => {}
            }
        }
        match *s {
            Sub::HeapDumpInfo { name_id, .. } if self.level == Level::App => {
                self.dropping = self.drop_names[..self.drop_name_count].contains(&name_id);
                if self.dropping {
                    self.pending_info[..raw.len()].copy_from_slice(raw);
                    self.pending_info_len = raw.len();
                    Ok(())
                } else {
                    self.pending_info_len = 0;
                    self.out.raw(raw)
                }
            }
            Sub::Instance { .. } | Sub::ObjectArray { .. } | Sub::PrimitiveArray { .. }
                if self.dropping =>
            {
                // Level `app` made the holders with the header, before any object.
                let noted = self.holders.as_mut().is_some_and(|h| h.object(s));
                if noted {
                    self.stats.objects_dropped += 1;
                    self.skip_array = true;
                    return Ok(());
                }
                self.stats.objects_kept_in_dropped_heaps += 1;
                self.write_pending_info()?;
                match *s {
                    Sub::PrimitiveArray {
                        nodata: false,
                        len,
                        ty,
                        ..
                    } => {
                        self.skip_array = true;
                        self.stats.arrays_stripped += 1;
                        self.stats.array_bytes_removed += len as u64 * ty.size(4) as u64;
                        self.out.nodata_head(raw)
                    }
                    _ => self.out.raw(raw),
                }
            }
            Sub::PrimitiveArray {
                nodata: false,
                len,
                ty,
                ..
            } if self.level != Level::None => {
                self.skip_array = true;
                self.stats.arrays_stripped += 1;
                self.stats.array_bytes_removed += len as u64 * ty.size(4) as u64;
                self.out.nodata_head(raw)
            }
            Sub::Class(_) if self.pending_info_len > 0 => {
                self.write_pending_info()?;
                self.out.raw(raw)
            }
            _ => self.out.raw(raw),
        }
    }

    #[inline(always)]
    fn array_data(&mut self, data: &[u8]) -> std::result::Result<(), String> {
        if self.skip_array {
            if self.dropping {
                if let Some(h) = self.holders.as_mut() {
                    h.elements(data);
                }
            }
            Ok(())
        } else {
            self.out.raw(data)
        }
    }

    fn array_end(&mut self) -> std::result::Result<(), String> {
        if let Some(h) = self.holders.as_mut() {
            h.array_end();
        }
        Ok(())
    }
}

/// The streaming stripper. Feed it the dump in chunks, then call [`Stripper::finish`].
pub struct Stripper<S: Sink> {
    parser: Parser,
    state: State<Out<S>>,
}

impl<S: Sink> Stripper<S> {
    /// A stripper with default buffers (64 KiB of output buffer).
    pub fn new(level: Level, sink: S) -> Stripper<S> {
        Stripper::with_buffers(level, sink, ParserLimits::default(), 64 << 10)
    }

    /// A stripper whose parser and output buffers are fixed up front.
    pub fn with_buffers(
        level: Level,
        sink: S,
        limits: ParserLimits,
        out_capacity: usize,
    ) -> Stripper<S> {
        Stripper {
            parser: Parser::with_limits(limits),
            state: State::new(level, Out::new(sink, out_capacity)),
        }
    }

    /// Feed the next chunk of the input.
    pub fn feed(&mut self, data: &[u8]) -> Result<()> {
        self.parser.feed(data, &mut self.state)
    }

    /// The input is complete: check it ended cleanly, flush, and give back the sink.
    pub fn finish(mut self) -> Result<(S, StripStats)> {
        self.parser.finish()?;
        let end = self.parser.bytes_fed();
        let (out, stats) = self.state.finish(end)?;
        Ok((out.sink, stats))
    }
}

/// Strip an input that is whole in memory (typically a mapped file) to `sink`. The output is the
/// same bytes [`Stripper`] writes, but verbatim input is handed to the sink by reference
/// ([`Sink::write_all_vectored`]) instead of being copied through a buffer; from 16 MiB on, from a
/// second thread, so that writing overlaps parsing.
///
/// An input of at least 8 MiB whose records allow it (no part over half of the input) is cut
/// into parts stripped side by side on up to four threads (not at level `app`); the output is
/// the same bytes.
pub fn strip_mapped<S: Sink + Send>(
    input: &[u8],
    level: Level,
    sink: S,
) -> Result<(S, StripStats)> {
    let len = input.len() as u64;
    // Level `app` writes roots that depend on the whole heap dump ([`holders`]): one thread.
    if len >= parallel::MIN_PARALLEL_BYTES && level != Level::App {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let cuts = parallel::plan(input, parallel::part_bytes(len, workers))
            .filter(|cuts| workers > 1 && parallel::balanced(cuts, len));
        if let Some(cuts) = cuts {
            return parallel::strip(input, level, sink, &cuts, workers);
        }
    }
    let writer_thread = len >= WRITER_THREAD_MIN_BYTES;
    strip_mapped_parts(input, level, sink, 0, usize::from(writer_thread))
}

/// [`strip_mapped`] with parts of about `part_bytes` on `workers` threads (if `workers` < 2, or
/// if the input cannot be cut: this thread parses, and writes too if `workers` is 0, else a
/// writer thread does). For tests and benchmarks.
#[doc(hidden)]
pub fn strip_mapped_parts<S: Sink + Send>(
    input: &[u8],
    level: Level,
    sink: S,
    part_bytes: u64,
    workers: usize,
) -> Result<(S, StripStats)> {
    if workers > 1 && part_bytes > 0 && level != Level::App {
        if let Some(cuts) = parallel::plan(input, part_bytes) {
            return parallel::strip(input, level, sink, &cuts, workers);
        }
    }
    let end = input.len() as u64;
    if workers == 0 {
        let drain = Direct {
            sink,
            stage: Stage::default(),
        };
        let (out, stats) = strip_gathered(input, level, drain)?;
        return Ok((out.drain.sink, stats));
    }
    std::thread::scope(|scope| {
        let (tx, rx) = chan::sync_channel(GATHER_QUEUE);
        let (rtx, rrx) = chan::channel();
        let writer = std::thread::Builder::new()
            .name("oomguard-write".into())
            .spawn_scoped(scope, move || gather_writer(sink, input, rx, rtx))
            .map_err(|e| Error::new(0, format!("cannot start the writer thread: {e}")))?;
        let parsed = strip_gathered(input, level, Channel { tx, recycle: rrx });
        // Dropping the emitter closes the channel: the writer drains what is queued and ends.
        let stats = parsed.map(|(out, stats)| {
            drop(out);
            stats
        });
        let written = writer
            .join()
            .map_err(|_| Error::new(end, "the writer thread panicked"))?;
        match (stats, written) {
            (Ok(stats), Ok(sink)) => Ok((sink, stats)),
            // A failed write is the cause of whatever the parser then reported.
            (_, Err(e)) => Err(Error::new(end, write_err(e))),
            (Err(e), Ok(_)) => Err(e),
        }
    })
}

/// Parse all of `input` and strip it into a [`Gather`] over `drain`, flushed.
fn strip_gathered<D: Drain>(
    input: &[u8],
    level: Level,
    drain: D,
) -> Result<(Gather<'_, D>, StripStats)> {
    let mut parser = Parser::new();
    let mut state = State::new(level, Gather::new(drain, input));
    parser.feed(input, &mut state)?;
    parser.finish()?;
    state.finish(input.len() as u64)
}

/// Strip a whole in-memory dump.
pub fn strip_bytes(input: &[u8], level: Level) -> Result<(Vec<u8>, StripStats)> {
    let mut s = Stripper::new(level, Vec::with_capacity(input.len() / 4));
    s.feed(input)?;
    s.finish()
}

#[cfg(test)]
mod level_tests {
    use super::Level;

    /// The names `oomguard strip --level` and the policy's strip level take, read and written.
    #[test]
    fn levels_read_and_print_by_their_names() {
        for (name, level) in [
            ("none", Level::None),
            ("arrays", Level::Arrays),
            ("app", Level::App),
        ] {
            assert_eq!(name.parse::<Level>(), Ok(level));
            assert_eq!(level.to_string(), name);
        }
        let e = "all".parse::<Level>().unwrap_err();
        assert!(
            e.contains("\"all\"") && e.contains("none, arrays or app"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod drop_name_tests {
    use super::{strip_bytes, Level, MAX_DROP_NAMES};
    use crate::writer::Writer;
    use crate::{sub, tag, Format};

    /// A dump may name the dropped heaps more often than the stripper keeps names for (a crafted
    /// or odd dump: every "zygote" string is a UTF8 record of its own). The first names are
    /// kept, the rest ignored: a heap named by an ignored string is kept whole, never a crash.
    #[test]
    fn names_of_dropped_heaps_past_the_stripper_s_table_are_ignored_not_a_crash() {
        let mut w = Writer::new(Format::V103, 4, 0);
        let names = MAX_DROP_NAMES as u64 + 2;
        for id in 1..=names {
            w.utf8(id, if id % 2 == 0 { "image" } else { "zygote" });
        }
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.root(sub::ROOT_STICKY_CLASS, 0x50);
        w.class_dump(0x50, 0, 0, 0, &[], &[]);
        // The first name: a dropped heap. The last one is past the table: its heap is kept.
        w.heap_info(b'Z' as u32, 1);
        w.instance(0x1000, 0x50, &[]);
        w.heap_info(b'Z' as u32, names);
        w.instance(0x2000, 0x50, &[]);
        w.heap_dump_end();
        let (twin, stats) = strip_bytes(&w.finish(), Level::App).unwrap();
        assert_eq!(stats.objects_dropped, 1, "{stats:?}");
        let has = |id: u8| {
            twin.windows(5)
                .any(|x| x == [sub::INSTANCE_DUMP, 0, 0, id, 0])
        };
        assert!(!has(0x10), "the first zygote heap's instance is dropped");
        assert!(has(0x20), "the heap named past the table is kept");
    }
}
