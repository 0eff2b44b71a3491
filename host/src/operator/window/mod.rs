//! The window stage: Spark's `groupBy(window(time, size[, slide]) | session_window(time,
//! gap), cols).agg(...)` in native Rust.
//!
//! State per group key: the map `windows` from a window's start (CBOR) to its running
//! aggregates (see [`aggregate`]), and an event-time timer at each window's end.
//! Output modes as Spark's:
//! - **append**: a window is output once, when the watermark reaches its end (the
//!   current batch's watermark), then forgotten;
//! - **update**: every window a batch changed is output after the batch; windows the
//!   watermark passed are forgotten without output;
//! - **complete**: every window every batch, none forgotten (refused past
//!   `max-complete-rows`).
//!
//! Session windows start at a row's event time and end `gap` after the group's last
//! row in them; a row within `gap` of sessions merges them (also a late row that
//! bridges two), so a session's start can move back and its end forward.

mod aggregate;

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use arrow::array::{Array, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, SchemaRef, TimeUnit};

use self::aggregate::{Column, Values, WindowState};
use super::grouping::group_by_key;
use super::stage::{BatchTime, Stage, StageOutput, StageStats};
use crate::contract::rows::contract_type;
use crate::contract::{OutputMode, Scalar};
use crate::pipeline::{AggregateFn, StageSpec, WindowKind, WindowSpec};
use crate::state::{KeyScope, OperatorStateSchema, StateKind, StateStore, StateTxn, Timers, VariableDecl, key};

/// A window stage.
pub struct WindowStage {
    name: String,
    operator_id: u16,
    key_groups: u16,
    spec: WindowSpec,
    time_index: usize,
    group_indices: Vec<usize>,
    columns: Vec<Column>,
    functions: Vec<AggregateFn>,
    output_schema: SchemaRef,
    windows: VariableDecl,
}

impl WindowStage {
    /// The stage `spec` describes over rows of `input`; `has_watermark` says whether the
    /// query has one (append mode needs it).
    pub fn open(
        stage: &StageSpec,
        spec: &WindowSpec,
        input: &SchemaRef,
        key_groups: u16,
        has_watermark: bool,
    ) -> Result<WindowStage> {
        let names = || input.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ");
        let time_index = input.index_of(&spec.time_column).map_err(|_| {
            anyhow::anyhow!(
                "the window's time-column '{}' is not among the stage's input columns ({})",
                spec.time_column,
                names()
            )
        })?;
        if !matches!(input.field(time_index).data_type(), DataType::Timestamp(TimeUnit::Microsecond, _)) {
            bail!(
                "the window's time-column '{}' is {}, not a TIMESTAMP",
                spec.time_column,
                input.field(time_index).data_type()
            );
        }
        if spec.output_mode == OutputMode::Append && !has_watermark {
            bail!(
                "append mode needs a watermark: a window is output once the watermark passes its end (Spark: \
                 \"Append output mode not supported when there are streaming aggregations without watermark\"); \
                 add [source.watermark], or use output-mode \"update\" or \"complete\""
            );
        }
        let group_indices = spec
            .group_by
            .iter()
            .map(|column| {
                input.index_of(column).map_err(|_| {
                    anyhow::anyhow!("group-by column '{column}' is not among the stage's input columns ({})", names())
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for (index, column) in group_indices.iter().zip(&spec.group_by) {
            if contract_type(input.field(*index).data_type()).is_none() {
                bail!("group-by column '{column}' is {}, which cannot be a key", input.field(*index).data_type());
            }
        }
        let columns = aggregate::resolve(&spec.aggregates, input)?;
        let group_fields: Vec<Field> = group_indices.iter().map(|i| input.field(*i).clone()).collect();
        let output_schema = aggregate::output_schema(&group_fields, &columns);
        Ok(WindowStage {
            name: stage.name.clone(),
            operator_id: stage.operator_id,
            key_groups,
            spec: spec.clone(),
            time_index,
            group_indices,
            functions: spec.aggregates.iter().map(|a| a.function).collect(),
            columns,
            output_schema,
            windows: VariableDecl { name: "windows".into(), kind: StateKind::Map, ttl_us: None },
        })
    }

    /// What the stage keeps, for the checkpoint's schema record and `eddy state`.
    pub fn state_schema(&self) -> OperatorStateSchema {
        OperatorStateSchema {
            key_columns: self.spec.group_by.clone(),
            key_groups: self.key_groups,
            variables: vec![self.windows.clone()],
            module_sha256: format!("builtin:window:{:?}:{:?}", self.spec.windows, self.spec.aggregates),
            stage: self.name.clone(),
        }
    }

    /// The starts of the fixed windows holding `time`.
    fn starts(&self, time: i64) -> Vec<i64> {
        match self.spec.windows {
            // A time within a window of i64::MIN has no window start: it is left out.
            WindowKind::Tumbling { size_us } => time.checked_sub(time.rem_euclid(size_us)).into_iter().collect(),
            WindowKind::Sliding { size_us, slide_us } => {
                let Some(last) = time.checked_sub(time.rem_euclid(slide_us)) else { return Vec::new() };
                (0..size_us / slide_us).filter_map(|k| last.checked_sub(k * slide_us)).collect()
            }
            WindowKind::Session { .. } => Vec::new(),
        }
    }

    fn size_us(&self) -> i64 {
        match self.spec.windows {
            WindowKind::Tumbling { size_us } | WindowKind::Sliding { size_us, .. } => size_us,
            WindowKind::Session { gap_us } => gap_us,
        }
    }

    /// Adds one key's rows to its windows; returns the windows it changed.
    fn add_rows(
        &self,
        txn: &mut StateTxn,
        scope: &KeyScope,
        rows: &[u32],
        times: &TimestampMicrosecondArray,
        values: &Values,
        late: Option<i64>,
        stats: &mut StageStats,
    ) -> Result<Vec<WindowState>> {
        let mut touched: BTreeMap<i64, WindowState> = BTreeMap::new();
        if let WindowKind::Session { gap_us } = self.spec.windows {
            let before = self.load(txn, scope)?;
            let mut sessions: Vec<WindowState> = before.values().cloned().collect();
            for &row in rows {
                let row = row as usize;
                if times.is_null(row) {
                    continue;
                }
                let time = times.value(row);
                if late.is_some_and(|watermark| time.saturating_add(gap_us) <= watermark) {
                    stats.rows_dropped_by_watermark += 1;
                    continue;
                }
                let mut session = WindowState::new(time, time.saturating_add(gap_us), self.columns.len());
                values.add_row(row, &mut session.aggregates);
                let (overlapping, rest): (Vec<WindowState>, Vec<WindowState>) =
                    sessions.into_iter().partition(|s| s.start <= session.end && session.start <= s.end);
                for other in &overlapping {
                    session.merge(other);
                }
                sessions = rest;
                sessions.push(session);
            }
            for (start, old) in &before {
                if !sessions.iter().any(|s| s.start == *start && s.end == old.end) {
                    scope.map_remove(txn, &self.windows, &cbor(start)?);
                    scope.timer_delete(txn, old.end);
                }
            }
            // Only sessions that changed are written back.
            touched.extend(sessions.into_iter().filter(|s| before.get(&s.start) != Some(s)).map(|s| (s.start, s)));
        } else {
            let size = self.size_us();
            for &row in rows {
                let row = row as usize;
                if times.is_null(row) {
                    continue;
                }
                let mut counted = false;
                for start in self.starts(times.value(row)) {
                    if late.is_some_and(|watermark| start.saturating_add(size) <= watermark) {
                        continue;
                    }
                    counted = true;
                    // The batch's partial aggregates, merged into the stored ones below
                    // (so sums add up in the same order however batches are cut).
                    let window = touched
                        .entry(start)
                        .or_insert_with(|| WindowState::new(start, start.saturating_add(size), self.columns.len()));
                    values.add_row(row, &mut window.aggregates);
                }
                if !counted {
                    stats.rows_dropped_by_watermark += 1;
                }
            }
        }
        let sessions = matches!(self.spec.windows, WindowKind::Session { .. });
        for window in touched.values_mut() {
            let user_key = cbor(&window.start)?;
            match scope.map_get(txn, &self.windows, &user_key)? {
                Some(raw) if !sessions => {
                    let mut stored = decode(&raw)?;
                    stored.merge(window);
                    *window = stored;
                }
                Some(_) => {}
                None if self.spec.output_mode != OutputMode::Complete => {
                    scope.timer_register(txn, window.end);
                    stats.timers_registered += 1;
                }
                None => {}
            }
            scope.map_update(txn, &self.windows, &user_key, &cbor(window)?);
            stats.state_rows_updated += 1;
        }
        Ok(touched.into_values().collect())
    }

    /// Every window of a key, by start.
    fn load(&self, txn: &StateTxn, scope: &KeyScope) -> Result<BTreeMap<i64, WindowState>> {
        scope.map_entries(txn, &self.windows)?.into_iter().map(|(_, raw)| decode(&raw).map(|w| (w.start, w))).collect()
    }

    /// The windows whose end the watermark reached, removed from state.
    fn evict(
        &self,
        txn: &mut StateTxn,
        watermark: i64,
        now: i64,
        stats: &mut StageStats,
    ) -> Result<Vec<(Vec<Scalar>, WindowState)>> {
        let mut closed = Vec::new();
        for due in Timers::due(txn, self.operator_id, watermark)? {
            let scope = KeyScope::new(self.operator_id, due.key_group, due.key.clone(), now);
            scope.timer_delete(txn, due.expiry);
            stats.timers_fired += 1;
            let group = key::decode(&due.key).context("a window's group key in the state store is not a key")?;
            let ending = match self.spec.windows {
                // A fixed window is found by its start: one read, no scan of the key's windows.
                WindowKind::Tumbling { size_us } | WindowKind::Sliding { size_us, .. } => {
                    let start = due.expiry.saturating_sub(size_us);
                    match scope.map_get(txn, &self.windows, &cbor(&start)?)? {
                        Some(raw) => vec![(start, decode(&raw)?)],
                        None => Vec::new(),
                    }
                }
                WindowKind::Session { .. } => {
                    self.load(txn, &scope)?.into_iter().filter(|(_, window)| window.end == due.expiry).collect()
                }
            };
            for (start, window) in ending {
                scope.map_remove(txn, &self.windows, &cbor(&start)?);
                stats.entries_evicted += 1;
                stats.state_rows_removed += 1;
                closed.push((group.clone(), window));
            }
        }
        Ok(closed)
    }

    /// Every window in state (complete mode).
    fn all_windows(&self, txn: &StateTxn) -> Result<Vec<(Vec<Scalar>, WindowState)>> {
        let prefix = self.operator_id.to_be_bytes();
        let mut all = Vec::new();
        for (raw_key, raw) in txn.scan_prefix(crate::state::Cf::State, &prefix)? {
            let (_, _, group, _, _) = crate::state::layout::split_state_key(&raw_key)
                .context("a state key of the window stage is corrupt")?;
            let group = key::decode(group).context("a window's group key in the state store is not a key")?;
            let payload = crate::state::value_get(Some(raw), i64::MIN)?.context("a window's state is empty")?;
            all.push((group, decode(&payload)?));
            if all.len() as u64 > self.spec.max_complete_rows {
                bail!(
                    "complete mode would output more than max-complete-rows ({}) windows; raise it, or use append or update mode",
                    self.spec.max_complete_rows
                );
            }
        }
        Ok(all)
    }
}

fn cbor<T: serde::Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out)?;
    Ok(out)
}

fn decode(raw: &[u8]) -> Result<WindowState> {
    ciborium::from_reader(raw).context("a window's state in the store does not decode")
}

impl Stage for WindowStage {
    fn output_schema(&self) -> &SchemaRef {
        &self.output_schema
    }

    /// Late rows are judged here, as Spark judges them for a windowed aggregation: by
    /// their window — a row counts unless its window ended at or before the previous
    /// batch's watermark (its result was final).
    fn accepts_late_rows(&self) -> bool {
        true
    }

    fn timers_due(&self, store: &StateStore, time: BatchTime) -> Result<bool> {
        match (self.spec.output_mode, time.watermark) {
            (OutputMode::Complete, _) | (_, None) => Ok(false),
            (_, Some(watermark)) => Ok(!Timers::due(&store.begin(), self.operator_id, watermark)?.is_empty()),
        }
    }

    fn run(&mut self, store: &StateStore, input: &RecordBatch, time: BatchTime) -> Result<StageOutput> {
        let started = std::time::Instant::now();
        let mut txn = store.begin();
        let mut stats = StageStats { name: self.name.clone(), ..StageStats::default() };
        let times = input
            .column(self.time_index)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .context("the window's time column is not a TIMESTAMP")?
            .clone();
        let values = Values::of(input, &self.columns);
        let mut changed: Vec<(Vec<Scalar>, WindowState)> = Vec::new();
        for rows in group_by_key(input, &self.group_indices, self.key_groups).keys() {
            stats.keys_with_input += 1;
            let scope = KeyScope::new(self.operator_id, rows.key_group, rows.key.to_vec(), time.processing_time);
            // Complete mode keeps every window and so drops no row as late (as Spark).
            let late = time.late_rows_watermark.filter(|_| self.spec.output_mode != OutputMode::Complete);
            let touched = self.add_rows(&mut txn, &scope, rows.rows, &times, &values, late, &mut stats)?;
            if self.spec.output_mode == OutputMode::Update && !touched.is_empty() {
                let group = key::decode(rows.key).context("a group key does not decode")?;
                changed.extend(touched.into_iter().map(|w| (group.clone(), w)));
            }
        }
        let mut output = match self.spec.output_mode {
            OutputMode::Complete => self.all_windows(&txn)?,
            OutputMode::Append => match time.watermark {
                Some(watermark) => self.evict(&mut txn, watermark, time.processing_time, &mut stats)?,
                None => Vec::new(),
            },
            OutputMode::Update => {
                if let Some(watermark) = time.watermark {
                    self.evict(&mut txn, watermark, time.processing_time, &mut stats)?;
                }
                changed
            }
        };
        // By window, then group (in the keys' encoded order), each key encoded once.
        output.sort_by_cached_key(|(group, window)| (window.start, window.end, key::encode(group)));
        let rows = aggregate::output_rows(&self.output_schema, self.group_indices.len(), &self.functions, &output)?;
        stats.run_ms = started.elapsed().as_millis() as u64;
        Ok(StageOutput { txns: vec![txn], rows: vec![rows], stats })
    }

    fn close(&mut self) -> Result<()> {
        Ok(())
    }
}
