//! Dates from the system clock's seconds: the civil (proleptic Gregorian, UTC) date of a day
//! count, for the agent's log lines and the collector's pages.

/// The UTC date and time of `secs` seconds since 1970 as `(year, month, day, hour, minute,
/// second)`: days to a date by the usual era arithmetic (eras of 400 years, March-based years,
/// so that the leap day is the last of its year).
pub fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let (days, s) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    let s = s as u32;
    (year, month, day, s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::civil;

    /// The epoch, a leap day, the day after it, the last second of a year, a day far ahead, and a
    /// time whose hour, minute and second all differ.
    #[test]
    fn days_fall_on_their_calendar_dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil(951_782_400 + 3_661), (2000, 2, 29, 1, 1, 1));
        assert_eq!(civil(951_868_800), (2000, 3, 1, 0, 0, 0));
        assert_eq!(civil(1_798_761_599), (2026, 12, 31, 23, 59, 59));
        assert_eq!(civil(4_107_542_400), (2100, 3, 1, 0, 0, 0));
        assert_eq!(civil(1_796_819_696), (2026, 12, 9, 12, 34, 56));
    }
}
