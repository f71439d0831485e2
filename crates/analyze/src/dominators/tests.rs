//! The dominators' tests: against brute force (retained sizes, immediate dominators, the
//! tops), with a second thread or not, in scratch files; the search's records and blocks.

use super::*;
use proptest::prelude::*;

fn run(lists: &[Vec<u32>], sizes: &[u64], roots: &[u32]) -> Dominators {
    run_late(lists, sizes, roots, &[])
}

/// [`compute`], checked against its steps with a second thread or not, in blocks of 1 to 128
/// (the listed targets' bits in one word or two), reading 1 to 16 sources of a target
/// before its block is sorted.
fn run_late(lists: &[Vec<u32>], sizes: &[u64], roots: &[u32], late: &[u32]) -> Dominators {
    let g = Csr::from_lists(lists);
    let d = compute(&g, |v| sizes[v as usize], roots, late);
    assert!(d.tops().is_empty(), "no tops asked for");
    // Each variant is asked for tops too: every third node a seed, 1 to 5 of them.
    let n = lists.len();
    let seeds: Vec<u32> = (0..n as u32).filter(|v| v % 3 == 1).collect();
    let want = 1 + n % 5;
    let tops = tops_by_brute_force(&d, n, &seeds, want);
    let asked = |mut p: Prepared| {
        p.want_tops(seeds.clone(), want);
        p
    };
    for (min, shift, cap) in [
        (1, 1, 1),
        (2, 2, 2),
        (5, 3, 1),
        (1, 0, 3),
        (1, 3, 16),
        (1, 6, 2),
        (3, 7, 4),
    ] {
        let p = finish_in(
            asked(prepare(&g, roots, late)),
            |v| sizes[v as usize],
            3,
            min,
            shift,
            cap,
        );
        assert_eq!(p.tops(), tops, "second thread from {min}");
        assert_eq!(
            (&p.idom, &p.retained),
            (&d.idom, &d.retained),
            "second thread from {min}, blocks of {}, {cap} first",
            1 << shift
        );
        assert_eq!((&p.pre, &p.vertex), (&d.pre, &d.vertex));
        assert_eq!(p.vertex.len(), p.retained.len());
    }
    // The same with the per-node arrays in scratch files.
    let dir = tempfile::tempdir().unwrap();
    let s = sys::scratch::Scratch::new(dir.path(), 1 << 30).unwrap();
    let f = finish(
        asked(prepare(&InScratch(&g, s), roots, late)),
        |v| sizes[v as usize],
        2,
    );
    assert_eq!(f.tops(), tops);
    assert!(f.pre.in_file() || lists.is_empty());
    assert_eq!((&f.idom, &f.retained), (&d.idom, &d.retained));
    assert_eq!((&f.pre, &f.vertex), (&d.pre, &d.vertex));
    d
}

/// The tops [`Prepared::want_tops`] asks for, by brute force over `d`'s answers by node:
/// the holders are the reached seeds and every node that dominates one; of the other
/// reached nodes, those whose immediate dominator is the super-root or a holder, the
/// `want` largest by (retained size, then the smaller node), handed out largest first (of
/// equal sizes the larger node first).
fn tops_by_brute_force(d: &Dominators, n: usize, seeds: &[u32], want: usize) -> Vec<(u64, u32)> {
    let mut holder = vec![false; n];
    for &s in seeds {
        // (SUPER and UNREACHED are past every node.)
        let mut v = s;
        while (v as usize) < n && d.number(v) != UNREACHED && !holder[v as usize] {
            holder[v as usize] = true;
            v = d.idom(v);
        }
    }
    let mut all: Vec<(u64, u32)> = (0..n as u32)
        .filter(|&v| d.number(v) != UNREACHED && !holder[v as usize])
        .filter(|&v| d.idom(v) == SUPER || holder[d.idom(v) as usize])
        .map(|v| (d.retained(v), v))
        .collect();
    all.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    all.truncate(want);
    all.sort_by(|a, b| b.cmp(a));
    all
}

proptest! {
    /// The tops, on one thread and with the retained sums split over two (the split's
    /// share kept apart, then merged), are those of [`tops_by_brute_force`]. Sizes repeat,
    /// so that ties at the least kept are met (not in every run:
    /// `a_tie_at_the_least_kept_top_goes_to_the_smaller_node` meets one always).
    #[test]
    fn tops_are_the_largest_below_the_holders(
        lists in proptest::collection::vec(proptest::collection::vec(0u32..40, 0..4), 2..40),
        sizes in proptest::collection::vec(1u64..6, 40),
        seeded in proptest::collection::vec(proptest::bool::weighted(0.2), 40),
        want in 1usize..12,
    ) {
        let n = lists.len() as u32;
        let lists: Vec<Vec<u32>> = lists
            .iter()
            .map(|l| l.iter().copied().filter(|&w| w < n).collect())
            .collect();
        let seeds: Vec<u32> = (0..n).filter(|&v| seeded[v as usize]).collect();
        let g = Csr::from_lists(&lists);
        let roots = [0, n / 2];
        let d = compute(&g, |v| sizes[v as usize], &roots, &[]);
        let tops = tops_by_brute_force(&d, lists.len(), &seeds, want);
        for (threads, min) in [(1, PAR_MIN), (3, 1), (3, 4)] {
            let mut p = prepare(&g, &roots, &[]);
            p.want_tops(seeds.clone(), want);
            let f = finish_in(p, |v| sizes[v as usize], threads, min, SHIFT, CAP);
            prop_assert_eq!(f.tops(), &tops[..], "{} threads from {}", threads, min);
        }
    }
}

/// Among tops of equal retained size the smaller node is kept, also when it comes later
/// in the sums' pass than the least one kept: the root's three leaves, nodes 1, 2 and 3,
/// are numbered 2, 3 and 4 in the search's order, the pass runs down from the last number,
/// each leaf retains 1 byte, and the two kept are nodes 1 and 2.
#[test]
fn a_tie_at_the_least_kept_top_goes_to_the_smaller_node() {
    let lists = vec![vec![1, 2, 3], vec![], vec![], vec![]];
    let mut p = prepare(&Csr::from_lists(&lists), &[0], &[]);
    // The root holds its leaves.
    p.want_tops(vec![0], 2);
    let d = finish(p, |_| 1, 1);
    assert_eq!((d.node_at(2), d.node_at(3), d.node_at(4)), (1, 2, 3));
    assert_eq!(d.tops(), [(1, 2), (1, 1)]);
}

/// [`Best`] keeps the `want` largest keys offered, whatever their order, and a second
/// thread's share merged in keeps them so.
#[test]
fn best_keeps_the_largest_keys_offered() {
    let (holder, vertex) = (vec![0u64; 1], vec![0u32; 8]);
    let mut a = Best::new(&holder, &vertex, 3);
    let mut b = a.fresh();
    for (r, v) in [(4, 1), (9, 2), (1, 3)] {
        a.keep((r, Reverse(v)));
    }
    for (r, v) in [(7, 4), (9, 5), (7, 0)] {
        b.keep((r, Reverse(v)));
    }
    a.merge(b);
    assert_eq!(a.floor, 7);
    assert_eq!(a.into_tops(), [(9, 5), (9, 2), (7, 0)]);
    // None asked for: every vertex is passed over.
    let mut none = Best::new(&holder, &vertex, 0);
    none.see(1, 0, u64::MAX);
    assert!(none.into_tops().is_empty());
}

/// A graph whose per-node arrays go to scratch files.
struct InScratch<'a>(&'a Csr, sys::scratch::Scratch);

impl Graph for InScratch<'_> {
    fn nodes(&self) -> usize {
        self.0.nodes()
    }
    fn succ(&self, v: u32) -> &[u32] {
        self.0.succ(v)
    }
    fn scratch(&self) -> Option<&sys::scratch::Scratch> {
        Some(&self.1)
    }
}

/// Nodes reachable from `roots` without passing through `cut`.
fn reach(lists: &[Vec<u32>], roots: &[u32], cut: Option<u32>) -> Vec<bool> {
    let mut seen = vec![false; lists.len()];
    let mut st: Vec<u32> = roots.iter().copied().filter(|&r| Some(r) != cut).collect();
    while let Some(v) = st.pop() {
        if seen[v as usize] {
            continue;
        }
        seen[v as usize] = true;
        for &w in &lists[v as usize] {
            if Some(w) != cut && !seen[w as usize] {
                st.push(w);
            }
        }
    }
    seen
}

#[test]
fn diamond_and_chain() {
    // 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3, 3 -> 4; 5 unreachable
    let lists = vec![vec![1, 2], vec![3], vec![3], vec![4], vec![], vec![4]];
    let d = run(&lists, &[1, 10, 100, 1000, 10000, 7], &[0]);
    assert_eq!(d.idom(0), SUPER);
    assert_eq!(d.idom(1), 0);
    assert_eq!(d.idom(2), 0);
    assert_eq!(d.idom(3), 0);
    assert_eq!(d.idom(4), 3);
    assert_eq!(d.idom(5), UNREACHED);
    assert_eq!(d.retained(0), 11111);
    assert_eq!(d.retained(3), 11000);
    assert_eq!(d.retained(5), 0);
    assert_eq!(d.reachable(), 5);
}

#[test]
fn edges_from_a_later_root_tree_and_roots_reached_earlier() {
    // Root 0 reaches 1 -> 2 -> 3; root 4 (searched second) reaches 5, which points back
    // into the first tree at 2; root 3 is also reached from root 0's tree.
    // 2 is then reached from both trees: only the super-root dominates it.
    let lists = vec![vec![1], vec![2], vec![3], vec![], vec![5], vec![2]];
    let d = run(&lists, &[1, 10, 100, 1000, 10000, 100000], &[0, 4, 3]);
    assert_eq!(d.idom(1), 0);
    assert_eq!(d.idom(2), SUPER);
    assert_eq!(d.idom(3), SUPER);
    assert_eq!(d.idom(5), 4);
    assert_eq!(d.retained(0), 11);
    assert_eq!(d.retained(2), 100);
    assert_eq!(d.retained(4), 110000);
    // A late root reached by nothing before is a root; one reached before is not.
    let lists = vec![vec![1], vec![], vec![1], vec![0]];
    let d = run_late(&lists, &[1, 10, 100, 1000], &[0], &[1, 2, 3]);
    assert_eq!(d.roots_used, vec![0, 2, 3]);
    assert_eq!(d.idom(1), SUPER);
    assert_eq!(d.idom(0), SUPER);
    assert_eq!(d.retained(3), 1000);
}

#[test]
fn nothing_reached_is_empty() {
    // No root: only the super-root is numbered.
    let d = run(&[vec![1], vec![]], &[1, 10], &[]);
    assert!(d.is_empty());
    assert_eq!((d.len(), d.reachable()), (1, 0));
    // A root and the node it reaches (a third is not reached): not empty.
    let d = run(&[vec![1], vec![], vec![]], &[1, 10, 100], &[0]);
    assert!(!d.is_empty());
    assert_eq!((d.len(), d.reachable()), (3, 2));
}

/// The super-root is told apart from "no root reaches it": [`SUPER`] is neither a node
/// nor [`UNREACHED`].
#[test]
fn super_root_is_not_unreached() {
    let d = run(&[vec![1], vec![], vec![]], &[1, 10, 100], &[0]);
    assert_eq!(d.idom(2), UNREACHED);
    assert_eq!(d.idom(1), 0);
    assert_eq!(d.idom(0), SUPER);
    assert_ne!(d.idom(0), d.idom(2));
}

/// Roots and late roots that are no node (past `nodes()`) are left out, on a graph of none
/// and on one whose per-node bit arrays end exactly at a word's end.
#[test]
fn roots_that_are_no_nodes_are_left_out() {
    let d = run_late(&[], &[], &[0], &[0]);
    assert!(d.is_empty());
    assert!(d.roots_used.is_empty());
    assert_eq!(d.number(0), UNREACHED);
    let lists: Vec<Vec<u32>> = (0..64u32).map(|i| vec![(i + 1) % 64]).collect();
    assert_eq!(Csr::from_lists(&lists).nodes(), 64);
    let d = run_late(&lists, &[1; 64], &[64, 0, 70], &[64, 3]);
    assert_eq!(d.roots_used, vec![0]);
    assert_eq!(d.reachable(), 64);
    assert_eq!(d.retained(0), 64);
    assert_eq!(d.idom(63), 62);
}

/// Late roots behind gates: one opens when its gate is reached, also by a late root of an
/// earlier round; one whose gate nothing reaches, or whose gate is no node, stays shut.
#[test]
fn gated_late_roots() {
    // 0 -> 1; 2 -> 6; 3 -> 4; 5, 7 alone.
    let lists = vec![
        vec![1],
        vec![],
        vec![6],
        vec![4],
        vec![],
        vec![],
        vec![],
        vec![],
    ];
    let g = Csr::from_lists(&lists);
    // 5's gate (6) is reached only once 2 is a root, in the round after it.
    let late = [(5, 6), (3, 4), (7, 99), (2, 1)];
    let d = finish(prepare_gated(&g, &[0], &late), |v| 1 << v, 1);
    assert_eq!(d.roots_used, vec![0, 2, 5]);
    assert_eq!(d.idom(1), 0);
    assert_eq!(d.idom(2), SUPER);
    assert_eq!(d.idom(6), 2);
    assert_eq!(d.idom(5), SUPER);
    for v in [3, 4, 7] {
        assert_eq!(d.idom(v), UNREACHED, "node {v}");
        assert_eq!(d.retained(v), 0);
    }
    assert_eq!(d.retained(2), (1 << 2) + (1 << 6));
    assert_eq!(d.reachable(), 5);
}

/// The retained sizes summed in two ranges side by side (see [`subtree_split`]), on a graph
/// shaped like the 10 M-object bench dump's middle: a root holding a table of short chains,
/// each chain's middle pointing back at the table and its end at the chain before's end. A chain
/// alone offers no split (every vertex's parent is the one before it).
#[test]
fn retained_sums_split_at_a_subtree() {
    let chains = 40u32;
    let head = |c: u32| 2 + 3 * c;
    let mut edges = vec![(0, 1)];
    for c in 0..chains {
        let h = head(c);
        edges.extend([(1, h), (h, h + 1), (h + 1, h + 2), (h + 1, 1)]);
        if c > 0 {
            edges.push((h + 2, head(c - 1) + 2));
        }
    }
    let n = head(chains) as usize;
    let lists = lists_of(n, edges);
    let sizes: Vec<u64> = (0..n as u64).map(|v| 1 + v % 7).collect();
    let p = prepare(&Csr::from_lists(&lists), &[0], &[]);
    let (a, b) = subtree_split(&p.parent).expect("a split near the middle");
    assert!(p.parent[b] < a as u32 && a < b && b < p.count, "{a} {b}");
    assert!(4 * ((b - a).max(p.count - b) + a) <= 3 * p.count);
    check(&lists, &sizes, &[0], &[]).unwrap();

    let chain = lists_of(64, (0..63).map(|v| (v, v + 1)));
    let p = prepare(&Csr::from_lists(&chain), &[0], &[]);
    assert_eq!(subtree_split(&p.parent), None);
}

#[test]
fn long_chain_does_not_overflow_the_stack() {
    let n = 2_000_000u32;
    let lists: Vec<Vec<u32>> = (0..n)
        .map(|i| if i + 1 < n { vec![i + 1] } else { vec![] })
        .collect();
    let d = run(&lists, &vec![1; n as usize], &[0]);
    assert_eq!(d.retained(0), n as u64);
    assert_eq!(d.retained(n - 1), 1);
    assert_eq!(d.idom(n - 1), n - 2);
}

/// Checks [`compute`] (and its variants, see [`run_late`]) against brute force: the
/// retained size of v is the size of what becomes unreachable once v is removed; the
/// immediate dominator is consistent with that.
fn check(
    lists: &[Vec<u32>],
    sizes: &[u64],
    roots: &[u32],
    late: &[u32],
) -> Result<(), TestCaseError> {
    let n = lists.len();
    let d = run_late(lists, sizes, roots, late);
    // The scan by number agrees with the answers by node; dominators come first.
    prop_assert_eq!(d.reachable() as usize + 1, d.len());
    for k in 1..d.len() as u32 {
        let v = d.node_at(k);
        prop_assert_eq!(d.number(v), k);
        prop_assert!(d.idom_at(k) < k);
        let want = match d.idom_at(k) {
            0 => SUPER,
            i => d.node_at(i),
        };
        prop_assert_eq!(d.idom(v), want);
        prop_assert_eq!(d.retained(v), d.retained_at(k));
    }
    // The super-root's children: the roots, then the late ones nothing before reached.
    let mut used = roots.to_vec();
    for &r in late {
        if !reach(lists, &used, None)[r as usize] {
            used.push(r);
        }
    }
    let all = reach(lists, &used, None);
    // What stays reachable without each node.
    let cut: Vec<Vec<bool>> = (0..n as u32)
        .map(|a| reach(lists, &used, Some(a)))
        .collect();
    let dominates = |a: u32, b: u32| a == b || !cut[a as usize][b as usize];
    for v in 0..n as u32 {
        if !all[v as usize] {
            prop_assert_eq!(d.retained(v), 0);
            prop_assert_eq!(d.idom(v), UNREACHED);
            continue;
        }
        let without = &cut[v as usize];
        let want: u64 = (0..n)
            .filter(|&u| all[u] && !without[u])
            .map(|u| sizes[u])
            .sum();
        prop_assert_eq!(d.retained(v), want, "node {}", v);
        // idom(v) dominates v, and every other dominator of v dominates idom(v) (none
        // does if it is the super-root).
        let i = d.idom(v);
        prop_assert!(i != v);
        if i != SUPER {
            prop_assert!(dominates(i, v), "idom {} of {}", i, v);
        }
        for u in 0..n as u32 {
            if u != v && all[u as usize] && dominates(u, v) {
                prop_assert!(
                    i != SUPER && dominates(u, i),
                    "{} dominates {} above {}",
                    u,
                    v,
                    i
                );
            }
        }
    }
    Ok(())
}

/// Lists of `n` nodes from edges `(a, b)`, those with an end past `n` left out.
fn lists_of(n: usize, edges: impl IntoIterator<Item = (u32, u32)>) -> Vec<Vec<u32>> {
    let mut lists = vec![Vec::new(); n];
    for (a, b) in edges {
        if (a as usize) < n && (b as usize) < n {
            lists[a as usize].push(b);
        }
    }
    lists
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn retained_equals_brute_force(
        n in 1usize..24,
        raw_edges in proptest::collection::vec((0u32..24, 0u32..24), 0..60),
        raw_roots in proptest::collection::vec(0u32..24, 1..4),
        raw_late in proptest::collection::vec(0u32..24, 0..3),
        sizes in proptest::collection::vec(1u64..1000, 24),
    ) {
        let lists = lists_of(n, raw_edges);
        let roots: Vec<u32> = raw_roots.into_iter().filter(|&r| (r as usize) < n).collect();
        let late: Vec<u32> = raw_late.into_iter().filter(|&r| (r as usize) < n).collect();
        check(&lists, &sizes[..n], &roots, &late)?;
    }

    /// Long predecessor lists, as class objects have in a heap: many edges into a few
    /// nodes, within one root's tree, so that a target's first records often leave its
    /// semi-dominator above the super-root and the rest are read again or sorted.
    #[test]
    fn long_lists_equal_brute_force(
        n in 2usize..48,
        raw_edges in proptest::collection::vec((0u32..48, 0u32..48), 0..80),
        into_few in proptest::collection::vec((0u32..48, 0u32..6), 0..160),
        root in 0u32..48,
        sizes in proptest::collection::vec(1u64..1000, 48),
    ) {
        let lists = lists_of(n, raw_edges.into_iter().chain(into_few));
        let root = root % n as u32;
        check(&lists, &sizes[..n], &[root], &[])?;
    }

    /// Graphs of 64 nodes and more, so that the per-vertex bits (flags, words, listed
    /// targets) take more than one word and the numbers past 64 have words of their own,
    /// with many edges into a few nodes past 64 for long lists there.
    #[test]
    fn wide_graphs_equal_brute_force(
        n in 64usize..150,
        raw_edges in proptest::collection::vec((0u32..150, 0u32..150), 0..300),
        into_few in proptest::collection::vec((0u32..150, 64u32..72), 0..120),
        raw_roots in proptest::collection::vec(0u32..150, 1..4),
        raw_late in proptest::collection::vec(0u32..150, 0..3),
        sizes in proptest::collection::vec(1u64..1000, 150),
    ) {
        let lists = lists_of(n, raw_edges.into_iter().chain(into_few));
        let roots: Vec<u32> = raw_roots.into_iter().map(|r| r % n as u32).collect();
        let late: Vec<u32> = raw_late.into_iter().map(|r| r % n as u32).collect();
        check(&lists, &sizes[..n], &roots, &late)?;
    }
}
