//! A valid, do-nothing processor for `eddy:processor@1.0.0` (see `wit/`, a copy of the
//! contract with only the version changed): the host must refuse to load it and name
//! both versions.

wit_bindgen::generate!({
    world: "processor",
    path: "wit",
});

use eddy::processor::types::TimeMode;
use exports::eddy::processor::handler::{
    ExpiredTimer, Guest, InitContext, ProcessorSpec, RowBatch, Scalar, TimerValues,
};

struct Future;

fn empty() -> RowBatch {
    RowBatch { num_rows: 0, columns: Vec::new() }
}

impl Guest for Future {
    fn init(_: InitContext) -> Result<ProcessorSpec, String> {
        Ok(ProcessorSpec { state: Vec::new(), output_schema: Vec::new(), time_mode: TimeMode::None })
    }

    fn handle_input_rows(_: Vec<Scalar>, _: RowBatch, _: TimerValues) -> Result<RowBatch, String> {
        Ok(empty())
    }

    fn handle_expired_timer(_: Vec<Scalar>, _: TimerValues, _: ExpiredTimer) -> Result<RowBatch, String> {
        Ok(empty())
    }

    fn handle_initial_state(_: Vec<Scalar>, _: RowBatch, _: TimerValues) -> Result<(), String> {
        Ok(())
    }

    fn close() {}
}

// The export symbols (`eddy:processor/handler@1.0.0#init`, …) only link in a
// component, not in a native shared library.
#[cfg(target_arch = "wasm32")]
export!(Future);
