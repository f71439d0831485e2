//! Symbols of an ELF shared library read from its file: `.dynsym` and `.symtab`, 32- and 64-bit,
//! little-endian, and MiniDebugInfo: the `.symtab` of the xz-compressed ELF file that Android's
//! build embeds as `.gnu_debugdata` (some Android 15 builds keep ART's internal symbols only
//! there). This is how the fork dumper finds ART's VM-control functions without `dlopen`
//! (which Android 7+ refuses for system libraries from an app's namespace): read the file the
//! library was mapped from, look the names up, add the load bias.
//!
//! Every offset read from the file is bounds-checked: a truncated or hostile file gives an error
//! naming the byte offset, never a panic. `.gnu_debugdata` is decompressed only when a name is
//! in neither table, with a bounded dictionary and at most [`MAX_MINI_DEBUGINFO`] bytes of
//! output: a corrupt or oversized section is an error naming the file and the section's offset.

use super::{Error, Result};
use std::cell::OnceCell;
use std::path::{Path, PathBuf};

/// Most bytes the embedded MiniDebugInfo ELF may decompress to (ART's is a few MB).
pub const MAX_MINI_DEBUGINFO: usize = 32 << 20;

/// Which table a symbol came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Dynsym,
    Symtab,
    /// The `.symtab` of the compressed ELF in `.gnu_debugdata`.
    MiniDebugInfo,
}

/// A defined symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// `st_value`: the address relative to the load bias.
    pub value: u64,
    pub size: u64,
    pub table: Table,
}

/// An ELF file's symbol tables.
pub struct ElfSymbols {
    path: PathBuf,
    data: Bytes,
    is64: bool,
    /// (table, symbols offset, count, entry size, strings offset, strings size)
    tables: Vec<(Table, usize, usize, usize, usize, usize)>,
    /// The `.gnu_debugdata` section: (offset, size).
    debugdata: Option<(usize, usize)>,
    /// The ELF file decompressed from `.gnu_debugdata`, once it was needed.
    mini: OnceCell<std::result::Result<Box<ElfSymbols>, String>>,
}

/// The bytes of an ELF file: the mapped library, or a decompressed embedded file.
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
const SHT_NOBITS: u32 = 8;
const SHN_UNDEF: u16 = 0;

fn bad(path: &Path, off: usize, what: &str) -> Error {
    Error::Unsupported(format!("{}: byte {off}: {what}", path.display()))
}

fn rd<const N: usize>(d: &[u8], off: usize) -> Option<[u8; N]> {
    d.get(off..off.checked_add(N)?)?.try_into().ok()
}
fn u16_at(d: &[u8], off: usize) -> Option<u16> {
    rd::<2>(d, off).map(u16::from_le_bytes)
}
fn u32_at(d: &[u8], off: usize) -> Option<u32> {
    rd::<4>(d, off).map(u32::from_le_bytes)
}
fn u64_at(d: &[u8], off: usize) -> Option<u64> {
    rd::<8>(d, off).map(u64::from_le_bytes)
}

impl ElfSymbols {
    /// Map `path` and find its symbol tables.
    pub fn open(path: &Path) -> Result<ElfSymbols> {
        let f = std::fs::File::open(path).map_err(|err| Error::Io {
            what: "opening",
            path: path.display().to_string(),
            err,
        })?;
        // SAFETY: a read-only private mapping of a library file; if the file is truncated under
        // us reads may fault, which is why only system libraries (immutable) are read this way.
        let data = unsafe { memmap2::Mmap::map(&f) }.map_err(|err| Error::Io {
            what: "mapping",
            path: path.display().to_string(),
            err,
        })?;
        ElfSymbols::parse(path.to_path_buf(), Bytes::Mapped(data))
    }

    /// Find the symbol tables (and `.gnu_debugdata`) of the ELF file in `data`.
    fn parse(path_buf: PathBuf, data: Bytes) -> Result<ElfSymbols> {
        let path = path_buf.as_path();
        let d = &data[..];
        if d.get(0..4) != Some(b"\x7fELF") {
            return Err(bad(path, 0, "not an ELF file"));
        }
        let is64 = match d.get(4) {
            Some(1) => false,
            Some(2) => true,
            _ => return Err(bad(path, 4, "unknown ELF class")),
        };
        if d.get(5) != Some(&1) {
            return Err(bad(path, 5, "not little-endian"));
        }
        let hdr = |o64: usize, o32: usize| -> Option<usize> {
            if is64 {
                u64_at(d, o64).map(|v| v as usize)
            } else {
                u32_at(d, o32).map(|v| v as usize)
            }
        };
        let shoff = hdr(0x28, 0x20).ok_or_else(|| bad(path, 0x20, "truncated header"))?;
        let (shentsize, shnum) = if is64 {
            (u16_at(d, 0x3a), u16_at(d, 0x3c))
        } else {
            (u16_at(d, 0x2e), u16_at(d, 0x30))
        };
        let (shentsize, shnum) = (
            shentsize.ok_or_else(|| bad(path, 0x2e, "truncated header"))? as usize,
            shnum.ok_or_else(|| bad(path, 0x30, "truncated header"))? as usize,
        );
        let shstrndx = if is64 {
            u16_at(d, 0x3e)
        } else {
            u16_at(d, 0x32)
        }
        .ok_or_else(|| bad(path, 0x32, "truncated header"))? as usize;
        let sect = |i: usize| -> Option<(u32, usize, usize, u32, usize)> {
            let o = shoff.checked_add(i.checked_mul(shentsize)?)?;
            let ty = u32_at(d, o.checked_add(4)?)?;
            if is64 {
                Some((
                    ty,
                    u64_at(d, o + 0x18)? as usize,
                    u64_at(d, o + 0x20)? as usize,
                    u32_at(d, o + 0x28)?,
                    u64_at(d, o + 0x38)? as usize,
                ))
            } else {
                Some((
                    ty,
                    u32_at(d, o + 0x10)? as usize,
                    u32_at(d, o + 0x14)? as usize,
                    u32_at(d, o + 0x18)?,
                    u32_at(d, o + 0x24)? as usize,
                ))
            }
        };
        // The section name string table, to find `.gnu_debugdata` by name.
        let shstr =
            sect(shstrndx).and_then(|(_, off, size, _, _)| d.get(off..off.checked_add(size)?));
        let name_is = |i: usize, want: &[u8]| -> bool {
            let (Some(o), Some(names)) = (shoff.checked_add(i * shentsize), shstr) else {
                return false;
            };
            let Some(n) = u32_at(d, o) else {
                return false;
            };
            names
                .get(n as usize..)
                .and_then(|s| s.get(..want.len() + 1))
                .is_some_and(|s| &s[..want.len()] == want && s[want.len()] == 0)
        };
        let mut tables = Vec::new();
        let mut debugdata = None;
        for i in 0..shnum {
            let (ty, off, size, link, entsize) =
                sect(i).ok_or_else(|| bad(path, shoff, "section header table past the end"))?;
            if ty != SHT_NOBITS && name_is(i, b".gnu_debugdata") {
                if off.checked_add(size).is_none_or(|e| e > d.len()) {
                    return Err(bad(path, off, ".gnu_debugdata outside the file"));
                }
                debugdata = Some((off, size));
                continue;
            }
            let table = match ty {
                SHT_DYNSYM => Table::Dynsym,
                SHT_SYMTAB => Table::Symtab,
                _ => continue,
            };
            let (_, stroff, strsize, _, _) = sect(link as usize)
                .ok_or_else(|| bad(path, off, "symbol table's string table is missing"))?;
            let min = if is64 { 24 } else { 16 };
            if entsize < min
                || off.checked_add(size).is_none_or(|e| e > d.len())
                || stroff.checked_add(strsize).is_none_or(|e| e > d.len())
            {
                return Err(bad(path, off, "symbol table outside the file"));
            }
            tables.push((table, off, size / entsize, entsize, stroff, strsize));
        }
        Ok(ElfSymbols {
            path: path_buf,
            data,
            is64,
            tables,
            debugdata,
            mini: OnceCell::new(),
        })
    }

    /// Whether the file embeds MiniDebugInfo (`.gnu_debugdata`).
    pub fn has_mini_debuginfo(&self) -> bool {
        self.debugdata.is_some()
    }

    /// The ELF file embedded in `.gnu_debugdata`, decompressed on first use.
    fn mini(&self) -> Result<Option<&ElfSymbols>> {
        let Some((off, size)) = self.debugdata else {
            return Ok(None);
        };
        let r = self.mini.get_or_init(|| {
            let name = || format!("{} (.gnu_debugdata)", self.path.display());
            let elf = unxz(&self.data[off..off + size], MAX_MINI_DEBUGINFO).map_err(|why| {
                format!("{}: byte {off}: .gnu_debugdata: {why}", self.path.display())
            })?;
            ElfSymbols::parse(PathBuf::from(name()), Bytes::Owned(elf))
                .map(Box::new)
                .map_err(|e| e.to_string())
        });
        match r {
            Ok(m) => Ok(Some(m)),
            Err(why) => Err(Error::Unsupported(why.clone())),
        }
    }

    /// Whether the file has a `.symtab` (most release builds keep only `.dynsym`).
    pub fn has_symtab(&self) -> bool {
        self.tables.iter().any(|t| t.0 == Table::Symtab)
    }

    /// Look up each name; `.dynsym` wins over `.symtab`, and both over MiniDebugInfo, which is
    /// only decompressed if a name is in neither. Undefined symbols are not found. An error
    /// only when MiniDebugInfo was needed and is corrupt or too large.
    pub fn lookup_many(&self, names: &[&str]) -> Result<Vec<Option<Symbol>>> {
        let mut out = self.lookup_own(names);
        if out.iter().any(Option::is_none) {
            if let Some(mini) = self.mini()? {
                let missing: Vec<usize> = (0..names.len()).filter(|&k| out[k].is_none()).collect();
                let wanted: Vec<&str> = missing.iter().map(|&k| names[k]).collect();
                for (k, found) in missing.into_iter().zip(mini.lookup_own(&wanted)) {
                    out[k] = found.map(|s| Symbol {
                        table: Table::MiniDebugInfo,
                        ..s
                    });
                }
            }
        }
        Ok(out)
    }

    pub fn lookup(&self, name: &str) -> Result<Option<Symbol>> {
        Ok(self.lookup_many(&[name])?.pop().flatten())
    }

    /// Look the names up in this file's own `.dynsym` and `.symtab`.
    fn lookup_own(&self, names: &[&str]) -> Vec<Option<Symbol>> {
        let d = &self.data[..];
        let mut out = vec![None; names.len()];
        for &(table, off, count, entsize, stroff, strsize) in &self.tables {
            for i in 0..count {
                let e = off + i * entsize;
                let (Some(name), Some(shndx), Some(value), Some(size)) = (if self.is64 {
                    (
                        u32_at(d, e),
                        u16_at(d, e + 6),
                        u64_at(d, e + 8),
                        u64_at(d, e + 16),
                    )
                } else {
                    (
                        u32_at(d, e),
                        u16_at(d, e + 14),
                        u32_at(d, e + 4).map(u64::from),
                        u32_at(d, e + 8).map(u64::from),
                    )
                }) else {
                    continue;
                };
                if shndx == SHN_UNDEF || name as usize >= strsize {
                    continue;
                }
                let s = &d[stroff + name as usize..stroff + strsize];
                let s = &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())];
                for (k, n) in names.iter().enumerate() {
                    if out[k].is_none() && n.as_bytes() == s {
                        out[k] = Some(Symbol { value, size, table });
                    }
                }
            }
        }
        out
    }
}

/// Decompress an xz stream of at most `limit` bytes of output. A block whose dictionary (with
/// the decoder's overhead) would need more than [`MAX_MINI_DEBUGINFO`] plus 1 MiB is refused
/// before anything is allocated for it (Android's build compresses with xz's default 8 MiB).
fn unxz(xz: &[u8], limit: usize) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    const MEM_KB: u32 = (MAX_MINI_DEBUGINFO >> 10) as u32 + 1024;
    let r = lzma_rust2::XzReader::new_mem_limit(xz, false, MEM_KB);
    let mut out = Vec::new();
    r.take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("xz: {e}"))?;
    if out.len() > limit {
        return Err(format!("decompresses to more than {limit} bytes"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"
int exported_counter = 7;
int art_like_suspend(int x) { return x + 1; }
static int hidden_helper(int x) { return x * 3; }
int (*volatile keep)(int) = hidden_helper;
"#;

    #[test]
    fn finds_symbols_in_dynsym_and_symtab_of_a_real_library() {
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(dir.path(), "libsyms", SRC, &[]);
        let e = ElfSymbols::open(&so).unwrap();
        assert!(e.has_symtab() && !e.has_mini_debuginfo());
        let r = e
            .lookup_many(&[
                "art_like_suspend",
                "exported_counter",
                "hidden_helper",
                "absent",
            ])
            .unwrap();
        let f = r[0].unwrap();
        assert_eq!(f.table, Table::Dynsym);
        assert_eq!(r[1].unwrap().table, Table::Dynsym);
        assert_eq!(r[1].unwrap().size, 4);
        let h = r[2].unwrap();
        assert_eq!(
            h.table,
            Table::Symtab,
            "static functions are only in .symtab"
        );
        assert!(r[3].is_none());
        // The address from the file plus the load bias is the function dlsym finds.
        let addr = crate::hook::dl_fn(&so, "art_like_suspend");
        let (_, bias) = crate::hook::got::find_loaded("libsyms.so").unwrap();
        assert_eq!(bias + f.value as usize, addr);
        // SAFETY: the resolved address of `int art_like_suspend(int)`.
        let g: extern "C" fn(i32) -> i32 = unsafe { std::mem::transmute(bias + h.value as usize) };
        assert_eq!(
            g(5),
            15,
            "the .symtab-only static function is callable at bias + value"
        );

        // Stripped: .symtab gone, .dynsym stays.
        let stripped = dir.path().join("libsyms-stripped.so");
        let st = std::process::Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&so)
            .status()
            .unwrap();
        assert!(st.success());
        let e = ElfSymbols::open(&stripped).unwrap();
        assert!(!e.has_symtab());
        assert!(e.lookup("art_like_suspend").unwrap().is_some());
        assert!(e.lookup("hidden_helper").unwrap().is_none());
    }

    #[test]
    fn bad_files_are_errors_with_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.so");
        std::fs::write(&p, b"not an elf at all").unwrap();
        let e = ElfSymbols::open(&p).err().unwrap().to_string();
        assert!(e.contains("byte 0: not an ELF file"), "{e}");
        let so = crate::hook::build_c_lib(dir.path(), "libtrunc", SRC, &[]);
        let mut b = std::fs::read(&so).unwrap();
        b.truncate(b.len() / 2);
        std::fs::write(&p, &b).unwrap();
        assert!(ElfSymbols::open(&p).is_err());
    }

    fn run(cmd: &str, args: &[&std::ffi::OsStr]) {
        let st = std::process::Command::new(cmd).args(args).status().unwrap();
        assert!(st.success(), "{cmd} {args:?}");
    }

    /// `so` with its `.symtab` moved into `.gnu_debugdata` the way Android's build makes
    /// MiniDebugInfo: the symbols kept in a debug-only copy, that copy xz-compressed, the
    /// library stripped and the compressed copy added as a section.
    fn with_mini_debuginfo(dir: &Path, so: &Path, xz: &Path) -> PathBuf {
        let mini = dir.join("mini_debuginfo");
        let out = dir.join("libsyms-mini.so");
        run(
            "objcopy",
            &[
                "--only-keep-debug".as_ref(),
                so.as_os_str(),
                mini.as_os_str(),
            ],
        );
        run("objcopy", &["--strip-debug".as_ref(), mini.as_os_str()]);
        let c = std::process::Command::new("xz")
            .args(["-c", "--check=crc32"])
            .arg(&mini)
            .output()
            .unwrap();
        assert!(c.status.success());
        std::fs::write(xz, c.stdout).unwrap();
        run(
            "strip",
            &[
                "--strip-all".as_ref(),
                "-o".as_ref(),
                out.as_os_str(),
                so.as_os_str(),
            ],
        );
        let mut arg = std::ffi::OsString::from(".gnu_debugdata=");
        arg.push(xz);
        run(
            "objcopy",
            &["--add-section".as_ref(), arg.as_os_str(), out.as_os_str()],
        );
        out
    }

    #[test]
    fn finds_symbols_only_in_mini_debuginfo() {
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(dir.path(), "libsyms_full", SRC, &[]);
        let want = ElfSymbols::open(&so)
            .unwrap()
            .lookup("hidden_helper")
            .unwrap()
            .unwrap();
        let xz = dir.path().join("mini.xz");
        let lib = with_mini_debuginfo(dir.path(), &so, &xz);
        let e = ElfSymbols::open(&lib).unwrap();
        assert!(!e.has_symtab() && e.has_mini_debuginfo());
        let r = e
            .lookup_many(&["art_like_suspend", "hidden_helper", "absent"])
            .unwrap();
        assert_eq!(r[0].unwrap().table, Table::Dynsym);
        let h = r[1].expect("hidden_helper is in .gnu_debugdata's .symtab");
        assert_eq!(h.table, Table::MiniDebugInfo);
        assert_eq!((h.value, h.size), (want.value, want.size));
        assert!(r[2].is_none());
        // Loaded, the function is at bias + value.
        crate::hook::dl_fn(&lib, "art_like_suspend");
        let (_, bias) = crate::hook::got::find_loaded("libsyms-mini.so").unwrap();
        // SAFETY: the address of `static int hidden_helper(int)` in the loaded library.
        let g: extern "C" fn(i32) -> i32 = unsafe { std::mem::transmute(bias + h.value as usize) };
        assert_eq!(g(5), 15);
    }

    #[test]
    fn corrupt_or_oversized_mini_debuginfo_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(dir.path(), "libsyms_bad", SRC, &[]);
        let xz = dir.path().join("mini.xz");
        let lib = with_mini_debuginfo(dir.path(), &so, &xz);
        // Corrupt the compressed section's middle: the xz check or the decoder fails.
        let mut bytes = std::fs::read(&lib).unwrap();
        let packed = std::fs::read(&xz).unwrap();
        let at = bytes
            .windows(packed.len())
            .position(|w| w == packed)
            .unwrap();
        for b in &mut bytes[at + packed.len() / 2..at + packed.len() / 2 + 16] {
            *b ^= 0x5a;
        }
        let bad = dir.path().join("libsyms-corrupt.so");
        std::fs::write(&bad, &bytes).unwrap();
        let e = ElfSymbols::open(&bad).unwrap();
        // Names in .dynsym need no decompression.
        assert!(e.lookup("art_like_suspend").unwrap().is_some());
        let err = e.lookup("hidden_helper").unwrap_err().to_string();
        assert!(
            err.contains(&bad.display().to_string())
                && err.contains(&format!("byte {at}: .gnu_debugdata")),
            "{err}"
        );
        // Asked again: the same error, no second decompression attempt needed.
        assert_eq!(e.lookup("hidden_helper").unwrap_err().to_string(), err);

        // More output than allowed: stopped at the limit, an error.
        let zeros = vec![0u8; 3 << 20];
        let big = xz_of(&zeros, &[]);
        assert_eq!(unxz(&big, 4 << 20).unwrap().len(), 3 << 20);
        assert_eq!(unxz(&big, 3 << 20).unwrap(), zeros, "exactly the limit");
        assert!(unxz(&big, (3 << 20) - 1).is_err(), "a byte over the limit");
        let err = unxz(&big, 1 << 20).unwrap_err();
        assert_eq!(err, format!("decompresses to more than {} bytes", 1 << 20));
        assert!(unxz(b"\xfd7zXZ\0garbage", 1 << 20).is_err());

        // The dictionary a block asks for, with the decoder's overhead, may take up to
        // MAX_MINI_DEBUGINFO plus 1 MiB (xz's own count: 33 MiB for a 32 MiB dictionary);
        // a 48 MiB one is refused before anything is allocated for it.
        let with_dict = |dict: &str| {
            let packed = xz_of(b"some symbols", &[&format!("--lzma2=dict={dict}")]);
            unxz(&packed, MAX_MINI_DEBUGINFO)
        };
        assert_eq!(with_dict("32MiB").unwrap(), b"some symbols");
        let err = with_dict("48MiB").unwrap_err();
        assert!(err.contains("memory"), "{err}");
    }

    /// `data` compressed by xz (`-c --check=crc32`, then `args`), fed from a thread of its own.
    fn xz_of(data: &[u8], args: &[&str]) -> Vec<u8> {
        use std::io::Write;
        let mut c = std::process::Command::new("xz")
            .args(["-c", "--check=crc32"])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("xz runs");
        let mut stdin = c.stdin.take().unwrap();
        let data = data.to_vec();
        let feed = std::thread::spawn(move || stdin.write_all(&data));
        let out = c.wait_with_output().unwrap();
        feed.join().unwrap().unwrap();
        assert!(out.status.success(), "xz {args:?}");
        out.stdout
    }

    /// `nm`'s view of `so`: each defined symbol's value and size (`-D`: `.dynsym` only).
    fn nm(so: &Path, dynamic: bool) -> Vec<(String, u64, u64)> {
        let mut c = std::process::Command::new("nm");
        c.args(["-S", "--defined-only"]);
        if dynamic {
            c.arg("-D");
        }
        let out = c.arg(so).output().expect("nm runs");
        assert!(out.status.success(), "nm {}", so.display());
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
                (f.len() == 4).then(|| (f[3].to_string(), hex(f[0]), hex(f[1])))
            })
            .collect()
    }

    /// A 32-bit library (armeabi-v7a apps load a 32-bit libart): its symbols, from both
    /// tables, are those `nm` reads.
    #[test]
    fn finds_symbols_of_a_32_bit_library() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("syms32.c");
        std::fs::write(&c, SRC).unwrap();
        let so = dir.path().join("libsyms32.so");
        let st = std::process::Command::new("clang")
            .args([
                "--target=armv7-linux-androideabi",
                "-shared",
                "-nostdlib",
                "-fuse-ld=lld",
            ])
            .args(["-fPIC", "-O1", "-o"])
            .arg(&so)
            .arg(&c)
            .status()
            .expect("clang runs (scripts/test.sh installs it)");
        assert!(st.success());
        assert_eq!(std::fs::read(&so).unwrap()[4], 1, "ELFCLASS32");
        let e = ElfSymbols::open(&so).unwrap();
        assert!(e.has_symtab());
        let dynamic = nm(&so, true);
        let all = nm(&so, false);
        let mut checked = 0;
        for (name, value, size) in &all {
            if ![
                "art_like_suspend",
                "exported_counter",
                "hidden_helper",
                "keep",
            ]
            .contains(&name.as_str())
            {
                continue;
            }
            let got = e.lookup(name).unwrap().unwrap_or_else(|| panic!("{name}"));
            let table = if dynamic.iter().any(|d| &d.0 == name) {
                Table::Dynsym
            } else {
                Table::Symtab
            };
            assert_eq!(
                (got.value, got.size, got.table),
                (*value, *size, table),
                "{name}"
            );
            checked += 1;
        }
        assert_eq!(checked, 4, "{all:?}");
        assert_eq!(
            e.lookup("hidden_helper").unwrap().unwrap().table,
            Table::Symtab
        );
        assert!(e.lookup("absent").unwrap().is_none());
    }

    /// Where the header of the section named `name` is, in a 64-bit ELF file.
    fn section(b: &[u8], name: &str) -> usize {
        let shoff = u64_at(b, 0x28).unwrap() as usize;
        let (size, n, names) = (
            u16_at(b, 0x3a).unwrap() as usize,
            u16_at(b, 0x3c).unwrap() as usize,
            u16_at(b, 0x3e).unwrap() as usize,
        );
        let strings = u64_at(b, shoff + names * size + 0x18).unwrap() as usize;
        (0..n)
            .map(|i| shoff + i * size)
            .find(|&h| {
                let at = strings + u32_at(b, h).unwrap() as usize;
                b[at..].split(|&c| c == 0).next() == Some(name.as_bytes())
            })
            .unwrap_or_else(|| panic!("no section {name}"))
    }

    /// Each table and `.gnu_debugdata` may end at the file's last byte, not one past it; a
    /// symbol entry is at least 24 bytes in a 64-bit file.
    #[test]
    fn tables_may_end_at_the_files_end_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(dir.path(), "libbounds", SRC, &[]);
        let xz = dir.path().join("mini.xz");
        let lib = with_mini_debuginfo(dir.path(), &so, &xz);
        let path = Path::new("bounds.so");
        let parse = |b: &[u8]| ElfSymbols::parse(path.to_path_buf(), Bytes::Owned(b.to_vec()));
        let set =
            |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        // Each section's size (at 0x20 in its header) set to reach the file's end, then past it.
        for (file, name) in [
            (&so, ".dynsym"),
            (&so, ".dynstr"),
            (&so, ".symtab"),
            (&lib, ".gnu_debugdata"),
        ] {
            let mut b = std::fs::read(file).unwrap();
            let h = section(&b, name);
            let off = u64_at(&b, h + 0x18).unwrap();
            let to_end = b.len() as u64 - off;
            set(&mut b, h + 0x20, to_end);
            assert!(parse(&b).is_ok(), "{name} to the file's end");
            set(&mut b, h + 0x20, to_end + 1);
            let e = parse(&b).err().unwrap().to_string();
            assert!(e.contains("outside the file"), "{name} one byte past: {e}");
        }
        let mut b = std::fs::read(&so).unwrap();
        // The entry size, at 0x38.
        let h = section(&b, ".dynsym");
        set(&mut b, h + 0x38, 23);
        let e = parse(&b).err().unwrap().to_string();
        assert!(e.contains("symbol table outside the file"), "{e}");
    }

    /// A symbol the library imports is in its `.dynsym` too, undefined: not found.
    #[test]
    fn an_imported_symbol_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let src = "extern int imported_elsewhere(int);\nint calls_it(int x) { return imported_elsewhere(x); }\n";
        let so = crate::hook::build_c_lib(dir.path(), "libimports", src, &[]);
        let e = ElfSymbols::open(&so).unwrap();
        assert!(nm(&so, true).iter().all(|s| s.0 != "imported_elsewhere"));
        let names = std::process::Command::new("nm")
            .args(["-D", "--undefined-only"])
            .arg(&so)
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&names.stdout).contains("imported_elsewhere"),
            "the import is in .dynsym"
        );
        let r = e.lookup_many(&["calls_it", "imported_elsewhere"]).unwrap();
        assert!(r[0].is_some());
        assert_eq!(r[1], None);
    }
}
