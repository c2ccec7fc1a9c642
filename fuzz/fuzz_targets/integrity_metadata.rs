//! See `rampart_fuzz::integrity_metadata` (fuzz/src/) and fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rampart_fuzz::integrity_metadata(data));
