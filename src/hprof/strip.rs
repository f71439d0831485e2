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
use std::fs::File;
use std::io;
use std::sync::mpsc;

mod holders;
mod parallel;

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

/// Where stripped (or restored) output goes: appends, plus patches of bytes already written.
pub trait Sink {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Append several buffers in order (a sink over a file does it in one `writev`).
    fn write_all_vectored(&mut self, bufs: &[&[u8]]) -> io::Result<()> {
        bufs.iter().try_for_each(|b| self.write_all(b))
    }
    /// Overwrite bytes at `offset`, which is below the number of bytes written so far.
    fn patch(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()>;
}

impl Sink for Vec<u8> {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.extend_from_slice(buf);
        Ok(())
    }
    fn patch(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let o = offset as usize;
        self.get_mut(o..o + bytes.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "patch past the end"))?
            .copy_from_slice(bytes);
        Ok(())
    }
}

/// A file written by `write` and patched by `pwrite`.
pub struct FileSink {
    pub file: File,
}

impl Sink for FileSink {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut self.file, buf)
    }
    fn write_all_vectored(&mut self, bufs: &[&[u8]]) -> io::Result<()> {
        let mut v: Vec<io::IoSlice<'_>> = bufs.iter().map(|b| io::IoSlice::new(b)).collect();
        let mut rest = &mut v[..];
        while !rest.is_empty() {
            match io::Write::write_vectored(&mut self.file, rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => io::IoSlice::advance_slices(&mut rest, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    fn patch(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.file, bytes, offset)
    }
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        (**self).write_all(buf)
    }
    fn write_all_vectored(&mut self, bufs: &[&[u8]]) -> io::Result<()> {
        (**self).write_all_vectored(bufs)
    }
    fn patch(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        (**self).patch(offset, bytes)
    }
}

/// Where the stripper's output goes. `raw` bytes are a verbatim slice of the input being parsed
/// (an emitter over a mapped input may refer to them instead of copying); `lit` bytes are made up.
pub(crate) trait Emit {
    fn pos(&self) -> u64;
    fn raw(&mut self, b: &[u8]) -> std::result::Result<(), String>;
    fn lit(&mut self, b: &[u8]) -> std::result::Result<(), String>;
    /// Made-up bytes: `head`, the head of a primitive array dump (tag, id, serial, length,
    /// type), as the head of a PRIMITIVE_ARRAY_NODATA record (the same bytes but the tag).
    fn nodata_head(&mut self, head: &[u8]) -> std::result::Result<(), String> {
        self.lit(&[sub::PRIMITIVE_ARRAY_NODATA_DUMP])?;
        self.lit(&head[1..])
    }
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String>;
    fn flush(&mut self) -> std::result::Result<(), String>;
}

/// The longest primitive array head (tag, 8-byte id, serial, length, type).
const ARRAY_HEAD_MAX: usize = 18;

/// Append `head`, a primitive array dump's head, to `v` as a PRIMITIVE_ARRAY_NODATA head (see
/// [`Emit::nodata_head`]). One per array: the heads of the two identifier sizes are copied at a
/// fixed length, a few moves instead of a call to `memcpy`.
#[inline]
fn push_nodata_head(v: &mut Vec<u8>, head: &[u8]) {
    let at = v.len();
    if let Ok(h) = <&[u8; ARRAY_HEAD_MAX - 4]>::try_from(head) {
        v.extend_from_slice(h);
    } else if let Ok(h) = <&[u8; ARRAY_HEAD_MAX]>::try_from(head) {
        v.extend_from_slice(h);
    } else {
        v.extend_from_slice(head);
    }
    if let Some(t) = v.get_mut(at) {
        *t = sub::PRIMITIVE_ARRAY_NODATA_DUMP;
    }
}

impl<S: Sink> Emit for Out<S> {
    fn pos(&self) -> u64 {
        Out::pos(self)
    }
    fn raw(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        self.write(b)
    }
    fn lit(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        self.write(b)
    }
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String> {
        Out::patch(self, offset, b)
    }
    fn flush(&mut self) -> std::result::Result<(), String> {
        Out::flush(self)
    }
}

/// Buffered output with patching, shared by the stripper and restore.
pub(crate) struct Out<S: Sink> {
    pub(crate) sink: S,
    buf: Vec<u8>,
    /// Bytes already handed to the sink.
    flushed: u64,
}

impl<S: Sink> Out<S> {
    pub(crate) fn new(sink: S, capacity: usize) -> Out<S> {
        Out {
            sink,
            buf: Vec::with_capacity(capacity.max(64)),
            flushed: 0,
        }
    }

    /// Offset of the next byte written.
    #[inline]
    pub(crate) fn pos(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    #[inline]
    pub(crate) fn write(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        if self.buf.len() + b.len() > self.buf.capacity() {
            self.flush()?;
            if b.len() >= self.buf.capacity() {
                self.flushed += b.len() as u64;
                return self.sink.write_all(b).map_err(write_err);
            }
        }
        self.buf.extend_from_slice(b);
        Ok(())
    }

    pub(crate) fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String> {
        if offset >= self.flushed {
            let o = (offset - self.flushed) as usize;
            self.buf[o..o + b.len()].copy_from_slice(b);
            Ok(())
        } else if offset + b.len() as u64 <= self.flushed {
            self.sink.patch(offset, b).map_err(write_err)
        } else {
            // Straddles the flushed boundary: flush, then patch in the sink.
            self.flush()?;
            self.sink.patch(offset, b).map_err(write_err)
        }
    }

    pub(crate) fn flush(&mut self) -> std::result::Result<(), String> {
        if !self.buf.is_empty() {
            self.sink.write_all(&self.buf).map_err(write_err)?;
            self.flushed += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
}

/// Output as a list of pieces: verbatim input referred to by position, made-up bytes kept in
/// `lits`. Both the writer thread of [`strip_mapped`] ([`Gather`]) and the parallel stripper's
/// parts ([`parallel`]) collect output this way, so that verbatim input is never copied by the
/// stripper itself.
#[derive(Default)]
struct Pieces {
    list: Vec<Piece>,
    lits: Vec<u8>,
    /// Bytes in `list`.
    len: u64,
    /// The last piece [`Pieces::lit`] added: its offset and where its bytes are in `lits`. A
    /// segment's header is added that way, and patched when the segment ends: found here, not by
    /// a walk back over the segment's pieces.
    last_lit: Option<(u64, usize, usize)>,
}

#[derive(Clone, Copy)]
enum Piece {
    Input { start: usize, len: usize },
    Lit { start: usize, len: usize },
}

impl Pieces {
    /// An empty batch with room for [`GATHER_PIECES`] pieces.
    fn batch() -> Self {
        Pieces {
            list: Vec::with_capacity(GATHER_PIECES),
            lits: Vec::with_capacity(GATHER_PIECES * ARRAY_HEAD_MAX),
            len: 0,
            last_lit: None,
        }
    }

    /// Where `b` starts in `base`, if it lies inside it.
    #[inline]
    fn offset_in(base: &[u8], b: &[u8]) -> Option<usize> {
        let (bp, base_p) = (b.as_ptr() as usize, base.as_ptr() as usize);
        (bp >= base_p && bp + b.len() <= base_p + base.len()).then(|| bp - base_p)
    }

    /// Append `b`, a slice of `base` (referred to) or of anything else (copied).
    #[inline]
    fn raw(&mut self, base: &[u8], b: &[u8]) {
        let Some(start) = Self::offset_in(base, b) else {
            return self.lit(b);
        };
        match self.list.last_mut() {
            Some(Piece::Input { start: s, len }) if *s + *len == start => *len += b.len(),
            _ => self.list.push(Piece::Input {
                start,
                len: b.len(),
            }),
        }
        self.len += b.len() as u64;
    }

    fn lit(&mut self, b: &[u8]) {
        let start = self.lits.len();
        self.lits.extend_from_slice(b);
        self.last_lit = Some((self.len, start, b.len()));
        self.lit_piece(start, b.len());
    }

    #[inline]
    fn nodata_head(&mut self, head: &[u8]) {
        let start = self.lits.len();
        push_nodata_head(&mut self.lits, head);
        self.lit_piece(start, head.len());
    }

    #[inline]
    fn lit_piece(&mut self, start: usize, len: usize) {
        self.list.push(Piece::Lit { start, len });
        self.len += len as u64;
    }

    /// Overwrite made-up bytes at `offset` (counted from the first piece). Patches land on
    /// recent bytes (a segment's header, a few KiB back): walk back from the end.
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String> {
        if let Some((at, start, len)) = self.last_lit {
            if offset >= at && offset + b.len() as u64 <= at + len as u64 {
                let o = start + (offset - at) as usize;
                self.lits[o..o + b.len()].copy_from_slice(b);
                return Ok(());
            }
        }
        let mut end = self.len;
        for p in self.list.iter().rev() {
            let (len, lit) = match *p {
                Piece::Input { len, .. } => (len, None),
                Piece::Lit { start, len } => (len, Some(start)),
            };
            let at = end - len as u64;
            if offset >= at {
                if offset >= end {
                    break;
                }
                let o = (offset - at) as usize;
                return match lit {
                    Some(start) if o + b.len() <= len => {
                        self.lits[start + o..start + o + b.len()].copy_from_slice(b);
                        Ok(())
                    }
                    _ => Err(format!(
                        "internal: patch at {offset} is not in made-up bytes"
                    )),
                };
            }
            end = at;
        }
        Err(format!("internal: patch at {offset} is past the output"))
    }

    fn clear(&mut self) {
        self.list.clear();
        self.lits.clear();
        self.len = 0;
        self.last_lit = None;
    }
}

/// Output over an input that is whole in memory (a mapped file): verbatim input is referred to,
/// not copied, and batches of pieces go to a [`Drain`]: the writer thread ([`Channel`]), which
/// hands them to the sink with `write_all_vectored` so that the kernel's copy is the only one and
/// it overlaps the parsing, or the sink itself on this thread ([`Direct`], for small inputs,
/// where starting a thread and handing it ~100 batches costs more than the overlap saves).
struct Gather<'a, D: Drain> {
    drain: D,
    base: &'a [u8],
    pieces: Pieces,
    /// Bytes handed to the drain.
    flushed: u64,
}

/// Where [`Gather`] sends full batches, and patches of bytes already sent.
trait Drain {
    /// Take `batch` (non-empty, its input pieces within `base`); give back an empty one to fill
    /// next.
    fn batch(&mut self, base: &[u8], batch: Pieces) -> std::result::Result<Pieces, String>;
    /// Overwrite bytes at `offset` (already sent).
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String>;
}

/// The parsing thread's end of the writer thread ([`gather_writer`]).
struct Channel {
    tx: mpsc::SyncSender<Msg>,
    /// Emptied batches coming back from the writer, for reuse.
    recycle: mpsc::Receiver<Pieces>,
}

impl Drain for Channel {
    /// (The writer thread was given `base` when it started.)
    fn batch(&mut self, _base: &[u8], batch: Pieces) -> std::result::Result<Pieces, String> {
        self.tx
            .send(Msg::Batch(batch))
            .map_err(|_| WRITER_GONE.to_string())?;
        Ok(self.recycle.try_recv().unwrap_or_else(|_| Pieces::batch()))
    }
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String> {
        self.tx
            .send(Msg::Patch(offset, b.to_vec()))
            .map_err(|_| WRITER_GONE.to_string())
    }
}

/// The sink written on the parsing thread.
struct Direct<S: Sink> {
    sink: S,
    stage: Stage,
}

impl<S: Sink> Drain for Direct<S> {
    fn batch(&mut self, base: &[u8], mut batch: Pieces) -> std::result::Result<Pieces, String> {
        self.stage
            .write_batch(&mut self.sink, base, &batch)
            .map_err(write_err)?;
        batch.clear();
        Ok(batch)
    }
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String> {
        self.sink.patch(offset, b).map_err(write_err)
    }
}

/// What the parsing thread sends the writer thread, in output order.
enum Msg {
    Batch(Pieces),
    Patch(u64, Vec<u8>),
}

const GATHER_PIECES: usize = 1024;
/// Inputs at least this long get a writer thread (see [`Gather`]). Below it the thread costs
/// more than it overlaps: on a 3.6 MB Android dump, 4.3-5.3 ms of CPU per `oomguard strip`
/// with the thread, 3.0-3.3 ms without.
const WRITER_THREAD_MIN_BYTES: u64 = 16 << 20;
/// Batches in flight between the two threads (bounds the memory to a few hundred KB).
const GATHER_QUEUE: usize = 4;
const WRITER_GONE: &str = "writing the output failed: the writer stopped";

impl<'a, D: Drain> Gather<'a, D> {
    fn new(drain: D, base: &'a [u8]) -> Self {
        Gather {
            drain,
            base,
            pieces: Pieces::batch(),
            flushed: 0,
        }
    }
}

impl<D: Drain> Emit for Gather<'_, D> {
    fn pos(&self) -> u64 {
        self.flushed + self.pieces.len
    }
    #[inline]
    fn raw(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        self.pieces.raw(self.base, b);
        self.maybe_flush()
    }
    fn lit(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        self.pieces.lit(b);
        self.maybe_flush()
    }
    #[inline]
    fn nodata_head(&mut self, head: &[u8]) -> std::result::Result<(), String> {
        self.pieces.nodata_head(head);
        self.maybe_flush()
    }
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String> {
        if offset < self.flushed {
            return self.drain.patch(offset, b);
        }
        self.pieces.patch(offset - self.flushed, b)
    }
    fn flush(&mut self) -> std::result::Result<(), String> {
        if self.pieces.list.is_empty() {
            return Ok(());
        }
        self.flushed += self.pieces.len;
        let batch = std::mem::take(&mut self.pieces);
        self.pieces = self.drain.batch(self.base, batch)?;
        Ok(())
    }
}

impl<D: Drain> Gather<'_, D> {
    #[inline]
    fn maybe_flush(&mut self) -> std::result::Result<(), String> {
        if self.pieces.list.len() >= GATHER_PIECES {
            self.flush()?;
        }
        Ok(())
    }
}

/// The writer thread of [`strip_mapped`]: writes batches and patches in order.
fn gather_writer<S: Sink>(
    mut sink: S,
    base: &[u8],
    rx: mpsc::Receiver<Msg>,
    recycle: mpsc::Sender<Pieces>,
) -> io::Result<S> {
    let mut stage = Stage::default();
    for m in rx {
        match m {
            Msg::Batch(mut pieces) => {
                stage.write_batch(&mut sink, base, &pieces)?;
                pieces.clear();
                let _ = recycle.send(pieces);
            }
            Msg::Patch(offset, b) => sink.patch(offset, &b)?,
        }
    }
    Ok(sink)
}

/// Output made ready for `writev`: short pieces copied together, long runs of verbatim input
/// referred to.
#[derive(Default)]
struct Stage {
    bytes: Vec<u8>,
    spans: Vec<Span>,
}

/// One iovec of a [`Stage`]: staged bytes, or a run of the input passed by reference.
#[derive(Clone, Copy)]
enum Span {
    Staged(usize, usize),
    Input(usize, usize),
}

/// Runs of input at least this long are handed to the kernel by reference; shorter ones are
/// copied into the stage first: the kernel's cost per iovec outweighs a copy of ~100 bytes.
const STAGE_MIN_REF: usize = 4096;
/// Staged bytes written at a time by the writer thread (small enough to stay in the CPU's cache
/// until written).
const STAGE_BYTES: usize = 256 << 10;
/// Most iovecs in one `writev` (Linux's IOV_MAX).
const IOV_MAX: usize = 1024;

impl Stage {
    fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }

    /// Append a copy of `b`.
    #[inline]
    fn copy(&mut self, b: &[u8]) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(b);
        self.staged(at, b.len());
    }

    /// Count `len` bytes appended to `bytes` at `at` as the next output.
    #[inline]
    fn staged(&mut self, at: usize, len: usize) {
        match self.spans.last_mut() {
            Some(Span::Staged(s, l)) if *s + *l == at => *l += len,
            _ => self.spans.push(Span::Staged(at, len)),
        }
    }

    /// Append the input run `[start, start + len)` of `base`: referred to if long, else copied.
    #[inline]
    fn input(&mut self, base: &[u8], start: usize, len: usize) {
        if len >= STAGE_MIN_REF {
            self.spans.push(Span::Input(start, len));
        } else {
            self.copy(&base[start..start + len]);
        }
    }

    /// Empty the stage, then stage `pieces` from `from` on until about `max_bytes` are staged;
    /// returns the index of the first piece left out.
    fn fill(&mut self, base: &[u8], pieces: &Pieces, from: usize, max_bytes: usize) -> usize {
        self.clear();
        let mut i = from;
        while i < pieces.list.len() && self.bytes.len() < max_bytes {
            match pieces.list[i] {
                Piece::Input { start, len } => self.input(base, start, len),
                Piece::Lit { start, len } => self.copy(&pieces.lits[start..start + len]),
            }
            i += 1;
        }
        i
    }

    /// Write all of `pieces`, a stage at a time.
    fn write_batch<S: Sink>(
        &mut self,
        sink: &mut S,
        base: &[u8],
        pieces: &Pieces,
    ) -> io::Result<()> {
        let mut from = 0;
        while from < pieces.list.len() {
            from = self.fill(base, pieces, from, STAGE_BYTES);
            self.write(sink, base)?;
        }
        Ok(())
    }

    /// Write what is staged, in `writev`s of at most [`IOV_MAX`] iovecs.
    fn write<S: Sink>(&self, sink: &mut S, base: &[u8]) -> io::Result<()> {
        let mut bufs: Vec<&[u8]> = Vec::with_capacity(self.spans.len().min(IOV_MAX));
        for chunk in self.spans.chunks(IOV_MAX) {
            bufs.clear();
            bufs.extend(chunk.iter().map(|s| match *s {
                Span::Staged(a, l) => &self.bytes[a..a + l],
                Span::Input(a, l) => &base[a..a + l],
            }));
            sink.write_all_vectored(&bufs)?;
        }
        Ok(())
    }
}

fn write_err(e: io::Error) -> String {
    format!("{}{e}", super::OUTPUT_FAILED)
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

/// The heap state level `app` carries from one record to the next: whether the objects that
/// follow are dropped, and a dropped heap's HEAP_DUMP_INFO waiting for a class dump.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct Carry {
    dropping: bool,
    pending_info: [u8; 13],
    pending_info_len: usize,
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
    /// header is someone else's to write (see [`parallel`]).
    part: bool,
    /// No HEAP_DUMP_INFO seen yet in this part.
    fresh: bool,
    /// A record whose output depends on the heap state carried in from before the part (an
    /// object or a class dump) came before this part's first HEAP_DUMP_INFO.
    depends: bool,
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
            fresh: true,
            depends: false,
            holders: None,
        }
    }

    /// The heap state that reaches the next part (meaningful at level `app` only).
    fn carry(&self) -> Carry {
        Carry {
            dropping: self.dropping,
            pending_info: self.pending_info,
            pending_info_len: self.pending_info_len,
        }
    }

    /// Start from the heap state `c` and the heap names `names` met before this part.
    fn resume(&mut self, c: &Carry, names: &[u64]) {
        self.dropping = c.dropping;
        self.pending_info = c.pending_info;
        self.pending_info_len = c.pending_info_len;
        let n = names.len().min(MAX_DROP_NAMES);
        self.drop_names[..n].copy_from_slice(&names[..n]);
        self.drop_name_count = n;
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
        if self.level == Level::App && !self.part {
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
        if self.fresh && self.level == Level::App {
            match s {
                Sub::HeapDumpInfo { .. } => self.fresh = false,
                Sub::Instance { .. }
                | Sub::ObjectArray { .. }
                | Sub::PrimitiveArray { .. }
                | Sub::Class(_) => self.depends = true,
                _ => {}
            }
        }
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
                let noted = match (self.holders.as_mut(), s) {
                    (
                        Some(h),
                        Sub::Instance {
                            id, class_id, data, ..
                        },
                    ) => h.instance(*id, *class_id, data),
                    (
                        Some(h),
                        Sub::ObjectArray {
                            id, class_id, len, ..
                        },
                    ) => h.object_array(*id, *class_id, *len),
                    (Some(h), Sub::PrimitiveArray { id, .. }) => h.primitive_array(*id),
                    // A part of the parallel stripper (which level `app` does not use).
                    _ => true,
                };
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

    /// Input bytes fed so far.
    pub fn bytes_fed(&self) -> u64 {
        self.parser.bytes_fed()
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
        let (tx, rx) = mpsc::sync_channel(GATHER_QUEUE);
        let (rtx, rrx) = mpsc::channel();
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
