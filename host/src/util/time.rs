//! Timestamps as progress shows them: ISO-8601 UTC with milliseconds, like Spark's
//! `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`.

use std::time::{SystemTime, UNIX_EPOCH};

const MICROS_PER_MILLI: i64 = 1_000;
const MILLIS_PER_DAY: i64 = 86_400_000;

/// Formats microseconds since the Unix epoch as `2026-11-29T08:00:00.000Z` (rounded
/// down to the millisecond; years before 0 or after 9999 get a sign or more digits).
pub fn format_micros_iso(micros: i64) -> String {
    let millis = micros.div_euclid(MICROS_PER_MILLI);
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let of_day = millis.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (of_day / 3_600_000, of_day / 60_000 % 60);
    let (second, milli) = (of_day / 1_000 % 60, of_day % 1_000);
    let year = if year < 0 { format!("-{:04}", -year) } else { format!("{year:04}") };
    format!("{year}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

/// The current time in microseconds since the Unix epoch (0 if the clock is before it).
pub fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 } as u32;
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inverse (Hinnant's `days_from_civil`), to check every day round-trips.
    fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
        let year = if month <= 2 { year - 1 } else { year };
        let era = year.div_euclid(400);
        let year_of_era = year.rem_euclid(400);
        let month = i64::from(month);
        let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
        let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
        era * 146_097 + day_of_era - 719_468
    }

    fn is_leap(year: i64) -> bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_micros_iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_micros_iso(1_795_939_200_000_000), "2026-11-29T08:00:00.000Z");
        assert_eq!(format_micros_iso(951_782_400_123_999), "2000-02-29T00:00:00.123Z");
        assert_eq!(format_micros_iso(1_709_251_199_999_999), "2024-02-29T23:59:59.999Z");
        assert_eq!(format_micros_iso(253_402_300_799_999_000), "9999-12-31T23:59:59.999Z");
        assert_eq!(format_micros_iso(4_102_444_800_000_000), "2100-01-01T00:00:00.000Z");
    }

    #[test]
    fn rounds_instants_before_the_epoch_down() {
        assert_eq!(format_micros_iso(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_micros_iso(-1_000), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_micros_iso(-1_001), "1969-12-31T23:59:59.998Z");
        assert_eq!(format_micros_iso(-86_400_000_000), "1969-12-31T00:00:00.000Z");
        assert_eq!(format_micros_iso(-62_135_596_800_000_000), "0001-01-01T00:00:00.000Z");
        assert_eq!(format_micros_iso(-62_198_755_200_000_000), "-0001-01-01T00:00:00.000Z");
    }

    #[test]
    fn the_extremes_do_not_overflow() {
        assert_eq!(format_micros_iso(i64::MAX), "294247-01-10T04:00:54.775Z");
        assert_eq!(format_micros_iso(i64::MIN), "-290308-12-21T19:59:05.224Z");
    }

    #[test]
    fn every_day_of_four_hundred_years_each_side_of_the_epoch_is_a_valid_date_in_sequence() {
        let mut previous = civil_from_days(-146_097 - 1);
        for days in -146_097..146_097 {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
            let month_length = match month {
                2 if is_leap(year) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            assert!((1..=12).contains(&month) && day >= 1 && day <= month_length, "{year}-{month}-{day}");
            let next_in_month = (previous.0, previous.1, previous.2 + 1);
            let next_month = if previous.1 == 12 { (previous.0 + 1, 1, 1) } else { (previous.0, previous.1 + 1, 1) };
            assert!(
                (year, month, day) == next_in_month || (year, month, day) == next_month,
                "{previous:?} → {year}-{month}-{day}"
            );
            previous = (year, month, day);
        }
    }

    #[test]
    fn now_is_after_2025() {
        assert!(now_micros() > 1_735_689_600_000_000);
    }
}
