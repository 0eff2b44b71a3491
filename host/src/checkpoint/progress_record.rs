//! The progress record of one batch, with the field names of Spark's
//! `StreamingQueryProgress` (camelCase JSON) so that Spark users can read it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::util::format_micros_iso;

/// What one batch did: Spark's `StreamingQueryProgress`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryProgress {
    /// The query's id, kept in the checkpoint: the same across restarts.
    pub id: String,
    /// This run's id: new at every start of the query.
    pub run_id: String,
    /// The query's name.
    pub name: String,
    /// When the batch started (its batch timestamp), ISO-8601 UTC with milliseconds.
    pub timestamp: String,
    /// The batch id.
    pub batch_id: u64,
    /// How long the whole batch took, in milliseconds.
    #[serde(default)]
    pub batch_duration: u64,
    /// Rows read by every source in this batch.
    pub num_input_rows: u64,
    /// Rows per second arriving: input rows over the time since the previous batch began.
    #[serde(with = "rate")]
    pub input_rows_per_second: f64,
    /// Rows per second processed: input rows over this batch's duration.
    #[serde(with = "rate")]
    pub processed_rows_per_second: f64,
    /// Milliseconds spent per phase: `triggerExecution`, `getBatch`, `addBatch`,
    /// `walCommit`, `queryPlanning`, `commitOffsets`, …
    #[serde(default)]
    pub duration_ms: BTreeMap<String, u64>,
    /// The batch's event times and the watermark it ran with; omitted when empty.
    #[serde(default, skip_serializing_if = "EventTimeProgress::is_empty")]
    pub event_time: EventTimeProgress,
    /// One entry per stateful operator.
    #[serde(default)]
    pub state_operators: Vec<StateOperatorProgress>,
    /// One entry per source.
    #[serde(default)]
    pub sources: Vec<SourceProgress>,
    /// The sink.
    #[serde(default)]
    pub sink: SinkProgress,
    /// The batch's hottest keys (eddy's addition); omitted when there are none.
    #[serde(default, skip_serializing_if = "TopKeys::is_empty")]
    pub top_keys: TopKeys,
}

/// One hot key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HotKey {
    /// The key as a user writes it, e.g. `["alice"]`.
    pub key: String,
    /// Its input rows in the batch.
    pub rows: u64,
    /// Microseconds its `handle-input-rows` call took.
    pub guest_micros: u64,
}

/// A batch's hottest keys, by rows and by guest time, hottest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopKeys {
    /// The keys with the most input rows.
    pub by_rows: Vec<HotKey>,
    /// The keys whose calls took longest.
    pub by_guest_time: Vec<HotKey>,
}

impl TopKeys {
    /// Whether no key was seen.
    pub fn is_empty(&self) -> bool {
        self.by_rows.is_empty() && self.by_guest_time.is_empty()
    }
}

/// A batch's event times (Spark's `eventTime` map), each ISO-8601 UTC with
/// milliseconds; a key without a value is left out of the JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventTimeProgress {
    /// The earliest event time among the batch's rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<String>,
    /// The latest event time among the batch's rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<String>,
    /// The mean event time of the batch's rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg: Option<String>,
    /// The watermark the batch ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<String>,
}

impl EventTimeProgress {
    /// Event-time statistics from microseconds since the epoch.
    pub fn from_micros(min: Option<i64>, max: Option<i64>, avg: Option<i64>, watermark: Option<i64>) -> Self {
        Self {
            min: min.map(format_micros_iso),
            max: max.map(format_micros_iso),
            avg: avg.map(format_micros_iso),
            watermark: watermark.map(format_micros_iso),
        }
    }

    /// Whether no value is known (then the JSON leaves `eventTime` out, like Spark).
    pub fn is_empty(&self) -> bool {
        self.min.is_none() && self.max.is_none() && self.avg.is_none() && self.watermark.is_none()
    }
}

/// What a stateful operator did in the batch: Spark's `StateOperatorProgress`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateOperatorProgress {
    /// E.g. `transformWithState`.
    pub operator_name: String,
    /// State rows held after the batch.
    pub num_rows_total: u64,
    /// State rows written in the batch.
    pub num_rows_updated: u64,
    /// State rows removed in the batch (cleared or expired).
    pub num_rows_removed: u64,
    /// Input rows dropped before the operator as late (at or before the previous batch's watermark).
    pub num_rows_dropped_by_watermark: u64,
    /// The state store's memory use, in bytes.
    pub memory_used_bytes: u64,
    /// How long committing the state took, in milliseconds.
    pub commit_time_ms: u64,
    /// Operator-specific counters, e.g. `numTimersFired`.
    #[serde(default)]
    pub custom_metrics: BTreeMap<String, i64>,
}

/// What a source read in the batch: Spark's `SourceProgress`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceProgress {
    /// E.g. `FileSource[/path]`.
    pub description: String,
    /// Where the batch started reading (`null` for the first batch).
    #[serde(default)]
    pub start_offset: serde_json::Value,
    /// Where the batch stopped reading.
    #[serde(default)]
    pub end_offset: serde_json::Value,
    /// The newest offset available when the batch was planned, when known.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub latest_offset: serde_json::Value,
    /// Rows this source read in the batch.
    pub num_input_rows: u64,
    /// This source's arrival rate (see [`QueryProgress::input_rows_per_second`]).
    #[serde(with = "rate")]
    pub input_rows_per_second: f64,
    /// This source's processing rate (see [`QueryProgress::processed_rows_per_second`]).
    #[serde(with = "rate")]
    pub processed_rows_per_second: f64,
    /// Source-specific counters as text, e.g. `numBadRecords`; omitted when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, String>,
}

/// What the sink wrote in the batch: Spark's `SinkProgress`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SinkProgress {
    /// E.g. `FileSink[/out]` or `ConsoleSink` (see `Sink::description`).
    pub description: String,
    /// Rows written in the batch.
    pub num_output_rows: u64,
    /// Sink-specific counters as text; omitted when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, String>,
}

/// `rows` per second over `millis` milliseconds; 0 when no time passed (as Spark does).
pub fn rows_per_second(rows: u64, millis: u64) -> f64 {
    if millis == 0 { 0.0 } else { rows as f64 * 1000.0 / millis as f64 }
}

/// Rates are finite numbers in the JSON: NaN or infinity is written as 0, and a `null`
/// reads back as 0.
mod rate {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(if value.is_finite() { *value } else { 0.0 })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(0.0))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    pub(crate) fn sample(batch_id: u64) -> QueryProgress {
        QueryProgress {
            id: "8c1f7a52-5d0e-4f6b-9a3e-2b7c4d1e0f9a".into(),
            run_id: "0d9e8c7b-6a5f-4e3d-8c2b-1a0f9e8d7c6b".into(),
            name: "freezer-stats".into(),
            timestamp: format_micros_iso(1_795_939_200_000_000),
            batch_id,
            batch_duration: 50,
            num_input_rows: 120,
            input_rows_per_second: 10.5,
            processed_rows_per_second: 2400.0,
            duration_ms: [("triggerExecution", 50), ("getBatch", 3), ("addBatch", 40), ("walCommit", 2)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            event_time: EventTimeProgress::from_micros(
                Some(1_795_939_200_000_000),
                None,
                None,
                Some(1_795_939_100_000_000),
            ),
            state_operators: vec![StateOperatorProgress {
                operator_name: "transformWithState".into(),
                num_rows_total: 10,
                num_rows_updated: 4,
                num_rows_removed: 1,
                num_rows_dropped_by_watermark: 2,
                memory_used_bytes: 1234,
                commit_time_ms: 2,
                custom_metrics: [("numTimersFired".to_string(), 1)].into(),
            }],
            sources: vec![SourceProgress {
                description: "FileSource[/in]".into(),
                start_offset: serde_json::Value::Null,
                end_offset: json!({"files": 3}),
                latest_offset: serde_json::Value::Null,
                num_input_rows: 120,
                input_rows_per_second: 10.5,
                processed_rows_per_second: 2400.0,
                metrics: [("numBadRecords".to_string(), "0".to_string())].into(),
            }],
            sink: SinkProgress { description: "FileSink[/out]".into(), num_output_rows: 12, metrics: BTreeMap::new() },
            top_keys: TopKeys::default(),
        }
    }

    #[test]
    fn serializes_with_sparks_field_names() -> anyhow::Result<()> {
        let value = serde_json::to_value(sample(3))?;
        assert_eq!(
            value,
            json!({
                "id": "8c1f7a52-5d0e-4f6b-9a3e-2b7c4d1e0f9a", "runId": "0d9e8c7b-6a5f-4e3d-8c2b-1a0f9e8d7c6b",
                "name": "freezer-stats", "timestamp": "2026-11-29T08:00:00.000Z", "batchId": 3, "batchDuration": 50,
                "numInputRows": 120, "inputRowsPerSecond": 10.5, "processedRowsPerSecond": 2400.0,
                "durationMs": {"triggerExecution": 50, "getBatch": 3, "addBatch": 40, "walCommit": 2},
                "eventTime": {"min": "2026-11-29T08:00:00.000Z", "watermark": "2026-11-29T07:58:20.000Z"},
                "stateOperators": [{"operatorName": "transformWithState", "numRowsTotal": 10, "numRowsUpdated": 4,
                    "numRowsRemoved": 1, "numRowsDroppedByWatermark": 2, "memoryUsedBytes": 1234, "commitTimeMs": 2,
                    "customMetrics": {"numTimersFired": 1}}],
                "sources": [{"description": "FileSource[/in]", "startOffset": null, "endOffset": {"files": 3},
                    "numInputRows": 120, "inputRowsPerSecond": 10.5, "processedRowsPerSecond": 2400.0,
                    "metrics": {"numBadRecords": "0"}}],
                "sink": {"description": "FileSink[/out]", "numOutputRows": 12}
            })
        );
        Ok(())
    }

    #[test]
    fn round_trips_and_leaves_out_an_empty_event_time() -> anyhow::Result<()> {
        let record = sample(1);
        assert_eq!(serde_json::from_str::<QueryProgress>(&serde_json::to_string_pretty(&record)?)?, record);
        let mut bare = sample(2);
        bare.event_time = EventTimeProgress::default();
        let text = serde_json::to_string(&bare)?;
        assert!(!text.contains("eventTime"), "{text}");
        assert_eq!(serde_json::from_str::<QueryProgress>(&text)?, bare);
        Ok(())
    }

    #[test]
    fn rates_are_always_finite_numbers() -> anyhow::Result<()> {
        assert_eq!(rows_per_second(120, 0), 0.0);
        assert_eq!(rows_per_second(120, 50), 2400.0);
        let mut record = sample(0);
        record.input_rows_per_second = f64::NAN;
        record.processed_rows_per_second = f64::INFINITY;
        let value = serde_json::to_value(&record)?;
        assert_eq!(value["inputRowsPerSecond"], json!(0.0));
        assert_eq!(value["processedRowsPerSecond"], json!(0.0));
        let mut text = serde_json::to_value(sample(0))?;
        text["inputRowsPerSecond"] = serde_json::Value::Null;
        assert_eq!(serde_json::from_value::<QueryProgress>(text)?.input_rows_per_second, 0.0);
        Ok(())
    }
}
