//! tus `Upload-Metadata` as the server reads it: `key base64(value)` pairs separated by commas
//! (the agent's `upload::tus::encode_metadata` writes them).

use base64::Engine;

/// Decode tus `Upload-Metadata` (keys without values map to "").
pub fn decode_metadata(s: &str) -> Option<Vec<(String, String)>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = Vec::new();
    for pair in s.split(',') {
        let pair = pair.trim();
        if pair.is_empty() {
            continue;
        }
        let mut it = pair.splitn(2, ' ');
        let k = it.next()?.to_string();
        let v = match it.next() {
            Some(v) => String::from_utf8(b64.decode(v.trim()).ok()?).ok()?,
            None => String::new(),
        };
        out.push((k, v));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_agent_encodes_decodes() {
        let m = oomguard::upload::tus::encode_metadata(&[
            ("incident", "123-4"),
            ("kind", "mini.gz"),
            ("e", ""),
        ]);
        let d = decode_metadata(&m).unwrap();
        assert_eq!(d[0], ("incident".into(), "123-4".into()));
        assert_eq!(d[1], ("kind".into(), "mini.gz".into()));
        assert_eq!(d[2], ("e".into(), "".into()));
        assert!(decode_metadata("k !!!").is_none());
    }
}
