//! The one-pass parse: the prefix (strings, classes) then objects with edges kept as ids.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Stops at the first object of the dump, having gathered what comes before it (for a HotSpot
/// dump: every string, class and class dump), so that one pass can then build the graph.
#[derive(Default)]
pub(crate) struct Prefix {
    pub(crate) p1: Pass1,
    /// File offset of the first object sub-record, if any.
    pub(crate) end: Option<u64>,
}

/// The sentinel with which [`Prefix`] stops the parser.
pub(crate) const PREFIX_STOP: &str = "(prefix complete)";

impl Visitor for Prefix {
    fn header(&mut self, h: &Header, raw: &[u8]) -> Result<(), String> {
        self.p1.header(h, raw)
    }
    fn record(&mut self, offset: u64, r: &Record<'_>, raw: &[u8]) -> Result<(), String> {
        self.p1.record(offset, r, raw)
    }
    fn sub(&mut self, offset: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
        match s {
            Sub::Instance { .. } | Sub::ObjectArray { .. } | Sub::PrimitiveArray { .. } => {
                self.end = Some(offset);
                Err(PREFIX_STOP.into())
            }
            _ => self.p1.sub(offset, s, raw),
        }
    }
}

impl Pass1 {
    /// How many strings, class names and class dumps were gathered (duplicates included).
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        (self.strings.ids.len(), self.names.len(), self.classes.len())
    }
    /// Whether the ids from position `from` on ascend strictly, as pushed: from the ids' last
    /// ascending run ([`Tail`]), which holds them all if it starts at or before `from`; an id
    /// met twice in that run is looked for past `from` (rare: the run's flag says only that
    /// the run holds one somewhere).
    pub(crate) fn ascend_from(&self, from: usize) -> bool {
        let ids = &self.ids;
        let scan = || (ids.get(from..)).is_none_or(|t| t.windows(2).all(|p| p[0] < p[1]));
        match self.tail.len == ids.len() {
            true => self.tail.start <= from && (!self.tail.twice || scan()),
            // (Ids added otherwise leave the run's note stale.)
            false => scan(),
        }
    }
    /// The object ids in the order they were met (before [`Pass1::finish`] sorts them).
    pub(crate) fn ids(&self) -> &[u64] {
        &self.ids
    }
}

/// Pass 1 and pass 2 at once, over an index of the classes that the [`Prefix`] found. Valid
/// only if no string, class name or class dump comes after the prefix: one that does sets
/// `late`, pass-2 work stops, and the caller runs pass 2 again over the full index.
pub(crate) struct OnePass<'a> {
    pub(crate) p1: Pass1,
    pub(crate) p2: Pass2<'a>,
    /// File offset where the prefix ended.
    prefix_end: u64,
    /// Added to the parser's offsets to get file offsets.
    delta: u64,
    pub(crate) late: bool,
    /// Set by the first worker that finds something late, so that the others stop their pass-2
    /// work too (it would be thrown away): on an ART dump, whose class dumps come with the
    /// objects, the first worker finds one at once, while a worker over the app heap's objects
    /// may find none in its part.
    any_late: &'a AtomicBool,
    /// How many class dumps come before any other object (HotSpot lists them first, in no
    /// order of id).
    pub(crate) head: usize,
}

impl<'a> OnePass<'a> {
    /// A worker over the part of the file that starts `delta` bytes after the header; `any_late`
    /// is shared by all the workers.
    pub(crate) fn new(
        skel: &'a Index,
        limits: IndexLimits,
        delta: u64,
        prefix_end: u64,
        any_late: &'a AtomicBool,
    ) -> Self {
        OnePass {
            p1: Pass1::in_scratch(skel.scratch.as_ref()),
            p2: Pass2::deferred(skel, limits, delta),
            prefix_end,
            delta,
            late: false,
            any_late,
            head: 0,
        }
    }

    /// Whether the ids of the objects after the `head` ascend strictly in file order.
    pub(crate) fn ascending(&self) -> bool {
        self.p1.ascend_from(self.head)
    }

    /// Whether the sub-record or record at parser offset `offset` comes after the prefix.
    pub(super) fn after_prefix(&self, offset: u64) -> bool {
        offset.wrapping_add(self.delta) >= self.prefix_end
    }

    /// Something came late (here or in another worker's part): pass-2 work stops, and what it
    /// gathered is freed.
    #[cold]
    pub(super) fn go_late(&mut self) {
        self.late = true;
        self.any_late.store(true, Ordering::Relaxed);
        self.p2.out = Out::default();
        self.p2.raw = Raw::Narrow(Grow::default(), 0);
    }
}

impl Visitor for OnePass<'_> {
    fn header(&mut self, h: &Header, raw: &[u8]) -> Result<(), String> {
        self.p1.header(h, raw)
    }
    fn record(&mut self, offset: u64, r: &Record<'_>, raw: &[u8]) -> Result<(), String> {
        if !self.late
            && self.after_prefix(offset)
            && (r.utf8().is_some() || r.load_class().is_some())
        {
            self.go_late();
        }
        self.p1.record(offset, r, raw)
    }
    fn heap_dump_start(
        &mut self,
        offset: u64,
        tag: u8,
        len: u32,
        raw: &[u8],
    ) -> Result<(), String> {
        if self.late {
            return Ok(());
        }
        self.p2.heap_dump_start(offset, tag, len, raw)
    }
    fn sub(&mut self, offset: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
        if !self.late
            && (self.any_late.load(Ordering::Relaxed)
                || matches!(s, Sub::Class(_)) && self.after_prefix(offset))
        {
            self.go_late();
        }
        match s {
            // (Pass 1 only pushes these ids; whether they ascend is known at the end from the
            // ids' last ascending run: [`Pass1::ascend_from`].)
            Sub::Instance { id, .. }
            | Sub::ObjectArray { id, .. }
            | Sub::PrimitiveArray { id, .. } => self.p1.push_id(*id),
            _ => {
                let before = self.p1.ids.len();
                self.p1.sub(offset, s, raw)?;
                if matches!(s, Sub::Class(_)) && before == self.head && self.p1.ids.len() > before {
                    self.head += 1;
                }
            }
        }
        if self.late {
            return Ok(());
        }
        self.p2.sub(offset, s, raw)
    }
    fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
        if self.late {
            return Ok(());
        }
        self.p2.array_data(data)
    }
    fn array_end(&mut self) -> Result<(), String> {
        if self.late {
            return Ok(());
        }
        self.p2.array_end()
    }
}
