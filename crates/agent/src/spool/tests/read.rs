//! The hand readers of `incident.json` and `spool.json` (`spool::read`) against the derived
//! `Deserialize` they replaced (still derived, so that this test can compare): every field
//! removed, nulled, given another JSON type or an unknown neighbour is accepted or refused alike,
//! and what both accept reads the same. The errors name the field and its byte offset.

use super::super::read;
use super::super::state::{seal, unseal};
use super::*;

fn full_incident() -> Incident {
    let e = Eviction {
        id: "e1".into(),
        quota: "bytes".into(),
        bytes: 5,
        created_ms: T0,
        at_ms: T0 + 1,
    };
    let l = Loss {
        what: "torn".into(),
        path: "x/y".into(),
        bytes: 7,
        at_ms: T0 + 2,
    };
    Incident {
        version: 1,
        id: "i1".into(),
        created_ms: T0,
        reason: "heap".into(),
        samples: serde_json::json!([{"heap": 1.5}]),
        running_info: serde_json::json!({"pid": 1}),
        policy_version: "p1".into(),
        state: State::Uploading,
        analysis_attempts: 2,
        analysis_error: Some("slow".into()),
        upload_attempts: 3,
        next_attempt_ms: T0 + 9,
        uploads: vec![Upload {
            kind: FileKind::MiniDumpGz,
            size: 10,
            sha256: "ab".into(),
            url: Some("https://c.example/files/1".into()),
            acked: true,
        }],
        rejected: None,
        accounting: Accounting {
            evictions: 1,
            evicted_bytes: 5,
            losses: 1,
            eviction_records: vec![e],
            loss_records: vec![l],
        },
        written: Some(vec![FileKind::MiniDump, FileKind::Report]),
        dump_error: Some("none".into()),
    }
}

fn full_state() -> SpoolState {
    SpoolState {
        retry_after_until_ms: 1,
        budget_day: 2,
        bytes_sent_today: 3,
        pending: full_incident().accounting,
        evictions_total: 4,
        losses_total: 5,
        watch: Some(Watch {
            wall_ms: 6,
            watched_ms: 7,
        }),
        first_seen: [("i1".to_string(), 8u64)].into_iter().collect(),
    }
}

/// Every object in `v` (with its path), for the mutations.
fn objects(v: &Value, path: Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            out.push(path.clone());
            for (k, x) in m {
                let mut p = path.clone();
                p.push(k.clone());
                objects(x, p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let mut p = path.clone();
                p.push(i.to_string());
                objects(x, p, out);
            }
        }
        _ => {}
    }
}

fn at<'v>(v: &'v mut Value, path: &[String]) -> &'v mut Value {
    path.iter().fold(v, |v, k| match v {
        Value::Array(a) => &mut a[k.parse::<usize>().unwrap()],
        _ => &mut v[k.as_str()],
    })
}

/// Both readers on every mutation of `good`'s JSON: the same verdict, the same value.
fn compare<T>(good: &T, read: fn(read::At<'_>) -> std::result::Result<T, read::Bad>)
where
    T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let base = serde_json::to_value(good).unwrap();
    let mut paths = Vec::new();
    objects(&base, Vec::new(), &mut paths);
    let others = [
        Value::Null,
        serde_json::json!("s"),
        serde_json::json!(-1),
        serde_json::json!(1.5),
        serde_json::json!(4294967296u64),
        serde_json::json!(true),
        serde_json::json!([]),
        serde_json::json!({}),
        serde_json::json!("fds"),
        serde_json::json!("analysed"),
    ];
    let mut variants = vec![base.clone()];
    for p in &paths {
        let keys: Vec<String> = match at(&mut base.clone(), p) {
            Value::Object(m) => m.keys().cloned().collect(),
            _ => continue,
        };
        let mut extra = base.clone();
        at(&mut extra, p)["unknownField"] = serde_json::json!(1);
        variants.push(extra);
        for k in keys {
            let mut gone = base.clone();
            at(&mut gone, p).as_object_mut().unwrap().remove(&k);
            variants.push(gone);
            for o in &others {
                let mut changed = base.clone();
                at(&mut changed, p)[k.as_str()] = o.clone();
                variants.push(changed);
            }
        }
    }
    assert!(variants.len() > 100, "{}", variants.len());
    for v in variants {
        let bytes = seal(&v);
        let derived = serde_json::from_value::<T>(v.clone());
        // The readers only: a body sealed from a `Value` (keys sorted) fails the seal itself.
        let ours = read::envelope(&bytes, read).map(|(t, _)| t);
        match (&derived, &ours) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{v}"),
            (Err(_), Err(_)) => {}
            _ => panic!("derived {derived:?}, ours {ours:?} on {v}"),
        }
    }
}

#[test]
fn hand_readers_accept_and_refuse_what_the_derived_ones_did() {
    compare(&full_incident(), read::incident);
    compare(&full_state(), read::spool_state);
    // And the minimal forms: optional fields left out.
    let mut bare = full_incident();
    (bare.written, bare.dump_error, bare.analysis_error) = (None, None, None);
    compare(&bare, read::incident);
    compare(&SpoolState::default(), read::spool_state);
}

#[test]
fn read_errors_name_the_field_and_its_byte() {
    let good = String::from_utf8(seal(&full_incident())).unwrap();
    let bad = good.replacen("\"createdMs\":1800000000000", "\"createdMs\":\"soon\"", 1);
    let e = unseal(bad.as_bytes(), read::incident).unwrap_err();
    let byte = bad.find("\"soon\"").unwrap();
    assert_eq!(
        e,
        format!("not valid sealed JSON: body.createdMs: expected an unsigned integer, found a string (byte {byte})")
    );
    let bad = good.replacen("\"acked\":true", "\"acked\":true,\"extra\":0", 1);
    let e = unseal(bad.as_bytes(), read::incident).unwrap_err();
    assert!(
        e.starts_with("not valid sealed JSON: body.uploads[0].extra: is not a known field (byte "),
        "{e}"
    );
    let bad = good.replacen("\"reason\":\"heap\",", "", 1);
    let e = unseal(bad.as_bytes(), read::incident).unwrap_err();
    assert!(
        e.starts_with("not valid sealed JSON: body.reason: missing (byte "),
        "{e}"
    );
    let e = unseal(&good.as_bytes()[..40], read::incident).unwrap_err();
    assert!(
        e.contains("EOF while parsing") && e.contains("line 1 column 40"),
        "{e}"
    );
    let e = unseal(b"[1]", read::incident).unwrap_err();
    assert_eq!(
        e,
        "not valid sealed JSON: the file: expected an object, found an array"
    );
}
