//! A processor that declares no state, an empty output schema and no time mode, and
//! returns an empty batch from every call: the baseline of the boundary benchmark.

use eddy_guest::{
    ExpiredTimer, InitContext, Key, Output, Result, Rows, StatefulProcessor, TimerValues, export_processor,
};

struct Noop;

impl StatefulProcessor for Noop {
    fn init(_: &mut InitContext) -> Result<Self> {
        Ok(Noop)
    }

    fn handle_input_rows(&mut self, _: &Key, _: &Rows, _: &TimerValues, _: &mut Output) -> Result<()> {
        Ok(())
    }

    fn handle_expired_timer(&mut self, _: &Key, _: &TimerValues, _: &ExpiredTimer, _: &mut Output) -> Result<()> {
        Ok(())
    }

    fn handle_initial_state(&mut self, _: &Key, _: &Rows, _: &TimerValues) -> Result<()> {
        Ok(())
    }
}

export_processor!(Noop);
