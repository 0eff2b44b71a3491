//! Durations written the way Spark users write them: `"10 minutes"`, `"2 min"`,
//! `"30 seconds"`, `"500 ms"`, `"1 hour"`.

use std::time::Duration;

/// Parses `<number> <unit>`; units: us, ms, s/sec/second(s), m/min/minute(s),
/// h/hour(s), d/day(s).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let expected = "expected a duration like \"10 minutes\", \"30 seconds\" or \"500 ms\"";
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a duration; {expected}"))?;
    let micros_per_unit: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "us" | "microsecond" | "microseconds" => 1.0,
        "ms" | "millisecond" | "milliseconds" => 1e3,
        "s" | "sec" | "secs" | "second" | "seconds" => 1e6,
        "m" | "min" | "mins" | "minute" | "minutes" => 60e6,
        "h" | "hour" | "hours" => 3600e6,
        "d" | "day" | "days" => 86_400e6,
        "" => return Err(format!("'{text}' has no unit; {expected}")),
        other => return Err(format!("unknown unit '{other}' in '{text}'; {expected}")),
    };
    let micros = value * micros_per_unit;
    if !micros.is_finite() || micros > 1e17 {
        return Err(format!("'{text}' is too long"));
    }
    Ok(Duration::from_micros(micros.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spark_durations() {
        assert_eq!(parse_duration("10 minutes"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2 min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500 ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1 hour"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("10").unwrap_err().contains("has no unit"));
        assert!(parse_duration("ten minutes").unwrap_err().contains("is not a duration"));
        assert!(parse_duration("3 fortnights").unwrap_err().contains("unknown unit 'fortnights'"));
    }
}
