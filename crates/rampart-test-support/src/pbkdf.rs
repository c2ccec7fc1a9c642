//! Key derivation settings for test volumes.

use rampart_luks::{HashAlg, PbkdfChoice, PbkdfKind};

/// PBKDF2 at 1000 iterations: test volumes guard nothing, and a keyslot
/// should open in a millisecond.
#[must_use]
pub fn fast_pbkdf2(hash: HashAlg) -> PbkdfChoice {
    PbkdfChoice {
        kind: PbkdfKind::Pbkdf2,
        hash,
        iter_time_ms: 1,
        forced_iterations: Some(1000),
        memory_kib: 32,
        parallel: 1,
    }
}
