use crate::ffi::{constant_time_eq, AesBlockKey, CipherCtx, EvpCipher};
use crate::xts_simd as simd;
use crate::{check_sectors, cpu, plain64, CryptoError, Result, AES_BLOCK};

/// IEEE 1619 / NIST SP 800-38E cap on one data unit: 2^20 blocks.
const MAX_UNIT_BYTES: usize = (1 << 20) * AES_BLOCK;

/// Blocks whose tweaks are computed in one batch by the AES-128 path; one
/// 4 KiB sector, so the batch stays in L1 cache between the two XOR passes.
const TWEAK_BATCH: usize = 256;

/// Which code computes AES-XTS. [`Xts::new`] takes the fastest this CPU
/// has; [`Xts::with_path`] forces one (for tests and `rampart bench`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum XtsPath {
    /// Rampart's engine on VAES with 512-bit vectors (AVX-512F/BW,
    /// VPCLMULQDQ), tweaks advanced by bit shifts: measured faster on a
    /// Zen 5 whose 512-bit AES instructions ran at half the rate of a later
    /// one (BENCHMARKS.md, "AES-XTS engine"); forced only.
    Vaes512,
    /// The same with tweaks advanced by byte shifts, which leave the port
    /// that Intel's cores give 512-bit AES instructions to them: the faster
    /// on Intel's cores and on a Zen 5 that issues two 512-bit AES
    /// instructions per cycle, and the default wherever AVX-512 is.
    Vaes512ByteShift,
    /// Rampart's engine on VAES with 256-bit vectors (AVX2, VPCLMULQDQ).
    Vaes256,
    /// Rampart's engine on AES-NI with 128-bit vectors (and PCLMULQDQ).
    AesNi,
    /// AWS-LC: its AES-256-XTS for 64-byte keys; for 32-byte keys XTS
    /// computed here over its AES-128-ECB. Runs on any CPU.
    AwsLc,
}

impl XtsPath {
    /// Every path, fastest first.
    pub const ALL: [Self; 5] =
        [Self::Vaes512ByteShift, Self::Vaes512, Self::Vaes256, Self::AesNi, Self::AwsLc];

    /// The fastest path this CPU runs.
    #[must_use]
    pub fn best() -> Self {
        Self::ALL.into_iter().find(|path| path.available()).unwrap_or(Self::AwsLc)
    }

    /// Whether this CPU has the instructions the path needs.
    #[must_use]
    pub fn available(self) -> bool {
        match self.native() {
            Some(path) => path.available(),
            None => true,
        }
    }

    /// The name `rampart bench --xts-path` takes.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Vaes512 => "vaes512",
            Self::Vaes512ByteShift => "vaes512-byte-shift",
            Self::Vaes256 => "vaes256",
            Self::AesNi => "aes-ni",
            Self::AwsLc => "aws-lc",
        }
    }

    /// The inverse of [`XtsPath::name`].
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|path| path.name() == name)
    }

    fn native(self) -> Option<simd::Path> {
        match self {
            Self::Vaes512 => Some(simd::Path::Vaes512),
            Self::Vaes512ByteShift => Some(simd::Path::Vaes512ByteShift),
            Self::Vaes256 => Some(simd::Path::Vaes256),
            Self::AesNi => Some(simd::Path::AesNi),
            Self::AwsLc => None,
        }
    }

    fn from_native(path: simd::Path) -> Self {
        match path {
            simd::Path::Vaes512 => Self::Vaes512,
            simd::Path::Vaes512ByteShift => Self::Vaes512ByteShift,
            simd::Path::Vaes256 => Self::Vaes256,
            simd::Path::AesNi => Self::AesNi,
        }
    }
}

/// AES-XTS (IEEE 1619) over whole sectors or single data units.
///
/// By default it runs Rampart's engine ([`XtsPath`]): any number of
/// consecutive sectors per call, AES rounds of many blocks interleaved on
/// VAES (or AES-NI), tweaks advanced in registers. On CPUs without AES-NI,
/// or when [`XtsPath::AwsLc`] is forced, a 64-byte key (AES-256-XTS, "512
/// bits" in cryptsetup's terms) runs on AWS-LC's XTS and a 32-byte key on
/// XTS computed here over AWS-LC's AES-128 ECB.
///
/// Not `Sync`: each thread uses its own [`Xts::try_clone`].
#[derive(Debug)]
pub struct Xts {
    engine: Engine,
    key_bits: usize,
    /// AWS-LC's AES-256-XTS for whole sectors of 4 KiB and more on CPUs
    /// whose best engine path is AES-NI: there AWS-LC's AES-NI XTS measured
    /// slightly faster; the engine keeps smaller sectors, where one call for
    /// many sectors wins. With VAES the
    /// engine is faster at every sector size and this is `None`. Only on
    /// the default path: a forced path runs as asked.
    large_sectors: Option<Box<[CipherCtx; 2]>>,
}

#[derive(Debug)]
enum Engine {
    Native(Box<simd::Schedule>),
    AwsLc256 { enc: CipherCtx, dec: CipherCtx },
    Composed128 { enc: CipherCtx, dec: CipherCtx, tweak_key: AesBlockKey },
}

fn check_length(key: &[u8]) -> Result<()> {
    if key.len() != 32 && key.len() != 64 {
        return Err(CryptoError::InvalidKeyLength {
            algorithm: "AES-XTS",
            len: key.len(),
            expected: "32 (AES-128-XTS) or 64 (AES-256-XTS)",
        });
    }
    Ok(())
}

impl Xts {
    /// `key` is key1 || key2: 32 bytes for AES-128-XTS, 64 for AES-256-XTS.
    /// Identical halves are rejected. Runs on [`XtsPath::best`].
    pub fn new(key: &[u8]) -> Result<Self> {
        let mut xts = Self::with_path(key, XtsPath::best())?;
        if key.len() == 64 && xts.path() == XtsPath::AesNi {
            xts.large_sectors = Some(Box::new([
                CipherCtx::new(EvpCipher::Aes256Xts, key, true)?,
                CipherCtx::new(EvpCipher::Aes256Xts, key, false)?,
            ]));
        }
        Ok(xts)
    }

    /// The sector size from which AES-256 sectors go to AWS-LC on AES-NI.
    const LARGE_SECTOR: usize = 4096;

    /// As [`Xts::new`], for data Linux's dm-crypt may have written:
    /// identical key halves are accepted, as dm-crypt accepts them outside
    /// FIPS mode (a plain-mode key read from a file of repeated bytes).
    /// IEEE 1619-2018 forbids such keys, which weaken the mode, and
    /// Rampart never makes one (its volume keys are random); but a volume
    /// already encrypted under one must still read. Such a key runs on the
    /// engine's own XTS, which needs AES-NI, since AWS-LC's refuses it.
    pub fn new_accepting_identical_halves(key: &[u8]) -> Result<Self> {
        check_length(key)?;
        let half = key.len() / 2;
        if !constant_time_eq(&key[..half], &key[half..]) {
            return Self::new(key);
        }
        let path = XtsPath::best();
        if path.native().is_none() {
            return Err(CryptoError::XtsDuplicateKeyHalves);
        }
        Self::build(key, path)
    }

    /// As [`Xts::new`], on the given path; an error if this CPU lacks its
    /// instructions.
    pub fn with_path(key: &[u8], path: XtsPath) -> Result<Self> {
        check_length(key)?;
        let half = key.len() / 2;
        if constant_time_eq(&key[..half], &key[half..]) {
            return Err(CryptoError::XtsDuplicateKeyHalves);
        }
        Self::build(key, path)
    }

    /// The engine for a key of a valid length on `path`.
    fn build(key: &[u8], path: XtsPath) -> Result<Self> {
        let half = key.len() / 2;
        if !path.available() {
            return Err(CryptoError::InvalidParameter(
                "this CPU lacks the instructions of the requested XTS path",
            ));
        }
        let engine = match path.native() {
            Some(native) => Engine::Native(
                simd::Schedule::new(key, native)
                    .ok_or(CryptoError::InvalidParameter("this CPU has no AES-NI"))?,
            ),
            None if key.len() == 64 => Engine::AwsLc256 {
                enc: CipherCtx::new(EvpCipher::Aes256Xts, key, true)?,
                dec: CipherCtx::new(EvpCipher::Aes256Xts, key, false)?,
            },
            None => Engine::Composed128 {
                enc: CipherCtx::new(EvpCipher::Aes128Ecb, &key[..half], true)?,
                dec: CipherCtx::new(EvpCipher::Aes128Ecb, &key[..half], false)?,
                tweak_key: AesBlockKey::new(&key[half..])?,
            },
        };
        Ok(Self { engine, key_bits: key.len() * 8, large_sectors: None })
    }

    /// An independent instance with the same key, for another thread.
    pub fn try_clone(&self) -> Result<Self> {
        let engine = match &self.engine {
            Engine::Native(keys) => Engine::Native(keys.clone()),
            Engine::AwsLc256 { enc, dec } => {
                Engine::AwsLc256 { enc: enc.try_clone()?, dec: dec.try_clone()? }
            }
            Engine::Composed128 { enc, dec, tweak_key } => Engine::Composed128 {
                enc: enc.try_clone()?,
                dec: dec.try_clone()?,
                tweak_key: tweak_key.clone(),
            },
        };
        let large_sectors = match &self.large_sectors {
            Some(pair) => Some(Box::new([pair[0].try_clone()?, pair[1].try_clone()?])),
            None => None,
        };
        Ok(Self { engine, key_bits: self.key_bits, large_sectors })
    }

    /// Key size in bits as cryptsetup prints it (both halves): 256 or 512.
    #[must_use]
    pub fn key_bits(&self) -> usize {
        self.key_bits
    }

    /// The path this instance runs on.
    #[must_use]
    pub fn path(&self) -> XtsPath {
        match &self.engine {
            Engine::Native(keys) => XtsPath::from_native(keys.path()),
            _ => XtsPath::AwsLc,
        }
    }

    /// Which implementation runs, for `rampart bench`.
    #[must_use]
    pub fn implementation(&self) -> &'static str {
        let features = cpu::features();
        match &self.engine {
            Engine::Native(_) if self.large_sectors.is_some() => {
                "rampart xts engine (aes-ni, multi-sector; aws-lc aes-ni for 4 KiB sectors)"
            }
            Engine::Native(keys) => match keys.path() {
                simd::Path::Vaes512 => "rampart xts engine (vaes avx-512, multi-sector)",
                simd::Path::Vaes512ByteShift => {
                    "rampart xts engine (vaes avx-512, multi-sector, byte-shift tweaks)"
                }
                simd::Path::Vaes256 => "rampart xts engine (vaes avx2, multi-sector)",
                simd::Path::AesNi => "rampart xts engine (aes-ni, multi-sector)",
            },
            Engine::AwsLc256 { .. } if features.xts_avx512() => "aws-lc aes-256-xts (vaes avx-512)",
            Engine::AwsLc256 { .. } if features.aes_ni => "aws-lc aes-256-xts (aes-ni)",
            Engine::AwsLc256 { .. } => "aws-lc aes-256-xts (software)",
            Engine::Composed128 { .. } if features.aes_ni => {
                "rampart xts over aws-lc aes-128-ecb (aes-ni)"
            }
            Engine::Composed128 { .. } => "rampart xts over aws-lc aes-128-ecb (software)",
        }
    }

    /// Encrypts consecutive sectors in place. Sector `i` of `data` uses the
    /// `plain64` tweak `first_tweak + i * tweak_step` (wrapping, as dm-crypt):
    /// LUKS2 counts tweaks in 512-byte units, so 4096-byte sectors step by 8.
    /// One call covers all of them.
    pub fn encrypt_sectors(
        &mut self,
        data: &mut [u8],
        sector_size: usize,
        first_tweak: u64,
        tweak_step: u64,
    ) -> Result<()> {
        self.sectors(Buffers::InPlace(data), sector_size, first_tweak, tweak_step, true)
    }

    /// The inverse of [`Xts::encrypt_sectors`].
    pub fn decrypt_sectors(
        &mut self,
        data: &mut [u8],
        sector_size: usize,
        first_tweak: u64,
        tweak_step: u64,
    ) -> Result<()> {
        self.sectors(Buffers::InPlace(data), sector_size, first_tweak, tweak_step, false)
    }

    /// [`Xts::encrypt_sectors`] out of place: reads `src`, writes `dst`
    /// (the same length), with no copy in between.
    pub fn encrypt_sectors_to(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        sector_size: usize,
        first_tweak: u64,
        tweak_step: u64,
    ) -> Result<()> {
        self.sectors(Buffers::Apart(src, dst), sector_size, first_tweak, tweak_step, true)
    }

    /// [`Xts::decrypt_sectors`] out of place.
    pub fn decrypt_sectors_to(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        sector_size: usize,
        first_tweak: u64,
        tweak_step: u64,
    ) -> Result<()> {
        self.sectors(Buffers::Apart(src, dst), sector_size, first_tweak, tweak_step, false)
    }

    /// Encrypts one data unit of any length from 16 bytes to 16 MiB with a
    /// full 128-bit tweak (ciphertext stealing for a partial last block).
    pub fn encrypt_unit(&mut self, tweak: &[u8; 16], data: &mut [u8]) -> Result<()> {
        check_unit(data.len())?;
        self.unit(tweak, data, true)
    }

    /// The inverse of [`Xts::encrypt_unit`].
    pub fn decrypt_unit(&mut self, tweak: &[u8; 16], data: &mut [u8]) -> Result<()> {
        check_unit(data.len())?;
        self.unit(tweak, data, false)
    }

    fn sectors(
        &mut self,
        buffers: Buffers<'_>,
        sector_size: usize,
        first_tweak: u64,
        tweak_step: u64,
        encrypt: bool,
    ) -> Result<()> {
        if sector_size >= Self::LARGE_SECTOR {
            if let Some(pair) = &mut self.large_sectors {
                let ctx = &mut pair[usize::from(!encrypt)];
                return aws_lc_sectors(ctx, buffers, sector_size, first_tweak, tweak_step);
            }
        }
        let data = match buffers {
            Buffers::InPlace(data) => data,
            Buffers::Apart(src, dst) => {
                if src.len() != dst.len() {
                    return Err(CryptoError::InvalidLength {
                        what: "XTS output buffer",
                        len: dst.len(),
                        requirement: "the length of the input",
                    });
                }
                check_sectors(src, sector_size)?;
                check_unit(sector_size)?;
                if let Engine::Native(keys) = &self.engine {
                    keys.sectors_apart(src, dst, sector_size, first_tweak, tweak_step, encrypt);
                    return Ok(());
                }
                dst.copy_from_slice(src);
                dst
            }
        };
        check_sectors(data, sector_size)?;
        check_unit(sector_size)?;
        if let Engine::Native(keys) = &self.engine {
            keys.sectors_in_place(data, sector_size, first_tweak, tweak_step, encrypt);
            return Ok(());
        }
        let mut tweak = first_tweak;
        for sector in data.chunks_exact_mut(sector_size) {
            self.unit(&plain64(tweak), sector, encrypt)?;
            tweak = tweak.wrapping_add(tweak_step);
        }
        Ok(())
    }

    fn unit(&mut self, tweak: &[u8; 16], data: &mut [u8], encrypt: bool) -> Result<()> {
        match &mut self.engine {
            Engine::Native(keys) => {
                keys.unit_in_place(data, tweak, encrypt);
                Ok(())
            }
            Engine::AwsLc256 { enc, dec } => {
                let ctx = if encrypt { enc } else { dec };
                ctx.apply_with_iv(tweak, data)
            }
            Engine::Composed128 { enc, dec, tweak_key } => {
                let ecb = if encrypt { enc } else { dec };
                composed_unit(ecb, tweak_key, tweak, data, encrypt)
            }
        }
    }
}

/// Whole sectors on AWS-LC's XTS, one call per sector, in place or not.
fn aws_lc_sectors(
    ctx: &mut CipherCtx,
    buffers: Buffers<'_>,
    sector_size: usize,
    first_tweak: u64,
    tweak_step: u64,
) -> Result<()> {
    check_unit(sector_size)?;
    let mut tweak = first_tweak;
    match buffers {
        Buffers::InPlace(data) => {
            check_sectors(data, sector_size)?;
            for sector in data.chunks_exact_mut(sector_size) {
                ctx.apply_with_iv(&plain64(tweak), sector)?;
                tweak = tweak.wrapping_add(tweak_step);
            }
        }
        Buffers::Apart(src, dst) => {
            check_sectors(src, sector_size)?;
            if src.len() != dst.len() {
                return Err(CryptoError::InvalidLength {
                    what: "XTS output buffer",
                    len: dst.len(),
                    requirement: "the length of the input",
                });
            }
            for (from, to) in src.chunks_exact(sector_size).zip(dst.chunks_exact_mut(sector_size)) {
                ctx.apply_with_iv_to(&plain64(tweak), from, to)?;
                tweak = tweak.wrapping_add(tweak_step);
            }
        }
    }
    Ok(())
}

/// Input and output of one call.
enum Buffers<'a> {
    InPlace(&'a mut [u8]),
    Apart(&'a [u8], &'a mut [u8]),
}

/// Bytes per second of AES-256 (`key_bits` 256) or AES-128 rounds on the
/// CPU's widest AES vectors (VAES on 512 or 256-bit registers, else AES-NI)
/// with no memory traffic, measured for about `seconds`: the instruction
/// ceiling that `rampart bench --ceiling` reports. `None` on CPUs without
/// AES-NI.
#[must_use]
pub fn xts_instruction_ceiling(key_bits: usize, seconds: f64) -> Option<CeilingRate> {
    simd::register_ceiling(if key_bits == 128 { 10 } else { 14 }, seconds)
}

/// What [`xts_instruction_ceiling`] measured, in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CeilingRate {
    /// Per second of wall-clock time.
    pub wall: f64,
    /// Per CPU-second of the measuring thread; `None` if the kernel
    /// refused `CLOCK_THREAD_CPUTIME_ID`.
    pub cpu: Option<f64>,
    /// Width of the registers the AES instructions ran on: 512, 256 or 128.
    pub vector_bits: u32,
}

fn check_unit(len: usize) -> Result<()> {
    if !(AES_BLOCK..=MAX_UNIT_BYTES).contains(&len) {
        return Err(CryptoError::InvalidLength {
            what: "XTS data unit",
            len,
            requirement: "between 16 bytes and 16 MiB",
        });
    }
    Ok(())
}

/// Multiplication by the primitive element α in GF(2^128), with the tweak
/// read as a little-endian integer (IEEE 1619 section 5.2).
#[inline]
fn mul_alpha(t: u128) -> u128 {
    (t << 1) ^ ((t >> 127) * 0x87)
}

#[inline]
fn xor_tweaks(data: &mut [u8], tweaks: &[u128]) {
    for (block, tweak) in data.chunks_exact_mut(AES_BLOCK).zip(tweaks) {
        let mut word = [0u8; AES_BLOCK];
        word.copy_from_slice(block);
        block.copy_from_slice(&(u128::from_le_bytes(word) ^ tweak).to_le_bytes());
    }
}

/// One block of XTS: whiten, ECB, whiten.
fn xts_block(ecb: &mut CipherCtx, block: &mut [u8; AES_BLOCK], tweak: u128) -> Result<()> {
    xor_tweaks(block, &[tweak]);
    ecb.apply(block)?;
    xor_tweaks(block, &[tweak]);
    Ok(())
}

/// XTS for one data unit over an ECB context (`ecb` encrypts or decrypts),
/// with ciphertext stealing per IEEE 1619 section 5.3.2 / 5.4.2.
fn composed_unit(
    ecb: &mut CipherCtx,
    tweak_key: &AesBlockKey,
    tweak: &[u8; 16],
    data: &mut [u8],
    encrypt: bool,
) -> Result<()> {
    let mut first = *tweak;
    tweak_key.encrypt_block(&mut first);
    let mut t = u128::from_le_bytes(first);

    let partial = data.len() % AES_BLOCK;
    let whole_blocks = data.len() / AES_BLOCK;
    // With stealing, the last whole block is processed together with the tail.
    let bulk_blocks = if partial == 0 { whole_blocks } else { whole_blocks - 1 };
    let (bulk, tail) = data.split_at_mut(bulk_blocks * AES_BLOCK);

    let mut tweaks = [0u128; TWEAK_BATCH];
    for chunk in bulk.chunks_mut(TWEAK_BATCH * AES_BLOCK) {
        let count = chunk.len() / AES_BLOCK;
        for slot in &mut tweaks[..count] {
            *slot = t;
            t = mul_alpha(t);
        }
        xor_tweaks(chunk, &tweaks[..count]);
        ecb.apply(chunk)?;
        xor_tweaks(chunk, &tweaks[..count]);
    }
    if partial == 0 {
        return Ok(());
    }

    // tail = last whole block (16 bytes) + `partial` bytes.
    let (t_last_whole, t_partial) = if encrypt { (t, mul_alpha(t)) } else { (mul_alpha(t), t) };
    let mut block = [0u8; AES_BLOCK];
    block.copy_from_slice(&tail[..AES_BLOCK]);
    xts_block(ecb, &mut block, t_last_whole)?;
    // block is now CC (encrypt) or PP (decrypt): its head becomes the short
    // final block, its tail is stolen to pad the other.
    let mut stolen = [0u8; AES_BLOCK];
    stolen[..partial].copy_from_slice(&tail[AES_BLOCK..]);
    stolen[partial..].copy_from_slice(&block[partial..]);
    tail[AES_BLOCK..].copy_from_slice(&block[..partial]);
    xts_block(ecb, &mut stolen, t_partial)?;
    tail[..AES_BLOCK].copy_from_slice(&stolen);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(len: usize) -> Vec<u8> {
        (0..len).map(|i| u8::try_from(i * 7 % 251).unwrap_or(0)).collect()
    }

    #[test]
    fn rejects_bad_key_lengths() {
        for len in [0, 16, 31, 33, 48, 63, 65, 128] {
            assert!(matches!(Xts::new(&key(len)), Err(CryptoError::InvalidKeyLength { .. })));
        }
    }

    #[test]
    fn rejects_identical_halves() {
        for len in [32, 64] {
            let mut k = key(len / 2);
            k.extend_from_within(..);
            assert_eq!(Xts::new(&k).err(), Some(CryptoError::XtsDuplicateKeyHalves));
            let mut xts = Xts::new_accepting_identical_halves(&k).unwrap();
            let plain: Vec<u8> = (0..4096).map(|i| i as u8).collect();
            let mut data = plain.clone();
            xts.encrypt_sectors(&mut data, 4096, 9, 8).unwrap();
            assert_ne!(data, plain);
            xts.decrypt_sectors(&mut data, 4096, 9, 8).unwrap();
            assert_eq!(data, plain);
        }
    }

    #[test]
    fn rejects_bad_lengths() {
        let mut xts = Xts::new(&key(64)).unwrap();
        let mut short = [0u8; 15];
        assert!(matches!(
            xts.encrypt_unit(&[0; 16], &mut short),
            Err(CryptoError::InvalidLength { .. })
        ));
        let mut data = vec![0u8; 1000];
        assert!(matches!(
            xts.encrypt_sectors(&mut data, 512, 0, 1),
            Err(CryptoError::InvalidLength { .. })
        ));
        assert_eq!(
            xts.encrypt_sectors(&mut data[..960], 480 + 1, 0, 1).err(),
            Some(CryptoError::InvalidSectorSize(481))
        );
    }

    #[test]
    fn round_trips_both_key_sizes() {
        for len in [32, 64] {
            let mut xts = Xts::new(&key(len)).unwrap();
            let original: Vec<u8> = (0..8192u32).map(|i| (i % 253) as u8).collect();
            let mut data = original.clone();
            xts.encrypt_sectors(&mut data, 4096, 77, 8).unwrap();
            assert_ne!(data, original);
            xts.decrypt_sectors(&mut data, 4096, 77, 8).unwrap();
            assert_eq!(data, original);
        }
    }

    #[test]
    fn default_path_sends_large_aes_256_sectors_to_aws_lc_only_on_aes_ni() {
        let xts = Xts::new(&key(64)).unwrap();
        let routed = xts.implementation().contains("aws-lc");
        match XtsPath::best() {
            // Measured faster than AWS-LC at every sector size with VAES.
            XtsPath::Vaes512 | XtsPath::Vaes512ByteShift | XtsPath::Vaes256 => {
                assert!(!routed, "{}", xts.implementation());
                assert!(xts.large_sectors.is_none());
            }
            XtsPath::AesNi => assert!(routed && xts.large_sectors.is_some()),
            _ => assert_eq!(xts.path(), XtsPath::AwsLc),
        }
        // AES-128 keys and forced paths are never routed.
        assert!(Xts::new(&key(32)).unwrap().large_sectors.is_none());
        let forced = Xts::with_path(&key(64), XtsPath::best()).unwrap();
        assert!(forced.large_sectors.is_none());
    }

    #[test]
    fn default_routing_of_large_sectors_matches_every_path() {
        let key = key(64);
        let mut data = vec![0u8; 4 * 8192];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        for sector in [4096usize, 8192] {
            let mut default = Xts::new(&key).unwrap();
            let mut reference = Xts::with_path(&key, XtsPath::AwsLc).unwrap();
            let mut engine = Xts::with_path(&key, XtsPath::best()).unwrap();
            let mut a = data.clone();
            default.encrypt_sectors(&mut a, sector, 5, 8).unwrap();
            let mut b = data.clone();
            reference.encrypt_sectors(&mut b, sector, 5, 8).unwrap();
            let mut c = vec![0u8; data.len()];
            engine.encrypt_sectors_to(&data, &mut c, sector, 5, 8).unwrap();
            let mut d = vec![0u8; data.len()];
            default.try_clone().unwrap().encrypt_sectors_to(&data, &mut d, sector, 5, 8).unwrap();
            assert!(a == b && b == c && c == d, "sector {sector}");
            let mut back = vec![0u8; data.len()];
            default.decrypt_sectors_to(&a, &mut back, sector, 5, 8).unwrap();
            assert_eq!(back, data);
            default.decrypt_sectors(&mut a, sector, 5, 8).unwrap();
            assert_eq!(a, data);
        }
    }
}
