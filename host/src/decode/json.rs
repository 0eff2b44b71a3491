//! JSON lines into Arrow, against the declared schema (arrow-json). Every line is
//! checked to be one strict JSON object first ([`json_syntax`](super::json_syntax)),
//! then decoded with eddy's strict column decoders
//! ([`json_columns`](super::json_columns)). Fields not in the schema are ignored, a
//! missing nullable field is null.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::json::ReaderBuilder;

use super::json_columns::StrictColumns;
use super::json_syntax::check_lines;
use super::records::{Span, separate};
use super::{BadRecord, Cores, Decoded, decode_file, reason, record_text};
use crate::pipeline::FileFormat;

const ROWS_PER_DECODE: usize = 8192;

/// Input past this size is decoded in pieces on several threads (below, a thread costs
/// more than it saves).
const PARALLEL_BYTES: usize = 1 << 20;

/// Decodes every record of `bytes` (JSON lines read from `origin`); the first bad
/// record is an error naming `origin`, its line and the reason.
pub fn decode_json_lines(bytes: &[u8], schema: &SchemaRef, origin: &Path) -> Result<RecordBatch> {
    Ok(decode_file(&FileFormat::Json, bytes, schema, origin, false)?.rows)
}

/// Decodes `bytes`; on failure, separates the bad lines (only the first with
/// `first_only`).
pub(super) fn decode(bytes: &[u8], schema: &SchemaRef, first_only: bool, cores: Cores) -> Result<Decoded> {
    let decoded = match cores {
        Cores::All => decode_in_pieces(bytes, schema),
        Cores::One => decode_all(bytes, schema),
    };
    if let Ok(rows) = decoded {
        return Ok(Decoded { rows, bad_records: Vec::new() });
    }
    let spans = line_spans(bytes);
    let found = separate(bytes, &spans, |range| decode_all(range, schema), first_only);
    let bad_records = found
        .bad
        .iter()
        .map(|(span, error)| BadRecord {
            line: span.line,
            reason: column_reason(error),
            record: record_text(&bytes[span.start..span.end]),
        })
        .collect();
    Ok(Decoded { rows: concat_batches(schema, &found.good)?, bad_records })
}

/// Decodes all of `bytes` as [`decode_all`] does, a piece per core, each cut at a line
/// end; the pieces' rows in order.
fn decode_in_pieces(bytes: &[u8], schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if bytes.len() < PARALLEL_BYTES || threads < 2 {
        return decode_all(bytes, schema);
    }
    let mut pieces = Vec::with_capacity(threads);
    let mut rest = bytes;
    for left in (1..=threads).rev() {
        let cut = if left == 1 {
            rest.len()
        } else {
            let at = rest.len() / left;
            memchr::memchr(b'\n', &rest[at..]).map_or(rest.len(), |newline| at + newline + 1)
        };
        let (piece, after) = rest.split_at(cut);
        pieces.push(piece);
        rest = after;
    }
    let decoded: Vec<Result<RecordBatch, ArrowError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = pieces.iter().map(|piece| scope.spawn(|| decode_all(piece, schema))).collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| Err(ArrowError::JsonError("a decoding thread panicked".into())))
            })
            .collect()
    });
    let batches = decoded.into_iter().collect::<Result<Vec<_>, _>>()?;
    concat_batches(schema, &batches)
}

/// Checks the syntax of all of `bytes`, then decodes them in one pass.
fn decode_all(bytes: &[u8], schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    check_lines(bytes)?;
    let mut decoder = ReaderBuilder::new(schema.clone())
        .with_batch_size(ROWS_PER_DECODE)
        .with_decoder_factory(Arc::new(StrictColumns))
        .build_decoder()?;
    let mut batches = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let used = decoder.decode(rest)?;
        rest = &rest[used..];
        if let Some(batch) = decoder.flush()? {
            batches.push(batch);
        }
        if used == 0 && !rest.is_empty() {
            break;
        }
    }
    if let Some(batch) = decoder.flush()? {
        batches.push(batch);
    }
    concat_batches(schema, &batches)
}

/// A record's reason, naming the column the way CSV's reasons do (arrow-json says
/// "whilst decoding field 'amount': …").
fn column_reason(error: &ArrowError) -> String {
    let text = reason(error);
    match text.strip_prefix("whilst decoding field ") {
        Some(rest) => format!("column {rest}"),
        None => text,
    }
}

/// The non-blank lines of `bytes`, each with its line ending.
fn line_spans(bytes: &[u8]) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (index, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let end = start + line.len();
        if !line.iter().all(u8::is_ascii_whitespace) {
            spans.push(Span { line: index + 1, start, end });
        }
        start = end;
    }
    spans
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, Int64Array, TimestampMicrosecondArray};

    use super::*;
    use crate::pipeline::parse_schema;

    #[test]
    fn decodes_records_and_names_the_bad_line() {
        let schema = parse_schema("user STRING, amount BIGINT").expect("schema");
        let good = b"{\"user\":\"a\",\"amount\":1}\n{\"user\":\"b\",\"amount\":2}\n";
        assert_eq!(decode_json_lines(good, &schema, Path::new("in.jsonl")).expect("decodes").num_rows(), 2);
        let bad = b"{\"user\":\"a\",\"amount\":1}\n\n{\"user\":\"b\",\"amount\":\"lots\"}\n";
        let error = decode_json_lines(bad, &schema, Path::new("in.jsonl")).unwrap_err().to_string();
        assert!(error.starts_with("in.jsonl:3: bad record: "), "{error}");
        assert!(
            error.ends_with("; expected a JSON object matching the schema (user STRING, amount BIGINT)"),
            "{error}"
        );
    }

    #[test]
    fn separates_bad_lines_from_good_ones() {
        let schema = parse_schema("user STRING, amount BIGINT NOT NULL").expect("schema");
        let bytes = b"{\"user\":\"a\",\"amount\":1}\nnot json\r\n{\"user\":\"b\",\"amount\":2}\n\n{\"user\":\"c\"}\n{\"amount\":3}";
        let decoded = decode(bytes, &schema, false, Cores::All).expect("decodes");
        let amounts = decoded.rows.column(1).as_any().downcast_ref::<Int64Array>().expect("ints");
        assert_eq!(amounts.values().to_vec(), [1, 2, 3]);
        let bad: Vec<(usize, &str)> = decoded.bad_records.iter().map(|b| (b.line, b.record.as_str())).collect();
        assert_eq!(bad, [(2, "not json"), (5, "{\"user\":\"c\"}")]);
        assert!(decoded.bad_records.iter().all(|b| !b.reason.is_empty()));
    }

    #[test]
    fn reads_timestamps_as_text_or_micros() {
        let schema = parse_schema("ts TIMESTAMP").expect("schema");
        let bytes = b"{\"ts\":\"2024-01-01T00:00:01Z\"}\n{\"ts\":\"2024-01-01T01:00:01+01:00\"}\n{\"ts\":5}\n{}\n";
        let rows = decode_json_lines(bytes, &schema, Path::new("t.jsonl")).expect("decodes");
        let ts = rows.column(0).as_any().downcast_ref::<TimestampMicrosecondArray>().expect("timestamps");
        assert_eq!(&ts.values()[..3], [1_704_067_201_000_000, 1_704_067_201_000_000, 5]);
        assert!(ts.is_null(3));
    }

    #[test]
    fn large_input_decodes_in_pieces_in_order_and_names_a_bad_line_exactly() {
        let schema = parse_schema("user STRING, amount BIGINT").expect("schema");
        // ~3 MiB, without a final line end; pieces cut where lines end.
        let lines: Vec<String> = (0..100_000).map(|i| format!("{{\"user\":\"user-{i:06}\",\"amount\":{i}}}")).collect();
        let bytes = lines.join("\n").into_bytes();
        assert!(bytes.len() > 2 * PARALLEL_BYTES);
        let rows = decode_json_lines(&bytes, &schema, Path::new("big.jsonl")).expect("decodes");
        let amounts = rows.column(1).as_any().downcast_ref::<Int64Array>().expect("ints");
        assert_eq!(amounts.values().to_vec(), (0..100_000).collect::<Vec<i64>>());
        // A bad line in the second half: the error names its line in the whole input.
        let mut bad = lines.clone();
        bad[77_777] = "{\"user\":\"x\",\"amount\":\"many\"}".into();
        let error = decode_json_lines(bad.join("\n").as_bytes(), &schema, Path::new("big.jsonl")).unwrap_err();
        assert!(error.to_string().starts_with("big.jsonl:77778: bad record: "), "{error}");
    }
}
