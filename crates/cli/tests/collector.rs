//! The `oomguard collect` executable against what clients may send: a report far larger than
//! any the analyser writes (its memory stays bounded) and text meant for a terminal (`--print`
//! writes no control characters). A real process on loopback, spoken to over raw sockets.

mod common;

use common::collect::Collect;
use std::io::Write;

/// A report in the analyser's schema with `n` leak groups and as many dominators, each with
/// a reference path of five steps (about 1 KB per group).
fn big_report(n: usize) -> Vec<u8> {
    let mut o = Vec::with_capacity(n * 1100);
    o.extend_from_slice(br#"{"runningInfo":{"appVersion":"9.9.9"},"gcPaths":["#);
    let step = r#"{"reference":"com.example.Holder.field","referenceType":"instance field","declaredClass":"com.example.Holder"}"#;
    let path = [step; 5].join(",");
    for i in 0..n {
        if i > 0 {
            o.push(b',');
        }
        write!(
            o,
            r#"{{"instanceCount":{i},"leakReason":"destroyed Activity","gcRoot":"Local variable","signature":"sig{i:037}","path":[{path}],"className":"com.example.Leak{i}","retainedSize":{}}}"#,
            i * 100
        )
        .unwrap();
    }
    o.extend_from_slice(br#"],"dominators":["#);
    for i in 0..n {
        if i > 0 {
            o.push(b',');
        }
        write!(
            o,
            r#"{{"className":"com.example.Big{i}","retainedSize":{i},"count":1,"gcRoot":"Local variable","signature":"dom{i:037}","path":[{path}]}}"#
        )
        .unwrap();
    }
    o.extend_from_slice(b"]}");
    o
}

/// A 40 MB report.json, the index asked for four times, its page and the grouped leaks twice,
/// and the report fetched whole: the
/// collector's peak RSS stays within a small multiple of what one small report took. (It
/// used to parse every report in full for each index, and read whole files for a GET: 1 GB
/// and more.)
#[test]
fn memory_stays_bounded_with_a_huge_report() {
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &[]);
    c.upload("1000-small", "meta", br#"{"reason":"heap three strikes"}"#);
    c.upload("1000-small", "report", &big_report(20));
    c.wait_for("received report 1000-small");
    let (st, _, page) = c.request("GET", "/", &[], &mut &b""[..], 0);
    assert_eq!(st, 200);
    assert!(String::from_utf8_lossy(&page).contains(&format!("sig{:037}", 19)));
    let baseline = c.vm_hwm_kb();

    let big = big_report(40_000);
    assert!(big.len() > 40 << 20, "{}", big.len());
    c.upload("2000-big", "report", &big);
    c.wait_for("received report 2000-big");
    for _ in 0..4 {
        let (st, _, page) = c.request("GET", "/", &[], &mut &b""[..], 0);
        assert_eq!(st, 200);
        let page = String::from_utf8_lossy(&page);
        // The largest groups of the big report are summarised, the small one is still listed.
        assert!(
            page.contains(&format!("sig{:037}", 39_999)),
            "{}",
            &page[..2000.min(page.len())]
        );
        assert!(page.contains("1000-small"));
    }
    // Its page reads the report as a bounded stream, and the grouped leaks come from the
    // summaries.
    for _ in 0..2 {
        let (st, _, page) = c.request("GET", "/incidents/2000-big/", &[], &mut &b""[..], 0);
        assert_eq!(st, 200);
        let page = String::from_utf8_lossy(&page);
        assert!(
            page.contains("39950 more leak group(s) not shown"),
            "{}",
            page.len()
        );
        assert!(page.len() < 1 << 20, "{}", page.len());
        let (st, _, page) = c.request("GET", "/leaks", &[], &mut &b""[..], 0);
        assert_eq!(st, 200);
        assert!(String::from_utf8_lossy(&page).contains("com.example.Leak39999"));
    }
    let (st, _, got) = c.request(
        "GET",
        "/incidents/2000-big/report.json",
        &[],
        &mut &b""[..],
        0,
    );
    assert_eq!(st, 200);
    assert!(
        got == big,
        "the report served differs from the one uploaded"
    );
    let peak = c.vm_hwm_kb();
    eprintln!(
        "collector peak RSS: {baseline} KiB after a small report, {peak} KiB after the 40 MB one"
    );
    assert!(
        peak <= 3 * baseline,
        "peak RSS {peak} KiB, more than 3 x the {baseline} KiB after a small report"
    );
    c.stop();
}

/// `--print` writes a report's reason and signatures to a terminal: escape sequences and other
/// control characters in them (a title change, a screen clear, a C1 CSI) are not written.
#[test]
fn print_strips_control_characters() {
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &[]);
    c.upload(
        "3000-esc",
        "meta",
        "{\"reason\":\"heap \\u001b]0;owned\\u0007\\u001b[2Jred\\u009b31m\\r\\nfake line\"}"
            .as_bytes(),
    );
    c.upload(
        "3000-esc",
        "report",
        "{\"gcPaths\":[{\"signature\":\"sig\\u001b[8m\",\"leakReason\":\"why\\u001b[1A\",\"instanceCount\":3}]}"
            .as_bytes(),
    );
    c.wait_for("received report 3000-esc");
    let out = c.out();
    let line = out
        .lines()
        .find(|l| l.contains("received report 3000-esc"))
        .unwrap()
        .to_string();
    assert!(
        !line.chars().any(|ch| ch.is_control()),
        "control characters written: {line:?}"
    );
    assert!(
        line.contains("red") && line.contains("fake line") && line.contains("sig"),
        "{line:?}"
    );
    c.stop();
}
