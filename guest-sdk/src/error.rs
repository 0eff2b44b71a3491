//! The error type that processor handlers return.

use std::fmt;

/// An error from a processor or from the SDK.
///
/// A handler that returns `Err` fails the batch: the host commits nothing of it and
/// reports the message together with the module, the function and the key. Any
/// [`std::error::Error`] converts into it with `?`; build one from a message with
/// [`Error::msg`] or the [`bail!`](crate::bail) macro.
pub struct Error {
    message: String,
}

/// `Result<T, eddy_guest::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with the given message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Error { message: message.to_string() }
    }

    /// This error with `context` put in front of its message (`context: message`).
    pub fn context(self, context: impl fmt::Display) -> Self {
        Error { message: format!("{context}: {}", self.message) }
    }

    /// The full message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message, consuming the error.
    pub fn into_message(self) -> String {
        self.message
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(error: E) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Error { message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Returns early with an [`Error`] built from a format string.
///
/// ```
/// fn check(threshold: f64) -> eddy_guest::Result<()> {
///     if threshold.is_nan() {
///         eddy_guest::bail!("threshold must be a number, got {threshold}");
///     }
///     Ok(())
/// }
/// assert!(check(f64::NAN).is_err());
/// ```
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => {
        return ::core::result::Result::Err($crate::Error::msg(::std::format!($($arg)*)))
    };
}
