//! Read access to a columnar batch of rows: by column (slices) or by row (views).

use std::rc::Rc;

use crate::error::{Error, Result};
use crate::schema::{ColumnRef, DataType, Field, Schema};
use crate::value::{Datum, Value};

/// The values of one column, one per row (a null row holds a placeholder).
#[derive(Clone, Debug)]
pub(crate) enum Values {
    Boolean(Vec<bool>),
    Int64(Vec<i64>),
    Float64(Vec<f64>),
    /// Validated: `data` is UTF-8 and every offset is a char boundary.
    Utf8 {
        data: String,
        offsets: Vec<u32>,
    },
    Binary {
        data: Vec<u8>,
        offsets: Vec<u32>,
    },
    Timestamp(Vec<i64>),
}

impl Values {
    pub(crate) fn data_type(&self) -> DataType {
        match self {
            Values::Boolean(_) => DataType::Boolean,
            Values::Int64(_) => DataType::Int64,
            Values::Float64(_) => DataType::Float64,
            Values::Utf8 { .. } => DataType::Utf8,
            Values::Binary { .. } => DataType::Binary,
            Values::Timestamp(_) => DataType::Timestamp,
        }
    }

    /// An empty column of `data_type`.
    pub(crate) fn empty(data_type: DataType) -> Values {
        match data_type {
            DataType::Boolean => Values::Boolean(Vec::new()),
            DataType::Int64 => Values::Int64(Vec::new()),
            DataType::Float64 => Values::Float64(Vec::new()),
            DataType::Utf8 => Values::Utf8 { data: String::new(), offsets: vec![0] },
            DataType::Binary => Values::Binary { data: Vec::new(), offsets: vec![0] },
            DataType::Timestamp => Values::Timestamp(Vec::new()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Values::Boolean(v) => v.len(),
            Values::Int64(v) | Values::Timestamp(v) => v.len(),
            Values::Float64(v) => v.len(),
            Values::Utf8 { offsets, .. } | Values::Binary { offsets, .. } => offsets.len().saturating_sub(1),
        }
    }

    fn datum(&self, row: usize) -> Datum<'_> {
        let range = |offsets: &[u32]| offsets[row] as usize..offsets[row + 1] as usize;
        match self {
            Values::Boolean(v) => Datum::Boolean(v[row]),
            Values::Int64(v) => Datum::Int64(v[row]),
            Values::Float64(v) => Datum::Float64(v[row]),
            Values::Utf8 { data, offsets } => Datum::Utf8(&data[range(offsets)]),
            Values::Binary { data, offsets } => Datum::Binary(&data[range(offsets)]),
            Values::Timestamp(v) => Datum::Timestamp(v[row]),
        }
    }
}

/// One column: values plus an optional Arrow-layout validity bitmap.
#[derive(Clone, Debug)]
pub(crate) struct ColumnData {
    pub(crate) values: Values,
    pub(crate) validity: Option<Vec<u8>>,
}

impl ColumnData {
    fn is_null(&self, row: usize) -> bool {
        self.validity.as_ref().is_some_and(|bits| bits[row / 8] & (1 << (row % 8)) == 0)
    }

    /// A copy of rows `range` (which lies within the column).
    fn slice(&self, range: std::ops::Range<usize>) -> ColumnData {
        let var_len = |data: &[u8], offsets: &[u32]| {
            let base = offsets[range.start];
            let data = data[base as usize..offsets[range.end] as usize].to_vec();
            (data, offsets[range.start..=range.end].iter().map(|offset| offset - base).collect())
        };
        let values = match &self.values {
            Values::Boolean(v) => Values::Boolean(v[range.clone()].to_vec()),
            Values::Int64(v) => Values::Int64(v[range.clone()].to_vec()),
            Values::Float64(v) => Values::Float64(v[range.clone()].to_vec()),
            Values::Timestamp(v) => Values::Timestamp(v[range.clone()].to_vec()),
            Values::Utf8 { data, offsets } => {
                let (data, offsets) = var_len(data.as_bytes(), offsets);
                // Every offset is a char boundary of valid UTF-8, so the slice is too.
                Values::Utf8 { data: String::from_utf8(data).unwrap_or_default(), offsets }
            }
            Values::Binary { data, offsets } => {
                let (data, offsets) = var_len(data, offsets);
                Values::Binary { data, offsets }
            }
        };
        let validity = self.validity.as_ref().map(|_| {
            let mut bits = vec![0u8; range.len().div_ceil(8)];
            for (i, row) in range.clone().enumerate() {
                if !self.is_null(row) {
                    bits[i / 8] |= 1 << (i % 8);
                }
            }
            bits
        });
        ColumnData { values, validity }
    }
}

/// Checks that `offsets` describe `rows` values inside `data` of length `data_len`.
pub(crate) fn check_offsets(offsets: &[u32], rows: usize, data_len: usize) -> Result<()> {
    if offsets.len() != rows + 1 || offsets[0] != 0 {
        return Err(Error::msg(format!("{} offsets for {rows} rows (want {} starting at 0)", offsets.len(), rows + 1)));
    }
    if offsets.windows(2).any(|pair| pair[0] > pair[1]) || offsets[rows] as usize > data_len {
        return Err(Error::msg(format!("offsets decrease or run past the {data_len} data bytes")));
    }
    Ok(())
}

/// A batch of rows in a schema, stored column by column.
///
/// Read a whole column as a slice with [`Rows::column`] (or the shortcuts
/// [`Rows::i64s`], [`Rows::f64s`], [`Rows::timestamps`], [`Rows::strs`]), or go row
/// by row with [`Rows::iter`]:
///
/// ```
/// # use eddy_guest::{testing::batch, Result};
/// # fn main() -> Result<()> {
/// let rows = batch("user STRING, amount BIGINT", &[eddy_guest::row!["a", 5], eddy_guest::row!["a", 7]])?;
/// let total: i64 = rows.i64s("amount")?.iter().sum();
/// assert_eq!(total, 12);
/// for row in rows.iter() {
///     assert_eq!(row.str("user")?, "a");
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Rows {
    schema: Rc<Schema>,
    /// The columns, shared by the batch and every slice of it.
    columns: Rc<Vec<ColumnData>>,
    /// The first of the columns' rows this batch holds.
    start: usize,
    num_rows: usize,
}

impl Rows {
    /// Checks that `columns` fit `schema` and each hold `num_rows` values.
    pub(crate) fn new(schema: Rc<Schema>, num_rows: usize, columns: Vec<ColumnData>) -> Result<Self> {
        if columns.len() != schema.len() {
            return Err(Error::msg(format!(
                "batch has {} columns but its schema ({schema}) has {}",
                columns.len(),
                schema.len()
            )));
        }
        for (field, column) in schema.fields().iter().zip(&columns) {
            let found = column.values.data_type();
            let problem = if found != field.data_type {
                Some(format!("holds {found} values"))
            } else if column.values.len() != num_rows {
                Some(format!("holds {} values for {num_rows} rows", column.values.len()))
            } else if column.validity.as_ref().is_some_and(|bits| bits.len() < num_rows.div_ceil(8)) {
                Some(format!("has a validity bitmap too short for {num_rows} rows"))
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(Error::msg(format!("column `{field}` of the batch {problem}")));
            }
        }
        Ok(Self::from_valid_parts(schema, num_rows, columns))
    }

    /// A batch built by the SDK itself, already consistent with `schema`.
    pub(crate) fn from_valid_parts(schema: Rc<Schema>, num_rows: usize, columns: Vec<ColumnData>) -> Self {
        Rows { schema, columns: Rc::new(columns), start: 0, num_rows }
    }

    /// Rows `range` of the batch (which must lie within it), sharing its columns.
    pub(crate) fn slice(&self, range: std::ops::Range<usize>) -> Rows {
        debug_assert!(range.start <= range.end && range.end <= self.num_rows, "a slice within the batch");
        Rows {
            schema: self.schema.clone(),
            columns: self.columns.clone(),
            start: self.start + range.start,
            num_rows: range.len(),
        }
    }

    /// The batch's row count and columns (copied when the batch is a slice of a larger one).
    pub(crate) fn into_parts(self) -> (usize, Vec<ColumnData>) {
        let whole = self.start == 0 && self.columns.first().is_none_or(|column| column.values.len() == self.num_rows);
        let columns = match Rc::try_unwrap(self.columns) {
            Ok(columns) if whole => columns,
            Ok(columns) => columns.iter().map(|column| column.slice(self.start..self.start + self.num_rows)).collect(),
            Err(shared) => shared.iter().map(|column| column.slice(self.start..self.start + self.num_rows)).collect(),
        };
        (self.num_rows, columns)
    }

    /// The batch's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.num_rows
    }

    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.num_rows == 0
    }

    /// The column named or numbered `col`.
    pub fn column(&self, col: impl ColumnRef) -> Result<Column<'_>> {
        let index = col.resolve(&self.schema)?;
        let data = &self.columns[index];
        Ok(Column { field: &self.schema.fields()[index], data, start: self.start, len: self.num_rows })
    }

    /// The values of the `BIGINT` column `col` (see [`Column::i64s`]).
    pub fn i64s(&self, col: impl ColumnRef) -> Result<&[i64]> {
        self.column(col)?.i64s()
    }

    /// The values of the `DOUBLE` column `col` (see [`Column::f64s`]).
    pub fn f64s(&self, col: impl ColumnRef) -> Result<&[f64]> {
        self.column(col)?.f64s()
    }

    /// The values of the `TIMESTAMP` column `col` (see [`Column::timestamps`]).
    pub fn timestamps(&self, col: impl ColumnRef) -> Result<&[i64]> {
        self.column(col)?.timestamps()
    }

    /// The `STRING` column `col` (see [`Column::strs`]).
    pub fn strs(&self, col: impl ColumnRef) -> Result<StrColumn<'_>> {
        self.column(col)?.strs()
    }

    /// The row at `index`, if there is one.
    pub fn row(&self, index: usize) -> Option<Row<'_>> {
        (index < self.num_rows).then_some(Row { rows: self, index })
    }

    /// Every row, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Row<'_>> + '_ {
        (0..self.num_rows).map(move |index| Row { rows: self, index })
    }

    /// Every row as owned values (handy in test assertions).
    pub fn to_values(&self) -> Vec<Vec<Value>> {
        self.iter().map(|row| row.to_values()).collect()
    }
}

/// One column of a [`Rows`] batch.
#[derive(Clone, Copy, Debug)]
pub struct Column<'a> {
    field: &'a Field,
    data: &'a ColumnData,
    /// The column's rows are `data`'s rows `start..start + len`.
    start: usize,
    len: usize,
}

impl<'a> Column<'a> {
    /// The column's field (name, type, nullability).
    pub fn field(&self) -> &'a Field {
        self.field
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether row `row` is null. Null rows hold a placeholder (0, 0.0, false or an
    /// empty value) in the slices this column returns.
    pub fn is_null(&self, row: usize) -> bool {
        row < self.len && self.data.is_null(self.start + row)
    }

    /// Whether any row is null.
    pub fn has_nulls(&self) -> bool {
        self.data.validity.is_some() && (0..self.len).any(|row| self.is_null(row))
    }

    /// The value of row `row` (null when null), if the row exists.
    pub fn get(&self, row: usize) -> Option<Datum<'a>> {
        if row >= self.len {
            None
        } else if self.is_null(row) {
            Some(Datum::Null)
        } else {
            Some(self.data.values.datum(self.start + row))
        }
    }

    /// This column's part of `values` (all of a column's rows).
    fn rows_of<T>(&self, values: &'a [T]) -> &'a [T] {
        &values[self.start..self.start + self.len]
    }

    /// This column's part of a variable-length column's offsets (one more than rows).
    fn offsets_of(&self, offsets: &'a [u32]) -> &'a [u32] {
        &offsets[self.start..=self.start + self.len]
    }

    /// The values of a `BIGINT` column.
    pub fn i64s(&self) -> Result<&'a [i64]> {
        match &self.data.values {
            Values::Int64(v) => Ok(self.rows_of(v)),
            _ => Err(self.mismatch(DataType::Int64, "i64s")),
        }
    }

    /// The values of a `TIMESTAMP` column, microseconds since the epoch.
    pub fn timestamps(&self) -> Result<&'a [i64]> {
        match &self.data.values {
            Values::Timestamp(v) => Ok(self.rows_of(v)),
            _ => Err(self.mismatch(DataType::Timestamp, "timestamps")),
        }
    }

    /// The values of a `DOUBLE` column.
    pub fn f64s(&self) -> Result<&'a [f64]> {
        match &self.data.values {
            Values::Float64(v) => Ok(self.rows_of(v)),
            _ => Err(self.mismatch(DataType::Float64, "f64s")),
        }
    }

    /// The values of a `BOOLEAN` column.
    pub fn bools(&self) -> Result<&'a [bool]> {
        match &self.data.values {
            Values::Boolean(v) => Ok(self.rows_of(v)),
            _ => Err(self.mismatch(DataType::Boolean, "bools")),
        }
    }

    /// A `STRING` column's values.
    pub fn strs(&self) -> Result<StrColumn<'a>> {
        match &self.data.values {
            Values::Utf8 { data, offsets } => Ok(StrColumn { data, offsets: self.offsets_of(offsets), column: *self }),
            _ => Err(self.mismatch(DataType::Utf8, "strs")),
        }
    }

    /// A `BINARY` column's values.
    pub fn binaries(&self) -> Result<BinaryColumn<'a>> {
        match &self.data.values {
            Values::Binary { data, offsets } => {
                Ok(BinaryColumn { data, offsets: self.offsets_of(offsets), column: *self })
            }
            _ => Err(self.mismatch(DataType::Binary, "binaries")),
        }
    }

    fn mismatch(&self, wanted: DataType, accessor: &str) -> Error {
        Error::msg(format!(
            "column `{}` is {}, so `{accessor}` (for {wanted}) cannot read it",
            self.field.name, self.field.data_type
        ))
    }
}

/// The values of a `STRING` column.
#[derive(Clone, Copy, Debug)]
pub struct StrColumn<'a> {
    /// All of the column's text; `offsets` (one per row and one more) point into it.
    data: &'a str,
    offsets: &'a [u32],
    column: Column<'a>,
}

impl<'a> StrColumn<'a> {
    /// The number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `row`'s text; `None` when the row is null or does not exist.
    pub fn get(&self, row: usize) -> Option<&'a str> {
        (row < self.len() && !self.column.is_null(row))
            .then(|| &self.data[self.offsets[row] as usize..self.offsets[row + 1] as usize])
    }

    /// Every row's text in order (`None` for nulls).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Option<&'a str>> + '_ {
        (0..self.len()).map(move |row| self.get(row))
    }
}

/// The values of a `BINARY` column.
#[derive(Clone, Copy, Debug)]
pub struct BinaryColumn<'a> {
    /// All of the column's bytes; `offsets` (one per row and one more) point into them.
    data: &'a [u8],
    offsets: &'a [u32],
    column: Column<'a>,
}

impl<'a> BinaryColumn<'a> {
    /// The number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `row`'s bytes; `None` when the row is null or does not exist.
    pub fn get(&self, row: usize) -> Option<&'a [u8]> {
        (row < self.len() && !self.column.is_null(row))
            .then(|| &self.data[self.offsets[row] as usize..self.offsets[row + 1] as usize])
    }

    /// Every row's bytes in order (`None` for nulls).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Option<&'a [u8]>> + '_ {
        (0..self.len()).map(move |row| self.get(row))
    }
}

/// A view of one row of a [`Rows`] batch.
///
/// The typed getters (`i64`, `str`, …) fail on a null; their `_opt` variants return
/// `None` for it. Every getter fails when the column does not exist or has another
/// type.
#[derive(Clone, Copy, Debug)]
pub struct Row<'a> {
    rows: &'a Rows,
    index: usize,
}

macro_rules! getters {
    ($($name:ident, $opt:ident, $ty:ty, $variant:ident, $sql:literal;)*) => {$(
        #[doc = concat!("The non-null `", $sql, "` value in column `col`.")]
        pub fn $name(&self, col: impl ColumnRef) -> Result<$ty> {
            let index = col.resolve(&self.rows.schema)?;
            self.$opt(index)?.ok_or_else(|| {
                Error::msg(format!(
                    "column `{}` is null in row {}; use `{}` to read a nullable column",
                    self.rows.schema.fields()[index].name, self.index, stringify!($opt)
                ))
            })
        }

        #[doc = concat!("The `", $sql, "` value in column `col`, `None` when null.")]
        pub fn $opt(&self, col: impl ColumnRef) -> Result<Option<$ty>> {
            let index = col.resolve(&self.rows.schema)?;
            if self.rows.schema.fields()[index].data_type != DataType::$variant {
                return Err(self.mismatch(index, $sql, stringify!($name)));
            }
            match self.value(index)? {
                Datum::$variant(v) => Ok(Some(v)),
                _ => Ok(None),
            }
        }
    )*};
}

impl<'a> Row<'a> {
    /// The row's position in its batch.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The value in column `col` (null when null).
    pub fn value(&self, col: impl ColumnRef) -> Result<Datum<'a>> {
        let index = col.resolve(&self.rows.schema)?;
        let (column, row) = (&self.rows.columns[index], self.rows.start + self.index);
        Ok(if column.is_null(row) { Datum::Null } else { column.values.datum(row) })
    }

    /// Whether column `col` is null in this row.
    pub fn is_null(&self, col: impl ColumnRef) -> Result<bool> {
        let index = col.resolve(&self.rows.schema)?;
        Ok(self.rows.columns[index].is_null(self.rows.start + self.index))
    }

    getters! {
        i64, i64_opt, i64, Int64, "BIGINT";
        f64, f64_opt, f64, Float64, "DOUBLE";
        bool, bool_opt, bool, Boolean, "BOOLEAN";
        str, str_opt, &'a str, Utf8, "STRING";
        bytes, bytes_opt, &'a [u8], Binary, "BINARY";
        timestamp, timestamp_opt, i64, Timestamp, "TIMESTAMP";
    }

    /// Every value of the row, owned.
    pub fn to_values(&self) -> Vec<Value> {
        let row = self.rows.start + self.index;
        self.rows
            .columns
            .iter()
            .map(|column| if column.is_null(row) { Value::Null } else { column.values.datum(row).to_value() })
            .collect()
    }

    fn mismatch(&self, index: usize, wanted: &str, accessor: &str) -> Error {
        let field = &self.rows.schema.fields()[index];
        Error::msg(format!(
            "column `{}` is {}, so `row.{accessor}(..)` (for {wanted}) cannot read it",
            field.name, field.data_type
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::batch;
    use crate::value::Value;
    use crate::{Result, row};

    #[test]
    fn a_slice_holds_exactly_its_rows_with_their_nulls() -> Result<()> {
        let rows: Vec<Vec<Value>> = (0..20)
            .map(|i| {
                let name = if i % 3 == 0 { Value::Null } else { Value::from(format!("n{i}é")) };
                let amount = if i % 5 == 0 { Value::Null } else { Value::from(i64::from(i) * 10) };
                vec![name, amount, Value::from(i % 2 == 0)]
            })
            .collect();
        let refs: Vec<Vec<crate::Datum<'_>>> = rows.iter().map(|r| r.iter().map(Value::as_datum).collect()).collect();
        let whole = batch("name STRING, amount BIGINT, even BOOLEAN", &refs)?;
        for (start, end) in [(0, 20), (0, 0), (3, 4), (7, 19), (9, 20)] {
            let slice = whole.slice(start..end);
            assert_eq!(slice.len(), end - start);
            assert_eq!(slice.to_values(), whole.to_values()[start..end].to_vec(), "rows {start}..{end}");
        }
        let single = batch("a BIGINT", &[row![1], row![2]])?.slice(1..2);
        assert_eq!(single.i64s("a")?, &[2]);
        // A slice of a slice, its columns, and its parts (copied out of the shared columns).
        let inner = whole.slice(4..18).slice(3..9);
        assert_eq!(inner.to_values(), whole.to_values()[7..13].to_vec());
        let names: Vec<Option<&str>> = inner.strs("name")?.iter().collect();
        let expected: Vec<Option<String>> = (7..13).map(|i| (i % 3 != 0).then(|| format!("n{i}é"))).collect();
        assert_eq!(names, expected.iter().map(Option::as_deref).collect::<Vec<_>>());
        assert!(inner.column("amount")?.is_null(3), "row 10 of the whole batch");
        assert_eq!(inner.i64s("amount")?.len(), 6);
        let (num_rows, columns) = inner.clone().into_parts();
        let copied = super::Rows::from_valid_parts(inner.schema.clone(), num_rows, columns);
        assert_eq!(copied.to_values(), inner.to_values());
        Ok(())
    }
}
