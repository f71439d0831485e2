//! The per-node arrays two-pass workers fill side by side, and applying workers' output.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::column::Append;

/// The per-node arrays while two-pass workers fill them in side by side (taken out of the
/// index by [`SharedArrays::take`], put back by [`apply`]), in memory or in scratch files
/// alike; [`SharedArrays::view`] is what the workers write through. Each worker writes an
/// object's class, shallow size and edge range as soon as its edge list is final, so that no
/// worker buffers an entry per object (16 bytes each: 22 MB on the generated 150 MB ART-style
/// dump, whose peak was 100 MB with them).
///
/// An object's edge range starts where it does in its worker's list; `owner` names the worker
/// (`u8::MAX`: no worker listed the object), and [`apply`] adds the start of that worker's list
/// in the joined one. The first worker to claim a node writes it; a later claim is a duplicate
/// id, kept aside by its worker, and [`apply`] then keeps whichever the file lists first.
pub(crate) struct SharedArrays {
    class_of: Column<u32>,
    shallow: Column<u32>,
    adj: Column<[u32; 2]>,
    owner: Column<u8>,
}

/// The workers' view of [`SharedArrays`]: the same values as atomics.
pub(crate) struct Shared<'a> {
    class_of: &'a [AtomicU32],
    shallow: &'a [AtomicU32],
    /// Two words per node: first edge, degree.
    adj: &'a [AtomicU32],
    owner: &'a [AtomicU8],
}

/// Most pass-2 workers (one per part of the file): their numbers fit [`Shared::owner`]'s bytes.
pub(crate) const MAX_WORKERS: usize = u8::MAX as usize;

impl SharedArrays {
    /// Take the index's node arrays for two-pass workers to fill in (where they are: in memory
    /// or in scratch files), with a byte per node naming its worker (in `scratch` if given).
    pub(crate) fn take(ix: &mut Index, scratch: Option<&Scratch>) -> SharedArrays {
        SharedArrays {
            class_of: std::mem::take(&mut ix.class_of),
            shallow: std::mem::take(&mut ix.shallow),
            adj: std::mem::take(&mut ix.adj),
            owner: Column::filled(ix.len(), u8::MAX, scratch).0,
        }
    }

    /// The arrays as atomics, for the workers.
    pub(crate) fn view(&mut self) -> Shared<'_> {
        Shared {
            class_of: sys::scratch::atomic_u32s(&mut self.class_of),
            shallow: sys::scratch::atomic_u32s(&mut self.shallow),
            adj: sys::scratch::atomic_u32s(self.adj.as_flattened_mut()),
            owner: sys::scratch::atomic_u8s(&mut self.owner),
        }
    }

    /// Put the arrays back into the index, each edge range moved by `bases[worker]`.
    pub(super) fn put_back(self, ix: &mut Index, bases: &[u32]) {
        let SharedArrays {
            class_of,
            shallow,
            mut adj,
            owner,
        } = self;
        let (a, o): (&mut [[u32; 2]], &[u8]) = (&mut adj, &owner);
        for (e, &w) in a.iter_mut().zip(o) {
            *e = match bases.get(w as usize) {
                Some(&b) => [e[0] + b, e[1]],
                None => [NONE, 0],
            };
        }
        ix.class_of = class_of;
        ix.shallow = shallow;
        ix.adj = adj;
    }
}

impl Shared<'_> {
    /// Worker `worker`'s object `o` (node, class, shallow size, first edge, degree), if no
    /// other object holds its node yet; `false` if one does.
    #[inline]
    pub(super) fn claim(&self, worker: u8, o: [u32; 5]) -> bool {
        let n = o[0] as usize;
        if self.owner[n]
            .compare_exchange(u8::MAX, worker, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.put(n, o);
        true
    }

    #[inline]
    pub(super) fn put(&self, n: usize, o: [u32; 5]) {
        self.class_of[n].store(o[1], Ordering::Relaxed);
        self.shallow[n].store(o[2], Ordering::Relaxed);
        self.adj[2 * n].store(o[3], Ordering::Relaxed);
        self.adj[2 * n + 1].store(o[4], Ordering::Relaxed);
    }

    /// Keep, of each duplicate id, the object the file lists first: `dups[w]` is worker `w`'s
    /// list. (Within a worker the first of an id claims it or is the first of its list.) Once
    /// the workers are done.
    pub(super) fn settle(&self, dups: &[Vec<[u32; 5]>]) {
        for (w, list) in dups.iter().enumerate() {
            for &o in list {
                let n = o[0] as usize;
                if (w as u8) < self.owner[n].load(Ordering::Relaxed) {
                    self.owner[n].store(w as u8, Ordering::Relaxed);
                    self.put(n, o);
                }
            }
        }
    }
}

/// Apply one-pass workers' outputs, in file order, to the index, their edge lists joined into
/// `edges` and most of their objects written by [`place`]: the objects it left, and the rest of
/// each output. Returns the watched referents.
pub(crate) fn apply_placed(
    ix: &mut Index,
    placed: Vec<Placed>,
    edges: Column<u32>,
) -> Vec<(u64, u32)> {
    ix.edges = edges;
    let mut watched = Vec::new();
    for Placed { out, rest } in placed {
        for [n, c, sh, f, d] in rest {
            let n = n as usize;
            if ix.adj[n][0] != NONE {
                // A duplicate id (pass 1 counted it): the object listed first is kept.
                continue;
            }
            ix.class_of[n] = c;
            ix.shallow[n] = sh;
            ix.adj[n] = [f, d];
        }
        watched.extend(apply_rest(ix, out));
    }
    watched
}

/// Apply two-pass workers' outputs, in file order, to the index, and put back the node arrays
/// they filled in (`shared`); returns the watched referents.
pub(crate) fn apply(
    ix: &mut Index,
    outs: Vec<Out>,
    mut shared: SharedArrays,
) -> Result<Vec<(u64, u32)>, String> {
    let total: u64 = outs.iter().map(|o| o.edges.len() as u64).sum();
    if total >= NONE as u64 {
        return Err(super::pass2::TOO_MANY_REFERENCES.into());
    }
    // The edge lists are joined on a second thread while this one fills in the nodes (each
    // list where it is: the first one grows, in memory or in its scratch file).
    let mut outs = outs;
    let lists: Vec<Grow<u32>> = outs
        .iter_mut()
        .map(|o| std::mem::take(&mut o.edges))
        .collect();
    let mut bases = Vec::with_capacity(lists.len());
    let mut acc = ix.edges.len() as u32;
    for l in &lists {
        bases.push(acc);
        acc += l.len() as u32;
    }
    let prior = std::mem::take(&mut ix.edges);
    let (edges, watched) = std::thread::scope(|s| {
        let joiner = s.spawn(move || {
            let mut it = lists.into_iter();
            let mut e = if prior.is_empty() {
                it.next().unwrap_or_default()
            } else {
                Grow::from(prior.into_vec())
            };
            e.reserve_more((total as usize).saturating_sub(e.len()));
            for l in it {
                e.extend_from_slice(&l);
            }
            e
        });
        let dups: Vec<_> = outs
            .iter_mut()
            .map(|o| std::mem::take(&mut o.dups))
            .collect();
        // (Pass 1 counted the duplicates when it dropped their ids.)
        shared.view().settle(&dups);
        shared.put_back(ix, &bases);
        // (Two-pass workers wrote their objects into `shared`.)
        let mut watched = Vec::new();
        for o in outs {
            watched.extend(apply_rest(ix, o));
        }
        (crate::joined(joiner), watched)
    });
    ix.edges = edges.into_column();
    Ok(watched)
}

/// What an output adds to the index besides its objects; returns its watched referents.
pub(super) fn apply_rest(ix: &mut Index, o: Out) -> Vec<(u64, u32)> {
    ix.stats.add(&o.stats);
    for (c, k) in ix.classes.iter_mut().zip(&o.instances) {
        c.instances += k;
    }
    ix.flags.extend(o.flags);
    ix.segments.extend(o.segments);
    o.watched
}
