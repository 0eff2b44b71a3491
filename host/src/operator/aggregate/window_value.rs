//! A window's stored value (`builtin:window/v4`): after the expiry stamp, one CBOR
//! array of numbers in the order the stage's aggregate functions give, without names:
//!
//! ```text
//! [length, per aggregate: count → n | sum → sum | min → min | max → max | avg → n, sum]
//! ```
//!
//! `length` is the window's end minus its start (its start is the map key); a sum, min
//! or max not yet seen is `null`; integers stay integers, a DOUBLE's numbers are floats
//! (32-bit where that is the same number, else 64-bit). Every window's change-log
//! record carries this value: it is about half the bytes of the named CBOR map it
//! replaces (v3, `{"start", "end", "aggregates": [{"n", "sum", …}]}`), which `eddy
//! state read` still shows (see [`window_json`]).

use anyhow::{Context, Result, bail};

use super::cbor;
use super::running::{Number, Running, WindowState};
use crate::pipeline::AggregateFn;

/// CBOR's `null`.
const NULL: u8 = 0xf6;
/// The head of a 64-bit float.
const FLOAT64: u8 = 0xfb;
/// The head of a 32-bit float.
const FLOAT32: u8 = 0xfa;

/// How many numbers `function` keeps.
fn kept(function: AggregateFn) -> u64 {
    if function == AggregateFn::Avg { 2 } else { 1 }
}

/// Appends `window`'s value (without the stamp) for the aggregate `functions`.
pub fn encode(window: &WindowState, functions: &[AggregateFn], out: &mut Vec<u8>) {
    let aggregates = window.aggregates.iter().zip(functions);
    cbor::head(4, 1 + aggregates.clone().map(|(_, function)| kept(*function)).sum::<u64>(), out);
    cbor::int(window.end.wrapping_sub(window.start), out);
    for (running, function) in aggregates {
        match function {
            AggregateFn::Count => cbor::int(running.n, out),
            AggregateFn::Sum => number(running.sum, out),
            AggregateFn::Min => number(running.min, out),
            AggregateFn::Max => number(running.max, out),
            AggregateFn::Avg => {
                cbor::int(running.n, out);
                number(running.sum, out);
            }
        }
    }
}

fn number(value: Option<Number>, out: &mut Vec<u8>) {
    match value {
        None => out.push(NULL),
        Some(Number::Int(v)) => cbor::int(v, out),
        // As a 32-bit float when that is the same number (NaN stays NaN).
        Some(Number::Float(v)) if f64::from(v as f32).to_bits() == v.to_bits() || v.is_nan() => {
            out.push(FLOAT32);
            out.extend_from_slice(&(v as f32).to_bits().to_be_bytes());
        }
        Some(Number::Float(v)) => {
            out.push(FLOAT64);
            out.extend_from_slice(&v.to_bits().to_be_bytes());
        }
    }
}

/// The window starting at `start` whose value (without the stamp) is `payload`, with
/// what each of `functions` keeps (the rest of its running state empty).
pub fn decode(start: i64, payload: &[u8], functions: &[AggregateFn]) -> Result<WindowState> {
    let mut reader = Reader(payload);
    let items = reader.array()?;
    let expected = 1 + functions.iter().map(|function| kept(*function)).sum::<u64>();
    if items != expected {
        bail!("a window holds {items} numbers where its length and its {} aggregates take {expected}", functions.len());
    }
    // The inverse of the encoding's wrapping subtraction, also for the longest windows.
    let end = start.wrapping_add(reader.int()?);
    let mut aggregates = Vec::with_capacity(functions.len());
    for function in functions {
        let mut running = Running::default();
        match function {
            AggregateFn::Count => running.n = reader.int()?,
            AggregateFn::Sum => running.sum = reader.number()?,
            AggregateFn::Min => running.min = reader.number()?,
            AggregateFn::Max => running.max = reader.number()?,
            AggregateFn::Avg => {
                running.n = reader.int()?;
                running.sum = reader.number()?;
            }
        }
        aggregates.push(running);
    }
    if !reader.0.is_empty() {
        bail!("a window's value has {} bytes past its numbers", reader.0.len());
    }
    Ok(WindowState { start, end, aggregates })
}

/// The start a window's map key (one CBOR integer) holds.
pub fn decode_start(map_key: &[u8]) -> Result<i64> {
    let mut reader = Reader(map_key);
    let start = reader.int()?;
    if !reader.0.is_empty() {
        bail!("a window's map key has bytes past its start");
    }
    Ok(start)
}

/// A window's value as `eddy state read` shows it: `{"start", "end", "aggregates"}`,
/// each aggregate with the numbers it keeps by name (`n`, `sum`, `min`, `max`).
pub fn window_json(map_key: &[u8], payload: &[u8], functions: &[AggregateFn]) -> Result<serde_json::Value> {
    let window = decode(decode_start(map_key)?, payload, functions)?;
    Ok(serde_json::to_value(window)?)
}

/// Reads the CBOR items of a window's value from the front of a slice.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.0.len() < n {
            bail!("a window's value ends within a number");
        }
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(taken)
    }

    /// The next item's major type and argument.
    fn head(&mut self) -> Result<(u8, u64)> {
        let first = self.take(1)?[0];
        let size = match first & 0x1f {
            info @ 0..=23 => return Ok((first >> 5, u64::from(info))),
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            _ => bail!("a window's value holds an item of indefinite or reserved length (byte {first:#04x})"),
        };
        let mut argument = [0u8; 8];
        argument[8 - size..].copy_from_slice(self.take(size)?);
        Ok((first >> 5, u64::from_be_bytes(argument)))
    }

    fn array(&mut self) -> Result<u64> {
        match self.head()? {
            (4, items) => Ok(items),
            (major, _) => bail!("a window's value is a CBOR item of major type {major}, not an array"),
        }
    }

    /// An integer (`None`: the next item is a float or `null`, left unread).
    fn try_int(&mut self) -> Result<Option<i64>> {
        match self.0.first().map(|first| first >> 5) {
            None => bail!("a window's value ends within a number"),
            Some(0 | 1) => {}
            Some(_) => return Ok(None),
        }
        let (major, argument) = self.head()?;
        let magnitude =
            i64::try_from(argument).ok().context("a window's value holds an integer beyond 64-bit range")?;
        Ok(Some(if major == 0 { magnitude } else { !magnitude }))
    }

    fn int(&mut self) -> Result<i64> {
        self.try_int()?.context("a window's value holds something else where a count or length belongs")
    }

    fn number(&mut self) -> Result<Option<Number>> {
        if let Some(int) = self.try_int()? {
            return Ok(Some(Number::Int(int)));
        }
        match self.take(1)?[0] {
            NULL => Ok(None),
            FLOAT64 => Ok(Some(Number::Float(f64::from_bits(u64::from_be_bytes(self.take(8)?.try_into()?))))),
            FLOAT32 => Ok(Some(Number::Float(f32::from_bits(u32::from_be_bytes(self.take(4)?.try_into()?)).into()))),
            other => bail!("a window's value holds an item (byte {other:#04x}) where a number belongs"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::aggregate::running;

    const FUNCTIONS: [AggregateFn; 5] =
        [AggregateFn::Count, AggregateFn::Sum, AggregateFn::Min, AggregateFn::Max, AggregateFn::Avg];

    fn full(n: i64, value: Number) -> Running {
        Running { n, sum: Some(value), min: Some(value), max: Some(value) }
    }

    /// `window` with only what each aggregate keeps.
    fn trimmed(window: &WindowState) -> WindowState {
        WindowState { aggregates: running::trimmed(&window.aggregates, &FUNCTIONS), ..window.clone() }
    }

    fn windows() -> Vec<WindowState> {
        vec![
            WindowState::new(0, 10, 5),
            WindowState { start: -1_000_000, end: i64::MAX, aggregates: vec![full(3, Number::Int(-7)); 5] },
            WindowState { start: 1 << 40, end: (1 << 40) + 24, aggregates: vec![full(300, Number::Int(65_536)); 5] },
            WindowState { start: 5, end: 6, aggregates: vec![full(1, Number::Float(2.5)); 5] },
            WindowState { start: 5, end: 6, aggregates: vec![full(2, Number::Float(f64::NEG_INFINITY)); 5] },
            WindowState { start: 5, end: 6, aggregates: vec![full(2, Number::Float(-18.3)); 5] },
            WindowState { start: 5, end: 6, aggregates: vec![full(2, Number::Float(-0.0)); 5] },
            WindowState { start: i64::MIN, end: 0, aggregates: vec![full(0, Number::Int(i64::MIN)); 5] },
            WindowState { start: 7, end: 9, aggregates: vec![full(i64::MAX, Number::Int(i64::MAX)); 5] },
        ]
    }

    /// A window's numbers as bits (NaN equal to itself, -0.0 not equal to 0.0).
    fn bits(window: &WindowState) -> Vec<Option<(bool, u64)>> {
        let number = |number: Option<Number>| {
            number.map(|number| match number {
                Number::Int(v) => (false, v as u64),
                Number::Float(v) => (true, v.to_bits()),
            })
        };
        let mut bits = vec![Some((false, window.start as u64)), Some((false, window.end as u64))];
        for running in &window.aggregates {
            bits.extend([
                Some((false, running.n as u64)),
                number(running.sum),
                number(running.min),
                number(running.max),
            ]);
        }
        bits
    }

    #[test]
    fn a_window_decodes_to_what_each_aggregate_keeps() -> Result<()> {
        let mut cases = windows();
        cases.push(WindowState { start: 5, end: 6, aggregates: vec![full(2, Number::Float(f64::NAN)); 5] });
        for window in cases {
            let mut encoded = Vec::new();
            encode(&window, &FUNCTIONS, &mut encoded);
            let decoded = decode(window.start, &encoded, &FUNCTIONS)?;
            assert_eq!(bits(&decoded), bits(&trimmed(&window)), "{window:?}");
        }
        Ok(())
    }

    /// serde's CBOR reader (an independent decoder) reads the same numbers, in order.
    #[test]
    fn the_value_is_one_cbor_array_of_numbers() -> Result<()> {
        let window = &windows()[3];
        let mut encoded = Vec::new();
        encode(window, &FUNCTIONS, &mut encoded);
        let read: ciborium::Value = ciborium::from_reader(encoded.as_slice())?;
        let numbers = read.as_array().context("an array")?;
        assert_eq!(numbers.len(), 1 + 6);
        assert_eq!(numbers[0].as_integer().map(i128::from), Some(1));
        assert_eq!(numbers[1].as_integer().map(i128::from), Some(1));
        assert!(numbers[2..5].iter().all(|n| n.as_float() == Some(2.5)), "{numbers:?}");
        // v3's named map of a window of integers took more than twice the bytes.
        let window = &windows()[2];
        let (mut encoded, mut named) = (Vec::new(), Vec::new());
        encode(window, &FUNCTIONS, &mut encoded);
        ciborium::into_writer(&trimmed(window), &mut named)?;
        assert!(encoded.len() * 2 < named.len(), "{} against {}", encoded.len(), named.len());
        Ok(())
    }

    /// `eddy state read` shows a window as it showed v3's named CBOR map of it (read
    /// here by serde's CBOR reader into JSON).
    #[test]
    fn the_reader_shows_a_window_as_v3_showed_it() -> Result<()> {
        for window in windows() {
            let (mut map_key, mut encoded, mut named) = (Vec::new(), Vec::new(), Vec::new());
            cbor::int(window.start, &mut map_key);
            encode(&window, &FUNCTIONS, &mut encoded);
            ciborium::into_writer(&trimmed(&window), &mut named)?;
            let v3: serde_json::Value = ciborium::from_reader(named.as_slice())?;
            assert_eq!(window_json(&map_key, &encoded, &FUNCTIONS)?, v3, "{window:?}");
        }
        let window = WindowState { start: 20, end: 30, aggregates: vec![full(2, Number::Int(4)); 5] };
        let (mut map_key, mut encoded) = (Vec::new(), Vec::new());
        cbor::int(window.start, &mut map_key);
        encode(&window, &FUNCTIONS, &mut encoded);
        let shown = window_json(&map_key, &encoded, &FUNCTIONS)?;
        assert_eq!(shown["aggregates"][4], serde_json::json!({"n": 2, "sum": 4}));
        assert_eq!(shown["aggregates"][0], serde_json::json!({"n": 2}));
        assert_eq!((&shown["start"], &shown["end"]), (&serde_json::json!(20), &serde_json::json!(30)));
        Ok(())
    }

    #[test]
    fn a_value_that_does_not_fit_the_aggregates_is_an_error() {
        let mut encoded = Vec::new();
        encode(&windows()[1], &FUNCTIONS, &mut encoded);
        let error = |payload: &[u8], functions: &[AggregateFn]| match decode(0, payload, functions) {
            Ok(window) => panic!("decoded {window:?}"),
            Err(error) => error.to_string(),
        };
        assert!(
            error(&encoded, &FUNCTIONS[..4]).contains("holds 7 numbers where its length and its 4 aggregates take 5")
        );
        assert!(error(&encoded[..encoded.len() - 1], &FUNCTIONS).contains("ends within a number"));
        assert!(error(&[&encoded[..], &[0]].concat(), &FUNCTIONS).contains("bytes past its numbers"));
        assert!(error(b"\xa1\x61n\x01", &FUNCTIONS).contains("not an array"));
        assert!(error(b"\x82\x0a\xf6", &[AggregateFn::Count]).contains("where a count or length belongs"));
        assert!(
            error(b"\x82\x1b\xff\xff\xff\xff\xff\xff\xff\xff\x01", &[AggregateFn::Count])
                .contains("beyond 64-bit range")
        );
    }
}
