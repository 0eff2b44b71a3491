//! `eddy:processor/logging`: a guest's log lines, labelled with module and key.

use super::HostState;
use crate::contract::rows::key_label;
use crate::log::Level;
use crate::wasm::bindings::eddy::processor::logging;

impl logging::Host for HostState {
    fn log(&mut self, level: logging::Level, message: String) -> wasmtime::Result<()> {
        let level = match level {
            logging::Level::Trace => Level::Trace,
            logging::Level::Debug => Level::Debug,
            logging::Level::Info => Level::Info,
            logging::Level::Warn => Level::Warn,
            logging::Level::Error => Level::Error,
        };
        crate::log::guest(&self.module, &key_label(&self.scope.key_values), level, &message);
        Ok(())
    }
}
