//! Moving rows between Arrow record batches (the host's format) and the contract's
//! columnar `row-batch` (one contiguous list per column).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::buffer::{BooleanBuffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType as ArrowType, SchemaRef, TimeUnit};

use super::{Column, ColumnValues, DataType, RowBatch, Scalar, VarLen};

/// The Arrow type eddy uses for a contract type.
pub fn arrow_type(data_type: DataType) -> ArrowType {
    match data_type {
        DataType::Boolean => ArrowType::Boolean,
        DataType::Int64 => ArrowType::Int64,
        DataType::Float64 => ArrowType::Float64,
        DataType::Utf8 => ArrowType::Utf8,
        DataType::Binary => ArrowType::Binary,
        DataType::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
    }
}

/// The contract type of an Arrow type, if eddy supports it.
pub fn contract_type(arrow: &ArrowType) -> Option<DataType> {
    Some(match arrow {
        ArrowType::Boolean => DataType::Boolean,
        ArrowType::Int64 => DataType::Int64,
        ArrowType::Float64 => DataType::Float64,
        ArrowType::Utf8 => DataType::Utf8,
        ArrowType::Binary => DataType::Binary,
        ArrowType::Timestamp(TimeUnit::Microsecond, _) => DataType::Timestamp,
        _ => return None,
    })
}

fn downcast<T: 'static>(array: &ArrayRef) -> &T {
    // The schema fixes each column's Arrow type to one `arrow_type` result, and the
    // decoder builds arrays of exactly that type.
    array.as_any().downcast_ref::<T>().expect("column type follows the declared schema")
}

/// The value of `array` at `row` as a scalar.
pub fn scalar_at(array: &ArrayRef, row: usize) -> Scalar {
    if array.is_null(row) {
        return Scalar::Null;
    }
    match array.data_type() {
        ArrowType::Boolean => Scalar::Boolean(downcast::<BooleanArray>(array).value(row)),
        ArrowType::Int64 => Scalar::Int64(downcast::<Int64Array>(array).value(row)),
        ArrowType::Float64 => Scalar::Float64(downcast::<Float64Array>(array).value(row)),
        ArrowType::Utf8 => Scalar::Utf8(downcast::<StringArray>(array).value(row).to_string()),
        ArrowType::Binary => Scalar::Binary(downcast::<BinaryArray>(array).value(row).to_vec()),
        ArrowType::Timestamp(TimeUnit::Microsecond, _) => {
            Scalar::Timestamp(downcast::<TimestampMicrosecondArray>(array).value(row))
        }
        other => unreachable!("eddy schemas never hold {other}"),
    }
}

/// The key as a user would write it, e.g. `["alice", 3]`.
pub fn key_label(key: &[Scalar]) -> String {
    let parts: Vec<serde_json::Value> = key.iter().map(scalar_json).collect();
    serde_json::Value::Array(parts).to_string()
}

/// A scalar as JSON (timestamps as microseconds, bytes as an array of numbers).
pub fn scalar_json(value: &Scalar) -> serde_json::Value {
    match value {
        Scalar::Null => serde_json::Value::Null,
        Scalar::Boolean(b) => (*b).into(),
        Scalar::Int64(v) | Scalar::Timestamp(v) => (*v).into(),
        Scalar::Float64(v) => serde_json::Number::from_f64(*v).map_or(serde_json::Value::Null, Into::into),
        Scalar::Utf8(s) => s.clone().into(),
        Scalar::Binary(b) => b.clone().into(),
    }
}

/// The rows of `batch` at `indices`, in that order, as a contract row batch.
pub fn gather(batch: &RecordBatch, indices: &[u32]) -> RowBatch {
    let columns = batch.columns().iter().map(|array| gather_column(array, indices)).collect();
    RowBatch { num_rows: indices.len() as u32, columns }
}

fn gather_column(array: &ArrayRef, indices: &[u32]) -> Column {
    let at = |i: &u32| *i as usize;
    let values = match array.data_type() {
        ArrowType::Boolean => {
            let a = downcast::<BooleanArray>(array);
            ColumnValues::Boolean(indices.iter().map(|i| a.value(at(i))).collect())
        }
        ArrowType::Int64 => {
            let v = downcast::<Int64Array>(array).values();
            ColumnValues::Int64(indices.iter().map(|i| v[at(i)]).collect())
        }
        ArrowType::Float64 => {
            let v = downcast::<Float64Array>(array).values();
            ColumnValues::Float64(indices.iter().map(|i| v[at(i)]).collect())
        }
        ArrowType::Timestamp(TimeUnit::Microsecond, _) => {
            let v = downcast::<TimestampMicrosecondArray>(array).values();
            ColumnValues::Timestamp(indices.iter().map(|i| v[at(i)]).collect())
        }
        ArrowType::Utf8 => {
            let a = downcast::<StringArray>(array);
            ColumnValues::Utf8(gather_var_len(indices.iter().map(|i| a.value(at(i)).as_bytes())))
        }
        ArrowType::Binary => {
            let a = downcast::<BinaryArray>(array);
            ColumnValues::Binary(gather_var_len(indices.iter().map(|i| a.value(at(i)))))
        }
        other => unreachable!("eddy schemas never hold {other}"),
    };
    let validity = array.nulls().filter(|nulls| nulls.null_count() > 0).map(|nulls| {
        let mut bits = vec![0u8; indices.len().div_ceil(8)];
        for (out, i) in indices.iter().enumerate() {
            if nulls.is_valid(at(i)) {
                bits[out / 8] |= 1 << (out % 8);
            }
        }
        bits
    });
    Column { values, validity }
}

fn gather_var_len<'a>(values: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> VarLen {
    // Sized up front: growing by doubling would copy each key's bytes several times.
    let mut data = Vec::with_capacity(values.clone().map(<[u8]>::len).sum());
    let mut offsets = Vec::with_capacity(values.len() + 1);
    offsets.push(0u32);
    for value in values {
        data.extend_from_slice(value);
        offsets.push(data.len() as u32);
    }
    VarLen { data, offsets }
}

/// The bytes `rows` holds (see [`row_range_bytes`]).
pub fn row_batch_bytes(rows: &RowBatch) -> u64 {
    row_range_bytes(rows, 0..rows.num_rows)
}

/// The bytes rows `range` of `rows` hold: 1 per boolean, 8 per number or timestamp,
/// the text or bytes of a variable-length value plus 4 for its offset (and one more
/// offset per column), and the validity bitmaps. The range must lie within the batch.
pub fn row_range_bytes(rows: &RowBatch, range: std::ops::Range<u32>) -> u64 {
    let (start, end) = (range.start as usize, range.end as usize);
    let n = end.saturating_sub(start);
    rows.columns
        .iter()
        .map(|column| {
            let values = match &column.values {
                ColumnValues::Boolean(_) => n,
                ColumnValues::Int64(_) | ColumnValues::Timestamp(_) | ColumnValues::Float64(_) => n * 8,
                ColumnValues::Utf8(var_len) | ColumnValues::Binary(var_len) => {
                    let offset = |row: usize| var_len.offsets.get(row).copied().unwrap_or(0) as usize;
                    offset(end).saturating_sub(offset(start)) + (n + 1) * 4
                }
            };
            let validity = column.validity.as_ref().map_or(0, |_| n.div_ceil(8));
            (values + validity) as u64
        })
        .sum()
}

/// Collects the row batches a guest returns during a batch, checking each against the
/// declared output schema as it arrives, and builds one Arrow batch at the end (rather
/// than one tiny batch per call).
pub struct OutputRows {
    schema: SchemaRef,
    columns: Vec<Accumulated>,
    num_rows: usize,
    num_bytes: u64,
}

struct Accumulated {
    values: ColumnValues,
    /// Per-row presence, materialized once a null arrives.
    validity: Option<Vec<bool>>,
}

impl OutputRows {
    /// An empty collection for `schema`.
    pub fn new(schema: SchemaRef) -> Self {
        let columns = schema
            .fields()
            .iter()
            .map(|field| Accumulated { values: empty_values(field.data_type()), validity: None })
            .collect();
        Self { schema, columns, num_rows: 0, num_bytes: 0 }
    }

    /// How many rows are collected.
    pub fn num_rows(&self) -> u64 {
        self.num_rows as u64
    }

    /// How many bytes the collected rows took as returned ([`row_batch_bytes`]).
    pub fn num_bytes(&self) -> u64 {
        self.num_bytes
    }

    /// Appends a returned batch, or explains how it does not fit the schema.
    pub fn push(&mut self, rows: RowBatch) -> Result<(), String> {
        if rows.num_rows == 0 {
            return Ok(());
        }
        let fields = self.schema.fields();
        if rows.columns.len() != fields.len() {
            return Err(format!(
                "returned {} columns but the declared output schema has {} ({})",
                rows.columns.len(),
                fields.len(),
                fields.iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        let num_rows = rows.num_rows as usize;
        let num_bytes = row_batch_bytes(&rows);
        for (column, field) in rows.columns.iter().zip(fields) {
            check_column(column, num_rows, field.is_nullable())
                .map_err(|problem| format!("output column '{}': {problem}", field.name()))?;
        }
        for ((column, accumulated), field) in rows.columns.into_iter().zip(&mut self.columns).zip(fields) {
            let name = field.name();
            append_values(&mut accumulated.values, column.values)
                .map_err(|problem| format!("output column '{name}': {problem}"))?;
            match (column.validity, &mut accumulated.validity) {
                (Some(bits), validity) => {
                    let present = validity.get_or_insert_with(|| vec![true; self.num_rows]);
                    present.extend((0..num_rows).map(|i| bits[i / 8] & (1 << (i % 8)) != 0));
                }
                (None, Some(present)) => present.extend(std::iter::repeat_n(true, num_rows)),
                (None, None) => {}
            }
        }
        self.num_rows += num_rows;
        self.num_bytes += num_bytes;
        Ok(())
    }

    /// The collected rows as one Arrow batch (`None` when there are none).
    pub fn finish(self) -> Result<Option<RecordBatch>, String> {
        if self.num_rows == 0 {
            return Ok(None);
        }
        let mut arrays = Vec::with_capacity(self.columns.len());
        for (column, field) in self.columns.into_iter().zip(self.schema.fields()) {
            let nulls = column.validity.map(NullBuffer::from).filter(|nulls| nulls.null_count() > 0);
            arrays.push(
                to_array(column.values, nulls, field.data_type())
                    .map_err(|problem| format!("output column '{}': {problem}", field.name()))?,
            );
        }
        RecordBatch::try_new(self.schema.clone(), arrays).map(Some).map_err(|error| error.to_string())
    }
}

fn empty_values(data_type: &ArrowType) -> ColumnValues {
    let var_len = || VarLen { data: Vec::new(), offsets: vec![0] };
    match data_type {
        ArrowType::Boolean => ColumnValues::Boolean(Vec::new()),
        ArrowType::Int64 => ColumnValues::Int64(Vec::new()),
        ArrowType::Float64 => ColumnValues::Float64(Vec::new()),
        ArrowType::Utf8 => ColumnValues::Utf8(var_len()),
        ArrowType::Binary => ColumnValues::Binary(var_len()),
        _ => ColumnValues::Timestamp(Vec::new()),
    }
}

/// Checks lengths, offsets, UTF-8 and nullability of one returned column.
fn check_column(column: &Column, num_rows: usize, nullable: bool) -> Result<(), String> {
    let len = match &column.values {
        ColumnValues::Boolean(v) => v.len(),
        ColumnValues::Int64(v) | ColumnValues::Timestamp(v) => v.len(),
        ColumnValues::Float64(v) => v.len(),
        ColumnValues::Utf8(var_len) | ColumnValues::Binary(var_len) => {
            check_offsets(var_len, num_rows)?;
            if let ColumnValues::Utf8(var_len) = &column.values {
                for (i, pair) in var_len.offsets.windows(2).enumerate() {
                    if std::str::from_utf8(&var_len.data[pair[0] as usize..pair[1] as usize]).is_err() {
                        return Err(format!("row {i} is not valid UTF-8"));
                    }
                }
            }
            num_rows
        }
    };
    if len != num_rows {
        return Err(format!("has {len} values for {num_rows} rows"));
    }
    if let Some(bits) = &column.validity {
        if bits.len() < num_rows.div_ceil(8) {
            return Err(format!(
                "validity bitmap has {} bytes, {num_rows} rows need {}",
                bits.len(),
                num_rows.div_ceil(8)
            ));
        }
        let has_null = (0..num_rows).any(|i| bits[i / 8] & (1 << (i % 8)) == 0);
        if has_null && !nullable {
            return Err("holds nulls but is declared not nullable".into());
        }
    }
    Ok(())
}

fn check_offsets(var_len: &VarLen, num_rows: usize) -> Result<(), String> {
    if var_len.offsets.len() != num_rows + 1 {
        return Err(format!("has {} offsets for {num_rows} rows (needs rows + 1)", var_len.offsets.len()));
    }
    let mut previous = 0u32;
    for (index, &offset) in var_len.offsets.iter().enumerate() {
        if (index == 0 && offset != 0) || offset < previous || offset as usize > var_len.data.len() {
            return Err(format!("offset {index} ({offset}) is out of order or out of range"));
        }
        previous = offset;
    }
    Ok(())
}

fn append_values(into: &mut ColumnValues, values: ColumnValues) -> Result<(), String> {
    match (into, values) {
        (ColumnValues::Boolean(a), ColumnValues::Boolean(b)) => a.extend(b),
        (ColumnValues::Int64(a), ColumnValues::Int64(b)) => a.extend(b),
        (ColumnValues::Float64(a), ColumnValues::Float64(b)) => a.extend(b),
        (ColumnValues::Timestamp(a), ColumnValues::Timestamp(b)) => a.extend(b),
        (ColumnValues::Utf8(a), ColumnValues::Utf8(b)) | (ColumnValues::Binary(a), ColumnValues::Binary(b)) => {
            let base = a.data.len() as u32;
            a.data.extend_from_slice(&b.data[..b.offsets.last().map_or(0, |end| *end as usize)]);
            a.offsets.extend(b.offsets[1..].iter().map(|offset| base + offset));
        }
        (into, values) => {
            return Err(format!("holds {} values but is declared {}", variant_name(&values), variant_name(into)));
        }
    }
    Ok(())
}

fn to_array(values: ColumnValues, nulls: Option<NullBuffer>, data_type: &ArrowType) -> Result<ArrayRef, String> {
    let offsets = |var_len: &VarLen| -> Result<OffsetBuffer<i32>, String> {
        let converted: Result<Vec<i32>, _> = var_len.offsets.iter().map(|&o| i32::try_from(o)).collect();
        Ok(OffsetBuffer::new(ScalarBuffer::from(
            converted.map_err(|_| "more than 2 GiB of text in one batch".to_string())?,
        )))
    };
    Ok(match values {
        ColumnValues::Boolean(v) => Arc::new(BooleanArray::new(BooleanBuffer::from(v), nulls)),
        ColumnValues::Int64(v) => Arc::new(Int64Array::new(ScalarBuffer::from(v), nulls)),
        ColumnValues::Float64(v) => Arc::new(Float64Array::new(ScalarBuffer::from(v), nulls)),
        ColumnValues::Timestamp(v) => {
            let zone = match data_type {
                ArrowType::Timestamp(_, zone) => zone.clone(),
                _ => None,
            };
            Arc::new(TimestampMicrosecondArray::new(ScalarBuffer::from(v), nulls).with_timezone_opt(zone))
        }
        ColumnValues::Utf8(var_len) => {
            let offsets = offsets(&var_len)?;
            Arc::new(StringArray::try_new(offsets, var_len.data.into(), nulls).map_err(|e| e.to_string())?)
        }
        ColumnValues::Binary(var_len) => {
            let offsets = offsets(&var_len)?;
            Arc::new(BinaryArray::try_new(offsets, var_len.data.into(), nulls).map_err(|e| e.to_string())?)
        }
    })
}

fn variant_name(values: &ColumnValues) -> &'static str {
    match values {
        ColumnValues::Boolean(_) => "boolean",
        ColumnValues::Int64(_) => "int64",
        ColumnValues::Float64(_) => "float64",
        ColumnValues::Utf8(_) => "utf8",
        ColumnValues::Binary(_) => "binary",
        ColumnValues::Timestamp(_) => "timestamp",
    }
}
