//! `rampart bench`: how fast this machine runs Rampart's crypto.
//!
//! The userspace counterpart of `cryptsetup benchmark` (KDF costs and cipher
//! throughput) and `openssl speed` (a fixed buffer size per call, several
//! threads). Everything runs in memory on a buffer reused call after call,
//! exactly as `openssl speed` does, so the figures compare directly; with a
//! span (`--span`) the calls walk through more data than the CPU's caches
//! hold instead, as a server reading a large volume does.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use rampart_crypto::{
    argon2, cpu, fill_random, pbkdf2, thread_cpu_time, xts_instruction_ceiling, Argon2Params,
    Argon2Variant, Cbc, CbcIv, CryptoError, Gcm, HashAlg, Xts, XtsPath, AES_BLOCK, GCM_NONCE_LEN,
};
use serde::Serialize;

/// The largest buffer one call may take (the NBD maximum request size).
pub const MAX_BLOCK_BYTES: usize = 32 << 20;
/// Most data one worker thread walks through (`--span`).
pub const MAX_SPAN_BYTES: usize = 8 << 30;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    #[error("invalid benchmark setting: {0}")]
    Settings(String),
    /// A request naming what the benchmark does not know or this CPU lacks.
    #[error("{0}")]
    Request(String),
    #[error(transparent)]
    Crypto(#[from] CryptoError),
}

/// The cipher families the benchmark knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CipherFamily {
    AesCbc,
    AesXts,
    AesGcm,
}

impl CipherFamily {
    pub const ALL: [Self; 3] = [Self::AesCbc, Self::AesXts, Self::AesGcm];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::AesCbc => "aes-cbc",
            Self::AesXts => "aes-xts",
            Self::AesGcm => "aes-gcm",
        }
    }

    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|family| family.name() == name)
    }

    /// Key sizes in bits as cryptsetup prints them (XTS counts both halves).
    fn key_bits(self) -> [usize; 2] {
        match self {
            Self::AesCbc | Self::AesGcm => [128, 256],
            Self::AesXts => [256, 512],
        }
    }
}

/// Validated settings for one benchmark run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Cipher families to measure, in display order.
    pub ciphers: Vec<CipherFamily>,
    /// Bytes handed to the cipher per call.
    pub block_bytes: usize,
    /// Bytes of data each worker's calls walk through, a call's worth at a
    /// time, in place: `block_bytes` keeps the data in the CPU's caches, a
    /// span larger than them makes every call read from memory.
    pub span_bytes: usize,
    /// Sector size within a call for the sector modes (XTS, CBC).
    pub sector_bytes: usize,
    /// Worker threads, each with its own key context and buffer.
    pub threads: usize,
    /// How long each direction of each cipher row is measured.
    pub duration: Duration,
    /// Whether to measure PBKDF2 and Argon2 costs.
    pub kdf: bool,
    /// Target unlock time for the Argon2 cost search, as `--iter-time`.
    pub iter_time: Duration,
    /// Whether to measure the DRBG.
    pub rng: bool,
    /// Force this XTS path instead of the fastest the CPU has (for
    /// comparing the engine's paths and AWS-LC on one machine).
    pub xts_path: Option<XtsPath>,
    /// Also measure the AES instruction ceiling (register-only VAES loop).
    pub ceiling: bool,
    /// Also report throughput per CPU-second of the measuring threads
    /// (`CLOCK_THREAD_CPUTIME_ID`), which other processes' load hardly
    /// moves.
    pub cpu_time: bool,
}

impl Settings {
    /// Checks the combination of sizes and resolves `threads == 0` and an
    /// unset sector size.
    pub fn new(
        ciphers: Vec<CipherFamily>,
        block_bytes: usize,
        sector_bytes: Option<usize>,
        threads: usize,
        seconds: f64,
    ) -> Result<Self, BenchError> {
        if block_bytes == 0 || block_bytes % AES_BLOCK != 0 || block_bytes > MAX_BLOCK_BYTES {
            return Err(BenchError::Settings(format!(
                "--size {block_bytes}: must be a multiple of 16 between 16 and {MAX_BLOCK_BYTES}"
            )));
        }
        let sector_bytes = sector_bytes.unwrap_or_else(|| block_bytes.min(4096));
        if !(512..=4096).contains(&sector_bytes)
            || !sector_bytes.is_power_of_two()
            || block_bytes % sector_bytes != 0
        {
            return Err(BenchError::Settings(format!(
                "--sector {sector_bytes}: must be a power of two from 512 to 4096 that divides --size {block_bytes}"
            )));
        }
        if !(seconds.is_finite() && (0.01..=600.0).contains(&seconds)) {
            return Err(BenchError::Settings(format!(
                "--seconds {seconds}: must be between 0.01 and 600"
            )));
        }
        let threads = if threads == 0 { available_cores() } else { threads };
        if threads > 1024 {
            return Err(BenchError::Settings(format!("--threads {threads}: at most 1024")));
        }
        Ok(Self {
            ciphers,
            block_bytes,
            span_bytes: block_bytes,
            sector_bytes,
            threads,
            duration: Duration::from_secs_f64(seconds),
            kdf: true,
            iter_time: Duration::from_millis(2000),
            rng: true,
            xts_path: None,
            ceiling: false,
            cpu_time: false,
        })
    }

    /// Sets the data each worker walks through (see `span_bytes`): a
    /// multiple of the call size, from one call to [`MAX_SPAN_BYTES`].
    pub fn set_span(&mut self, span_bytes: usize) -> Result<(), BenchError> {
        if span_bytes < self.block_bytes
            || span_bytes % self.block_bytes != 0
            || span_bytes > MAX_SPAN_BYTES
        {
            return Err(BenchError::Settings(format!(
                "--span {span_bytes}: must be a multiple of --size {} (at least one call) and at most {} GiB",
                self.block_bytes,
                MAX_SPAN_BYTES >> 30
            )));
        }
        self.span_bytes = span_bytes;
        Ok(())
    }
}

/// A benchmark as asked for (`rampart bench`'s options), before it is
/// checked and resolved into [`Settings`].
#[derive(Debug, Clone)]
pub struct Request {
    /// Cipher family names; none: every family, and the KDF and DRBG rows.
    pub ciphers: Vec<String>,
    pub block_bytes: usize,
    pub sector_bytes: Option<usize>,
    pub span_bytes: Option<usize>,
    /// 0: one per core.
    pub threads: usize,
    pub seconds: f64,
    /// The Argon2 cost search's target, in milliseconds.
    pub iter_time_ms: u64,
    /// An XTS path's name.
    pub xts_path: Option<String>,
    pub ceiling: bool,
    pub cpu_time: bool,
}

impl Settings {
    /// The settings of `request`: cipher families once each in the order
    /// named, the KDF and DRBG rows only when no family is named.
    ///
    /// # Errors
    /// An unknown family or XTS path, a path this CPU cannot run, a
    /// setting out of its range.
    pub fn from_request(request: &Request) -> Result<Self, BenchError> {
        let mut families = Vec::new();
        for name in &request.ciphers {
            let family = CipherFamily::from_name(name).ok_or_else(|| {
                BenchError::Request(format!(
                    "unknown cipher '{name}' (expected aes-cbc, aes-xts or aes-gcm)"
                ))
            })?;
            if !families.contains(&family) {
                families.push(family);
            }
        }
        let only_ciphers = !families.is_empty();
        if families.is_empty() {
            families = CipherFamily::ALL.to_vec();
        }
        let mut settings = Self::new(
            families,
            request.block_bytes,
            request.sector_bytes,
            request.threads,
            request.seconds,
        )?;
        if !(100..=60_000).contains(&request.iter_time_ms) {
            return Err(BenchError::Request(format!(
                "--iter-time {}: must be between 100 and 60000 ms",
                request.iter_time_ms
            )));
        }
        if let Some(span) = request.span_bytes {
            settings.set_span(span)?;
        }
        settings.iter_time = Duration::from_millis(request.iter_time_ms);
        settings.kdf = !only_ciphers;
        settings.rng = !only_ciphers;
        settings.ceiling = request.ceiling;
        settings.cpu_time = request.cpu_time;
        if let Some(name) = &request.xts_path {
            let path = XtsPath::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = XtsPath::ALL.iter().map(|p| p.name()).collect();
                BenchError::Request(format!(
                    "unknown XTS path '{name}' (expected one of {})",
                    known.join(", ")
                ))
            })?;
            if !path.available() {
                return Err(BenchError::Request(format!(
                    "this CPU lacks the instructions of XTS path '{name}'"
                )));
            }
            settings.xts_path = Some(path);
        }
        Ok(settings)
    }
}

#[must_use]
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

#[derive(Debug, Clone, Serialize)]
pub struct CpuReport {
    pub cores: usize,
    /// Names of the features present, in a fixed order.
    pub features: Vec<&'static str>,
    /// Names of the features looked for but absent.
    pub missing: Vec<&'static str>,
}

impl CpuReport {
    #[must_use]
    pub fn detect() -> Self {
        let list = cpu::features().as_list();
        Self {
            cores: available_cores(),
            features: list.iter().filter(|(_, present)| *present).map(|(n, _)| *n).collect(),
            missing: list.iter().filter(|(_, present)| !*present).map(|(n, _)| *n).collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct KdfRow {
    /// `pbkdf2-sha1`, `pbkdf2-sha256`, `pbkdf2-sha512`, `argon2i`, `argon2id`.
    pub kdf: String,
    pub key_bits: usize,
    /// PBKDF2: iterations per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations_per_second: Option<u64>,
    /// Argon2: passes, memory and lanes that take about `requested_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_cost: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_kib: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_ms: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CipherRow {
    pub cipher: &'static str,
    /// The IV/tweak generator (`plain64`) or `aead` for GCM.
    pub mode: &'static str,
    pub key_bits: usize,
    pub block_bytes: usize,
    /// Bytes of data each thread's calls walked through (`--span`).
    pub span_bytes: usize,
    /// Sector size inside each call for XTS/CBC; absent for GCM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sector_bytes: Option<usize>,
    pub threads: usize,
    #[serde(serialize_with = "one_decimal")]
    pub encrypt_mib_s: f64,
    #[serde(serialize_with = "one_decimal")]
    pub decrypt_mib_s: f64,
    /// With `--cpu-time`: MiB per CPU-second of the worker threads (summed
    /// over threads, like the wall-clock figure).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "one_decimal_opt")]
    pub encrypt_mib_per_cpu_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "one_decimal_opt")]
    pub decrypt_mib_per_cpu_s: Option<f64>,
    pub implementation: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct RngRow {
    pub implementation: &'static str,
    pub block_bytes: usize,
    pub threads: usize,
    #[serde(serialize_with = "one_decimal")]
    pub mib_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub cpu: CpuReport,
    pub pbkdf: Vec<KdfRow>,
    pub ciphers: Vec<CipherRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rng: Option<RngRow>,
    /// With `--ceiling`: what the AES instructions alone do on one core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<CeilingRow>,
}

/// MiB/s of AES rounds on the CPU's widest AES vectors with no memory
/// traffic: the most any AES mode can reach on one core of this CPU.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CeilingRow {
    /// The instructions measured: `vaes-512`, `vaes-256` or `aes-ni`.
    pub instructions: &'static str,
    #[serde(serialize_with = "one_decimal")]
    pub aes128_mib_s: f64,
    #[serde(serialize_with = "one_decimal")]
    pub aes256_mib_s: f64,
    /// With `--cpu-time`: the same per CPU-second of the measuring thread.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "one_decimal_opt")]
    pub aes128_mib_per_cpu_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "one_decimal_opt")]
    pub aes256_mib_per_cpu_s: Option<f64>,
}

fn one_decimal<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64((value * 10.0).round() / 10.0)
}

#[allow(clippy::ref_option)] // serde's `serialize_with` passes `&Option<T>`
fn one_decimal_opt<S: serde::Serializer>(
    value: &Option<f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => one_decimal(value, serializer),
        None => serializer.serialize_none(),
    }
}

/// Runs the benchmark. `progress` is told what is being measured next.
pub fn run(settings: &Settings, progress: &mut dyn FnMut(&str)) -> Result<Report, BenchError> {
    let mut pbkdf = Vec::new();
    if settings.kdf {
        for alg in [HashAlg::Sha1, HashAlg::Sha256, HashAlg::Sha512] {
            progress(&format!("pbkdf2-{}", alg.name()));
            pbkdf.push(measure_pbkdf2(alg)?);
        }
        for variant in [Argon2Variant::Argon2i, Argon2Variant::Argon2id] {
            progress(variant.name());
            pbkdf.push(measure_argon2(variant, settings.iter_time)?);
        }
    }
    let mut ciphers = Vec::new();
    for &family in &settings.ciphers {
        for key_bits in family.key_bits() {
            progress(&format!("{} {key_bits}b", family.name()));
            ciphers.push(measure_cipher(settings, family, key_bits)?);
        }
    }
    let rng = if settings.rng {
        progress("drbg");
        Some(measure_rng(settings)?)
    } else {
        None
    };
    let ceiling = if settings.ceiling {
        progress("aes instruction ceiling");
        let seconds = settings.duration.as_secs_f64();
        let mib = |bits| xts_instruction_ceiling(bits, seconds);
        match (mib(128), mib(256)) {
            (Some(aes128), Some(aes256)) => {
                let mib = |bytes: f64| bytes / f64::from(1 << 20);
                let per_cpu = |rate: Option<f64>| rate.filter(|_| settings.cpu_time).map(mib);
                Some(CeilingRow {
                    instructions: match aes256.vector_bits {
                        512 => "vaes-512",
                        256 => "vaes-256",
                        _ => "aes-ni",
                    },
                    aes128_mib_s: mib(aes128.wall),
                    aes256_mib_s: mib(aes256.wall),
                    aes128_mib_per_cpu_s: per_cpu(aes128.cpu),
                    aes256_mib_per_cpu_s: per_cpu(aes256.cpu),
                })
            }
            _ => {
                return Err(BenchError::Settings(
                    "--ceiling needs AES-NI, which this CPU lacks".to_owned(),
                ))
            }
        }
    } else {
        None
    };
    Ok(Report { cpu: CpuReport::detect(), pbkdf, ciphers, rng, ceiling })
}

const KDF_PASSWORD: &[u8] = b"rampart benchmark passphrase";
const KDF_SALT: [u8; 32] = [0x5a; 32];

fn measure_pbkdf2(alg: HashAlg) -> Result<KdfRow, BenchError> {
    let mut out = [0u8; 32];
    let mut iterations: u32 = 1 << 12;
    loop {
        let start = Instant::now();
        pbkdf2(alg, KDF_PASSWORD, &KDF_SALT, iterations, &mut out)?;
        let elapsed = start.elapsed();
        if elapsed >= Duration::from_millis(250) || iterations >= 1 << 30 {
            let per_second = f64::from(iterations) / elapsed.as_secs_f64();
            return Ok(KdfRow {
                kdf: format!("pbkdf2-{}", alg.name()),
                key_bits: 256,
                iterations_per_second: Some(per_second as u64),
                time_cost: None,
                memory_kib: None,
                parallelism: None,
                requested_ms: None,
                measured_ms: None,
            });
        }
        iterations = iterations.saturating_mul(2);
    }
}

/// The Argon2 cost cryptsetup would pick for `target`: at most 1 GiB and
/// four lanes, at least four passes; memory shrinks when four passes of the
/// full amount take too long, otherwise passes grow to fill the time.
pub fn argon2_cost_for(
    variant: Argon2Variant,
    target: Duration,
) -> Result<(Argon2Params, Duration), BenchError> {
    const MAX_MEMORY_KIB: u32 = 1 << 20;
    const MIN_MEMORY_KIB: u32 = 32 << 10;
    const MIN_TIME: u32 = 4;
    let parallelism = u32::try_from(available_cores().min(4)).unwrap_or(4);
    let mut out = [0u8; 32];
    let mut timed = |params: &Argon2Params| -> Result<Duration, BenchError> {
        let start = Instant::now();
        argon2(params, KDF_PASSWORD, &KDF_SALT, &mut out)?;
        Ok(start.elapsed())
    };
    // Price one KiB-pass on a small probe, then size the real cost from it.
    let probe = Argon2Params { variant, time: 1, memory_kib: MIN_MEMORY_KIB, parallelism };
    let probe_secs = timed(&probe)?.as_secs_f64().max(1e-6);
    let per_kib_pass = probe_secs / f64::from(MIN_MEMORY_KIB);
    let target_secs = target.as_secs_f64();
    let full_cost = per_kib_pass * f64::from(MAX_MEMORY_KIB) * f64::from(MIN_TIME);
    let params = if full_cost > target_secs {
        let memory = f64::from(MAX_MEMORY_KIB) * target_secs / full_cost;
        Argon2Params {
            variant,
            time: MIN_TIME,
            memory_kib: (memory as u32).clamp(MIN_MEMORY_KIB, MAX_MEMORY_KIB),
            parallelism,
        }
    } else {
        let passes = target_secs / (per_kib_pass * f64::from(MAX_MEMORY_KIB));
        Argon2Params {
            variant,
            time: (passes as u32).max(MIN_TIME),
            memory_kib: MAX_MEMORY_KIB,
            parallelism,
        }
    };
    // The probe is small and noisy; correct once from a full-size run.
    let mut params = params;
    let mut measured = timed(&params)?;
    let ratio = target_secs / measured.as_secs_f64().max(1e-6);
    if !(0.9..=1.1).contains(&ratio) {
        if params.time == MIN_TIME && (ratio < 1.0 || params.memory_kib < MAX_MEMORY_KIB) {
            let memory = f64::from(params.memory_kib) * ratio;
            params.memory_kib = (memory as u32).clamp(MIN_MEMORY_KIB, MAX_MEMORY_KIB);
        } else {
            params.time = ((f64::from(params.time) * ratio).round() as u32).max(MIN_TIME);
        }
        measured = timed(&params)?;
    }
    Ok((params, measured))
}

fn measure_argon2(variant: Argon2Variant, target: Duration) -> Result<KdfRow, BenchError> {
    let (params, measured) = argon2_cost_for(variant, target)?;
    Ok(KdfRow {
        kdf: variant.name().to_owned(),
        key_bits: 256,
        iterations_per_second: None,
        time_cost: Some(params.time),
        memory_kib: Some(params.memory_kib),
        parallelism: Some(params.parallelism),
        requested_ms: Some(u64::try_from(target.as_millis()).unwrap_or(u64::MAX)),
        measured_ms: Some(u64::try_from(measured.as_millis()).unwrap_or(u64::MAX)),
    })
}

/// One keyed cipher instance per worker thread.
enum Worker {
    Xts(Xts),
    Cbc(Cbc),
    Gcm(Gcm),
}

impl Worker {
    fn new(
        family: CipherFamily,
        key_bits: usize,
        xts_path: Option<XtsPath>,
    ) -> Result<Self, BenchError> {
        let mut key = vec![0u8; key_bits / 8];
        fill_random(&mut key)?;
        Ok(match family {
            CipherFamily::AesXts => Self::Xts(match xts_path {
                Some(path) => Xts::with_path(&key, path)?,
                None => Xts::new(&key)?,
            }),
            CipherFamily::AesCbc => Self::Cbc(Cbc::new(&key, CbcIv::Plain64)?),
            CipherFamily::AesGcm => Self::Gcm(Gcm::new(&key)?),
        })
    }

    fn implementation(&self) -> &'static str {
        match self {
            Self::Xts(xts) => xts.implementation(),
            Self::Cbc(cbc) => cbc.implementation(),
            Self::Gcm(gcm) => gcm.implementation(),
        }
    }

    /// One call on the whole buffer. `call` numbers the sectors and nonces
    /// so that no two calls reuse a tweak or a nonce.
    fn process(
        &mut self,
        buffer: &mut [u8],
        sector: usize,
        call: u64,
        encrypt: bool,
        tag: &mut [u8; 16],
    ) -> Result<(), CryptoError> {
        let sectors_per_call = (buffer.len() / sector) as u64;
        let first = call.wrapping_mul(sectors_per_call);
        match self {
            Self::Xts(xts) if encrypt => xts.encrypt_sectors(buffer, sector, first, 1),
            Self::Xts(xts) => xts.decrypt_sectors(buffer, sector, first, 1),
            Self::Cbc(cbc) if encrypt => cbc.encrypt_sectors(buffer, sector, first, 1),
            Self::Cbc(cbc) => cbc.decrypt_sectors(buffer, sector, first, 1),
            Self::Gcm(gcm) => {
                let mut nonce = [0u8; GCM_NONCE_LEN];
                nonce[..8].copy_from_slice(&call.to_le_bytes());
                if encrypt {
                    *tag = gcm.seal(&nonce, &[], buffer)?;
                } else {
                    // Decryption includes verification, as a reader's would;
                    // the data was sealed under this call's nonce just before.
                    gcm.open(&nonce, &[], buffer, tag)?;
                }
                Ok(())
            }
        }
    }
}

fn measure_cipher(
    settings: &Settings,
    family: CipherFamily,
    key_bits: usize,
) -> Result<CipherRow, BenchError> {
    let template = Worker::new(family, key_bits, settings.xts_path)?;
    let implementation = template.implementation();
    let (encrypt_mib_s, encrypt_cpu) = throughput(settings, family, key_bits, true)?;
    let (decrypt_mib_s, decrypt_cpu) = throughput(settings, family, key_bits, false)?;
    Ok(CipherRow {
        cipher: family.name(),
        mode: if family == CipherFamily::AesGcm { "aead" } else { "plain64" },
        key_bits,
        block_bytes: settings.block_bytes,
        span_bytes: settings.span_bytes,
        sector_bytes: (family != CipherFamily::AesGcm).then_some(settings.sector_bytes),
        threads: settings.threads,
        encrypt_mib_s,
        decrypt_mib_s,
        encrypt_mib_per_cpu_s: settings.cpu_time.then_some(encrypt_cpu),
        decrypt_mib_per_cpu_s: settings.cpu_time.then_some(decrypt_cpu),
        implementation,
    })
}

/// What one worker did: bytes, wall time, CPU time of its thread.
type Work = (u64, Duration, Duration);

/// The calling thread's CPU time; an error if the kernel refuses the clock.
fn cpu_clock() -> Result<Duration, BenchError> {
    thread_cpu_time().ok_or_else(|| {
        BenchError::Settings("the kernel refuses CLOCK_THREAD_CPUTIME_ID".to_owned())
    })
}

/// Runs `threads` workers for the configured time and returns MiB/s, per
/// wall-clock second and per CPU-second of each worker's thread, summed
/// over all of them.
fn throughput(
    settings: &Settings,
    family: CipherFamily,
    key_bits: usize,
    encrypt: bool,
) -> Result<(f64, f64), BenchError> {
    let results: Vec<Result<Work, BenchError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..settings.threads)
            .map(|_| {
                scope.spawn(move || -> Result<Work, BenchError> {
                    let mut worker = Worker::new(family, key_bits, settings.xts_path)?;
                    let mut data = Vec::new();
                    data.try_reserve_exact(settings.span_bytes).map_err(|_| {
                        BenchError::Settings(format!(
                            "--span {}: cannot allocate that much for each of {} threads",
                            settings.span_bytes, settings.threads
                        ))
                    })?;
                    data.resize(settings.span_bytes, 0);
                    fill_random(&mut data)?;
                    let calls_per_span = (settings.span_bytes / settings.block_bytes) as u64;
                    let mut tag = [0u8; 16];
                    let mut call: u64 = 0;
                    // GCM decryption verifies, so each call opens a buffer
                    // sealed just before under its nonce; sealing is not
                    // counted.
                    let reseal = !encrypt && family == CipherFamily::AesGcm;
                    let sector = settings.sector_bytes;
                    let start = Instant::now();
                    let cpu_start = cpu_clock()?;
                    let mut excluded = Duration::ZERO;
                    let mut cpu_excluded = Duration::ZERO;
                    let mut bytes: u64 = 0;
                    loop {
                        for _ in 0..16 {
                            // In range: `span_bytes` is a multiple of
                            // `block_bytes` (`set_span`).
                            let at = (call % calls_per_span) as usize * settings.block_bytes;
                            let buffer = &mut data[at..at + settings.block_bytes];
                            if reseal {
                                let sealing = Instant::now();
                                let cpu_sealing = cpu_clock()?;
                                worker.process(buffer, sector, call, true, &mut tag)?;
                                excluded += sealing.elapsed();
                                cpu_excluded += cpu_clock()?.saturating_sub(cpu_sealing);
                            }
                            worker.process(buffer, sector, call, encrypt, &mut tag)?;
                            call += 1;
                            bytes += settings.block_bytes as u64;
                        }
                        if start.elapsed() >= settings.duration {
                            let cpu = cpu_clock()?.saturating_sub(cpu_start);
                            return Ok((
                                bytes,
                                start.elapsed().saturating_sub(excluded),
                                cpu.saturating_sub(cpu_excluded),
                            ));
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| Err(BenchError::Settings("worker panicked".into())))
            })
            .collect()
    });
    let (mut wall, mut cpu) = (0.0, 0.0);
    for result in results {
        let (bytes, elapsed, cpu_elapsed) = result?;
        wall += bytes as f64 / elapsed.as_secs_f64().max(1e-9);
        cpu += bytes as f64 / cpu_elapsed.as_secs_f64().max(1e-9);
    }
    Ok((wall / (1024.0 * 1024.0), cpu / (1024.0 * 1024.0)))
}

fn measure_rng(settings: &Settings) -> Result<RngRow, BenchError> {
    let block_bytes = settings.block_bytes.max(1 << 20);
    let results: Vec<Result<f64, BenchError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..settings.threads)
            .map(|_| {
                scope.spawn(move || -> Result<f64, BenchError> {
                    let mut buffer = vec![0u8; block_bytes];
                    let start = Instant::now();
                    let mut bytes: u64 = 0;
                    while start.elapsed() < settings.duration {
                        fill_random(&mut buffer)?;
                        bytes += block_bytes as u64;
                    }
                    Ok(bytes as f64 / start.elapsed().as_secs_f64())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| Err(BenchError::Settings("worker panicked".into())))
            })
            .collect()
    });
    let mut total = 0.0;
    for result in results {
        total += result?;
    }
    Ok(RngRow {
        implementation: "aws-lc ctr-drbg (aes-256)",
        block_bytes,
        threads: settings.threads,
        mib_s: total / (1024.0 * 1024.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_reject_unusable_sizes() {
        assert!(Settings::new(vec![], 0, None, 1, 1.0).is_err());
        assert!(Settings::new(vec![], 100, None, 1, 1.0).is_err());
        assert!(Settings::new(vec![], 4096, Some(1024 * 8), 1, 1.0).is_err());
        assert!(Settings::new(vec![], 4096, Some(768), 1, 1.0).is_err());
        assert!(Settings::new(vec![], 4096, None, 1, 0.0).is_err());
        assert!(Settings::new(vec![], 4096, None, 1, f64::NAN).is_err());
        let ok = Settings::new(vec![], 65536, Some(512), 0, 1.0).unwrap();
        assert_eq!(ok.sector_bytes, 512);
        assert_eq!(ok.threads, available_cores());
        assert_eq!(Settings::new(vec![], 512, None, 1, 1.0).unwrap().sector_bytes, 512);
    }

    #[test]
    fn short_run_measures_every_requested_row() {
        let mut settings =
            Settings::new(vec![CipherFamily::AesXts, CipherFamily::AesGcm], 4096, None, 2, 0.02)
                .unwrap();
        settings.kdf = false;
        let report = run(&settings, &mut |_| {}).unwrap();
        let rows: Vec<_> = report.ciphers.iter().map(|r| (r.cipher, r.key_bits)).collect();
        assert_eq!(rows, [("aes-xts", 256), ("aes-xts", 512), ("aes-gcm", 128), ("aes-gcm", 256)]);
        for row in &report.ciphers {
            assert!(row.encrypt_mib_s > 0.0 && row.decrypt_mib_s > 0.0, "{row:?}");
            assert_eq!(row.threads, 2);
        }
        assert!(report.rng.unwrap().mib_s > 0.0);
    }

    fn request(ciphers: &[&str]) -> Request {
        Request {
            ciphers: ciphers.iter().map(ToString::to_string).collect(),
            block_bytes: 4096,
            sector_bytes: None,
            span_bytes: None,
            threads: 1,
            seconds: 1.0,
            iter_time_ms: 2000,
            xts_path: None,
            ceiling: false,
            cpu_time: false,
        }
    }

    fn refusal(request: &Request) -> String {
        Settings::from_request(request).unwrap_err().to_string()
    }

    #[test]
    fn requests_name_each_family_once_and_skip_the_kdf_rows() {
        let all = Settings::from_request(&request(&[])).unwrap();
        assert_eq!(all.ciphers, CipherFamily::ALL);
        assert!(all.kdf && all.rng);
        assert_eq!(all.iter_time, Duration::from_millis(2000));
        let some = Settings::from_request(&request(&["aes-gcm", "aes-xts", "aes-gcm"])).unwrap();
        assert_eq!(some.ciphers, [CipherFamily::AesGcm, CipherFamily::AesXts]);
        assert!(!some.kdf && !some.rng);
        let spanned =
            Settings::from_request(&Request { span_bytes: Some(8192), ..request(&[]) }).unwrap();
        assert_eq!(spanned.span_bytes, 8192);
    }

    #[test]
    fn requests_out_of_range_or_unknown_are_refused() {
        assert_eq!(
            refusal(&request(&["des"])),
            "unknown cipher 'des' (expected aes-cbc, aes-xts or aes-gcm)"
        );
        for ms in [99, 60_001] {
            assert_eq!(
                refusal(&Request { iter_time_ms: ms, ..request(&[]) }),
                format!("--iter-time {ms}: must be between 100 and 60000 ms")
            );
        }
        assert!(refusal(&Request { span_bytes: Some(1000), ..request(&[]) })
            .starts_with("invalid benchmark setting: --span 1000"));
        let known: Vec<&str> = XtsPath::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(
            refusal(&Request { xts_path: Some("rot13".into()), ..request(&[]) }),
            format!("unknown XTS path 'rot13' (expected one of {})", known.join(", "))
        );
        for path in XtsPath::ALL.into_iter().filter(|p| !p.available()) {
            assert_eq!(
                refusal(&Request { xts_path: Some(path.name().into()), ..request(&[]) }),
                format!("this CPU lacks the instructions of XTS path '{}'", path.name())
            );
        }
    }

    #[test]
    fn cpu_time_figures_only_when_asked_and_never_below_wall_clock() {
        let mut settings = Settings::new(vec![CipherFamily::AesXts], 4096, None, 1, 0.05).unwrap();
        settings.kdf = false;
        settings.rng = false;
        let plain = run(&settings, &mut |_| {}).unwrap();
        assert!(plain.ciphers.iter().all(|r| r.encrypt_mib_per_cpu_s.is_none()));
        let json = serde_json::to_string(&plain).unwrap();
        assert!(!json.contains("per_cpu_s"), "{json}");
        settings.cpu_time = true;
        let report = run(&settings, &mut |_| {}).unwrap();
        for row in &report.ciphers {
            let (enc, dec) =
                (row.encrypt_mib_per_cpu_s.unwrap(), row.decrypt_mib_per_cpu_s.unwrap());
            // A thread cannot run longer than the wall clock it ran within
            // (1% slack for the two clocks' granularity).
            assert!(enc >= row.encrypt_mib_s * 0.99 && dec >= row.decrypt_mib_s * 0.99, "{row:?}");
        }
    }
}
