//! Moving rows between Arrow record batches (the host's format) and the contract's
//! columnar `row-batch` (one contiguous list per column).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::buffer::{BooleanBuffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType as ArrowType, SchemaRef, TimeUnit};

use super::bindings::{Column, ColumnValues, DataType, RowBatch, Scalar, VarLen};

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

fn gather_var_len<'a>(values: impl Iterator<Item = &'a [u8]>) -> VarLen {
    let mut data = Vec::new();
    let mut offsets = vec![0u32];
    for value in values {
        data.extend_from_slice(value);
        offsets.push(data.len() as u32);
    }
    VarLen { data, offsets }
}

/// Turns a row batch a guest returned into an Arrow batch of `schema`, checking that
/// it really has that shape. `None` for an empty batch.
pub fn to_record_batch(rows: RowBatch, schema: &SchemaRef) -> Result<Option<RecordBatch>, String> {
    if rows.num_rows == 0 {
        return Ok(None);
    }
    if rows.columns.len() != schema.fields().len() {
        return Err(format!(
            "returned {} columns but the declared output schema has {} ({})",
            rows.columns.len(),
            schema.fields().len(),
            schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    let num_rows = rows.num_rows as usize;
    let mut arrays = Vec::with_capacity(rows.columns.len());
    for (column, field) in rows.columns.into_iter().zip(schema.fields()) {
        let array = to_array(column, num_rows, field.data_type(), field.is_nullable())
            .map_err(|problem| format!("output column '{}': {problem}", field.name()))?;
        arrays.push(array);
    }
    RecordBatch::try_new(schema.clone(), arrays).map(Some).map_err(|error| error.to_string())
}

fn to_array(column: Column, num_rows: usize, data_type: &ArrowType, nullable: bool) -> Result<ArrayRef, String> {
    let nulls = match column.validity {
        Some(bits) if bits.len() < num_rows.div_ceil(8) => {
            return Err(format!("validity bitmap has {} bytes, {num_rows} rows need {}", bits.len(), num_rows.div_ceil(8)));
        }
        Some(bits) => Some(NullBuffer::new(BooleanBuffer::new(bits.into(), 0, num_rows))),
        None => None,
    }
    .filter(|nulls| nulls.null_count() > 0);
    if nulls.is_some() && !nullable {
        return Err("holds nulls but is declared not nullable".into());
    }
    let check_len = |len: usize| {
        if len == num_rows { Ok(()) } else { Err(format!("has {len} values for {num_rows} rows")) }
    };
    let array: ArrayRef = match (column.values, data_type) {
        (ColumnValues::Boolean(values), ArrowType::Boolean) => {
            check_len(values.len())?;
            Arc::new(BooleanArray::new(BooleanBuffer::from(values), nulls))
        }
        (ColumnValues::Int64(values), ArrowType::Int64) => {
            check_len(values.len())?;
            Arc::new(Int64Array::new(ScalarBuffer::from(values), nulls))
        }
        (ColumnValues::Float64(values), ArrowType::Float64) => {
            check_len(values.len())?;
            Arc::new(Float64Array::new(ScalarBuffer::from(values), nulls))
        }
        (ColumnValues::Timestamp(values), ArrowType::Timestamp(TimeUnit::Microsecond, zone)) => {
            check_len(values.len())?;
            Arc::new(TimestampMicrosecondArray::new(ScalarBuffer::from(values), nulls).with_timezone_opt(zone.clone()))
        }
        (ColumnValues::Utf8(var_len), ArrowType::Utf8) => {
            let offsets = offsets(&var_len, num_rows)?;
            Arc::new(StringArray::try_new(offsets, var_len.data.into(), nulls).map_err(|e| e.to_string())?)
        }
        (ColumnValues::Binary(var_len), ArrowType::Binary) => {
            let offsets = offsets(&var_len, num_rows)?;
            Arc::new(BinaryArray::try_new(offsets, var_len.data.into(), nulls).map_err(|e| e.to_string())?)
        }
        (values, expected) => {
            return Err(format!("holds {} values but is declared {expected}", variant_name(&values)));
        }
    };
    Ok(array)
}

fn offsets(var_len: &VarLen, num_rows: usize) -> Result<OffsetBuffer<i32>, String> {
    if var_len.offsets.len() != num_rows + 1 {
        return Err(format!("has {} offsets for {num_rows} rows (needs rows + 1)", var_len.offsets.len()));
    }
    let mut converted = Vec::with_capacity(var_len.offsets.len());
    let mut previous = 0u32;
    for (index, &offset) in var_len.offsets.iter().enumerate() {
        if (index == 0 && offset != 0) || offset < previous || offset as usize > var_len.data.len() || offset > i32::MAX as u32 {
            return Err(format!("offset {index} ({offset}) is out of order or out of range"));
        }
        previous = offset;
        converted.push(offset as i32);
    }
    Ok(OffsetBuffer::new(ScalarBuffer::from(converted)))
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
