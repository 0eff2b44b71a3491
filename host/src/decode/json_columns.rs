//! What each column type takes from JSON — the table in the README's "The pipeline
//! spec" — as strict column decoders plugged into arrow-json (`DecoderFactory`).
//!
//! arrow-json's own decoders truncate `1.5` into a BIGINT, read `"123"` as a number,
//! and saturate numbers out of range; these refuse what Spark's JSON reader refuses
//! as a schema violation, with a reason in the schema's terms. A value a column does
//! not take makes its record bad (reason `column '<name>': …`). `null`, and a missing
//! field, are null in every type; in a NOT NULL column they are bad.

use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::compute::kernels::cast_utils::string_to_datetime;
use arrow::datatypes::{DataType, FieldRef, TimeUnit};
use arrow::error::ArrowError;
use arrow::json::{ArrayDecoder, DecoderContext, DecoderFactory, Tape, TapeElement};

/// Hands arrow-json the strict decoder of every eddy column type.
#[derive(Debug)]
pub(super) struct StrictColumns;

impl DecoderFactory for StrictColumns {
    fn make_default_decoder(
        &self,
        _ctx: &DecoderContext,
        field: &FieldRef,
        is_nullable: bool,
    ) -> Result<Option<Box<dyn ArrayDecoder>>, ArrowError> {
        let nullable = is_nullable;
        Ok(Some(match field.data_type() {
            DataType::Utf8 => Box::new(Strings { nullable }),
            DataType::Int64 => Box::new(Integers { nullable }),
            DataType::Float64 => Box::new(Doubles { nullable }),
            DataType::Boolean => Box::new(Booleans { nullable }),
            DataType::Binary => Box::new(HexBinary { nullable }),
            DataType::Timestamp(TimeUnit::Microsecond, zone) => {
                let zone = zone.clone();
                let tz: Tz = zone.as_deref().unwrap_or("+00:00").parse()?;
                Box::new(Timestamps { nullable, tz, zone })
            }
            // The row itself (a struct) is arrow-json's; its fields come back here.
            _ => return Ok(None),
        }))
    }
}

const BIGINT_TAKES: &str = "an integer for BIGINT";
const DOUBLE_TAKES: &str = "a number, \"NaN\", \"Infinity\" or \"-Infinity\" for DOUBLE";
const BOOLEAN_TAKES: &str = "true or false for BOOLEAN";
const BINARY_TAKES: &str = "a string of hex digits (two per byte) for BINARY";
const TIMESTAMP_TAKES: &str = "RFC 3339 text or integer microseconds for TIMESTAMP";

/// STRING: a string; a number, `true` or `false` as its JSON text; an object or an
/// array as its compact JSON text (as Spark keeps any value's text).
struct Strings {
    nullable: bool,
}

impl ArrayDecoder for Strings {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut builder = StringBuilder::with_capacity(pos.len(), pos.len() * 8);
        let mut nested = String::new();
        for &p in pos {
            match present(tape, p, self.nullable)? {
                None => builder.append_null(),
                Some(TapeElement::String(idx) | TapeElement::Number(idx)) => builder.append_value(tape.get_string(idx)),
                Some(TapeElement::True) => builder.append_value("true"),
                Some(TapeElement::False) => builder.append_value("false"),
                Some(_) => {
                    nested.clear();
                    write_json(tape, p, &mut nested);
                    builder.append_value(&nested);
                }
            }
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// BIGINT: an integer number (no fraction, no exponent) in the range of a signed
/// 64-bit integer.
struct Integers {
    nullable: bool,
}

impl ArrayDecoder for Integers {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut builder = Int64Builder::with_capacity(pos.len());
        for &p in pos {
            match present(tape, p, self.nullable)? {
                None => builder.append_null(),
                Some(TapeElement::Number(idx)) => builder.append_value(integer(tape, p, idx, BIGINT_TAKES, "BIGINT")?),
                Some(_) => return Err(refused(tape, p, BIGINT_TAKES)),
            }
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// DOUBLE: any number within the range of a 64-bit float; the strings Spark writes
/// for the values JSON has no number for.
struct Doubles {
    nullable: bool,
}

impl ArrayDecoder for Doubles {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut builder = Float64Builder::with_capacity(pos.len());
        for &p in pos {
            let value = match present(tape, p, self.nullable)? {
                None => {
                    builder.append_null();
                    continue;
                }
                Some(TapeElement::Number(idx)) => {
                    let text = tape.get_string(idx);
                    match text.parse::<f64>() {
                        Ok(value) if value.is_finite() => value,
                        Ok(_) => return Err(ArrowError::JsonError(format!("{text} is out of DOUBLE's range"))),
                        Err(_) => return Err(refused(tape, p, DOUBLE_TAKES)),
                    }
                }
                Some(TapeElement::String(idx)) => match tape.get_string(idx) {
                    "NaN" => f64::NAN,
                    "Infinity" | "+Infinity" | "+INF" => f64::INFINITY,
                    "-Infinity" | "-INF" => f64::NEG_INFINITY,
                    _ => return Err(refused(tape, p, DOUBLE_TAKES)),
                },
                Some(_) => return Err(refused(tape, p, DOUBLE_TAKES)),
            };
            builder.append_value(value);
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// BOOLEAN: `true` or `false`.
struct Booleans {
    nullable: bool,
}

impl ArrayDecoder for Booleans {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut builder = BooleanBuilder::with_capacity(pos.len());
        for &p in pos {
            match present(tape, p, self.nullable)? {
                None => builder.append_null(),
                Some(TapeElement::True) => builder.append_value(true),
                Some(TapeElement::False) => builder.append_value(false),
                Some(_) => return Err(refused(tape, p, BOOLEAN_TAKES)),
            }
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// BINARY: a string of hex digits, two per byte (what eddy's JSON sink writes).
struct HexBinary {
    nullable: bool,
}

impl ArrayDecoder for HexBinary {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut builder = BinaryBuilder::with_capacity(pos.len(), pos.len() * 8);
        let mut bytes = Vec::new();
        for &p in pos {
            match present(tape, p, self.nullable)? {
                None => builder.append_null(),
                Some(TapeElement::String(idx)) => {
                    let hex = tape.get_string(idx);
                    if !hex.len().is_multiple_of(2) {
                        return Err(ArrowError::JsonError(format!(
                            "{} has an odd number of hex digits; BINARY takes two per byte",
                            shown(tape, p)
                        )));
                    }
                    bytes.clear();
                    for pair in hex.as_bytes().chunks_exact(2) {
                        match (hex_digit(pair[0]), hex_digit(pair[1])) {
                            (Some(high), Some(low)) => bytes.push(high << 4 | low),
                            _ => return Err(refused(tape, p, BINARY_TAKES)),
                        }
                    }
                    builder.append_value(&bytes);
                }
                Some(_) => return Err(refused(tape, p, BINARY_TAKES)),
            }
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// TIMESTAMP: RFC 3339 text (`T` or a space between date and time; no offset means
/// UTC; a date alone is its midnight; digits past the microsecond are dropped), or an
/// integer number of microseconds since the epoch.
struct Timestamps {
    nullable: bool,
    tz: Tz,
    zone: Option<Arc<str>>,
}

impl ArrayDecoder for Timestamps {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut builder = TimestampMicrosecondBuilder::with_capacity(pos.len()).with_timezone_opt(self.zone.clone());
        for &p in pos {
            match present(tape, p, self.nullable)? {
                None => builder.append_null(),
                Some(TapeElement::Number(idx)) => {
                    builder.append_value(integer(tape, p, idx, TIMESTAMP_TAKES, "TIMESTAMP")?);
                }
                Some(TapeElement::String(idx)) => {
                    let text = tape.get_string(idx);
                    let micros = match utc_text::utc_micros(text) {
                        Some(micros) => Ok(micros),
                        None => string_to_datetime(&self.tz, text).map(|time| time.timestamp_micros()),
                    };
                    builder.append_value(micros.map_err(|_| refused(tape, p, TIMESTAMP_TAKES))?);
                }
                Some(_) => return Err(refused(tape, p, TIMESTAMP_TAKES)),
            }
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// The value at tape index `p`, `None` for null or missing (missing fields point at
/// the tape's leading null, index 0) — an error in a NOT NULL column.
fn present(tape: &Tape<'_>, p: u32, nullable: bool) -> Result<Option<TapeElement>, ArrowError> {
    match tape.get(p) {
        TapeElement::Null if nullable => Ok(None),
        TapeElement::Null if p == 0 => Err(ArrowError::JsonError("missing, and the column is NOT NULL".into())),
        TapeElement::Null => Err(ArrowError::JsonError("null, and the column is NOT NULL".into())),
        element => Ok(Some(element)),
    }
}

/// The number at tape index `p` (its text at string `idx`) as an integer: no fraction,
/// no exponent, within 64 bits.
fn integer(tape: &Tape<'_>, p: u32, idx: u32, takes: &str, type_name: &str) -> Result<i64, ArrowError> {
    let text = tape.get_string(idx);
    if !text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return Err(refused(tape, p, takes));
    }
    text.parse::<i64>().map_err(|error| match error.kind() {
        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
            ArrowError::JsonError(format!("{text} is out of {type_name}'s range"))
        }
        _ => refused(tape, p, takes),
    })
}

/// The error for a value its column does not take.
fn refused(tape: &Tape<'_>, p: u32, takes: &str) -> ArrowError {
    ArrowError::JsonError(format!("expected {takes}, got {}", shown(tape, p)))
}

/// How a refused value is named in a reason: its JSON text, a long string cut.
fn shown(tape: &Tape<'_>, p: u32) -> String {
    const LONGEST: usize = 40;
    match tape.get(p) {
        TapeElement::String(idx) => {
            let text = tape.get_string(idx);
            let mut quoted = String::with_capacity(text.len().min(LONGEST) + 2);
            match text.char_indices().nth(LONGEST) {
                Some((cut, _)) => {
                    write_string(&text[..cut], &mut quoted);
                    quoted.insert(quoted.len() - 1, '…');
                }
                None => write_string(text, &mut quoted),
            }
            quoted
        }
        TapeElement::Number(idx) => tape.get_string(idx).to_string(),
        TapeElement::True => "true".into(),
        TapeElement::False => "false".into(),
        TapeElement::Null => "null".into(),
        TapeElement::StartObject(_) => "an object".into(),
        TapeElement::StartList(_) => "an array".into(),
        _ => "a number".into(),
    }
}

/// Writes the value at tape index `idx` as compact JSON; returns the next index.
///
/// The tape comes from JSON text, so it holds no binary numbers (`I32`, `F64`, …),
/// which only `Decoder::serialize` writes; an end marker is never a value's start.
fn write_json(tape: &Tape<'_>, idx: u32, out: &mut String) -> u32 {
    match tape.get(idx) {
        TapeElement::StartObject(end) | TapeElement::StartList(end) => {
            let object = matches!(tape.get(idx), TapeElement::StartObject(_));
            out.push(if object { '{' } else { '[' });
            let mut next = idx + 1;
            while next < end {
                if next > idx + 1 {
                    out.push(',');
                }
                next = write_json(tape, next, out);
                if object {
                    out.push(':');
                    next = write_json(tape, next, out);
                }
            }
            out.push(if object { '}' } else { ']' });
            return end + 1;
        }
        TapeElement::String(s) => write_string(tape.get_string(s), out),
        TapeElement::Number(n) => out.push_str(tape.get_string(n)),
        TapeElement::True => out.push_str("true"),
        TapeElement::False => out.push_str("false"),
        _ => out.push_str("null"),
    }
    idx + 1
}

/// Writes `text` as a JSON string.
fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn hex_digit(byte: u8) -> Option<u8> {
    char::from(byte).to_digit(16).and_then(|digit| u8::try_from(digit).ok())
}

mod utc_text;

#[cfg(test)]
mod tests;
