//! See `rampart_fuzz::luks_header` (fuzz/src/) and fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rampart_fuzz::luks_header(data));
