//! Decoding: bytes into Arrow record batches of the declared schema.
//!
//! A whole file is decoded in one fast pass. Only when that fails does the decoder
//! look for the records at fault (see [`records`]), so that finding bad records
//! costs nothing on the good path.

mod csv;
mod json;
mod json_columns;
mod json_syntax;
mod records;

use std::path::Path;

use anyhow::{Result, anyhow};
use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};

use crate::pipeline::FileFormat;

pub use json::decode_json_lines;

/// A record that does not decode against the schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadRecord {
    /// The 1-based line the record starts on.
    pub line: usize,
    /// Why it does not decode.
    pub reason: String,
    /// The record's raw text (invalid UTF-8 replaced), without its line ending.
    pub record: String,
}

/// The rows of one file, and the records left out of them.
#[derive(Debug)]
pub struct Decoded {
    /// The records that decode, in file order, in the declared schema.
    pub rows: RecordBatch,
    /// The records that do not, in file order (always empty unless bad records are
    /// tolerated).
    pub bad_records: Vec<BadRecord>,
}

/// Decodes the records of one file (`bytes`, read from `origin`) written in `format`.
///
/// With `tolerate_bad` false the first bad record is an error:
/// `<origin>:<line>: bad record: <reason>; expected <what the schema wants>`.
/// With it true, bad records are left out of the rows and returned.
pub fn decode_file(
    format: &FileFormat,
    bytes: &[u8],
    schema: &SchemaRef,
    origin: &Path,
    tolerate_bad: bool,
) -> Result<Decoded> {
    decode_file_on(Cores::All, format, bytes, schema, origin, tolerate_bad)
}

/// The cores a decoding may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cores {
    /// One piece per core (JSON lines past 1 MiB): for a batch waiting on the rows.
    All,
    /// The calling thread's: for decoding in the background while a batch runs.
    One,
}

/// [`decode_file`] on `cores`.
pub fn decode_file_on(
    cores: Cores,
    format: &FileFormat,
    bytes: &[u8],
    schema: &SchemaRef,
    origin: &Path,
    tolerate_bad: bool,
) -> Result<Decoded> {
    let decoded = match format {
        FileFormat::Json => json::decode(bytes, schema, !tolerate_bad, cores)?,
        FileFormat::Csv { header, delimiter } => csv::decode(bytes, schema, *header, *delimiter, !tolerate_bad)?,
    };
    if !tolerate_bad && let Some(bad) = decoded.bad_records.first() {
        return Err(bad_record_error(format, schema, origin, bad));
    }
    Ok(decoded)
}

/// Checks that `format` can hold every column type of `schema`.
pub fn check_schema(format: &FileFormat, schema: &SchemaRef) -> Result<()> {
    for field in schema.fields() {
        if ddl_type(field.data_type()).is_none() {
            return Err(anyhow!(
                "column '{}' has type {}, which {} sources cannot decode",
                field.name(),
                field.data_type(),
                format_name(format)
            ));
        }
    }
    Ok(())
}

/// The error for a bad record under the fail policy.
fn bad_record_error(format: &FileFormat, schema: &SchemaRef, origin: &Path, bad: &BadRecord) -> anyhow::Error {
    let expected = match format {
        FileFormat::Json => format!("a JSON object matching the schema ({})", describe_schema(schema)),
        FileFormat::Csv { delimiter, .. } => format!(
            "{} fields separated by '{}' matching the schema ({})",
            schema.fields().len(),
            char::from(*delimiter).escape_default(),
            describe_schema(schema)
        ),
    };
    anyhow!("{}:{}: bad record: {}; expected {expected}", origin.display(), bad.line, bad.reason)
}

fn format_name(format: &FileFormat) -> &'static str {
    match format {
        FileFormat::Json => "JSON",
        FileFormat::Csv { .. } => "CSV",
    }
}

/// The schema the way the spec writes it: `user STRING, amount BIGINT NOT NULL`.
pub fn describe_schema(schema: &SchemaRef) -> String {
    let columns = schema.fields().iter().map(|field| {
        let type_name = ddl_type(field.data_type()).map_or_else(|| field.data_type().to_string(), str::to_string);
        let not_null = if field.is_nullable() { "" } else { " NOT NULL" };
        format!("{} {type_name}{not_null}", field.name())
    });
    columns.collect::<Vec<_>>().join(", ")
}

/// The spec's name of an eddy column type.
pub(crate) fn ddl_type(data_type: &DataType) -> Option<&'static str> {
    Some(match data_type {
        DataType::Utf8 => "STRING",
        DataType::Int64 => "BIGINT",
        DataType::Float64 => "DOUBLE",
        DataType::Boolean => "BOOLEAN",
        DataType::Binary => "BINARY",
        DataType::Timestamp(TimeUnit::Microsecond, _) => "TIMESTAMP",
        _ => return None,
    })
}

/// An Arrow error's message without the error kind's prefix.
fn reason(error: &arrow::error::ArrowError) -> String {
    let text = error.to_string();
    for prefix in ["Json error: ", "Parser error: ", "Csv error: ", "Invalid argument error: ", "Cast error: "] {
        if let Some(rest) = text.strip_prefix(prefix) {
            return rest.to_string();
        }
    }
    text
}

/// The raw text of a record, without its line ending.
fn record_text(bytes: &[u8]) -> String {
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let trimmed = trimmed.strip_suffix(b"\r").unwrap_or(trimmed);
    String::from_utf8_lossy(trimmed).into_owned()
}
