//! See `rampart_fuzz::pkcs11_module` (fuzz/src/) and fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rampart_fuzz::pkcs11_module(data));
