//! The cost of the WebAssembly boundary: input rows per second through a no-op
//! processor and through running-count, at 1, 100 and 10 000 rows per key, on a real
//! RocksDB store (each iteration is one batch, committed); the store holds its state
//! in memory as a query's does by default (`EDDY_BENCH_STATE_IN_MEMORY=0`: RocksDB).
//! Columnar versus row-by-row transport is `row_transport.rs`.
//!
//! Run with `make bench` (builds the components first) or `cargo bench -p eddy`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use eddy::contract::OutputMode;
use eddy::operator::{BatchTime, OperatorOptions, WasmOperator};
use eddy::pipeline::{DEFAULT_SPILL_STATE_BYTES, DEFAULT_STATE_IN_MEMORY_BYTES, InstanceLimits};
use eddy::state::StateStore;
use eddy::wasm::WasmRuntime;

/// The allocator the eddy binary runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ROWS_PER_BATCH: usize = 100_000;

fn wasm(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/wasm").join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} is missing: run `make guests` first", path.display());
    path
}

fn purchases_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("user", DataType::Utf8, false), Field::new("amount", DataType::Int64, false)]))
}

/// `ROWS_PER_BATCH` rows over `ROWS_PER_BATCH / rows_per_key` users.
fn purchases(rows_per_key: usize) -> RecordBatch {
    let keys = ROWS_PER_BATCH / rows_per_key;
    let users: Vec<String> = (0..ROWS_PER_BATCH).map(|i| format!("user-{:06}", i % keys)).collect();
    let amounts: Vec<i64> = (0..ROWS_PER_BATCH as i64).map(|i| i % 97).collect();
    RecordBatch::try_new(
        purchases_schema(),
        vec![Arc::new(StringArray::from(users)), Arc::new(Int64Array::from(amounts))],
    )
    .expect("valid batch")
}

fn processors(c: &mut Criterion) {
    let runtime = WasmRuntime::new(None).expect("runtime");
    for module_name in ["noop", "running_count"] {
        let module = runtime.load(&wasm(module_name)).expect("module loads");
        let mut group = c.benchmark_group(format!("boundary/{module_name}"));
        group.throughput(Throughput::Elements(ROWS_PER_BATCH as u64));
        group.sample_size(10);
        for rows_per_key in [1, 100, 10_000] {
            let dir = tempfile::tempdir().expect("temp dir");
            let store = StateStore::open(dir.path()).expect("store");
            // As a query holds it (`state-in-memory`: the default, or EDDY_BENCH_STATE_IN_MEMORY bytes).
            let budget = std::env::var("EDDY_BENCH_STATE_IN_MEMORY").ok().and_then(|n| n.parse().ok());
            let budget = budget.unwrap_or(DEFAULT_STATE_IN_MEMORY_BYTES as usize);
            if budget > 0 {
                store.hold_state_in_memory(budget).expect("state loads");
            }
            let options = OperatorOptions {
                operator_id: 0,
                key_columns: vec!["user".into()],
                key_groups: 128,
                output_mode: OutputMode::Update,
                config_json: "{}".into(),
                limits: InstanceLimits::default(),
                spill_state_bytes: DEFAULT_SPILL_STATE_BYTES,
                initial_state_schema: None,
                event_time_column: None,
                key_group_range: 0..128,
                query_id: "boundary-bench".into(),
                run_id: "boundary-bench-run".into(),
            };
            let mut operator = WasmOperator::open(&module, &purchases_schema(), options).expect("operator");
            let input = purchases(rows_per_key);
            let mut batch_id = 0;
            group.bench_function(format!("{rows_per_key}-rows-per-key"), |b| {
                b.iter_batched(
                    || store.begin(),
                    |txn| {
                        let time = BatchTime {
                            batch_id,
                            processing_time: 1_000_000 + batch_id as i64,
                            watermark: None,
                            late_rows_watermark: None,
                        };
                        let output = operator.run_batch(&store, txn, &input, time).expect("batch runs");
                        store.commit(output.txn, batch_id).expect("commit");
                        batch_id += 1;
                        output.rows.len()
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        group.finish();
    }
}

criterion_group!(benches, processors);
criterion_main!(benches);
