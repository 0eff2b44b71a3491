//! The trait processor authors implement, and the driver that runs it.

use std::rc::Rc;

use crate::context::{InitContext, Spec};
use crate::error::{Error, Result};
use crate::key::Key;
use crate::output::Output;
use crate::rows::Rows;
use crate::schema::Schema;
use crate::store::Store;
use crate::timers::{ExpiredTimer, TimerValues};

/// Per-key stateful logic, like Spark's `StatefulProcessor` in `transformWithState`.
///
/// The host creates one long-lived instance per operator shard with [`init`], then
/// calls it once per key per batch with that key's new rows, once per expired timer,
/// and once per key with initial state when the query starts with some. State
/// variables and timers are always scoped to the key of the current call. Wire a type
/// to the component's exports with [`export_processor!`](crate::export_processor).
///
/// Returning `Err` from a handler fails the batch: the host commits none of it.
///
/// [`init`]: StatefulProcessor::init
pub trait StatefulProcessor: Sized + 'static {
    /// Creates the processor: reads the config, declares state variables (keeping
    /// their handles), the output schema and the time mode.
    fn init(ctx: &mut InitContext) -> Result<Self>;

    /// Handles all of one key's new rows of a batch, appending any result rows to
    /// `output`.
    fn handle_input_rows(
        &mut self,
        key: &Key,
        rows: &Rows,
        timer_values: &TimerValues,
        output: &mut Output,
    ) -> Result<()>;

    /// Handles one of the key's timers that expired; timers of a key fire in expiry
    /// order. The default fails, since only a processor that registers timers gets
    /// this call.
    fn handle_expired_timer(
        &mut self,
        key: &Key,
        timer_values: &TimerValues,
        expired_timer: &ExpiredTimer,
        output: &mut Output,
    ) -> Result<()> {
        let _ = (timer_values, output);
        Err(Error::msg(format!(
            "timer {} of key {key} expired but the processor does not implement \
             handle_expired_timer",
            expired_timer.expiry_time
        )))
    }

    /// Loads one key's initial state before the first batch. The default fails: a
    /// processor that accepts initial state implements it.
    fn handle_initial_state(&mut self, key: &Key, rows: &Rows, timer_values: &TimerValues) -> Result<()> {
        let _ = (rows, timer_values);
        Err(Error::msg(format!(
            "the query has initial state (key {key}) but the processor does not implement \
             handle_initial_state"
        )))
    }

    /// Called once when the operator shuts down.
    fn close(&mut self) {}
}

/// A processor together with what its `init` declared.
pub(crate) struct Driver<P> {
    processor: P,
    store: Rc<Store>,
    input_schema: Rc<Schema>,
    spec: Spec,
}

impl<P: StatefulProcessor> Driver<P> {
    /// Runs `P::init`.
    pub(crate) fn init(mut ctx: InitContext) -> Result<Self> {
        let processor = P::init(&mut ctx)?;
        let store = ctx.store.clone();
        let input_schema = ctx.input_schema_rc();
        Ok(Driver { processor, store, input_schema, spec: ctx.into_spec() })
    }

    pub(crate) fn processor(&self) -> &P {
        &self.processor
    }

    pub(crate) fn spec(&self) -> &Spec {
        &self.spec
    }

    pub(crate) fn input_schema(&self) -> &Rc<Schema> {
        &self.input_schema
    }

    /// A new, empty output batch in the declared output schema.
    pub(crate) fn output(&self) -> Output {
        Output::new(self.spec.output_schema.clone())
    }

    /// Runs `call` with state and timers usable.
    fn keyed<R>(&mut self, call: impl FnOnce(&mut P) -> Result<R>) -> Result<R> {
        self.store.set_active(true);
        let result = call(&mut self.processor);
        self.store.set_active(false);
        result
    }

    pub(crate) fn handle_input_rows(
        &mut self,
        key: &Key,
        rows: &Rows,
        timer_values: &TimerValues,
        output: &mut Output,
    ) -> Result<()> {
        self.keyed(|p| p.handle_input_rows(key, rows, timer_values, output))
    }

    pub(crate) fn handle_expired_timer(
        &mut self,
        key: &Key,
        timer_values: &TimerValues,
        expired_timer: &ExpiredTimer,
        output: &mut Output,
    ) -> Result<()> {
        self.keyed(|p| p.handle_expired_timer(key, timer_values, expired_timer, output))
    }

    pub(crate) fn handle_initial_state(&mut self, key: &Key, rows: &Rows, timer_values: &TimerValues) -> Result<()> {
        self.keyed(|p| p.handle_initial_state(key, rows, timer_values))
    }

    pub(crate) fn close(&mut self) {
        self.processor.close();
    }
}
