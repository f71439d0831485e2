//! Id lookups: from an object id to its node (`IdMap`: a rank map or buckets).
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Finds an object id's node, its position among the sorted ids, in a few memory accesses
/// instead of a binary search over millions. Ids are addresses: dense ranges with wide gaps
/// between them. Where the ids are packed enough, a `RankMap` does it, one cache line per
/// lookup; otherwise [`Buckets`].
pub enum IdMap {
    Rank(RankMap),
    Buckets(Buckets),
    /// No table: a binary search of the ids (after [`Index::drop_id_map`]).
    Search,
}

impl Default for IdMap {
    fn default() -> Self {
        IdMap::Buckets(Buckets::default())
    }
}

impl IdMap {
    /// `ids` sorted.
    pub fn new(ids: &[u64]) -> IdMap {
        match RankMap::new(ids) {
            Some(rank) => IdMap::Rank(rank),
            None => IdMap::Buckets(Buckets::new(ids)),
        }
    }

    /// The bucket map of `ids` (sorted), even where a `RankMap` would do (for comparisons).
    pub fn buckets(ids: &[u64]) -> IdMap {
        IdMap::Buckets(Buckets::new(ids))
    }

    /// The position of `id` in `ids` (the slice this map was built from).
    #[inline]
    pub fn find(&self, ids: &[u64], id: u64) -> Option<u32> {
        match self {
            IdMap::Rank(r) => r.find(id),
            IdMap::Buckets(b) => b.find(ids, id),
            IdMap::Search => ids.binary_search(&id).ok().map(|i| i as u32),
        }
    }

    /// [`IdMap::find`] for many ids at once: `out[i]` is the position of `q[i]`, or [`NONE`].
    pub fn find_batch(&self, ids: &[u64], q: &[u64], out: &mut [u32]) {
        match self {
            IdMap::Rank(r) => r.find_batch(q, out),
            IdMap::Buckets(b) => b.find_batch(ids, q, out),
            IdMap::Search => {
                for (o, &id) in out.iter_mut().zip(q) {
                    *o = ids.binary_search(&id).map_or(NONE, |i| i as u32);
                }
            }
        }
    }

    /// The map's size in bytes (not counting the ids).
    pub fn bytes(&self) -> usize {
        match self {
            IdMap::Rank(r) => r.bytes(),
            IdMap::Buckets(b) => (b.region.len() + b.starts.len()) * 4,
            IdMap::Search => 0,
        }
    }
}

/// Sorted object ids with a two-level bucket table over their range.
///
/// Level one cuts the range into at most about `len / 16` regions of `2^s1` bytes and gives each
/// region that holds an id its first bucket; level two cuts each such region into `2^(s1 - s2)`
/// buckets, as many in all as about a third of the ids. The buckets thus cover only the
/// occupied parts of the range: ART places its image, zygote and app spaces gigabytes apart,
/// and one level over the whole span put hundreds of ids in a bucket there.
#[derive(Default)]
pub struct Buckets {
    min: u64,
    s1: u32,
    /// Per region: its first bucket, or [`NONE`] if it holds no id.
    region: Vec<u32>,
    s2: u32,
    /// `(1 << (s1 - s2)) - 1`: a bucket's number within its region, from the offset `>> s2`.
    mask: u64,
    /// `starts[b]..starts[b + 1]` are the positions of the ids in bucket `b`.
    starts: Vec<u32>,
}

impl Buckets {
    /// `ids` sorted.
    pub fn new(ids: &[u64]) -> Buckets {
        let (Some(&min), Some(&max)) = (ids.first(), ids.last()) else {
            return Buckets::default();
        };
        let span = max - min;
        let limit = (ids.len() as u64 / 16).max(64);
        let mut s1 = 0;
        while s1 < 63 && (span >> s1) >= limit {
            s1 += 1;
        }
        let region_of = |id: u64| ((id - min) >> s1) as usize;
        let occupied = crate::arrays::runs(ids.iter().map(|&id| region_of(id)));
        let per = (ids.len() / (3 * occupied)).max(1);
        let mut k = (usize::BITS - 1 - per.leading_zeros()).min(s1);
        while k > 0 && (occupied as u64) << k >= NONE as u64 {
            k -= 1;
        }
        let mut m = Buckets {
            min,
            s1,
            region: vec![NONE; (span >> s1) as usize + 1],
            s2: s1 - k,
            mask: (1u64 << k) - 1,
            starts: Vec::new(),
        };
        let mut next = 0u32;
        let mut last = usize::MAX;
        for &id in ids {
            let r = region_of(id);
            if r != last {
                last = r;
                m.region[r] = next;
                next += 1 << k;
            }
        }
        let mut starts = vec![0u32; next as usize + 1];
        for &id in ids {
            if let Some(b) = m.bucket(id) {
                starts[b + 1] += 1;
            }
        }
        crate::arrays::prefix_sums(&mut starts);
        m.starts = starts;
        m
    }

    /// `id`'s offset from the smallest id and its region's number (which may lie past the
    /// last region).
    #[inline]
    pub(super) fn place(&self, id: u64) -> Option<(u64, u64)> {
        let off = id.checked_sub(self.min)?;
        Some((off, off >> self.s1))
    }

    /// The bucket `id` falls in, if its region holds any id.
    #[inline]
    pub(super) fn bucket(&self, id: u64) -> Option<usize> {
        let (off, r) = self.place(id)?;
        if r >= self.region.len() as u64 {
            return None;
        }
        let base = self.region[r as usize];
        if base == NONE {
            return None;
        }
        Some(base as usize + ((off >> self.s2) & self.mask) as usize)
    }

    /// The ids' positions that bucket `b` spans.
    #[inline]
    pub(super) fn span(&self, b: usize) -> (usize, usize) {
        (self.starts[b] as usize, self.starts[b + 1] as usize)
    }

    /// The position of `id` in `ids` (the slice this map was built from).
    #[inline]
    pub fn find(&self, ids: &[u64], id: u64) -> Option<u32> {
        let (lo, hi) = self.span(self.bucket(id)?);
        let s = &ids[lo..hi];
        if s.len() <= 8 {
            return s.iter().position(|&x| x == id).map(|i| (lo + i) as u32);
        }
        s.binary_search(&id).ok().map(|i| (lo + i) as u32)
    }

    /// [`Buckets::find`] for many ids at once: `out[i]` is the position of `q[i]`, or [`NONE`].
    /// A lookup reads three arrays in turn (the region's first bucket, the bucket's bounds, the
    /// ids), each read waiting for the one before. So the queries go through a pipeline: the
    /// region of query `t` is asked for, the bucket bounds of `t - D` (its region now cached),
    /// the first id of `t - 2D`, and query `t - 3D` is searched, its memory there by now.
    pub fn find_batch(&self, ids: &[u64], q: &[u64], out: &mut [u32]) {
        const D: usize = 8;
        const RING: usize = 32;
        let n = q.len();
        let mut bucket = [usize::MAX; RING];
        let mut span = [(0usize, 0usize); RING];
        for t in 0..n + 3 * D {
            if let Some((_, r)) = q.get(t).and_then(|&id| self.place(id)) {
                sys::mapped::prefetch_at(&self.region, usize::try_from(r).unwrap_or(usize::MAX));
            }
            if let Some(j) = t.checked_sub(D).filter(|&j| j < n) {
                let b = self.bucket(q[j]).unwrap_or(usize::MAX);
                bucket[j % RING] = b;
                if b != usize::MAX {
                    sys::mapped::prefetch_at(&self.starts, b);
                }
            }
            if let Some(j) = t.checked_sub(2 * D).filter(|&j| j < n) {
                let b = bucket[j % RING];
                let sp = if b == usize::MAX {
                    (0, 0)
                } else {
                    self.span(b)
                };
                span[j % RING] = sp;
                if sp.0 < sp.1 {
                    sys::mapped::prefetch_at(ids, sp.0);
                }
            }
            if let Some(i) = t.checked_sub(3 * D).filter(|&i| i < n) {
                let (lo, hi) = span[i % RING];
                let id = q[i];
                let s = &ids[lo..hi];
                out[i] = if s.len() <= 8 {
                    s.iter()
                        .position(|&x| x == id)
                        .map_or(NONE, |k| (lo + k) as u32)
                } else {
                    s.binary_search(&id).map_or(NONE, |k| (lo + k) as u32)
                };
            }
        }
    }

    /// The most ids any bucket holds.
    #[cfg(test)]
    pub(super) fn max_bucket(&self) -> usize {
        self.starts
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }
}
