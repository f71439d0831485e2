//! The stripper's output: a [`Sink`] and its buffered writer with patches ([`Out`]), and, over
//! an input whole in memory, output as pieces referring to the input ([`Pieces`], [`Gather`])
//! written with `writev` from a [`Stage`], on the parsing thread or a writer thread.

use std::fs::File;
use std::io;
use sys::chan;

use crate::sub;

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
pub(super) const ARRAY_HEAD_MAX: usize = 18;

/// Append `head`, a primitive array dump's head, to `v` as a PRIMITIVE_ARRAY_NODATA head (see
/// [`Emit::nodata_head`]). One per array: the heads of the two identifier sizes are copied at a
/// fixed length, a few moves instead of a call to `memcpy`.
#[inline]
pub(super) fn push_nodata_head(v: &mut Vec<u8>, head: &[u8]) {
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
    pub(super) buf: Vec<u8>,
    /// Bytes already handed to the sink.
    pub(super) flushed: u64,
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
pub(super) struct Pieces {
    pub(super) list: Vec<Piece>,
    pub(super) lits: Vec<u8>,
    /// Bytes in `list`.
    pub(super) len: u64,
    /// The last piece [`Pieces::lit`] added: its offset and where its bytes are in `lits`. A
    /// segment's header is added that way, and patched when the segment ends: found here, not by
    /// a walk back over the segment's pieces.
    pub(super) last_lit: Option<(u64, usize, usize)>,
}

#[derive(Clone, Copy)]
pub(super) enum Piece {
    Input { start: usize, len: usize },
    Lit { start: usize, len: usize },
}

impl Pieces {
    /// An empty batch with room for [`GATHER_PIECES`] pieces.
    pub(super) fn batch() -> Self {
        Pieces {
            list: Vec::with_capacity(GATHER_PIECES),
            lits: Vec::with_capacity(GATHER_PIECES * ARRAY_HEAD_MAX),
            len: 0,
            last_lit: None,
        }
    }

    /// Where `b` starts in `base`, if it lies inside it.
    #[inline]
    pub(super) fn offset_in(base: &[u8], b: &[u8]) -> Option<usize> {
        let (bp, base_p) = (b.as_ptr() as usize, base.as_ptr() as usize);
        (bp >= base_p && bp + b.len() <= base_p + base.len()).then(|| bp - base_p)
    }

    /// Append `b`, a slice of `base` (referred to) or of anything else (copied).
    #[inline]
    pub(super) fn raw(&mut self, base: &[u8], b: &[u8]) {
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

    pub(super) fn lit(&mut self, b: &[u8]) {
        let start = self.lits.len();
        self.lits.extend_from_slice(b);
        self.last_lit = Some((self.len, start, b.len()));
        self.lit_piece(start, b.len());
    }

    #[inline]
    pub(super) fn nodata_head(&mut self, head: &[u8]) {
        let start = self.lits.len();
        push_nodata_head(&mut self.lits, head);
        self.lit_piece(start, head.len());
    }

    #[inline]
    pub(super) fn lit_piece(&mut self, start: usize, len: usize) {
        self.list.push(Piece::Lit { start, len });
        self.len += len as u64;
    }

    /// Overwrite made-up bytes at `offset` (counted from the first piece). Patches land on
    /// recent bytes (a segment's header, a few KiB back): walk back from the end.
    pub(super) fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String> {
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

    pub(super) fn clear(&mut self) {
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
pub(super) struct Gather<'a, D: Drain> {
    pub(super) drain: D,
    pub(super) base: &'a [u8],
    pub(super) pieces: Pieces,
    /// Bytes handed to the drain.
    pub(super) flushed: u64,
}

/// Where [`Gather`] sends full batches, and patches of bytes already sent.
pub(super) trait Drain {
    /// Take `batch` (non-empty, its input pieces within `base`); give back an empty one to fill
    /// next.
    fn batch(&mut self, base: &[u8], batch: Pieces) -> std::result::Result<Pieces, String>;
    /// Overwrite bytes at `offset` (already sent).
    fn patch(&mut self, offset: u64, b: &[u8]) -> std::result::Result<(), String>;
}

/// The parsing thread's end of the writer thread ([`gather_writer`]).
pub(super) struct Channel {
    pub(super) tx: chan::Sender<Msg>,
    /// Emptied batches coming back from the writer, for reuse.
    pub(super) recycle: chan::Receiver<Pieces>,
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
pub(super) struct Direct<S: Sink> {
    pub(super) sink: S,
    pub(super) stage: Stage,
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
pub(super) enum Msg {
    Batch(Pieces),
    Patch(u64, Vec<u8>),
}

pub(super) const GATHER_PIECES: usize = 1024;
/// Inputs at least this long get a writer thread (see [`Gather`]). Below it the thread costs
/// more than it overlaps: on a 3.6 MB Android dump, 4.3-5.3 ms of CPU per `oomguard strip`
/// with the thread, 3.0-3.3 ms without.
pub(super) const WRITER_THREAD_MIN_BYTES: u64 = 16 << 20;
/// Batches in flight between the two threads (bounds the memory to a few hundred KB).
pub(super) const GATHER_QUEUE: usize = 4;
pub(super) const WRITER_GONE: &str = "writing the output failed: the writer stopped";

impl<'a, D: Drain> Gather<'a, D> {
    pub(super) fn new(drain: D, base: &'a [u8]) -> Self {
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
    pub(super) fn maybe_flush(&mut self) -> std::result::Result<(), String> {
        if self.pieces.list.len() >= GATHER_PIECES {
            self.flush()?;
        }
        Ok(())
    }
}

/// The writer thread of [`strip_mapped`]: writes batches and patches in order.
pub(super) fn gather_writer<S: Sink>(
    mut sink: S,
    base: &[u8],
    rx: chan::Receiver<Msg>,
    recycle: chan::Sender<Pieces>,
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
pub(super) struct Stage {
    pub(super) bytes: Vec<u8>,
    pub(super) spans: Vec<Span>,
}

/// One iovec of a [`Stage`]: staged bytes, or a run of the input passed by reference.
#[derive(Clone, Copy)]
pub(super) enum Span {
    Staged(usize, usize),
    Input(usize, usize),
}

/// Runs of input at least this long are handed to the kernel by reference; shorter ones are
/// copied into the stage first: the kernel's cost per iovec outweighs a copy of ~100 bytes.
pub(super) const STAGE_MIN_REF: usize = 4096;
/// Staged bytes written at a time by the writer thread (small enough to stay in the CPU's cache
/// until written).
pub(super) const STAGE_BYTES: usize = 256 << 10;
/// Most iovecs in one `writev` (Linux's IOV_MAX).
pub(super) const IOV_MAX: usize = 1024;

impl Stage {
    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }

    /// Append a copy of `b`.
    #[inline]
    pub(super) fn copy(&mut self, b: &[u8]) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(b);
        self.staged(at, b.len());
    }

    /// Count `len` bytes appended to `bytes` at `at` as the next output.
    #[inline]
    pub(super) fn staged(&mut self, at: usize, len: usize) {
        match self.spans.last_mut() {
            Some(Span::Staged(s, l)) if *s + *l == at => *l += len,
            _ => self.spans.push(Span::Staged(at, len)),
        }
    }

    /// Append the input run `[start, start + len)` of `base`: referred to if long, else copied.
    #[inline]
    pub(super) fn input(&mut self, base: &[u8], start: usize, len: usize) {
        if len >= STAGE_MIN_REF {
            self.spans.push(Span::Input(start, len));
        } else {
            self.copy(&base[start..start + len]);
        }
    }

    /// Empty the stage, then stage `pieces` from `from` on until about `max_bytes` are staged;
    /// returns the index of the first piece left out.
    pub(super) fn fill(
        &mut self,
        base: &[u8],
        pieces: &Pieces,
        from: usize,
        max_bytes: usize,
    ) -> usize {
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
    pub(super) fn write_batch<S: Sink>(
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
    pub(super) fn write<S: Sink>(&self, sink: &mut S, base: &[u8]) -> io::Result<()> {
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

pub(super) fn write_err(e: io::Error) -> String {
    format!("{}{e}", crate::OUTPUT_FAILED)
}

#[cfg(test)]
mod tests {
    use super::{Out, Pieces};

    /// The stripper's output buffer holds at most its capacity: bytes that fit wait in it,
    /// the write that would pass it hands the buffer to the sink first (so memory stays
    /// bounded whatever the output), and nothing is lost or reordered.
    #[test]
    fn the_output_buffer_holds_at_most_its_capacity() {
        let mut o = Out::new(Vec::new(), 100);
        let cap = o.buf.capacity();
        o.write(&vec![1; cap / 2]).unwrap();
        o.write(&vec![2; cap / 2]).unwrap();
        assert!(o.sink.is_empty(), "what fits waits in the buffer");
        o.write(&[3]).unwrap();
        assert_eq!(o.sink.len(), cap / 2 * 2, "full: handed to the sink first");
        assert!(o.buf.capacity() == cap && o.buf.len() == 1);
        o.flush().unwrap();
        let mut want = vec![1; cap / 2];
        want.extend(vec![2; cap / 2]);
        want.push(3);
        assert_eq!(o.sink, want);
    }

    /// The stripper's output buffer patches what it still holds, what it has handed to the
    /// sink, and a patch that straddles the two (the sink gets the buffer first).
    #[test]
    fn a_patch_lands_in_the_buffer_in_the_sink_or_across_both() {
        let mut o = Out::new(Vec::new(), 64);
        let cap = o.buf.capacity();
        o.write(&vec![0; cap - 4]).unwrap();
        o.write(&[0; 10]).unwrap();
        assert_eq!(o.sink.len(), cap - 4, "the first write was handed on");
        o.patch(1, &[1, 1]).unwrap();
        o.patch(cap as u64, &[3; 2]).unwrap();
        assert_eq!(o.buf[4..6], [3, 3], "patched in the buffer");
        o.patch(cap as u64 - 6, &[2; 4]).unwrap();
        assert_eq!(o.sink.len(), cap + 6, "straddling: the buffer went first");
        o.flush().unwrap();
        let mut want = vec![0; cap + 6];
        want[1..3].fill(1);
        want[cap - 6..cap - 2].fill(2);
        want[cap..cap + 2].fill(3);
        assert_eq!(o.sink, want);
    }

    /// Verbatim input that continues the last piece extends it (a batch of few, long pieces);
    /// input that does not (bytes dropped between, or an earlier place) starts a piece of its
    /// own.
    #[test]
    fn input_that_follows_on_extends_the_last_piece() {
        use super::Piece;
        let base = [5u8; 32];
        let mut p = Pieces::default();
        p.raw(&base, &base[2..5]);
        p.raw(&base, &base[5..8]);
        p.raw(&base, &base[9..12]);
        p.raw(&base, &base[3..4]);
        let got: Vec<(usize, usize)> = p
            .list
            .iter()
            .map(|x| match *x {
                Piece::Input { start, len } => (start, len),
                Piece::Lit { .. } => (usize::MAX, 0),
            })
            .collect();
        assert_eq!(got, [(2, 6), (9, 3), (3, 1)]);
        assert_eq!(p.len, 10);
    }

    /// A patch lands in made-up bytes only: in the last ones added or in older ones; one that
    /// would run past them into verbatim input, or past the output, is an error, not a write.
    #[test]
    fn a_patch_lands_in_made_up_bytes_only() {
        let base = [9u8; 16];
        let mut p = Pieces::default();
        p.lit(&[0; 9]);
        p.raw(&base, &base[..4]);
        p.lit(&[0; 9]);
        p.patch(14, &[1; 4]).unwrap();
        p.patch(5, &[2; 4]).unwrap();
        assert_eq!(&p.lits[..9], &[0, 0, 0, 0, 0, 2, 2, 2, 2]);
        assert_eq!(&p.lits[9..], &[0, 1, 1, 1, 1, 0, 0, 0, 0]);
        assert!(p.patch(7, &[3; 4]).is_err(), "into the verbatim input");
        assert!(p.patch(20, &[3; 4]).is_err(), "past the last made-up bytes");
        assert!(p.patch(22, &[3; 1]).is_err(), "past the output");
        assert_eq!(
            &p.lits[..9],
            &[0, 0, 0, 0, 0, 2, 2, 2, 2],
            "nothing written"
        );
    }

    /// Pieces go to the drain in batches of at most [`super::GATHER_PIECES`] (the memory of
    /// a batch in flight is bounded whatever the dump), in order, and a patch of bytes already
    /// handed on goes to the drain.
    #[test]
    fn output_goes_on_in_bounded_batches() {
        use super::{Drain, Emit, Gather, GATHER_PIECES};
        #[derive(Default)]
        struct Batches {
            sizes: Vec<usize>,
            out: Vec<u8>,
        }
        impl Drain for Batches {
            fn batch(&mut self, base: &[u8], b: Pieces) -> Result<Pieces, String> {
                self.sizes.push(b.list.len());
                for p in &b.list {
                    match *p {
                        super::Piece::Input { start, len } => {
                            self.out.extend_from_slice(&base[start..start + len])
                        }
                        super::Piece::Lit { start, len } => {
                            self.out.extend_from_slice(&b.lits[start..start + len])
                        }
                    }
                }
                Ok(Pieces::default())
            }
            fn patch(&mut self, offset: u64, b: &[u8]) -> Result<(), String> {
                let o = offset as usize;
                self.out[o..o + b.len()].copy_from_slice(b);
                Ok(())
            }
        }
        let base: Vec<u8> = (0..=255u8).cycle().take(12 * GATHER_PIECES).collect();
        let mut g = Gather {
            drain: Batches::default(),
            base: &base,
            pieces: Pieces::default(),
            flushed: 0,
        };
        let mut want = Vec::new();
        for i in 0..2 * GATHER_PIECES + 5 {
            // One byte in four: pieces that do not follow on, each a piece of its own.
            g.raw(&base[4 * i..4 * i + 1]).unwrap();
            want.push(base[4 * i]);
        }
        g.patch(2, &[0xAA]).unwrap();
        want[2] = 0xAA;
        g.flush().unwrap();
        assert_eq!(g.drain.sizes, [GATHER_PIECES, GATHER_PIECES, 5]);
        assert_eq!(g.drain.out, want);
    }

    /// A run of input of [`super::STAGE_MIN_REF`] bytes or more goes to the kernel by
    /// reference; a shorter one is copied into the stage (one iovec per short run would cost
    /// the kernel more than the copy), and copies one after another make one iovec.
    #[test]
    fn long_runs_of_input_are_referred_to_short_ones_copied() {
        use super::{Span, Stage, STAGE_MIN_REF};
        let base = vec![1u8; 2 * STAGE_MIN_REF];
        let mut st = Stage::default();
        st.input(&base, 0, STAGE_MIN_REF);
        st.input(&base, STAGE_MIN_REF, STAGE_MIN_REF - 1);
        assert!(matches!(st.spans[0], Span::Input(0, n) if n == STAGE_MIN_REF));
        assert!(matches!(st.spans[1], Span::Staged(_, n) if n == STAGE_MIN_REF - 1));
        assert_eq!(st.bytes.len(), STAGE_MIN_REF - 1);
        // Short runs one after the other are copied into one span: one iovec.
        st.input(&base, 0, 10);
        st.copy(&[2; 5]);
        assert_eq!(st.spans.len(), 2);
        assert!(matches!(st.spans[1], Span::Staged(0, n) if n == STAGE_MIN_REF - 1 + 15));
    }

    /// A stage is filled until it holds the bytes asked for, and no piece more.
    #[test]
    fn a_stage_takes_pieces_until_it_holds_what_was_asked() {
        use super::Stage;
        let mut p = Pieces::default();
        for _ in 0..4 {
            p.lit(&[1; 4]);
        }
        let mut st = Stage::default();
        assert_eq!(st.fill(&[], &p, 0, 8), 2);
        assert_eq!(st.bytes.len(), 8);
        assert_eq!(st.fill(&[], &p, 2, 9), 4);
        assert_eq!(st.bytes.len(), 8);
    }

    /// Output bytes are referred to only when they lie inside the input; bytes from anywhere
    /// else (even next to it in memory) are copied.
    #[test]
    fn only_slices_of_the_input_are_referred_to() {
        let both = [7u8; 64];
        let (base, other) = both.split_at(32);
        assert_eq!(Pieces::offset_in(base, &base[5..9]), Some(5));
        assert_eq!(Pieces::offset_in(base, &base[28..]), Some(28));
        assert_eq!(
            Pieces::offset_in(base, &other[..4]),
            None,
            "just past the input"
        );
        assert_eq!(
            Pieces::offset_in(base, &both[30..34]),
            None,
            "straddling its end"
        );
        assert_eq!(Pieces::offset_in(other, &both[..4]), None, "before it");
        let mut p = Pieces::default();
        p.raw(base, &other[..4]);
        assert_eq!((p.lits.len(), p.len), (4, 4), "copied");
        p.raw(base, &base[..4]);
        assert_eq!((p.lits.len(), p.len), (4, 8), "referred to");
    }
}
