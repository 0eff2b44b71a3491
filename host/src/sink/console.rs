//! A readable table per batch, like Spark's console sink: at most `num_rows` rows
//! (then `only showing top N rows`), cells cut to 20 characters when `truncate` is on.

use std::io::Write;
use std::sync::Arc;

use anyhow::Result;
use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow::util::pretty::pretty_format_batches_with_schema;

use super::Sink;
use crate::util::printable;

/// How long a cell may be when truncating, like Spark's `show()`.
pub const TRUNCATE_WIDTH: usize = 20;

/// Spark's default for the console sink's `numRows`.
pub const DEFAULT_NUM_ROWS: usize = 20;

/// Prints each batch as a table to a writer (stdout for `eddy run`).
pub struct ConsoleSink<W: Write> {
    out: W,
    num_rows: usize,
    truncate: bool,
}

impl<W: Write> ConsoleSink<W> {
    /// A console sink writing to `out` with Spark's defaults: 20 rows, truncated cells.
    pub fn new(out: W) -> Self {
        Self::with_options(out, DEFAULT_NUM_ROWS, true)
    }

    /// A console sink writing to `out` that shows at most `num_rows` rows per batch and
    /// cuts cells to [`TRUNCATE_WIDTH`] characters if `truncate`.
    pub fn with_options(out: W, num_rows: usize, truncate: bool) -> Self {
        Self { out, num_rows, truncate }
    }

    /// The writer, e.g. to read what a test sink printed.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Prints one batch's table under the header `Batch: <label>`.
    fn print(&mut self, label: &str, schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()> {
        let rule = "-".repeat(43);
        writeln!(self.out, "{rule}\nBatch: {label}\n{rule}")?;
        let total: usize = rows.iter().map(RecordBatch::num_rows).sum();
        let shown = first_rows(rows, self.num_rows);
        let width = self.truncate.then_some(TRUNCATE_WIDTH);
        let (schema, shown) = as_text(schema, &shown, width)?;
        let table = pretty_format_batches_with_schema(schema, &shown)?.to_string();
        writeln!(self.out, "{table}")?;
        if total > self.num_rows {
            let noun = if self.num_rows == 1 { "row" } else { "rows" };
            writeln!(self.out, "only showing top {} {noun}", self.num_rows)?;
        }
        writeln!(self.out)?;
        self.out.flush()?;
        Ok(())
    }
}

impl<W: Write> Sink for ConsoleSink<W> {
    fn write_batch(&mut self, batch_id: u64, schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()> {
        self.print(&batch_id.to_string(), schema, rows)
    }

    fn replay_batch(&mut self, batch_id: u64, schema: &SchemaRef, rows: &[RecordBatch]) -> Result<()> {
        self.print(&format!("{batch_id} (replayed after a restart; shown before)"), schema, rows)
    }

    fn description(&self) -> String {
        "ConsoleSink".to_string()
    }
}

/// The first `limit` rows of `rows`, without copying them.
fn first_rows(rows: &[RecordBatch], limit: usize) -> Vec<RecordBatch> {
    let mut left = limit;
    let mut shown = Vec::new();
    for batch in rows {
        if left == 0 {
            break;
        }
        let take = batch.num_rows().min(left);
        if take > 0 {
            shown.push(batch.slice(0, take));
            left -= take;
        }
    }
    shown
}

/// The rows as text columns, every header and cell with its control characters
/// escaped (data cannot inject terminal escape sequences) and cut to `width`
/// characters if given; nulls stay null so that they print as they would untruncated.
fn as_text(schema: &SchemaRef, rows: &[RecordBatch], width: Option<usize>) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let cell = |text: &str| {
        let text = printable(text);
        match width {
            Some(width) => truncate_cell(&text, width),
            None => text.into_owned(),
        }
    };
    let fields: Vec<Field> =
        schema.fields().iter().map(|field| Field::new(cell(field.name()), DataType::Utf8, true)).collect();
    let text_schema = Arc::new(Schema::new(fields));
    let options = FormatOptions::default().with_display_error(true);
    let mut batches = Vec::with_capacity(rows.len());
    for batch in rows {
        let mut columns = Vec::with_capacity(batch.num_columns());
        for column in batch.columns() {
            let formatter = ArrayFormatter::try_new(column.as_ref(), &options)?;
            let cells: StringArray = (0..column.len())
                .map(|row| (!column.is_null(row)).then(|| cell(&formatter.value(row).to_string())))
                .collect();
            columns.push(Arc::new(cells) as ArrayRef);
        }
        batches.push(RecordBatch::try_new(text_schema.clone(), columns)?);
    }
    Ok((text_schema, batches))
}

/// Spark's rule: text longer than `width` (20) characters keeps its first `width - 3`
/// and gets `...`.
fn truncate_cell(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(3)).collect();
    format!("{kept}...")
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, TimestampMicrosecondArray};
    use arrow::datatypes::TimeUnit;

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("user", DataType::Utf8, true),
            Field::new("a_rather_long_column_name", DataType::Int64, false),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), true),
        ]))
    }

    fn batch(users: Vec<Option<&str>>, values: Vec<i64>, ts: Vec<Option<i64>>) -> Result<RecordBatch> {
        Ok(RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(users)),
                Arc::new(Int64Array::from(values)),
                Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("+00:00")),
            ],
        )?)
    }

    fn print(num_rows: usize, truncate: bool, batch_id: u64, rows: &[RecordBatch]) -> Result<String> {
        let mut sink = ConsoleSink::with_options(Vec::new(), num_rows, truncate);
        sink.write_batch(batch_id, &schema(), rows)?;
        Ok(String::from_utf8(sink.into_inner())?)
    }

    #[test]
    fn truncates_cells_and_headers_to_twenty_characters() -> Result<()> {
        let rows = [batch(
            vec![Some("alice"), Some("a-name-of-exactly-20"), Some("a name longer than twenty"), None],
            vec![1, 22, 333, 4],
            vec![Some(1_764_403_210_123_456), None, Some(0), None],
        )?];
        let expected = "\
-------------------------------------------
Batch: 3
-------------------------------------------
+----------------------+----------------------+----------------------+
| user                 | a_rather_long_col... | ts                   |
+----------------------+----------------------+----------------------+
| alice                | 1                    | 2025-11-29T08:00:... |
| a-name-of-exactly-20 | 22                   |                      |
| a name longer tha... | 333                  | 1970-01-01T00:00:00Z |
|                      | 4                    |                      |
+----------------------+----------------------+----------------------+

";
        assert_eq!(print(20, true, 3, &rows)?, expected);
        Ok(())
    }

    #[test]
    fn without_truncation_shows_whole_cells() -> Result<()> {
        let rows = [batch(vec![Some("a name longer than twenty")], vec![1], vec![Some(1_764_403_210_123_456)])?];
        let expected = "\
-------------------------------------------
Batch: 0
-------------------------------------------
+---------------------------+---------------------------+-----------------------------+
| user                      | a_rather_long_column_name | ts                          |
+---------------------------+---------------------------+-----------------------------+
| a name longer than twenty | 1                         | 2025-11-29T08:00:10.123456Z |
+---------------------------+---------------------------+-----------------------------+

";
        assert_eq!(print(20, false, 0, &rows)?, expected);
        Ok(())
    }

    #[test]
    fn shows_at_most_num_rows_across_record_batches() -> Result<()> {
        let rows = [
            batch(vec![Some("a")], vec![1], vec![None])?,
            batch(vec![Some("b"), Some("c")], vec![2, 3], vec![None, None])?,
            batch(vec![Some("d")], vec![4], vec![None])?,
        ];
        let expected = "\
-------------------------------------------
Batch: 1
-------------------------------------------
+------+----------------------+----+
| user | a_rather_long_col... | ts |
+------+----------------------+----+
| a    | 1                    |    |
| b    | 2                    |    |
+------+----------------------+----+
only showing top 2 rows

";
        assert_eq!(print(2, true, 1, &rows)?, expected);
        let one = print(1, false, 1, &rows)?;
        assert!(one.contains("| a    | 1                         |    |\n+"), "{one}");
        assert!(one.ends_with("+\nonly showing top 1 row\n\n"), "{one}");
        let all = print(4, true, 1, &rows)?;
        assert!(!all.contains("only showing"), "{all}");
        Ok(())
    }

    #[test]
    fn an_empty_batch_prints_the_header_only() -> Result<()> {
        let expected = "\
-------------------------------------------
Batch: 5
-------------------------------------------
+------+----------------------+----+
| user | a_rather_long_col... | ts |
+------+----------------------+----+
+------+----------------------+----+

";
        assert_eq!(print(20, true, 5, &[])?, expected);
        assert_eq!(print(20, true, 5, &[RecordBatch::new_empty(schema())])?, expected);
        Ok(())
    }

    #[test]
    fn terminal_escape_sequences_in_data_are_printed_escaped() -> Result<()> {
        // A title-setting OSC sequence and a screen-clearing CSI sequence in a cell.
        let rows = [batch(vec![Some("\u{1b}]0;pwned\u{7}"), Some("a\u{1b}[2J")], vec![1, 2], vec![None, None])?];
        for truncate in [true, false] {
            let printed = print(20, truncate, 0, &rows)?;
            assert!(!printed.contains('\u{1b}') && !printed.contains('\u{7}'), "{printed:?}");
            assert!(printed.contains("| \\u{1b}]0;pwned\\u{7} |"), "{printed}");
            assert!(printed.contains("| a\\u{1b}[2J"), "{printed}");
        }
        Ok(())
    }

    #[test]
    fn describes_itself_like_spark() {
        assert_eq!(ConsoleSink::new(Vec::new()).description(), "ConsoleSink");
    }
}
