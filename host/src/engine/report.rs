//! Turning a batch's metrics into a progress record with Spark's field names.

use std::collections::BTreeMap;

use super::metrics::BatchMetrics;
use crate::checkpoint::{
    EventTimeProgress, QueryProgress, SinkProgress, SourceProgress, StateOperatorProgress, rows_per_second,
};
use crate::operator::StageStats;
use crate::util::format_micros_iso;

/// Who is reporting: the query's stable id, this run's id, and the sink.
pub struct Reporter {
    /// Stable across restarts of the query (kept in the checkpoint).
    pub query_id: String,
    /// New for every run.
    pub run_id: String,
    /// The sink's description.
    pub sink: String,
    /// The query's name.
    pub query_name: String,
    /// When the previous batch started (for the input rate).
    pub previous_start: Option<i64>,
}

impl Reporter {
    /// The progress record of one batch.
    pub fn record(&mut self, metrics: &BatchMetrics) -> QueryProgress {
        let since_previous_ms =
            self.previous_start.map_or(0, |start| ((metrics.processing_time - start) / 1000).max(0) as u64);
        self.previous_start = Some(metrics.processing_time);
        let input_rate = |rows| if since_previous_ms == 0 { 0.0 } else { rows_per_second(rows, since_previous_ms) };
        let duration_ms = BTreeMap::from([
            ("triggerExecution".to_string(), metrics.total_ms),
            ("getBatch".to_string(), metrics.plan_ms),
            ("addBatch".to_string(), metrics.operator_ms + metrics.sink_ms),
            ("commitOffsets".to_string(), metrics.commit_ms),
        ]);
        let sources = metrics
            .sources
            .iter()
            .map(|source| SourceProgress {
                description: source.description.clone(),
                start_offset: source.start_offset.clone(),
                end_offset: source.end_offset.clone(),
                latest_offset: source.latest_offset.clone(),
                num_input_rows: source.input_rows,
                input_rows_per_second: input_rate(source.input_rows),
                processed_rows_per_second: rows_per_second(source.input_rows, metrics.total_ms),
                metrics: source
                    .metrics
                    .clone()
                    .into_iter()
                    .chain([
                        ("numBadRecords".to_string(), source.bad_records.to_string()),
                        ("numInputBytes".to_string(), source.input_bytes.to_string()),
                    ])
                    .collect(),
            })
            .collect();
        QueryProgress {
            id: self.query_id.clone(),
            run_id: self.run_id.clone(),
            name: self.query_name.clone(),
            timestamp: format_micros_iso(metrics.processing_time),
            batch_id: metrics.batch_id,
            batch_duration: metrics.total_ms,
            num_input_rows: metrics.input_rows,
            input_rows_per_second: input_rate(metrics.input_rows),
            processed_rows_per_second: rows_per_second(metrics.input_rows, metrics.total_ms),
            duration_ms,
            event_time: EventTimeProgress::from_micros(
                metrics.event_time.min,
                metrics.event_time.max,
                metrics.event_time.avg(),
                metrics.watermark,
            ),
            state_operators: metrics.stages.iter().map(|stage| state_operator(stage, metrics)).collect(),
            sources,
            sink: SinkProgress {
                description: self.sink.clone(),
                num_output_rows: metrics.output_rows,
                metrics: BTreeMap::from([("numOutputBytes".to_string(), metrics.sink_bytes.to_string())]),
            },
            top_keys: metrics.stages.first().map(|stage| stage.top_keys.clone()).unwrap_or_default(),
        }
    }
}

/// A stage's entry in `stateOperators`. The store is shared: its total rows and
/// memory are the whole store's, as is the commit time.
fn state_operator(stage: &StageStats, metrics: &BatchMetrics) -> StateOperatorProgress {
    let mut custom_metrics = BTreeMap::from([
        ("numKeysWithInput".to_string(), stage.keys_with_input as i64),
        ("numTimersFired".to_string(), stage.timers_fired as i64),
        ("numTimersRegistered".to_string(), stage.timers_registered as i64),
        ("numExpiredEntriesEvicted".to_string(), stage.entries_evicted as i64),
        ("guestMemoryPeakBytes".to_string(), stage.guest_memory_peak_bytes as i64),
        // The stage's own time in `addBatch` (which also holds the sink's).
        ("runTimeMs".to_string(), stage.run_ms as i64),
    ]);
    for (handler, calls) in &stage.handlers {
        custom_metrics.insert(format!("guestCalls[{handler}]"), calls.calls as i64);
        custom_metrics.insert(format!("guestTimeMs[{handler}]"), (calls.micros / 1000) as i64);
    }
    StateOperatorProgress {
        operator_name: stage.name.clone(),
        num_rows_total: stage.state_rows_total.unwrap_or(metrics.state_rows_total),
        num_rows_updated: stage.state_rows_updated,
        num_rows_removed: stage.state_rows_removed,
        num_rows_dropped_by_watermark: stage.rows_dropped_by_watermark,
        memory_used_bytes: metrics.memory_used_bytes,
        commit_time_ms: metrics.commit_ms,
        custom_metrics,
    }
}
