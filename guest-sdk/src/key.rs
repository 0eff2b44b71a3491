//! The grouping key of a handler call.

use std::fmt;

use crate::error::{Error, Result};
use crate::value::Value;

/// The grouping key of the current call: one value per key column, in the key
/// schema's order. State variables and timers are scoped to it.
///
/// ```
/// use eddy_guest::{Key, Value};
///
/// let key = Key::new(vec![Value::from("alice"), Value::from(7)]);
/// assert_eq!(key.str(0)?, "alice");
/// assert_eq!(key.i64(1)?, 7);
/// assert_eq!(key.to_string(), "(alice, 7)");
/// # Ok::<(), eddy_guest::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    parts: Vec<Value>,
}

impl Key {
    /// A key of these parts.
    pub fn new(parts: Vec<Value>) -> Self {
        Key { parts }
    }

    /// The key's parts, in key-schema order.
    pub fn parts(&self) -> &[Value] {
        &self.parts
    }

    /// The part at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&Value> {
        self.parts.get(index)
    }

    /// The `STRING` part at `index`.
    pub fn str(&self, index: usize) -> Result<&str> {
        match self.part(index)? {
            Value::Utf8(v) => Ok(v),
            other => Err(self.mismatch(index, "STRING", other)),
        }
    }

    /// The `BIGINT` part at `index`.
    pub fn i64(&self, index: usize) -> Result<i64> {
        match self.part(index)? {
            Value::Int64(v) => Ok(*v),
            other => Err(self.mismatch(index, "BIGINT", other)),
        }
    }

    /// The `DOUBLE` part at `index`.
    pub fn f64(&self, index: usize) -> Result<f64> {
        match self.part(index)? {
            Value::Float64(v) => Ok(*v),
            other => Err(self.mismatch(index, "DOUBLE", other)),
        }
    }

    /// The `BOOLEAN` part at `index`.
    pub fn bool(&self, index: usize) -> Result<bool> {
        match self.part(index)? {
            Value::Boolean(v) => Ok(*v),
            other => Err(self.mismatch(index, "BOOLEAN", other)),
        }
    }

    /// The `BINARY` part at `index`.
    pub fn bytes(&self, index: usize) -> Result<&[u8]> {
        match self.part(index)? {
            Value::Binary(v) => Ok(v),
            other => Err(self.mismatch(index, "BINARY", other)),
        }
    }

    /// The `TIMESTAMP` part at `index`, in microseconds since the epoch.
    pub fn timestamp(&self, index: usize) -> Result<i64> {
        match self.part(index)? {
            Value::Timestamp(v) => Ok(*v),
            other => Err(self.mismatch(index, "TIMESTAMP", other)),
        }
    }

    fn part(&self, index: usize) -> Result<&Value> {
        self.parts
            .get(index)
            .ok_or_else(|| Error::msg(format!("key {self} has {} part(s); there is no part {index}", self.parts.len())))
    }

    fn mismatch(&self, index: usize, wanted: &str, found: &Value) -> Error {
        let found = found.data_type().map_or("NULL", |t| t.sql_name());
        Error::msg(format!("key {self}: part {index} is {found}, not {wanted}"))
    }
}

impl fmt::Display for Key {
    /// One part as its value, several as `(a, b)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [only] = self.parts.as_slice() {
            return write!(f, "{only}");
        }
        f.write_str("(")?;
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{part}")?;
        }
        f.write_str(")")
    }
}
