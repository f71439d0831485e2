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
