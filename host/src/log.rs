//! Minimal leveled logging to stderr. `EDDY_LOG=trace|debug|info|warn|error` sets
//! the threshold (default `info`).

use std::sync::OnceLock;

use crate::wasm::LogLevel;

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

fn rank(level: LogLevel) -> u8 {
    match level {
        LogLevel::Trace => 0,
        LogLevel::Debug => 1,
        LogLevel::Info => 2,
        LogLevel::Warn => 3,
        LogLevel::Error => 4,
    }
}

/// A message a guest logged while handling `key`.
pub fn guest(module: &str, key: &str, level: LogLevel, message: &str) {
    if rank(level) >= threshold() {
        let level = match level {
            LogLevel::Trace => "TRACE",
            LogLevel::Debug => "DEBUG",
            LogLevel::Info => "INFO",
            LogLevel::Warn => "WARN",
            LogLevel::Error => "ERROR",
        };
        eprintln!("[{level} {module} key={key}] {message}");
    }
}

/// A warning from eddy itself.
pub fn warn(message: &str) {
    if rank(LogLevel::Warn) >= threshold() {
        eprintln!("eddy: warning: {message}");
    }
}

/// Information from eddy itself.
pub fn info(message: &str) {
    if rank(LogLevel::Info) >= threshold() {
        eprintln!("eddy: {message}");
    }
}
