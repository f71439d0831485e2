//! Fuzz the policy parser: any bytes either parse into a policy that round-trips through its
//! own JSON form, or are rejected with an error; nothing panics, nothing hangs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oomguard::policy::{remote, Policy};

fuzz_target!(|data: &[u8]| {
    match Policy::parse(data) {
        Ok(parsed) => {
            let again = Policy::parse(parsed.policy.to_json().as_bytes())
                .expect("a valid policy's own JSON parses");
            assert_eq!(again.policy, parsed.policy, "round trip changed the policy");
            assert!(again.unknown.is_empty());
            // The remote acceptance path on the same bytes agrees with the parser.
            let active = Policy::default();
            let _ = remote::accept(data, None, None, &active, 1 << 20, 0);
        }
        Err(e) => {
            // Every error renders, and says what the agent did.
            assert!(e.to_string().contains("last good policy stays active"));
        }
    }
});
