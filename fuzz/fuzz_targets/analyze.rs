//! Drives the heap analyser with arbitrary bytes. Checks, beyond "no panic, no hang":
//! - the one-pass graph (dumps whose classes come first) and the two passes give the same
//!   report, or the same error, message and offset included;
//! - so does parsing in parts side by side (parts as small as the input allows, two threads)
//!   against one thread, in one pass and in two (whose workers share the node arrays).
#![no_main]

use libfuzzer_sys::fuzz_target;
use analyze::{analyze, Config, Input};

/// The report as JSON without its timings and the number of parts (which differ by design),
/// or the error's text.
fn outcome(data: &[u8], cfg: &Config) -> Result<serde_json::Value, String> {
    match analyze(Input::Bytes(data), cfg, serde_json::Value::Null) {
        Ok(r) => {
            let mut v = serde_json::to_value(&r).expect("a report serializes");
            v["analysis"]["timings"] = serde_json::Value::Null;
            v["analysis"]["parseParts"] = serde_json::Value::Null;
            Ok(v)
        }
        Err(e) => Err(e.to_string()),
    }
}

fuzz_target!(|data: &[u8]| {
    let base = Config {
        threads: 1,
        parallel_min_bytes: 0,
        ..Config::default()
    };
    let one = outcome(data, &base);
    let two = outcome(
        data,
        &Config {
            one_pass: false,
            ..base.clone()
        },
    );
    assert_eq!(one, two, "one pass against two");
    let parts = outcome(
        data,
        &Config {
            threads: 2,
            ..base.clone()
        },
    );
    assert_eq!(one, parts, "one thread against two parts");
    let two_parts = outcome(
        data,
        &Config {
            threads: 2,
            one_pass: false,
            ..base.clone()
        },
    );
    assert_eq!(one, two_parts, "one thread against two parts, two passes");
});
