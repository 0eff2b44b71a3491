//! A fast encoder for the common shapes of state values and map keys (structs, maps,
//! sequences, text, bytes, integers, floats, booleans, null and unit enum variants),
//! writing `ciborium`'s bytes exactly: the shortest head for every integer and length,
//! a float in the narrowest of half, single and double precision that holds it
//! exactly. It gives up on what it does not know (NaNs, 128-bit integers, characters,
//! enum variants with data, unknown lengths, deep nesting); the caller then encodes
//! with `ciborium`. `ciborium` takes its float's narrowest width through software
//! half-precision conversions, a few hundred instructions per float in WebAssembly.

use serde::ser::{self, Serialize};

use super::{
    ARRAY, BYTES, DOUBLE, FALSE, GaveUp, HALF, MAP, MAX_DEPTH, NEGATIVE, NULL, POSITIVE, SIMPLE, SINGLE, TEXT, TRUE,
};

type Result<T> = std::result::Result<T, GaveUp>;

/// `value` encoded as `ciborium` would, appended to `out`; `false` (with `out` as it
/// was) when the fast path gave up.
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let mut encoder = Encoder { out, depth: 0 };
    if value.serialize(&mut encoder).is_ok() {
        return true;
    }
    out.truncate(start);
    false
}

struct Encoder<'a> {
    out: &'a mut Vec<u8>,
    depth: usize,
}

impl Encoder<'_> {
    /// An item's head with `arg` in its shortest form.
    fn head(&mut self, major: u8, arg: u64) {
        let major = major << 5;
        match arg {
            0..=23 => self.out.push(major | arg as u8),
            24..=0xff => self.out.extend_from_slice(&[major | 24, arg as u8]),
            0x100..=0xffff => {
                self.out.push(major | 25);
                self.out.extend_from_slice(&(arg as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.out.push(major | 26);
                self.out.extend_from_slice(&(arg as u32).to_be_bytes());
            }
            _ => {
                self.out.push(major | 27);
                self.out.extend_from_slice(&arg.to_be_bytes());
            }
        }
    }

    fn string(&mut self, major: u8, bytes: &[u8]) {
        self.head(major, bytes.len() as u64);
        self.out.extend_from_slice(bytes);
    }

    fn simple(&mut self, value: u8) {
        self.out.push((SIMPLE << 5) | value);
    }

    /// Opens an array or map of `len` items (a known length: `ciborium` writes an
    /// unknown one as an indefinite item, left to it).
    fn open(&mut self, major: u8, len: Option<usize>) -> Result<&mut Self> {
        let len = len.ok_or(GaveUp)?;
        if self.depth >= MAX_DEPTH {
            return Err(GaveUp);
        }
        self.depth += 1;
        self.head(major, len as u64);
        Ok(self)
    }

    fn close(&mut self) {
        self.depth -= 1;
    }
}

/// The half-precision bits of `value` when it is one exactly (as `ciborium` checks:
/// widened back, the same bits), of a value that is not a NaN.
fn exact_half(value: f64) -> Option<u16> {
    let bits = value.to_bits();
    let sign = ((bits >> 48) & 0x8000) as u16;
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    match exponent {
        0 if fraction == 0 => Some(sign),
        0x7ff => Some(sign | 0x7c00),
        _ => {
            let power = exponent - 1023;
            if (-14..=15).contains(&power) {
                // A normal half: ten fraction bits.
                (fraction & ((1 << 42) - 1) == 0)
                    .then(|| sign | (((power + 15) as u16) << 10) | ((fraction >> 42) as u16))
            } else if (-24..-14).contains(&power) {
                // A subnormal half: the value is a whole number of 2^-24.
                let significand = (1 << 52) | fraction;
                let shift = (52 - (power + 24)) as u32;
                (significand & ((1 << shift) - 1) == 0).then(|| sign | (significand >> shift) as u16)
            } else {
                None
            }
        }
    }
}

impl ser::Serializer for &mut Encoder<'_> {
    type Ok = ();
    type Error = GaveUp;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = ser::Impossible<(), GaveUp>;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = ser::Impossible<(), GaveUp>;

    fn serialize_bool(self, v: bool) -> Result<()> {
        self.simple(if v { TRUE } else { FALSE });
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<()> {
        self.serialize_i64(v.into())
    }

    fn serialize_i16(self, v: i16) -> Result<()> {
        self.serialize_i64(v.into())
    }

    fn serialize_i32(self, v: i32) -> Result<()> {
        self.serialize_i64(v.into())
    }

    fn serialize_i64(self, v: i64) -> Result<()> {
        if v < 0 {
            self.head(NEGATIVE, !(v as u64));
        } else {
            self.head(POSITIVE, v as u64);
        }
        Ok(())
    }

    fn serialize_u8(self, v: u8) -> Result<()> {
        self.serialize_u64(v.into())
    }

    fn serialize_u16(self, v: u16) -> Result<()> {
        self.serialize_u64(v.into())
    }

    fn serialize_u32(self, v: u32) -> Result<()> {
        self.serialize_u64(v.into())
    }

    fn serialize_u64(self, v: u64) -> Result<()> {
        self.head(POSITIVE, v);
        Ok(())
    }

    fn serialize_f32(self, v: f32) -> Result<()> {
        self.serialize_f64(v.into())
    }

    fn serialize_f64(self, v: f64) -> Result<()> {
        if v.is_nan() {
            return Err(GaveUp);
        }
        if let Some(half) = exact_half(v) {
            self.simple(HALF);
            self.out.extend_from_slice(&half.to_be_bytes());
        } else if f64::from(v as f32).to_bits() == v.to_bits() {
            self.simple(SINGLE);
            self.out.extend_from_slice(&(v as f32).to_be_bytes());
        } else {
            self.simple(DOUBLE);
            self.out.extend_from_slice(&v.to_be_bytes());
        }
        Ok(())
    }

    fn serialize_char(self, _: char) -> Result<()> {
        Err(GaveUp)
    }

    fn serialize_str(self, v: &str) -> Result<()> {
        self.string(TEXT, v.as_bytes());
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<()> {
        self.string(BYTES, v);
        Ok(())
    }

    fn serialize_none(self) -> Result<()> {
        self.simple(NULL);
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<()> {
        self.serialize_none()
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<()> {
        self.serialize_none()
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<()> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Result<()> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<()> {
        Err(GaveUp)
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Self> {
        self.open(ARRAY, len)
    }

    fn serialize_tuple(self, len: usize) -> Result<Self> {
        self.open(ARRAY, Some(len))
    }

    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Self> {
        self.open(ARRAY, Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(GaveUp)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self> {
        self.open(MAP, len)
    }

    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Self> {
        self.open(MAP, Some(len))
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(GaveUp)
    }

    fn is_human_readable(&self) -> bool {
        false
    }
}

/// The serde traits of an array's items, each item encoded in turn.
macro_rules! items {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for &mut Encoder<'_> {
            type Ok = ();
            type Error = GaveUp;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
                value.serialize(&mut **self)
            }

            fn end(self) -> Result<()> {
                self.close();
                Ok(())
            }
        }
    )*};
}

items!(SerializeSeq::serialize_element, SerializeTuple::serialize_element, SerializeTupleStruct::serialize_field);

impl ser::SerializeMap for &mut Encoder<'_> {
    type Ok = ();
    type Error = GaveUp;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        key.serialize(&mut **self)
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Encoder<'_> {
    type Ok = ();
    type Error = GaveUp;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        self.string(TEXT, key.as_bytes());
        value.serialize(&mut **self)
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::to_vec;

    /// The fast path's bytes, which must be `ciborium`'s.
    fn same_as_ciborium<T: Serialize + std::fmt::Debug>(value: &T) {
        let mut fast = Vec::new();
        assert!(to_vec(value, &mut fast), "the fast path gave up on {value:?}");
        let mut reference = Vec::new();
        ciborium::into_writer(value, &mut reference).expect("ciborium encodes");
        assert_eq!(fast, reference, "{value:?}");
    }

    #[derive(Debug, Serialize)]
    struct Stats {
        min: f64,
        max: f64,
        sum: f64,
        count: i64,
        label: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        flags: Vec<bool>,
        unit: (),
        kind: Kind,
        raw: serde_bytes_like::Bytes,
    }

    #[derive(Debug, Serialize)]
    enum Kind {
        Tumbling,
    }

    /// Bytes serialized as a CBOR byte string (as `serde_bytes` does).
    mod serde_bytes_like {
        #[derive(Debug)]
        pub struct Bytes(pub Vec<u8>);

        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_bytes(&self.0)
            }
        }
    }

    #[test]
    fn integers_at_every_width_boundary_match() {
        for v in [0i64, 1, 23, 24, 255, 256, 65_535, 65_536, 4_294_967_295, 4_294_967_296, i64::MAX] {
            same_as_ciborium(&v);
            same_as_ciborium(&-v);
            same_as_ciborium(&(-v - 1));
        }
        same_as_ciborium(&i64::MIN);
        same_as_ciborium(&u64::MAX);
        same_as_ciborium(&(7u8, -7i16, 70_000i32, 3u32));
    }

    #[test]
    fn floats_take_ciboriums_width() {
        let special = [
            0.0,
            -0.0,
            1.0,
            -2.5,
            65_504.0,
            65_505.0,
            65_536.0,
            1.0 / 3.0,
            0.1,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            2f64.powi(-14),
            2f64.powi(-15),
            2f64.powi(-24),
            3.0 * 2f64.powi(-24),
            2f64.powi(-25),
            1.5 * 2f64.powi(-24),
            2f64.powi(-126),
            2f64.powi(-149),
            2f64.powi(-150),
            f64::from(f32::MAX),
            f64::from(f32::MIN_POSITIVE) / 2.0,
            16_777_217.0,
        ];
        for v in special {
            same_as_ciborium(&v);
            same_as_ciborium(&-v);
            same_as_ciborium(&(v as f32));
        }
        // Many bit patterns: every exponent, with short and long fractions.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let short_fraction = state & !((1u64 << (state % 53)) - 1);
            for bits in [state, short_fraction] {
                let v = f64::from_bits(bits);
                if !v.is_nan() {
                    same_as_ciborium(&v);
                }
            }
        }
    }

    #[test]
    fn structs_maps_sequences_and_text_match() {
        same_as_ciborium(&Stats {
            min: -18.5,
            max: 4.25,
            sum: 1234.5678,
            count: 42,
            label: None,
            note: None,
            flags: vec![true, false],
            unit: (),
            kind: Kind::Tumbling,
            raw: serde_bytes_like::Bytes(vec![0, 1, 2, 255]),
        });
        same_as_ciborium(&Stats {
            min: 0.0,
            max: 0.0,
            sum: 0.0,
            count: -1,
            label: Some("é".repeat(40)),
            note: Some(String::new()),
            flags: Vec::new(),
            unit: (),
            kind: Kind::Tumbling,
            raw: serde_bytes_like::Bytes(vec![7; 300]),
        });
        let map: BTreeMap<String, Vec<i64>> = (0..30).map(|i| (format!("k{i}"), vec![i; i as usize])).collect();
        same_as_ciborium(&map);
        same_as_ciborium(&"x".repeat(70_000));
        same_as_ciborium(&Some(vec![Some(1.5), None]));
    }

    #[test]
    fn what_it_does_not_know_is_left_to_ciborium() {
        #[derive(Serialize)]
        enum Shape {
            Circle(f64),
        }
        let mut out = vec![9];
        assert!(!to_vec(&Shape::Circle(1.0), &mut out));
        assert!(!to_vec(&f64::NAN, &mut out));
        assert!(!to_vec(&'c', &mut out));
        assert!(!to_vec(&1u128, &mut out));
        assert_eq!(out, [9], "what it wrote before giving up is taken back");
    }
}
