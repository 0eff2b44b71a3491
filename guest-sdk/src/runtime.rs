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
use crate::context::InitContext;
use crate::convert::{
    expired_timer_from_wit, key_from_wit, output_mode_from_wit, rows_from_wit, rows_to_wit, schema_from_wit,
    spec_to_wit, timer_values_from_wit,
};
use crate::error::{Error, Result};
use crate::log::{Level, log};
use crate::processor::{Driver, StatefulProcessor};
use crate::schema::Schema;
use crate::store::{Backend, Store};

pub use crate::bindings::exports::eddy::processor::handler::Guest;
pub use wit::{ExpiredTimer, InitContext as WitInitContext, ProcessorSpec, RowBatch, Scalar, TimerValues};

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

/// Makes a panic also reach the operator's log (tagged with the module and key by
/// the host) before the instance traps; the message still goes to stderr as well.
fn install_panic_hook() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info.payload_as_str().unwrap_or("(no message)");
            let place = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
            log(Level::Error, &format!("the processor panicked{place}: {message}"));
            default_hook(info);
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
        let mut ctx = InitContext::new(input_schema, key_schema, output_mode, context.config, store);
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

/// `handle-input-rows`.
pub fn handle_input_rows<P: StatefulProcessor>(
    key: Vec<wit::Scalar>,
    rows: wit::RowBatch,
    timer_values: wit::TimerValues,
) -> Result<wit::RowBatch, String> {
    with_driver::<P, _>(|driver| {
        let rows = rows_from_wit(rows, Some(driver.input_schema()))?;
        let mut output = driver.output();
        driver.handle_input_rows(&key_from_wit(key), &rows, &timer_values_from_wit(timer_values), &mut output)?;
        Ok(rows_to_wit(output.finish()))
    })
}

/// `handle-expired-timer`.
pub fn handle_expired_timer<P: StatefulProcessor>(
    key: Vec<wit::Scalar>,
    timer_values: wit::TimerValues,
    timer: wit::ExpiredTimer,
) -> Result<wit::RowBatch, String> {
    with_driver::<P, _>(|driver| {
        let mut output = driver.output();
        driver.handle_expired_timer(
            &key_from_wit(key),
            &timer_values_from_wit(timer_values),
            &expired_timer_from_wit(timer),
            &mut output,
        )?;
        Ok(rows_to_wit(output.finish()))
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
        driver.handle_initial_state(&key_from_wit(key), &rows, &timer_values_from_wit(timer_values))
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
/// the `eddy:processor@0.1.0` world that call it. Invoke it once, at the crate root
/// of a `cdylib` crate built for `wasm32-wasip2`, as in the [crate-level
/// example](crate): `eddy_guest::export_processor!(MyProcessor);`. On a native target
/// the exports compile too but are never called, so the same crate can hold the
/// processor's harness tests.
#[macro_export]
macro_rules! export_processor {
    ($processor:ty) => {
        const _: fn() = || $crate::runtime::assert_processor::<$processor>();

        // The exports' symbol names (`eddy:processor/handler@0.1.0#init`, …) only
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
                    key: ::std::vec::Vec<$crate::runtime::Scalar>,
                    rows: $crate::runtime::RowBatch,
                    timer_values: $crate::runtime::TimerValues,
                ) -> ::core::result::Result<$crate::runtime::RowBatch, ::std::string::String> {
                    $crate::runtime::handle_input_rows::<$processor>(key, rows, timer_values)
                }

                fn handle_expired_timer(
                    key: ::std::vec::Vec<$crate::runtime::Scalar>,
                    timer_values: $crate::runtime::TimerValues,
                    timer: $crate::runtime::ExpiredTimer,
                ) -> ::core::result::Result<$crate::runtime::RowBatch, ::std::string::String> {
                    $crate::runtime::handle_expired_timer::<$processor>(key, timer_values, timer)
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
