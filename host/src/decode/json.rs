//! JSON lines into Arrow, against the declared schema. A bad record is reported with
//! its file, line and reason.

use std::path::Path;

use anyhow::{Result, anyhow};
use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::json::ReaderBuilder;

const ROWS_PER_DECODE: usize = 8192;

/// Decodes every record of `bytes` (JSON lines read from `origin`).
pub fn decode_json_lines(bytes: &[u8], schema: &SchemaRef, origin: &Path) -> Result<RecordBatch> {
    match decode(bytes, schema) {
        Ok(batch) => Ok(batch),
        Err(error) => Err(locate(bytes, schema, origin).unwrap_or_else(|| anyhow!("{}: {error}", origin.display()))),
    }
}

fn decode(bytes: &[u8], schema: &SchemaRef) -> Result<RecordBatch, arrow::error::ArrowError> {
    let mut decoder = ReaderBuilder::new(schema.clone()).with_batch_size(ROWS_PER_DECODE).build_decoder()?;
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

/// Finds the first line that does not decode on its own and explains it.
fn locate(bytes: &[u8], schema: &SchemaRef, origin: &Path) -> Option<anyhow::Error> {
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let mut with_newline = line.to_vec();
        with_newline.push(b'\n');
        if let Err(error) = decode(&with_newline, schema) {
            let reason = error.to_string().replace("Json error: ", "").replace("Parser error: ", "");
            return Some(anyhow!(
                "{}:{}: bad record: {reason}; expected a JSON object matching the schema ({})",
                origin.display(),
                index + 1,
                schema.fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
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
    }
}
