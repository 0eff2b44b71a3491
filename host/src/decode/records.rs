//! Separating good records from bad ones once a whole-file decode has failed.
//!
//! The file's records are decoded again in chunks; a chunk that fails is split in
//! halves, recursively: a range that decodes is kept as one batch, a single record
//! that does not is bad. With few bad records this costs about two more decodes of
//! the file (the chunks, then the halvings of the few bad chunks); with many it
//! degrades gracefully towards one decode per record.

use arrow::array::RecordBatch;
use arrow::error::ArrowError;

/// How many records are decoded together before halving starts: small enough that
/// halving a chunk is cheap, large enough that a good chunk decodes at full speed.
const RECORDS_PER_CHUNK: usize = 1024;

/// Where one record lies in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    /// The 1-based line the record starts on.
    pub line: usize,
    /// Its first byte.
    pub start: usize,
    /// One past its last byte (including its line ending).
    pub end: usize,
}

/// What the search found: good rows in file order, bad records with their errors.
pub(super) struct Separated {
    /// Batches of records that decode, in file order.
    pub good: Vec<RecordBatch>,
    /// The bad records (their spans) and why, in file order.
    pub bad: Vec<(Span, ArrowError)>,
}

/// Separates the records of `bytes` at `spans` (in file order), knowing that all of
/// them together do not decode. `decode` decodes a contiguous run of records. With
/// `first_only`, stops at the first bad record.
pub(super) fn separate<F>(bytes: &[u8], spans: &[Span], decode: F, first_only: bool) -> Separated
where
    F: Fn(&[u8]) -> Result<RecordBatch, ArrowError>,
{
    let mut search =
        Search { bytes, spans, decode, first_only, found: Separated { good: Vec::new(), bad: Vec::new() } };
    for low in (0..spans.len()).step_by(RECORDS_PER_CHUNK) {
        if !search.run(low, spans.len().min(low + RECORDS_PER_CHUNK)) {
            break;
        }
    }
    search.found
}

struct Search<'a, F> {
    bytes: &'a [u8],
    spans: &'a [Span],
    decode: F,
    first_only: bool,
    found: Separated,
}

impl<F> Search<'_, F>
where
    F: Fn(&[u8]) -> Result<RecordBatch, ArrowError>,
{
    /// Decodes records `low..high`; returns whether the search goes on.
    fn run(&mut self, low: usize, high: usize) -> bool {
        if low >= high {
            return true;
        }
        let range = &self.bytes[self.spans[low].start..self.spans[high - 1].end];
        match (self.decode)(range) {
            Ok(batch) => {
                if batch.num_rows() > 0 {
                    self.found.good.push(batch);
                }
                true
            }
            Err(error) if high - low == 1 => {
                self.found.bad.push((self.spans[low], error));
                !self.first_only
            }
            Err(_) => {
                let middle = low + (high - low) / 2;
                self.run(low, middle) && self.run(middle, high)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    /// Records are single digits on their own line; '9' is bad.
    fn digits(bytes: &[u8]) -> Result<RecordBatch, ArrowError> {
        let schema = Arc::new(Schema::new(vec![Field::new("d", DataType::Int64, false)]));
        let mut values = Vec::new();
        for line in bytes.split(|b| *b == b'\n').filter(|line| !line.is_empty()) {
            match line {
                b"9" => return Err(ArrowError::ParseError("nine".into())),
                _ => values.push(i64::from(line[0] - b'0')),
            }
        }
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values))])
    }

    fn spans(bytes: &[u8]) -> Vec<Span> {
        (0..bytes.len() / 2).map(|i| Span { line: i + 1, start: 2 * i, end: 2 * i + 2 }).collect()
    }

    #[test]
    fn finds_every_bad_record_and_keeps_the_order_of_good_ones() {
        let bytes = b"1\n9\n2\n3\n9\n4\n5\n6\n7\n9\n";
        let found = separate(bytes, &spans(bytes), digits, false);
        let lines: Vec<usize> = found.bad.iter().map(|(span, _)| span.line).collect();
        assert_eq!(lines, [2, 5, 10]);
        let good: Vec<i64> = found
            .good
            .iter()
            .flat_map(|batch| batch.column(0).as_any().downcast_ref::<Int64Array>().expect("int").values().to_vec())
            .collect();
        assert_eq!(good, [1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn stops_at_the_first_bad_record_when_asked() {
        let bytes = b"1\n2\n9\n3\n9\n";
        let calls = Cell::new(0);
        let counting = |range: &[u8]| {
            calls.set(calls.get() + 1);
            digits(range)
        };
        let found = separate(bytes, &spans(bytes), counting, true);
        assert_eq!(found.bad.len(), 1);
        assert_eq!(found.bad[0].0.line, 3);
        assert!(calls.get() <= 5, "{} decodes", calls.get());
    }

    #[test]
    fn a_few_bad_records_in_a_big_file_cost_about_two_more_decodes() {
        let mut bytes = b"1\n".repeat(100_000);
        for line in [10, 50_000, 99_999] {
            bytes[2 * line] = b'9';
        }
        let decoded = Cell::new(0);
        let counting = |range: &[u8]| {
            decoded.set(decoded.get() + range.len());
            digits(range)
        };
        let found = separate(&bytes, &spans(&bytes), counting, false);
        assert_eq!(found.bad.len(), 3);
        assert!(decoded.get() < bytes.len() * 21 / 10, "{} bytes decoded for {}", decoded.get(), bytes.len());
    }
}
