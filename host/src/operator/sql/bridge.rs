//! Batches across the two Arrow versions in the tree: eddy's (60) and DataFusion's (59).
//! Each column crosses at the Arrow C Data Interface — the stable ABI both implement —
//! so its buffers are shared, not copied; only the small structs that describe them
//! are moved from one crate's type to the other's, which have the same C layout.

use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::{RecordBatch, make_array};
use arrow::datatypes::{Schema, SchemaRef};
use arrow_datafusion as df;

/// An eddy schema as DataFusion's.
pub fn schema_to_datafusion(schema: &Schema) -> Result<df::datatypes::SchemaRef> {
    let exported = arrow::ffi::FFI_ArrowSchema::try_from(schema)?;
    // SAFETY: both types are the C Data Interface's `ArrowSchema`, `#[repr(C)]`, with
    // the same fields; ownership (and the release callback) moves with the value.
    let imported: df::ffi::FFI_ArrowSchema = unsafe { std::mem::transmute(exported) };
    Ok(Arc::new(df::datatypes::Schema::try_from(&imported)?))
}

/// A DataFusion schema as eddy's.
pub fn schema_from_datafusion(schema: &df::datatypes::Schema) -> Result<SchemaRef> {
    let exported = df::ffi::FFI_ArrowSchema::try_from(schema)?;
    // SAFETY: as in `schema_to_datafusion`.
    let imported: arrow::ffi::FFI_ArrowSchema = unsafe { std::mem::transmute(exported) };
    Ok(Arc::new(Schema::try_from(&imported)?))
}

/// An eddy batch as a DataFusion batch of `schema`.
pub fn to_datafusion(batch: &RecordBatch, schema: &df::datatypes::SchemaRef) -> Result<df::array::RecordBatch> {
    let mut columns = Vec::with_capacity(batch.num_columns());
    for column in batch.columns() {
        let (array, array_schema) = arrow::ffi::to_ffi(&column.to_data())?;
        // SAFETY: `ArrowArray` and `ArrowSchema` of the C Data Interface in both crates
        // (`#[repr(C)]`, same fields); the exported array owns its buffers until its
        // release callback runs, which the importing side calls when done.
        let (array, array_schema) = unsafe {
            (
                std::mem::transmute::<arrow::ffi::FFI_ArrowArray, df::ffi::FFI_ArrowArray>(array),
                std::mem::transmute::<arrow::ffi::FFI_ArrowSchema, df::ffi::FFI_ArrowSchema>(array_schema),
            )
        };
        // SAFETY: the array was just exported by arrow's own `to_ffi` and is valid.
        let data =
            unsafe { df::ffi::from_ffi(array, &array_schema) }.context("a column does not cross to DataFusion")?;
        columns.push(df::array::make_array(data));
    }
    let options = df::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(df::array::RecordBatch::try_new_with_options(schema.clone(), columns, &options)?)
}

/// A DataFusion batch as an eddy batch of `schema`.
pub fn from_datafusion(batch: &df::array::RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let mut columns = Vec::with_capacity(batch.num_columns());
    for column in batch.columns() {
        let (array, array_schema) = df::ffi::to_ffi(&column.to_data())?;
        // SAFETY: as in `to_datafusion`, the other way round.
        let (array, array_schema) = unsafe {
            (
                std::mem::transmute::<df::ffi::FFI_ArrowArray, arrow::ffi::FFI_ArrowArray>(array),
                std::mem::transmute::<df::ffi::FFI_ArrowSchema, arrow::ffi::FFI_ArrowSchema>(array_schema),
            )
        };
        // SAFETY: the array was just exported by DataFusion's arrow and is valid.
        let data =
            unsafe { arrow::ffi::from_ffi(array, &array_schema) }.context("a column does not cross from DataFusion")?;
        columns.push(make_array(data));
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(schema.clone(), columns, &options)?)
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow::datatypes::{DataType, Field, TimeUnit};

    use super::*;

    #[test]
    fn a_batch_crosses_to_datafusion_and_back_unchanged() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("user", DataType::Utf8, true),
            Field::new("amount", DataType::Int64, false),
            Field::new("price", DataType::Float64, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec![Some("a"), None, Some("ccc")])),
                Arc::new(Int64Array::from(vec![1, i64::MIN, i64::MAX])),
                Arc::new(Float64Array::from(vec![Some(1.5), Some(f64::NAN), None])),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![Some(0), None, Some(1_800_000_000_000_000)])
                        .with_timezone("UTC"),
                ),
            ],
        )
        .unwrap();
        let df_schema = schema_to_datafusion(&schema).unwrap();
        assert_eq!(df_schema.fields().len(), 4);
        let crossed = to_datafusion(&batch.slice(1, 2), &df_schema).unwrap();
        assert_eq!(crossed.num_rows(), 2);
        let back = from_datafusion(&crossed, &schema_from_datafusion(&df_schema).unwrap()).unwrap();
        assert_eq!(back, batch.slice(1, 2));
        assert_eq!(back.column(0).as_any().downcast_ref::<StringArray>().unwrap().value(1), "ccc");
    }
}
