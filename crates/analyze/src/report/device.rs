//! The device a dump comes from, for the library leaks' API ranges: the incident's running info
//! (`apiLevel`, `manufacturer`, which the agent records), else, for the API level, what the dump
//! itself holds: `android.os.Build$VERSION.SDK_INT`, a static int of a class dump, which every
//! strip keeps. (`Build.MANUFACTURER` is a string: its contents are gone from a stripped dump,
//! so it is taken from the running info only.)
#![forbid(unsafe_code)]

use super::{Error, Index, Input};
use crate::library::Device;
use hprof::BasicType;
use hprof::{Sub, Visitor};

/// The class whose static `SDK_INT` is the API level.
const VERSION_CLASS: &str = "android.os.Build$VERSION";

/// The device of `running_info`, its API level read from the dump when the running info has
/// none (a dump analysed on its own).
pub(super) fn device(
    ix: &Index,
    input: &Input<'_>,
    running_info: &serde_json::Value,
) -> Result<Device, Error> {
    let mut d = Device::from_running_info(running_info);
    if d.api.is_none() {
        d.api = sdk_int(ix, input)?;
    }
    Ok(d)
}

/// `Build.VERSION.SDK_INT` as the dump holds it, if it has the class and the value is one.
fn sdk_int(ix: &Index, input: &Input<'_>) -> Result<Option<u32>, Error> {
    let Some(class) = ix.classes.iter().find(|c| c.name == VERSION_CLASS) else {
        return Ok(None);
    };
    let mut v = SdkInt {
        ix,
        class: class.id,
        found: None,
    };
    input.pass_segments(&ix.segments, &[class.id], &mut v)?;
    Ok(v.found
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n > 0 && n < 10_000))
}

struct SdkInt<'a> {
    ix: &'a Index,
    class: u64,
    found: Option<i32>,
}

impl Visitor for SdkInt<'_> {
    fn sub(&mut self, _offset: u64, s: &Sub<'_>, _raw: &[u8]) -> Result<(), String> {
        if let Sub::Class(c) = s {
            if c.id == self.class && self.found.is_none() {
                self.found = c
                    .statics()
                    .find(|(name, ty, _)| {
                        *ty == BasicType::Int
                            && self.ix.strings.get(*name).as_deref() == Some("SDK_INT")
                    })
                    .map(|(_, _, b)| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            }
        }
        Ok(())
    }
}
