//! The query's Prometheus metrics, updated from each committed batch's measurements
//! and encoded by `prometheus-client` in the OpenMetrics text format. Every metric
//! carries the query's name as label `query`; per-source metrics add `source`,
//! per-stage metrics `stage`, guest metrics `handler`, batch phases `phase`.

use std::borrow::Cow;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::engine::BatchMetrics;
use crate::util::now_micros;

/// Labels of per-source metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

/// Labels of per-stage metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: String,
}

/// Labels of per-handler guest metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandlerLabels {
    stage: String,
    handler: String,
}

/// Labels of batch phases (Spark's `durationMs` keys).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric of one query.
#[derive(Default)]
struct Families {
    input_rows: Family<SourceLabels, Counter>,
    input_bytes: Family<SourceLabels, Counter>,
    bad_records: Family<SourceLabels, Counter>,
    batches: Counter,
    trigger_overruns: Counter,
    processed_rows_per_second: FloatGauge,
    input_rows_per_second: FloatGauge,
    phase_seconds: Family<PhaseLabels, Counter<f64, AtomicU64>>,
    watermark_seconds: FloatGauge,
    watermark_lag_seconds: FloatGauge,
    event_time_lag_seconds: FloatGauge,
    late_rows: Family<StageLabels, Counter>,
    state_rows: Family<StageLabels, Gauge>,
    state_bytes: Family<StageLabels, Gauge>,
    state_rows_updated: Family<StageLabels, Counter>,
    state_rows_removed: Family<StageLabels, Counter>,
    keys_with_input: Family<StageLabels, Counter>,
    timers_registered: Family<StageLabels, Counter>,
    timers_fired: Family<StageLabels, Counter>,
    ttl_evictions: Family<StageLabels, Counter>,
    guest_calls: Family<HandlerLabels, Counter>,
    guest_seconds: Family<HandlerLabels, Counter<f64, AtomicU64>>,
    guest_memory_peak_bytes: Family<StageLabels, Gauge>,
    output_rows: Counter,
    output_bytes: Counter,
    last_batch_id: Gauge,
}

/// A query's metrics: the registry to encode and the handles to update.
pub struct QueryMetrics {
    registry: Registry,
    families: Families,
    batch_seconds: Histogram,
    commit_seconds: Histogram,
}

impl QueryMetrics {
    /// The metrics of the query named `query`.
    pub fn new(query: &str) -> Self {
        let mut registry = Registry::with_prefix("eddy");
        let families = Families::default();
        let batch_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 18));
        let commit_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        let labelled = registry.sub_registry_with_label((Cow::Borrowed("query"), Cow::Owned(query.to_string())));
        let f = &families;
        labelled.register("input_rows", "Rows read by a source", f.input_rows.clone());
        labelled.register("input_bytes", "Bytes read by a source", f.input_bytes.clone());
        labelled.register("bad_records", "Records a source skipped or dead-lettered", f.bad_records.clone());
        labelled.register("batches", "Batches committed", f.batches.clone());
        labelled.register("trigger_overruns", "Batches longer than the trigger interval", f.trigger_overruns.clone());
        labelled.register(
            "processed_rows_per_second",
            "Input rows over the last batch's duration",
            f.processed_rows_per_second.clone(),
        );
        labelled.register(
            "input_rows_per_second",
            "Input rows over the time since the previous batch began",
            f.input_rows_per_second.clone(),
        );
        labelled.register("batch_duration_seconds", "How long batches took", batch_seconds.clone());
        labelled.register(
            "batch_phase_seconds",
            "Time spent per batch phase (Spark's durationMs)",
            f.phase_seconds.clone(),
        );
        labelled.register(
            "watermark_seconds",
            "The watermark of the last batch (Unix seconds)",
            f.watermark_seconds.clone(),
        );
        labelled.register("watermark_lag_seconds", "Wall clock minus the watermark", f.watermark_lag_seconds.clone());
        labelled.register(
            "event_time_lag_seconds",
            "The last batch's largest event time minus its watermark",
            f.event_time_lag_seconds.clone(),
        );
        labelled.register("late_rows_dropped", "Rows dropped as late", f.late_rows.clone());
        labelled.register("state_rows", "Estimated live state entries", f.state_rows.clone());
        labelled.register("state_bytes", "Estimated bytes of live state", f.state_bytes.clone());
        labelled.register("state_rows_updated", "State entries written", f.state_rows_updated.clone());
        labelled.register("state_rows_removed", "State entries deleted", f.state_rows_removed.clone());
        labelled.register(
            "keys_with_input",
            "Keys that had input rows, summed over batches",
            f.keys_with_input.clone(),
        );
        labelled.register("timers_registered", "Timers the processor registered", f.timers_registered.clone());
        labelled.register("timers_fired", "Timers that fired", f.timers_fired.clone());
        labelled.register("ttl_evictions", "Expired state entries evicted", f.ttl_evictions.clone());
        labelled.register("guest_calls", "Processor calls per handler", f.guest_calls.clone());
        labelled.register("guest_seconds", "Time in processor calls per handler", f.guest_seconds.clone());
        labelled.register(
            "guest_memory_peak_bytes",
            "The largest linear memory of a processor instance",
            f.guest_memory_peak_bytes.clone(),
        );
        labelled.register("output_rows", "Rows written to the sink", f.output_rows.clone());
        labelled.register("output_bytes", "Bytes the sink wrote", f.output_bytes.clone());
        labelled.register("checkpoint_commit_seconds", "How long state commits took", commit_seconds.clone());
        labelled.register("last_batch_id", "The id of the last committed batch", f.last_batch_id.clone());
        Self { registry, families, batch_seconds, commit_seconds }
    }

    /// Takes in one committed batch.
    pub fn observe(&self, metrics: &BatchMetrics, input_rows_per_second: f64, processed_rows_per_second: f64) {
        let f = &self.families;
        for source in &metrics.sources {
            let labels = SourceLabels { source: source.name.clone() };
            f.input_rows.get_or_create(&labels).inc_by(source.input_rows);
            f.input_bytes.get_or_create(&labels).inc_by(source.input_bytes);
            f.bad_records.get_or_create(&labels).inc_by(source.bad_records);
        }
        f.batches.inc();
        if metrics.trigger_overrun {
            f.trigger_overruns.inc();
        }
        f.input_rows_per_second.set(input_rows_per_second);
        f.processed_rows_per_second.set(processed_rows_per_second);
        self.batch_seconds.observe(metrics.total_ms as f64 / 1000.0);
        self.commit_seconds.observe(metrics.commit_ms as f64 / 1000.0);
        for (phase, ms) in [
            ("getBatch", metrics.plan_ms),
            ("addBatch", metrics.operator_ms + metrics.sink_ms),
            ("commitOffsets", metrics.commit_ms),
        ] {
            f.phase_seconds.get_or_create(&PhaseLabels { phase: phase.into() }).inc_by(ms as f64 / 1000.0);
        }
        if let Some(watermark) = metrics.watermark {
            f.watermark_seconds.set(watermark as f64 / 1e6);
            f.watermark_lag_seconds.set((now_micros() - watermark) as f64 / 1e6);
            if let Some(max) = metrics.event_time.max {
                f.event_time_lag_seconds.set((max - watermark) as f64 / 1e6);
            }
        }
        for stage in &metrics.stages {
            let labels = StageLabels { stage: stage.name.clone() };
            f.late_rows.get_or_create(&labels).inc_by(stage.rows_dropped_by_watermark);
            f.state_rows.get_or_create(&labels).set(metrics.state_rows_total as i64);
            f.state_bytes.get_or_create(&labels).set(metrics.state_bytes as i64);
            f.state_rows_updated.get_or_create(&labels).inc_by(stage.state_rows_updated);
            f.state_rows_removed.get_or_create(&labels).inc_by(stage.state_rows_removed);
            f.keys_with_input.get_or_create(&labels).inc_by(stage.keys_with_input);
            f.timers_registered.get_or_create(&labels).inc_by(stage.timers_registered);
            f.timers_fired.get_or_create(&labels).inc_by(stage.timers_fired);
            f.ttl_evictions.get_or_create(&labels).inc_by(stage.entries_evicted);
            f.guest_memory_peak_bytes.get_or_create(&labels).set(stage.guest_memory_peak_bytes as i64);
            for (handler, calls) in &stage.handlers {
                let labels = HandlerLabels { stage: stage.name.clone(), handler: handler.clone() };
                f.guest_calls.get_or_create(&labels).inc_by(calls.calls);
                f.guest_seconds.get_or_create(&labels).inc_by(calls.micros as f64 / 1e6);
            }
        }
        f.output_rows.inc_by(metrics.output_rows);
        f.output_bytes.inc_by(metrics.sink_bytes);
        f.last_batch_id.set(metrics.batch_id as i64);
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
