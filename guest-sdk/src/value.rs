//! Scalar values: owned ([`Value`]) and borrowed ([`Datum`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::schema::DataType;

/// One owned scalar value, e.g. a key part or a cell read back from a batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    /// No value.
    Null,
    /// A boolean.
    Boolean(bool),
    /// A 64-bit signed integer.
    Int64(i64),
    /// A 64-bit float.
    Float64(f64),
    /// UTF-8 text.
    Utf8(String),
    /// Raw bytes.
    Binary(Vec<u8>),
    /// Microseconds since the Unix epoch, UTC.
    Timestamp(i64),
}

impl Value {
    /// The value's type; `None` for [`Value::Null`].
    pub fn data_type(&self) -> Option<DataType> {
        self.as_datum().data_type()
    }

    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A borrowed view of this value.
    pub fn as_datum(&self) -> Datum<'_> {
        match self {
            Value::Null => Datum::Null,
            Value::Boolean(v) => Datum::Boolean(*v),
            Value::Int64(v) => Datum::Int64(*v),
            Value::Float64(v) => Datum::Float64(*v),
            Value::Utf8(v) => Datum::Utf8(v),
            Value::Binary(v) => Datum::Binary(v),
            Value::Timestamp(v) => Datum::Timestamp(*v),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_datum().fmt(f)
    }
}

/// One borrowed scalar value: what output rows and test rows are built from.
///
/// Rust values convert into it with `From`: `bool`, `i64`, `f64`, `&str`, `&String`,
/// `&[u8]`, `Option<T>` (None is null) and `&Value`. A timestamp is
/// `Datum::Timestamp(micros)`; an `i64` is also accepted for a `TIMESTAMP` column.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Datum<'a> {
    /// No value.
    Null,
    /// A boolean.
    Boolean(bool),
    /// A 64-bit signed integer.
    Int64(i64),
    /// A 64-bit float.
    Float64(f64),
    /// UTF-8 text.
    Utf8(&'a str),
    /// Raw bytes.
    Binary(&'a [u8]),
    /// Microseconds since the Unix epoch, UTC.
    Timestamp(i64),
}

impl Datum<'_> {
    /// The value's type; `None` for [`Datum::Null`].
    pub fn data_type(&self) -> Option<DataType> {
        Some(match self {
            Datum::Null => return None,
            Datum::Boolean(_) => DataType::Boolean,
            Datum::Int64(_) => DataType::Int64,
            Datum::Float64(_) => DataType::Float64,
            Datum::Utf8(_) => DataType::Utf8,
            Datum::Binary(_) => DataType::Binary,
            Datum::Timestamp(_) => DataType::Timestamp,
        })
    }

    /// An owned copy of this value.
    pub fn to_value(&self) -> Value {
        match *self {
            Datum::Null => Value::Null,
            Datum::Boolean(v) => Value::Boolean(v),
            Datum::Int64(v) => Value::Int64(v),
            Datum::Float64(v) => Value::Float64(v),
            Datum::Utf8(v) => Value::Utf8(v.to_string()),
            Datum::Binary(v) => Value::Binary(v.to_vec()),
            Datum::Timestamp(v) => Value::Timestamp(v),
        }
    }
}

impl fmt::Display for Datum<'_> {
    /// Text as is, bytes as `0x` hex, timestamps as `micros µs`, null as `null`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Datum::Null => f.write_str("null"),
            Datum::Boolean(v) => write!(f, "{v}"),
            Datum::Int64(v) => write!(f, "{v}"),
            Datum::Float64(v) => write!(f, "{v}"),
            Datum::Utf8(v) => f.write_str(v),
            Datum::Binary(v) => {
                f.write_str("0x")?;
                v.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
            }
            Datum::Timestamp(v) => write!(f, "{v}µs"),
        }
    }
}

macro_rules! datum_from {
    ($($ty:ty => |$v:ident| $make:expr),* $(,)?) => {$(
        impl<'a> From<$ty> for Datum<'a> {
            fn from($v: $ty) -> Self {
                $make
            }
        }
    )*};
}

datum_from! {
    bool => |v| Datum::Boolean(v),
    i64 => |v| Datum::Int64(v),
    f64 => |v| Datum::Float64(v),
    &'a str => |v| Datum::Utf8(v),
    &'a String => |v| Datum::Utf8(v),
    &'a [u8] => |v| Datum::Binary(v),
    &'a Vec<u8> => |v| Datum::Binary(v),
    &'a Value => |v| v.as_datum(),
}

impl<'a, T: Into<Datum<'a>>> From<Option<T>> for Datum<'a> {
    fn from(value: Option<T>) -> Self {
        value.map_or(Datum::Null, Into::into)
    }
}

macro_rules! value_from {
    ($($ty:ty => |$v:ident| $make:expr),* $(,)?) => {$(
        impl From<$ty> for Value {
            fn from($v: $ty) -> Self {
                $make
            }
        }
    )*};
}

value_from! {
    bool => |v| Value::Boolean(v),
    i64 => |v| Value::Int64(v),
    f64 => |v| Value::Float64(v),
    &str => |v| Value::Utf8(v.to_string()),
    String => |v| Value::Utf8(v),
    Vec<u8> => |v| Value::Binary(v),
}

/// Builds one row (an array of [`Datum`]) from Rust values, for
/// [`Output::append_row`](crate::Output::append_row) and the
/// [test harness](crate::testing).
///
/// ```
/// use eddy_guest::{row, Datum};
///
/// let r = row!["alice", 5, 2.5, None::<i64>];
/// assert_eq!(r, [Datum::Utf8("alice"), Datum::Int64(5), Datum::Float64(2.5), Datum::Null]);
/// ```
#[macro_export]
macro_rules! row {
    ($($value:expr),* $(,)?) => {
        [$($crate::Datum::from($value)),*]
    };
}
