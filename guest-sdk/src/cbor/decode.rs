//! A fast decoder for the common shapes of CBOR state values (maps, arrays, text,
//! integers, floats, booleans, null), read straight from the slice. It answers as
//! `ciborium` (which encodes every state value) would, visitor call for visitor call,
//! or gives up: on tags, indefinite lengths, enums, big integers, deep nesting, or any
//! error, and the caller then decodes with `ciborium`, which has the last word (and
//! the error message). A struct decoded by `ciborium` pulls each header through
//! several layers; here a small struct takes a few dozen instructions.

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::{
    ARRAY, BYTES, DOUBLE, FALSE, GaveUp, HALF, MAP, MAX_DEPTH, NEGATIVE, NULL, POSITIVE, SIMPLE, SINGLE, TEXT, TRUE,
    UNDEFINED,
};

/// The most bytes `ciborium` reads a borrowed text or byte string into (its scratch
/// buffer, 4 KiB as the SDK gives it); longer ones it refuses there.
const SCRATCH_BYTES: usize = 4096;

/// `bytes` decoded as a `T`, when the fast path can (the whole input, nothing left).
pub(crate) fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    let mut decoder = Decoder { bytes, at: 0, depth: 0 };
    let value = T::deserialize(&mut decoder).ok()?;
    (decoder.at == bytes.len()).then_some(value)
}

/// One item's head: its major type, its additional information and its argument.
#[derive(Clone, Copy)]
struct Head {
    major: u8,
    info: u8,
    arg: u64,
}

struct Decoder<'de> {
    bytes: &'de [u8],
    at: usize,
    depth: usize,
}

type Result<T> = std::result::Result<T, GaveUp>;

impl<'de> Decoder<'de> {
    // The helpers below run once or more per item: inlined into every visitor's path
    // (LLVM left `head` out of line), a state value decodes about 3 % faster.
    #[inline(always)]
    fn take(&mut self, len: usize) -> Result<&'de [u8]> {
        let end = self.at.checked_add(len).filter(|end| *end <= self.bytes.len()).ok_or(GaveUp)?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn peek(&self) -> Result<Head> {
        let mut ahead = Decoder { bytes: self.bytes, at: self.at, depth: self.depth };
        ahead.head()
    }

    /// The next item's head; tags, indefinite lengths and reserved values give up.
    #[inline(always)]
    fn head(&mut self) -> Result<Head> {
        let first = *self.take(1)?.first().ok_or(GaveUp)?;
        let (major, info) = (first >> 5, first & 31);
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.take(1)?[0]),
            25 => u64::from(u16::from_be_bytes(self.take(2)?.try_into().map_err(|_| GaveUp)?)),
            26 => u64::from(u32::from_be_bytes(self.take(4)?.try_into().map_err(|_| GaveUp)?)),
            27 => u64::from_be_bytes(self.take(8)?.try_into().map_err(|_| GaveUp)?),
            _ => return Err(GaveUp),
        };
        if major == 6 || (major == SIMPLE && info == 24) {
            return Err(GaveUp);
        }
        Ok(Head { major, info, arg })
    }

    #[inline(always)]
    fn len(arg: u64) -> Result<usize> {
        usize::try_from(arg).map_err(|_| GaveUp)
    }

    #[inline(always)]
    fn text(&mut self, head: Head) -> Result<&'de str> {
        let len = Self::len(head.arg)?;
        std::str::from_utf8(self.take(len)?).map_err(|_| GaveUp)
    }

    fn nested<T>(&mut self, nest: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.depth >= MAX_DEPTH {
            return Err(GaveUp);
        }
        self.depth += 1;
        let result = nest(self);
        self.depth -= 1;
        result
    }

    fn seq<V: Visitor<'de>>(&mut self, len: u64, visitor: V) -> Result<V::Value> {
        let left = Self::len(len)?;
        self.nested(|me| {
            let mut items = Items { decoder: me, left };
            let value = visitor.visit_seq(&mut items)?;
            if items.left == 0 { Ok(value) } else { Err(GaveUp) }
        })
    }

    fn map<V: Visitor<'de>>(&mut self, len: u64, visitor: V) -> Result<V::Value> {
        let left = Self::len(len)?;
        self.nested(|me| {
            let mut entries = Entries { decoder: me, left };
            let value = visitor.visit_map(&mut entries)?;
            if entries.left == 0 { Ok(value) } else { Err(GaveUp) }
        })
    }

    /// A float's value (`ciborium` widens every width to f64).
    #[inline(always)]
    fn float(head: Head) -> Result<f64> {
        match (head.major, head.info) {
            (SIMPLE, HALF) => f16_to_f64(head.arg as u16),
            (SIMPLE, SINGLE) => Ok(f64::from(f32::from_bits(head.arg as u32))),
            (SIMPLE, DOUBLE) => Ok(f64::from_bits(head.arg)),
            _ => Err(GaveUp),
        }
    }

    /// An integer's sign and magnitude (`true`: the value is -1 - magnitude).
    #[inline(always)]
    fn integer(head: Head) -> Result<(bool, u64)> {
        match head.major {
            POSITIVE => Ok((false, head.arg)),
            NEGATIVE => Ok((true, head.arg)),
            _ => Err(GaveUp),
        }
    }
}

/// An IEEE 754 half-precision float's value (a NaN is left to `ciborium`, which keeps
/// its payload).
fn f16_to_f64(bits: u16) -> Result<f64> {
    let exponent = i32::from((bits >> 10) & 0x1f);
    let fraction = f64::from(bits & 0x3ff);
    let magnitude = match exponent {
        // fraction × 2^-24 and (1 + fraction / 1024) × 2^(exponent - 15), exactly.
        0 => fraction * f64::from_bits(((1023 - 24) as u64) << 52),
        31 if fraction == 0.0 => f64::INFINITY,
        31 => return Err(GaveUp),
        _ => f64::from_bits((((exponent - 15 + 1023) as u64) << 52) | (u64::from(bits & 0x3ff) << 42)),
    };
    Ok(if bits & 0x8000 != 0 { -magnitude } else { magnitude })
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'de> {
    type Error = GaveUp;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let head = self.peek()?;
        match (head.major, head.info) {
            (POSITIVE, _) => self.deserialize_u64(visitor),
            (NEGATIVE, _) if head.arg <= i64::MAX as u64 => self.deserialize_i64(visitor),
            (BYTES, _) if Decoder::len(head.arg)? <= SCRATCH_BYTES => self.deserialize_bytes(visitor),
            (BYTES, _) => self.deserialize_byte_buf(visitor),
            (TEXT, _) if Decoder::len(head.arg)? <= SCRATCH_BYTES => self.deserialize_str(visitor),
            (TEXT, _) => self.deserialize_string(visitor),
            (ARRAY, _) => self.deserialize_seq(visitor),
            (MAP, _) => self.deserialize_map(visitor),
            (SIMPLE, HALF | SINGLE | DOUBLE) => self.deserialize_f64(visitor),
            (SIMPLE, FALSE | TRUE) => self.deserialize_bool(visitor),
            (SIMPLE, NULL | UNDEFINED) => self.deserialize_option(visitor),
            _ => Err(GaveUp),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.head()? {
            Head { major: SIMPLE, info: FALSE, .. } => visitor.visit_bool(false),
            Head { major: SIMPLE, info: TRUE, .. } => visitor.visit_bool(true),
            _ => Err(GaveUp),
        }
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let (negative, magnitude) = Decoder::integer(self.head()?)?;
        let value = i64::try_from(magnitude).map_err(|_| GaveUp)?;
        visitor.visit_i64(if negative { value ^ !0 } else { value })
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match Decoder::integer(self.head()?)? {
            (false, value) => visitor.visit_u64(value),
            (true, _) => Err(GaveUp),
        }
    }

    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let (negative, magnitude) = Decoder::integer(self.head()?)?;
        let value = i128::from(magnitude);
        visitor.visit_i128(if negative { value ^ !0 } else { value })
    }

    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match Decoder::integer(self.head()?)? {
            (false, value) => visitor.visit_u128(u128::from(value)),
            (true, _) => Err(GaveUp),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_f64(Decoder::float(self.head()?)?)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let head = self.head()?;
        if head.major != TEXT || Decoder::len(head.arg)? > SCRATCH_BYTES {
            return Err(GaveUp);
        }
        visitor.visit_str(self.text(head)?)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let head = self.head()?;
        if head.major != TEXT {
            return Err(GaveUp);
        }
        visitor.visit_string(self.text(head)?.to_string())
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let head = self.head()?;
        if Decoder::len(head.arg)? > SCRATCH_BYTES {
            return Err(GaveUp);
        }
        match head.major {
            TEXT => visitor.visit_str(self.text(head)?),
            BYTES => visitor.visit_bytes(self.take(Decoder::len(head.arg)?)?),
            _ => Err(GaveUp),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.head()? {
            head @ Head { major: BYTES, .. } if Decoder::len(head.arg)? <= SCRATCH_BYTES => {
                visitor.visit_bytes(self.take(Decoder::len(head.arg)?)?)
            }
            Head { major: ARRAY, arg, .. } => self.seq(arg, visitor),
            _ => Err(GaveUp),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.head()? {
            Head { major: BYTES, arg, .. } => visitor.visit_byte_buf(self.take(Decoder::len(arg)?)?.to_vec()),
            Head { major: ARRAY, arg, .. } => self.seq(arg, visitor),
            _ => Err(GaveUp),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek()? {
            Head { major: SIMPLE, info: NULL | UNDEFINED, .. } => {
                self.head()?;
                visitor.visit_none()
            }
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.head()? {
            Head { major: SIMPLE, info: NULL | UNDEFINED, .. } => visitor.visit_unit(),
            _ => Err(GaveUp),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.head()? {
            Head { major: ARRAY, arg, .. } => self.seq(arg, visitor),
            _ => Err(GaveUp),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.head()? {
            Head { major: MAP, arg, .. } => self.map(arg, visitor),
            _ => Err(GaveUp),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_map(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_u64(visitor)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_u64(visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_u64(visitor)
    }

    /// Characters and enums are left to `ciborium`.
    fn deserialize_char<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(GaveUp)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(GaveUp)
    }
}

/// The items of an array.
struct Items<'a, 'de> {
    decoder: &'a mut Decoder<'de>,
    left: usize,
}

impl<'de> SeqAccess<'de> for &mut Items<'_, 'de> {
    type Error = GaveUp;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.decoder).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

/// The entries of a map.
struct Entries<'a, 'de> {
    decoder: &'a mut Decoder<'de>,
    left: usize,
}

impl<'de> MapAccess<'de> for &mut Entries<'_, 'de> {
    type Error = GaveUp;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.decoder).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(&mut *self.decoder)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};
    use std::fmt::Debug;

    use serde::de::DeserializeOwned;
    use serde::{Deserialize, Serialize};

    use super::from_slice;
    use crate::state::decode;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Stats {
        min: f64,
        max: f64,
        sum: f64,
        count: i64,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Wrapper(i32);

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Nested {
        name: String,
        tags: Vec<String>,
        score: Option<f32>,
        missing: Option<u16>,
        pair: (u8, i16),
        inner: Option<Box<Nested>>,
        counts: BTreeMap<String, u64>,
        by_number: BTreeMap<i64, bool>,
        unit: (),
        newtype: Wrapper,
        raw: Vec<u8>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Kind {
        Plain,
        Carrying(i64),
    }

    fn cbor<T: Serialize>(value: &T) -> Vec<u8> {
        let mut bytes = Vec::new();
        ciborium::into_writer(value, &mut bytes).expect("encodes");
        bytes
    }

    /// What `ciborium`, the reference, decodes from `bytes`.
    fn reference<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
        ciborium::from_reader(bytes).map_err(|e| e.to_string())
    }

    /// The fast path decodes `value`'s CBOR to what `ciborium` decodes.
    fn fast<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: T) {
        let bytes = cbor(&value);
        let decoded: Option<T> = from_slice(&bytes);
        assert_eq!(decoded.as_ref(), Some(&reference::<T>(&bytes).expect("reference")), "{value:?}");
        assert_eq!(decoded.as_ref(), Some(&value));
    }

    /// The fast path leaves `bytes` to `ciborium`, and `decode` answers as it does.
    fn left<T: DeserializeOwned + PartialEq + Debug>(bytes: &[u8]) {
        assert!(from_slice::<T>(bytes).is_none(), "{bytes:x?} left to ciborium");
        match (decode::<T>("v", bytes), reference::<T>(bytes)) {
            (Ok(decoded), Ok(expected)) => assert_eq!(decoded, expected),
            (Err(error), Err(expected)) => assert!(error.to_string().contains(&expected), "{error} / {expected}"),
            (got, expected) => panic!("decode gave {got:?}, ciborium {expected:?}"),
        }
    }

    fn nested(depth: usize) -> Nested {
        Nested {
            name: "é漢🙂".repeat(depth + 1),
            tags: vec![String::new(), "x".repeat(5000)],
            score: Some(0.1),
            missing: None,
            pair: (255, -32768),
            inner: (depth > 0).then(|| Box::new(nested(depth - 1))),
            counts: [("a".to_string(), u64::MAX), ("b".to_string(), 24)].into(),
            by_number: [(-1, true), (i64::MIN, false), (256, true)].into(),
            unit: (),
            newtype: Wrapper(-7),
            raw: vec![0, 1, 255],
        }
    }

    #[test]
    fn every_half_precision_float_decodes_as_ciborium_decodes_it() {
        for bits in 0..=u16::MAX {
            let [high, low] = bits.to_be_bytes();
            let bytes = [0xf9, high, low];
            let reference: f64 = ciborium::from_reader(bytes.as_slice()).expect("ciborium decodes");
            match from_slice::<f64>(&bytes) {
                Some(value) => assert_eq!(value.to_bits(), reference.to_bits(), "half {bits:#06x}"),
                None => assert!(reference.is_nan(), "half {bits:#06x} left to ciborium"),
            }
        }
    }

    #[test]
    fn the_fast_path_decodes_what_ciborium_decodes() {
        // Floats ciborium writes as half, single and double precision.
        for value in [0.5, 1.0 / 3.0, 0.1f32 as f64, -0.0, 65504.0, 6e-8, 1e300, f64::INFINITY, f64::NEG_INFINITY] {
            fast(Stats { min: value, max: -value, sum: value * 3.0, count: 2 });
        }
        for count in [0, 23, 24, 255, 256, 65535, 65536, -1, -24, -25, -257, i64::MIN, i64::MAX] {
            fast(Stats { min: 1.0, max: 2.0, sum: 3.0, count });
        }
        fast(u64::MAX);
        fast(i128::from(i64::MIN));
        fast((i8::MIN, u32::MAX, "text".to_string(), true, false));
        fast(vec![Some(1.5), None, Some(-2.25)]);
        fast(HashMap::from([("k".to_string(), vec![1u8, 2, 3])]));
        fast(nested(3));
        fast(serde_json::json!({"a": [1, -2, 3.5, null, true, "s", {"b": []}]}));
    }

    #[test]
    fn what_the_fast_path_does_not_take_is_left_to_ciborium() {
        left::<Kind>(&cbor(&Kind::Plain));
        left::<Kind>(&cbor(&Kind::Carrying(3)));
        left::<u128>(&cbor(&u128::MAX));
        left::<char>(&cbor(&'x'));
        left::<i64>(&cbor(&"not a number"));
        left::<f64>(&cbor(&3i64));
        left::<u8>(&cbor(&-1i64));
        left::<i64>(&cbor(&u64::MAX));
        left::<Stats>(&[cbor(&Stats { min: 1.0, max: 2.0, sum: 3.0, count: 1 }), vec![0]].concat());
        left::<Stats>(&cbor(&Stats { min: 1.0, max: 2.0, sum: 3.0, count: 1 })[..10]);
        left::<String>(&[0x7f, 0x61, 0x61, 0xff]);
        let deep = (0..200).fold(serde_json::json!(1), |inner, _| serde_json::json!([inner]));
        left::<serde_json::Value>(&cbor(&deep));
    }
}
