//! Tests of the running aggregates and their output.

use super::*;

#[test]
fn windows_encode_by_hand_as_serde_writes_them() -> Result<()> {
    let functions = [AggregateFn::Count, AggregateFn::Sum, AggregateFn::Min, AggregateFn::Max, AggregateFn::Avg];
    let full = |n: i64, value: Number| Running { n, sum: Some(value), min: Some(value), max: Some(value) };
    let cases = [
        WindowState::new(0, 10, 5),
        WindowState { start: -1_000_000, end: i64::MAX, aggregates: vec![full(3, Number::Int(-7)); 5] },
        WindowState { start: 1 << 40, end: (1 << 40) + 24, aggregates: vec![full(300, Number::Int(65_536)); 5] },
        WindowState { start: 5, end: 6, aggregates: vec![full(1, Number::Float(2.5)); 5] },
        WindowState { start: 5, end: 6, aggregates: vec![full(0, Number::Int(i64::MIN)); 5] },
    ];
    for window in cases {
        let mut expected = Vec::new();
        ciborium::into_writer(&window.trimmed(&functions), &mut expected)?;
        let mut encoded = Vec::new();
        window.encode_trimmed(&functions, &mut encoded)?;
        assert_eq!(encoded, expected, "{window:?}");
        let decoded: WindowState = ciborium::from_reader(encoded.as_slice())?;
        assert_eq!(decoded, window.trimmed(&functions));
    }
    Ok(())
}
