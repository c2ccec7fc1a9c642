//! See `rampart_fuzz::nbd_server` (fuzz/src/) and fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rampart_fuzz::nbd_server(data));
