//! How rows should cross the boundary: the same rows sent to a guest as one columnar
//! batch (a contiguous list per column) and as a list of typed rows (a variant per
//! value). The processor contract uses the columnar form because of this comparison.
//!
//! Run with `make bench` or `cargo bench -p eddy --bench row_transport`.

use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    path: "../tests/guests/boundary-probe/wit",
    world: "boundary-probe",
});

use self::eddy::boundary_probe::types::{Column, ColumnValues, VarLen};

struct Host {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// `rows` rows of (user STRING, amount BIGINT, price DOUBLE, ts TIMESTAMP), columnar.
fn columnar(rows: usize) -> RowBatch {
    let mut data = Vec::new();
    let mut offsets = vec![0u32];
    for i in 0..rows {
        data.extend_from_slice(format!("user-{:06}", i % 1000).as_bytes());
        offsets.push(data.len() as u32);
    }
    let column = |values| Column { values, validity: None };
    RowBatch {
        num_rows: rows as u32,
        columns: vec![
            column(ColumnValues::Utf8(VarLen { data, offsets })),
            column(ColumnValues::Int64((0..rows as i64).collect())),
            column(ColumnValues::Float64((0..rows).map(|i| i as f64 * 0.5).collect())),
            column(ColumnValues::Timestamp((0..rows as i64).map(|i| 1_700_000_000_000_000 + i).collect())),
        ],
    }
}

/// The same rows as a list of typed rows.
fn typed_rows(rows: usize) -> Vec<Vec<Scalar>> {
    (0..rows)
        .map(|i| {
            vec![
                Scalar::Utf8(format!("user-{:06}", i % 1000)),
                Scalar::Int64(i as i64),
                Scalar::Float64(i as f64 * 0.5),
                Scalar::Timestamp(1_700_000_000_000_000 + i as i64),
            ]
        })
        .collect()
}

fn transport(c: &mut Criterion) {
    let mut config = Config::new();
    config.wasm_component_model(true).concurrency_support(false);
    let engine = Engine::new(&config).expect("engine");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/wasm/boundary_probe.wasm");
    let component =
        Component::from_file(&engine, &path).unwrap_or_else(|e| panic!("{}: {e} (run `make guests`)", path.display()));
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).expect("wasi links");
    let mut store = Store::new(&engine, Host { wasi: WasiCtxBuilder::new().build(), table: ResourceTable::new() });
    let probe = BoundaryProbe::instantiate(&mut store, &component, &linker).expect("instantiates");

    let mut group = c.benchmark_group("row-transport");
    for rows in [1usize, 100, 10_000] {
        group.throughput(Throughput::Elements(rows as u64));
        let batch = columnar(rows);
        let typed = typed_rows(rows);
        let expected = probe.call_consume_columnar(&mut store, &batch).expect("call");
        assert_eq!(
            probe.call_consume_rows(&mut store, &typed).expect("call"),
            expected,
            "both forms carry the same values"
        );
        group.bench_function(format!("columnar/{rows}-rows"), |b| {
            b.iter(|| probe.call_consume_columnar(&mut store, &batch).expect("call"))
        });
        group.bench_function(format!("typed-rows/{rows}-rows"), |b| {
            b.iter(|| probe.call_consume_rows(&mut store, &typed).expect("call"))
        });
    }
    group.finish();
}

criterion_group!(benches, transport);
criterion_main!(benches);
