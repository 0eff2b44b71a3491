//! A native test harness: run a processor with plain `cargo test`, no WASM.
//!
//! The [`Harness`] runs a [`StatefulProcessor`] against an in-memory store with the
//! host's semantics: state and timers per key, TTL counted from each write in
//! processing time (a value whose expiry ≤ the processing time is invisible), map
//! entries in byte order of their encoded keys, timers deduplicated and firing in
//! expiry order once their clock reaches them — processing-time timers when the
//! processing time does ([`Harness::advance_processing_time`]), event-time timers
//! when the watermark does ([`Harness::set_watermark`]). A timer is removed before
//! its handler runs. Like a failed batch on the host, a handler call that returns
//! `Err` leaves state and timers as they were before it.
//!
//! [`Harness::run_batch`] runs one micro-batch exactly as the host does (rows, then
//! due timers, all or nothing); the shared cases in `sdks/conformance/` check it
//! against the host.
//!
//! Rows and keys are written with the [`row!`](crate::row) macro; see the crate-level
//! example.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::context::{InitContext, QueryInfo};
use crate::error::{Error, Result};
use crate::key::Key;
use crate::log::{LogRecord, capture_start, capture_take};
use crate::modes::{OutputMode, TimeMode};
use crate::output::{BatchBuilder, Output};
use crate::processor::{Driver, StatefulProcessor};
use crate::rows::Rows;
use crate::schema::Schema;
use crate::state::{decode, encode};
use crate::store::{Backend, MemoryStore, Store};
use crate::timers::{ExpiredTimer, TimerValues};
use crate::value::{Datum, Value};

/// A batch in the schema `ddl` (see [`Schema::parse`]) made of `rows`.
///
/// ```
/// use eddy_guest::{row, testing::batch};
///
/// let rows = batch("user STRING, amount BIGINT", &[row!["a", 5], row!["b", None::<i64>]])?;
/// assert_eq!(rows.len(), 2);
/// assert!(rows.column("amount")?.is_null(1));
/// # Ok::<(), eddy_guest::Error>(())
/// ```
pub fn batch<'v, R: AsRef<[Datum<'v>]>>(ddl: &str, rows: &[R]) -> Result<Rows> {
    build(Rc::new(Schema::parse(ddl)?), rows)
}

fn build<'v, R: AsRef<[Datum<'v>]>>(schema: Rc<Schema>, rows: &[R]) -> Result<Rows> {
    let mut builder = BatchBuilder::new(schema);
    for (i, row) in rows.iter().enumerate() {
        builder.append(row.as_ref()).map_err(|e| e.context(format!("row {i}")))?;
    }
    Ok(builder.finish())
}

/// Configures a [`Harness`]; made by [`Harness::builder`].
pub struct HarnessBuilder<P> {
    input_schema: String,
    key_schema: String,
    output_mode: OutputMode,
    config: String,
    processing_time: i64,
    watermark: Option<i64>,
    initial_state_schema: Option<String>,
    event_time_column: Option<String>,
    query: QueryInfo,
    _processor: PhantomData<fn() -> P>,
}

impl<P: StatefulProcessor> HarnessBuilder<P> {
    /// The query's output mode ([`OutputMode::Append`] by default).
    pub fn output_mode(mut self, mode: OutputMode) -> Self {
        self.output_mode = mode;
        self
    }

    /// The operator's config as JSON text (`{}` by default).
    pub fn config(mut self, json: impl Into<String>) -> Self {
        self.config = json.into();
        self
    }

    /// The starting processing time in microseconds since the epoch (0 by default).
    pub fn processing_time(mut self, micros: i64) -> Self {
        self.processing_time = micros;
        self
    }

    /// The starting watermark (none by default).
    pub fn watermark(mut self, micros: i64) -> Self {
        self.watermark = Some(micros);
        self
    }

    /// The schema of the initial-state rows, as the pipeline's
    /// `operator.initial-state.schema` would give it (none by default).
    pub fn initial_state_schema(mut self, ddl: impl Into<String>) -> Self {
        self.initial_state_schema = Some(ddl.into());
        self
    }

    /// The input's event-time column, as a pipeline watermark would give it (none by
    /// default). Like the host, [`Harness::feed`] then drops rows older than the
    /// watermark unless the processor accepts late rows.
    pub fn event_time_column(mut self, column: impl Into<String>) -> Self {
        self.event_time_column = Some(column.into());
        self
    }

    /// The query and run ids `init` sees ([`InitContext::query_info`]; by default
    /// `harness-query` and `harness-run`).
    pub fn query_info(mut self, id: impl Into<String>, run_id: impl Into<String>) -> Self {
        self.query = QueryInfo { id: id.into(), run_id: run_id.into() };
        self
    }

    /// Runs the processor's `init` and returns the harness.
    pub fn build(self) -> Result<Harness<P>> {
        let input_schema = Rc::new(Schema::parse(&self.input_schema).map_err(|e| e.context("input schema"))?);
        let key_schema = Rc::new(Schema::parse(&self.key_schema).map_err(|e| e.context("key schema"))?);
        let memory = Rc::new(RefCell::new(MemoryStore::default()));
        memory.borrow_mut().now = self.processing_time;
        let store = Rc::new(Store::new(Backend::Memory(memory.clone())));
        let mut ctx =
            InitContext::new(input_schema, key_schema.clone(), self.output_mode, self.config, self.query, store);
        ctx.set_event_time_column(self.event_time_column.clone());
        if let Some(ddl) = &self.initial_state_schema {
            ctx.set_initial_state_schema(Schema::parse(ddl).map_err(|e| e.context("initial-state schema"))?);
        }
        capture_start();
        let driver = Driver::<P>::init(ctx);
        let logs = capture_take();
        let driver = driver.map_err(|e| e.context("init failed"))?;
        memory.borrow_mut().ttls = driver.spec().state.iter().map(|d| (d.name.clone(), d.ttl_micros)).collect();
        Ok(Harness {
            driver,
            memory,
            key_schema,
            batch_id: 0,
            processing_time: self.processing_time,
            watermark: self.watermark,
            event_time_column: self.event_time_column,
            ran_batch: false,
            logs,
        })
    }
}

/// Runs one processor natively with in-memory state and controllable clocks.
pub struct Harness<P> {
    driver: Driver<P>,
    memory: Rc<RefCell<MemoryStore>>,
    key_schema: Rc<Schema>,
    batch_id: u64,
    processing_time: i64,
    watermark: Option<i64>,
    event_time_column: Option<String>,
    /// Whether a [`Harness::run_batch`] batch went through (the first judges late rows
    /// by its own watermark).
    ran_batch: bool,
    logs: Vec<LogRecord>,
}

impl<P: StatefulProcessor> Harness<P> {
    /// Starts configuring a harness for a query whose input rows have the schema
    /// `input_schema` and are grouped by the columns `key_schema` (both as for
    /// [`Schema::parse`], e.g. `"user STRING, amount BIGINT"` and `"user STRING"`).
    pub fn builder(input_schema: &str, key_schema: &str) -> HarnessBuilder<P> {
        HarnessBuilder {
            input_schema: input_schema.to_string(),
            key_schema: key_schema.to_string(),
            output_mode: OutputMode::Append,
            config: "{}".to_string(),
            processing_time: 0,
            watermark: None,
            initial_state_schema: None,
            event_time_column: None,
            query: QueryInfo { id: "harness-query".into(), run_id: "harness-run".into() },
            _processor: PhantomData,
        }
    }

    /// The processor under test.
    pub fn processor(&self) -> &P {
        self.driver.processor()
    }

    /// The batch id handlers see in [`TimerValues::batch_id`] (0 at the start).
    pub fn batch_id(&self) -> u64 {
        self.batch_id
    }

    /// Sets the batch id later handler calls see, as the host's next batch would.
    pub fn set_batch_id(&mut self, batch_id: u64) {
        self.batch_id = batch_id;
    }

    /// The current processing time (microseconds since the epoch).
    pub fn processing_time(&self) -> i64 {
        self.processing_time
    }

    /// The current watermark.
    pub fn watermark(&self) -> Option<i64> {
        self.watermark
    }

    /// Every message the processor logged so far.
    pub fn logs(&self) -> &[LogRecord] {
        &self.logs
    }

    fn timer_values(&self) -> TimerValues {
        TimerValues { batch_id: self.batch_id, processing_time: self.processing_time, watermark: self.watermark }
    }

    /// The key made of `parts`, checked against the key schema.
    fn key(&self, parts: &[Datum<'_>]) -> Result<(Key, Vec<u8>)> {
        let rows = build(self.key_schema.clone(), &[parts]).map_err(|e| e.context("key"))?;
        let parts = rows.to_values().pop().unwrap_or_default();
        let bytes = encode("key", &parts)?.into_vec();
        Ok((Key::new(parts), bytes))
    }

    /// Runs one handler call for `key`; `Err` restores `snapshot`.
    fn call<R>(
        &mut self,
        key: Vec<u8>,
        snapshot: &MemoryStore,
        call: impl FnOnce(&mut Driver<P>, &TimerValues) -> Result<R>,
    ) -> Result<R> {
        {
            let mut memory = self.memory.borrow_mut();
            memory.key = key;
            memory.now = self.processing_time;
        }
        let timer_values = self.timer_values();
        capture_start();
        let result = call(&mut self.driver, &timer_values);
        self.logs.extend(capture_take());
        if result.is_err() {
            *self.memory.borrow_mut() = snapshot.clone();
        }
        result
    }

    /// Calls `handle_input_rows` for `key` with `rows` (each in input-schema order)
    /// at the current clocks, and returns the rows it output. As on the host, late rows
    /// (event time at or before the watermark, by the event-time column) are dropped
    /// first unless the processor accepts late rows; when none is left, the processor
    /// is not called. The host judges a batch's rows by the previous batch's watermark:
    /// here that is the watermark set before this call.
    pub fn feed<'v, R: AsRef<[Datum<'v>]>>(&mut self, key: &[Datum<'_>], rows: &[R]) -> Result<Rows> {
        let on_time = self.on_time(rows, self.watermark)?;
        if on_time.is_empty() && !rows.is_empty() {
            return Ok(self.driver.output().finish());
        }
        let rows = build(self.driver.input_schema().clone(), &on_time).map_err(|e| e.context("input"))?;
        let (key, key_bytes) = self.key(key)?;
        let snapshot = self.memory.borrow().clone();
        let mut output = self.driver.output();
        self.call(key_bytes, &snapshot, |driver, tv| driver.handle_input_rows(&key, &rows, tv, &mut output))?;
        Ok(output.finish())
    }

    /// The rows the host would hand over: those at or before `watermark` are left out
    /// when there is an event-time column and the processor does not accept late rows.
    fn on_time<'r, 'v, R: AsRef<[Datum<'v>]>>(&self, rows: &'r [R], watermark: Option<i64>) -> Result<Vec<&'r R>> {
        let column = match (&self.event_time_column, watermark, self.driver.spec().accepts_late_rows) {
            (Some(column), Some(_), false) => column,
            _ => return Ok(rows.iter().collect()),
        };
        let index = self
            .driver
            .input_schema()
            .index_of(column)
            .ok_or_else(|| Error::msg(format!("the event-time column `{column}` is not in the input schema")))?;
        let watermark = watermark.unwrap_or(i64::MIN);
        Ok(rows
            .iter()
            .filter(|row| !matches!(row.as_ref().get(index), Some(Datum::Timestamp(at)) if *at <= watermark))
            .collect())
    }

    /// Calls `handle_initial_state` for `key` with `rows` in the schema the processor
    /// declared with [`InitContext::set_initial_state_schema`].
    pub fn initial_state<'v, R: AsRef<[Datum<'v>]>>(&mut self, key: &[Datum<'_>], rows: &[R]) -> Result<()> {
        let Some(schema) = self.driver.spec().initial_state_schema.clone() else {
            return Err(Error::msg(
                "no initial-state schema: give one with \
                 `Harness::builder(..).initial_state_schema(..)` to feed initial state",
            ));
        };
        let rows = build(schema, rows).map_err(|e| e.context("initial state"))?;
        let (key, key_bytes) = self.key(key)?;
        let snapshot = self.memory.borrow().clone();
        self.call(key_bytes, &snapshot, |driver, tv| driver.handle_initial_state(&key, &rows, tv))
    }

    /// Moves the processing time forward by `by` and fires the processing-time timers
    /// it reached; returns their output.
    pub fn advance_processing_time(&mut self, by: Duration) -> Result<Rows> {
        let by = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
        self.set_processing_time(self.processing_time.saturating_add(by))
    }

    /// Sets the processing time (it never goes back) and fires the processing-time
    /// timers with expiry ≤ `micros`, in expiry order; returns their output.
    pub fn set_processing_time(&mut self, micros: i64) -> Result<Rows> {
        if micros < self.processing_time {
            return Err(Error::msg(format!(
                "processing time cannot go back from {} to {micros}",
                self.processing_time
            )));
        }
        self.processing_time = micros;
        self.memory.borrow_mut().now = micros;
        self.fire(TimeMode::ProcessingTime, Some(micros))
    }

    /// Sets the watermark (it never goes back) and fires the event-time timers with
    /// expiry ≤ `micros`, in expiry order; returns their output.
    pub fn set_watermark(&mut self, micros: i64) -> Result<Rows> {
        if let Some(current) = self.watermark.filter(|&w| micros < w) {
            return Err(Error::msg(format!("the watermark cannot go back from {current} to {micros}")));
        }
        self.watermark = Some(micros);
        self.fire(TimeMode::EventTime, Some(micros))
    }

    fn fire(&mut self, mode: TimeMode, clock: Option<i64>) -> Result<Rows> {
        let mut output = self.driver.output();
        let snapshot = self.memory.borrow().clone();
        self.fire_into(mode, clock, &snapshot, &mut output)?;
        Ok(output.finish())
    }

    /// Fires the timers of `mode` with expiry ≤ `clock` into `output`, in expiry order;
    /// an `Err` restores `snapshot`.
    fn fire_into(
        &mut self,
        mode: TimeMode,
        clock: Option<i64>,
        snapshot: &MemoryStore,
        output: &mut Output,
    ) -> Result<()> {
        let Some(clock) = clock.filter(|_| self.driver.spec().time_mode == mode) else {
            return Ok(());
        };
        let due = self.memory.borrow().due_timers(clock);
        for (expiry_time, key_bytes) in due {
            if !self.memory.borrow_mut().take_timer(expiry_time, &key_bytes) {
                continue; // deleted by an earlier handler
            }
            let key = Key::new(decode::<Vec<Value>>("key", &key_bytes)?);
            let timer = ExpiredTimer { expiry_time };
            self.call(key_bytes, snapshot, |driver, tv| driver.handle_expired_timer(&key, tv, &timer, output))?;
        }
        Ok(())
    }

    /// Runs one micro-batch as the host does, at `processing_time` with `watermark`
    /// (neither goes back), and returns its output: each key's `rows` in one call (late
    /// rows dropped first, judged by the previous batch's watermark — the first batch's
    /// own — unless the processor accepts late rows; a key left without rows is not
    /// called), then every timer due at the batch's clock (the processing time, or the
    /// watermark for event-time timers), in expiry order. A timer a handler registers
    /// that is already due fires in the next batch. Like the host, a batch with a
    /// failing call keeps nothing: state, timers, clocks and the batch id stay as they
    /// were. The batch id ([`Harness::batch_id`]) counts the batches that went through.
    pub fn run_batch<'v, K: AsRef<[Datum<'v>]>, R: AsRef<[Datum<'v>]>>(
        &mut self,
        processing_time: i64,
        watermark: Option<i64>,
        keys: &[(K, Vec<R>)],
    ) -> Result<Rows> {
        if processing_time < self.processing_time {
            return Err(Error::msg(format!(
                "processing time cannot go back from {} to {processing_time}",
                self.processing_time
            )));
        }
        if let Some(current) = self.watermark.filter(|&current| watermark.is_none_or(|next| next < current)) {
            return Err(Error::msg(format!("the watermark cannot go back from {current} to {watermark:?}")));
        }
        let late_rows_watermark = if self.ran_batch { self.watermark } else { watermark };
        let clocks = (self.processing_time, self.watermark);
        (self.processing_time, self.watermark) = (processing_time, watermark);
        self.memory.borrow_mut().now = processing_time;
        let snapshot = self.memory.borrow().clone();
        let result = self.batch_calls(keys, late_rows_watermark, &snapshot);
        match result {
            Ok(rows) => {
                self.batch_id += 1;
                self.ran_batch = true;
                Ok(rows)
            }
            Err(error) => {
                *self.memory.borrow_mut() = snapshot;
                (self.processing_time, self.watermark) = clocks;
                self.memory.borrow_mut().now = clocks.0;
                Err(error)
            }
        }
    }

    fn batch_calls<'v, K: AsRef<[Datum<'v>]>, R: AsRef<[Datum<'v>]>>(
        &mut self,
        keys: &[(K, Vec<R>)],
        late_rows_watermark: Option<i64>,
        snapshot: &MemoryStore,
    ) -> Result<Rows> {
        let mut output = self.driver.output();
        for (key, rows) in keys {
            let on_time = self.on_time(rows, late_rows_watermark)?;
            if on_time.is_empty() {
                continue;
            }
            let rows = build(self.driver.input_schema().clone(), &on_time).map_err(|e| e.context("input"))?;
            let (key, key_bytes) = self.key(key.as_ref())?;
            self.call(key_bytes, snapshot, |driver, tv| driver.handle_input_rows(&key, &rows, tv, &mut output))?;
        }
        let clock = match self.driver.spec().time_mode {
            TimeMode::EventTime => self.watermark,
            _ => Some(self.processing_time),
        };
        let mode = self.driver.spec().time_mode;
        self.fire_into(mode, clock, snapshot, &mut output)?;
        Ok(output.finish())
    }

    /// `key`'s live value of the value state variable `name`.
    pub fn value_state<T: DeserializeOwned>(&self, name: &str, key: &[Datum<'_>]) -> Result<Option<T>> {
        let (_, key) = self.key(key)?;
        let bytes = self.memory.borrow().value_get(&key, name);
        bytes.map(|bytes| decode(name, &bytes)).transpose()
    }

    /// `key`'s live elements of the list state variable `name`, oldest first.
    pub fn list_state<T: DeserializeOwned>(&self, name: &str, key: &[Datum<'_>]) -> Result<Vec<T>> {
        let (_, key) = self.key(key)?;
        let all = self.memory.borrow().list_get(&key, name);
        all.iter().map(|bytes| decode(name, bytes)).collect()
    }

    /// `key`'s live entries of the map state variable `name`, in key order.
    pub fn map_state<K: DeserializeOwned, V: DeserializeOwned>(
        &self,
        name: &str,
        key: &[Datum<'_>],
    ) -> Result<Vec<(K, V)>> {
        let (_, key) = self.key(key)?;
        let all = self.memory.borrow().map_entries(&key, name);
        all.iter().map(|(k, v)| Ok((decode(name, k)?, decode(name, v)?))).collect()
    }

    /// `key`'s registered timers, earliest first.
    pub fn timers(&self, key: &[Datum<'_>]) -> Result<Vec<i64>> {
        let (_, key) = self.key(key)?;
        Ok(self.memory.borrow().timer_list(&key))
    }

    /// Calls the processor's `close`.
    pub fn close(mut self) {
        self.driver.close();
    }
}
