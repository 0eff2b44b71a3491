//! The strict JSON-lines check: every line that is not blank holds exactly one JSON
//! object, written as RFC 8259 says — no trailing or missing commas, comments,
//! `NaN`/`Infinity` literals, single quotes, unescaped control characters, or a record
//! split over lines or sharing its line with another.
//!
//! arrow-json's tape decoder skips any run of commas between members and takes any run
//! of `0-9 + - . e E` as a number, so it cannot be the judge of syntax. This check runs
//! before it on the same bytes: serde_json's validating parser into `IgnoredAny` (no
//! allocation, no values built), line by line. It is the one extra pass the good path
//! pays for strictness (`cargo bench -p eddy --bench json_decode` measures it).

use arrow::error::ArrowError;
use serde::de::IgnoredAny;

/// Checks every line of `bytes`; the first that is not one strict JSON object is an
/// error whose message says what is wrong, at which column, and (for the usual
/// mistakes) what to write instead.
pub(super) fn check_lines(bytes: &[u8]) -> Result<(), ArrowError> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        check_line(&rest[..end])?;
        rest = &rest[(end + 1).min(rest.len())..];
    }
    Ok(())
}

/// Checks one line (without its `\n`); a blank line passes.
fn check_line(line: &[u8]) -> Result<(), ArrowError> {
    let Some(first) = line.iter().position(|b| !b.is_ascii_whitespace()) else {
        return Ok(());
    };
    if let Err(error) = serde_json::from_slice::<IgnoredAny>(line) {
        return Err(ArrowError::JsonError(explain(line, &error)));
    }
    if line[first] != b'{' {
        return Err(ArrowError::JsonError(
            "the line is valid JSON but not an object; a record is a JSON object".into(),
        ));
    }
    Ok(())
}

/// serde_json's message without its line (always 1 here), with the column and a hint.
fn explain(line: &[u8], error: &serde_json::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let mut problem = text.strip_suffix(&position).unwrap_or(&text);
    // serde_json counts columns in bytes from 1 and points at the offending byte,
    // except for a control character, where it points just before it.
    let column = error.column() + usize::from(problem.starts_with("control character"));
    let (before, at) = line.split_at(column.saturating_sub(1).min(line.len()));
    // Ignoring values, serde_json does not name a trailing comma as such.
    if matches!(at.first(), Some(b'}' | b']')) && before.trim_ascii_end().ends_with(b",") {
        problem = "trailing comma";
    } else if problem == "expected ident" {
        problem = "not a JSON literal (true, false or null)";
    }
    format!("invalid JSON at column {column}: {problem}{}", hint(at))
}

/// What to write instead, for the mistakes JSON written by hand or by lenient writers
/// usually makes.
fn hint(at: &[u8]) -> &'static str {
    match at.first() {
        Some(b'/') => " (JSON has no comments)",
        Some(b'\'') => " (JSON strings take double quotes)",
        Some(b'N' | b'I') => {
            " (JSON has no NaN or Infinity; a DOUBLE takes them as the strings \"NaN\", \"Infinity\", \"-Infinity\")"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(line: &str) -> String {
        match check_lines(line.as_bytes()) {
            Ok(()) => "ok".into(),
            Err(ArrowError::JsonError(reason)) => reason,
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn accepts_strict_json_objects_one_per_line_and_blank_lines() {
        let good = "{\"a\":1,\"b\":[1,2.5e3,-0],\"c\":{\"d\":null},\"e\":\"x\\\"\\u00e9\\n\"}\r\n\n  \t\n{ }\n";
        assert_eq!(reason(good), "ok");
        assert_eq!(reason(""), "ok");
        assert_eq!(reason("{\"a\":true}"), "ok");
    }

    #[test]
    fn refuses_what_rfc_8259_refuses_naming_the_column() {
        let cases = [
            ("{\"user\":\"m\",\"amount\":5,}", "invalid JSON at column 24: trailing comma"),
            ("{\"a\":[1,2,]}", "invalid JSON at column 11: trailing comma"),
            ("{\"a\":1,,\"b\":2}", "invalid JSON at column 8: key must be a string"),
            ("{,\"a\":1}", "invalid JSON at column 2: key must be a string"),
            ("{\"a\":1 \"b\":2}", "invalid JSON at column 8: expected `,` or `}`"),
            ("{\"a\":1} // note", "invalid JSON at column 9: trailing characters (JSON has no comments)"),
            ("{\"a\":/* x */1}", "invalid JSON at column 6: expected value (JSON has no comments)"),
            ("{'a':1}", "invalid JSON at column 2: key must be a string (JSON strings take double quotes)"),
            ("{\"a\":'x'}", "invalid JSON at column 6: expected value (JSON strings take double quotes)"),
            (
                "{\"a\":NaN}",
                "invalid JSON at column 6: expected value (JSON has no NaN or Infinity; a DOUBLE takes them as the strings \"NaN\", \"Infinity\", \"-Infinity\")",
            ),
            (
                "{\"a\":Infinity}",
                "invalid JSON at column 6: expected value (JSON has no NaN or Infinity; a DOUBLE takes them as the strings \"NaN\", \"Infinity\", \"-Infinity\")",
            ),
            (
                "{\"a\":-Infinity}",
                "invalid JSON at column 7: invalid number (JSON has no NaN or Infinity; a DOUBLE takes them as the strings \"NaN\", \"Infinity\", \"-Infinity\")",
            ),
            ("{\"a\":01}", "invalid JSON at column 7: invalid number"),
            ("{\"a\":1.}", "invalid JSON at column 8: invalid number"),
            ("{\"a\":.5}", "invalid JSON at column 6: expected value"),
            ("{\"a\":+1}", "invalid JSON at column 6: expected value"),
            ("{\"a\":1e}", "invalid JSON at column 8: invalid number"),
            (
                "{\"a\":\"tab\there\"}",
                "invalid JSON at column 10: control character (\\u0000-\\u001F) found while parsing a string",
            ),
            ("{\"a\":\"\\x\"}", "invalid JSON at column 8: invalid escape"),
            ("{\"a\":1}{\"a\":2}", "invalid JSON at column 8: trailing characters"),
            ("{\"a\":", "invalid JSON at column 5: EOF while parsing a value"),
            ("{\"a\":tru}", "invalid JSON at column 9: not a JSON literal (true, false or null)"),
            ("not json", "invalid JSON at column 2: not a JSON literal (true, false or null)"),
            ("[{\"a\":1}]", "the line is valid JSON but not an object; a record is a JSON object"),
            ("5", "the line is valid JSON but not an object; a record is a JSON object"),
            ("null", "the line is valid JSON but not an object; a record is a JSON object"),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter(|(line, expected)| reason(line) != *expected)
            .map(|(line, _)| format!("{line} gives {}", reason(line)))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn a_record_split_over_two_lines_is_bad() {
        assert_eq!(reason("{\"a\":\n1}\n"), "invalid JSON at column 5: EOF while parsing a value");
    }
}
