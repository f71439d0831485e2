//! The tests of [`super`] (the allocator, maps and windows).

use super::*;
use std::io::Write;

/// Whether this kernel faults pages in on request (`MADV_POPULATE_WRITE`), asked of a
/// mapping of its own without [`prefault`].
pub(crate) fn kernel_populates() -> bool {
    let m = Fresh::new(1);
    // SAFETY: the advice over the one page of a mapping this function owns.
    #[allow(unsafe_code)]
    let r = unsafe { libc::madvise(m.0 as *mut libc::c_void, m.1, libc::MADV_POPULATE_WRITE) };
    r == 0
}

/// A fresh anonymous mapping of `pages` pages, none of them touched (the allocator's own,
/// advised not to be huge pages); unmapped on drop.
pub(crate) struct Fresh(pub *mut u8, pub usize);
impl Fresh {
    pub(crate) fn new(pages: usize) -> Fresh {
        let len = pages * page_size();
        let p = map_block(len, false);
        assert!(!p.is_null(), "mmap: {}", io::Error::last_os_error());
        Fresh(p, len)
    }
}
impl Drop for Fresh {
    fn drop(&mut self) {
        unmap_block(self.0, self.1);
    }
}

/// Which pages of `len` bytes at `p` are in memory ([`super::resident`]).
pub(crate) fn resident(p: *const u8, len: usize) -> Vec<bool> {
    super::resident(p, len).expect("mincore")
}

/// `prefault` brings in the whole pages inside its slice, and neither the partial pages at
/// its ends nor any page beyond; nothing for a slice within one page.
#[test]
fn prefault_brings_in_the_whole_pages_inside_a_slice_and_no_others() {
    let page = page_size();
    let m = Fresh::new(16);
    assert!(resident(m.0, m.1).iter().all(|&r| !r));
    let within = |from: usize, len: usize| {
        // SAFETY: `from..from + len` lies inside the mapping, which nothing else uses.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(m.0.add(from).cast::<std::mem::MaybeUninit<u8>>(), len)
        }
    };
    assert!(!prefault(within(page + 1, page - 2)));
    assert!(resident(m.0, m.1).iter().all(|&r| !r));
    let has = kernel_populates();
    assert_eq!(prefault(within(page / 2, 9 * page + 100)), has);
    if !has {
        eprintln!("no MADV_POPULATE_WRITE on this kernel: nothing to check");
        return;
    }
    let want: Vec<bool> = (0..16).map(|i| (1..=8).contains(&i)).collect();
    assert_eq!(resident(m.0, m.1), want);
    // Whole pages exactly: from a page boundary to one.
    assert!(prefault(within(12 * page, 2 * page)));
    let want: Vec<bool> = (0..16)
        .map(|i| (1..=8).contains(&i) || i == 12 || i == 13)
        .collect();
    assert_eq!(resident(m.0, m.1), want);
}

#[test]
fn a_failed_allocation_s_line_names_its_size() {
    let mut b = [0u8; 128];
    let n = oom_line(1_234_567, &mut b);
    assert_eq!(
        std::str::from_utf8(&b[..n]).unwrap(),
        "oomguard: memory allocation of 1234567 bytes failed (over the process's data limit)\n"
    );
    let n = oom_line(0, &mut b);
    assert!(std::str::from_utf8(&b[..n])
        .unwrap()
        .contains(" of 0 bytes"));
    let n = oom_line(usize::MAX, &mut b);
    assert!(n <= b.len() && b[..n].ends_with(b"limit)\n"));
}

#[test]
fn windows_read_the_bytes_of_their_range() {
    let mut f = tempfile::tempfile().unwrap();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
    f.write_all(&data).unwrap();
    for (off, len) in [
        (0, 20_000),
        (1, 4095),
        (4096, 8192),
        (12_345, 7_655),
        (19_999, 1),
        (7, 0),
    ] {
        let w = Window::map(&f, off as u64, len).unwrap();
        assert_eq!(w.bytes(), &data[off..off + len], "{off} {len}");
    }
    assert!(Window::map(&f, 19_000, 1_001).is_err());
    assert!(Window::map(&f, u64::MAX, 2).is_err());
}

/// A file just written is in the page cache; dropped, it is not; a page read is again.
/// (Beside the workspace's build: a temporary directory may be a tmpfs, which keeps every
/// page.)
#[test]
fn a_dropped_file_leaves_the_page_cache_until_it_is_read() {
    use std::os::unix::fs::FileExt;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target");
    std::fs::create_dir_all(root).unwrap();
    let dir = tempfile::tempdir_in(root).unwrap();
    let len = 4 << 20;
    let mut f = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(dir.path().join("cold"))
        .unwrap();
    f.write_all(&vec![0x5a; len + 100]).unwrap();
    assert_eq!(cached_bytes(&f, len).unwrap(), len);
    assert_eq!(cached_bytes(&f, len + 100).unwrap(), len + 100);
    drop_cached(&f).unwrap();
    let left = cached_bytes(&f, len).unwrap();
    assert!(
        left < 64 << 10,
        "{left} bytes stay cached: the file system keeps them"
    );
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, len as u64 / 2).unwrap();
    assert_eq!(b[0], 0x5a);
    assert!(
        cached_bytes(&f, len).unwrap() > left,
        "the page read is cached"
    );
    assert_eq!(cached_bytes(&f, 0).unwrap(), 0);
}

#[test]
fn a_populated_window_has_its_pages_mapped_before_they_are_read() {
    let mut f = tempfile::tempfile().unwrap();
    let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 253) as u8).collect();
    f.write_all(&data).unwrap();
    let rss = |w: &Window| crate::smaps::kb(w.bytes().as_ptr() as usize, "Rss:").unwrap();
    let lazy = Window::map(&f, 4096, 512 << 10).unwrap();
    assert_eq!(rss(&lazy), 0, "a plain window maps pages as they are read");
    let w = Window::map_populated(&f, 4096, 512 << 10).unwrap();
    assert_eq!(
        rss(&w),
        512,
        "every page of a populated window is mapped at once"
    );
    assert_eq!(w.bytes(), &data[4096..4096 + (512 << 10)]);
    assert!(Window::map_populated(&f, 1 << 20, 1).is_err());
}

/// The kernel area (/proc/self/smaps) holding `addr`: its bounds and its `VmFlags`.
fn area_of(addr: usize) -> Option<(usize, usize, String)> {
    let (lo, hi, lines) = crate::smaps::area_of(addr)?;
    let flags = lines.iter().find_map(|l| l.strip_prefix("VmFlags:"))?;
    Some((lo, hi, flags.to_string()))
}

fn thp() -> bool {
    std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists()
}

/// A large block from [`HugePageAlloc`] holds its data, and its mapping carries the advice
/// asked for (`hg` or `nh` in /proc/self/smaps), where the kernel has transparent huge pages.
#[test]
fn huge_page_alloc_advises_large_blocks() {
    use std::alloc::{GlobalAlloc, Layout};
    for (huge, flag) in [(true, "hg"), (false, "nh")] {
        let a = HugePageAlloc::with_huge_pages(huge);
        assert_eq!(a.huge_pages(), huge);
        let layout = Layout::from_size_align(8 << 20, 16).unwrap();
        // SAFETY: a non-zero layout; the block is written within bounds and freed with it.
        #[allow(unsafe_code)]
        let p = unsafe { a.alloc_zeroed(layout) };
        assert!(!p.is_null());
        // SAFETY: the block `alloc_zeroed` just gave, non-null, `layout.size()` bytes long.
        #[allow(unsafe_code)]
        let block = unsafe { std::slice::from_raw_parts_mut(p, layout.size()) };
        assert!(block.iter().all(|&b| b == 0));
        block[12_345] = 7;
        if thp() {
            let (_, _, flags) =
                area_of(p as usize + (4 << 20)).expect("the block's mapping is in smaps");
            assert!(
                flags.split_whitespace().any(|f| f == flag),
                "huge {huge}: VmFlags:{flags}"
            );
        }
        assert_eq!(block[12_345], 7);
        // SAFETY: allocated above with this layout.
        #[allow(unsafe_code)]
        unsafe {
            a.dealloc(p, layout)
        };
        // A freed block is kept for reuse only where blocks are not huge pages.
        let kept: usize = a.spare().kept();
        assert_eq!(kept, if huge { 0 } else { 8 << 20 }, "huge {huge}");
        a.release_kept(1);
    }
}

/// Kept blocks given back on threads leave the allocator: none is kept, and the next block is
/// a new mapping, zeroed (a block cut from a kept one would hold the old bytes: `alloc` does
/// not zero). (Whether their addresses are unmapped is not asked: the tests run side by side,
/// and another may map the range again at once; CI once found the 8 MiB + 4 KiB block's
/// address mapped again right after the release.)
#[test]
fn kept_blocks_released_on_threads_leave_the_allocator() {
    use std::alloc::{GlobalAlloc, Layout};
    for threads in [1, 2, 3, 9] {
        let a = HugePageAlloc::with_huge_pages(false);
        let sizes = [3 << 20, 5 << 20, (8 << 20) + 4096];
        let mut at = Vec::new();
        for &size in &sizes {
            let layout = Layout::from_size_align(size, 16).unwrap();
            // SAFETY: a non-zero layout; the block is written within bounds and freed with
            // it.
            #[allow(unsafe_code)]
            unsafe {
                let p = a.alloc(layout);
                assert!(!p.is_null());
                std::ptr::write_bytes(p, 0xa5, size);
                at.push(p as usize);
            }
        }
        for (&p, &size) in at.iter().zip(&sizes) {
            // SAFETY: allocated above with this layout.
            #[allow(unsafe_code)]
            unsafe {
                a.dealloc(p as *mut u8, Layout::from_size_align(size, 16).unwrap())
            };
        }
        let kept: usize = a.spare().kept();
        assert_eq!(kept, sizes.iter().map(|&s| mapping_len(s)).sum::<usize>());
        a.release_kept(threads);
        assert_eq!(a.spare().kept(), 0, "{threads} threads");
        let layout = Layout::from_size_align(4 << 20, 16).unwrap();
        // SAFETY: a non-zero layout; read within bounds, then freed with it.
        #[allow(unsafe_code)]
        unsafe {
            let p = a.alloc(layout);
            assert!(std::slice::from_raw_parts(p, layout.size())
                .iter()
                .all(|&b| b == 0));
            a.dealloc(p, layout);
        }
        a.release_kept(threads);
    }
}

proptest::proptest! {
    /// The shares cover each block once, in order, in whole pages (of 4 or 16 KiB); there are
    /// at most as many as threads, and none holds a page more than its even part rounded up.
    #[test]
    fn shares_cover_the_blocks_once_in_about_even_parts(
        pages in proptest::collection::vec(1usize..40, 0..6),
        threads in 1usize..5,
        page in proptest::sample::select(vec![4096usize, 16384]),
    ) {
        let blocks: Vec<(usize, usize)> = pages
            .iter()
            .enumerate()
            .map(|(i, &n)| ((i + 1) << 30, n * page))
            .collect();
        let got = shares(&blocks, threads, page);
        proptest::prop_assert!(got.len() <= threads);
        let flat: Vec<(usize, usize)> = got.iter().flatten().copied().collect();
        proptest::prop_assert!(flat.iter().all(|&(p, n)| p % page == 0 && n % page == 0 && n > 0));
        // Rejoined, the ranges are the blocks.
        let mut joined: Vec<(usize, usize)> = Vec::new();
        for (p, n) in flat {
            match joined.last_mut() {
                Some(l) if l.0 + l.1 == p => l.1 += n,
                _ => joined.push((p, n)),
            }
        }
        proptest::prop_assert_eq!(joined, blocks.clone());
        let total: usize = pages.iter().sum();
        let most = total.div_ceil(threads).max(1) * page;
        for s in &got {
            proptest::prop_assert!(s.iter().map(|r| r.1).sum::<usize>() <= most);
        }
    }
}

/// Free page reporting is read from a balloon device's feature bits (bit 5), in a tree laid
/// out like sysfs; anything else (no driver, no device, no such file, the bit clear) is no.
#[test]
fn free_page_reporting_is_feature_bit_five() {
    let root = tempfile::tempdir().unwrap();
    let driver = root.path().join("virtio_balloon");
    assert!(!free_pages_reported(&driver), "no driver directory");
    std::fs::create_dir(&driver).unwrap();
    std::fs::write(driver.join("bind"), "").unwrap();
    assert!(!free_pages_reported(&driver), "no device");
    let dev = driver.join("virtio0");
    std::fs::create_dir(&dev).unwrap();
    assert!(!free_pages_reported(&driver), "no features file");
    // This project's VM (2026-11-24): stats queue, deflate on OOM, reporting, bit 7.
    let ours = format!("{:0<128}\n", "011001010000000000000000000000001");
    std::fs::write(dev.join("features"), &ours).unwrap();
    assert!(free_pages_reported(&driver));
    let mut clear = ours.into_bytes();
    clear[5] = b'0';
    std::fs::write(dev.join("features"), &clear).unwrap();
    assert!(!free_pages_reported(&driver), "bit 5 clear");
    std::fs::write(dev.join("features"), "01100").unwrap();
    assert!(!free_pages_reported(&driver), "too few bits");
    // A second device with the bit set is enough; other entries are not devices.
    std::fs::create_dir(driver.join("module")).unwrap();
    std::fs::write(driver.join("module").join("features"), "000001").unwrap();
    assert!(!free_pages_reported(&driver), "not a device");
    std::fs::create_dir(driver.join("virtio3")).unwrap();
    std::fs::write(driver.join("virtio3").join("features"), "000001").unwrap();
    assert!(free_pages_reported(&driver));
}

/// A block that grows and shrinks across and above the 2 MiB threshold keeps its bytes at
/// every step, and above it is one kernel area of its own, advised whole. (With advice on
/// part of a glibc block, the area was split and `mremap` failed, so every growth copied.)
#[test]
fn huge_page_alloc_resizes_blocks_keeping_their_bytes() {
    use std::alloc::{GlobalAlloc, Layout};
    let a = HugePageAlloc::with_huge_pages(true);
    let byte = |i: usize| (i % 251) as u8;
    let sizes = [1 << 20, 3 << 20, 64 << 20, (5 << 20) + 123, 100 << 10];
    let mut layout = Layout::from_size_align(sizes[0], 8).unwrap();
    // SAFETY: a non-zero layout; every block is used within its size and freed with its
    // layout.
    #[allow(unsafe_code)]
    let mut p = unsafe { a.alloc(layout) };
    assert!(!p.is_null());
    // SAFETY: `p` is the live block of `layout.size()` bytes just allocated.
    #[allow(unsafe_code)]
    unsafe { std::slice::from_raw_parts_mut(p, layout.size()) }
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = byte(i));
    for &size in &sizes[1..] {
        // SAFETY: `p` is live and was allocated with `layout`; `size` is non-zero.
        #[allow(unsafe_code)]
        let q = unsafe { a.realloc(p, layout, size) };
        assert!(!q.is_null(), "realloc to {size}");
        let kept = layout.size().min(size);
        // SAFETY: `q` is the live block `realloc` just gave, `size` bytes long.
        #[allow(unsafe_code)]
        let block = unsafe { std::slice::from_raw_parts_mut(q, size) };
        assert!(
            block[..kept].iter().enumerate().all(|(i, &b)| b == byte(i)),
            "bytes lost resizing {} -> {size}",
            layout.size()
        );
        for (i, b) in block.iter_mut().enumerate().skip(kept) {
            *b = byte(i);
        }
        if size >= HUGE_MIN && cfg!(target_os = "linux") {
            let (lo, hi, flags) = area_of(q as usize).expect("the block is in smaps");
            assert_eq!(
                lo, q as usize,
                "a block of {size} bytes starts its own area"
            );
            assert!(hi - lo >= size, "the area holds the whole block");
            if thp() {
                assert!(
                    flags.split_whitespace().any(|f| f == "hg"),
                    "VmFlags:{flags}"
                );
            }
        }
        p = q;
        layout = Layout::from_size_align(size, 8).unwrap();
    }
    // SAFETY: `p` is live and was allocated with `layout`; it is not used again.
    #[allow(unsafe_code)]
    unsafe {
        a.dealloc(p, layout)
    };
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Any sequence of large allocations, zeroed or not, resizes and frees keeps every live
    /// block's bytes (blocks cut from kept ones do not overlap), gives zeroed blocks as
    /// zeros, and never holds more mapped memory than the live blocks did at some moment.
    #[test]
    fn kept_blocks_are_reused_without_overlap(
        ops in proptest::collection::vec((0u8..4, 0usize..6, 1usize..(10 << 8)), 1..40),
    ) {
        use std::alloc::{GlobalAlloc, Layout};
        let a = HugePageAlloc::with_huge_pages(false);
        // Live blocks: (pointer, size, fill byte).
        let mut live: Vec<(*mut u8, usize, u8)> = Vec::new();
        let (mut most, mut fill) = (0usize, 0u8);
        let lay = |size: usize| Layout::from_size_align(size, 8).unwrap();
        let total = |live: &[(*mut u8, usize, u8)]| -> usize {
            live.iter().map(|b| mapping_len(b.1)).sum()
        };
        // A block's bytes are its fill byte, spot-checked every 4 KiB and at its ends.
        let intact = |b: &(*mut u8, usize, u8)| {
            // SAFETY: `b` is a live block of `b.1` bytes from this allocator (removed from
            // `live` when freed).
            #[allow(unsafe_code)]
            let s = unsafe { std::slice::from_raw_parts(b.0, b.1) };
            s.iter().step_by(4093).chain(s.last()).all(|&x| x == b.2)
        };
        for (op, which, kb) in ops {
            // 2 MiB to 12 MiB, not always whole pages.
            let size = (2 << 20) + kb * 4096 - (kb % 3) * 100;
            match op {
                0 | 1 => {
                    // SAFETY: a non-zero layout; the block is used within its size.
                    #[allow(unsafe_code)]
                    let p = unsafe {
                        if op == 0 { a.alloc(lay(size)) } else { a.alloc_zeroed(lay(size)) }
                    };
                    proptest::prop_assert!(!p.is_null());
                    // SAFETY: the block `alloc` just gave, non-null, `size` bytes long.
                    #[allow(unsafe_code)]
                    let s = unsafe { std::slice::from_raw_parts_mut(p, size) };
                    if op == 1 {
                        proptest::prop_assert!(s.iter().all(|&x| x == 0), "zeroed block");
                    }
                    fill = fill.wrapping_add(1).max(1);
                    s.fill(fill);
                    live.push((p, size, fill));
                }
                2 if !live.is_empty() => {
                    let (p, old, f) = live.swap_remove(which % live.len());
                    // SAFETY: a live block, resized with the layout it was made for.
                    #[allow(unsafe_code)]
                    let q = unsafe { a.realloc(p, lay(old), size) };
                    proptest::prop_assert!(!q.is_null());
                    // SAFETY: the block `realloc` just gave, non-null, `size` bytes long.
                    #[allow(unsafe_code)]
                    let s = unsafe { std::slice::from_raw_parts_mut(q, size) };
                    proptest::prop_assert!(s[..old.min(size)].iter().all(|&x| x == f));
                    s.fill(f);
                    live.push((q, size, f));
                }
                _ if !live.is_empty() => {
                    let (p, size, _) = live.swap_remove(which % live.len());
                    // SAFETY: a live block, freed with the layout it was made for.
                    #[allow(unsafe_code)]
                    unsafe { a.dealloc(p, lay(size)) };
                }
                _ => {}
            }
            most = most.max(total(&live));
            let spare = a.spare();
            let kept = spare.kept();
            proptest::prop_assert!(
                total(&live) + kept <= most,
                "{} live + {kept} kept > {most}", total(&live)
            );
            // The bookkeeping matches: `live` is the live blocks' mappings, and `peak` the
            // most they have been, although blocks cut from kept ones do not raise it.
            proptest::prop_assert_eq!(spare.live, total(&live));
            proptest::prop_assert_eq!(spare.peak, most);
            drop(spare);
            for b in &live {
                proptest::prop_assert!(intact(b), "a block's bytes changed");
            }
        }
        for (p, size, _) in live {
            // SAFETY: live blocks, freed with their layouts.
            #[allow(unsafe_code)]
            unsafe { a.dealloc(p, lay(size)) };
        }
        a.release_kept(1);
    }
}

/// The environment decides huge pages when it says `on` or `off`; else free page
/// reporting does (asked only then).
#[test]
fn huge_pages_are_what_the_environment_says_else_where_free_pages_stay() {
    let never = || -> bool { panic!("the environment decided") };
    assert!(pay(Some("on"), never));
    assert!(!pay(Some("off"), never));
    for env in [None, Some(""), Some("yes")] {
        assert!(pay(env, || false), "{env:?}, not reported");
        assert!(!pay(env, || true), "{env:?}, reported");
    }
    assert!(!HugePageAlloc::with_huge_pages(false).huge_pages());
    assert!(HugePageAlloc::with_huge_pages(true).huge_pages());
}

/// A block is a mapping of its own from 2 MiB on, at an alignment a page gives.
#[test]
fn blocks_from_two_mib_at_page_alignment_are_mapped() {
    assert!(!mapped_block(HUGE_MIN - 1, 8));
    assert!(mapped_block(HUGE_MIN, 8));
    assert!(mapped_block(HUGE_MIN, MAP_ALIGN));
    assert!(!mapped_block(HUGE_MIN, MAP_ALIGN * 2));
}

/// A mapped file reads as its bytes; an empty one as none, without a map.
#[test]
fn a_mapped_file_reads_as_its_bytes() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f");
    std::fs::write(&p, b"JAVA PROFILE").unwrap();
    assert_eq!(Mapped::open(&p).unwrap().bytes(), b"JAVA PROFILE");
    std::fs::write(&p, b"").unwrap();
    let m = Mapped::open(&p).unwrap();
    assert!(m.map.is_none() && m.bytes().is_empty());
    assert!(Mapped::open(&d.path().join("missing")).is_err());
}

/// A freed block is kept; the next smaller one is cut from its start and the rest stays
/// kept, until nothing is left of it; `release` gives every kept block back.
#[test]
fn a_kept_block_is_cut_from_its_start_until_used_up() {
    use std::alloc::{GlobalAlloc, Layout};
    let a = HugePageAlloc::with_huge_pages(false);
    let lay = |mib: usize| Layout::from_size_align(mib << 20, 8).unwrap();
    // SAFETY: non-zero layouts; blocks freed with the layouts they were made for and not
    // used after.
    #[allow(unsafe_code)]
    unsafe {
        let p = a.alloc(lay(8));
        assert!(!p.is_null());
        a.dealloc(p, lay(8));
        assert_eq!(a.spare().kept(), 8 << 20);
        let q = a.alloc(lay(2));
        assert_eq!((q, a.spare().kept()), (p, 6 << 20));
        let r = a.alloc(lay(6));
        assert_eq!((r, a.spare().kept()), (p.add(2 << 20), 0));
        a.dealloc(q, lay(2));
        a.dealloc(r, lay(6));
        assert_eq!(a.spare().kept(), 8 << 20);
        a.release_kept(1);
        assert_eq!(a.spare().kept(), 0);
    }
}
