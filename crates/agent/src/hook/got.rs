//! Patching the global offset table of one loaded library.
//!
//! [`patch_library`] finds the library with `dl_iterate_phdr` (by file name), reads its
//! `PT_DYNAMIC`, walks its `DT_JMPREL`, `DT_RELA`/`DT_REL` and Android's packed
//! `DT_ANDROID_RELA`/`DT_ANDROID_REL` tables ([`super::elf::for_packed_relocs`]) for `JUMP_SLOT`
//! and `GLOB_DAT` relocations whose symbol is one of the named imports, and stores the replacement
//! in each such slot. [`Patched::unpatch`] stores the original values back.
//!
//! Other hook libraries (bytehook, xhook) patch the same GOT pages from their own threads, with
//! their own `mprotect` windows. So each page is made writable right before our stores to it,
//! whatever its protection looked like (another hooker may be holding it writable at that moment,
//! or close it a moment later), all our slots of that page are stored in that one window, and the
//! page is then given its proper protection, derived from the library's program headers (read-only
//! inside `PT_GNU_RELRO`, the `PT_LOAD` segment's flags elsewhere), never a protection read
//! earlier. What remains is the window itself: a hooker that closes the page between our `mprotect`
//! and our store (a few instructions) would make the store fault; nothing short of a lock shared by
//! all hookers removes that.
//!
//! Invariants:
//! - Every slot store is a single aligned atomic pointer store, so a thread calling through the
//!   slot at the same moment sees the old or the new function, never a torn pointer.
//! - The function a hook must forward to ([`Patched::real`]) is the value the slot held, unless
//!   that value points back into the library itself (a lazy-binding PLT stub, which would overwrite
//!   our hook when called): then it is resolved with `dlsym(RTLD_DEFAULT)`.
//! - Nothing here runs inside a hook: it allocates freely.

use super::elf::*;
use super::Error;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One import to redirect.
#[derive(Clone, Copy, Debug)]
pub struct Import {
    /// The imported symbol's name, e.g. `"write"`.
    pub name: &'static str,
    /// The address of the replacement function.
    pub replacement: usize,
}

/// One GOT slot we changed.
#[derive(Clone, Debug)]
pub struct PatchedSlot {
    pub symbol: &'static str,
    /// Address of the slot.
    pub addr: usize,
    /// What the slot held before.
    pub original: usize,
    pub replacement: usize,
    /// `true` for `JUMP_SLOT`, `false` for `GLOB_DAT`.
    pub jump_slot: bool,
    /// The protection the slot's page is given back after a store.
    pub page_prot: libc::c_int,
}

/// A library whose slots are patched. Dropping it does not unpatch: call [`Patched::unpatch`].
#[derive(Debug)]
pub struct Patched {
    /// The path the loader knows the library by.
    pub library: String,
    pub slots: Vec<PatchedSlot>,
    /// The function each import must forward to, by import name.
    pub reals: Vec<(&'static str, usize)>,
}

impl Patched {
    /// The real function behind `name`, if `name` was patched.
    pub fn real(&self, name: &str) -> Option<usize> {
        self.reals.iter().find(|(n, _)| *n == name).map(|&(_, a)| a)
    }

    /// Store the original values back. A slot that no longer holds our replacement (someone
    /// hooked it after us) is left alone and reported.
    pub fn unpatch(self) -> Result<(), Error> {
        let mut changed = Vec::new();
        let mut stores = Vec::new();
        for s in &self.slots {
            // SAFETY: `s.addr` is a GOT slot of a library that is still loaded (we never unpatch a
            // library after dlclose: libraries we hook are the VM's, never unloaded),
            // pointer-aligned.
            let now = unsafe { (*(s.addr as *const AtomicUsize)).load(Ordering::SeqCst) };
            if now != s.replacement {
                changed.push(s.symbol);
                continue;
            }
            stores.push((s.addr, s.original, s.page_prot));
        }
        store_slots(&stores)?;
        if changed.is_empty() {
            Ok(())
        } else {
            Err(Error::SlotChanged {
                library: self.library,
                symbols: changed.join(","),
            })
        }
    }
}

/// The libraries currently loaded, as the loader names them.
pub fn loaded_libraries() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    iterate(|info| {
        out.push(info_name(info));
        false
    });
    out
}

/// The path and load bias of the loaded library whose file name is `lib`.
pub fn find_loaded(lib: &str) -> Option<(String, usize)> {
    let mut out = None;
    iterate(|info| {
        let name = info_name(info);
        if base_name(&name) == lib {
            out = Some((name, info.dlpi_addr as usize));
            true
        } else {
            false
        }
    });
    out
}

/// The file name part of a path.
fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn info_name(info: &libc::dl_phdr_info) -> String {
    if info.dlpi_name.is_null() {
        return String::new();
    }
    // SAFETY: the loader gives a NUL-terminated name that lives while the library is loaded.
    unsafe { CStr::from_ptr(info.dlpi_name) }
        .to_string_lossy()
        .into_owned()
}

/// Call `f` for each loaded object until it returns `true`.
fn iterate<F: FnMut(&libc::dl_phdr_info) -> bool>(mut f: F) {
    unsafe extern "C" fn cb<F: FnMut(&libc::dl_phdr_info) -> bool>(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `&mut F` passed below, alive for the whole dl_iterate_phdr call;
        // `info` is valid for this callback. A panic must not unwind into the loader.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            let f = &mut *(data as *mut F);
            f(&*info)
        }));
        matches!(r, Ok(true)) as libc::c_int
    }
    // SAFETY: the callback only dereferences what the loader passes and our closure.
    unsafe {
        libc::dl_iterate_phdr(Some(cb::<F>), &mut f as *mut F as *mut libc::c_void);
    }
}

/// What we learn about a library while the loader lock is held.
struct Found {
    name: String,
    /// (slot address, symbol index in `imports`, jump slot?)
    slots: Vec<(usize, usize, bool)>,
    /// Range of the library's loadable segments in memory.
    lo: usize,
    hi: usize,
    /// Each loadable segment's range in memory and its protection.
    loads: Vec<(usize, usize, libc::c_int)>,
    /// The `PT_GNU_RELRO` range the loader made read-only, page-aligned.
    relro: Option<(usize, usize)>,
}

impl Found {
    /// The protection the loader gave the page starting at `start`.
    fn page_prot(&self, start: usize, page: usize) -> libc::c_int {
        let end = start + page;
        let mut prot = 0;
        for &(a, b, p) in &self.loads {
            if a < end && start < b {
                prot |= p;
            }
        }
        if let Some((a, b)) = self.relro {
            if start >= a && end <= b {
                prot &= !libc::PROT_WRITE;
            }
        }
        prot | libc::PROT_READ
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Redirect `imports` of the loaded library whose file name is `lib` (e.g. `"libjvm.so"`).
///
/// `on_real(name, address)` is called with the function each import must forward to before the
/// first slot of that import is changed, so a hook never runs before it knows where to forward.
pub fn patch_library(
    lib: &str,
    imports: &[Import],
    on_real: &mut dyn FnMut(&'static str, usize),
) -> Result<Patched, Error> {
    let mut found: Option<Result<Found, Error>> = None;
    iterate(|info| {
        let name = info_name(info);
        if base_name(&name) != lib {
            return false;
        }
        // SAFETY: `info` describes an object the loader holds mapped during this callback.
        found = Some(unsafe { scan(info, name, imports) });
        true
    });
    let found = found.ok_or_else(|| Error::NotLoaded(lib.to_string()))??;
    if found.slots.is_empty() {
        return Err(Error::NoImports {
            library: found.name,
            imports: imports.iter().map(|i| i.name).collect::<Vec<_>>().join(","),
        });
    }
    let mut patched = Patched {
        library: found.name.clone(),
        slots: Vec::new(),
        reals: Vec::new(),
    };
    let page = page_size();
    for &(addr, which, jump_slot) in &found.slots {
        let imp = imports[which];
        // SAFETY: `addr` is a pointer-aligned GOT slot inside the library's mapped RW/RELRO data.
        let original = unsafe { (*(addr as *const AtomicUsize)).load(Ordering::SeqCst) };
        if original == imp.replacement {
            continue; // already ours (patched twice)
        }
        if patched.real(imp.name).is_none() {
            let real = if original == 0 || (original >= found.lo && original < found.hi) {
                dlsym_default(imp.name).ok_or_else(|| Error::Unresolved(imp.name.to_string()))?
            } else {
                original
            };
            on_real(imp.name, real);
            patched.reals.push((imp.name, real));
        }
        patched.slots.push(PatchedSlot {
            symbol: imp.name,
            addr,
            original,
            replacement: imp.replacement,
            jump_slot,
            page_prot: found.page_prot(addr & !(page - 1), page),
        });
    }
    // Every real function is known before the first store (`on_real` above).
    let stores: Vec<_> = patched
        .slots
        .iter()
        .map(|s| (s.addr, s.replacement, s.page_prot))
        .collect();
    if let Err((done, e)) = store_slots_counted(&stores) {
        // Put back the pages we did patch; the rest were never changed.
        patched.slots.truncate(done);
        let _ = patched.unpatch();
        return Err(e);
    }
    Ok(patched)
}

fn dlsym_default(name: &str) -> Option<usize> {
    let c = CString::new(name).ok()?;
    // SAFETY: a valid C string; RTLD_DEFAULT searches the global scope.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) };
    (!p.is_null()).then_some(p as usize)
}

/// Read the dynamic section of a loaded object and list the slots of `imports`.
///
/// # Safety
/// `info` must describe an object that stays mapped for the duration of the call.
unsafe fn scan(
    info: &libc::dl_phdr_info,
    name: String,
    imports: &[Import],
) -> Result<Found, Error> {
    let bias = info.dlpi_addr as usize;
    // SAFETY: the caller's promise: `info` describes an object that stays mapped.
    let seg = unsafe { segments(info) };
    let (lo, hi) = (seg.lo, seg.hi);
    let dynamic = seg.dynamic.ok_or_else(|| Error::Malformed {
        library: name.clone(),
        what: "no PT_DYNAMIC segment".into(),
    })?;
    // d_ptr values are already relocated by glibc and are not by bionic (or glibc on some
    // arches): an address inside the mapped range is taken as is, anything else gets the bias.
    let addr = |v: usize| {
        if v >= lo && v < hi {
            v
        } else {
            v.wrapping_add(bias)
        }
    };
    // SAFETY: PT_DYNAMIC is part of the object, mapped readable for the whole call.
    let dt = unsafe { dynamic_entries(dynamic, addr) };
    if dt.strtab == 0 || dt.symtab == 0 {
        return Err(Error::Malformed {
            library: name,
            what: "no DT_STRTAB or DT_SYMTAB".into(),
        });
    }
    let mut f = SlotFinder {
        imports,
        bias,
        lo,
        hi,
        symtab: dt.symtab,
        strtab: dt.strtab,
        strsz: dt.strsz,
        slots: Vec::new(),
    };
    // SAFETY: the tables are those the object's own PT_DYNAMIC names, mapped for the call.
    unsafe {
        if dt.jmprel != 0 && dt.pltrel == DT_RELA as usize {
            f.walk_rela(dt.jmprel, dt.pltrelsz);
        }
        if dt.rela != 0 {
            f.walk_rela(dt.rela, dt.relasz);
        }
        if dt.jmprel != 0 && dt.pltrel == DT_REL as usize {
            f.walk_rel(dt.jmprel, dt.pltrelsz);
        }
        if dt.rel != 0 {
            f.walk_rel(dt.rel, dt.relsz);
        }
    }
    // Android's packed tables (bionic reads them instead of DT_RELA/DT_REL when present). DT_RELR
    // needs no reading: it holds only relative relocations, which never name a symbol.
    let packed = [
        (dt.aps_rela, dt.aps_relasz, true),
        (dt.aps_rel, dt.aps_relsz, false),
    ];
    for (base, size, is_rela) in packed {
        if base == 0 || size == 0 {
            continue;
        }
        if base < lo || base.checked_add(size).is_none_or(|e| e > hi) {
            return Err(Error::Malformed {
                library: name,
                what: format!(
                    "packed relocation table at {:#x}+{size} outside the library",
                    base.wrapping_sub(bias)
                ),
            });
        }
        // SAFETY: the table lies inside the library's loaded segments (checked above), which
        // stay mapped during this call; it is read-only data the loader does not change.
        let data = unsafe { std::slice::from_raw_parts(base as *const u8, size) };
        if let Err(why) = for_packed_relocs(data, is_rela, |off, info| {
            // SAFETY: the symbol and string tables are the object's own, mapped for the call.
            unsafe { f.consider(off as usize, info as Addr) }
        }) {
            return Err(Error::Malformed {
                library: name,
                what: format!(
                    "packed relocation table (DT_ANDROID_REL{}) at {:#x}: {why}",
                    if is_rela { "A" } else { "" },
                    base.wrapping_sub(bias)
                ),
            });
        }
    }
    let mut slots = f.slots;
    slots.sort_unstable();
    slots.dedup();
    Ok(Found {
        name,
        slots,
        lo,
        hi,
        loads: seg.loads,
        relro: seg.relro,
    })
}

/// What a loaded object's program headers say: the range of its loadable segments, each one's
/// pages and protection, where PT_DYNAMIC is, and the pages of PT_GNU_RELRO.
struct Segments {
    lo: usize,
    hi: usize,
    dynamic: Option<usize>,
    loads: Vec<(usize, usize, libc::c_int)>,
    relro: Option<(usize, usize)>,
}

/// Read the program headers of the object `info` describes.
///
/// # Safety
/// `info` must describe a loaded object (its program header table mapped).
unsafe fn segments(info: &libc::dl_phdr_info) -> Segments {
    let bias = info.dlpi_addr as usize;
    // SAFETY: the loader's program header table has `dlpi_phnum` entries.
    let phdrs: &[Phdr] =
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let mut seg = Segments {
        lo: usize::MAX,
        hi: 0,
        dynamic: None,
        loads: Vec::new(),
        relro: None,
    };
    let page = page_size();
    for p in phdrs {
        let (a, b) = (
            bias.wrapping_add(p.p_vaddr as usize),
            bias.wrapping_add((p.p_vaddr + p.p_memsz) as usize),
        );
        match p.p_type {
            PT_LOAD => {
                seg.lo = seg.lo.min(a);
                seg.hi = seg.hi.max(b);
                let f = p.p_flags;
                let prot = (if f & PF_R != 0 { libc::PROT_READ } else { 0 })
                    | (if f & PF_W != 0 { libc::PROT_WRITE } else { 0 })
                    | (if f & PF_X != 0 { libc::PROT_EXEC } else { 0 });
                seg.loads
                    .push((a & !(page - 1), (b + page - 1) & !(page - 1), prot));
            }
            PT_DYNAMIC => seg.dynamic = Some(a),
            // bionic protects whole pages up to the end of the segment rounded up
            // (`phdr_table_protect_gnu_relro`); glibc rounds the end down
            // (`_dl_protect_relro`), leaving a partial last page writable.
            PT_GNU_RELRO if cfg!(target_os = "android") => {
                seg.relro = Some((a & !(page - 1), (b + page - 1) & !(page - 1)))
            }
            PT_GNU_RELRO => seg.relro = Some((a & !(page - 1), b & !(page - 1))),
            _ => {}
        }
    }
    seg
}

/// The entries of a dynamic section that [`scan`] reads: the symbol and string tables, and the
/// relocation tables (plain, and Android's packed ones), as addresses (`d_ptr`, through `addr`)
/// or sizes (`d_val`); 0 where absent.
struct DynamicEntries {
    strtab: usize,
    strsz: usize,
    symtab: usize,
    jmprel: usize,
    pltrelsz: usize,
    /// DT_RELA or DT_REL: the kind of entries at `jmprel`.
    pltrel: usize,
    rela: usize,
    relasz: usize,
    rel: usize,
    relsz: usize,
    aps_rela: usize,
    aps_relasz: usize,
    aps_rel: usize,
    aps_relsz: usize,
}

/// Read the dynamic section at `dynamic` (up to DT_NULL, at most 4096 entries), mapping each
/// address through `addr`.
///
/// # Safety
/// `dynamic` must point at a mapped, readable array of `Dyn` that ends with DT_NULL.
unsafe fn dynamic_entries(dynamic: usize, addr: impl Fn(usize) -> usize) -> DynamicEntries {
    let mut dt = DynamicEntries {
        strtab: 0,
        strsz: 0,
        symtab: 0,
        jmprel: 0,
        pltrelsz: 0,
        pltrel: DT_RELA as usize,
        rela: 0,
        relasz: 0,
        rel: 0,
        relsz: 0,
        aps_rela: 0,
        aps_relasz: 0,
        aps_rel: 0,
        aps_relsz: 0,
    };
    let mut d = dynamic as *const Dyn;
    for _ in 0..4096 {
        // SAFETY: PT_DYNAMIC is an array of Dyn ending with DT_NULL, mapped readable.
        let e = unsafe { *d };
        match e.d_tag {
            DT_NULL => break,
            DT_STRTAB => dt.strtab = addr(e.d_val),
            DT_STRSZ => dt.strsz = e.d_val,
            DT_SYMTAB => dt.symtab = addr(e.d_val),
            DT_JMPREL => dt.jmprel = addr(e.d_val),
            DT_PLTRELSZ => dt.pltrelsz = e.d_val,
            DT_PLTREL => dt.pltrel = e.d_val,
            DT_RELA => dt.rela = addr(e.d_val),
            DT_RELASZ => dt.relasz = e.d_val,
            DT_REL => dt.rel = addr(e.d_val),
            DT_RELSZ => dt.relsz = e.d_val,
            DT_ANDROID_RELA => dt.aps_rela = addr(e.d_val),
            DT_ANDROID_RELASZ => dt.aps_relasz = e.d_val,
            DT_ANDROID_REL => dt.aps_rel = addr(e.d_val),
            DT_ANDROID_RELSZ => dt.aps_relsz = e.d_val,
            _ => {}
        }
        // SAFETY: still inside the table (we stop at DT_NULL).
        d = unsafe { d.add(1) };
    }
    dt
}

/// Gathers the slots of `imports` from relocation entries: a jump-slot or glob-data relocation
/// that names one of them, at an aligned address inside the object's loadable range.
struct SlotFinder<'a> {
    imports: &'a [Import],
    bias: usize,
    lo: usize,
    hi: usize,
    symtab: usize,
    strtab: usize,
    strsz: usize,
    /// (slot address, symbol index in `imports`, jump slot?)
    slots: Vec<(usize, usize, bool)>,
}

impl SlotFinder<'_> {
    /// One relocation entry: its offset and its info word.
    ///
    /// # Safety
    /// `symtab` and `strtab` must be the object's mapped DT_SYMTAB and DT_STRTAB, and `info`
    /// come from one of its own relocation entries.
    unsafe fn consider(&mut self, offset: usize, info: Addr) {
        let (jump, glob) = SLOT_RELOCS;
        let ty = r_type(info);
        if ty != jump && ty != glob {
            return;
        }
        let si = r_sym(info);
        if si == 0 {
            return;
        }
        // SAFETY: the symbol index comes from the library's own relocation, inside DT_SYMTAB.
        let sym = unsafe { *(self.symtab as *const Sym).add(si) };
        let off = sym.st_name as usize;
        if self.strsz != 0 && off >= self.strsz {
            return;
        }
        // SAFETY: st_name is an offset into DT_STRTAB, whose strings are NUL-terminated.
        let sname =
            unsafe { CStr::from_ptr((self.strtab + off) as *const libc::c_char) }.to_bytes();
        if let Some(i) = self.imports.iter().position(|i| i.name.as_bytes() == sname) {
            let slot = self.bias.wrapping_add(offset);
            if slot >= self.lo && slot < self.hi && slot % std::mem::size_of::<usize>() == 0 {
                self.slots.push((slot, i, ty == jump));
            }
        }
    }

    /// The RELA entries of `size` bytes at `base`.
    ///
    /// # Safety
    /// As for [`SlotFinder::consider`]; `base` must point at `size` bytes of the object's
    /// relocation entries named by its PT_DYNAMIC.
    unsafe fn walk_rela(&mut self, base: usize, size: usize) {
        let n = size / std::mem::size_of::<Rela>();
        for i in 0..n {
            // SAFETY: `base` points at `size` bytes of relocation entries named by PT_DYNAMIC.
            let r = unsafe { *(base as *const Rela).add(i) };
            // SAFETY: an entry of the object's own table (the caller's promise).
            unsafe { self.consider(r.r_offset as usize, r.r_info) };
        }
    }

    /// The REL entries of `size` bytes at `base`.
    ///
    /// # Safety
    /// As for [`SlotFinder::walk_rela`], for REL entries.
    unsafe fn walk_rel(&mut self, base: usize, size: usize) {
        let n = size / std::mem::size_of::<Rel>();
        for i in 0..n {
            // SAFETY: as above, for REL entries.
            let r = unsafe { *(base as *const Rel).add(i) };
            // SAFETY: an entry of the object's own table (the caller's promise).
            unsafe { self.consider(r.r_offset as usize, r.r_info) };
        }
    }
}

/// Store each `(slot, value, page protection)`: see [`store_slots_counted`].
fn store_slots(stores: &[(usize, usize, libc::c_int)]) -> Result<(), Error> {
    store_slots_counted(stores).map_err(|(_, e)| e)
}

/// Store each `(slot, value, page protection)`, one writable window per page: the page is made
/// writable right before its stores (never trusting what its protection was), all of that
/// page's slots are stored, and the page gets the protection given with its slots. `stores` is
/// sorted by address. On an error, also says how many leading entries were stored.
fn store_slots_counted(stores: &[(usize, usize, libc::c_int)]) -> Result<(), (usize, Error)> {
    let page = page_size();
    let mut i = 0;
    while i < stores.len() {
        let start = stores[i].0 & !(page - 1);
        let prot = stores[i].2;
        let n = stores[i..]
            .iter()
            .take_while(|s| s.0 & !(page - 1) == start)
            .count();
        // SAFETY: `start` is the page-aligned start of a page of a loaded library's data that
        // holds GOT slots; only its protection changes (it stays readable).
        let r = unsafe {
            libc::mprotect(
                start as *mut libc::c_void,
                page,
                prot | libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if r != 0 {
            let err = std::io::Error::last_os_error();
            return Err((
                i,
                Error::Protect {
                    addr: stores[i].0,
                    err,
                },
            ));
        }
        for &(addr, value, _) in &stores[i..i + n] {
            // SAFETY: the page was made writable just above and `addr` is a pointer-aligned
            // slot of that page.
            unsafe { (*(addr as *const AtomicUsize)).store(value, Ordering::SeqCst) };
        }
        if prot & libc::PROT_WRITE == 0 {
            // SAFETY: as above; gives the page the protection the loader gave it.
            let r = unsafe { libc::mprotect(start as *mut libc::c_void, page, prot) };
            if r != 0 {
                let err = std::io::Error::last_os_error();
                return Err((
                    i + n,
                    Error::Protect {
                        addr: stores[i].0,
                        err,
                    },
                ));
            }
        }
        i += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::sync::atomic::AtomicUsize;

    /// Calls through the PLT: a JUMP_SLOT relocation.
    const SRC_CALL: &str = r#"
#include <unistd.h>
long say(int fd) { return write(fd, "hello", 5); }
"#;
    /// Takes write's address in PIC code: a GLOB_DAT relocation.
    const SRC_PTR: &str = r#"
#include <unistd.h>
typedef ssize_t (*wfn)(int, const void *, size_t);
wfn write_ptr(void) { return &write; }
"#;

    static CALLS: AtomicUsize = AtomicUsize::new(0);
    static REAL_WRITE: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn counting_write(
        fd: libc::c_int,
        buf: *const libc::c_void,
        n: usize,
    ) -> isize {
        CALLS.fetch_add(1, Ordering::SeqCst);
        let f = REAL_WRITE.load(Ordering::SeqCst);
        // SAFETY: the real write recorded by `on_real` before the slot was patched.
        unsafe {
            std::mem::transmute::<
                usize,
                unsafe extern "C" fn(libc::c_int, *const libc::c_void, usize) -> isize,
            >(f)(fd, buf, n)
        }
    }

    /// What is waiting in the pipe whose read end is `r` (one read of up to 64 bytes).
    fn pipe_read(r: &OwnedFd) -> Vec<u8> {
        use std::io::Read;
        let mut b = [0u8; 64];
        let n = std::fs::File::from(r.try_clone().unwrap())
            .read(&mut b)
            .unwrap();
        b[..n].to_vec()
    }

    /// A pipe, `(read end, write end)`: closed by drop, whatever assertion fails first.
    fn pipe() -> (OwnedFd, OwnedFd) {
        sys::fd::pipe().unwrap()
    }

    type WriteFn = unsafe extern "C" fn(libc::c_int, *const libc::c_void, usize) -> isize;

    fn run(flags: &[&str], name: &str) {
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(dir.path(), name, SRC_CALL, flags);
        let so_ptr = crate::hook::build_c_lib(dir.path(), &format!("{name}_ptr"), SRC_PTR, flags);
        let say: extern "C" fn(libc::c_int) -> libc::c_long =
            // SAFETY: `say` has this signature in SRC_CALL.
            unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "say")) };
        let write_ptr: extern "C" fn() -> WriteFn =
            // SAFETY: `write_ptr` has this signature in SRC_PTR.
            unsafe { std::mem::transmute(crate::hook::dl_fn(&so_ptr, "write_ptr")) };
        // SAFETY: the pointer the library's GOT gives for write.
        let say_ptr = |fd| unsafe { write_ptr()(fd, b"ptr!".as_ptr() as *const libc::c_void, 4) };
        let (rd, wr) = pipe();
        assert!(loaded_libraries()
            .iter()
            .any(|l| l.ends_with(&format!("/{name}.so"))));
        // Before hooking: the library calls libc directly.
        CALLS.store(0, Ordering::SeqCst);
        assert_eq!(say(wr.as_raw_fd()), 5);
        assert_eq!(pipe_read(&rd), b"hello");
        assert_eq!(CALLS.load(Ordering::SeqCst), 0);

        let imports = [Import {
            name: "write",
            replacement: counting_write as *const () as usize,
        }];
        let p = patch_library(&format!("{name}.so"), &imports, &mut |n, a| {
            assert_eq!(n, "write");
            REAL_WRITE.store(a, Ordering::SeqCst);
        })
        .unwrap();
        assert!(p.slots.iter().all(|s| s.jump_slot), "{p:?}");
        assert_eq!(p.real("write"), Some(libc::write as *const () as usize));
        let p2 = patch_library(&format!("{name}_ptr.so"), &imports, &mut |_, a| {
            assert_eq!(a, libc::write as *const () as usize);
        })
        .unwrap();
        assert!(p2.slots.iter().any(|s| !s.jump_slot), "{p2:?}");
        assert_eq!(say(wr.as_raw_fd()), 5);
        assert_eq!(pipe_read(&rd), b"hello");
        assert_eq!(say_ptr(wr.as_raw_fd()), 4);
        assert_eq!(pipe_read(&rd), b"ptr!");
        assert_eq!(CALLS.load(Ordering::SeqCst), 2);

        p.unpatch().unwrap();
        p2.unpatch().unwrap();
        assert_eq!(say(wr.as_raw_fd()), 5);
        assert_eq!(say_ptr(wr.as_raw_fd()), 4);
        assert_eq!(pipe_read(&rd), b"helloptr!");
        assert_eq!(CALLS.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn hooks_and_unhooks_write_in_full_relro_and_lazy_libraries() {
        // Full RELRO: the GOT is read-only after loading, mprotect is needed.
        run(&["-Wl,-z,now", "-Wl,-z,relro"], "libgot_now");
        // Lazy binding: the JUMP_SLOT holds a PLT stub; the real write comes from dlsym.
        run(&["-Wl,-z,lazy", "-Wl,-z,norelro"], "libgot_lazy");
    }

    /// The protection `/proc/self/maps` shows for the page holding `addr`.
    fn maps_prot(addr: usize) -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for line in maps.lines() {
            let mut parts = line.split_whitespace();
            let (range, perms) = (parts.next().unwrap(), parts.next().unwrap());
            let (a, b) = range.split_once('-').unwrap();
            let (a, b) = (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
            );
            if addr >= a && addr < b {
                return perms[..3].to_string();
            }
        }
        panic!("{addr:#x} is not mapped")
    }

    /// The GOT slot of `sym` in the loaded library `lib`, as another hooker would find it.
    fn slot_of(lib: &str, sym: &'static str) -> usize {
        let imports = [Import {
            name: sym,
            replacement: 0,
        }];
        let mut out = None;
        iterate(|info| {
            let name = info_name(info);
            if base_name(&name) != lib {
                return false;
            }
            // SAFETY: `info` describes a loaded object during this callback.
            out = Some(unsafe { scan(info, name, &imports) }.unwrap());
            true
        });
        out.unwrap().slots[0].0
    }

    static PIDS: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn other_hookers_getpid() -> libc::pid_t {
        PIDS.fetch_add(1, Ordering::SeqCst);
        4242
    }

    /// Another hooker (bytehook, xhook) patching another slot of the same RELRO page at the
    /// same time: it has made the page writable and not yet stored when we patch. We must not
    /// take that writable page for the page's own protection: after our window the page is
    /// read-only again, as the loader left it, and both hookers' slots hold what each stored.
    #[test]
    fn a_relro_page_another_hooker_holds_open_is_made_read_only_again() {
        const SRC: &str = r#"
#include <unistd.h>
long say(int fd) { return write(fd, "hello", 5); }
long pid(void) { return getpid(); }
"#;
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(
            dir.path(),
            "libgot_race",
            SRC,
            &["-Wl,-z,now", "-Wl,-z,relro"],
        );
        let say: extern "C" fn(libc::c_int) -> libc::c_long =
            // SAFETY: `say` has this signature in SRC.
            unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "say")) };
        let pid: extern "C" fn() -> libc::c_long =
            // SAFETY: `pid` has this signature in SRC.
            unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "pid")) };
        let write_slot = slot_of("libgot_race.so", "write");
        let pid_slot = slot_of("libgot_race.so", "getpid");
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let start = write_slot & !(page - 1);
        assert_eq!(start, pid_slot & !(page - 1), "both slots on one page");
        assert_eq!(
            maps_prot(start),
            "r--",
            "full RELRO: the loader left the GOT read-only"
        );

        let opened = std::sync::Barrier::new(2);
        let patched = std::sync::Barrier::new(2);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                // The other hooker opens its window on the page...
                // SAFETY: the page of a loaded library's GOT; only its protection changes.
                let r = unsafe {
                    libc::mprotect(
                        start as *mut libc::c_void,
                        page,
                        libc::PROT_READ | libc::PROT_WRITE,
                    )
                };
                assert_eq!(r, 0);
                opened.wait();
                patched.wait();
                // ...and stores after we are done, opening the page again first as it must.
                // SAFETY: as above; then an aligned store into the slot of the page we made
                // writable.
                unsafe {
                    let r = libc::mprotect(
                        start as *mut libc::c_void,
                        page,
                        libc::PROT_READ | libc::PROT_WRITE,
                    );
                    assert_eq!(r, 0);
                    (*(pid_slot as *const AtomicUsize))
                        .store(other_hookers_getpid as *const () as usize, Ordering::SeqCst);
                    libc::mprotect(start as *mut libc::c_void, page, libc::PROT_READ);
                }
            });
            opened.wait();
            let imports = [Import {
                name: "write",
                replacement: counting_write as *const () as usize,
            }];
            let p = patch_library("libgot_race.so", &imports, &mut |_, a| {
                REAL_WRITE.store(a, Ordering::SeqCst);
            })
            .unwrap();
            let prot = maps_prot(start);
            patched.wait();
            assert_eq!(
                prot, "r--",
                "the RELRO page must be read-only after our store, whatever it was before"
            );
            std::mem::forget(p);
        });
        let (rd, wr) = pipe();
        let before = CALLS.load(Ordering::SeqCst);
        assert_eq!(say(wr.as_raw_fd()), 5);
        assert_eq!(pipe_read(&rd), b"hello");
        assert!(
            CALLS.load(Ordering::SeqCst) > before,
            "our write hook is in place"
        );
        assert_eq!(pid(), 4242, "the other hooker's getpid is in place");
        assert_eq!(maps_prot(start), "r--");
    }

    /// System libraries on Android are linked with `--pack-dyn-relocs=android`: their GLOB_DAT
    /// slots (an address-taken `write`, calls from `-fno-plt` code) are in the packed
    /// `DT_ANDROID_RELA` table, not in `DT_RELA`. glibc's loader ignores that table, so here the
    /// slot keeps its link-time 0 and the real `write` comes from `dlsym`; on Android the loader
    /// fills it. Either way our replacement must land in it.
    #[test]
    fn glob_dat_slots_in_android_packed_relocations_are_patched() {
        const SRC: &str = r#"
#include <unistd.h>
typedef ssize_t (*wfn)(int, const void *, size_t);
wfn write_ptr(void) { return &write; }
long say(int fd) { return write(fd, "hello", 5); }
"#;
        let dir = tempfile::tempdir().unwrap();
        // No start files: their relative relocations would be packed too, and glibc, which
        // does not apply the packed table, would run an unrelocated initialiser.
        let so = crate::hook::build_c_lib(
            dir.path(),
            "libgot_aps2",
            SRC,
            &[
                "-fuse-ld=lld",
                "-fno-plt",
                "-nostartfiles",
                "-Wl,-z,now",
                "-Wl,--pack-dyn-relocs=android",
            ],
        );
        let say: extern "C" fn(libc::c_int) -> libc::c_long =
            // SAFETY: `say` has this signature in SRC.
            unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "say")) };
        let write_ptr: extern "C" fn() -> usize =
            // SAFETY: `write_ptr` returns the GOT slot's value, a function pointer or 0.
            unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "write_ptr")) };
        assert_eq!(write_ptr(), 0, "glibc left the packed GLOB_DAT slot alone");
        let imports = [Import {
            name: "write",
            replacement: counting_write as *const () as usize,
        }];
        let p = patch_library("libgot_aps2.so", &imports, &mut |_, a| {
            REAL_WRITE.store(a, Ordering::SeqCst);
        })
        .unwrap();
        assert_eq!(p.slots.len(), 1, "{p:?}");
        assert!(!p.slots[0].jump_slot);
        assert_eq!(p.real("write"), Some(libc::write as *const () as usize));
        assert_eq!(write_ptr(), counting_write as *const () as usize);
        let (rd, wr) = pipe();
        let before = CALLS.load(Ordering::SeqCst);
        assert_eq!(say(wr.as_raw_fd()), 5);
        assert_eq!(pipe_read(&rd), b"hello");
        assert!(CALLS.load(Ordering::SeqCst) > before);
        std::mem::forget(p);
    }

    #[test]
    fn unknown_library_and_missing_imports_are_errors() {
        let e = patch_library("libnot-there-at-all.so", &[], &mut |_, _| {}).unwrap_err();
        assert!(matches!(e, Error::NotLoaded(_)), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let so =
            crate::hook::build_c_lib(dir.path(), "libgot_none", "int f(int x){return x+1;}", &[]);
        crate::hook::dl_fn(&so, "f");
        let imports = [Import {
            name: "write",
            replacement: counting_write as *const () as usize,
        }];
        let e = patch_library("libgot_none.so", &imports, &mut |_, _| {}).unwrap_err();
        assert!(matches!(e, Error::NoImports { .. }), "{e}");
    }

    #[test]
    fn a_loaded_library_is_found_by_its_file_name_with_its_load_bias() {
        let dir = tempfile::tempdir().unwrap();
        let so =
            crate::hook::build_c_lib(dir.path(), "libgot_find", "int f(int x){return x+1;}", &[]);
        let f = crate::hook::dl_fn(&so, "f");
        // SAFETY: an all-zero Dl_info is a valid value to be filled in.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: `f` is an address inside the library just loaded.
        let found = unsafe { libc::dladdr(f as *const libc::c_void, &mut info) };
        assert_ne!(found, 0);
        // The library's first segment starts at address 0: its base is its load bias.
        assert_eq!(
            find_loaded("libgot_find.so"),
            Some((so.to_str().unwrap().to_string(), info.dli_fbase as usize))
        );
        assert_eq!(find_loaded("libgot_find"), None, "a file name, whole");
        assert_eq!(find_loaded("libnot-there-at-all.so"), None);
    }

    /// A page's protection is that of the segments it overlaps, without RELRO's write only when
    /// wholly inside RELRO: segments that end or begin at the page's edge do not count.
    #[test]
    fn a_page_gets_the_protection_of_the_segments_it_overlaps_and_relro_only_inside_it() {
        const R: libc::c_int = libc::PROT_READ;
        const W: libc::c_int = libc::PROT_WRITE;
        const X: libc::c_int = libc::PROT_EXEC;
        let f = Found {
            name: String::new(),
            slots: Vec::new(),
            lo: 0x10000,
            hi: 0x15000,
            loads: vec![(0x10000, 0x12000, R | X), (0x12000, 0x15000, R | W)],
            relro: Some((0x12000, 0x13000)),
        };
        assert_eq!(f.page_prot(0x11000, 0x1000), R | X);
        assert_eq!(f.page_prot(0x12000, 0x1000), R);
        assert_eq!(f.page_prot(0x13000, 0x1000), R | W);
        assert_eq!(f.page_prot(0x14000, 0x1000), R | W);
        // A larger page over the end of text and RELRO: both segments, and writable.
        assert_eq!(f.page_prot(0x10000, 0x4000), R | W | X);
        // A segment without PF_R still reads: the loader's pages are always readable here.
        let g = Found {
            loads: vec![(0x10000, 0x11000, X)],
            relro: None,
            ..f
        };
        assert_eq!(g.page_prot(0x10000, 0x1000), R | X);
    }

    /// With lazy binding, until its first call an import's slot holds an address inside the
    /// library (its PLT): the function to forward to then comes from dlsym, not from the slot.
    #[test]
    fn an_unbound_lazy_slot_forwards_to_the_function_dlsym_finds() {
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(
            dir.path(),
            "libgot_unbound",
            SRC_CALL,
            &["-Wl,-z,lazy", "-Wl,-z,norelro"],
        );
        let p = std::ffi::CString::new(so.to_str().unwrap()).unwrap();
        // SAFETY: a test library we just built, whose initialisers are empty; RTLD_LAZY leaves
        // its JUMP_SLOTs unbound until their first call.
        let h = unsafe { libc::dlopen(p.as_ptr(), libc::RTLD_LAZY) };
        assert!(!h.is_null());
        let slot = slot_of("libgot_unbound.so", "write");
        // SAFETY: the slot is a pointer-aligned word of the library's mapped GOT.
        let held = unsafe { (*(slot as *const AtomicUsize)).load(Ordering::SeqCst) };
        // SAFETY: an all-zero Dl_info is a valid value to be filled in.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: any address may be asked about.
        let found = unsafe { libc::dladdr(held as *const libc::c_void, &mut info) };
        assert_ne!(found, 0);
        // SAFETY: dladdr gave the name of the object holding `held`.
        let holder = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
        assert_eq!(holder.to_str().unwrap(), so.to_str().unwrap(), "a PLT stub");
        let imports = [Import {
            name: "write",
            replacement: counting_write as *const () as usize,
        }];
        let mut told = None;
        let patched = patch_library("libgot_unbound.so", &imports, &mut |n, a| {
            told = Some((n, a));
            REAL_WRITE.store(a, Ordering::SeqCst);
        })
        .unwrap();
        let write = libc::write as *const () as usize;
        assert_eq!(told, Some(("write", write)));
        assert_eq!(patched.real("write"), Some(write));
        assert_eq!(patched.slots.len(), 1, "{patched:?}");
        assert_eq!(patched.slots[0].original, held);
        patched.unpatch().unwrap();
        // SAFETY: as above.
        let back = unsafe { (*(slot as *const AtomicUsize)).load(Ordering::SeqCst) };
        assert_eq!(back, held, "the PLT stub is put back");
    }

    /// Our window on a page adds write to what the page is given and takes nothing away: a
    /// page that is also executable stays so, a writable one stays writable, and a read-only
    /// one is closed again.
    #[test]
    fn each_page_keeps_its_protection_around_the_window_of_our_stores() {
        let page = page_size();
        // SAFETY: a fresh anonymous mapping of three pages, ours alone.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                3 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base as usize;
        let prots = [
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::PROT_READ,
        ];
        for (i, &p) in prots.iter().enumerate() {
            // SAFETY: a page of the mapping above.
            let r = unsafe { libc::mprotect((base + i * page) as *mut libc::c_void, page, p) };
            assert_eq!(r, 0);
        }
        let stores: Vec<_> = (0..3)
            .map(|i| (base + i * page + 8, 0x1111 * (i + 1), prots[i]))
            .collect();
        store_slots_counted(&stores).unwrap();
        for (i, want) in ["rwx", "rw-", "r--"].iter().enumerate() {
            // SAFETY: a readable, aligned word of the mapping above.
            let v =
                unsafe { (*((base + i * page + 8) as *const AtomicUsize)).load(Ordering::SeqCst) };
            assert_eq!(v, 0x1111 * (i + 1));
            assert_eq!(maps_prot(base + i * page), *want, "page {i}");
        }
        // SAFETY: the mapping above, no longer used.
        unsafe { libc::munmap(base as *mut libc::c_void, 3 * page) };
    }
}
