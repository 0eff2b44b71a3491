//! A record's headers as raw bytes. Kafka does not require a header key to be UTF-8
//! (another producer may write any bytes), and rdkafka 0.39's `Headers::iter` /
//! `try_get` unwrap the key's conversion to `&str` — a panic on such a record. eddy
//! reads headers through librdkafka's `rd_kafka_header_get_all` instead.

use std::ffi::CStr;

use rdkafka::bindings as rdsys;
use rdkafka::message::BorrowedMessage;

/// One header: its key and value as bytes (`None`: a null value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawHeader<'a> {
    /// The key's bytes (not necessarily UTF-8).
    pub key: &'a [u8],
    /// The value's bytes.
    pub value: Option<&'a [u8]>,
}

impl RawHeader<'_> {
    /// The key as text: as it is when UTF-8, otherwise with every byte outside
    /// printable ASCII escaped as `\xNN` (and `\` as `\\`), so no two keys look alike.
    pub fn key_text(&self) -> String {
        escape_bytes(self.key)
    }
}

/// `bytes` as text: as they are when UTF-8, otherwise escaped byte by byte (`\xNN`).
pub fn escape_bytes(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => bytes.escape_ascii().to_string(),
    }
}

/// The headers of `message`, in order (none when it has none).
pub fn headers<'a>(message: &'a BorrowedMessage<'_>) -> Vec<RawHeader<'a>> {
    let mut native: *mut rdsys::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: the message pointer is valid while `message` lives; librdkafka parses
    // and caches the headers in the message and returns a pointer it owns.
    let error = unsafe { rdsys::rd_kafka_message_headers(message.ptr(), &mut native) };
    if error != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || native.is_null() {
        return Vec::new();
    }
    // SAFETY: `native` is the message's header list, valid while `message` lives.
    let count = unsafe { rdsys::rd_kafka_header_cnt(native) };
    let mut headers = Vec::with_capacity(count);
    for index in 0..count {
        let mut name: *const std::os::raw::c_char = std::ptr::null();
        let mut value: *const std::os::raw::c_void = std::ptr::null();
        let mut size = 0usize;
        // SAFETY: as above; the out-pointers are valid locals.
        let error = unsafe { rdsys::rd_kafka_header_get_all(native, index, &mut name, &mut value, &mut size) };
        if error != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
            continue;
        }
        // SAFETY: librdkafka keeps a header's name NUL-terminated and its value of
        // `size` bytes for as long as the message lives, which bounds `'a`.
        let key = unsafe { CStr::from_ptr(name) }.to_bytes();
        let value = (!value.is_null()).then(|| unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) });
        headers.push(RawHeader { key, value });
    }
    headers
}

/// The value of the first header of `headers` whose key is `key`.
pub fn header_value<'a>(headers: &[RawHeader<'a>], key: &str) -> Option<&'a [u8]> {
    headers.iter().find(|header| header.key == key.as_bytes()).and_then(|header| header.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_are_not_utf8_are_escaped_byte_by_byte() {
        assert_eq!(escape_bytes(b"eddy.batch"), "eddy.batch");
        assert_eq!(escape_bytes("caf\u{e9}".as_bytes()), "caf\u{e9}", "UTF-8 stays as it is");
        assert_eq!(escape_bytes(b"\xff\xfeid"), "\\xff\\xfeid");
        assert_eq!(escape_bytes(b"a\\\xff"), "a\\\\\\xff", "a backslash is escaped too once escaping");
    }
}
