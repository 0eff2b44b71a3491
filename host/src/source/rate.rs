//! The rate source: generated rows `timestamp, value`, `rows_per_second` of them per
//! second of processing time, for tests and demos.
//!
//! `value` counts from 0 and `timestamp = start + value * 1_000_000 / rows_per_second`
//! (integer microseconds), so the rows are a function of the start alone. At
//! processing time `now`, the values below `(now - start) * rows_per_second / 1e6`
//! exist; each batch takes those not committed yet — at most max-rows-per-trigger
//! of them, so a source far behind (after downtime) catches up in bounded batches.
//!
//! Progress, in the committed store (`Cf::Meta`):
//! `source/<index>/rate` → `{"startUs": start, "nextValue": first value not yet committed}`.

use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use arrow::array::{Int64Array, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Source, SourceBatch, meta_key};
use crate::contract::rows::arrow_type;
use crate::pipeline::{SourceKind, SourceSpec};
use crate::state::{Cf, StateStore};

/// The rate source's schema: `timestamp TIMESTAMP NOT NULL, value BIGINT NOT NULL`.
pub fn rate_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("timestamp", arrow_type(crate::contract::DataType::Timestamp), false),
        Field::new("value", DataType::Int64, false),
    ]))
}

/// Generated rows.
pub(super) struct RateSource {
    name: String,
    schema: SchemaRef,
    index: usize,
    rows_per_second: u64,
    /// The most rows one batch takes (`None`: all that are due).
    max_rows_per_trigger: Option<u64>,
    /// The start from the spec.
    spec_start_us: Option<i64>,
    /// Without a spec or committed start: the processing time this source was first
    /// asked for rows, until a batch commits it.
    first_call_us: Option<i64>,
    /// The value the available-now bound stops before.
    bound: Option<i64>,
}

/// What the store holds for the source.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Progress {
    start_us: i64,
    next_value: i64,
}

impl RateSource {
    /// The rate source of `spec` (whose kind must be `Rate`), number `index`.
    pub fn open(spec: &SourceSpec, index: usize) -> Result<Self> {
        let SourceKind::Rate { rows_per_second, start_us, max_rows_per_trigger } = &spec.kind else {
            bail!("source '{}' is not a rate source", spec.name);
        };
        if *rows_per_second == 0 {
            bail!("source '{}': rows-per-second must be at least 1", spec.name);
        }
        let expected = rate_schema();
        let same = |a: &Field, b: &Field| a.name() == b.name() && a.data_type() == b.data_type();
        let matches = spec.schema.fields().len() == expected.fields().len()
            && spec.schema.fields().iter().zip(expected.fields()).all(|(a, b)| same(a, b));
        if !matches {
            bail!("source '{}': a rate source's schema is `timestamp TIMESTAMP, value BIGINT`", spec.name);
        }
        Ok(Self {
            name: spec.name.clone(),
            schema: spec.schema.clone(),
            index,
            rows_per_second: *rows_per_second,
            max_rows_per_trigger: *max_rows_per_trigger,
            spec_start_us: *start_us,
            first_call_us: None,
            bound: None,
        })
    }

    fn key(&self) -> Vec<u8> {
        meta_key(self.index, "rate")
    }

    fn committed(&self, store: &StateStore) -> Result<Option<Progress>> {
        let Some(raw) = store.read(Cf::Meta, &self.key())? else {
            return Ok(None);
        };
        let progress = serde_json::from_slice(&raw).with_context(|| {
            format!("source '{}': the committed rate progress in the state store is corrupt", self.name)
        })?;
        Ok(Some(progress))
    }

    /// The start: committed, else the spec's, else the first call's time.
    fn start(&mut self, committed: Option<Progress>, now_us: i64) -> i64 {
        match (committed, self.spec_start_us) {
            (Some(progress), _) => progress.start_us,
            (None, Some(start)) => start,
            (None, None) => *self.first_call_us.get_or_insert(now_us),
        }
    }

    /// The values below this one exist at `now_us`.
    fn available(&self, start_us: i64, now_us: i64) -> i64 {
        let elapsed = (i128::from(now_us) - i128::from(start_us)).max(0);
        let values = elapsed * i128::from(self.rows_per_second) / 1_000_000;
        i64::try_from(values).unwrap_or(i64::MAX)
    }

    fn timestamp(&self, start_us: i64, value: i64) -> i64 {
        let offset = i128::from(value) * 1_000_000 / i128::from(self.rows_per_second);
        i64::try_from(i128::from(start_us) + offset).unwrap_or(i64::MAX)
    }

    /// The batch of values `next..end`.
    fn build(&self, start_us: i64, next: i64, end: i64) -> Result<SourceBatch> {
        let values: Vec<i64> = (next..end).collect();
        let timestamps: Vec<i64> = values.iter().map(|value| self.timestamp(start_us, *value)).collect();
        let timezone = match self.schema.field(0).data_type() {
            DataType::Timestamp(_, timezone) => timezone.clone(),
            _ => None,
        };
        let rows = RecordBatch::try_new(
            self.schema.clone(),
            vec![
                Arc::new(TimestampMicrosecondArray::from(timestamps).with_timezone_opt(timezone)),
                Arc::new(Int64Array::from(values)),
            ],
        )?;
        let progress = Progress { start_us, next_value: end };
        Ok(SourceBatch {
            rows,
            bytes: 0,
            bad_records: 0,
            start_offset: json!({ "value": next }),
            end_offset: json!({ "value": end, "startUs": start_us }),
            latest_offset: Value::Null,
            metrics: Default::default(),
            commit: vec![(self.key(), serde_json::to_vec(&progress)?)],
        })
    }
}

impl Source for RateSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        format!("RateSource[rowsPerSecond={}]", self.rows_per_second)
    }

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn bound_to_available_now(&mut self, store: &StateStore, now_us: i64) -> Result<()> {
        let committed = self.committed(store)?;
        let start = self.start(committed, now_us);
        self.bound = Some(self.available(start, now_us));
        Ok(())
    }

    fn lift_batch_limits(&mut self) {
        self.max_rows_per_trigger = None;
    }

    fn next_batch(&mut self, store: &StateStore, _batch_id: u64, now_us: i64) -> Result<Option<SourceBatch>> {
        let committed = self.committed(store)?;
        let start = self.start(committed, now_us);
        let next = committed.map_or(0, |progress| progress.next_value);
        let mut end = self.available(start, now_us);
        if let Some(bound) = self.bound {
            end = end.min(bound);
        }
        if let Some(max) = self.max_rows_per_trigger {
            end = end.min(next.saturating_add(i64::try_from(max).unwrap_or(i64::MAX)));
        }
        if end <= next {
            return Ok(None);
        }
        self.build(start, next, end).map(Some)
    }

    fn replan_batch(
        &mut self,
        store: &StateStore,
        batch_id: u64,
        _now_us: i64,
        end_offset: &Value,
    ) -> Result<Option<SourceBatch>> {
        if end_offset.is_null() {
            return Ok(None);
        }
        let field = |name: &str| {
            end_offset.get(name).and_then(Value::as_i64).ok_or_else(|| {
                anyhow!("source '{}': batch {batch_id}'s recorded end offset {end_offset} lacks '{name}'", self.name)
            })
        };
        let (end, start) = (field("value")?, field("startUs")?);
        let committed = self.committed(store)?;
        if let Some(progress) = committed
            && progress.start_us != start
        {
            bail!(
                "source '{}': batch {batch_id} was planned from start {start} but the store holds start {}",
                self.name,
                progress.start_us
            );
        }
        let next = committed.map_or(0, |progress| progress.next_value);
        if end <= next {
            bail!("source '{}': values up to {end} of batch {batch_id} are already committed", self.name);
        }
        self.first_call_us.get_or_insert(start);
        self.build(start, next, end).map(Some)
    }

    fn caught_up(&self, store: &StateStore) -> Result<bool> {
        let Some(bound) = self.bound else {
            return Ok(false);
        };
        let next = self.committed(store)?.map_or(0, |progress| progress.next_value);
        Ok(next >= bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rows_per_second: u64, start_us: Option<i64>) -> SourceSpec {
        capped(rows_per_second, start_us, None)
    }

    fn capped(rows_per_second: u64, start_us: Option<i64>, max_rows_per_trigger: Option<u64>) -> SourceSpec {
        SourceSpec {
            name: "rate".into(),
            kind: SourceKind::Rate { rows_per_second, start_us, max_rows_per_trigger },
            schema: rate_schema(),
            watermark: None,
            on_bad_record: crate::pipeline::BadRecordPolicy::Fail,
        }
    }

    fn column(batch: &SourceBatch, index: usize) -> Vec<i64> {
        let array = batch.rows.column(index);
        match index {
            0 => array.as_any().downcast_ref::<TimestampMicrosecondArray>().expect("ts").values().to_vec(),
            _ => array.as_any().downcast_ref::<Int64Array>().expect("ints").values().to_vec(),
        }
    }

    use crate::source::tests::commit;

    #[test]
    fn rows_are_deterministic_and_continue_after_a_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = StateStore::open(dir.path()).expect("store");
        let mut source = RateSource::open(&spec(3, Some(1_000_000)), 0).expect("opens");
        assert!(source.next_batch(&store, 0, 1_000_000).expect("plans").is_none());
        let first = source.next_batch(&store, 0, 2_000_000).expect("plans").expect("rows");
        assert_eq!(column(&first, 1), [0, 1, 2]);
        assert_eq!(column(&first, 0), [1_000_000, 1_333_333, 1_666_666]);
        assert_eq!(first.start_offset, json!({"value": 0}));
        assert_eq!(first.end_offset, json!({"value": 3, "startUs": 1_000_000}));
        // Not committed: the same batch again.
        let again = source.next_batch(&store, 0, 2_000_000).expect("plans").expect("rows");
        assert_eq!((column(&again, 0), column(&again, 1)), (column(&first, 0), column(&first, 1)));
        commit(&store, &first, 0);
        // A restarted source continues where the commit left off.
        let mut restarted = RateSource::open(&spec(3, Some(1_000_000)), 0).expect("opens");
        assert!(restarted.next_batch(&store, 1, 2_100_000).expect("plans").is_none());
        let second = restarted.next_batch(&store, 1, 2_700_000).expect("plans").expect("rows");
        assert_eq!(column(&second, 1), [3, 4]);
        assert_eq!(column(&second, 0), [2_000_000, 2_333_333]);
        assert_eq!(second.start_offset, json!({"value": 3}));
    }

    #[test]
    fn without_a_start_the_first_call_starts_it_and_the_commit_keeps_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = StateStore::open(dir.path()).expect("store");
        let mut source = RateSource::open(&spec(2, None), 0).expect("opens");
        assert!(source.next_batch(&store, 0, 10_000_000).expect("plans").is_none());
        let first = source.next_batch(&store, 0, 11_000_000).expect("plans").expect("rows");
        assert_eq!(column(&first, 0), [10_000_000, 10_500_000]);
        commit(&store, &first, 0);
        let mut restarted = RateSource::open(&spec(2, None), 0).expect("opens");
        let second = restarted.next_batch(&store, 1, 12_000_000).expect("plans").expect("rows");
        assert_eq!(column(&second, 1), [2, 3]);
        assert_eq!(column(&second, 0), [11_000_000, 11_500_000]);
        // A replay of batch 1 from its recorded end offset, at a later time.
        let mut replayed = RateSource::open(&spec(2, None), 0).expect("opens");
        let again = replayed.replan_batch(&store, 1, 99_000_000, &second.end_offset).expect("replans").expect("rows");
        assert_eq!(column(&again, 1), [2, 3]);
        assert!(replayed.replan_batch(&store, 1, 0, &Value::Null).expect("replans").is_none());
    }

    #[test]
    fn available_now_bounds_the_batches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = StateStore::open(dir.path()).expect("store");
        let mut source = RateSource::open(&spec(1, Some(0)), 0).expect("opens");
        assert!(!source.caught_up(&store).expect("reads"));
        source.bound_to_available_now(&store, 2_500_000).expect("binds");
        assert!(!source.caught_up(&store).expect("reads"));
        let batch = source.next_batch(&store, 0, 9_000_000).expect("plans").expect("rows");
        assert_eq!(column(&batch, 1), [0, 1]);
        commit(&store, &batch, 0);
        assert!(source.caught_up(&store).expect("reads"));
        assert!(source.next_batch(&store, 1, 9_000_000).expect("plans").is_none());
    }

    #[test]
    fn catching_up_takes_at_most_max_rows_per_trigger_per_batch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = StateStore::open(dir.path()).expect("store");
        // Ten seconds of downtime at 3 rows per second: 30 rows due, 8 per batch.
        let mut source = RateSource::open(&capped(3, Some(0), Some(8)), 0).expect("opens");
        let mut batches = Vec::new();
        let mut batch_id = 0;
        while let Some(batch) = source.next_batch(&store, batch_id, 10_000_000).expect("plans") {
            batches.push(column(&batch, 1));
            // A replay from the recorded end offset reads the same bounded batch.
            let again = source.replan_batch(&store, batch_id, 99_000_000, &batch.end_offset).expect("replans");
            assert_eq!(column(&again.expect("rows"), 1), column(&batch, 1));
            commit(&store, &batch, batch_id);
            batch_id += 1;
        }
        let expected: Vec<Vec<i64>> = vec![(0..8).collect(), (8..16).collect(), (16..24).collect(), (24..30).collect()];
        assert_eq!(batches, expected);
        // The once trigger lifts the cap: everything due in one batch.
        let mut once = RateSource::open(&capped(3, Some(0), Some(8)), 0).expect("opens");
        once.lift_batch_limits();
        assert_eq!(column(&once.next_batch(&store, batch_id, 20_000_000).expect("plans").expect("rows"), 1).len(), 30);
    }
}
