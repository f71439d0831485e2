//! The in-memory ELF structures the GOT patcher reads, for the pointer width we are built for.
//!
//! A process only ever loads libraries of its own class, so the loaded-image view is chosen at
//! compile time: ELF64 on 64-bit targets, ELF32 on 32-bit ones (`REL` on arm, `RELA` elsewhere is
//! read from whichever the dynamic section names).

/// One entry of `PT_DYNAMIC`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Dyn {
    pub d_tag: isize,
    pub d_val: usize,
}

#[cfg(target_pointer_width = "64")]
mod width {
    pub type Phdr = libc::Elf64_Phdr;
    pub type Addr = u64;

    /// `Elf64_Rela`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct Rela {
        pub r_offset: u64,
        pub r_info: u64,
        pub r_addend: i64,
    }

    /// `Elf64_Rel`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct Rel {
        pub r_offset: u64,
        pub r_info: u64,
    }

    /// `Elf64_Sym`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct Sym {
        pub st_name: u32,
        pub st_info: u8,
        pub st_other: u8,
        pub st_shndx: u16,
        pub st_value: u64,
        pub st_size: u64,
    }

    pub fn r_sym(info: u64) -> usize {
        (info >> 32) as usize
    }
    pub fn r_type(info: u64) -> u32 {
        (info & 0xffff_ffff) as u32
    }
}

#[cfg(target_pointer_width = "32")]
mod width {
    pub type Phdr = libc::Elf32_Phdr;
    pub type Addr = u32;

    /// `Elf32_Rela`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct Rela {
        pub r_offset: u32,
        pub r_info: u32,
        pub r_addend: i32,
    }

    /// `Elf32_Rel`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct Rel {
        pub r_offset: u32,
        pub r_info: u32,
    }

    /// `Elf32_Sym`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct Sym {
        pub st_name: u32,
        pub st_value: u32,
        pub st_size: u32,
        pub st_info: u8,
        pub st_other: u8,
        pub st_shndx: u16,
    }

    pub fn r_sym(info: u32) -> usize {
        (info >> 8) as usize
    }
    pub fn r_type(info: u32) -> u32 {
        info & 0xff
    }
}

pub use width::*;

pub const PT_LOAD: u32 = 1;
pub const PT_DYNAMIC: u32 = 2;
pub const PT_GNU_RELRO: u32 = 0x6474_e552;
pub const PF_X: u32 = 1;
pub const PF_W: u32 = 2;
pub const PF_R: u32 = 4;

pub const DT_NULL: isize = 0;
pub const DT_PLTRELSZ: isize = 2;
pub const DT_STRTAB: isize = 5;
pub const DT_SYMTAB: isize = 6;
pub const DT_RELA: isize = 7;
pub const DT_RELASZ: isize = 8;
pub const DT_STRSZ: isize = 10;
pub const DT_REL: isize = 17;
pub const DT_RELSZ: isize = 18;
pub const DT_PLTREL: isize = 20;
pub const DT_JMPREL: isize = 23;
/// `DT_LOOS + 2..5`: Android's packed relocation tables (`--pack-dyn-relocs=android`).
pub const DT_ANDROID_REL: isize = 0x6000_000f;
pub const DT_ANDROID_RELSZ: isize = 0x6000_0010;
pub const DT_ANDROID_RELA: isize = 0x6000_0011;
pub const DT_ANDROID_RELASZ: isize = 0x6000_0012;
/// Most relocations one packed table may describe: a group whose offsets and info are shared
/// costs no bytes per relocation, so the count in the header is all that bounds the walk.
pub const MAX_PACKED_RELOCS: u64 = 1 << 24;

/// A reader of signed LEB128 numbers.
struct Sleb<'a> {
    data: &'a [u8],
    at: usize,
}

impl Sleb<'_> {
    fn next(&mut self) -> Result<u64, String> {
        let start = self.at;
        let (mut v, mut shift) = (0u64, 0u32);
        loop {
            let Some(&b) = self.data.get(self.at) else {
                return Err(format!("byte {start}: a number runs past the table's end"));
            };
            self.at += 1;
            if shift < 64 {
                v |= u64::from(b & 0x7f) << shift;
            } else if shift >= 70 {
                return Err(format!("byte {start}: a number longer than 10 bytes"));
            }
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    v |= u64::MAX << shift;
                }
                return Ok(v);
            }
        }
    }
}

/// Decode an Android packed relocation table (`APS2`), calling `f(r_offset, r_info)` for each
/// relocation; `rela` says whether its groups may carry addends (`DT_ANDROID_RELA`, which are
/// decoded and dropped: a GOT slot's addend is not needed to patch it).
///
/// The format, as bionic's loader reads it (`linker_reloc_iterators.h`): the magic `APS2`, then
/// signed LEB128 numbers: the relocation count, the first offset, then groups of
/// `size, flags`, followed (by flag) by the group's offset delta (2), its info (1) and, with an
/// addend (8) grouped (4), the addend delta; then per relocation the fields the group does not
/// share: offset delta, info, addend delta. Offsets and addends accumulate with wrapping
/// arithmetic, as the loader's `size_t` does. Errors name the byte offset in the table.
pub fn for_packed_relocs(
    data: &[u8],
    rela: bool,
    mut f: impl FnMut(u64, u64),
) -> Result<(), String> {
    const BY_INFO: u64 = 1;
    const BY_OFFSET_DELTA: u64 = 2;
    const BY_ADDEND: u64 = 4;
    const HAS_ADDEND: u64 = 8;
    if data.get(..4) != Some(b"APS2") {
        return Err("byte 0: no APS2 magic".into());
    }
    let mut r = Sleb { data, at: 4 };
    let count = r.next()?;
    if count > MAX_PACKED_RELOCS {
        return Err(format!("byte 4: {count} relocations, more than we read"));
    }
    let mut offset = r.next()?;
    let mut info = 0u64;
    let mut done = 0u64;
    while done < count {
        let size = r.next()?;
        let flags = r.next()?;
        if size == 0 || size > count - done {
            return Err(format!(
                "byte {}: a group of {size} relocations where {} remain",
                r.at,
                count - done
            ));
        }
        if !rela && flags & HAS_ADDEND != 0 {
            return Err(format!(
                "byte {}: a group with addends in a REL table",
                r.at
            ));
        }
        let delta = if flags & BY_OFFSET_DELTA != 0 {
            r.next()?
        } else {
            0
        };
        if flags & BY_INFO != 0 {
            info = r.next()?;
        }
        let addend_each = flags & (HAS_ADDEND | BY_ADDEND) == HAS_ADDEND;
        if flags & (HAS_ADDEND | BY_ADDEND) == HAS_ADDEND | BY_ADDEND {
            r.next()?;
        }
        for _ in 0..size {
            offset = offset.wrapping_add(if flags & BY_OFFSET_DELTA != 0 {
                delta
            } else {
                r.next()?
            });
            if flags & BY_INFO == 0 {
                info = r.next()?;
            }
            if addend_each {
                r.next()?;
            }
            f(offset, info);
        }
        done += size;
    }
    Ok(())
}

/// `(JUMP_SLOT, GLOB_DAT)` relocation types of the architecture we are built for.
#[cfg(target_arch = "x86_64")]
pub const SLOT_RELOCS: (u32, u32) = (7, 6);
#[cfg(target_arch = "x86")]
pub const SLOT_RELOCS: (u32, u32) = (7, 6);
#[cfg(target_arch = "aarch64")]
pub const SLOT_RELOCS: (u32, u32) = (1026, 1025);
#[cfg(target_arch = "arm")]
pub const SLOT_RELOCS: (u32, u32) = (22, 21);
#[cfg(target_arch = "riscv64")]
pub const SLOT_RELOCS: (u32, u32) = (5, 2);

#[cfg(test)]
mod tests {
    use super::*;

    /// Signed LEB128, for hand-made tables.
    fn sleb(mut v: i64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            let done = (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0);
            out.push(if done { b } else { b | 0x80 });
            if done {
                return;
            }
        }
    }

    fn table(nums: &[i64]) -> Vec<u8> {
        let mut t = b"APS2".to_vec();
        for &n in nums {
            sleb(n, &mut t);
        }
        t
    }

    fn decode(t: &[u8], rela: bool) -> Result<Vec<(u64, u64)>, String> {
        let mut out = Vec::new();
        for_packed_relocs(t, rela, |o, i| out.push((o, i)))?;
        Ok(out)
    }

    #[test]
    fn packed_groups_decode_each_way_of_sharing_fields() {
        // 5 relocations from offset 0x1000:
        //  a group of 2 sharing offset delta 8 and info 7 (R_X86_64_JUMP_SLOT of sym 0);
        //  a group of 2 with grouped addend, per-relocation offset delta (one negative) and info;
        //  a group of 1 with an addend of its own per relocation.
        let t = table(&[
            5,
            0x1000, //
            2,
            3,
            8,
            7, //
            2,
            1 | 4 | 8,
            0x5_0000_0006,
            100,
            16,
            -8, //
            1,
            8,
            24,
            0x2_0000_0006,
            -4,
        ]);
        let got = decode(&t, true).unwrap();
        assert_eq!(
            got,
            vec![
                (0x1008, 7),
                (0x1010, 7),
                (0x1020, 0x5_0000_0006),
                (0x1018, 0x5_0000_0006),
                (0x1030, 0x2_0000_0006),
            ]
        );
        // Addends are not allowed in a REL table (32-bit arm).
        let e = decode(&t, false).unwrap_err();
        assert!(e.contains("addends in a REL table"), "{e}");
    }

    #[test]
    fn corrupt_packed_tables_are_errors_with_offsets() {
        assert_eq!(decode(b"APS1", true).unwrap_err(), "byte 0: no APS2 magic");
        let t = table(&[3, 0x1000, 2, 0, 8]);
        let e = decode(&t, true).unwrap_err();
        assert!(e.contains("runs past the table's end"), "{e}");
        let e = decode(&table(&[2, 0, 3, 3, 8, 7]), true).unwrap_err();
        assert!(e.contains("a group of 3 relocations where 2 remain"), "{e}");
        let e = decode(&table(&[i64::MAX, 0]), true).unwrap_err();
        assert!(e.contains("more than we read"), "{e}");
        let mut t = b"APS2".to_vec();
        t.extend([0xff; 12]);
        let e = decode(&t, true).unwrap_err();
        assert_eq!(e, "byte 4: a number longer than 10 bytes");
        // A group of 0 would loop forever.
        assert!(decode(&table(&[1, 0, 0, 3, 8, 7]), true).is_err());
    }

    #[test]
    fn a_rel_table_decodes_groups_without_addends() {
        // 32-bit arm's DT_ANDROID_REL: a group of 2 sharing its offset delta and info, then a
        // group of 1 that shares nothing.
        let t = table(&[3, 0x2000, 2, 3, 4, 0x116, 1, 0, 8, 0x216]);
        assert_eq!(
            decode(&t, false).unwrap(),
            vec![(0x2004, 0x116), (0x2008, 0x116), (0x2010, 0x216)]
        );
    }

    #[test]
    fn each_relocations_own_addend_is_read_past() {
        // A group of 2 sharing info, each relocation with its own offset delta and addend, then
        // a group after them: no addend is taken for the next number.
        let t = table(&[3, 0x1000, 2, 8 | 1, 7, 8, 100, 8, -100, 1, 3, 8, 6]);
        assert_eq!(
            decode(&t, true).unwrap(),
            vec![(0x1008, 7), (0x1010, 7), (0x1018, 6)]
        );
    }

    #[test]
    fn the_relocation_count_and_each_group_are_bounded_exactly() {
        // The largest count is taken (the table then ends), one more is refused.
        assert_eq!(
            decode(&table(&[1 << 24, 0]), true).unwrap_err(),
            "byte 9: a number runs past the table's end"
        );
        assert_eq!(
            decode(&table(&[(1 << 24) + 1, 0]), true).unwrap_err(),
            "byte 4: 16777217 relocations, more than we read"
        );
        // A group larger than what the groups before it left.
        assert_eq!(
            decode(&table(&[3, 0, 2, 3, 8, 7, 2, 3, 8, 7]), true).unwrap_err(),
            "byte 12: a group of 2 relocations where 1 remain"
        );
    }
}
