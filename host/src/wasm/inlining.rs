//! Which modules are compiled with inlining within each of their core modules.
//!
//! Cranelift then inlines a module's small functions into their callers: the C
//! library's `memcmp`, `malloc` and `free` and the allocator shims around them, which
//! the guest's own compiler could not inline, and small functions it left out of line.
//! The WebAssembly window job of `make bench-window` takes about 3 % less time and CPU
//! (alternated runs, thin-LTO builds: −2.7 % wall, −3.0 % CPU).
//!
//! Compiling so holds all of a module's functions at once: measured, about 0.1 GB plus
//! 1.2 GB per MB of code, against 0.04 GB plus 0.08 GB per MB without (the window
//! job's module, 0.26 MB of code: 0.42 GB instead of 0.07 GB; a Python interpreter
//! module, 6.6 MB of code: 8.5 GB instead of 0.5 GB). So only modules with little code
//! (a processor written in Rust has 0.1–0.4 MB) are compiled with it, once per module:
//! the module cache keeps the result.

use wasmparser::{Parser, Payload};

/// The most code (the sum of every core module's code section) a module may have to
/// be compiled with inlining: at most about 0.7 GB to compile it.
pub const INLINE_MAX_CODE_BYTES: u64 = 512 << 10;

/// The bytes of code of the component (or core module) `bytes`, if it can be read.
pub fn code_bytes(bytes: &[u8]) -> Option<u64> {
    let mut total = 0u64;
    for payload in Parser::new(0).parse_all(bytes) {
        if let Payload::CodeSectionStart { size, .. } = payload.ok()? {
            total = total.saturating_add(u64::from(size));
        }
    }
    Some(total)
}

/// Whether a module with `code_bytes` of code (see [`code_bytes`]) is compiled with
/// inlining.
pub fn inlines(code_bytes: Option<u64>) -> bool {
    code_bytes.is_some_and(|code| code <= INLINE_MAX_CODE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core module of one function `() -> ()` whose body is `nops` no-ops.
    fn module_of_nops(nops: usize) -> Vec<u8> {
        fn leb128(mut value: usize, out: &mut Vec<u8>) {
            loop {
                let byte = (value & 0x7f) as u8;
                value >>= 7;
                out.push(if value == 0 { byte } else { byte | 0x80 });
                if value == 0 {
                    break;
                }
            }
        }
        let mut body = vec![0x00]; // no locals
        body.extend(std::iter::repeat_n(0x01, nops));
        body.push(0x0b);
        let mut code = vec![0x01]; // one function
        leb128(body.len(), &mut code);
        code.extend(body);
        let mut module = b"\0asm\x01\0\0\0".to_vec();
        module.extend([0x01, 0x04, 0x01, 0x60, 0x00, 0x00]); // types: () -> ()
        module.extend([0x03, 0x02, 0x01, 0x00]); // functions: one of type 0
        module.push(0x0a);
        leb128(code.len(), &mut module);
        module.extend(code);
        module
    }

    #[test]
    fn counts_the_code_section_and_inlines_only_small_modules() {
        let small = module_of_nops(10);
        // After the section's function count: the body's length (1 byte) and the body.
        assert_eq!(code_bytes(&small), Some(1 + 12));
        assert!(inlines(code_bytes(&small)));
        let large = module_of_nops(INLINE_MAX_CODE_BYTES as usize);
        assert!(code_bytes(&large).is_some_and(|code| code > INLINE_MAX_CODE_BYTES));
        assert!(!inlines(code_bytes(&large)));
        assert_eq!(code_bytes(b"not wasm"), None);
        assert!(!inlines(code_bytes(b"not wasm")), "what cannot be read is compiled as before (and refused there)");
    }
}
