//! CSV into Arrow, against the declared schema (arrow-csv). Columns are matched by
//! position (a header line is skipped, not interpreted, as Spark does by default); an
//! empty field is null; a TIMESTAMP is RFC 3339 text; a BINARY column holds the
//! field's bytes.

use std::sync::Arc;

use anyhow::Result;
use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::{cast, concat_batches};
use arrow::csv::ReaderBuilder;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use super::records::{Span, separate};
use super::{BadRecord, Decoded, ddl_type, reason, record_text};

const ROWS_PER_DECODE: usize = 8192;

/// Decodes `bytes`; on failure, separates the bad records (only the first with
/// `first_only`).
pub(super) fn decode(
    bytes: &[u8],
    schema: &SchemaRef,
    header: bool,
    delimiter: u8,
    first_only: bool,
) -> Result<Decoded> {
    let format = Format { schema: schema.clone(), read_schema: read_schema(schema), delimiter };
    if let Ok(rows) = format.decode_all(bytes, header) {
        return Ok(Decoded { rows, bad_records: Vec::new() });
    }
    let spans = record_spans(bytes, header, delimiter);
    let found = separate(bytes, &spans, |range| format.decode_all(range, false), first_only);
    let bad_records = found
        .bad
        .iter()
        .map(|(span, error)| {
            let raw = &bytes[span.start..span.end];
            BadRecord {
                line: span.line,
                reason: format.explain(raw).unwrap_or_else(|| reason(error)),
                record: record_text(raw),
            }
        })
        .collect();
    Ok(Decoded { rows: concat_batches(schema, &found.good)?, bad_records })
}

struct Format {
    /// The declared schema.
    schema: SchemaRef,
    /// What arrow-csv reads (BINARY columns as text, cast afterwards).
    read_schema: SchemaRef,
    delimiter: u8,
}

impl Format {
    /// Decodes all of `bytes` in one pass.
    fn decode_all(&self, bytes: &[u8], header: bool) -> Result<RecordBatch, ArrowError> {
        let reader = ReaderBuilder::new(self.read_schema.clone())
            .with_header(header)
            .with_delimiter(self.delimiter)
            .with_batch_size(ROWS_PER_DECODE)
            .build_buffered(bytes)?;
        let batches = reader.map(|batch| self.to_declared(batch?)).collect::<Result<Vec<_>, _>>()?;
        concat_batches(&self.schema, &batches)
    }

    /// A batch of the read schema in the declared one.
    fn to_declared(&self, batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
        if self.read_schema == self.schema {
            return Ok(batch);
        }
        let columns = batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(column, field)| cast(column, field.data_type()))
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        RecordBatch::try_new(self.schema.clone(), columns)
    }

    /// Why one record (`raw`, with its line ending) does not decode, in the schema's
    /// terms: the wrong number of fields, or the first field that does not parse.
    fn explain(&self, raw: &[u8]) -> Option<String> {
        let mut reader =
            csv::ReaderBuilder::new().has_headers(false).flexible(true).delimiter(self.delimiter).from_reader(raw);
        let record = reader.byte_records().next()?.ok()?;
        let expected = self.schema.fields().len();
        if record.len() != expected {
            return Some(format!("{} fields where the schema has {expected}", record.len()));
        }
        for (value, (declared, read)) in record.iter().zip(self.schema.fields().iter().zip(self.read_schema.fields())) {
            let name = declared.name();
            let Ok(text) = std::str::from_utf8(value) else {
                return Some(format!("column '{name}' is not valid UTF-8"));
            };
            if text.is_empty() {
                if !declared.is_nullable() {
                    return Some(format!("column '{name}' is NOT NULL but empty"));
                }
                continue;
            }
            if parse_field(text, read).is_err() {
                let type_name = ddl_type(declared.data_type()).unwrap_or("its type");
                return Some(format!("column '{name}': cannot read '{text}' as {type_name}"));
            }
        }
        None
    }
}

/// Parses one field's text as arrow-csv would parse it in a column of `field`'s type.
fn parse_field(text: &str, field: &Field) -> Result<RecordBatch, ArrowError> {
    let schema = Arc::new(Schema::new(vec![field.clone().with_nullable(true)]));
    let quoted = format!("\"{}\"\n", text.replace('"', "\"\""));
    let mut reader = ReaderBuilder::new(schema).build_buffered(quoted.as_bytes())?;
    reader.next().unwrap_or_else(|| Err(ArrowError::ParseError("no value".into())))
}

/// The schema arrow-csv reads: BINARY columns as text.
fn read_schema(schema: &SchemaRef) -> SchemaRef {
    if !schema.fields().iter().any(|field| field.data_type() == &DataType::Binary) {
        return schema.clone();
    }
    let fields = schema.fields().iter().map(|field| match field.data_type() {
        DataType::Binary => field.as_ref().clone().with_data_type(DataType::Utf8),
        _ => field.as_ref().clone(),
    });
    Arc::new(Schema::new(fields.collect::<Vec<_>>()))
}

/// Where each record lies (a quoted field may span lines), the header left out.
fn record_spans(bytes: &[u8], header: bool, delimiter: u8) -> Vec<Span> {
    let mut reader =
        csv::ReaderBuilder::new().has_headers(false).flexible(true).delimiter(delimiter).from_reader(bytes);
    let mut record = csv::ByteRecord::new();
    let mut spans = Vec::new();
    loop {
        let start = reader.position().clone();
        match reader.read_byte_record(&mut record) {
            Ok(true) => {}
            // Without UTF-8 checks or length checks the csv crate only fails on I/O,
            // which a byte slice cannot.
            Ok(false) | Err(_) => break,
        }
        let mut begin = record.position().map_or(start.byte(), |position| position.byte()) as usize;
        let mut line = record.position().map_or(start.line(), |position| position.line()) as usize;
        let end = reader.position().byte() as usize;
        // The reader's position is before the blank lines it skipped.
        while begin < end && matches!(bytes[begin], b'\n' | b'\r') {
            line += usize::from(bytes[begin] == b'\n');
            begin += 1;
        }
        spans.push(Span { line, start: begin, end });
    }
    if header && !spans.is_empty() {
        spans.remove(0);
    }
    spans
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, BinaryArray, Int64Array, StringArray, TimestampMicrosecondArray};

    use super::*;
    use crate::pipeline::parse_schema;

    fn strings(rows: &RecordBatch, column: usize) -> Vec<Option<String>> {
        let array = rows.column(column).as_any().downcast_ref::<StringArray>().expect("strings");
        array.iter().map(|value| value.map(str::to_string)).collect()
    }

    #[test]
    fn decodes_with_a_header_quotes_nulls_and_types() {
        let schema = parse_schema("user STRING, amount BIGINT, ts TIMESTAMP, raw BINARY").expect("schema");
        let bytes = b"user,amount,ts,raw\nalice,5,2024-01-01T00:00:01Z,ab\n\"bob, jr\",,2024-01-01T00:00:02+00:00,\n";
        let decoded = decode(bytes, &schema, true, b',', false).expect("decodes");
        assert!(decoded.bad_records.is_empty());
        assert_eq!(strings(&decoded.rows, 0), [Some("alice".into()), Some("bob, jr".into())]);
        let amounts = decoded.rows.column(1).as_any().downcast_ref::<Int64Array>().expect("ints");
        assert_eq!((amounts.value(0), amounts.is_null(1)), (5, true));
        let ts = decoded.rows.column(2).as_any().downcast_ref::<TimestampMicrosecondArray>().expect("ts");
        assert_eq!(ts.values().to_vec(), [1_704_067_201_000_000, 1_704_067_202_000_000]);
        let raw = decoded.rows.column(3).as_any().downcast_ref::<BinaryArray>().expect("binary");
        assert_eq!((raw.value(0), raw.is_null(1)), (&b"ab"[..], true));
    }

    #[test]
    fn separates_and_explains_bad_records() {
        let schema = parse_schema("user STRING NOT NULL, amount BIGINT").expect("schema");
        let bytes = b"a;1\nb;lots\n\"multi\nline\";2\nc\n;4\nd;3;x\ne;5\r\n";
        let decoded = decode(bytes, &schema, false, b';', false).expect("decodes");
        assert_eq!(strings(&decoded.rows, 0), [Some("a".into()), Some("multi\nline".into()), Some("e".into())]);
        let bad: Vec<(usize, &str, &str)> =
            decoded.bad_records.iter().map(|b| (b.line, b.reason.as_str(), b.record.as_str())).collect();
        assert_eq!(
            bad,
            [
                (2, "column 'amount': cannot read 'lots' as BIGINT", "b;lots"),
                (5, "1 fields where the schema has 2", "c"),
                (6, "column 'user' is NOT NULL but empty", ";4"),
                (7, "3 fields where the schema has 2", "d;3;x"),
            ]
        );
    }

    #[test]
    fn blank_lines_are_skipped_and_the_last_line_needs_no_ending() {
        let schema = parse_schema("user STRING, amount BIGINT").expect("schema");
        let good = decode(b"a,1\n\nb,2", &schema, false, b',', false).expect("decodes");
        assert_eq!(strings(&good.rows, 0), [Some("a".into()), Some("b".into())]);
        let mixed = decode(b"a,1\n\nb,x\n\nc,3", &schema, false, b',', false).expect("decodes");
        assert_eq!(strings(&mixed.rows, 0), [Some("a".into()), Some("c".into())]);
        assert_eq!(mixed.bad_records.len(), 1);
        assert_eq!((mixed.bad_records[0].line, mixed.bad_records[0].record.as_str()), (3, "b,x"));
    }

    #[test]
    fn a_bad_first_record_after_the_header_has_its_own_line() {
        let schema = parse_schema("n BIGINT").expect("schema");
        let decoded = decode(b"n\nx\n2\n", &schema, true, b',', true).expect("decodes");
        assert_eq!(decoded.bad_records.len(), 1);
        assert_eq!(decoded.bad_records[0].line, 2);
        assert_eq!(decoded.bad_records[0].reason, "column 'n': cannot read 'x' as BIGINT");
    }
}
