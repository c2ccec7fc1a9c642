//! See `rampart_fuzz::kms_audit_archive` (fuzz/src/) and fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rampart_fuzz::kms_audit_archive(data));
