//! Buffering output rows column by column in the declared output schema.

use std::rc::Rc;

use crate::error::{Error, Result};
use crate::rows::{ColumnData, Rows, Values};
use crate::schema::{ColumnRef, DataType, Field, Schema};
use crate::value::Datum;

/// The output size past which a call returns before its next key or timer.
pub(crate) const CALL_OUTPUT_BYTES: usize = 8 << 20;

/// Builds a columnar batch row by row, checking every value against the schema.
#[derive(Debug)]
pub(crate) struct BatchBuilder {
    schema: Rc<Schema>,
    columns: Vec<ColumnData>,
    num_rows: usize,
}

impl BatchBuilder {
    pub(crate) fn new(schema: Rc<Schema>) -> Self {
        let columns = schema
            .fields()
            .iter()
            .map(|field| ColumnData { values: Values::empty(field.data_type), validity: None })
            .collect();
        BatchBuilder { schema, columns, num_rows: 0 }
    }

    /// Appends one row; on error nothing is appended.
    pub(crate) fn append(&mut self, values: &[Datum<'_>]) -> Result<()> {
        if values.len() != self.schema.len() {
            return Err(Error::msg(format!(
                "row has {} values but the schema ({}) has {} columns",
                values.len(),
                self.schema,
                self.schema.len()
            )));
        }
        if u32::try_from(self.num_rows + 1).is_err() {
            return Err(Error::msg("a batch holds at most 4294967295 rows"));
        }
        for ((field, column), value) in self.schema.fields().iter().zip(&self.columns).zip(values) {
            check(field, column, value)?;
        }
        let row = self.num_rows;
        for (column, value) in self.columns.iter_mut().zip(values) {
            push(column, row, *value);
        }
        self.num_rows += 1;
        Ok(())
    }

    pub(crate) fn schema(&self) -> &Rc<Schema> {
        &self.schema
    }

    pub(crate) fn len(&self) -> usize {
        self.num_rows
    }

    /// The bytes the columns hold so far (8 per number, a variable-length value's
    /// bytes plus its 4-byte offset).
    pub(crate) fn bytes(&self) -> usize {
        let per_column = |column: &ColumnData| match &column.values {
            Values::Utf8 { data, .. } => data.len() + 4 * self.num_rows,
            Values::Binary { data, .. } => data.len() + 4 * self.num_rows,
            _ => 8 * self.num_rows,
        };
        self.columns.iter().map(per_column).sum()
    }

    pub(crate) fn finish(self) -> Rows {
        Rows::from_valid_parts(self.schema, self.num_rows, self.columns)
    }
}

/// Whether `value` may go into `column` of type `field`.
fn check(field: &Field, column: &ColumnData, value: &Datum<'_>) -> Result<()> {
    let fits = match (field.data_type, value) {
        (_, Datum::Null) => field.nullable,
        (DataType::Timestamp, Datum::Int64(_)) => true,
        (data_type, value) => value.data_type() == Some(data_type),
    };
    if !fits {
        let found = value.data_type().map_or("NULL", DataType::sql_name);
        return Err(Error::msg(format!(
            "column `{field}` cannot hold the {found} value `{value}`; the output schema is \
             declared in init with `set_output_schema`"
        )));
    }
    let added = match value {
        Datum::Utf8(v) => v.len(),
        Datum::Binary(v) => v.len(),
        _ => 0,
    };
    let used = match &column.values {
        Values::Utf8 { data, .. } => data.len(),
        Values::Binary { data, .. } => data.len(),
        _ => 0,
    };
    if u32::try_from(used + added).is_err() {
        return Err(Error::msg(format!(
            "column `{}` would exceed 4 GiB of data in one batch; emit fewer or smaller values",
            field.name
        )));
    }
    Ok(())
}

/// Appends a value that `check` accepted.
fn push(column: &mut ColumnData, row: usize, value: Datum<'_>) {
    let null = matches!(value, Datum::Null);
    match (&mut column.values, value) {
        (Values::Boolean(v), value) => v.push(matches!(value, Datum::Boolean(true))),
        (Values::Int64(v), Datum::Int64(x)) => v.push(x),
        (Values::Timestamp(v), Datum::Timestamp(x) | Datum::Int64(x)) => v.push(x),
        (Values::Int64(v) | Values::Timestamp(v), _) => v.push(0),
        (Values::Float64(v), Datum::Float64(x)) => v.push(x),
        (Values::Float64(v), _) => v.push(0.0),
        (Values::Utf8 { data, offsets }, value) => {
            if let Datum::Utf8(text) = value {
                data.push_str(text);
            }
            offsets.push(data.len() as u32);
        }
        (Values::Binary { data, offsets }, value) => {
            if let Datum::Binary(bytes) = value {
                data.extend_from_slice(bytes);
            }
            offsets.push(data.len() as u32);
        }
    }
    if null && column.validity.is_none() {
        // First null: every earlier row is present.
        let mut bits = vec![0xff; row.div_ceil(8)];
        if let Some(last) = bits.last_mut().filter(|_| !row.is_multiple_of(8)) {
            *last = (1u8 << (row % 8)) - 1;
        }
        column.validity = Some(bits);
    }
    if let Some(bits) = &mut column.validity {
        if bits.len() <= row / 8 {
            bits.push(0);
        }
        if !null {
            bits[row / 8] |= 1 << (row % 8);
        }
    }
}

/// The rows a handler outputs, buffered column by column in the output schema the
/// processor declared in `init`, and handed to the host as one batch when the handler
/// returns.
///
/// Append rows positionally with [`Output::append_row`] and the
/// [`row!`](crate::row) macro, or by column name with [`Output::row`]:
///
/// ```
/// # use eddy_guest::{row, Result};
/// # fn emit(out: &mut eddy_guest::Output) -> Result<()> {
/// // output schema: user STRING, count BIGINT, sum BIGINT
/// out.append_row(&row!["alice", 2, 12])?;
/// out.row().set("user", "bob").set("count", 1).set("sum", 5).append()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Output {
    builder: BatchBuilder,
    /// Where the current handler's rows start (one output serves every key of a call).
    start: usize,
}

impl Output {
    pub(crate) fn new(schema: Rc<Schema>) -> Self {
        Output { builder: BatchBuilder::new(schema), start: 0 }
    }

    /// Ends the current handler's rows: the next handler's start here. Returns the
    /// end of the rows so far.
    pub(crate) fn end_handler(&mut self) -> usize {
        self.start = self.builder.len();
        self.start
    }

    /// Whether the call's rows have grown enough that it should return before the
    /// next key (the host hands the rest over in another call, so that a call's
    /// output stays small in the processor's memory).
    pub(crate) fn call_is_full(&self) -> bool {
        self.builder.bytes() >= CALL_OUTPUT_BYTES
    }

    /// The output schema.
    pub fn schema(&self) -> &Schema {
        self.builder.schema()
    }

    /// How many rows this handler appended.
    pub fn len(&self) -> usize {
        self.builder.len() - self.start
    }

    /// Whether no row was appended.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a row of values in output-schema order. Fails (appending nothing) when
    /// the count or a type does not match, or a null goes into a `NOT NULL` column.
    pub fn append_row(&mut self, values: &[Datum<'_>]) -> Result<()> {
        self.builder.append(values).map_err(|e| e.context("cannot append an output row"))
    }

    /// Starts a row whose columns are set by name or position; unset nullable
    /// columns are null.
    pub fn row<'v>(&mut self) -> RowWriter<'_, 'v> {
        let width = self.builder.schema().len();
        RowWriter { output: self, values: vec![None; width], error: None }
    }

    pub(crate) fn finish(self) -> Rows {
        self.builder.finish()
    }
}

/// One output row being built by column; see [`Output::row`].
#[must_use = "a row is only output by `append()`"]
pub struct RowWriter<'o, 'v> {
    output: &'o mut Output,
    values: Vec<Option<Datum<'v>>>,
    error: Option<Error>,
}

impl<'v> RowWriter<'_, 'v> {
    /// Sets column `col` (a name or position) to `value`.
    pub fn set(mut self, col: impl ColumnRef, value: impl Into<Datum<'v>>) -> Self {
        match col.resolve(self.output.schema()) {
            Ok(index) => self.values[index] = Some(value.into()),
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// Appends the row: fails (appending nothing) on an unknown column, a value of the
    /// wrong type, or an unset `NOT NULL` column.
    pub fn append(self) -> Result<()> {
        let context = "cannot append an output row";
        if let Some(error) = self.error {
            return Err(error.context(context));
        }
        let schema = self.output.schema();
        if let Some((field, _)) = schema.fields().iter().zip(&self.values).find(|(f, v)| v.is_none() && !f.nullable) {
            return Err(Error::msg(format!("{context}: column `{field}` was not set")));
        }
        let values: Vec<Datum<'v>> = self.values.into_iter().map(|v| v.unwrap_or(Datum::Null)).collect();
        self.output.builder.append(&values).map_err(|e| e.context(context))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row;

    fn output() -> Output {
        Output::new(Rc::new(Schema::parse("user STRING NOT NULL, n BIGINT, t TIMESTAMP").unwrap()))
    }

    #[test]
    fn rows_by_name_fill_unset_nullable_columns_with_null() -> Result<()> {
        let mut out = output();
        out.row().set("n", 3).set("user", "a").append()?;
        out.append_row(&row!["b", None::<i64>, 7])?;
        let rows = out.finish();
        assert!(rows.column("t")?.is_null(0) && rows.column("n")?.is_null(1));
        assert_eq!(rows.row(1).map(|r| r.timestamp("t")).transpose()?, Some(7), "i64 fits TIMESTAMP");
        Ok(())
    }

    #[test]
    fn bad_rows_are_refused_whole() {
        let mut out = output();
        let unset = out.row().set("n", 1).append().unwrap_err();
        assert!(unset.message().contains("column `user STRING NOT NULL` was not set"), "{unset}");
        let unknown = out.row().set("user", "a").set("nope", 1).append().unwrap_err();
        assert!(unknown.message().contains("no column `nope`"), "{unknown}");
        let null = out.append_row(&row![None::<&str>, 1, 2]).unwrap_err();
        assert!(null.message().contains("cannot hold the NULL value"), "{null}");
        let width = out.append_row(&row!["a"]).unwrap_err();
        assert!(width.message().contains("row has 1 values"), "{width}");
        assert!(out.is_empty());
    }

    #[test]
    fn schemas_parse_and_refuse_mistakes() {
        assert!(Schema::parse("").is_ok_and(|s| s.is_empty()));
        let unknown = Schema::parse("a INTEGER").unwrap_err();
        assert!(unknown.message().contains("unknown type `INTEGER`"), "{unknown}");
        let twice = Schema::parse("a BIGINT, a STRING").unwrap_err();
        assert!(twice.message().contains("two fields named `a`"), "{twice}");
        assert!(Schema::parse("a BIGINT NULL").is_err());
    }
}
