//! Tests of the running aggregates and their output.

use super::*;

#[test]
fn shards_output_merges_by_window_then_key() -> Result<()> {
    let schema = Arc::new(Schema::new(vec![Field::new("row", DataType::Int64, false)]));
    // Each shard's rows in order; a row's value names its place in the merged order.
    let shard = |rows: &[(i64, i64, &str, i64)]| -> Result<(RecordBatch, Vec<OutputOrder>)> {
        let values = Int64Array::from(rows.iter().map(|r| r.3).collect::<Vec<_>>());
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)])?;
        let place = |(start, end, key, _): &(i64, i64, &str, i64)| {
            OutputOrder::new(GroupKey::new(key.as_bytes()), &WindowState::new(*start, *end, 0))
        };
        Ok((batch, rows.iter().map(place).collect()))
    };
    // Keys ordered by their bytes, also keys too long to be held inline (over 30
    // bytes) and a key before itself followed by a NUL.
    let first = shard(&[
        (0, 10, "a", 0),
        (0, 10, "c", 2),
        (10, 20, "a", 3),
        (20, 30, "b", 6),
        (30, 40, "the-first-16-bytes", 7),
        (30, 40, "the-first-16-bytes-b", 9),
        (30, 40, "the-first-16-bytes-d-and-more-than-30", 12),
    ])?;
    let second = shard(&[
        (0, 10, "b", 1),
        (10, 20, "b", 4),
        (10, 20, "c", 5),
        (30, 40, "the-first-16-bytes\0", 8),
        (30, 40, "the-first-16-bytes-c", 10),
        (30, 40, "the-first-16-bytes-c-and-more-than-30", 11),
    ])?;
    let empty = shard(&[])?;
    let merged = merge_in_order(&schema, vec![first, empty, second])?;
    let rows = merged.column(0).as_any().downcast_ref::<Int64Array>().context("row column")?;
    assert_eq!(rows.values().to_vec(), (0..13).collect::<Vec<i64>>());
    assert_eq!(merge_in_order(&schema, vec![shard(&[])?])?.num_rows(), 0);
    Ok(())
}

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
