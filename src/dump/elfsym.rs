//! Symbols of an ELF shared library read from its file: `.dynsym` and `.symtab`, 32- and 64-bit,
//! little-endian. This is how the fork dumper finds ART's VM-control functions without `dlopen`
//! (which Android 7+ refuses for system libraries from an app's namespace): read the file the
//! library was mapped from, look the names up, add the load bias.
//!
//! Every offset read from the file is bounds-checked: a truncated or hostile file gives an error
//! naming the byte offset, never a panic.

use super::{Error, Result};
use std::path::Path;

/// Which table a symbol came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Dynsym,
    Symtab,
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
    data: memmap2::Mmap,
    is64: bool,
    /// (table, symbols offset, count, entry size, strings offset, strings size)
    tables: Vec<(Table, usize, usize, usize, usize, usize)>,
}

const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
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
        let sect = |i: usize| -> Option<(u32, usize, usize, u32, usize)> {
            let o = shoff.checked_add(i.checked_mul(shentsize)?)?;
            let ty = u32_at(d, o + 4)?;
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
        let mut tables = Vec::new();
        for i in 0..shnum {
            let (ty, off, size, link, entsize) =
                sect(i).ok_or_else(|| bad(path, shoff, "section header table past the end"))?;
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
        Ok(ElfSymbols { data, is64, tables })
    }

    /// Whether the file has a `.symtab` (most release builds keep only `.dynsym`).
    pub fn has_symtab(&self) -> bool {
        self.tables.iter().any(|t| t.0 == Table::Symtab)
    }

    /// Look up each name; `.dynsym` wins over `.symtab`. Undefined symbols are not found.
    pub fn lookup_many(&self, names: &[&str]) -> Vec<Option<Symbol>> {
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

    pub fn lookup(&self, name: &str) -> Option<Symbol> {
        self.lookup_many(&[name]).pop().flatten()
    }
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
        assert!(e.has_symtab());
        let r = e.lookup_many(&[
            "art_like_suspend",
            "exported_counter",
            "hidden_helper",
            "absent",
        ]);
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
        assert!(e.lookup("art_like_suspend").is_some());
        assert!(e.lookup("hidden_helper").is_none());
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
}
