//! Passphrase key derivation: the choice a caller makes, the parameters
//! stored in a keyslot, their bounds, and cryptsetup-like calibration.

use std::time::Instant;

use rampart_crypto::{argon2, pbkdf2, Argon2Params, Argon2Variant, HashAlg, SecretBytes};

use crate::{Error, Result};

/// The PBKDF algorithms LUKS uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PbkdfKind {
    Pbkdf2,
    Argon2i,
    Argon2id,
}

impl PbkdfKind {
    /// The name LUKS2 stores (`pbkdf2`, `argon2i`, `argon2id`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Pbkdf2 => "pbkdf2",
            Self::Argon2i => "argon2i",
            Self::Argon2id => "argon2id",
        }
    }

    /// Parses a LUKS2 kdf type.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "pbkdf2" => Some(Self::Pbkdf2),
            "argon2i" => Some(Self::Argon2i),
            "argon2id" => Some(Self::Argon2id),
            _ => None,
        }
    }
}

/// How new keyslots derive their key from the passphrase (cryptsetup's
/// `--pbkdf`, `--hash`, `--iter-time`, `--pbkdf-force-iterations`,
/// `--pbkdf-memory`, `--pbkdf-parallel`).
#[derive(Debug, Clone)]
pub struct PbkdfChoice {
    pub kind: PbkdfKind,
    /// The PBKDF2 hash (and, in LUKS2, the anti-forensic and digest hash).
    pub hash: HashAlg,
    /// Target unlock time used for calibration.
    pub iter_time_ms: u32,
    /// Skip calibration: PBKDF2 iterations, or the Argon2 time cost.
    pub forced_iterations: Option<u32>,
    /// Argon2 maximum memory in KiB.
    pub memory_kib: u32,
    /// Argon2 lanes (threads).
    pub parallel: u32,
}

impl Default for PbkdfChoice {
    /// cryptsetup 2.6's LUKS2 default: argon2id, 2 s, up to 1 GiB, up to 4 threads.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            kind: PbkdfKind::Argon2id,
            hash: HashAlg::Sha256,
            iter_time_ms: 2000,
            forced_iterations: None,
            memory_kib: DEFAULT_MEMORY_KIB,
            parallel: u32::try_from(cores.min(4)).unwrap_or(4),
        }
    }
}

impl PbkdfChoice {
    /// cryptsetup's LUKS1 default: PBKDF2-SHA256 calibrated to 2 s.
    #[must_use]
    pub fn luks1_default() -> Self {
        Self { kind: PbkdfKind::Pbkdf2, ..Self::default() }
    }

    /// The KDF of a keyslot whose passphrase is a random secret of its own
    /// (a key-manager binding): PBKDF2 at cryptsetup's minimum of 1000
    /// iterations, since stretching 256 random bits adds nothing but
    /// unlock time.
    #[must_use]
    pub fn for_random_secret(hash: HashAlg) -> Self {
        Self { kind: PbkdfKind::Pbkdf2, hash, forced_iterations: Some(1000), ..Self::default() }
    }
}

/// What the user asked of new keyslots' KDF (cryptsetup's flags), each
/// setting optional; [`PbkdfRequest::choice`] fills in the defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PbkdfRequest {
    pub kind: Option<PbkdfKind>,
    pub hash: Option<HashAlg>,
    pub iter_time_ms: Option<u32>,
    pub forced_iterations: Option<u32>,
    pub memory_kib: Option<u32>,
    pub parallel: Option<u32>,
}

impl PbkdfRequest {
    /// Whether any setting was given.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The choice for a new keyslot of a `version` volume: what was asked,
    /// else cryptsetup's defaults for that version (argon2id for LUKS2,
    /// PBKDF2 for LUKS1; SHA-256; 2 s; up to 1 GiB; up to 4 lanes).
    ///
    /// # Errors
    /// Argon2 on LUKS1, which knows only PBKDF2; a time, iteration count
    /// or lane count of zero.
    pub fn choice(&self, version: crate::LuksVersion) -> Result<PbkdfChoice> {
        let default = match version {
            crate::LuksVersion::Luks1 => PbkdfChoice::luks1_default(),
            crate::LuksVersion::Luks2 => PbkdfChoice::default(),
        };
        let kind = self.kind.unwrap_or(default.kind);
        if version == crate::LuksVersion::Luks1 && kind != PbkdfKind::Pbkdf2 {
            return Err(Error::invalid("LUKS1 supports only --pbkdf pbkdf2"));
        }
        let choice = PbkdfChoice {
            kind,
            hash: self.hash.unwrap_or(default.hash),
            iter_time_ms: self.iter_time_ms.unwrap_or(default.iter_time_ms),
            forced_iterations: self.forced_iterations,
            memory_kib: self.memory_kib.unwrap_or(default.memory_kib),
            parallel: self.parallel.unwrap_or(default.parallel),
        };
        if choice.iter_time_ms == 0 || choice.forced_iterations == Some(0) || choice.parallel == 0 {
            return Err(Error::invalid("KDF time, iterations and parallelism must be at least 1"));
        }
        Ok(choice)
    }
}

/// The derivation parameters stored in (or chosen for) one keyslot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KdfParams {
    Pbkdf2 { hash: HashAlg, iterations: u32 },
    Argon2 { kind: PbkdfKind, time: u32, memory_kib: u32, parallel: u32 },
}

/// cryptsetup's default Argon2 memory ceiling (1 GiB).
pub const DEFAULT_MEMORY_KIB: u32 = 1024 * 1024;
/// The largest Argon2 memory cost accepted (4 GiB, cryptsetup's limit).
pub const MAX_MEMORY_KIB: u32 = 4 * 1024 * 1024;
/// The smallest Argon2 memory cost cryptsetup accepts.
pub const MIN_MEMORY_KIB: u32 = 32;
/// The smallest Argon2 time cost cryptsetup writes.
pub const MIN_ARGON2_TIME: u32 = 4;
/// The smallest PBKDF2 iteration count cryptsetup writes.
pub const MIN_PBKDF2_ITERATIONS: u32 = 1000;
/// The most Argon2 lanes accepted in a header (bounds threads).
pub const MAX_PARALLEL_LOAD: u32 = 16;
/// The most Argon2 lanes written (cryptsetup's limit).
pub const MAX_PARALLEL: u32 = 4;

impl KdfParams {
    /// Checks parameters read from a header: anything out of these bounds
    /// would hang, exhaust memory or fail inside the KDF.
    pub(crate) fn validate_loaded(&self, what: &str) -> Result<()> {
        match *self {
            Self::Pbkdf2 { iterations, .. } => {
                if iterations == 0 {
                    return Err(Error::corrupt(format!("{what}: PBKDF2 iterations is 0")));
                }
            }
            Self::Argon2 { time, memory_kib, parallel, .. } => {
                if time == 0 {
                    return Err(Error::corrupt(format!("{what}: Argon2 time cost is 0")));
                }
                if parallel == 0 || parallel > MAX_PARALLEL_LOAD {
                    return Err(Error::corrupt(format!(
                        "{what}: Argon2 parallelism {parallel} is outside 1..={MAX_PARALLEL_LOAD}"
                    )));
                }
                if memory_kib > MAX_MEMORY_KIB {
                    return Err(Error::corrupt(format!(
                        "{what}: Argon2 memory {memory_kib} KiB exceeds the 4 GiB limit"
                    )));
                }
                if memory_kib < MIN_MEMORY_KIB || memory_kib < 8 * parallel {
                    return Err(Error::corrupt(format!(
                        "{what}: Argon2 memory {memory_kib} KiB is below the minimum for {parallel} lanes"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Checks parameters about to be written, against cryptsetup's limits.
    pub(crate) fn validate_new(&self) -> Result<()> {
        match *self {
            Self::Pbkdf2 { iterations, .. } if iterations < MIN_PBKDF2_ITERATIONS => {
                Err(Error::invalid(format!(
                    "PBKDF2 iterations {iterations} is below the minimum {MIN_PBKDF2_ITERATIONS}"
                )))
            }
            Self::Pbkdf2 { .. } => Ok(()),
            Self::Argon2 { time, memory_kib, parallel, .. } => {
                if time < MIN_ARGON2_TIME {
                    return Err(Error::invalid(format!(
                        "Argon2 time cost {time} is below the minimum {MIN_ARGON2_TIME}"
                    )));
                }
                if !(MIN_MEMORY_KIB..=MAX_MEMORY_KIB).contains(&memory_kib) {
                    return Err(Error::invalid(format!(
                        "Argon2 memory {memory_kib} KiB is outside {MIN_MEMORY_KIB}..={MAX_MEMORY_KIB} KiB"
                    )));
                }
                if parallel == 0 || parallel > MAX_PARALLEL || memory_kib < 8 * parallel {
                    return Err(Error::invalid(format!(
                        "Argon2 parallelism {parallel} is outside 1..={MAX_PARALLEL} or too high for {memory_kib} KiB"
                    )));
                }
                Ok(())
            }
        }
    }

    /// Derives `out_len` bytes from `passphrase` and `salt`.
    pub(crate) fn derive(
        &self,
        passphrase: &[u8],
        salt: &[u8],
        out_len: usize,
    ) -> Result<SecretBytes> {
        let mut out = SecretBytes::zeroed(out_len);
        match *self {
            Self::Pbkdf2 { hash, iterations } => {
                pbkdf2(hash, passphrase, salt, iterations, out.expose_mut())?;
            }
            Self::Argon2 { kind, time, memory_kib, parallel } => {
                let variant = match kind {
                    PbkdfKind::Argon2i => Argon2Variant::Argon2i,
                    _ => Argon2Variant::Argon2id,
                };
                let params = Argon2Params { variant, time, memory_kib, parallelism: parallel };
                argon2(&params, passphrase, salt, out.expose_mut())?;
            }
        }
        Ok(out)
    }
}

/// Chooses keyslot parameters for `choice` as cryptsetup does: forced costs
/// are used as given; otherwise PBKDF2 iterations (minimum 1000) or the
/// Argon2 time and memory (time at least 4, memory at most
/// `min(choice.memory_kib, half of RAM)`) are calibrated so that one
/// derivation of a `key_bytes`-byte key takes about `choice.iter_time_ms`.
pub fn pbkdf_for_time(choice: &PbkdfChoice, key_bytes: usize) -> Result<KdfParams> {
    if key_bytes == 0 || key_bytes > crate::af::MAX_KEY_BYTES {
        return Err(Error::invalid(format!("key size {key_bytes} bytes is not supported")));
    }
    let params = match choice.kind {
        PbkdfKind::Pbkdf2 => {
            let iterations = match choice.forced_iterations {
                Some(iterations) => iterations,
                None => pbkdf2_iterations_for(choice.hash, key_bytes, choice.iter_time_ms)?,
            };
            KdfParams::Pbkdf2 { hash: choice.hash, iterations }
        }
        kind => {
            let parallel = choice.parallel;
            if parallel == 0 || parallel > MAX_PARALLEL {
                return Err(Error::invalid(format!(
                    "Argon2 parallelism {parallel} is outside 1..={MAX_PARALLEL}"
                )));
            }
            let floor = MIN_MEMORY_KIB.max(8 * parallel);
            let ceiling = choice.memory_kib.min(half_ram_kib()).clamp(floor, MAX_MEMORY_KIB);
            match choice.forced_iterations {
                Some(time) => KdfParams::Argon2 { kind, time, memory_kib: ceiling, parallel },
                None => calibrate_argon2(kind, choice.iter_time_ms, floor, ceiling, parallel)?,
            }
        }
    };
    params.validate_new()?;
    Ok(params)
}

/// PBKDF2 iterations taking about `ms` for a `key_bytes` output, at least
/// 1000 (cryptsetup's benchmark, also used for volume key digests).
pub(crate) fn pbkdf2_iterations_for(hash: HashAlg, key_bytes: usize, ms: u32) -> Result<u32> {
    let salt = [0u8; 32];
    let mut out = vec![0u8; key_bytes];
    let mut iterations: u32 = 1000;
    loop {
        let start = Instant::now();
        pbkdf2(hash, b"rampart calibration", &salt, iterations, &mut out)?;
        let elapsed = start.elapsed().as_secs_f64() * 1000.0;
        if elapsed >= 100.0 || iterations >= (1 << 30) {
            let per_ms = f64::from(iterations) / elapsed.max(0.001);
            let target = (per_ms * f64::from(ms)).min(f64::from(u32::MAX));
            // `target` is finite and within u32 range here.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let target = target as u32;
            return Ok(target.max(MIN_PBKDF2_ITERATIONS));
        }
        iterations = iterations.saturating_mul(2);
    }
}

fn calibrate_argon2(
    kind: PbkdfKind,
    ms: u32,
    floor: u32,
    ceiling: u32,
    parallel: u32,
) -> Result<KdfParams> {
    let probe_kib = ceiling.min(64 * 1024);
    let probe = KdfParams::Argon2 { kind, time: 1, memory_kib: probe_kib, parallel };
    let start = Instant::now();
    probe.derive(b"rampart calibration", &[0u8; 32], 32)?;
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    // KiB-passes affordable in the time budget.
    let budget = f64::from(probe_kib) * f64::from(ms) / elapsed.max(0.001);
    let (time, memory_kib) = if budget >= f64::from(MIN_ARGON2_TIME) * f64::from(ceiling) {
        let time = (budget / f64::from(ceiling)).min(f64::from(u32::MAX));
        // Finite, positive and within u32 range.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        (time as u32, ceiling)
    } else {
        let memory = budget / f64::from(MIN_ARGON2_TIME);
        // Finite, positive and below `ceiling`.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        (MIN_ARGON2_TIME, (memory as u32).clamp(floor, ceiling))
    };
    Ok(KdfParams::Argon2 { kind, time: time.max(MIN_ARGON2_TIME), memory_kib, parallel })
}

/// Half of physical memory in KiB (cryptsetup never asks Argon2 for more).
fn half_ram_kib() -> u32 {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|info| {
        info.lines()
            .find_map(|line| line.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    match total {
        Some(kib) => u32::try_from(kib / 2).unwrap_or(u32::MAX),
        None => u32::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_costs_are_used_as_given() {
        let choice = PbkdfChoice {
            kind: PbkdfKind::Pbkdf2,
            forced_iterations: Some(1000),
            ..PbkdfChoice::default()
        };
        assert_eq!(
            pbkdf_for_time(&choice, 64).unwrap(),
            KdfParams::Pbkdf2 { hash: HashAlg::Sha256, iterations: 1000 }
        );
        let choice = PbkdfChoice {
            kind: PbkdfKind::Argon2id,
            forced_iterations: Some(4),
            memory_kib: 32,
            parallel: 1,
            ..PbkdfChoice::default()
        };
        assert_eq!(
            pbkdf_for_time(&choice, 64).unwrap(),
            KdfParams::Argon2 { kind: PbkdfKind::Argon2id, time: 4, memory_kib: 32, parallel: 1 }
        );
    }

    #[test]
    fn below_minimum_costs_are_refused() {
        let choice = PbkdfChoice {
            kind: PbkdfKind::Pbkdf2,
            forced_iterations: Some(10),
            ..PbkdfChoice::default()
        };
        assert!(matches!(pbkdf_for_time(&choice, 32), Err(Error::InvalidArgument(_))));
        let choice = PbkdfChoice {
            kind: PbkdfKind::Argon2i,
            forced_iterations: Some(1),
            ..PbkdfChoice::default()
        };
        assert!(matches!(pbkdf_for_time(&choice, 32), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn calibration_meets_minimums() {
        let choice =
            PbkdfChoice { kind: PbkdfKind::Pbkdf2, iter_time_ms: 10, ..PbkdfChoice::default() };
        match pbkdf_for_time(&choice, 32).unwrap() {
            KdfParams::Pbkdf2 { iterations, .. } => assert!(iterations >= 1000),
            other => panic!("unexpected {other:?}"),
        }
        let choice = PbkdfChoice {
            kind: PbkdfKind::Argon2id,
            iter_time_ms: 20,
            memory_kib: 8 * 1024,
            parallel: 2,
            ..PbkdfChoice::default()
        };
        match pbkdf_for_time(&choice, 64).unwrap() {
            KdfParams::Argon2 { time, memory_kib, parallel, .. } => {
                assert!(time >= 4);
                assert!((32..=8 * 1024).contains(&memory_kib));
                assert_eq!(parallel, 2);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn loaded_bounds() {
        let bad = [
            KdfParams::Pbkdf2 { hash: HashAlg::Sha256, iterations: 0 },
            KdfParams::Argon2 {
                kind: PbkdfKind::Argon2id,
                time: 4,
                memory_kib: MAX_MEMORY_KIB + 1,
                parallel: 1,
            },
            KdfParams::Argon2 { kind: PbkdfKind::Argon2id, time: 0, memory_kib: 1024, parallel: 1 },
            KdfParams::Argon2 { kind: PbkdfKind::Argon2id, time: 4, memory_kib: 1024, parallel: 0 },
            KdfParams::Argon2 { kind: PbkdfKind::Argon2id, time: 4, memory_kib: 16, parallel: 1 },
        ];
        for params in bad {
            assert!(matches!(params.validate_loaded("keyslot 0"), Err(Error::Corrupt(_))));
        }
    }
}
