//! See `rampart_fuzz::openssl_enc` (fuzz/src/) and fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rampart_fuzz::openssl_enc(data));
