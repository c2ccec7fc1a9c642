//! The TTLV codec's integration tests (the KMIP specification's
//! test vectors, payload parsing), one module per file beside this one,
//! built as a single test binary: one link instead of one per file.
// A failed set-up step in a test or a helper should panic.
#![allow(clippy::unwrap_used)]

mod vectors;

mod payload_parsing;
mod ttlv_conformance;
