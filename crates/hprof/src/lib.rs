//! The HPROF format: records, identifiers, an incremental parser fed any chunking, the stripper,
//! restore, and a writer for tests.
//!
//! Owns:
//! - [`Parser`]: a push parser. It is fed bytes in chunks of any size (one byte, a megabyte, a cut
//!   in the middle of a record header) and calls a [`Visitor`] with whole record heads and with the
//!   contents of arrays in element-aligned pieces. Its memory is bounded by the largest record
//!   *head* (a class dump, an instance's field values, a string record), never by an array's size.
//! - [`Stripper`]: consumes the same chunks and writes a smaller, still valid HPROF to a [`Sink`]
//!   that can patch bytes it already wrote (segment lengths).
//! - [`restore`](mod@restore): turns a stripped file back into a 1.0.2/1.0.3 file every tool opens.
//! - [`writer`]: builds dumps byte by byte, including ART-style ones, for tests and benches.
//!
//! Invariants:
//! - No I/O of its own except through [`Sink`]; no `unsafe`.
//! - After the parser has been set up, feeding it allocates nothing unless a record head outgrows
//!   the preallocated buffer (and never past [`ParserLimits::max_head`]). The stripper's output
//!   buffer is preallocated too, so it can run inside a `write` hook.
//! - Every error names the byte offset in the input where the problem is.
#![forbid(unsafe_code)]

mod parser;
pub mod restore;
pub mod stats;
mod strip;
pub mod writer;

pub use parser::{ClassDump, Parser, ParserLimits, Record, Sub, Visitor};
pub use restore::{restore, Restorer};
pub use strip::{
    strip_bytes, strip_mapped, strip_mapped_parts, FileSink, Level, Sink, StripStats, Stripper,
};

use std::fmt;

/// The JNI reference id of the `ROOT_JNI_GLOBAL` records the `app` strip writes for the objects
/// a dropped zygote or image object referenced (`OOMG` in ASCII; ART writes 0 there). The
/// analyser reads such a root as "held by a stripped zygote/image object".
pub const STRIPPED_HOLDER_MARK: u64 = 0x4F4F_4D47;

/// Top-level record tags.
pub mod tag {
    pub const UTF8: u8 = 0x01;
    pub const LOAD_CLASS: u8 = 0x02;
    pub const UNLOAD_CLASS: u8 = 0x03;
    pub const FRAME: u8 = 0x04;
    pub const TRACE: u8 = 0x05;
    pub const ALLOC_SITES: u8 = 0x06;
    pub const HEAP_SUMMARY: u8 = 0x07;
    pub const START_THREAD: u8 = 0x0A;
    pub const END_THREAD: u8 = 0x0B;
    pub const HEAP_DUMP: u8 = 0x0C;
    pub const CPU_SAMPLES: u8 = 0x0D;
    pub const CONTROL_SETTINGS: u8 = 0x0E;
    pub const HEAP_DUMP_SEGMENT: u8 = 0x1C;
    pub const HEAP_DUMP_END: u8 = 0x2C;

    /// A short name for a top-level tag, `None` for a tag HPROF does not define.
    pub fn name(tag: u8) -> Option<&'static str> {
        Some(match tag {
            UTF8 => "UTF8",
            LOAD_CLASS => "LOAD_CLASS",
            UNLOAD_CLASS => "UNLOAD_CLASS",
            FRAME => "FRAME",
            TRACE => "TRACE",
            ALLOC_SITES => "ALLOC_SITES",
            HEAP_SUMMARY => "HEAP_SUMMARY",
            START_THREAD => "START_THREAD",
            END_THREAD => "END_THREAD",
            HEAP_DUMP => "HEAP_DUMP",
            CPU_SAMPLES => "CPU_SAMPLES",
            CONTROL_SETTINGS => "CONTROL_SETTINGS",
            HEAP_DUMP_SEGMENT => "HEAP_DUMP_SEGMENT",
            HEAP_DUMP_END => "HEAP_DUMP_END",
            _ => return None,
        })
    }
}

/// Heap dump sub-record tags, including Android's additions.
pub mod sub {
    pub const ROOT_UNKNOWN: u8 = 0xFF;
    pub const ROOT_JNI_GLOBAL: u8 = 0x01;
    pub const ROOT_JNI_LOCAL: u8 = 0x02;
    pub const ROOT_JAVA_FRAME: u8 = 0x03;
    pub const ROOT_NATIVE_STACK: u8 = 0x04;
    pub const ROOT_STICKY_CLASS: u8 = 0x05;
    pub const ROOT_THREAD_BLOCK: u8 = 0x06;
    pub const ROOT_MONITOR_USED: u8 = 0x07;
    pub const ROOT_THREAD_OBJECT: u8 = 0x08;
    pub const CLASS_DUMP: u8 = 0x20;
    pub const INSTANCE_DUMP: u8 = 0x21;
    pub const OBJECT_ARRAY_DUMP: u8 = 0x22;
    pub const PRIMITIVE_ARRAY_DUMP: u8 = 0x23;
    // Android (1.0.3)
    pub const ROOT_INTERNED_STRING: u8 = 0x89;
    pub const ROOT_FINALIZING: u8 = 0x8A;
    pub const ROOT_DEBUGGER: u8 = 0x8B;
    pub const ROOT_REFERENCE_CLEANUP: u8 = 0x8C;
    pub const ROOT_VM_INTERNAL: u8 = 0x8D;
    pub const ROOT_JNI_MONITOR: u8 = 0x8E;
    pub const ROOT_UNREACHABLE: u8 = 0x90;
    pub const PRIMITIVE_ARRAY_NODATA_DUMP: u8 = 0xC3;
    pub const HEAP_DUMP_INFO: u8 = 0xFE;

    /// A short name for a sub-record tag, `None` for a tag no VM writes.
    pub fn name(tag: u8) -> Option<&'static str> {
        Some(match tag {
            ROOT_UNKNOWN => "ROOT_UNKNOWN",
            ROOT_JNI_GLOBAL => "ROOT_JNI_GLOBAL",
            ROOT_JNI_LOCAL => "ROOT_JNI_LOCAL",
            ROOT_JAVA_FRAME => "ROOT_JAVA_FRAME",
            ROOT_NATIVE_STACK => "ROOT_NATIVE_STACK",
            ROOT_STICKY_CLASS => "ROOT_STICKY_CLASS",
            ROOT_THREAD_BLOCK => "ROOT_THREAD_BLOCK",
            ROOT_MONITOR_USED => "ROOT_MONITOR_USED",
            ROOT_THREAD_OBJECT => "ROOT_THREAD_OBJECT",
            CLASS_DUMP => "CLASS_DUMP",
            INSTANCE_DUMP => "INSTANCE_DUMP",
            OBJECT_ARRAY_DUMP => "OBJECT_ARRAY_DUMP",
            PRIMITIVE_ARRAY_DUMP => "PRIMITIVE_ARRAY_DUMP",
            ROOT_INTERNED_STRING => "ROOT_INTERNED_STRING",
            ROOT_FINALIZING => "ROOT_FINALIZING",
            ROOT_DEBUGGER => "ROOT_DEBUGGER",
            ROOT_REFERENCE_CLEANUP => "ROOT_REFERENCE_CLEANUP",
            ROOT_VM_INTERNAL => "ROOT_VM_INTERNAL",
            ROOT_JNI_MONITOR => "ROOT_JNI_MONITOR",
            ROOT_UNREACHABLE => "ROOT_UNREACHABLE",
            PRIMITIVE_ARRAY_NODATA_DUMP => "PRIMITIVE_ARRAY_NODATA_DUMP",
            HEAP_DUMP_INFO => "HEAP_DUMP_INFO",
            _ => return None,
        })
    }

    /// Whether a sub-record tag is a GC root.
    pub fn is_root(tag: u8) -> bool {
        matches!(tag, 0x01..=0x08 | 0x89..=0x8E | 0x90 | 0xFF)
    }
}

/// HPROF format version, from the header string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `JAVA PROFILE 1.0.1`
    V101,
    /// `JAVA PROFILE 1.0.2` (heap dump segments)
    V102,
    /// `JAVA PROFILE 1.0.3` (Android)
    V103,
}

impl Format {
    /// The header string without its NUL.
    pub fn magic(self) -> &'static str {
        match self {
            Format::V101 => "JAVA PROFILE 1.0.1",
            Format::V102 => "JAVA PROFILE 1.0.2",
            Format::V103 => "JAVA PROFILE 1.0.3",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.magic())
    }
}

/// The magic strings all have this length; the NUL follows at this offset.
pub const MAGIC_LEN: usize = 18;
/// Length of the file header: magic, NUL, u32 id size, u64 timestamp.
pub const HEADER_LEN: usize = MAGIC_LEN + 1 + 4 + 8;
/// Byte offset of the version digit that tells 1.0.1, 1.0.2 and 1.0.3 apart.
pub const VERSION_DIGIT_OFFSET: usize = MAGIC_LEN - 1;

/// The file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub format: Format,
    /// Size of object identifiers: 4 or 8.
    pub id_size: u32,
    /// Milliseconds since the epoch.
    pub timestamp_ms: u64,
}

/// The type of a field or of an array's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BasicType {
    Object = 2,
    Boolean = 4,
    Char = 5,
    Float = 6,
    Double = 7,
    Byte = 8,
    Short = 9,
    Int = 10,
    Long = 11,
}

impl BasicType {
    pub fn from_u8(v: u8) -> Option<BasicType> {
        Some(match v {
            2 => BasicType::Object,
            4 => BasicType::Boolean,
            5 => BasicType::Char,
            6 => BasicType::Float,
            7 => BasicType::Double,
            8 => BasicType::Byte,
            9 => BasicType::Short,
            10 => BasicType::Int,
            11 => BasicType::Long,
            _ => return None,
        })
    }

    /// Size in bytes of one value of this type in the dump.
    pub fn size(self, id_size: u32) -> u32 {
        match self {
            BasicType::Object => id_size,
            BasicType::Boolean | BasicType::Byte => 1,
            BasicType::Char | BasicType::Short => 2,
            BasicType::Float | BasicType::Int => 4,
            BasicType::Double | BasicType::Long => 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BasicType::Object => "object",
            BasicType::Boolean => "boolean",
            BasicType::Char => "char",
            BasicType::Float => "float",
            BasicType::Double => "double",
            BasicType::Byte => "byte",
            BasicType::Short => "short",
            BasicType::Int => "int",
            BasicType::Long => "long",
        }
    }
}

/// What went wrong, and where in the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset}: {what}")]
pub struct Error {
    /// Byte offset in the input (the start of the offending record or field, or the end of a
    /// truncated input).
    pub offset: u64,
    pub what: String,
}

impl Error {
    pub fn new(offset: u64, what: impl Into<String>) -> Error {
        Error {
            offset,
            what: what.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// How the message of an [`Error`] caused by the output (a full disk), not the input, begins.
pub const OUTPUT_FAILED: &str = "writing the output failed: ";

impl Error {
    /// The error came from writing the output, not from the input.
    pub fn is_output(&self) -> bool {
        self.what.starts_with(OUTPUT_FAILED)
    }
}

/// Read a big-endian identifier of `id_size` bytes (4 or 8) from the start of `b`.
#[inline(always)]
pub fn read_id(b: &[u8], id_size: u32) -> u64 {
    // One bounds check and one load (indexing byte by byte made eight checked byte loads).
    if id_size == 4 {
        u32::from_be_bytes(b[..4].try_into().expect("4 bytes")) as u64
    } else {
        u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
    }
}

#[inline(always)]
pub fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[inline(always)]
pub fn read_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
