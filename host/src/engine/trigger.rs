//! Trigger pacing: when the next batch may start and when a run is done.
//!
//! - as fast as possible: a batch whenever there is something to do, polling for new
//!   input otherwise; runs until stopped;
//! - processing time: a batch at most every interval (a batch that runs longer is
//!   reported, and the next starts at once);
//! - available now: what is there at the start, in as many batches as the source
//!   limits allow, plus the batches that due timers and the moved watermark need;
//!   then stop;
//! - once: what is there at the start in one batch (ignoring max-files-per-trigger,
//!   like Spark's), then stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;

use super::metrics::BatchMetrics;
use super::query::Query;
use crate::pipeline::TriggerSpec;
use crate::util::now_micros;

/// How long an idle query waits before looking for input again.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Paces a run's batches under its trigger.
pub(super) struct Pacer {
    trigger: TriggerSpec,
    next_start: i64,
    /// Set when the run is asked to stop: waits end early.
    stop: Arc<AtomicBool>,
}

impl Pacer {
    /// Pacing for `trigger`, starting now; `stop` cuts waits short.
    pub fn new(trigger: TriggerSpec, stop: Arc<AtomicBool>) -> Self {
        Self { trigger, next_start: now_micros(), stop }
    }

    /// Sleeps for `duration`, or less if the run is asked to stop.
    fn sleep(&self, duration: Duration) {
        let until = std::time::Instant::now() + duration;
        while !self.stop.load(Ordering::SeqCst) {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(POLL_INTERVAL));
        }
    }

    /// Whether the sources must be bounded to what is available at the start, and
    /// whether their per-batch limits are lifted.
    pub fn bounds(&self) -> Option<bool> {
        match self.trigger {
            TriggerSpec::AvailableNow => Some(false),
            TriggerSpec::Once => Some(true),
            TriggerSpec::AsFastAsPossible | TriggerSpec::ProcessingTime(_) => None,
        }
    }

    /// Waits until the next batch may start (the processing-time trigger's interval).
    pub fn wait_for_turn(&mut self) {
        if let TriggerSpec::ProcessingTime(interval) = self.trigger {
            let wait = self.next_start - now_micros();
            if wait > 0 {
                self.sleep(Duration::from_micros(wait as u64));
            }
            self.next_start += interval.as_micros() as i64;
        }
    }

    /// Notes a batch that ran; one longer than the interval is reported and the next
    /// batch starts at once. Returns whether it overran.
    pub fn batch_ran(&mut self, metrics: &BatchMetrics) -> bool {
        if let TriggerSpec::ProcessingTime(interval) = self.trigger
            && Duration::from_millis(metrics.total_ms) > interval
        {
            crate::log::warn(&format!(
                "batch {} took {} ms, longer than the trigger interval of {} ms; the next batch starts now",
                metrics.batch_id,
                metrics.total_ms,
                interval.as_millis()
            ));
            self.next_start = now_micros();
            return true;
        }
        false
    }

    /// After an attempt (`ran`: whether it ran a batch): whether the run is done. An
    /// idle query that goes on waits a little first.
    pub fn done_after(&self, ran: bool, query: &Query) -> Result<bool> {
        let done = match self.trigger {
            TriggerSpec::Once => true,
            TriggerSpec::AvailableNow => !ran && query.caught_up()?,
            TriggerSpec::AsFastAsPossible | TriggerSpec::ProcessingTime(_) => false,
        };
        let idle = !ran && matches!(self.trigger, TriggerSpec::AsFastAsPossible | TriggerSpec::AvailableNow);
        if idle && !done {
            self.sleep(POLL_INTERVAL);
        }
        Ok(done)
    }
}
