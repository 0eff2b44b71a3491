//! The window stage: Spark's `groupBy(window(time, size[, slide]) | session_window(time,
//! gap), cols).agg(...)` in native Rust.
//!
//! State per group key: the map `windows` from a window's start (CBOR) to its running
//! aggregates (see [`running`](super::running)), their numbers stored by position (see
//! [`window_value`]). Fixed windows are stored packed: the windows of one end in one
//! key group are one RocksDB value (see [`packed`](crate::state::packed)), rewritten when most of them changed, so a batch
//! writes a few large values and closing an end's windows deletes one per key group;
//! when few of them changed, those are written as entries of their own (newer than the
//! packed copy). Sessions, whose ends move, are entries of their own. The change log
//! records each window's change. The open windows are also held
//! in memory ([`OpenWindows`]): a batch reads no window from the store, and the windows
//! the watermark closes are found by their end (no timers). A batch's rows are first
//! aggregated per window, then merged into the open window, so sums add up in the
//! same order however batches are cut.
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

use std::collections::HashMap;
use std::ops::Range;

use anyhow::{Context, Result, bail};
use arrow::array::{Array, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, SchemaRef, TimeUnit};

use super::group_key::GroupKey;
use super::open_windows::{Bucket, OpenWindows, window_key_into};
use super::output_order::{OutputOrder, in_output_order, merge_in_order};
use super::running::{self, Column, PREFETCH_AHEAD, Values, WindowState};
use super::window_value;
use crate::contract::OutputMode;
use crate::operator::grouping::{KeyRows, group_by_key, key_group_ranges_per_core, keys_of_ranges, on_threads};
use crate::operator::stage::{BatchTime, Stage, StageOutput, StageStats};
use crate::pipeline::{AggregateFn, StageSpec, WindowKind, WindowSpec};
use crate::state::{OperatorStateSchema, StateKind, StateStore, StateTxn, VariableDecl, layout, packed};
use crate::util::prefetch;

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
    /// The key-group ranges of the shards a batch runs on in parallel.
    shards: Vec<Range<u16>>,
    /// Each shard's open windows, once loaded.
    open: Option<Vec<OpenWindows>>,
}

/// What every shard reads of one batch.
struct BatchRows {
    times: TimestampMicrosecondArray,
    values: Values,
    /// Rows only in windows that ended at or before it are late.
    late: Option<i64>,
    /// The watermark that closes windows.
    watermark: Option<i64>,
}

impl BatchRows {
    /// Starts loading the times and values of (the first few of) `rows`: a key's rows
    /// are scattered over the batch's columns.
    fn prefetch_rows(&self, rows: &[u32]) {
        for &row in rows.iter().take(4) {
            let row = row as usize;
            if let Some(time) = self.times.values().get(row) {
                prefetch(time);
            }
            self.values.prefetch_row(row);
        }
    }
}

/// How many keys ahead of the one a shard adds it starts loading the rows of.
const KEYS_AHEAD: usize = 4;

/// What one shard did in a batch.
struct ShardOutput {
    txn: StateTxn,
    /// Its closed (append) or changed (update) windows' output rows (none in complete
    /// mode), in [`OutputOrder`].
    rows: RecordBatch,
    /// Each output row's place in that order.
    order: Vec<OutputOrder>,
    stats: StageStats,
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
        let group_indices = running::resolve_groups(&spec.group_by, input)?;
        let columns = running::resolve(&spec.aggregates, input)?;
        let group_fields: Vec<Field> = group_indices.iter().map(|i| input.field(*i).clone()).collect();
        let output_schema = running::output_schema(&group_fields, true, &columns);
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
            // One shard per core: a batch's keys are independent.
            shards: key_group_ranges_per_core(key_groups),
            open: None,
        })
    }

    /// The stage with its batches split over `parts` shards instead of one per core
    /// (for the tests that its output does not depend on the layout).
    #[cfg(test)]
    pub(crate) fn with_shards(mut self, parts: usize) -> Self {
        self.shards = crate::operator::grouping::key_group_ranges(self.key_groups, parts);
        self
    }

    /// What the stage keeps, for the checkpoint's schema record and `eddy state`.
    pub fn state_schema(&self) -> OperatorStateSchema {
        OperatorStateSchema {
            key_columns: self.spec.group_by.clone(),
            key_groups: self.key_groups,
            variables: vec![self.windows.clone()],
            // v4: positional values (v3: named CBOR maps, packed by end; v2: one entry per
            // window; v1: and a timer each).
            module_sha256: format!("builtin:window/v4:{:?}:{:?}", self.spec.windows, self.spec.aggregates),
            window_aggregates: self.functions.iter().map(|function| function.name().to_string()).collect(),
            timers_by_key: true,
            timers_packed: true,
            stage: self.name.clone(),
        }
    }

    /// The open windows: the table of the last batch if it holds what the store has
    /// committed, else loaded from the store. Taken out of the stage while a batch
    /// runs, so a failed batch leaves none behind.
    fn take_open(&mut self, store: &StateStore, now: i64) -> Result<Vec<OpenWindows>> {
        let committed = store.committed_batch()?;
        match self.open.take() {
            Some(shards) if shards.iter().all(|open| open.is_current(committed)) => Ok(shards),
            _ => {
                let sessions = self.is_session();
                let load = |range: &Range<u16>| {
                    OpenWindows::load(store, self.operator_id, range.clone(), now, sessions, &self.functions)
                };
                self.shards.iter().map(load).collect()
            }
        }
    }

    /// One shard's part of a batch: its keys' rows added to its windows, then the
    /// windows the watermark closes, then the changed buckets written back.
    fn run_shard(
        &self,
        store: &StateStore,
        open: &mut OpenWindows,
        keys: &[KeyRows],
        batch: &BatchRows,
    ) -> Result<ShardOutput> {
        let mut txn = store.begin();
        let mut stats = StageStats::default();
        let mut changed: Vec<(GroupKey, WindowState)> = Vec::new();
        let mut scratch = Scratch::default();
        for (at, rows) in keys.iter().enumerate() {
            if let Some(ahead) = keys.get(at + KEYS_AHEAD) {
                batch.prefetch_rows(ahead.rows);
            }
            stats.keys_with_input += 1;
            self.add_rows(open, &mut txn, &mut scratch, rows, batch, &mut stats, &mut changed)?;
        }
        let closed = match batch.watermark {
            Some(watermark) if self.spec.output_mode != OutputMode::Complete => {
                self.close_windows(open, &mut txn, &mut scratch, watermark, &mut stats)
            }
            _ => Vec::new(),
        };
        let output = match self.spec.output_mode {
            OutputMode::Append => closed,
            OutputMode::Update => changed,
            OutputMode::Complete => Vec::new(),
        };
        let changed = open.take_changed();
        if !self.is_session() {
            for bucket in changed {
                self.write_bucket(open, &mut txn, &mut scratch, bucket)?;
            }
        }
        // The shard's output rows are made (and its windows freed) on its own thread.
        let (rows, order) = self.output_rows(output)?;
        Ok(ShardOutput { txn, rows, order, stats })
    }

    /// Output rows of `windows`, in [`OutputOrder`].
    fn output_rows(&self, windows: Vec<(GroupKey, WindowState)>) -> Result<(RecordBatch, Vec<OutputOrder>)> {
        let placed = in_output_order(windows);
        let refs: Vec<(&[u8], &WindowState)> = placed.iter().map(|(place, w)| (place.key(), w)).collect();
        let rows = running::output_rows(&self.output_schema, self.group_indices.len(), true, &self.functions, &refs)?;
        Ok((rows, placed.into_iter().map(|(place, _)| place).collect()))
    }

    fn is_session(&self) -> bool {
        matches!(self.spec.windows, WindowKind::Session { .. })
    }

    /// Stores the windows of `bucket` that changed: the whole bucket as one packed
    /// entry when most of it changed (its windows' entries of their own then go), else
    /// each changed window as an entry of its own; a bucket without windows left is
    /// deleted.
    fn write_bucket(
        &self,
        open: &mut OpenWindows,
        txn: &mut StateTxn,
        scratch: &mut Scratch,
        bucket: Bucket,
    ) -> Result<()> {
        let (end, key_group) = bucket;
        let key = packed::packed_key(self.operator_id, key_group, &layout::sortable_i64(end));
        let Some(windows) = open.bucket_mut(bucket) else {
            // Its windows all closed (each logged its delete).
            txn.delete_stored(&key);
            return Ok(());
        };
        let (total, changed) = (windows.slots().len(), windows.changed());
        if changed * 2 >= total {
            let every_window_changed = changed == total;
            let mut value = Vec::with_capacity(scratch.packed_size_hint * total);
            let slots = windows.slots_mut();
            for at in 0..slots.len() {
                if let Some(ahead) = slots.get(at + PREFETCH_AHEAD) {
                    prefetch(&ahead.window.aggregates[..]);
                }
                let slot = &mut slots[at];
                scratch.encode(self, key_group, &slot.key, &slot.window);
                packed::pack(&mut value, &scratch.key, &scratch.value);
                if !every_window_changed && slot.changed {
                    txn.log_change(&scratch.key, Some(&scratch.value));
                }
                if slot.single {
                    txn.delete_stored(&scratch.key);
                    slot.single = false;
                }
            }
            scratch.packed_size_hint = value.len() / total + 1;
            if every_window_changed {
                // The packed value is the records of all its windows' changes.
                txn.put_packed(&key, &value);
            } else {
                txn.put_stored(&key, &value);
            }
        } else {
            for slot in windows.slots_mut().iter_mut().filter(|slot| slot.changed) {
                scratch.encode(self, key_group, &slot.key, &slot.window);
                txn.log_change(&scratch.key, Some(&scratch.value));
                txn.put_stored(&scratch.key, &scratch.value);
                slot.single = true;
            }
        }
        windows.written();
        Ok(())
    }

    /// The starts of the fixed windows holding `time` (none for a time within a window
    /// of `i64::MIN`, which has no start).
    fn starts(&self, time: i64) -> impl Iterator<Item = i64> + use<> {
        let (last, step, count) = match self.spec.windows {
            WindowKind::Tumbling { size_us } => (time.checked_sub(time.rem_euclid(size_us)), size_us, 1),
            WindowKind::Sliding { size_us, slide_us } => {
                (time.checked_sub(time.rem_euclid(slide_us)), slide_us, size_us / slide_us)
            }
            WindowKind::Session { .. } => (None, 1, 0),
        };
        (0..count).filter_map(move |k| last?.checked_sub(k * step))
    }

    fn size_us(&self) -> i64 {
        match self.spec.windows {
            WindowKind::Tumbling { size_us } | WindowKind::Sliding { size_us, .. } => size_us,
            WindowKind::Session { gap_us } => gap_us,
        }
    }

    /// One key's rows aggregated per fixed window, leaving out the windows that ended
    /// at or before `late`. Each late window counts once as dropped, however many rows
    /// fell in it: Spark drops late (group, window) rows after aggregating the batch's
    /// rows per window (`StateStoreSaveExec` filters its input by the window's end).
    fn partials(&self, rows: &[u32], batch: &BatchRows, stats: &mut StageStats) -> Vec<WindowState> {
        let (times, values, late) = (&batch.times, &batch.values, batch.late);
        let size = self.size_us();
        let mut partials: Vec<WindowState> = Vec::new();
        let mut late_starts: Vec<i64> = Vec::new();
        // Past a few windows a key's windows are found by start through an index.
        let mut index: HashMap<i64, usize> = HashMap::new();
        for &row in rows {
            let row = row as usize;
            if times.is_null(row) {
                continue;
            }
            for start in self.starts(times.value(row)) {
                if late.is_some_and(|watermark| start.saturating_add(size) <= watermark) {
                    late_starts.push(start);
                    continue;
                }
                let found = match partials.len() {
                    0..=8 => partials.iter().position(|w| w.start == start),
                    _ => {
                        if index.is_empty() {
                            index.extend(partials.iter().enumerate().map(|(i, w)| (w.start, i)));
                        }
                        index.get(&start).copied()
                    }
                };
                let at = found.unwrap_or_else(|| {
                    partials.push(WindowState::new(start, start.saturating_add(size), self.columns.len()));
                    if !index.is_empty() {
                        index.insert(start, partials.len() - 1);
                    }
                    partials.len() - 1
                });
                values.add_row(row, &mut partials[at].aggregates);
            }
        }
        stats.rows_dropped_by_watermark += distinct(&mut late_starts);
        partials
    }

    /// One key's sessions after its rows: a row opens a session `gap` long, merged with
    /// every session it overlaps (a late row may bridge two); `None` when none of its
    /// rows counts. Rows whose session would have ended at or before `late` are dropped,
    /// counted once per distinct (key, row's session) as Spark counts them after
    /// aggregating a batch's rows per session before the late filter
    /// (`SessionWindowStateStoreRestoreExec`; one input partition).
    fn sessions(
        &self,
        before: &[WindowState],
        rows: &[u32],
        batch: &BatchRows,
        stats: &mut StageStats,
    ) -> Option<Vec<WindowState>> {
        let (times, values, late) = (&batch.times, &batch.values, batch.late);
        let gap = self.size_us();
        let mut sessions = before.to_vec();
        let mut late_times: Vec<i64> = Vec::new();
        let mut counted = false;
        for &row in rows {
            let row = row as usize;
            if times.is_null(row) {
                continue;
            }
            let time = times.value(row);
            if late.is_some_and(|watermark| time.saturating_add(gap) <= watermark) {
                late_times.push(time);
                continue;
            }
            counted = true;
            let mut session = WindowState::new(time, time.saturating_add(gap), self.columns.len());
            values.add_row(row, &mut session.aggregates);
            let (overlapping, rest): (Vec<WindowState>, Vec<WindowState>) =
                sessions.into_iter().partition(|s| s.start <= session.end && session.start <= s.end);
            for other in &overlapping {
                session.merge(other);
            }
            sessions = rest;
            sessions.push(session);
        }
        stats.rows_dropped_by_watermark += distinct(&mut late_times);
        counted.then_some(sessions)
    }

    /// Adds one key's rows to its windows (in `open`, and their changes to the change
    /// log of `txn`); in update mode, pushes the windows it changed to `changed`.
    #[allow(clippy::too_many_arguments)]
    fn add_rows(
        &self,
        open: &mut OpenWindows,
        txn: &mut StateTxn,
        scratch: &mut Scratch,
        rows: &KeyRows,
        batch: &BatchRows,
        stats: &mut StageStats,
        changed: &mut Vec<(GroupKey, WindowState)>,
    ) -> Result<()> {
        let (key_group, key, rows) = (rows.key_group, rows.key, rows.rows);
        let group_key = GroupKey::new(key);
        let update = self.spec.output_mode == OutputMode::Update;
        if let WindowKind::Session { .. } = self.spec.windows {
            let before = open.sessions_of(key, key_group);
            let Some(sessions) = self.sessions(&before, rows, batch, stats) else { return Ok(()) };
            // Counted as Spark's `SessionWindowStateStoreSaveExec` counts (its state
            // manager's `updateSessions`): a key with rows puts every session it has
            // after the merge (updated) and removes each stored one whose start is no
            // session's start any more (removed).
            stats.state_rows_updated += sessions.len() as u64;
            for old in &before {
                if !sessions.iter().any(|s| s.start == old.start) {
                    scratch.encode_key(self, key_group, key, old.start);
                    txn.log_change(&scratch.key, None);
                    txn.delete_stored(&scratch.key);
                    stats.state_rows_removed += 1;
                }
            }
            // Only sessions that changed are written back.
            for session in &sessions {
                if !before.iter().any(|b| same_session(b, session)) {
                    scratch.encode(self, key_group, key, session);
                    txn.log_change(&scratch.key, Some(&scratch.value));
                    txn.put_stored(&scratch.key, &scratch.value);
                    if update {
                        changed.push((group_key.clone(), session.clone()));
                    }
                }
            }
            open.replace_sessions(&group_key, key_group, sessions);
        } else {
            for partial in self.partials(rows, batch, stats) {
                // Its change-log record is made when its bucket is written back.
                let slot = open.add(&group_key, key_group, partial);
                stats.state_rows_updated += 1;
                if update {
                    changed.push((slot.key.clone(), slot.window.clone()));
                }
            }
        }
        Ok(())
    }

    /// The windows whose end the watermark reached, removed from state.
    fn close_windows(
        &self,
        open: &mut OpenWindows,
        txn: &mut StateTxn,
        scratch: &mut Scratch,
        watermark: i64,
        stats: &mut StageStats,
    ) -> Vec<(GroupKey, WindowState)> {
        let mut closed = Vec::new();
        for ((_, key_group), slots) in open.close_until(watermark) {
            closed.reserve(slots.len());
            for slot in slots {
                scratch.encode_key(self, key_group, &slot.key, slot.window.start);
                txn.log_change(&scratch.key, None);
                // Its packed copy goes with its bucket; an entry of its own is deleted here.
                if slot.single {
                    txn.delete_stored(&scratch.key);
                }
                stats.entries_evicted += 1;
                stats.state_rows_removed += 1;
                closed.push((slot.key, slot.window));
            }
        }
        closed
    }
}

/// A window's state key and stored value, encoded into buffers reused window after
/// window.
#[derive(Default)]
struct Scratch {
    key: Vec<u8>,
    value: Vec<u8>,
    /// Bytes per window of the last packed value written.
    packed_size_hint: usize,
}

impl Scratch {
    fn encode_key(&mut self, stage: &WindowStage, key_group: u16, key: &[u8], start: i64) {
        self.key.clear();
        window_key_into(&mut self.key, stage.operator_id, key_group, key, &stage.windows.name, start);
    }

    /// Encodes `window` of `key`: its key and its value (what the aggregates need, see
    /// [`window_value`], stamped as never expiring).
    fn encode(&mut self, stage: &WindowStage, key_group: u16, key: &[u8], window: &WindowState) {
        self.encode_key(stage, key_group, key, window.start);
        self.value.clear();
        self.value.extend_from_slice(&layout::NEVER.to_be_bytes());
        window_value::encode(window, &stage.functions, &mut self.value);
    }
}

/// How many distinct values `values` holds (sorted and deduplicated in place).
fn distinct(values: &mut Vec<i64>) -> u64 {
    values.sort_unstable();
    values.dedup();
    values.len() as u64
}

/// Whether two sessions are the same (by value: a NaN aggregate equals itself here).
fn same_session(a: &WindowState, b: &WindowState) -> bool {
    a == b || (a.start == b.start && a.end == b.end && format!("{:?}", a.aggregates) == format!("{:?}", b.aggregates))
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

    /// Spark's `StateStoreSaveExec` and `SessionWindowStateStoreSaveExec`: append and
    /// update mode close windows by the watermark; complete mode neither drops nor
    /// evicts, so a watermark that moved alone runs no batch.
    fn runs_when_the_watermark_moves(&self) -> bool {
        self.spec.output_mode != OutputMode::Complete
    }

    fn timers_due(&mut self, store: &StateStore, time: BatchTime) -> Result<bool> {
        match (self.spec.output_mode, time.watermark) {
            (OutputMode::Complete, _) | (_, None) => Ok(false),
            (_, Some(watermark)) => {
                let shards = self.take_open(store, time.processing_time)?;
                let due = shards.iter().any(|open| open.any_ending_by(watermark));
                self.open = Some(shards);
                Ok(due)
            }
        }
    }

    fn run(&mut self, store: &StateStore, input: &RecordBatch, time: BatchTime) -> Result<StageOutput> {
        let started = std::time::Instant::now();
        let mut shards = self.take_open(store, time.processing_time)?;
        let batch = BatchRows {
            times: input
                .column(self.time_index)
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .context("the window's time column is not a TIMESTAMP")?
                .clone(),
            values: Values::of(input, &self.columns),
            // Complete mode keeps every window and so drops no row as late (as Spark).
            late: time.late_rows_watermark.filter(|_| self.spec.output_mode != OutputMode::Complete),
            watermark: time.watermark,
        };
        let grouped = group_by_key(input, &self.group_indices, self.key_groups);
        let keys = grouped.keys();
        let parts = keys_of_ranges(&keys, &self.shards);
        let this = &*self;
        let ran = on_threads(shards.iter_mut().zip(parts), "a window shard", |(open, keys)| {
            this.run_shard(store, open, keys, &batch)
        });
        let mut stats = StageStats { name: self.name.clone(), ..StageStats::default() };
        let mut txns = Vec::with_capacity(ran.len());
        let mut outputs: Vec<(RecordBatch, Vec<OutputOrder>)> = Vec::with_capacity(ran.len());
        for shard in ran {
            let shard = shard?;
            txns.push(shard.txn);
            outputs.push((shard.rows, shard.order));
            for (total, part) in [
                (&mut stats.keys_with_input, shard.stats.keys_with_input),
                (&mut stats.rows_dropped_by_watermark, shard.stats.rows_dropped_by_watermark),
                (&mut stats.state_rows_updated, shard.stats.state_rows_updated),
                (&mut stats.state_rows_removed, shard.stats.state_rows_removed),
                (&mut stats.entries_evicted, shard.stats.entries_evicted),
            ] {
                *total += part;
            }
        }
        if self.spec.output_mode == OutputMode::Complete {
            let windows: usize = shards.iter().map(OpenWindows::len).sum();
            if windows as u64 > self.spec.max_complete_rows {
                bail!(
                    "complete mode would output {windows} windows, more than max-complete-rows ({}); raise it, or use append or update mode",
                    self.spec.max_complete_rows
                );
            }
            let all = shards.iter().flat_map(|open| open.all().map(|slot| (slot.key.clone(), slot.window.clone())));
            outputs = vec![self.output_rows(all.collect())?];
        }
        let rows = merge_in_order(&self.output_schema, outputs)?;
        for open in &mut shards {
            open.advance_to(time.batch_id);
        }
        stats.state_rows_total = Some(shards.iter().map(|open| open.len() as u64).sum());
        self.open = Some(shards);
        stats.run_ms = started.elapsed().as_millis() as u64;
        Ok(StageOutput { txns, rows: vec![rows], stats })
    }

    fn close(&mut self) -> Result<()> {
        Ok(())
    }
}
