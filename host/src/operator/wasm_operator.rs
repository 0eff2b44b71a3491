//! The WebAssembly processor operator: groups a batch's rows by key, calls the
//! processor once per key, fires due timers, and collects the rows it returns (held
//! to the output limits per call and per batch of `operator.max-output-*`).

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use arrow::array::RecordBatch;
use arrow::datatypes::{Field as ArrowField, Schema, SchemaRef};

use super::grouping::{KeyRows, group_by_key};
use super::stage::{BatchTime, HandlerStats};
use super::top_keys::TopKeysCollector;
use crate::contract::rows::{OutputRows, arrow_type, contract_type, gather, key_label, row_batch_bytes};
use crate::contract::{
    ExpiredTimer, Field, InitContext, OutputMode, ProcessorSpec, RowBatch, Scalar, TimeMode, TimerValues,
};
use crate::pipeline::{InstanceLimits, Limit, show_bytes};
use crate::state::{KeyScope, StateKind, StateTxn, Timers, VariableDecl, evict_expired, key};
use crate::wasm::{Module, ProcessorInstance, RandomScope};

/// How many keys' value and list state is read ahead in one batched lookup.
const PREFETCH_KEYS: usize = 1024;

/// How an operator is set up.
#[derive(Clone, Debug)]
pub struct OperatorOptions {
    /// The operator's id within the query (part of every state key).
    pub operator_id: u16,
    /// The grouping columns, in order.
    pub key_columns: Vec<String>,
    /// How many key groups keys hash into.
    pub key_groups: u16,
    /// The query's output mode.
    pub output_mode: OutputMode,
    /// The user's config, as JSON text.
    pub config_json: String,
    /// Memory cap and call deadline of the instance.
    pub limits: InstanceLimits,
    /// The schema of the initial-state rows, when the query starts from one.
    pub initial_state_schema: Option<SchemaRef>,
    /// The input's event-time column, when the query has a watermark.
    pub event_time_column: Option<String>,
    /// The key groups this instance owns (timers and TTL eviction act on these only).
    pub key_group_range: Range<u16>,
    /// The query's id (the checkpoint's metadata): with the batch id and the first key
    /// group, it seeds the guest's random numbers.
    pub query_id: String,
}

/// What one batch of an operator produced.
pub struct OperatorOutput {
    /// The batch's state changes, to be committed by the caller.
    pub txn: StateTxn,
    /// The rows the processor returned, in call order.
    pub rows: Vec<RecordBatch>,
    /// How many distinct keys had input rows.
    pub keys_with_input: usize,
    /// How many timers fired.
    pub timers_fired: usize,
    /// How many expired state entries were evicted.
    pub entries_evicted: u64,
    /// Calls and hot keys measured during the batch.
    pub calls: CallStats,
}

/// What the processor's calls of one batch cost, and the batch's hottest keys.
#[derive(Default)]
pub struct CallStats {
    /// `handle-input-rows` calls.
    pub input_rows: HandlerStats,
    /// `handle-expired-timer` calls.
    pub expired_timers: HandlerStats,
    /// Timers the processor registered.
    pub timers_registered: u64,
    /// The instance's largest linear memory so far, in bytes.
    pub memory_peak_bytes: u64,
    /// The keys with the most rows and the slowest calls.
    pub top_keys: TopKeysCollector,
}

/// A user's processor running over keyed rows.
pub struct WasmOperator {
    instance: ProcessorInstance,
    module_name: String,
    options: OperatorOptions,
    key_indices: Vec<usize>,
    spec: ProcessorSpec,
    output_schema: SchemaRef,
    /// This batch's call measurements.
    calls: CallStats,
}

impl WasmOperator {
    /// Instantiates `module`, calls its `init`, and checks what it declares.
    pub fn open(module: &Module, input_schema: &SchemaRef, options: OperatorOptions) -> Result<Self> {
        let mut key_indices = Vec::new();
        for column in &options.key_columns {
            let index = input_schema.index_of(column).map_err(|_| {
                anyhow!(
                    "key column '{column}' is not in the input schema (columns: {})",
                    input_schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
                )
            })?;
            key_indices.push(index);
        }
        let input_fields = contract_fields(input_schema, None)?;
        let key_fields = contract_fields(input_schema, Some(&key_indices))?;
        let initial_state_schema = match &options.initial_state_schema {
            Some(schema) => Some(contract_fields(schema, None)?),
            None => None,
        };
        let mut instance = module.instantiate(options.limits)?;
        let context = InitContext {
            input_schema: input_fields,
            key_schema: key_fields,
            output_mode: options.output_mode,
            config: options.config_json.clone(),
            initial_state_schema,
            event_time_column: options.event_time_column.clone(),
        };
        let spec = instance.init(&context)?;
        let output_schema =
            validate_spec(&spec).map_err(|problem| anyhow!("module '{}' declared {problem}", module.name))?;
        Ok(Self {
            instance,
            module_name: module.name.clone(),
            options,
            key_indices,
            spec,
            output_schema,
            calls: CallStats::default(),
        })
    }

    /// The schema of the rows the processor returns.
    pub fn output_schema(&self) -> &SchemaRef {
        &self.output_schema
    }

    /// The state variables the processor declared.
    pub fn state_variables(&self) -> Vec<VariableDecl> {
        self.spec.state.iter().map(VariableDecl::from).collect()
    }

    /// The processor's time mode.
    pub fn time_mode(&self) -> TimeMode {
        self.spec.time_mode
    }

    /// Whether the processor wants late rows handed over rather than dropped.
    pub fn accepts_late_rows(&self) -> bool {
        self.spec.accepts_late_rows
    }

    /// The input columns that form the key.
    pub fn key_indices(&self) -> &[usize] {
        &self.key_indices
    }

    /// Runs one batch: every key's input rows, then every due timer, then TTL
    /// eviction. On error nothing of the batch is kept (the transaction is dropped).
    pub fn run_batch(&mut self, txn: StateTxn, input: &RecordBatch, time: BatchTime) -> Result<OperatorOutput> {
        let grouped = group_by_key(input, &self.key_indices, self.options.key_groups);
        self.run_grouped(txn, input, &grouped.keys(), time)
    }

    /// Like [`WasmOperator::run_batch`] with the input already grouped by key (only
    /// keys of this instance's key groups).
    pub fn run_grouped(
        &mut self,
        txn: StateTxn,
        input: &RecordBatch,
        groups: &[KeyRows],
        time: BatchTime,
    ) -> Result<OperatorOutput> {
        self.start_batch(txn, time);
        self.calls = CallStats::default();
        self.instance.take_timers_registered();
        let mut outputs = OutputRows::new(self.output_schema.clone());
        let result = self.run_keys(input, groups, time, &mut outputs).and_then(|()| {
            let timers_fired = self.fire_timers(time, &mut outputs)?;
            let txn = self.instance.txn_mut().context("no state transaction during the batch")?;
            let evicted =
                evict_expired(txn, self.options.operator_id, &self.options.key_group_range, time.processing_time)?;
            let rows = outputs
                .finish()
                .map_err(|problem| anyhow!("module '{}' returned unusable rows: {problem}", self.module_name))?;
            Ok((rows.into_iter().collect(), timers_fired, evicted))
        });
        let txn = self.instance.finish_batch().context("the batch's state transaction went missing")?;
        let (rows, timers_fired, entries_evicted) = result?;
        let mut calls = std::mem::take(&mut self.calls);
        calls.timers_registered = self.instance.take_timers_registered();
        calls.memory_peak_bytes = self.instance.memory_peak_bytes();
        Ok(OperatorOutput { txn, rows, keys_with_input: groups.len(), timers_fired, entries_evicted, calls })
    }

    /// Calls `close` on the processor.
    pub fn close(&mut self) -> Result<()> {
        Ok(self.instance.close()?)
    }

    fn timer_values(time: BatchTime) -> TimerValues {
        TimerValues { processing_time: time.processing_time, watermark: time.watermark }
    }

    /// Hands each key's initial-state rows (of `schema`, which holds the key columns)
    /// to `handle-initial-state`; the changes land in `txn`, to be committed with the
    /// query's first batch.
    pub fn apply_initial_state(&mut self, txn: StateTxn, rows: &RecordBatch, time: BatchTime) -> Result<StateTxn> {
        let schema = rows.schema();
        let key_indices = self
            .options
            .key_columns
            .iter()
            .map(|column| schema.index_of(column).map_err(|_| anyhow!("the initial state lacks key column '{column}'")))
            .collect::<Result<Vec<_>>>()?;
        self.start_batch(txn, time);
        let result = (|| {
            let grouped = group_by_key(rows, &key_indices, self.options.key_groups);
            let owned = grouped.keys().into_iter().filter(|k| self.options.key_group_range.contains(&k.key_group));
            for key in owned.collect::<Vec<_>>() {
                let key_values = self.enter_key(self.scope(key.key_group, key.key.to_vec(), time))?;
                self.instance.handle_initial_state(&key_values, &gather(rows, key.rows), Self::timer_values(time))?;
            }
            Ok(())
        })();
        let txn = self.instance.finish_batch().context("the batch's state transaction went missing")?;
        result.map(|()| txn)
    }

    /// Starts a batch in the instance, its random numbers drawn from this query, this
    /// batch and this shard.
    fn start_batch(&mut self, txn: StateTxn, time: BatchTime) {
        let random = RandomScope {
            query_id: &self.options.query_id,
            batch_id: time.batch_id,
            shard: self.options.key_group_range.start,
        };
        self.instance.start_batch(txn, time.processing_time, random);
    }

    /// Sets the query's id (see [`OperatorOptions::query_id`]).
    pub fn set_query_id(&mut self, query_id: &str) {
        self.options.query_id = query_id.to_string();
    }

    fn scope(&self, key_group: u16, encoded: Vec<u8>, time: BatchTime) -> KeyScope {
        KeyScope::new(self.options.operator_id, key_group, encoded, time.processing_time)
    }

    /// Makes `scope` the current key; returns the key's values.
    fn enter_key(&mut self, scope: KeyScope) -> Result<Vec<Scalar>> {
        let key_values = key::decode(scope.key()).context("a grouping key in the state store is corrupt")?;
        self.instance.set_key(scope, key_values.clone());
        Ok(key_values)
    }

    fn run_keys(
        &mut self,
        input: &RecordBatch,
        groups: &[KeyRows],
        time: BatchTime,
        outputs: &mut OutputRows,
    ) -> Result<()> {
        // Values and lists are one entry per key: read ahead in batched lookups.
        let read_ahead: Vec<VariableDecl> = self
            .state_variables()
            .into_iter()
            .filter(|decl| matches!(decl.kind, StateKind::Value | StateKind::List))
            .collect();
        for chunk in groups.chunks(PREFETCH_KEYS) {
            if !read_ahead.is_empty() {
                let mut keys: Vec<Vec<u8>> = chunk
                    .iter()
                    .flat_map(|key| {
                        let scope = self.scope(key.key_group, key.key.to_vec(), time);
                        read_ahead.iter().map(move |decl| scope.var_key(decl))
                    })
                    .collect();
                keys.sort_unstable();
                self.instance.txn_mut().context("no state transaction during the batch")?.prefetch_state(keys)?;
            }
            for key in chunk {
                let key_values = self.enter_key(self.scope(key.key_group, key.key.to_vec(), time))?;
                let batch = gather(input, key.rows);
                let started = Instant::now();
                let returned = self.instance.handle_input_rows(&key_values, &batch, Self::timer_values(time))?;
                let micros = started.elapsed().as_micros() as u64;
                self.calls.input_rows.add(HandlerStats { calls: 1, micros });
                self.calls.top_keys.note(key.rows.len() as u64, micros, || key_label(&key_values));
                self.collect(returned, "handle-input-rows", &key_values, outputs)?;
            }
        }
        Ok(())
    }

    fn fire_timers(&mut self, time: BatchTime, outputs: &mut OutputRows) -> Result<usize> {
        let deadline = match self.spec.time_mode {
            TimeMode::None => return Ok(0),
            TimeMode::ProcessingTime => time.processing_time,
            TimeMode::EventTime => match time.watermark {
                Some(watermark) => watermark,
                None => return Ok(0),
            },
        };
        let operator = self.options.operator_id;
        let txn = self.instance.txn_mut().context("no state transaction during the batch")?;
        let due = Timers::due(txn, operator, deadline)?;
        let mut fired = 0;
        let owned = self.options.key_group_range.clone();
        for timer in due.into_iter().filter(|timer| owned.contains(&timer.key_group)) {
            let scope = self.scope(timer.key_group, timer.key, time);
            let txn = self.instance.txn_mut().context("no state transaction during the batch")?;
            // An earlier handler of this pass may have deleted it (a due timer exists
            // otherwise: the index it was found in and the timers are written together).
            if scope.timer_deleted(txn, timer.expiry) {
                continue;
            }
            scope.timer_delete(txn, timer.expiry);
            let key_values = self.enter_key(scope)?;
            let expired = ExpiredTimer { expiry_time: timer.expiry };
            let started = Instant::now();
            let returned = self.instance.handle_expired_timer(&key_values, Self::timer_values(time), expired)?;
            let micros = started.elapsed().as_micros() as u64;
            self.calls.expired_timers.add(HandlerStats { calls: 1, micros });
            self.collect(returned, "handle-expired-timer", &key_values, outputs)?;
            fired += 1;
        }
        Ok(fired)
    }

    fn collect(&self, returned: RowBatch, function: &str, key: &[Scalar], outputs: &mut OutputRows) -> Result<()> {
        let limits = &self.options.limits;
        let (rows, bytes) = (u64::from(returned.num_rows), row_batch_bytes(&returned));
        let (batch_rows, batch_bytes) = (outputs.num_rows() + rows, outputs.num_bytes() + bytes);
        let checks = [
            (Limit::OutputRowsPerCall, rows),
            (Limit::OutputBytesPerCall, bytes),
            (Limit::OutputRowsPerBatch, batch_rows),
            (Limit::OutputBytesPerBatch, batch_bytes),
        ];
        if let Some((limit, _)) = checks.into_iter().find(|(limit, used)| *used > limit.of(limits)) {
            let returned = format!("module '{}' returned", self.module_name);
            let place = format!("in {function} for key {}", key_label(key));
            let what = match limit {
                Limit::OutputRowsPerCall => format!("{returned} {rows} output rows {place}"),
                Limit::OutputBytesPerCall => format!("{returned} {} of output rows {place}", show_bytes(bytes)),
                Limit::OutputRowsPerBatch => {
                    format!("{returned} output rows {place} that bring this batch to {batch_rows} rows")
                }
                _ => format!(
                    "{returned} output rows {place} that bring this batch to {} of output",
                    show_bytes(batch_bytes)
                ),
            };
            bail!(limit.exceeded(limits, what));
        }
        outputs.push(returned).map_err(|problem| {
            anyhow!(
                "module '{}' returned rows that do not match its declared output schema in {function} for key {}: {problem}",
                self.module_name,
                key_label(key)
            )
        })
    }
}

fn contract_fields(schema: &Schema, only: Option<&[usize]>) -> Result<Vec<Field>> {
    let indices: Vec<usize> = match only {
        Some(indices) => indices.to_vec(),
        None => (0..schema.fields().len()).collect(),
    };
    indices
        .into_iter()
        .map(|i| {
            let field = schema.field(i);
            let data_type = contract_type(field.data_type()).with_context(|| {
                format!(
                    "column '{}' has type {}, which eddy cannot pass to a processor",
                    field.name(),
                    field.data_type()
                )
            })?;
            Ok(Field { name: field.name().clone(), data_type, nullable: field.is_nullable() })
        })
        .collect()
}

fn validate_spec(spec: &ProcessorSpec) -> Result<SchemaRef> {
    let mut names = std::collections::HashSet::new();
    for decl in &spec.state {
        if decl.name.is_empty() {
            bail!("a state variable with an empty name");
        }
        if !names.insert(decl.name.as_str()) {
            bail!("state variable '{}' twice; names must be unique", decl.name);
        }
        if decl.ttl == Some(0) {
            bail!("state variable '{}' with a TTL of 0; use no TTL, or a positive duration", decl.name);
        }
    }
    let mut columns = std::collections::HashSet::new();
    let mut fields = Vec::new();
    for field in &spec.output_schema {
        if !columns.insert(field.name.as_str()) {
            bail!("output column '{}' twice; names must be unique", field.name);
        }
        fields.push(ArrowField::new(&field.name, arrow_type(field.data_type), field.nullable));
    }
    Ok(Arc::new(Schema::new(fields)))
}
