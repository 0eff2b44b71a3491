//! Decoding: bytes into Arrow record batches of the declared schema.

mod json;

pub use json::decode_json_lines;
