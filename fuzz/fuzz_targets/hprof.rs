//! Drives the HPROF parser, stripper and restore with arbitrary bytes, cut into chunks at points
//! taken from the input itself. Checks, beyond "no panic, no hang":
//! - the stripped output is the same whatever the chunking;
//! - whatever the stripper accepts, its output parses again and restores;
//! - an input the stripper rejects is rejected at the same offset whatever the chunking;
//! - the parallel stripper (parts of a few records, two threads) writes the same bytes and
//!   reports the same error, message included; so does the mapped stripper that writes on the
//!   parsing thread (small inputs).
#![no_main]

use libfuzzer_sys::fuzz_target;
use hprof::{
    restore, stats::Inspector, strip_bytes, strip_mapped_parts, Level, Stripper,
};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (ctl, input) = (data[0], &data[1..]);
    let level = match ctl % 3 {
        0 => Level::None,
        1 => Level::Arrays,
        _ => Level::App,
    };
    let step = (ctl as usize >> 2) + 1;
    let whole = strip_bytes(input, level);
    let mut s = Stripper::new(level, Vec::new());
    let mut r = Ok(());
    for c in input.chunks(step) {
        r = s.feed(c);
        if r.is_err() {
            break;
        }
    }
    let chunked = r.and_then(|_| s.finish());
    match (&whole, &chunked) {
        (Ok((a, _)), Ok((b, _))) => assert!(a == b, "chunking changed the output"),
        (Err(a), Err(b)) => assert_eq!(a.offset, b.offset, "{a} vs {b}"),
        _ => panic!("whole: {:?}, chunked: {:?}", whole.is_ok(), chunked.is_ok()),
    }
    // The mapped stripper writing on the parsing thread (what `oomguard strip` does under 16 MiB).
    let direct = strip_mapped_parts(input, level, Vec::new(), 0, 0);
    match (&whole, &direct) {
        (Ok(a), Ok(b)) => assert!(a == b, "the direct mapped stripper changed the output"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("whole: {:?}, direct: {:?}", whole.is_ok(), direct.is_ok()),
    }
    let part = 16 + (ctl as u64 & 0x3f);
    let parallel = strip_mapped_parts(input, level, Vec::new(), part, 2);
    match (&whole, &parallel) {
        (Ok(a), Ok(b)) => assert!(a == b, "the parallel stripper changed the output"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("whole: {:?}, parallel: {:?}", whole.is_ok(), parallel.is_ok()),
    }
    if let Ok((out, _)) = whole {
        let mut i = Inspector::new();
        i.feed(&out).expect("stripped output parses");
        i.finish().expect("stripped output is complete");
        restore(&out).expect("stripped output restores");
    }
});
