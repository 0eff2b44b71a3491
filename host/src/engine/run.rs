//! Running a pipeline: open the query in its checkpoint, then run batches under the
//! trigger until it says the run is done, telling an observer about each batch.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};

use super::metrics::BatchMetrics;
use super::query::Query;
use super::trigger::Pacer;
use crate::checkpoint::{CheckpointDir, QueryProgress};
use crate::pipeline::Pipeline;
use crate::util::now_micros;

/// How to run a pipeline.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Overrides the spec's checkpoint directory.
    pub checkpoint: Option<PathBuf>,
    /// Where compiled modules are cached (`None`: no cache).
    pub module_cache: Option<PathBuf>,
    /// Stop after this many batches (any trigger).
    pub max_batches: Option<u64>,
    /// Set to ask the run to stop: the batch in flight finishes and commits, then the
    /// run ends (e.g. on SIGINT/SIGTERM).
    pub stop: Option<Arc<AtomicBool>>,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Batches committed by this run.
    pub batches: u64,
    /// Input rows read.
    pub input_rows: u64,
    /// Rows written to the sink.
    pub output_rows: u64,
    /// Rows dropped as late.
    pub rows_dropped_by_watermark: u64,
    /// The last batch the checkpoint has committed (by this run or an earlier one).
    pub last_committed_batch: Option<u64>,
    /// Whether the run ended because it was asked to stop.
    pub stopped: bool,
}

/// Watches a run: its start and every committed batch.
pub trait RunObserver {
    /// Whether the observer wants [`BatchMetrics::files_left`] (costs a listing per batch).
    fn counts_files(&self) -> bool {
        false
    }

    /// The run starts; `files_left`: the files a bounded run has before it (when counted).
    fn started(&mut self, files_left: Option<u64>) -> Result<()> {
        let _ = files_left;
        Ok(())
    }

    /// An attempt at a batch starts (what it prints comes next).
    fn attempt_starting(&mut self) {}

    /// Batch `metrics.batch_id` committed; `record` is its progress record.
    fn batch(&mut self, metrics: &BatchMetrics, record: &QueryProgress) -> Result<()>;

    /// An attempt found nothing to do: the query has caught up with its input.
    fn idle(&mut self) {}

    /// The run ended without error.
    fn finished(&mut self) {}
}

/// An observer made of a closure that sees every batch.
struct EachBatch<F>(F);

impl<F: FnMut(&BatchMetrics, &QueryProgress) -> Result<()>> RunObserver for EachBatch<F> {
    fn batch(&mut self, metrics: &BatchMetrics, record: &QueryProgress) -> Result<()> {
        (self.0)(metrics, record)
    }
}

/// Runs `pipeline` under its trigger; `on_batch` sees every committed batch.
pub fn run_pipeline(
    pipeline: &Pipeline,
    options: &RunOptions,
    on_batch: impl FnMut(&BatchMetrics, &QueryProgress) -> Result<()>,
) -> Result<RunSummary> {
    run_observed(pipeline, options, &mut EachBatch(on_batch))
}

/// Runs `pipeline` under its trigger, telling `observer` what happens.
pub fn run_observed(pipeline: &Pipeline, options: &RunOptions, observer: &mut dyn RunObserver) -> Result<RunSummary> {
    let temporary;
    let root = match options.checkpoint.as_ref().or(pipeline.checkpoint.as_ref()) {
        Some(dir) => dir.clone(),
        None => {
            temporary = tempfile::Builder::new().prefix("eddy-checkpoint-").tempdir()?;
            temporary.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create checkpoint {}", root.display()))?;
    let mut query = Query::open(pipeline, CheckpointDir::new(root), options.module_cache.clone())?;
    let stop = options.stop.clone().unwrap_or_default();
    let mut pacer = Pacer::new(pipeline.trigger, stop.clone());
    if let Some(lift_limits) = pacer.bounds() {
        query.bound_to_available_now(now_micros(), lift_limits)?;
    }
    let counts_files = observer.counts_files();
    observer.started(if counts_files { query.files_left()? } else { None })?;
    let mut summary = RunSummary::default();
    while options.max_batches.is_none_or(|max| summary.batches < max) {
        pacer.wait_for_turn();
        if stop.load(Ordering::SeqCst) {
            summary.stopped = true;
            break;
        }
        observer.attempt_starting();
        let ran = query.try_run_batch(now_micros())?;
        let ran_a_batch = ran.is_some();
        if !ran_a_batch {
            observer.idle();
        }
        if let Some((mut metrics, record)) = ran {
            summary.batches += 1;
            summary.input_rows += metrics.input_rows;
            summary.output_rows += metrics.output_rows;
            summary.rows_dropped_by_watermark += metrics.rows_dropped_by_watermark;
            if counts_files {
                metrics.files_left = query.files_left()?;
            }
            metrics.trigger_overrun = pacer.batch_ran(&metrics);
            observer.batch(&metrics, &record)?;
        }
        if pacer.done_after(ran_a_batch, &query)? {
            break;
        }
    }
    summary.last_committed_batch = query.next_batch_id().checked_sub(1);
    query.close()?;
    observer.finished();
    Ok(summary)
}
