//! Messages to the operator's log.
//!
//! Use the macros [`trace!`](crate::trace), [`debug!`](crate::debug),
//! [`info!`](crate::info), [`warn!`](crate::warn) and [`error!`](crate::error), or
//! [`log()`]. In a component the host tags each message with the module and the
//! current key; under the [test harness](crate::testing) messages are captured and
//! readable with [`Harness::logs`](crate::testing::Harness::logs); elsewhere on a
//! native target they go to stderr.

use std::cell::RefCell;
use std::fmt;

/// How important a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the processor handled.
    Warn,
    /// Something failed.
    Error,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        })
    }
}

/// One captured log message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// The message's level.
    pub level: Level,
    /// The message.
    pub message: String,
}

thread_local! {
    /// Set by the test harness while it runs a handler.
    static CAPTURE: RefCell<Option<Vec<LogRecord>>> = const { RefCell::new(None) };
}

/// Writes `message` to the operator's log at `level`.
pub fn log(level: Level, message: &str) {
    let captured = CAPTURE.with(|capture| match capture.borrow_mut().as_mut() {
        Some(records) => {
            records.push(LogRecord { level, message: message.to_string() });
            true
        }
        None => false,
    });
    if !captured {
        write_out(level, message);
    }
}

#[cfg(target_arch = "wasm32")]
fn write_out(level: Level, message: &str) {
    use crate::bindings::eddy::processor::logging::{self, Level as HostLevel};
    let level = match level {
        Level::Trace => HostLevel::Trace,
        Level::Debug => HostLevel::Debug,
        Level::Info => HostLevel::Info,
        Level::Warn => HostLevel::Warn,
        Level::Error => HostLevel::Error,
    };
    crate::changes::select_current();
    logging::log(level, message);
}

#[cfg(not(target_arch = "wasm32"))]
fn write_out(level: Level, message: &str) {
    eprintln!("[{level}] {message}");
}

/// Starts capturing log messages on this thread.
pub(crate) fn capture_start() {
    CAPTURE.with(|capture| *capture.borrow_mut() = Some(Vec::new()));
}

/// Stops capturing and returns what was captured.
pub(crate) fn capture_take() -> Vec<LogRecord> {
    CAPTURE.with(|capture| capture.borrow_mut().take().unwrap_or_default())
}

/// Logs a formatted message at [`Level::Trace`].
#[macro_export]
macro_rules! trace {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Trace, &::std::format!($($arg)*)) };
}

/// Logs a formatted message at [`Level::Debug`].
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Debug, &::std::format!($($arg)*)) };
}

/// Logs a formatted message at [`Level::Info`].
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Info, &::std::format!($($arg)*)) };
}

/// Logs a formatted message at [`Level::Warn`].
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Warn, &::std::format!($($arg)*)) };
}

/// Logs a formatted message at [`Level::Error`].
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Error, &::std::format!($($arg)*)) };
}
