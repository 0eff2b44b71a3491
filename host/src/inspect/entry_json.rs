//! How the state reader shows stored bytes: grouping keys, CBOR values (the SDK's
//! encoding) and raw bytes as JSON.

use serde::Serialize;

use crate::contract::Scalar;
use crate::contract::rows::scalar_json;
use crate::operator::window_json;
use crate::pipeline::AggregateFn;
use crate::state::layout::{self, NEVER};
use crate::state::{StateKind, key};
use crate::util::format_micros_iso;

/// One state entry, decoded: one JSON line of `eddy state read`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateEntry {
    /// The grouping key's values.
    pub key: Vec<serde_json::Value>,
    /// The key group of the key.
    pub key_group: u16,
    /// The variable's name.
    pub var: String,
    /// value, list or map.
    pub kind: StateKind,
    /// The map entry's user key (maps only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map_key: Option<serde_json::Value>,
    /// The value (for a list: the array of its elements).
    pub value: serde_json::Value,
    /// When the entry expires (ISO time), null for never; for a list with TTL, one per element.
    pub expires_at: serde_json::Value,
    /// Whether the entry (for a list: any element) has expired but is not yet evicted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub expired: bool,
}

/// The kind of an entry whose variable has no declared kind: a map entry has bytes
/// after the variable name; a value is an expiry stamp and one CBOR item; a list is
/// (expiry, length, payload) elements, which never parse as one CBOR item.
pub(super) fn infer_kind(rest: &[u8], raw_value: &[u8]) -> StateKind {
    if !rest.is_empty() {
        return StateKind::Map;
    }
    let is_value = layout::unstamp(raw_value).is_some_and(|(_, payload)| cbor_json(payload).is_some());
    if !is_value && layout::decode_list(raw_value).is_some_and(|elements| !elements.is_empty()) {
        StateKind::List
    } else {
        StateKind::Value
    }
}

/// An entry as JSON; the values of a window stage (`window_functions`: its aggregates)
/// are shown with their numbers named.
#[allow(clippy::too_many_arguments)]
pub(super) fn decode_entry(
    key: Vec<serde_json::Value>,
    key_group: u16,
    variable: &str,
    kind: StateKind,
    rest: &[u8],
    raw: &[u8],
    now: i64,
    window_functions: Option<&[AggregateFn]>,
) -> StateEntry {
    let expiry_json =
        |expiry: i64| if expiry == NEVER { serde_json::Value::Null } else { format_micros_iso(expiry).into() };
    let mut entry = StateEntry {
        key,
        key_group,
        var: variable.to_string(),
        kind,
        map_key: (kind == StateKind::Map).then(|| payload_json(rest)),
        value: serde_json::Value::Null,
        expires_at: serde_json::Value::Null,
        expired: false,
    };
    match kind {
        StateKind::Value | StateKind::Map => match layout::unstamp(raw) {
            Some((expiry, payload)) => {
                entry.value = match window_functions.filter(|_| kind == StateKind::Map) {
                    // A window that does not decode is shown as its CBOR reads (numbers without names).
                    Some(functions) => window_json(rest, payload, functions).unwrap_or_else(|_| payload_json(payload)),
                    None => payload_json(payload),
                };
                entry.expires_at = expiry_json(expiry);
                entry.expired = expiry <= now;
            }
            None => entry.value = bytes_json(raw),
        },
        StateKind::List => match layout::decode_list(raw) {
            Some(elements) => {
                entry.value = elements.iter().map(|(_, payload)| payload_json(payload)).collect();
                if elements.iter().any(|(expiry, _)| *expiry != NEVER) {
                    entry.expires_at = elements.iter().map(|(expiry, _)| expiry_json(*expiry)).collect();
                }
                entry.expired = elements.iter().any(|(expiry, _)| *expiry <= now);
            }
            None => entry.value = bytes_json(raw),
        },
    }
    entry
}

/// A grouping key's values as JSON (undecodable bytes as `{"bytes": hex}`).
pub(super) fn decode_key(raw: &[u8]) -> Vec<serde_json::Value> {
    match key::decode(raw) {
        Some(parts) => parts.iter().map(scalar_json).collect(),
        None => vec![bytes_json(raw)],
    }
}

/// The encoding of a key given as JSON values (strings, integers, floats, booleans,
/// nulls); `None` for values that have no single scalar type.
pub(super) fn encode_key(values: &[serde_json::Value]) -> Option<Vec<u8>> {
    let scalars = values
        .iter()
        .map(|value| {
            Some(match value {
                serde_json::Value::Null => Scalar::Null,
                serde_json::Value::Bool(b) => Scalar::Boolean(*b),
                serde_json::Value::String(s) => Scalar::Utf8(s.clone()),
                serde_json::Value::Number(n) => match n.as_i64() {
                    Some(v) => Scalar::Int64(v),
                    None => Scalar::Float64(n.as_f64()?),
                },
                _ => return None,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(key::encode(&scalars))
}

/// A payload as JSON: its CBOR decoded, else `{"bytes": hex}`.
pub fn payload_json(bytes: &[u8]) -> serde_json::Value {
    cbor_json(bytes).unwrap_or_else(|| bytes_json(bytes))
}

/// Bytes that exactly hold one CBOR item, as JSON.
pub fn cbor_json(bytes: &[u8]) -> Option<serde_json::Value> {
    let mut reader = bytes;
    let value: ciborium::Value = ciborium::from_reader(&mut reader).ok()?;
    reader.is_empty().then(|| cbor_to_json(value))
}

pub(super) fn cbor_to_json(value: ciborium::Value) -> serde_json::Value {
    use ciborium::Value as C;
    use serde_json::Value as J;
    match value {
        C::Null => J::Null,
        C::Bool(b) => J::Bool(b),
        C::Integer(i) => {
            let i = i128::from(i);
            if let Ok(v) = i64::try_from(i) {
                v.into()
            } else if let Ok(v) = u64::try_from(i) {
                v.into()
            } else {
                i.to_string().into()
            }
        }
        C::Float(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
        C::Text(s) => J::String(s),
        C::Bytes(b) => bytes_json(&b),
        C::Array(items) => items.into_iter().map(cbor_to_json).collect(),
        C::Map(entries) => J::Object(
            entries
                .into_iter()
                .map(|(k, v)| {
                    let key = match cbor_to_json(k) {
                        J::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, cbor_to_json(v))
                })
                .collect(),
        ),
        C::Tag(_, inner) => cbor_to_json(*inner),
        _ => J::Null,
    }
}

pub(super) fn bytes_json(bytes: &[u8]) -> serde_json::Value {
    serde_json::json!({ "bytes": hex(bytes) })
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
