//! The gzip member the spool writes for the mini dump's upload (RFC 1952): flate2's raw deflate
//! between a header and a trailer of our own, with our own CRC-32.
//!
//! Why not `flate2::write::GzEncoder`: it brings `crc32fast`, whose tables (16 K for its
//! portable path, 8 K more for the arm64 one) were 25 K of the shipped `.so` (issue 41). The
//! checksum ([`sys::crc32`]) is computed once per incident, on the file being compressed.

use std::io::{self, Write};
use sys::crc32::Crc32;

/// The gzip header flate2 wrote: deflate, no flags, no time, no extra flags, OS unknown (255).
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// A gzip writer over `W`: [`GzWriter::finish`] writes the trailer and gives `W` back.
pub struct GzWriter<W: Write> {
    deflate: flate2::write::DeflateEncoder<W>,
    crc: Crc32,
    len: u32,
}

impl<W: Write> GzWriter<W> {
    /// Writes the header to `out`; `level` is deflate's (0 to 9).
    pub fn new(mut out: W, level: u32) -> io::Result<Self> {
        out.write_all(&HEADER)?;
        Ok(Self {
            deflate: flate2::write::DeflateEncoder::new(out, flate2::Compression::new(level)),
            crc: Crc32::default(),
            len: 0,
        })
    }

    /// Ends the deflate stream and writes the trailer (CRC-32, then the length modulo 2^32).
    pub fn finish(self) -> io::Result<W> {
        let mut out = self.deflate.finish()?;
        out.write_all(&self.crc.sum().to_le_bytes())?;
        out.write_all(&self.len.to_le_bytes())?;
        Ok(out)
    }
}

impl<W: Write> Write for GzWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.deflate.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len = self.len.wrapping_add(n as u32);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.deflate.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn gzip_member_reads_back_with_flate2_and_checks_its_trailer() {
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i % 251) as u8 ^ (i >> 9) as u8)
            .collect();
        let mut w = GzWriter::new(Vec::new(), 6).unwrap();
        for p in data.chunks(7000) {
            w.write_all(p).unwrap();
        }
        let gz = w.finish().unwrap();
        assert_eq!(gz[..10], HEADER);
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
        // The same bytes flate2's GzEncoder wrote before (same header, same deflate, same
        // trailer): a spool's compressed copies do not change with this writer.
        let mut old = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        old.write_all(&data).unwrap();
        assert_eq!(gz, old.finish().unwrap());
        // A damaged checksum is refused by the reader: the trailer is really checked.
        let mut bad = gz.clone();
        let n = bad.len();
        bad[n - 8] ^= 1;
        let mut sink = Vec::new();
        let err = flate2::read::GzDecoder::new(&bad[..]).read_to_end(&mut sink);
        assert!(err.is_err(), "a wrong CRC was accepted");
        // Empty input is a valid member too.
        let empty = GzWriter::new(Vec::new(), 6).unwrap().finish().unwrap();
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&empty[..])
            .read_to_end(&mut back)
            .unwrap();
        assert!(back.is_empty());
    }
}
