//! Fast paths for the CBOR of state values: a decoder and an encoder for their common
//! shapes, each answering exactly as `ciborium` (which has the last word) would, or
//! giving up so that `ciborium` does the work. The encoder's bytes must be
//! `ciborium`'s byte for byte: a map's user keys are compared and ordered as encoded.

use std::fmt;

use serde::de;

mod decode;
mod encode;

pub(crate) use decode::from_slice;
pub(crate) use encode::to_vec;

/// How deep arrays and maps may nest before a fast path leaves them to `ciborium`.
const MAX_DEPTH: usize = 128;

/// Why a fast path stopped (never shown: `ciborium` does the work instead).
#[derive(Debug)]
pub(crate) struct GaveUp;

impl fmt::Display for GaveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("left to ciborium")
    }
}

impl std::error::Error for GaveUp {}

impl de::Error for GaveUp {
    fn custom<T: fmt::Display>(_: T) -> Self {
        GaveUp
    }
}

impl serde::ser::Error for GaveUp {
    fn custom<T: fmt::Display>(_: T) -> Self {
        GaveUp
    }
}

// Major types and simple values.
const POSITIVE: u8 = 0;
const NEGATIVE: u8 = 1;
const BYTES: u8 = 2;
const TEXT: u8 = 3;
const ARRAY: u8 = 4;
const MAP: u8 = 5;
const SIMPLE: u8 = 7;
const FALSE: u8 = 20;
const TRUE: u8 = 21;
const NULL: u8 = 22;
const UNDEFINED: u8 = 23;
const HALF: u8 = 25;
const SINGLE: u8 = 26;
const DOUBLE: u8 = 27;
