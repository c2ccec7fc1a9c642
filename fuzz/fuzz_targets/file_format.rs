//! See `rampart_fuzz::file_format` (fuzz/src/) and fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rampart_fuzz::file_format(data));
