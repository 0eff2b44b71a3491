//! Helpers for eddy's end-to-end tests: where the built components and the `eddy`
//! binary are, and a driver for the `scripted` test processor.

pub mod kafka;
pub mod stage_query;
pub mod torture;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use eddy::contract::OutputMode;
use eddy::operator::{BatchTime, OperatorOptions, WasmOperator};
use eddy::pipeline::{DEFAULT_SPILL_STATE_BYTES, InstanceLimits};
use eddy::state::StateStore;
use eddy::wasm::{Module, WasmRuntime};

/// A number from the environment variable `name`, or `default` (test sizes and seeds).
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A small seeded generator (SplitMix64), so a failing randomized test can be
/// reproduced from its seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// The path of a built component (`make guests` builds them into build/wasm/).
pub fn wasm(name: &str) -> PathBuf {
    let path = repo_root().join("build/wasm").join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} is missing: run `make guests` first", path.display());
    path
}

/// The `eddy` binary built by `cargo build -p eddy` (or `$EDDY_BIN`).
pub fn eddy_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("EDDY_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_root().join("target"), PathBuf::from);
    let bin = target.join("debug/eddy");
    assert!(bin.is_file(), "{} is missing: run `cargo build -p eddy` first", bin.display());
    bin
}

/// Loads a component with a fresh runtime, compiled artifacts cached as `eddy` does.
pub fn load(name: &str) -> eddy::wasm::Module {
    WasmRuntime::new(WasmRuntime::default_cache_dir()).expect("runtime").load(&wasm(name)).expect("module loads")
}

/// The input schema of the `scripted` processor: the grouping key and one command per row.
pub fn scripted_schema() -> SchemaRef {
    let field = |name: &str| Field::new(name, DataType::Utf8, true);
    Arc::new(Schema::new(vec![field("key"), field("op"), field("name"), field("k"), field("v")]))
}

/// The query id [`Scripted::new`] and [`Scripted::open`] run as.
pub const TEST_QUERY_ID: &str = "0b9e2c1d-3f4a-4e5b-8c6d-7e8f9a0b1c2d";

/// One command for the `scripted` processor.
#[derive(Clone, Copy, Debug)]
pub struct Cmd<'a> {
    /// The grouping key.
    pub key: &'a str,
    /// The operation, e.g. `value.set`.
    pub op: &'a str,
    /// The state variable's name.
    pub name: Option<&'a str>,
    /// A map key.
    pub k: Option<&'a str>,
    /// A value (or JSON array for `list.put`, micros for timers).
    pub v: Option<&'a str>,
}

/// A command with only a key, an op and a variable name.
pub fn cmd<'a>(key: &'a str, op: &'a str, name: &'a str) -> Cmd<'a> {
    Cmd { key, op, name: Some(name), k: None, v: None }
}

impl<'a> Cmd<'a> {
    /// Sets the map key.
    pub fn k(mut self, k: &'a str) -> Self {
        self.k = Some(k);
        self
    }
    /// Sets the value.
    pub fn v(mut self, v: &'a str) -> Self {
        self.v = Some(v);
        self
    }
}

/// A `scripted` processor on a real RocksDB store, one committed batch per call.
pub struct Scripted {
    /// The store (in `dir`).
    pub store: StateStore,
    /// The operator.
    pub operator: WasmOperator,
    /// How many expired state entries the last batch evicted.
    pub last_evicted: u64,
    next_batch: u64,
    _dir: Option<tempfile::TempDir>,
}

impl Scripted {
    /// A processor declaring what `config` says, on a fresh store.
    pub fn new(config: serde_json::Value, limits: InstanceLimits) -> Self {
        Self::new_shard(config, limits, TEST_QUERY_ID, 0..16)
    }

    /// Like [`Scripted::new`], as the shard owning `key_group_range` (of 16) of the
    /// query `query_id`.
    pub fn new_shard(
        config: serde_json::Value,
        limits: InstanceLimits,
        query_id: &str,
        key_group_range: Range<u16>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = StateStore::open(&dir.path().join("state")).expect("store opens");
        let mut this = Self::open_shard(&load("scripted"), store, config, limits, query_id, key_group_range);
        this._dir = Some(dir);
        this
    }

    /// A processor over an existing store (e.g. after a restart).
    pub fn open(module: &Module, store: StateStore, config: serde_json::Value, limits: InstanceLimits) -> Self {
        Self::open_shard(module, store, config, limits, TEST_QUERY_ID, 0..16)
    }

    /// Opening a processor declaring what `config` says, on a fresh store: its error
    /// when `init` fails.
    pub fn try_new(config: serde_json::Value, limits: InstanceLimits) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = StateStore::open(&dir.path().join("state")).expect("store opens");
        let mut this = Self::try_open_shard(&load("scripted"), store, config, limits, TEST_QUERY_ID, 0..16)?;
        this._dir = Some(dir);
        Ok(this)
    }

    fn open_shard(
        module: &Module,
        store: StateStore,
        config: serde_json::Value,
        limits: InstanceLimits,
        query_id: &str,
        key_group_range: Range<u16>,
    ) -> Self {
        Self::try_open_shard(module, store, config, limits, query_id, key_group_range).expect("operator opens")
    }

    fn try_open_shard(
        module: &Module,
        store: StateStore,
        config: serde_json::Value,
        limits: InstanceLimits,
        query_id: &str,
        key_group_range: Range<u16>,
    ) -> anyhow::Result<Self> {
        let options = OperatorOptions {
            operator_id: 0,
            key_columns: vec!["key".into()],
            key_groups: 16,
            output_mode: OutputMode::Update,
            config_json: config.to_string(),
            limits,
            spill_state_bytes: DEFAULT_SPILL_STATE_BYTES,
            initial_state_schema: None,
            event_time_column: None,
            key_group_range,
            query_id: query_id.to_string(),
            run_id: "scripted-run".into(),
        };
        let operator = WasmOperator::open(module, &scripted_schema(), options)?;
        let next_batch = store.committed_batch().expect("readable").map_or(0, |id| id + 1);
        Ok(Self { store, operator, last_evicted: 0, next_batch, _dir: None })
    }

    /// Runs `commands` as one batch at processing time `now_ms`, commits it, and
    /// returns the (op, result) rows the processor output.
    pub fn run(&mut self, now_ms: i64, commands: &[Cmd]) -> anyhow::Result<Vec<(String, String)>> {
        self.run_at(now_ms, None, commands)
    }

    /// Like [`Scripted::run`] with a watermark.
    pub fn run_at(
        &mut self,
        now_ms: i64,
        watermark_ms: Option<i64>,
        commands: &[Cmd],
    ) -> anyhow::Result<Vec<(String, String)>> {
        let column = |f: for<'c> fn(&'c Cmd<'c>) -> Option<&'c str>| -> arrow::array::ArrayRef {
            Arc::new(StringArray::from(commands.iter().map(f).collect::<Vec<_>>()))
        };
        let input = RecordBatch::try_new(
            scripted_schema(),
            vec![column(|c| Some(c.key)), column(|c| Some(c.op)), column(|c| c.name), column(|c| c.k), column(|c| c.v)],
        )
        .expect("valid input batch");
        let time = BatchTime {
            batch_id: self.next_batch,
            processing_time: now_ms * 1000,
            watermark: watermark_ms.map(|w| w * 1000),
            late_rows_watermark: None,
        };
        let output = self.operator.run_batch(&self.store, self.store.begin(), &input, time)?;
        self.last_evicted = output.entries_evicted;
        self.store.commit(output.txn, self.next_batch)?;
        self.next_batch += 1;
        let mut rows = Vec::new();
        for batch in &output.rows {
            let ops = batch.column(0).as_any().downcast_ref::<StringArray>().expect("op is a string");
            let results = batch.column(1).as_any().downcast_ref::<StringArray>().expect("result is a string");
            for i in 0..batch.num_rows() {
                let result = if results.is_null(i) { "null".to_string() } else { results.value(i).to_string() };
                rows.push((ops.value(i).to_string(), result));
            }
        }
        Ok(rows)
    }
}
