//! What strict JSON decoding costs on the good path: eddy's decode of a JSON-lines
//! file (every line checked to be strict JSON, then strict column decoders) against
//! arrow-json's lenient decode of the same bytes, which is what eddy did before.
//!
//! Run with `make bench` or `cargo bench -p eddy --bench json_decode`.

use std::path::Path;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::json::ReaderBuilder;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use eddy::decode::decode_json_lines;
use eddy::pipeline::parse_schema;

const LINES: usize = 100_000;

/// Lines like the end-to-end benchmark's events, with an event time.
fn events() -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..LINES {
        let line = format!(
            "{{\"user\":\"user-{:06}\",\"amount\":{},\"price\":{}.25,\"ts\":\"2026-01-01T00:{:02}:{:02}Z\"}}\n",
            i * 7919 % 100_000,
            i % 100,
            i % 1000,
            i / 60 % 60,
            i % 60
        );
        bytes.extend_from_slice(line.as_bytes());
    }
    bytes
}

/// arrow-json alone, lenient: eddy's decode before strictness.
fn lenient(bytes: &[u8], schema: &SchemaRef) -> RecordBatch {
    let reader = ReaderBuilder::new(schema.clone()).with_batch_size(8192).build(bytes).expect("reader");
    let batches = reader.collect::<Result<Vec<_>, _>>().expect("decodes");
    arrow::compute::concat_batches(schema, &batches).expect("concat")
}

fn decode(c: &mut Criterion) {
    let bytes = events();
    let schema = parse_schema("user STRING, amount BIGINT, price DOUBLE, ts TIMESTAMP").expect("schema");
    assert_eq!(lenient(&bytes, &schema), decode_json_lines(&bytes, &schema, Path::new("bench")).expect("decodes"));
    let mut group = c.benchmark_group("json_decode");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("arrow_json_lenient", |b| b.iter(|| lenient(&bytes, &schema)));
    group.bench_function("eddy_strict", |b| {
        b.iter(|| decode_json_lines(&bytes, &schema, Path::new("bench")).expect("decodes"))
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
