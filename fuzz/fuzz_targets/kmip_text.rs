//! See `rampart_fuzz::kmip_text` (fuzz/src/) and fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rampart_fuzz::kmip_text(data));
