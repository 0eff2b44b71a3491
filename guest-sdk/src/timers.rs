//! Timers of the current key and the clocks of the current batch.

use std::rc::Rc;

use crate::bindings::eddy::processor::timers as host;
use crate::error::{Error, Result};
use crate::modes::TimeMode;
use crate::store::{Backend, Store};

/// The clocks of the current batch; constant within a batch, so a replayed batch sees
/// the same values. Times are microseconds since the Unix epoch (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerValues {
    /// The micro-batch's id (0, 1, 2, … across restarts; a replayed batch has its
    /// first run's id).
    pub batch_id: u64,
    /// The batch's processing time.
    pub processing_time: i64,
    /// The event-time watermark in force for this batch, if the query has one.
    pub watermark: Option<i64>,
}

/// The timer that fired, passed to
/// [`handle_expired_timer`](crate::StatefulProcessor::handle_expired_timer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpiredTimer {
    /// The time the timer was registered for (microseconds since the epoch).
    pub expiry_time: i64,
}

/// The timers of the current key, obtained in init with
/// [`InitContext::timers`](crate::InitContext::timers).
///
/// Timers live in the domain of the declared [`TimeMode`]: processing-time timers
/// fire once a batch's processing time reaches them, event-time timers once the
/// watermark does. Registering the same time twice keeps one timer. A timer is
/// removed when it fires, so [`handle_expired_timer`] may register it again.
///
/// [`handle_expired_timer`]: crate::StatefulProcessor::handle_expired_timer
#[derive(Clone)]
pub struct Timers {
    store: Rc<Store>,
}

impl Timers {
    pub(crate) fn new(store: Rc<Store>) -> Self {
        Timers { store }
    }

    fn check(&self) -> Result<()> {
        self.store.check_active(|| "timers".into())?;
        if self.store.time_mode() == TimeMode::None {
            return Err(Error::msg(
                "timers need a time mode: call `ctx.set_time_mode(TimeMode::ProcessingTime)` \
                 (or `EventTime`) in init",
            ));
        }
        Ok(())
    }

    /// Registers a timer for the current key at `expiry_time` (microseconds).
    pub fn register(&self, expiry_time: i64) -> Result<()> {
        self.check()?;
        match &self.store.backend {
            Backend::Host => crate::changes::timer_change(expiry_time, true),
            Backend::Memory(memory) => memory.borrow_mut().timer_register(expiry_time),
        }
        Ok(())
    }

    /// Deletes the current key's timer at `expiry_time`, if there is one.
    pub fn delete(&self, expiry_time: i64) -> Result<()> {
        self.check()?;
        match &self.store.backend {
            Backend::Host => crate::changes::timer_change(expiry_time, false),
            Backend::Memory(memory) => memory.borrow_mut().timer_delete(expiry_time),
        }
        Ok(())
    }

    /// The current key's timers, earliest first.
    pub fn list(&self) -> Result<Vec<i64>> {
        self.check()?;
        Ok(match &self.store.backend {
            Backend::Host => {
                crate::changes::before_direct_call();
                host::list_timers()
            }
            Backend::Memory(memory) => {
                let memory = memory.borrow();
                memory.timer_list(&memory.key)
            }
        })
    }
}
