//! The usual spelling of a TIMESTAMP in JSON, `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, read
//! without a general parser: a column of them read with arrow's `string_to_datetime`
//! took about a tenth of a JSON batch's decoding. Anything else (an offset, a space
//! for `T`, a date alone, a leap second) is left to that parser, which reads this
//! spelling to the same instant.

/// The microseconds since the epoch `text` says, when it is spelled as above (digits
/// past the microsecond dropped, as arrow's parser drops them); `None` for any other
/// spelling or a date or time out of range.
pub(super) fn utc_micros(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || bytes[bytes.len() - 1] != b'Z' {
        return None;
    }
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(at, separator)| bytes[at] != separator) {
        return None;
    }
    let number = |from: usize, to: usize| -> Option<i64> {
        bytes[from..to]
            .iter()
            .try_fold(0i64, |value, &digit| digit.is_ascii_digit().then(|| value * 10 + i64::from(digit - b'0')))
    };
    let (year, month, day) = (number(0, 4)?, number(5, 7)?, number(8, 10)?);
    let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let fraction = &bytes[19..bytes.len() - 1];
    let micros = match fraction.split_first() {
        None => 0,
        Some((b'.', digits)) if !digits.is_empty() && digits.len() <= 9 => {
            let kept = digits.len().min(6);
            let value = number(20, 20 + kept)?;
            number(20 + kept, 20 + digits.len())?;
            value * 10i64.pow((6 - kept) as u32)
        }
        Some(_) => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(seconds * 1_000_000 + micros)
}

/// How many days `month` of `year` has (proleptic Gregorian calendar).
fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the date (proleptic Gregorian; the civil-from-days
/// algorithm's inverse, counted in 400-year eras of 146 097 days that start on 1 March).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use arrow::array::timezone::Tz;
    use arrow::compute::kernels::cast_utils::string_to_datetime;

    use super::*;
    use crate::util::draws::Draws;

    /// arrow's parser: the reference every spelling read here must agree with.
    fn reference(text: &str) -> Option<i64> {
        let utc: Tz = "+00:00".parse().expect("a zone");
        string_to_datetime(&utc, text).ok().map(|time| time.timestamp_micros())
    }

    #[test]
    fn the_usual_spelling_reads_as_arrows_parser_reads_it() {
        let mut draws = Draws(0x2545_f491_4f6c_dd1d);
        let mut next = |below: u64| draws.below(below);
        for _ in 0..20_000 {
            let year = next(10_000);
            let (month, day) = (1 + next(12), 1 + next(31));
            let (hour, minute, second) = (next(24), next(60), next(60));
            let fraction = match next(4) {
                0 => String::new(),
                1 => format!(".{:03}", next(1000)),
                2 => format!(".{:06}", next(1_000_000)),
                _ => format!(".{:09}", next(1_000_000_000)),
            };
            let text = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}Z");
            let ours = utc_micros(&text);
            if ours.is_some() {
                assert_eq!(ours, reference(&text), "{text}");
            } else {
                // Refused here only for a day the month does not have.
                assert!(day > 28, "{text}");
                assert_eq!(reference(&text), None, "{text}");
            }
        }
    }

    #[test]
    fn known_instants_and_other_spellings() {
        assert_eq!(utc_micros("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(utc_micros("2026-11-13T08:00:00.001Z"), Some(1_794_556_800_001_000));
        assert_eq!(utc_micros("1969-12-31T23:59:59.999999Z"), Some(-1));
        assert_eq!(utc_micros("2000-02-29T00:00:00Z"), Some(951_782_400_000_000));
        assert_eq!(utc_micros("2026-11-13T08:00:00.1234567Z"), reference("2026-11-13T08:00:00.1234567Z"));
        // Left to arrow's parser (which reads some of them, to its own rules).
        for text in [
            "1900-02-29T00:00:00Z",
            "2026-11-13T08:00:60Z",
            "2026-11-13 08:00:00Z",
            "2026-11-13T08:00:00+01:00",
            "2026-11-13T08:00:00",
            "2026-11-13T08:00:00.Z",
            "2026-11-13T08:00:00.1234567890Z",
            "2026-11-13T08:00:00,5Z",
            "2026-13-13T08:00:00Z",
            "2026-11-13T24:00:00Z",
            "+2026-11-13T08:00:00Z",
            "2026-11-13t08:00:00z",
            "２026-11-13T08:00:00Z",
        ] {
            assert_eq!(utc_micros(text), None, "{text}");
        }
    }
}
