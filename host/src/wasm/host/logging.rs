//! `eddy:processor/logging`: a guest's log lines, labelled with module and key, held
//! to `operator.max-log-bytes-per-call` (counted at every level, shown or not, so that
//! whether a batch passes does not depend on `EDDY_LOG`).

use super::{HostState, trap};
use crate::log::Level;
use crate::wasm::bindings::eddy::processor::logging;

impl logging::Host for HostState {
    fn log(&mut self, level: logging::Level, message: String) -> wasmtime::Result<()> {
        self.scope.usage.charge_log(&self.limits, message.len()).map_err(trap)?;
        let level = match level {
            logging::Level::Trace => Level::Trace,
            logging::Level::Debug => Level::Debug,
            logging::Level::Info => Level::Info,
            logging::Level::Warn => Level::Warn,
            logging::Level::Error => Level::Error,
        };
        crate::log::guest(&self.module, &self.scope.key_label(), level, &message);
        if level == Level::Error {
            self.logged_error = Some(message);
        }
        Ok(())
    }
}
