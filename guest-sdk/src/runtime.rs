//! The component's exports: glue from the WIT `handler` interface to a
//! [`StatefulProcessor`], used by [`export_processor!`](crate::export_processor).
//!
//! The processor lives in a thread-local slot for the instance's whole life: `init`
//! creates it, `close` drops it.

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Once;

use crate::bindings::eddy::processor::types as wit;
use crate::changes::CallKind;
use crate::context::{InitContext, QueryInfo};
use crate::convert::{
    key_from_wit, output_mode_from_wit, rows_from_wit, rows_to_wit, schema_from_wit, spec_to_wit, timer_values_from_wit,
};
use crate::error::{Error, Result};
use crate::log::{Level, log};
use crate::processor::{Driver, StatefulProcessor};
use crate::schema::Schema;
use crate::store::{Backend, Store};
use crate::timers::ExpiredTimer;

pub use crate::bindings::exports::eddy::processor::handler::Guest;
pub use wit::{DueTimer, InitContext as WitInitContext, KeyRows, Output, ProcessorSpec, RowBatch, Scalar, TimerValues};

thread_local! {
    static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

fn with_driver<P: StatefulProcessor, R>(call: impl FnOnce(&mut Driver<P>) -> Result<R>) -> Result<R, String> {
    INSTANCE.with(|slot| {
        let mut slot = slot.borrow_mut();
        let driver = slot
            .as_mut()
            .and_then(|instance| instance.downcast_mut::<Driver<P>>())
            .ok_or_else(|| "the processor is not initialized: the host must call init first".to_string())?;
        call(driver).map_err(Error::into_message)
    })
}

/// Hands a panic's message and location to the host before the instance aborts: the
/// contract's `logging` says that the last message logged at error level in a call
/// that aborts is why, so the batch's error names it (as a Python or JavaScript
/// processor's exception is named by the error its handler returns). The message
/// goes to the operator's log too; not to stderr as well, where it would be shown twice.
fn install_panic_hook() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        std::panic::set_hook(Box::new(move |info| {
            let message = info.payload_as_str().unwrap_or("(no message)");
            let place = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
            log(Level::Error, &format!("the processor panicked{place}: {message}"));
        }));
    });
}

/// `init`: creates the processor and returns what it declared.
pub fn init<P: StatefulProcessor>(context: wit::InitContext) -> Result<wit::ProcessorSpec, String> {
    install_panic_hook();
    let setup = || -> Result<Driver<P>> {
        let input_schema = schema_from_wit(context.input_schema, "input schema")?;
        let key_schema = schema_from_wit(context.key_schema, "key schema")?;
        let store = Rc::new(Store::new(Backend::Host));
        let output_mode = output_mode_from_wit(context.output_mode);
        let initial_state_schema =
            context.initial_state_schema.map(|fields| schema_from_wit(fields, "initial-state schema")).transpose()?;
        let query = QueryInfo { id: context.query.id, run_id: context.query.run_id };
        let mut ctx = InitContext::new(input_schema, key_schema, output_mode, context.config, query, store);
        ctx.set_event_time_column(context.event_time_column);
        if let Some(schema) = initial_state_schema {
            ctx.set_initial_state_schema(Schema::clone(&schema));
        }
        Driver::init(ctx)
    };
    let driver = setup().map_err(Error::into_message)?;
    let spec = spec_to_wit(driver.spec());
    INSTANCE.with(|slot| *slot.borrow_mut() = Some(Box::new(driver)));
    Ok(spec)
}

/// `handle-input-rows`: selects each key of the call in turn and hands the processor
/// that key's rows, until the call's output passes 8 MiB (the host hands the rest over
/// in another call).
pub fn handle_input_rows<P: StatefulProcessor>(
    keys: Vec<wit::KeyRows>,
    rows: wit::RowBatch,
    timer_values: wit::TimerValues,
) -> Result<wit::Output, String> {
    with_driver::<P, _>(|driver| {
        let rows = rows_from_wit(rows, Some(driver.input_schema()))?;
        let timer_values = timer_values_from_wit(timer_values);
        let held: u64 = keys.iter().map(|key| u64::from(key.num_rows)).sum();
        if held != rows.len() as u64 {
            return Err(Error::msg(format!("the host handed over {} rows for keys that hold {held}", rows.len())));
        }
        let single = keys.len() == 1;
        crate::changes::start_call(CallKind::Input, keys.len(), None);
        let mut output = driver.output();
        let mut ends = Vec::with_capacity(keys.len());
        let mut start = 0;
        for (index, key_rows) in keys.into_iter().enumerate() {
            if output.call_is_full() {
                break; // the host hands the remaining keys over in another call
            }
            let end = start + key_rows.num_rows as usize;
            crate::changes::set_key(index as u32);
            let key = key_from_wit(key_rows.key);
            if single {
                driver.handle_input_rows(&key, &rows, &timer_values, &mut output)?;
            } else {
                driver.handle_input_rows(&key, &rows.slice(start..end), &timer_values, &mut output)?;
            }
            ends.push(output.end_handler() as u32);
            start = end;
        }
        crate::changes::flush();
        Ok(wit::Output { rows: rows_to_wit(output.finish()), ends })
    })
}

/// `handle-expired-timers`: takes each due timer in turn (which selects its key) and
/// hands it to the processor, unless an earlier handler of the call deleted it; stops
/// early like `handle-input-rows`.
pub fn handle_expired_timers<P: StatefulProcessor>(
    keys: Vec<Vec<wit::Scalar>>,
    timers: Vec<wit::DueTimer>,
    timer_values: wit::TimerValues,
) -> Result<wit::Output, String> {
    with_driver::<P, _>(|driver| {
        let keys: Vec<_> = keys.into_iter().map(key_from_wit).collect();
        let timer_values = timer_values_from_wit(timer_values);
        crate::changes::start_call(CallKind::Timers, keys.len(), None);
        let mut output = driver.output();
        let mut ends = Vec::with_capacity(timers.len());
        for (index, timer) in timers.iter().enumerate() {
            if output.call_is_full() {
                break; // the host hands the remaining timers over in another call
            }
            if crate::changes::take_timer(index as u32, timer.key_index) {
                let key = keys.get(timer.key_index as usize).ok_or_else(|| {
                    Error::msg(format!("the host named key {} of a call over {} keys", timer.key_index, keys.len()))
                })?;
                let expired = ExpiredTimer { expiry_time: timer.expiry_time };
                driver.handle_expired_timer(key, &timer_values, &expired, &mut output)?;
            }
            ends.push(output.end_handler() as u32);
        }
        crate::changes::flush();
        Ok(wit::Output { rows: rows_to_wit(output.finish()), ends })
    })
}

/// `handle-initial-state`.
pub fn handle_initial_state<P: StatefulProcessor>(
    key: Vec<wit::Scalar>,
    initial_state: wit::RowBatch,
    timer_values: wit::TimerValues,
) -> Result<(), String> {
    with_driver::<P, _>(|driver| {
        let schema = driver.spec().initial_state_schema.clone();
        let rows = rows_from_wit(initial_state, schema.as_ref())?;
        // The host makes the call's one key current.
        crate::changes::start_call(CallKind::InitialState, 1, Some(0));
        driver.handle_initial_state(&key_from_wit(key), &rows, &timer_values_from_wit(timer_values))?;
        crate::changes::flush();
        Ok(())
    })
}

/// Checks at compile time that `P` is a processor.
pub fn assert_processor<P: StatefulProcessor>() {}

/// `close`: closes and drops the processor.
pub fn close<P: StatefulProcessor>() {
    let instance = INSTANCE.with(|slot| slot.borrow_mut().take());
    if let Some(mut driver) = instance.and_then(|i| i.downcast::<Driver<P>>().ok()) {
        driver.close();
    }
}

/// Makes a [`StatefulProcessor`] the component's processor: generates the exports of
/// the `eddy:processor@0.3.1` world that call it. Invoke it once, at the crate root
/// of a `cdylib` crate built for `wasm32-wasip2`, as in the [crate-level
/// example](crate): `eddy_guest::export_processor!(MyProcessor);`. On a native target
/// the exports compile too but are never called, so the same crate can hold the
/// processor's harness tests.
#[macro_export]
macro_rules! export_processor {
    ($processor:ty) => {
        const _: fn() = || $crate::runtime::assert_processor::<$processor>();

        // The exports' symbol names (`eddy:processor/handler@0.3.1#init`, …) only
        // link in a component; native builds (tests, the harness) leave them out.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __EddyProcessorExports;

            impl $crate::runtime::Guest for __EddyProcessorExports {
                fn init(
                    context: $crate::runtime::WitInitContext,
                ) -> ::core::result::Result<$crate::runtime::ProcessorSpec, ::std::string::String> {
                    $crate::runtime::init::<$processor>(context)
                }

                fn handle_input_rows(
                    keys: ::std::vec::Vec<$crate::runtime::KeyRows>,
                    rows: $crate::runtime::RowBatch,
                    timer_values: $crate::runtime::TimerValues,
                ) -> ::core::result::Result<$crate::runtime::Output, ::std::string::String> {
                    $crate::runtime::handle_input_rows::<$processor>(keys, rows, timer_values)
                }

                fn handle_expired_timers(
                    keys: ::std::vec::Vec<::std::vec::Vec<$crate::runtime::Scalar>>,
                    timers: ::std::vec::Vec<$crate::runtime::DueTimer>,
                    timer_values: $crate::runtime::TimerValues,
                ) -> ::core::result::Result<$crate::runtime::Output, ::std::string::String> {
                    $crate::runtime::handle_expired_timers::<$processor>(keys, timers, timer_values)
                }

                fn handle_initial_state(
                    key: ::std::vec::Vec<$crate::runtime::Scalar>,
                    initial_state: $crate::runtime::RowBatch,
                    timer_values: $crate::runtime::TimerValues,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    $crate::runtime::handle_initial_state::<$processor>(key, initial_state, timer_values)
                }

                fn close() {
                    $crate::runtime::close::<$processor>()
                }
            }

    $crate::bindings::export!(__EddyProcessorExports with_types_in $crate::bindings);
        };
    };
}
