//! Every row of the README's table of what each column type takes from JSON: each
//! accepted example with the value it must decode to (worked out by hand), each
//! refused one with its exact reason.

use arrow::array::{
    Array, BinaryArray, BooleanArray, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
};

use crate::decode::json::decode;
use crate::pipeline::parse_schema;

/// Decodes `{"v": <value>}` (or `{}` for `None`) in a one-column schema `v <ddl_type>`:
/// the decoded column, or the record's reason.
fn one(ddl_type: &str, value: Option<&str>) -> Result<arrow::array::ArrayRef, String> {
    let schema = parse_schema(&format!("v {ddl_type}")).expect("schema");
    let line = value.map_or_else(|| "{}".to_string(), |value| format!("{{\"other\": 1, \"v\": {value}}}\n"));
    let decoded = decode(line.as_bytes(), &schema, false, crate::decode::Cores::All).expect("decodes");
    match decoded.bad_records.as_slice() {
        [] => {
            assert_eq!(decoded.rows.num_rows(), 1, "{line}");
            Ok(decoded.rows.column(0).clone())
        }
        [bad] => {
            assert_eq!(decoded.rows.num_rows(), 0, "{line}");
            Err(bad.reason.clone())
        }
        many => panic!("{} bad records for one line", many.len()),
    }
}

fn refused(ddl_type: &str, cases: &[(&str, &str)]) {
    for (value, reason) in cases {
        assert_eq!(one(ddl_type, Some(value)).map(|_| ()), Err(format!("column 'v': {reason}")), "{ddl_type} {value}");
    }
}

#[test]
fn string_takes_strings_and_any_other_value_as_its_json_text() {
    let cases = [
        ("\"alice\"", "alice"),
        ("\"\\u00e9\\n\\\"\"", "é\n\""),
        ("\"\"", ""),
        ("5", "5"),
        ("1.50", "1.50"),
        ("-1.50e3", "-1.50e3"),
        ("true", "true"),
        ("false", "false"),
        ("{\"a\": [1, \"x\\\"y\", null, {}], \"b\": false}", "{\"a\":[1,\"x\\\"y\",null,{}],\"b\":false}"),
        ("{\"a\": [1]}", "{\"a\":[1]}"),
        ("[]", "[]"),
    ];
    for (value, expected) in cases {
        let column = one("STRING", Some(value)).expect(value);
        let strings = column.as_any().downcast_ref::<StringArray>().expect("strings");
        assert_eq!(strings.value(0), expected, "{value}");
    }
}

#[test]
fn bigint_takes_integers_only() {
    let cases = [("5", 5), ("-0", 0), ("9223372036854775807", i64::MAX), ("-9223372036854775808", i64::MIN)];
    for (value, expected) in cases {
        let column = one("BIGINT", Some(value)).expect(value);
        assert_eq!(column.as_any().downcast_ref::<Int64Array>().expect("ints").value(0), expected, "{value}");
    }
    refused(
        "BIGINT",
        &[
            ("1.5", "expected an integer for BIGINT, got 1.5"),
            ("1.0", "expected an integer for BIGINT, got 1.0"),
            ("1e3", "expected an integer for BIGINT, got 1e3"),
            ("9223372036854775808", "9223372036854775808 is out of BIGINT's range"),
            ("-9223372036854775809", "-9223372036854775809 is out of BIGINT's range"),
            ("\"123\"", "expected an integer for BIGINT, got \"123\""),
            ("\"\"", "expected an integer for BIGINT, got \"\""),
            ("true", "expected an integer for BIGINT, got true"),
            ("{\"n\": 1}", "expected an integer for BIGINT, got an object"),
            ("[1]", "expected an integer for BIGINT, got an array"),
        ],
    );
}

#[test]
fn double_takes_numbers_and_sparks_names_of_nan_and_infinities() {
    let cases = [
        ("2", 2.0),
        ("-1.5e3", -1500.0),
        ("0.1", 0.1),
        ("1e-400", 0.0),
        ("\"Infinity\"", f64::INFINITY),
        ("\"+Infinity\"", f64::INFINITY),
        ("\"+INF\"", f64::INFINITY),
        ("\"-Infinity\"", f64::NEG_INFINITY),
        ("\"-INF\"", f64::NEG_INFINITY),
    ];
    for (value, expected) in cases {
        let column = one("DOUBLE", Some(value)).expect(value);
        assert_eq!(column.as_any().downcast_ref::<Float64Array>().expect("doubles").value(0), expected, "{value}");
    }
    let nan = one("DOUBLE", Some("\"NaN\"")).expect("NaN");
    assert!(nan.as_any().downcast_ref::<Float64Array>().expect("doubles").value(0).is_nan());
    let takes = "expected a number, \"NaN\", \"Infinity\" or \"-Infinity\" for DOUBLE";
    refused(
        "DOUBLE",
        &[
            ("1e400", "1e400 is out of DOUBLE's range"),
            ("-1e400", "-1e400 is out of DOUBLE's range"),
            ("\"1.5\"", &format!("{takes}, got \"1.5\"")),
            ("\"nan\"", &format!("{takes}, got \"nan\"")),
            ("\"\"", &format!("{takes}, got \"\"")),
            ("true", &format!("{takes}, got true")),
            ("{}", &format!("{takes}, got an object")),
            ("[1.5]", &format!("{takes}, got an array")),
        ],
    );
}

#[test]
fn boolean_takes_true_and_false_only() {
    for (value, expected) in [("true", true), ("false", false)] {
        let column = one("BOOLEAN", Some(value)).expect(value);
        assert_eq!(column.as_any().downcast_ref::<BooleanArray>().expect("bools").value(0), expected);
    }
    refused(
        "BOOLEAN",
        &[
            ("\"true\"", "expected true or false for BOOLEAN, got \"true\""),
            ("1", "expected true or false for BOOLEAN, got 1"),
            ("0", "expected true or false for BOOLEAN, got 0"),
            ("{}", "expected true or false for BOOLEAN, got an object"),
            ("[true]", "expected true or false for BOOLEAN, got an array"),
        ],
    );
}

#[test]
fn binary_takes_hex_strings_two_digits_per_byte() {
    for (value, expected) in [("\"cafe\"", &[0xca, 0xfe][..]), ("\"CAFE01\"", &[0xca, 0xfe, 0x01]), ("\"\"", &[])] {
        let column = one("BINARY", Some(value)).expect(value);
        assert_eq!(column.as_any().downcast_ref::<BinaryArray>().expect("binary").value(0), expected, "{value}");
    }
    let takes = "expected a string of hex digits (two per byte) for BINARY";
    refused(
        "BINARY",
        &[
            ("\"abc\"", "\"abc\" has an odd number of hex digits; BINARY takes two per byte"),
            ("\"zz\"", &format!("{takes}, got \"zz\"")),
            ("\"0x12\"", &format!("{takes}, got \"0x12\"")),
            ("5", &format!("{takes}, got 5")),
            ("[1, 2]", &format!("{takes}, got an array")),
        ],
    );
}

#[test]
fn timestamp_takes_rfc_3339_text_or_integer_microseconds() {
    // 2024-01-01T00:00:00Z is 19 723 days after the epoch: 1 704 067 200 s.
    let midnight = 1_704_067_200_000_000;
    let cases = [
        ("\"2024-01-01T00:00:01Z\"", midnight + 1_000_000),
        ("\"2024-01-01T01:00:01+01:00\"", midnight + 1_000_000),
        ("\"2023-12-31T23:00:01-01:00\"", midnight + 1_000_000),
        ("\"2024-01-01 00:00:01Z\"", midnight + 1_000_000),
        ("\"2024-01-01T00:00:01\"", midnight + 1_000_000),
        ("\"2024-01-01T00:00:01.250Z\"", midnight + 1_250_000),
        ("\"2024-01-01T01:00:01.25+01:00\"", midnight + 1_250_000),
        ("\"2024-01-01T00:00:01.1234567Z\"", midnight + 1_123_456),
        ("\"2024-01-01\"", midnight),
        ("5", 5),
        ("-5", -5),
    ];
    for (value, expected) in cases {
        let column = one("TIMESTAMP", Some(value)).expect(value);
        let times = column.as_any().downcast_ref::<TimestampMicrosecondArray>().expect("timestamps");
        assert_eq!(times.value(0), expected, "{value}");
    }
    let takes = "expected RFC 3339 text or integer microseconds for TIMESTAMP";
    refused(
        "TIMESTAMP",
        &[
            ("1.5", &format!("{takes}, got 1.5")),
            ("1e6", &format!("{takes}, got 1e6")),
            ("9223372036854775808", "9223372036854775808 is out of TIMESTAMP's range"),
            ("\"yesterday\"", &format!("{takes}, got \"yesterday\"")),
            ("\"\"", &format!("{takes}, got \"\"")),
            ("\"2024-13-01T00:00:00Z\"", &format!("{takes}, got \"2024-13-01T00:00:00Z\"")),
            ("true", &format!("{takes}, got true")),
            ("{}", &format!("{takes}, got an object")),
            ("[1]", &format!("{takes}, got an array")),
        ],
    );
}

#[test]
fn null_and_missing_are_null_in_every_type_and_bad_when_not_null() {
    for ddl_type in ["STRING", "BIGINT", "DOUBLE", "BOOLEAN", "BINARY", "TIMESTAMP"] {
        for value in [Some("null"), None] {
            let column = one(ddl_type, value).expect(ddl_type);
            assert!(column.is_null(0), "{ddl_type} {value:?}");
        }
        let not_null = format!("{ddl_type} NOT NULL");
        assert_eq!(
            one(&not_null, Some("null")).map(|_| ()),
            Err("column 'v': null, and the column is NOT NULL".into()),
            "{ddl_type}"
        );
        assert_eq!(one(&not_null, None).map(|_| ()), Err("column 'v': missing, and the column is NOT NULL".into()));
    }
}

#[test]
fn a_long_refused_string_is_cut_in_the_reason() {
    let long = format!("\"{}\"", "é".repeat(50));
    let reason = one("BIGINT", Some(&long)).unwrap_err();
    assert_eq!(reason, format!("column 'v': expected an integer for BIGINT, got \"{}…\"", "é".repeat(40)));
}
