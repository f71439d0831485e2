//! CRC-32 as gzip computes it (ISO-HDLC: reflected polynomial 0xEDB88320, initial and final value
//! inverted), for the spool's gzip writer.
//!
//! On arm64 it uses the processor's CRC-32 instructions where it has them (the `crc` feature:
//! optional in ARMv8.0, part of ARMv8.1; checked at run time, once; without them a 1 K table, a
//! byte at a time); elsewhere eight 1 K tables, eight bytes a step. Not `crc32fast` (flate2's):
//! its tables were 25 K of the shipped arm64 `.so` (issue 41). Its speed is not needed: the
//! checksum is taken once per incident, on the file deflate is compressing (115 MB of mini dump
//! on x86_64: deflate at level 6 7.1 s, slicing by 8 60 ms, crc32fast 5 ms, a byte at a time
//! 250 ms).
//!
//! Invariant: every path gives the same sums (a test runs each one the machine has against the
//! byte-at-a-time table).

/// CRC-32 (ISO-HDLC, as gzip and zip use it: reflected polynomial 0xEDB88320, initial and final
/// value inverted) of the bytes fed so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Crc32(u32);

/// The byte-at-a-time table of the reflected polynomial, made by the compiler.
const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

impl Crc32 {
    /// Feeds `data`.
    pub fn update(&mut self, data: &[u8]) {
        let c = !self.0;
        #[cfg(target_arch = "aarch64")]
        let c = if std::arch::is_aarch64_feature_detected!("crc") {
            // SAFETY: the processor has the `crc` instructions (checked just above).
            #[allow(unsafe_code)]
            unsafe {
                arm::update(c, data)
            }
        } else {
            table_update(c, data)
        };
        #[cfg(not(target_arch = "aarch64"))]
        let c = slice8_update(c, data);
        self.0 = !c;
    }

    /// The checksum of everything fed.
    pub fn sum(&self) -> u32 {
        self.0
    }
}

fn table_update(mut c: u32, data: &[u8]) -> u32 {
    for &b in data {
        c = TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    c
}

/// Eight tables for eight bytes a step: `SLICE8[k][b]` is byte `b`'s CRC shifted through `k`
/// more zero bytes. Not on arm64, which has the instructions (and keeps its file 7 K smaller).
#[cfg(not(target_arch = "aarch64"))]
const SLICE8: [[u32; 256]; 8] = {
    let mut t = [[0u32; 256]; 8];
    t[0] = TABLE;
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 8 {
            let p = t[k - 1][i];
            t[k][i] = (p >> 8) ^ TABLE[(p & 0xFF) as usize];
            k += 1;
        }
        i += 1;
    }
    t
};

/// Eight bytes a step ("slicing by 8"): about four times the byte-at-a-time speed, so that the
/// checksum stays under 1 % of deflate's time on a mini dump (60 ms against 7.1 s for 115 MB on
/// x86_64; a byte at a time it was 250 ms).
#[cfg(not(target_arch = "aarch64"))]
fn slice8_update(mut c: u32, data: &[u8]) -> u32 {
    let t = &SLICE8;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let lo = c ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let hi = u32::from_le_bytes([w[4], w[5], w[6], w[7]]);
        c = t[7][(lo & 0xFF) as usize]
            ^ t[6][((lo >> 8) & 0xFF) as usize]
            ^ t[5][((lo >> 16) & 0xFF) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xFF) as usize]
            ^ t[2][((hi >> 8) & 0xFF) as usize]
            ^ t[1][((hi >> 16) & 0xFF) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    table_update(c, words.remainder())
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use core::arch::aarch64::{__crc32b, __crc32d};

    /// # Safety
    /// The processor must have the `crc` instructions.
    #[target_feature(enable = "crc")]
    #[allow(unsafe_code)]
    pub(super) unsafe fn update(mut c: u32, data: &[u8]) -> u32 {
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            c = __crc32d(c, u64::from_le_bytes(b));
        }
        for &b in words.remainder() {
            c = __crc32b(c, b);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_values() {
        let crc = |d: &[u8]| {
            let mut c = Crc32::default();
            c.update(d);
            c.sum()
        };
        assert_eq!(crc(b""), 0);
        assert_eq!(crc(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
        // Fed in pieces of every length, including pieces shorter than a word.
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let whole = crc(&data);
        for piece in [1, 3, 7, 8, 9, 64, 4099] {
            let mut c = Crc32::default();
            data.chunks(piece).for_each(|p| c.update(p));
            assert_eq!(c.sum(), whole, "pieces of {piece}");
        }
        assert_eq!(whole, table_update(!0, &data) ^ !0);
        #[cfg(target_arch = "aarch64")]
        if std::arch::is_aarch64_feature_detected!("crc") {
            // SAFETY: the processor has the `crc` instructions (checked just above).
            #[allow(unsafe_code)]
            let hw = unsafe { arm::update(!0, &data) } ^ !0;
            assert_eq!(hw, whole);
        }
    }
}
