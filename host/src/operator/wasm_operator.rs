//! The WebAssembly processor operator: groups a batch's rows by key, hands the keys'
//! rows to the processor (several small keys per call), fires due timers (several per
//! call), and collects the rows it returns (held to the output limits per key or timer
//! and per batch of `operator.max-output-*`).

use std::ops::Range;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use super::grouping::{KeyRows, group_by_key};
use super::processor_spec::{contract_fields, validate_spec};
use super::stage::{BatchTime, HandlerStats};
use super::top_keys::TopKeysCollector;
use crate::contract::rows::{OutputRows, gather, row_range_bytes};
use crate::contract::{
    InitContext, KeyRows as WireKeyRows, Output, OutputMode, ProcessorSpec, QueryInfo, Scalar, TimeMode, TimerValues,
};
use crate::pipeline::{InstanceLimits, Limit, show_bytes};
use crate::state::{
    Cf, DueTimer, KeyScope, StateKind, StateStore, StateTxn, Timers, VariableDecl, evict_expired, key, layout,
};
use crate::wasm::{CallKey, CallTimer, Module, ProcessorInstance, RandomScope};

/// How many keys' value and list state is read ahead in one batched lookup.
const PREFETCH_KEYS: usize = 1024;
/// The most keys one `handle-input-rows` call hands over.
const KEYS_PER_CALL: usize = 256;
/// The most rows one `handle-input-rows` call hands over, unless one key has more (a
/// key with more rows gets a call of its own).
const ROWS_PER_CALL: usize = 1024;
/// The most due timers one `handle-expired-timers` call hands over.
const TIMERS_PER_CALL: usize = 512;

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
    /// How many bytes of the batch's changes the shard holds before writing them to
    /// the store ahead of the commit.
    pub spill_state_bytes: u64,
    /// The schema of the initial-state rows, when the query starts from one.
    pub initial_state_schema: Option<SchemaRef>,
    /// The input's event-time column, when the query has a watermark.
    pub event_time_column: Option<String>,
    /// The key groups this instance owns (timers and TTL eviction act on these only).
    pub key_group_range: Range<u16>,
    /// The query's id (the checkpoint's metadata): with the batch id and the current
    /// key's key group, it seeds the guest's random numbers.
    pub query_id: String,
    /// This run's id (new each time the query starts).
    pub run_id: String,
}

/// What one batch of an operator produced.
pub struct OperatorOutput {
    /// The batch's state changes, to be committed by the caller.
    pub txn: StateTxn,
    /// The rows the processor returned, in call order: `handle-input-rows`' (key by
    /// key, in key-group order), then the timers'.
    pub rows: Vec<RecordBatch>,
    /// How many of `rows` (the first ones) `handle-input-rows` returned.
    pub input_handler_rows: usize,
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
    /// Keys handed to `handle-input-rows`, and the time of those calls.
    pub input_rows: HandlerStats,
    /// Timers fired in `handle-expired-timers`, and the time of those calls.
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
    /// Stored variables whose data the next batch deletes.
    deleting: Vec<String>,
    /// Whether the keys' timers are kept by key as well as in the timer index (the
    /// module lists timers).
    timers_by_key: bool,
    /// The next batch converts the stored timers to [`timers_by_key`](Self::timers_by_key)
    /// (they were kept the other way).
    converting_timers: bool,
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
            query: QueryInfo { id: options.query_id.clone(), run_id: options.run_id.clone() },
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
            deleting: Vec::new(),
            timers_by_key: module.lists_timers,
            converting_timers: false,
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

    /// The state variables the processor deletes (Spark's `deleteIfExists`).
    pub fn deleted_state(&self) -> Vec<String> {
        self.spec.deleted_state.clone()
    }

    /// Deletes the data of the stored variables `names` (in this instance's key groups)
    /// with the next batch.
    pub fn delete_state_with_next_batch(&mut self, names: Vec<String>) {
        self.deleting = names;
    }

    /// Whether the keys' timers are kept by key as well as in the timer index.
    pub fn timers_by_key(&self) -> bool {
        self.timers_by_key
    }

    /// Converts the stored timers (in this instance's key groups) to how this module
    /// keeps them, with the next batch.
    pub fn convert_timers_with_next_batch(&mut self) {
        self.converting_timers = true;
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
    pub fn run_batch(
        &mut self,
        store: &StateStore,
        txn: StateTxn,
        input: &RecordBatch,
        time: BatchTime,
    ) -> Result<OperatorOutput> {
        let grouped = group_by_key(input, &self.key_indices, self.options.key_groups);
        self.run_grouped(store, txn, input, &grouped.keys(), time)
    }

    /// Like [`WasmOperator::run_batch`] with the input already grouped by key (only
    /// keys of this instance's key groups).
    pub fn run_grouped(
        &mut self,
        store: &StateStore,
        txn: StateTxn,
        input: &RecordBatch,
        groups: &[KeyRows],
        time: BatchTime,
    ) -> Result<OperatorOutput> {
        self.start_batch(txn, time);
        self.calls = CallStats::default();
        self.instance.take_timers_registered();
        let mut outputs = OutputRows::new(self.output_schema.clone());
        let result = self
            .delete_variables()
            .and_then(|()| self.convert_timers())
            .and_then(|()| self.run_keys(store, input, groups, time, &mut outputs))
            .and_then(|()| {
                let input_handler_rows = outputs.num_rows() as usize;
                let timers_fired = self.fire_timers(store, time, &mut outputs)?;
                let txn = self.instance.txn_mut().context("no state transaction during the batch")?;
                let evicted =
                    evict_expired(txn, self.options.operator_id, &self.options.key_group_range, time.processing_time)?;
                let rows = outputs
                    .finish()
                    .map_err(|problem| anyhow!("module '{}' returned unusable rows: {problem}", self.module_name))?;
                Ok((rows.into_iter().collect(), input_handler_rows, timers_fired, evicted))
            });
        let txn = self.instance.finish_batch().context("the batch's state transaction went missing")?;
        let (rows, input_handler_rows, timers_fired, entries_evicted) = result?;
        let mut calls = std::mem::take(&mut self.calls);
        calls.timers_registered = self.instance.take_timers_registered();
        calls.memory_peak_bytes = self.instance.memory_peak_bytes();
        Ok(OperatorOutput {
            txn,
            rows,
            input_handler_rows,
            keys_with_input: groups.len(),
            timers_fired,
            entries_evicted,
            calls,
        })
    }

    /// Calls `close` on the processor.
    pub fn close(&mut self) -> Result<()> {
        Ok(self.instance.close()?)
    }

    fn timer_values(time: BatchTime) -> TimerValues {
        TimerValues { batch_id: time.batch_id, processing_time: time.processing_time, watermark: time.watermark }
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
                let (call_key, values) = self.call_key(key.key_group, key.key, time)?;
                let rows = gather(rows, key.rows);
                self.instance.handle_initial_state(call_key, values, &rows, Self::timer_values(time))?;
            }
            Ok(())
        })();
        let txn = self.instance.finish_batch().context("the batch's state transaction went missing")?;
        result.map(|()| txn)
    }

    /// Starts a batch in the instance, its random numbers drawn from this query, this
    /// batch and each key's key group (not this shard: a replay in another layout draws
    /// the same).
    fn start_batch(&mut self, txn: StateTxn, time: BatchTime) {
        let random = RandomScope { query_id: &self.options.query_id, batch_id: time.batch_id };
        self.instance.start_batch(txn, time.processing_time, random);
    }

    /// Deletes every entry of the variables being deleted, one key group at a time (a
    /// failed batch keeps the state as it was: it is deleted with the batch's commit).
    fn delete_variables(&mut self) -> Result<()> {
        let names = std::mem::take(&mut self.deleting);
        if names.is_empty() {
            return Ok(());
        }
        let operator = self.options.operator_id;
        let txn = self.instance.txn_mut().context("no state transaction during the batch")?;
        for key_group in self.options.key_group_range.clone() {
            // A key group is below the key-group count, itself a u16: the next one fits.
            let start = [operator.to_be_bytes(), key_group.to_be_bytes()].concat();
            let end = [operator.to_be_bytes(), key_group.saturating_add(1).to_be_bytes()].concat();
            for (key, _) in txn.scan_range(Cf::State, &start, Some(&end))? {
                if layout::split_state_key(&key).is_some_and(|(.., variable, _)| names.iter().any(|n| n == variable)) {
                    txn.delete(Cf::State, key);
                }
            }
        }
        Ok(())
    }

    /// Converts the stored timers to how this module keeps them (see
    /// [`Timers::keep_by_key`]) and packs an earlier eddy's timer index (see
    /// [`Timers::pack_index`]), when the stored state kept them another way.
    fn convert_timers(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.converting_timers) {
            return Ok(());
        }
        let txn = self.instance.txn_mut().context("no state transaction during the batch")?;
        let key_groups = self.options.key_group_range.clone();
        Timers::keep_by_key(txn, self.options.operator_id, key_groups.clone(), self.timers_by_key)?;
        Timers::pack_index(txn, self.options.operator_id, key_groups)
    }

    /// Key `encoded` of `key_group` as a key of a call, and its values.
    fn call_key(&self, key_group: u16, encoded: &[u8], time: BatchTime) -> Result<(CallKey, Vec<Scalar>)> {
        let values = key::decode(encoded).context("a grouping key in the state store is corrupt")?;
        let scope = KeyScope::new(self.options.operator_id, key_group, encoded, time.processing_time)
            .with_timers_by_key(self.timers_by_key);
        Ok((CallKey { scope }, values))
    }

    fn run_keys(
        &mut self,
        store: &StateStore,
        input: &RecordBatch,
        groups: &[KeyRows],
        time: BatchTime,
        outputs: &mut OutputRows,
    ) -> Result<()> {
        // Values and lists are one entry per key: read ahead in batched lookups (unless
        // the store's in-memory copy answers).
        let prefetches = self.instance.txn_mut().context("no state transaction during the batch")?.prefetches();
        let read_ahead: Vec<VariableDecl> = self
            .state_variables()
            .into_iter()
            .filter(|decl| prefetches && matches!(decl.kind, StateKind::Value | StateKind::List))
            .collect();
        let operator = self.options.operator_id;
        for chunk in groups.chunks(PREFETCH_KEYS) {
            if !read_ahead.is_empty() {
                let mut keys: Vec<Vec<u8>> = chunk
                    .iter()
                    .flat_map(|key| {
                        let scope = KeyScope::new(operator, key.key_group, key.key, time.processing_time);
                        read_ahead.iter().map(move |decl| scope.var_key(decl))
                    })
                    .collect();
                keys.sort_unstable();
                self.instance.txn_mut().context("no state transaction during the batch")?.prefetch_state(keys)?;
            }
            let mut start = 0;
            while start < chunk.len() {
                let (mut end, mut rows) = (start + 1, chunk[start].rows.len());
                while end < chunk.len() && end - start < KEYS_PER_CALL && rows + chunk[end].rows.len() <= ROWS_PER_CALL
                {
                    rows += chunk[end].rows.len();
                    end += 1;
                }
                // The processor may handle a prefix of a call's keys (its output grew
                // large): the rest go in the next call.
                start += self.call_input_rows(input, &chunk[start..end], time, outputs)?;
                self.spill_if_over(store, time)?;
            }
        }
        Ok(())
    }

    /// One `handle-input-rows` call over `keys`; returns how many of them the
    /// processor handled (at least one).
    fn call_input_rows(
        &mut self,
        input: &RecordBatch,
        keys: &[KeyRows],
        time: BatchTime,
        outputs: &mut OutputRows,
    ) -> Result<usize> {
        let mut call_keys = Vec::with_capacity(keys.len());
        let mut wire = Vec::with_capacity(keys.len());
        for key in keys {
            let (call_key, values) = self.call_key(key.key_group, key.key, time)?;
            call_keys.push(call_key);
            wire.push(WireKeyRows { key: values, num_rows: key.rows.len() as u32 });
        }
        let batch = match keys {
            [key] => gather(input, key.rows),
            _ => gather(input, &keys.iter().flat_map(|key| key.rows.iter().copied()).collect::<Vec<u32>>()),
        };
        let started = Instant::now();
        let output = self.instance.handle_input_rows(call_keys, wire, &batch, Self::timer_values(time))?;
        let micros = started.elapsed().as_micros() as u64;
        let label = |i: usize| self.instance.call_keys()[i].label();
        let handled = self.collect(output, "handle-input-rows", keys.len(), &label, outputs)?;
        self.calls.input_rows.add(HandlerStats { calls: handled as u64, micros });
        // The call's time is shared among the keys it handled by their rows.
        let handled_keys = &keys[..handled];
        let call_rows = handled_keys.iter().map(|key| key.rows.len() as u64).sum::<u64>().max(1);
        for (key, call_key) in handled_keys.iter().zip(self.instance.call_keys()) {
            let rows = key.rows.len() as u64;
            self.calls.top_keys.note(rows, micros * rows / call_rows, || call_key.label());
        }
        Ok(handled)
    }

    /// The clock due timers are measured against in a batch at `time`, if timers fire.
    pub fn timer_deadline(&self, time: BatchTime) -> Option<i64> {
        match (self.spec.time_mode, time.watermark) {
            (TimeMode::ProcessingTime, _) => Some(time.processing_time),
            (TimeMode::EventTime, Some(watermark)) => Some(watermark),
            _ => None,
        }
    }

    /// Writes the batch's changes to the store ahead of the commit when they outgrew
    /// `spill-state-bytes`.
    fn spill_if_over(&mut self, store: &StateStore, time: BatchTime) -> Result<()> {
        let txn = self.instance.txn_mut().context("no state transaction during the batch")?;
        store.write_ahead_over(txn, time.batch_id, self.options.spill_state_bytes)?;
        Ok(())
    }

    fn fire_timers(&mut self, store: &StateStore, time: BatchTime, outputs: &mut OutputRows) -> Result<usize> {
        let Some(deadline) = self.timer_deadline(time) else { return Ok(0) };
        let operator = self.options.operator_id;
        let txn = self.instance.txn_mut().context("no state transaction during the batch")?;
        let owned = self.options.key_group_range.clone();
        // Every due timer fires in this batch, in every shard (each its key groups'), so
        // their index entries go at the commit as one range, not one deletion each (which
        // the next batches' scans for due timers would walk past). The range spans every
        // key group: every shard drops it (the commit drops it once), so that none
        // writes its changes in the range ahead of the commit (the range would delete them).
        Timers::drop_fired_index(txn, operator, deadline)?;
        let mut due = Timers::due(txn, operator, deadline, |key_group| owned.contains(&key_group))?;
        // Fired key after key (a key's timers still in expiry order): the handlers then
        // read and change the batch's buffered state in its key order, each near the
        // last, instead of all over it (WebAssembly window job −6 %).
        due.sort_by_key();
        let mut fired = 0;
        for start in (0..due.len()).step_by(TIMERS_PER_CALL) {
            let chunk = due.slice(start, TIMERS_PER_CALL);
            // The processor may handle a prefix of a call's timers (its output grew
            // large): the rest go in the next call.
            let mut rest = chunk.as_slice();
            while !rest.is_empty() {
                let (handled, fired_now) = self.call_expired_timers(rest, time, outputs)?;
                fired += fired_now;
                rest = &rest[handled..];
                self.spill_if_over(store, time)?;
            }
        }
        Ok(fired)
    }

    /// One `handle-expired-timers` call over `due`; returns how many of them the
    /// processor handled (at least one) and how many of those fired.
    fn call_expired_timers(
        &mut self,
        due: &[DueTimer<'_>],
        time: BatchTime,
        outputs: &mut OutputRows,
    ) -> Result<(usize, usize)> {
        let mut keys: Vec<CallKey> = Vec::new();
        let mut wire_keys: Vec<Vec<Scalar>> = Vec::new();
        let mut timers = Vec::with_capacity(due.len());
        // The timers come key after key (see `fire_timers`): a key's are next to each other.
        let mut last: Option<(u16, &[u8])> = None;
        for timer in due {
            if last != Some((timer.key_group, timer.key)) {
                let (call_key, values) = self.call_key(timer.key_group, timer.key, time)?;
                keys.push(call_key);
                wire_keys.push(values);
                last = Some((timer.key_group, timer.key));
            }
            timers.push(CallTimer { key_index: keys.len() - 1, expiry: timer.expiry, fired: false, taken: false });
        }
        let started = Instant::now();
        let (output, timers) =
            self.instance.handle_expired_timers(keys, wire_keys, timers, Self::timer_values(time))?;
        let micros = started.elapsed().as_micros() as u64;
        let label = |i: usize| self.instance.call_keys()[timers[i].key_index].label();
        let handled = self.collect(output, "handle-expired-timers", timers.len(), &label, outputs)?;
        let (done, left) = timers.split_at(handled);
        let skipped = done.iter().position(|timer| !timer.taken);
        if let Some(i) = skipped.or_else(|| left.iter().position(|timer| timer.taken).map(|i| handled + i)) {
            bail!(
                "module '{}' returned from handle-expired-timers with timer {} of key {} {} (each due timer it \
                 handles is taken with take-timer first, and the output's ends cover exactly the timers taken); \
                 rebuild it with an eddy-guest SDK of this contract",
                self.module_name,
                timers[i].expiry,
                label(i),
                if skipped.is_some() { "handled but not taken" } else { "taken but not handled" }
            );
        }
        let fired = done.iter().filter(|timer| timer.fired).count();
        self.calls.expired_timers.add(HandlerStats { calls: fired as u64, micros });
        Ok((handled, fired))
    }

    /// Checks a call's output — over `given` keys or timers, the i-th named by
    /// `label(i)` — against the per-key and per-batch limits and the output schema, and
    /// keeps it; returns how many keys or timers the processor handled.
    fn collect(
        &self,
        returned: Output,
        function: &str,
        given: usize,
        label: &dyn Fn(usize) -> String,
        outputs: &mut OutputRows,
    ) -> Result<usize> {
        let (total, handled) = (returned.rows.num_rows, returned.ends.len());
        let fits = (1..=given).contains(&handled)
            && returned.ends.windows(2).all(|pair| pair[0] <= pair[1])
            && returned.ends.last() == Some(&total);
        if !fits {
            bail!(
                "module '{}' returned from {function} {total} rows with row ends {:?} for a call over {given} keys or \
                 timers; it must return one end per key or timer it handled (at least the first), never \
                 decreasing, the last at the row count (rebuild it with an eddy-guest SDK of this contract)",
                self.module_name,
                returned.ends.iter().take(8).collect::<Vec<_>>()
            );
        }
        let limits = &self.options.limits;
        let (mut start, mut bytes_before) = (0u32, 0u64);
        for (i, &end) in returned.ends.iter().enumerate() {
            let (rows, bytes) = (u64::from(end - start), row_range_bytes(&returned.rows, start..end));
            let batch_rows = outputs.num_rows() + u64::from(end);
            let batch_bytes = outputs.num_bytes() + bytes_before + bytes;
            let checks = [
                (Limit::OutputRowsPerCall, rows),
                (Limit::OutputBytesPerCall, bytes),
                (Limit::OutputRowsPerBatch, batch_rows),
                (Limit::OutputBytesPerBatch, batch_bytes),
            ];
            if let Some((limit, _)) = checks.into_iter().find(|(limit, used)| *used > limit.of(limits)) {
                let returned = format!("module '{}' returned", self.module_name);
                let place = format!("in {function} for key {}", label(i));
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
            (start, bytes_before) = (end, bytes_before + bytes);
        }
        outputs.push(returned.rows).map_err(|problem| {
            // Every row of a call has the same columns: name the first key that returned some.
            let place = returned.ends.iter().position(|&end| end > 0).map(|first| format!(" for key {}", label(first)));
            let place = place.unwrap_or_default();
            anyhow!(
                "module '{}' returned rows that do not match its declared output schema in {function}{place}: {problem}",
                self.module_name
            )
        })?;
        Ok(handled)
    }
}
