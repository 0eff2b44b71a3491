//! Exports `consume-columnar` and `consume-rows` (world `eddy:boundary-probe/
//! boundary-probe@0.1.0`, see `wit/`) so that the host's benchmark can compare moving
//! the same rows as one columnar batch and as a list of typed rows. Both return the
//! wrapping sum of every `int64` and `float64` value (floats truncated with `as i64`;
//! null slots hold 0), so the host can check the result and nothing is optimized away.

wit_bindgen::generate!({
    world: "boundary-probe",
    path: "wit",
});

use eddy::boundary_probe::types::ColumnValues;

struct Probe;

impl Guest for Probe {
    fn consume_columnar(batch: RowBatch) -> i64 {
        batch.columns.iter().fold(0i64, |sum, column| match &column.values {
            ColumnValues::Int64(values) => values.iter().fold(sum, |s, v| s.wrapping_add(*v)),
            ColumnValues::Float64(values) => values.iter().fold(sum, |s, v| s.wrapping_add(*v as i64)),
            _ => sum,
        })
    }

    fn consume_rows(rows: Vec<Vec<Scalar>>) -> i64 {
        rows.iter().flatten().fold(0i64, |sum, value| match value {
            Scalar::Int64(v) => sum.wrapping_add(*v),
            Scalar::Float64(v) => sum.wrapping_add(*v as i64),
            _ => sum,
        })
    }
}

export!(Probe);
