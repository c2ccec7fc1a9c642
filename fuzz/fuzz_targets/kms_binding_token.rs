//! See `rampart_fuzz::kms_binding_token` (fuzz/src/) and fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rampart_fuzz::kms_binding_token(data));
