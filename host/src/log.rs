//! Minimal leveled logging to stderr. `EDDY_LOG=trace|debug|info|warn|error` sets
//! the threshold (default `info`). Control characters in a message (which may quote
//! data) are escaped: a value cannot inject terminal escape sequences.

use std::sync::OnceLock;

use crate::util::printable;

fn threshold() -> u8 {
    static THRESHOLD: OnceLock<u8> = OnceLock::new();
    *THRESHOLD.get_or_init(|| match std::env::var("EDDY_LOG").as_deref() {
        Ok("trace") => 0,
        Ok("debug") => 1,
        Ok("warn") => 3,
        Ok("error") => 4,
        _ => 2,
    })
}

/// How important a message is, least first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Step-by-step detail.
    Trace,
    /// Detail for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something looks wrong.
    Warn,
    /// Something failed.
    Error,
}

fn rank(level: Level) -> u8 {
    level as u8
}

/// A message a guest logged while handling `key`.
pub fn guest(module: &str, key: &str, level: Level, message: &str) {
    if rank(level) >= threshold() {
        let level = match level {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        };
        eprintln!("[{level} {} key={}] {}", printable(module), printable(key), printable(message));
    }
}

/// A warning from eddy itself.
pub fn warn(message: &str) {
    if rank(Level::Warn) >= threshold() {
        eprintln!("eddy: warning: {}", printable(message));
    }
}

/// Detail from eddy itself, for debugging.
pub fn debug(message: &str) {
    if rank(Level::Debug) >= threshold() {
        eprintln!("eddy: debug: {}", printable(message));
    }
}

/// Information from eddy itself.
pub fn info(message: &str) {
    if rank(Level::Info) >= threshold() {
        eprintln!("eddy: {}", printable(message));
    }
}
