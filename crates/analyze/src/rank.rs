//! Id lookups by rank: one bit per possible object address, and a running count, so that an
//! id's node (its position among the sorted ids) is the number of ids below it.
//!
//! Object ids are addresses, aligned (HotSpot and ART place objects on 8-byte boundaries) and
//! packed: a heap is mostly objects side by side. The map cuts the addresses from the smallest
//! id on into slots, one per possible object start (the ids' common alignment), and the slots
//! into blocks of [`SLOTS`], each half a 64-byte cache line: the number of ids before the block
//! and within it before its second and third word, then the block's bits. A lookup reads one
//! such line and counts the bits of one word, found through a small table of regions (a run of
//! [`BLOCKS`] blocks each) that holds blocks only where some id lies, so heaps whose spaces lie
//! gigabytes apart (ART) stay small too. (x86-64 builds count bits in software by default,
//! without `popcnt`: a block of seven words, counting up to seven of them per lookup, made the
//! lookups on a 540 MB dump no faster than the bucket map's. [`RankMap::find_batch`] now counts
//! them with the instruction where the processor has it, `sys::cpu::with_popcnt`.)
//!
//! Its size follows the heap's address span, not its object count, so [`RankMap::new`] gives
//! up (the caller keeps the bucket map, [`super::index::Buckets`]) when it would take more than
//! [`MAX_BYTES_PER_ID`] per id: ids too far apart, or not sharing an alignment.
#![forbid(unsafe_code)]

use super::index::NONE;

/// Slots per block: the bits of three 64-bit words (the fourth holds the counts).
const SLOTS: u64 = 3 * 64;
/// Blocks per region (a power of two).
const BLOCKS: u64 = 256;
/// A block's size in bytes.
const BLOCK_BYTES: u64 = 32;
/// The most the map may take per id, regions and blocks together, before the bucket map is
/// used instead (which takes 1 to 2 bytes per id but reads three arrays per lookup).
pub const MAX_BYTES_PER_ID: u64 = 8;

/// A block, half a cache line: words 1 to 3 are the bits of its slots; word 0 holds in its low
/// 32 bits the number of ids in the blocks before it, in bits 32 to 39 the number in word 1, in
/// bits 40 to 47 those in words 1 and 2 (at most 128). (A plain array, so that the blocks are
/// allocated as zeros, not written: the analyser's allocator maps large arrays on page
/// boundaries, where no block straddles two cache lines.)
type Block = [u64; 4];

/// The address span of a region at the finest alignment (4 bytes): regions counted at this
/// span are at least as many as the map's ([`estimate_bytes`]).
pub(crate) const FINE_REGION_SPAN: u64 = SLOTS * BLOCKS * 4;

/// About the bytes the id map of `n` ids takes (for the analysis's budget, `crate::budget`):
/// a rank map over a `span` of addresses at `align`, with blocks in `holding` regions (counted
/// at [`FINE_REGION_SPAN`]); the bucket map's 2 bytes an id where that is over
/// [`MAX_BYTES_PER_ID`] an id.
pub(crate) fn estimate_bytes(n: u64, span: u64, align: u64, holding: u64) -> u64 {
    let table = (span / align.max(1) / SLOTS / BLOCKS + 1).saturating_mul(4);
    let rank = table.saturating_add(holding.saturating_mul(BLOCKS * BLOCK_BYTES));
    if rank <= n.saturating_mul(MAX_BYTES_PER_ID) {
        rank
    } else {
        n.saturating_mul(2)
    }
}

pub struct RankMap {
    min: u64,
    /// log2 of the slot width in bytes (the ids' common alignment from `min`).
    shift: u32,
    /// Per region: the index of its first block in `blocks`, or [`NONE`] if it holds no id.
    region: Vec<u32>,
    blocks: Vec<Block>,
    /// Per run of [`BLOCKS`] blocks, the region it belongs to: made by
    /// [`RankMap::prepare_select`] for [`RankMap::id_at`], empty until then.
    owner: Vec<u32>,
    /// Per [`MARK`] positions, the block holding the id at the first of them: made by
    /// [`RankMap::prepare_select`], so that [`RankMap::id_at`] searches the few blocks between
    /// two marks, not all of them.
    marks: Vec<u32>,
}

/// Positions per entry of [`RankMap`]'s `marks`.
const MARK: u32 = 256;

impl RankMap {
    /// The map of `ids` (sorted, distinct), or `None` if it would take more than
    /// [`MAX_BYTES_PER_ID`] per id (or there are none, or more than [`NONE`]).
    pub fn new(ids: &[u64]) -> Option<RankMap> {
        Self::within(ids, (ids.len() as u64).saturating_mul(MAX_BYTES_PER_ID))
    }

    /// [`RankMap::new`] with a budget of `budget` bytes in all.
    fn within(ids: &[u64], budget: u64) -> Option<RankMap> {
        Self::within_split(ids, budget, PARALLEL_MIN)
    }

    /// [`RankMap::within`], mapping the ids in two halves side by side if there are at least
    /// `parallel_min`.
    fn within_split(ids: &[u64], budget: u64, parallel_min: usize) -> Option<RankMap> {
        let &min = ids.first()?;
        if ids.len() >= NONE as usize {
            return None;
        }
        // The ids' common alignment from `min` is guessed from a sample (the first ids, and
        // ids spaced over the rest): a heap's objects share one. The pass that builds the map
        // checks every id, and in the rare case the guess was too coarse the map is made
        // again. (A coarser slot takes less room, so a map refused with the guess would be
        // refused with the true alignment too.)
        let every = (ids.len() / 4096).max(1);
        let guess = (ids.iter().take(4096).chain(ids.iter().step_by(every)))
            .fold(0u64, |acc, &id| acc | (id - min));
        let shift = guess.trailing_zeros().min(63);
        let (map, spread) = Self::build(ids, budget, shift, parallel_min)?;
        let true_shift = spread.trailing_zeros().min(63);
        if true_shift < shift {
            return Self::build(ids, budget, true_shift, parallel_min).map(|(m, _)| m);
        }
        Some(map)
    }

    /// The map of `ids` (sorted, distinct, fewer than [`NONE`]) with slots `1 << shift` bytes
    /// wide, and the bits in which the ids differ from the first (the alignment is right if
    /// none is below `shift`; the map is meaningless otherwise); `None` past `budget`. At least
    /// `parallel_min` ids are mapped in two halves side by side.
    fn build(ids: &[u64], budget: u64, shift: u32, parallel_min: usize) -> Option<(RankMap, u64)> {
        let (&min, &max) = (ids.first()?, ids.last()?);
        let last_region = ((max - min) >> shift) / SLOTS / BLOCKS;
        // The region table alone must fit.
        if last_region.saturating_add(1).saturating_mul(4) > budget {
            return None;
        }
        let region_bytes = (last_region + 1) * 4;
        // Blocks are given to a region when its first id comes, within what the budget leaves.
        let max_blocks = ((budget - region_bytes) / BLOCK_BYTES).min(NONE as u64 - 1) as usize;
        // Many ids are mapped in two halves side by side, cut where a region starts: the
        // second half's blocks follow the first's.
        let cut = if ids.len() >= parallel_min.max(2) {
            let r = region_of(ids[ids.len() / 2], min, shift);
            ids.partition_point(|&id| region_of(id, min, shift) < r)
        } else {
            0
        };
        // The regions that hold ids give the number of blocks, so that the blocks are
        // allocated once, as zeros.
        let most = max_blocks / BLOCKS as usize;
        let a_blocks = regions_holding(&ids[..cut], min, shift, most) * BLOCKS as usize;
        let b_blocks = regions_holding(&ids[cut..], min, shift, most) * BLOCKS as usize;
        if a_blocks + b_blocks > most * BLOCKS as usize {
            return None;
        }
        let mut region = vec![NONE; last_region as usize + 1];
        let mut blocks: Vec<Block> = vec![[0; 4]; a_blocks + b_blocks];
        let spread = if cut == 0 {
            fill(ids, min, shift, 0, &mut region, 0, &mut blocks, 0)
        } else {
            let r_cut = region_of(ids[cut], min, shift);
            let (ra, rb) = region.split_at_mut(r_cut);
            let (ba, bb) = blocks.split_at_mut(a_blocks);
            std::thread::scope(|s| {
                let b =
                    s.spawn(|| fill(&ids[cut..], min, shift, cut as u32, rb, r_cut, bb, a_blocks));
                let a = fill(&ids[..cut], min, shift, 0, ra, 0, ba, 0);
                a | super::joined(b)
            })
        };
        Some((
            RankMap {
                min,
                shift,
                region,
                blocks,
                owner: Vec::new(),
                marks: Vec::new(),
            },
            spread,
        ))
    }

    /// The map's size in bytes.
    pub fn bytes(&self) -> usize {
        (self.region.len() + self.owner.len() + self.marks.len()) * 4
            + self.blocks.len() * BLOCK_BYTES as usize
    }

    /// Make the tables [`RankMap::id_at`] needs: the region of each run of [`BLOCKS`] blocks,
    /// and the block of every [`MARK`]-th position (4 bytes each).
    pub fn prepare_select(&mut self) {
        let mut owner = vec![NONE; self.blocks.len() / BLOCKS as usize];
        for (r, &first) in self.region.iter().enumerate() {
            if first != NONE {
                owner[first as usize / BLOCKS as usize] = r as u32;
            }
        }
        self.owner = owner;
        let mut marks = Vec::new();
        let mut next = 0u64;
        for (b, w) in self.blocks.iter().enumerate() {
            let held: u64 = w[1..].iter().map(|x| x.count_ones() as u64).sum();
            // (A block without ids has no counts: skipped.)
            while held > 0 && next < (w[0] as u32) as u64 + held {
                marks.push(b as u32);
                next += MARK as u64;
            }
        }
        self.marks = marks;
    }

    /// Every id of the map in ascending order (after [`RankMap::prepare_select`]).
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.blocks.iter().enumerate().flat_map(move |(b, w)| {
            let region = self.owner[b / BLOCKS as usize] as u64;
            let block = region * BLOCKS + (b as u64 - self.region[region as usize] as u64);
            (0..3u64).flat_map(move |k| {
                let mut word = w[1 + k as usize];
                std::iter::from_fn(move || {
                    let bit = (word != 0).then(|| word.trailing_zeros() as u64)?;
                    word &= word - 1;
                    Some(self.min + ((block * SLOTS + 64 * k + bit) << self.shift))
                })
            })
        })
    }

    /// The id at position `node` among the ids the map was built from (the inverse of
    /// [`RankMap::find`]), or `None` past the last; after [`RankMap::prepare_select`]. A binary
    /// search of the blocks between two marks (those that hold ids come in ascending order of
    /// id, so of their counts; a block without ids, whose counts were never written, stands for
    /// the next one that has some), then of the words and bits of one block. For the ids a
    /// report names (about 0.2 us each over 3.5 M ids, 0.85 us with a search of all blocks),
    /// not for a hot loop.
    pub fn id_at(&self, node: u32) -> Option<u64> {
        let holding = |mut b: usize| {
            while b < self.blocks.len() && self.blocks[b][1..] == [0; 3] {
                b += 1;
            }
            b
        };
        // The first block from which on every block that holds ids starts past `node`: after
        // the block of the mark at or before `node` (whose ids start at or before it), and at
        // most one past the next mark's block (whose ids start at or before the next mark).
        let m = (node / MARK) as usize;
        let (mut lo, mut hi) = match self.marks.get(m) {
            Some(&b) => (
                b as usize + 1,
                self.marks
                    .get(m + 1)
                    .map_or(self.blocks.len(), |&c| c as usize + 1),
            ),
            None => (0, self.blocks.len()),
        };
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let h = holding(mid);
            if h < self.blocks.len() && self.blocks[h][0] as u32 <= node {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // So block `lo - 1` holds ids, the first of them at or before `node`.
        let b = lo.checked_sub(1)?;
        let w = &self.blocks[b];
        // (The counts within the block are written only for words that hold ids: counted.)
        let mut left = node - w[0] as u32;
        let mut k = 0;
        while k < 2 && left >= w[1 + k].count_ones() {
            left -= w[1 + k].count_ones();
            k += 1;
        }
        let mut word = w[1 + k];
        if left >= word.count_ones() {
            return None;
        }
        for _ in 0..left {
            word &= word - 1;
        }
        let region = *self.owner.get(b / BLOCKS as usize)? as u64;
        let first = self.region[region as usize] as u64;
        let slot = (region * BLOCKS + (b as u64 - first)) * SLOTS
            + 64 * k as u64
            + word.trailing_zeros() as u64;
        Some(self.min + (slot << self.shift))
    }

    /// The block `id` would be in and its slot there, if the id could be one of the map's.
    #[inline]
    fn place(&self, id: u64) -> Option<(usize, u32)> {
        let off = id.checked_sub(self.min)?;
        if off & ((1u64 << self.shift) - 1) != 0 {
            return None;
        }
        let slot = off >> self.shift;
        let block = slot / SLOTS;
        let first = *self.region.get(usize::try_from(block / BLOCKS).ok()?)?;
        if first == NONE {
            return None;
        }
        Some((
            first as usize + (block % BLOCKS) as usize,
            (slot % SLOTS) as u32,
        ))
    }

    /// The rank of slot `within` of block `b` if its bit is set.
    #[inline]
    fn rank(&self, b: usize, within: u32) -> u32 {
        let w = &self.blocks[b];
        let k = (within / 64) as usize;
        let bit = within % 64;
        let word = w[1 + k];
        if word >> bit & 1 == 0 {
            return NONE;
        }
        // The ids before the block, those before word k within it, those before the bit.
        let within_before = (w[0] >> 32 << 8) >> (8 * k) & 0xff;
        (w[0] as u32) + within_before as u32 + (word & ((1u64 << bit) - 1)).count_ones()
    }

    /// The position of `id` among the ids the map was built from.
    #[inline]
    pub fn find(&self, id: u64) -> Option<u32> {
        let (b, within) = self.place(id)?;
        Some(self.rank(b, within)).filter(|&r| r != NONE)
    }

    /// [`RankMap::find`] for many ids: `out[i]` is the position of `q[i]`, or [`NONE`]. Each
    /// block is asked for a few lookups before it is read, so that the reads' cache misses
    /// overlap. (Its bits are counted with the processor's instruction where it has one.)
    pub fn find_batch(&self, q: &[u64], out: &mut [u32]) {
        sys::cpu::with_popcnt(
            #[inline(always)]
            || self.find_batch_in(q, out),
        )
    }

    /// [`RankMap::find_batch`], inlined into the code [`sys::cpu::with_popcnt`] compiles.
    #[inline(always)]
    fn find_batch_in(&self, q: &[u64], out: &mut [u32]) {
        const D: usize = 16;
        const RING: usize = 32;
        let mut at = [(usize::MAX, 0u32); RING];
        for t in 0..q.len() + D {
            if let Some(&id) = q.get(t) {
                let p = self.place(id).unwrap_or((usize::MAX, 0));
                if p.0 != usize::MAX {
                    sys::mapped::prefetch_at(&self.blocks, p.0);
                }
                at[t % RING] = p;
            }
            if let Some(i) = t.checked_sub(D) {
                let (b, within) = at[i % RING];
                out[i] = if b == usize::MAX {
                    NONE
                } else {
                    self.rank(b, within)
                };
            }
        }
    }
}

/// Ids at least this many are mapped in two halves side by side.
const PARALLEL_MIN: usize = 1 << 20;

/// The region of `id` (at least `min`), with slots `1 << shift` bytes wide from `min` on.
fn region_of(id: u64, min: u64, shift: u32) -> usize {
    (((id - min) >> shift) / SLOTS / BLOCKS) as usize
}

/// How many regions the ids (sorted, all at least `min`) fall in (see [`region_of`]), counted
/// by galloping over each one's ids; past `most`, `most + 1`.
fn regions_holding(ids: &[u64], min: u64, shift: u32, most: usize) -> usize {
    let span = (SLOTS * BLOCKS) as u128;
    let (mut n, mut at) = (0, 0);
    while at < ids.len() && n <= most {
        // The region's end, as an offset from `min` (past the 64-bit range for the last ones),
        // so that the search compares instead of dividing.
        let r = region_of(ids[at], min, shift) as u128;
        let end = ((r + 1) * span) << shift;
        n += 1;
        at += super::arrays::gallop(&ids[at..], |&id| ((id - min) as u128) < end);
    }
    n
}

/// Fill in the blocks of the regions `ids` (sorted, distinct, all at least `min`) fall in;
/// returns the bits in which the ids differ from `min`. `seen` ids come before them; `region`
/// is the region table from region `region_base` on, and `blocks` the blocks from block
/// `block_base` on, both wholly theirs and with room for every region they fall in.
#[allow(clippy::too_many_arguments)]
fn fill(
    ids: &[u64],
    min: u64,
    shift: u32,
    mut seen: u32,
    region: &mut [u32],
    region_base: usize,
    blocks: &mut [Block],
    block_base: usize,
) -> u64 {
    let mut fill = Fill {
        region,
        region_base,
        blocks,
        block_base,
        next: 0,
        block: usize::MAX,
        block_seen: 0,
    };
    // One pass over the ids, which ascend: a word's bits are gathered in a register and
    // stored when the next id falls in a later word.
    let (mut word, mut bits) = (u64::MAX, 0u64);
    let mut spread = 0u64;
    for &id in ids {
        spread |= id - min;
        let slot = (id - min) >> shift;
        let w = slot / 64;
        if w != word {
            if word != u64::MAX {
                fill.store(word, bits, seen);
            }
            (word, bits) = (w, 0);
        }
        bits |= 1 << (slot % 64);
        seen += 1;
    }
    if word != u64::MAX {
        fill.store(word, bits, seen);
    }
    spread
}

/// [`RankMap::build`]'s tables while they fill.
struct Fill<'a> {
    /// The region table from region `region_base` on.
    region: &'a mut [u32],
    region_base: usize,
    /// The blocks from block `block_base` on, and how many of them regions have taken.
    blocks: &'a mut [Block],
    block_base: usize,
    next: usize,
    /// The block the last word stored went to (an index into `blocks`), and the ids before it.
    block: usize,
    block_seen: u32,
}

impl Fill<'_> {
    /// Store bit word `word` (counted from the map's first slot): `bits`, the last of the
    /// `seen` ids so far. Words come in ascending order. Only a block that holds an id needs
    /// its counts (a lookup reads them only when its bit is set): the ids before it are those
    /// counted when its first word comes.
    #[inline(always)]
    fn store(&mut self, word: u64, bits: u64, seen: u32) {
        let (block, k) = (word / 3, (word % 3) as usize);
        let r = (block / BLOCKS) as usize - self.region_base;
        if self.region[r] == NONE {
            self.region[r] = (self.block_base + self.next) as u32;
            self.next += BLOCKS as usize;
        }
        let b = self.region[r] as usize - self.block_base + (block % BLOCKS) as usize;
        let before = seen - bits.count_ones();
        if b != self.block {
            self.block = b;
            self.block_seen = before;
            self.blocks[b][0] = before as u64;
        }
        if k > 0 {
            self.blocks[b][0] |= ((before - self.block_seen) as u64) << (24 + 8 * k);
        }
        self.blocks[b][1 + k] = bits;
    }
}

/// Ids in three dense spaces gigabytes apart, like ART's image, zygote and app spaces (objects
/// 8 to 40 bytes apart), for tests.
#[cfg(test)]
pub(crate) fn spaces_far_apart() -> Vec<u64> {
    let mut ids = Vec::new();
    for (base, n) in [
        (0x12c0_0000u64, 300_000u64),
        (0x3000_0000, 100_000),
        (0x7000_0000, 200_000),
    ] {
        let mut at = base;
        for i in 0..n {
            ids.push(at);
            at += 8 + (i % 5) * 8;
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The budget's estimate of the id map (from the ids' span, alignment and regions, as the
    /// census counts them) is never below the map the index makes, nor far above it.
    #[test]
    fn the_estimate_of_the_map_covers_the_map() {
        let dense: Vec<u64> = (0..500_000u64).map(|i| 0x7_0000_0000 + 16 * i).collect();
        let sparse: Vec<u64> = (0..50_000u64).map(|i| 0x1000 + 4096 * i).collect();
        for ids in [dense, sparse, spaces_far_apart()] {
            let (min, max) = (ids[0], *ids.last().unwrap());
            let or = ids.iter().fold(0, |a, &b| a | b);
            let align = 1u64 << or.trailing_zeros().min(6);
            let mut regions: Vec<u64> = ids.iter().map(|&i| i / FINE_REGION_SPAN).collect();
            regions.dedup();
            let n = ids.len() as u64;
            let est = estimate_bytes(n, max - min, align, regions.len() as u64);
            let real = RankMap::new(&ids).map_or(2 * n, |m| m.bytes() as u64);
            assert!(
                est >= real && est <= 4 * real + (64 << 10),
                "{est} vs {real}"
            );
        }
    }

    /// [`check_split`] with the map made in two halves (as for many ids) and in one: both alike.
    fn check(ids: &[u64], budget: u64, probes: &[u64]) -> Result<bool, TestCaseError> {
        let halves = check_split(ids, budget, probes, 2)?;
        prop_assert_eq!(halves, check_split(ids, budget, probes, usize::MAX)?);
        Ok(halves)
    }

    /// The map of `ids` within `budget` bytes finds exactly them, at their positions, one by one
    /// and in batches; false if it was refused.
    fn check_split(
        ids: &[u64],
        budget: u64,
        probes: &[u64],
        parallel_min: usize,
    ) -> Result<bool, TestCaseError> {
        let Some(mut m) = RankMap::within_split(ids, budget, parallel_min) else {
            return Ok(false);
        };
        prop_assert!(m.bytes() as u64 <= budget);
        m.prepare_select();
        for (i, &id) in ids.iter().enumerate() {
            prop_assert_eq!(m.find(id), Some(i as u32));
            prop_assert_eq!(m.id_at(i as u32), Some(id), "position {}", i);
        }
        prop_assert_eq!(m.id_at(ids.len() as u32), None);
        prop_assert!(m.ids().eq(ids.iter().copied()));
        prop_assert_eq!(m.id_at(u32::MAX - 1), None);
        let mut q: Vec<u64> = probes.to_vec();
        for &id in ids.iter().step_by(3) {
            q.extend([
                id,
                id.wrapping_add(1),
                id.wrapping_sub(8),
                id.wrapping_add(8),
            ]);
        }
        for p in &q {
            prop_assert_eq!(m.find(*p), ids.binary_search(p).ok().map(|i| i as u32));
        }
        let mut got = vec![0u32; q.len()];
        m.find_batch(&q, &mut got);
        for (p, g) in q.iter().zip(&got) {
            prop_assert_eq!(*g, ids.binary_search(p).map_or(NONE, |i| i as u32));
        }
        Ok(true)
    }

    /// Runs of ids `step << align` bytes apart from `base << align` on.
    fn runs_of(runs: &[(u64, usize, u64)], align: u32) -> Vec<u64> {
        let mut ids = Vec::new();
        for &(base, n, step) in runs {
            for i in 0..n as u64 {
                ids.push((base << align).wrapping_add((i * step) << align));
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    proptest! {
        /// Dense runs of aligned ids within a few hundred megabytes: the map is made, finds
        /// every id at its position, and finds nothing else (misaligned ids, ids between and
        /// around the runs, anything).
        #[test]
        fn finds_exactly_the_ids(
            runs in proptest::collection::vec((0u64..1 << 24, 1usize..2000, 1u64..8), 1..4),
            align in 0u32..5,
            probes in proptest::collection::vec(any::<u64>(), 0..200),
        ) {
            let ids = runs_of(&runs, align);
            prop_assert!(check(&ids, 16 << 20, &probes)?);
        }

        /// Runs anywhere in the 64-bit range: if the map is made within its budget, it is
        /// exact.
        #[test]
        fn is_exact_or_refused_anywhere(
            runs in proptest::collection::vec((any::<u64>(), 1usize..2000, 1u64..8), 1..4),
            align in 0u32..5,
            probes in proptest::collection::vec(any::<u64>(), 0..200),
        ) {
            let ids = runs_of(&runs, align);
            check(&ids, 16 << 20, &probes)?;
            check(&ids, ids.len() as u64 * MAX_BYTES_PER_ID, &probes)?;
        }
    }

    /// Two halves that each fit the budget but not together are refused, as in one piece; with
    /// room for both, the map is made.
    #[test]
    fn halves_are_held_to_the_budget_together() {
        // Four regions with ids, every other one, 100 ids 8 bytes apart at each one's start.
        let region = SLOTS * BLOCKS * 8;
        let ids: Vec<u64> = (0..4u64)
            .flat_map(|r| (0..100u64).map(move |i| 0x1000_0000 + r * 2 * region + i * 8))
            .collect();
        // The region table (7 regions) and two regions' blocks.
        let two = 7 * 4 + 2 * BLOCKS * BLOCK_BYTES;
        assert!(!check(&ids, two, &[]).unwrap());
        assert!(check(&ids, two + 2 * BLOCKS * BLOCK_BYTES, &[]).unwrap());
    }

    /// A HotSpot-like heap (objects 16 to 48 bytes apart) is taken, with its ids' alignment.
    #[test]
    fn a_packed_heap_is_taken() {
        let mut ids = Vec::new();
        let mut at = 0x7_0000_0000u64;
        for i in 0..100_000u64 {
            ids.push(at);
            at += 16 + (i % 3) * 16;
        }
        let m = RankMap::new(&ids).expect("a packed heap fits");
        assert_eq!(m.shift, 4);
        assert!(m.bytes() < ids.len() * 2, "{} bytes", m.bytes());
        let budget = ids.len() as u64 * MAX_BYTES_PER_ID;
        assert!(check(&ids, budget, &[0, 8, u64::MAX, at, at + 16]).unwrap());
    }

    /// One id off the alignment the sample suggests, where the sample does not look: the map
    /// is made again with the finer slots, and is exact.
    #[test]
    fn an_id_off_the_sampled_alignment_is_found() {
        let mut ids: Vec<u64> = (0..10_001u64).map(|i| 0x1_0000_0000 + 32 * i).collect();
        // Index 7001: past the first 4096, and odd, so not among every second id.
        ids[7001] += 8;
        let m = RankMap::new(&ids).expect("a packed heap fits");
        assert_eq!(m.shift, 3);
        let budget = ids.len() as u64 * MAX_BYTES_PER_ID;
        assert!(check(&ids, budget, &[ids[7001] - 8, ids[7001] + 8]).unwrap());
    }

    /// ART's image, zygote and app spaces, gigabytes apart: only their regions get blocks.
    #[test]
    fn spaces_far_apart_are_taken() {
        let ids = spaces_far_apart();
        let m = RankMap::new(&ids).expect("three dense spaces fit");
        assert!(m.bytes() < ids.len() * 4, "{} bytes", m.bytes());
        let budget = ids.len() as u64 * MAX_BYTES_PER_ID;
        assert!(check(&ids, budget, &[0x12c0_0000 - 8, 0x2fff_fff8, 0x7000_0004]).unwrap());
    }

    /// Ids off the alignment the sample suggests, where the sample does not look, in a map made
    /// in two halves: the halves' spreads are joined, so an odd id in either half (or in both)
    /// makes the map again with the finer slots.
    #[test]
    fn an_id_off_the_sampled_alignment_is_found_in_either_half() {
        // 100,001 ids 32 bytes apart span three regions at 32-byte slots: the halves are cut
        // at the second. The sample is the first 4,096 and every 24th: 7,001 and 70,001 are in
        // neither, one in each half.
        for off in [&[70_001usize][..], &[7_001, 70_001]] {
            let mut ids: Vec<u64> = (0..100_001u64).map(|i| 0x1_0000_0000 + 32 * i).collect();
            for &i in off {
                ids[i] += 8;
            }
            let budget = ids.len() as u64 * MAX_BYTES_PER_ID;
            let m = RankMap::within_split(&ids, budget, 2).expect("a packed heap fits");
            assert_eq!(m.shift, 3, "odd ids at {off:?}");
            assert!(check(&ids, budget, &[]).unwrap());
        }
    }

    /// An id on a region's first slot is that region's, not the one before: both regions get
    /// their blocks, and the map is exact.
    #[test]
    fn an_id_on_a_regions_first_slot_is_that_regions() {
        let min = 0x1000u64;
        let ids = [min, min + 8, min + ((SLOTS * BLOCKS) << 3)];
        assert_eq!(regions_holding(&ids, min, 3, 10), 2);
        let m = RankMap::within(&ids, 1 << 20).expect("room enough");
        assert_eq!((m.shift, m.blocks.len()), (3, 2 * BLOCKS as usize));
        assert!(check(&ids, 1 << 20, &[min + ((SLOTS * BLOCKS) << 3) - 8]).unwrap());
    }

    /// A map is made within exactly its own size and refused a byte short of it, in one piece
    /// and in two halves: the region table, then whole regions of blocks.
    #[test]
    fn a_map_fits_in_exactly_its_size() {
        let dense: Vec<u64> = (0..200_000u64).map(|i| 0x7_0000_0000 + 16 * i).collect();
        for ids in [dense, spaces_far_apart()] {
            for parallel_min in [2, usize::MAX] {
                let size = RankMap::within_split(&ids, 1 << 40, parallel_min)
                    .expect("room enough")
                    .bytes() as u64;
                assert!(RankMap::within_split(&ids, size, parallel_min).is_some());
                assert!(RankMap::within_split(&ids, size - 1, parallel_min).is_none());
            }
        }
    }

    /// The map's size, worked out by hand: 1,024 ids 8 bytes apart take one region (4 bytes in
    /// the table) and its 256 blocks of 32 bytes; the tables [`RankMap::id_at`] needs add the
    /// region of that run of blocks and a mark per 256 positions (four: none at 1,024, past
    /// the last).
    #[test]
    fn the_maps_size_is_its_tables() {
        let ids: Vec<u64> = (0..1024u64).map(|i| 0x1000 + 8 * i).collect();
        let mut m = RankMap::within(&ids, 1 << 20).expect("room enough");
        assert_eq!(m.shift, 3);
        assert_eq!(m.bytes(), 4 + 256 * 32);
        m.prepare_select();
        assert_eq!(m.bytes(), (1 + 1 + 4) * 4 + 256 * 32);
    }

    /// The budget's estimate, worked out by hand: a span of three regions at 8-byte slots takes
    /// a table of four entries (16 bytes) and, for two regions holding ids, 2 x 256 blocks of
    /// 32 bytes: 16,400 bytes, taken up to 8 bytes an id (2,050 ids exactly), else the bucket
    /// map's 2 bytes an id.
    #[test]
    fn the_estimate_is_the_table_and_the_blocks() {
        let span = SLOTS * BLOCKS * 8 * 3;
        assert_eq!(estimate_bytes(2050, span, 8, 2), 16_400);
        assert_eq!(estimate_bytes(2049, span, 8, 2), 2 * 2049);
        assert_eq!(estimate_bytes(10_000, span, 8, 2), 16_400);
        // The table at the alignment given (4-byte slots: twice the regions), and an alignment
        // of 0 taken as 1.
        assert_eq!(estimate_bytes(10_000, span, 4, 2), 7 * 4 + 2 * 256 * 32);
        assert_eq!(estimate_bytes(1 << 30, 0, 0, 1), 4 + 256 * 32);
    }

    /// Ids scattered over the whole range, or without a common alignment beyond bytes in a
    /// sparse heap, are left to the bucket map.
    #[test]
    fn sparse_ids_are_refused() {
        assert!(RankMap::new(&[1, u64::MAX - 1]).is_none());
        let scattered: Vec<u64> = (1..1000u64).map(|i| (i * i) << 24).collect();
        assert!(RankMap::new(&scattered).is_none());
        let odd: Vec<u64> = (0..1000u64).map(|i| 0x1000 + i * 4097).collect();
        assert!(RankMap::new(&odd).is_none());
        assert!(RankMap::new(&[]).is_none());
        // A region's blocks (8 KiB) are too much for a single id, but would do.
        assert!(RankMap::new(&[42]).is_none());
        let one = RankMap::within(&[42], 1 << 20).expect("a single id");
        assert_eq!(one.find(42), Some(0));
        assert_eq!(one.find(43), None);
        assert_eq!(one.find(41), None);
    }
}
