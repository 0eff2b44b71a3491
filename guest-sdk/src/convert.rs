//! Conversions between the WIT types and the SDK's types.

use std::rc::Rc;

use crate::bindings::eddy::processor::types as wit;
use crate::context::{Spec, StateKind};
use crate::error::{Error, Result};
use crate::key::Key;
use crate::modes::{OutputMode, TimeMode};
use crate::rows::{ColumnData, Rows, Values, check_offsets};
use crate::schema::{DataType, Field, Schema};
use crate::timers::TimerValues;
use crate::value::Value;

fn data_type_from_wit(data_type: wit::DataType) -> DataType {
    match data_type {
        wit::DataType::Boolean => DataType::Boolean,
        wit::DataType::Int64 => DataType::Int64,
        wit::DataType::Float64 => DataType::Float64,
        wit::DataType::Utf8 => DataType::Utf8,
        wit::DataType::Binary => DataType::Binary,
        wit::DataType::Timestamp => DataType::Timestamp,
    }
}

fn data_type_to_wit(data_type: DataType) -> wit::DataType {
    match data_type {
        DataType::Boolean => wit::DataType::Boolean,
        DataType::Int64 => wit::DataType::Int64,
        DataType::Float64 => wit::DataType::Float64,
        DataType::Utf8 => wit::DataType::Utf8,
        DataType::Binary => wit::DataType::Binary,
        DataType::Timestamp => wit::DataType::Timestamp,
    }
}

pub(crate) fn schema_from_wit(fields: Vec<wit::Field>, what: &str) -> Result<Rc<Schema>> {
    let fields = fields
        .into_iter()
        .map(|f| Field { name: f.name, data_type: data_type_from_wit(f.data_type), nullable: f.nullable })
        .collect();
    Ok(Rc::new(Schema::new(fields).map_err(|e| e.context(format!("the host's {what}")))?))
}

fn schema_to_wit(schema: &Schema) -> Vec<wit::Field> {
    schema
        .fields()
        .iter()
        .map(|f| wit::Field { name: f.name.clone(), data_type: data_type_to_wit(f.data_type), nullable: f.nullable })
        .collect()
}

pub(crate) fn output_mode_from_wit(mode: wit::OutputMode) -> OutputMode {
    match mode {
        wit::OutputMode::Append => OutputMode::Append,
        wit::OutputMode::Update => OutputMode::Update,
        wit::OutputMode::Complete => OutputMode::Complete,
    }
}

pub(crate) fn spec_to_wit(spec: &Spec) -> wit::ProcessorSpec {
    wit::ProcessorSpec {
        state: spec
            .state
            .iter()
            .map(|decl| wit::StateDeclaration {
                name: decl.name.clone(),
                kind: match decl.kind {
                    StateKind::Value => wit::StateKind::Value,
                    StateKind::List => wit::StateKind::List,
                    StateKind::Map => wit::StateKind::Map,
                },
                ttl: decl.ttl_micros,
            })
            .collect(),
        output_schema: schema_to_wit(&spec.output_schema),
        time_mode: match spec.time_mode {
            TimeMode::None => wit::TimeMode::None,
            TimeMode::ProcessingTime => wit::TimeMode::ProcessingTime,
            TimeMode::EventTime => wit::TimeMode::EventTime,
        },
        deleted_state: spec.deleted_state.clone(),
        accepts_late_rows: spec.accepts_late_rows,
    }
}

pub(crate) fn key_from_wit(parts: Vec<wit::Scalar>) -> Key {
    Key::new(
        parts
            .into_iter()
            .map(|part| match part {
                wit::Scalar::Null => Value::Null,
                wit::Scalar::Boolean(v) => Value::Boolean(v),
                wit::Scalar::Int64(v) => Value::Int64(v),
                wit::Scalar::Float64(v) => Value::Float64(v),
                wit::Scalar::Utf8(v) => Value::Utf8(v),
                wit::Scalar::Binary(v) => Value::Binary(v),
                wit::Scalar::Timestamp(v) => Value::Timestamp(v),
            })
            .collect(),
    )
}

pub(crate) fn timer_values_from_wit(values: wit::TimerValues) -> TimerValues {
    TimerValues { batch_id: values.batch_id, processing_time: values.processing_time, watermark: values.watermark }
}

fn values_from_wit(values: wit::ColumnValues, rows: usize) -> Result<Values> {
    Ok(match values {
        wit::ColumnValues::Boolean(v) => Values::Boolean(v),
        wit::ColumnValues::Int64(v) => Values::Int64(v),
        wit::ColumnValues::Float64(v) => Values::Float64(v),
        wit::ColumnValues::Timestamp(v) => Values::Timestamp(v),
        wit::ColumnValues::Binary(var) => {
            check_offsets(&var.offsets, rows, var.data.len())?;
            Values::Binary { data: var.data, offsets: var.offsets }
        }
        wit::ColumnValues::Utf8(var) => {
            check_offsets(&var.offsets, rows, var.data.len())?;
            let data = String::from_utf8(var.data).map_err(|e| Error::msg(format!("text is not valid UTF-8: {e}")))?;
            if let Some(bad) = var.offsets.iter().find(|&&o| !data.is_char_boundary(o as usize)) {
                return Err(Error::msg(format!("offset {bad} splits a UTF-8 character")));
            }
            Values::Utf8 { data, offsets: var.offsets }
        }
    })
}

/// The batch in `schema`, or, without one, in a schema of columns `_0`, `_1`, …
/// typed as the host sent them.
pub(crate) fn rows_from_wit(batch: wit::RowBatch, schema: Option<&Rc<Schema>>) -> Result<Rows> {
    let num_rows = batch.num_rows as usize;
    let mut columns = Vec::with_capacity(batch.columns.len());
    for (i, column) in batch.columns.into_iter().enumerate() {
        let values = values_from_wit(column.values, num_rows).map_err(|e| {
            let name = schema.and_then(|s| s.fields().get(i)).map_or(format!("_{i}"), |f| f.name.clone());
            e.context(format!("the host sent a malformed column `{name}`"))
        })?;
        columns.push(ColumnData { values, validity: column.validity });
    }
    let schema = match schema {
        Some(schema) => schema.clone(),
        None => {
            let fields =
                columns.iter().enumerate().map(|(i, c)| Field::new(format!("_{i}"), c.values.data_type())).collect();
            Rc::new(Schema::new(fields)?)
        }
    };
    Rows::new(schema, num_rows, columns).map_err(|e| e.context("the host sent a malformed batch"))
}

pub(crate) fn rows_to_wit(rows: Rows) -> wit::RowBatch {
    let (num_rows, columns) = rows.into_parts();
    let columns = columns
        .into_iter()
        .map(|column| wit::Column {
            values: match column.values {
                Values::Boolean(v) => wit::ColumnValues::Boolean(v),
                Values::Int64(v) => wit::ColumnValues::Int64(v),
                Values::Float64(v) => wit::ColumnValues::Float64(v),
                Values::Timestamp(v) => wit::ColumnValues::Timestamp(v),
                Values::Utf8 { data, offsets } => {
                    wit::ColumnValues::Utf8(wit::VarLen { data: data.into_bytes(), offsets })
                }
                Values::Binary { data, offsets } => wit::ColumnValues::Binary(wit::VarLen { data, offsets }),
            },
            validity: column.validity,
        })
        .collect();
    wit::RowBatch { num_rows: num_rows as u32, columns }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row;
    use crate::testing::batch;

    fn varlen(data: &[u8], offsets: &[u32]) -> wit::VarLen {
        wit::VarLen { data: data.to_vec(), offsets: offsets.to_vec() }
    }

    fn one_column(values: wit::ColumnValues, num_rows: u32) -> wit::RowBatch {
        wit::RowBatch { num_rows, columns: vec![wit::Column { values, validity: None }] }
    }

    #[test]
    fn batches_round_trip_with_nulls() -> Result<()> {
        let rows: Vec<_> =
            (0..11).map(|i| row![(i % 3 != 0).then_some("é"), (i % 4 == 1).then_some(i), i as f64]).collect();
        let original = batch("s STRING, n BIGINT, f DOUBLE NOT NULL", &rows)?;
        let schema = Rc::new(original.schema().clone());
        let wire = rows_to_wit(original.clone());
        assert!(wire.columns[2].validity.is_none(), "no bitmap without nulls");
        assert_eq!(wire.columns[0].validity.as_deref(), Some(&[0b1011_0110, 0b0000_0101][..]));
        let back = rows_from_wit(wire, Some(&schema))?;
        assert_eq!(back.to_values(), original.to_values());
        Ok(())
    }

    #[test]
    fn malformed_batches_are_refused() {
        let schema = Rc::new(Schema::parse("s STRING").unwrap());
        let cases = [
            (one_column(wit::ColumnValues::Utf8(varlen(b"ab", &[0, 3])), 1), "run past"),
            (one_column(wit::ColumnValues::Utf8(varlen(b"ab", &[0, 1])), 2), "2 offsets for 2 rows"),
            (one_column(wit::ColumnValues::Utf8(varlen(&[0xff], &[0, 1])), 1), "not valid UTF-8"),
            (one_column(wit::ColumnValues::Utf8(varlen("é".as_bytes(), &[0, 1, 2])), 2), "splits"),
            (one_column(wit::ColumnValues::Int64(vec![1]), 1), "holds BIGINT values"),
            (wit::RowBatch { num_rows: 0, columns: vec![] }, "0 columns"),
        ];
        for (wire, expected) in cases {
            let err = rows_from_wit(wire, Some(&schema)).unwrap_err();
            assert!(err.message().contains(expected), "{err} should mention {expected}");
        }
    }

    #[test]
    fn batches_without_a_schema_get_positional_names() -> Result<()> {
        let rows = rows_from_wit(one_column(wit::ColumnValues::Timestamp(vec![7]), 1), None)?;
        assert_eq!(rows.schema().to_string(), "_0 TIMESTAMP");
        assert_eq!(rows.timestamps("_0")?, &[7]);
        Ok(())
    }

    #[test]
    fn keys_and_specs_convert() {
        let key = key_from_wit(vec![wit::Scalar::Utf8("a".into()), wit::Scalar::Null]);
        assert_eq!(key.to_string(), "(a, null)");
        let spec = Spec {
            state: vec![crate::context::StateDecl { name: "m".into(), kind: StateKind::Map, ttl_micros: Some(5) }],
            output_schema: Rc::new(Schema::parse("x BIGINT NOT NULL").unwrap()),
            time_mode: TimeMode::EventTime,
            accepts_late_rows: true,
            initial_state_schema: None,
            deleted_state: vec!["old".into()],
        };
        let wire = spec_to_wit(&spec);
        assert_eq!(wire.deleted_state, vec!["old".to_string()]);
        assert_eq!(wire.state[0].ttl, Some(5));
        assert!(matches!(wire.state[0].kind, wit::StateKind::Map));
        assert!(matches!(wire.time_mode, wit::TimeMode::EventTime));
        assert!(!wire.output_schema[0].nullable);
    }
}
