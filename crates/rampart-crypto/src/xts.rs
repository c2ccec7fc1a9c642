use crate::ffi::{constant_time_eq, AesBlockKey, CipherCtx, EvpCipher};
use crate::{check_sectors, cpu, plain64, CryptoError, Result, AES_BLOCK};

/// IEEE 1619 / NIST SP 800-38E cap on one data unit: 2^20 blocks.
const MAX_UNIT_BYTES: usize = (1 << 20) * AES_BLOCK;

/// Blocks whose tweaks are computed in one batch by the AES-128 path; one
/// 4 KiB sector, so the batch stays in L1 cache between the two XOR passes.
const TWEAK_BATCH: usize = 256;

/// AES-XTS (IEEE 1619) over whole sectors or single data units.
///
/// A 64-byte key (AES-256-XTS, "512 bits" in cryptsetup's terms) runs on
/// AWS-LC's own XTS, which uses VAES/AVX-512 where the CPU has them. AWS-LC
/// has no AES-128-XTS, so a 32-byte key runs XTS computed here over AWS-LC's
/// AES-128 ECB: tweaks for a whole sector are derived first, then the sector
/// is whitened, encrypted in one pipelined ECB call and whitened again.
///
/// Not `Sync`: each thread uses its own [`Xts::try_clone`].
#[derive(Debug)]
pub struct Xts {
    engine: Engine,
}

#[derive(Debug)]
enum Engine {
    AwsLc256 { enc: CipherCtx, dec: CipherCtx },
    Composed128 { enc: CipherCtx, dec: CipherCtx, tweak_key: AesBlockKey },
}

impl Xts {
    /// `key` is key1 || key2: 32 bytes for AES-128-XTS, 64 for AES-256-XTS.
    /// Identical halves are rejected.
    pub fn new(key: &[u8]) -> Result<Self> {
        let half = key.len() / 2;
        if key.len() != 32 && key.len() != 64 {
            return Err(CryptoError::InvalidKeyLength {
                algorithm: "AES-XTS",
                len: key.len(),
                expected: "32 (AES-128-XTS) or 64 (AES-256-XTS)",
            });
        }
        if constant_time_eq(&key[..half], &key[half..]) {
            return Err(CryptoError::XtsDuplicateKeyHalves);
        }
        let engine = if key.len() == 64 {
            Engine::AwsLc256 {
                enc: CipherCtx::new(EvpCipher::Aes256Xts, key, true)?,
                dec: CipherCtx::new(EvpCipher::Aes256Xts, key, false)?,
            }
        } else {
            Engine::Composed128 {
                enc: CipherCtx::new(EvpCipher::Aes128Ecb, &key[..half], true)?,
                dec: CipherCtx::new(EvpCipher::Aes128Ecb, &key[..half], false)?,
                tweak_key: AesBlockKey::new(&key[half..])?,
            }
        };
        Ok(Self { engine })
    }

    /// An independent instance with the same key, for another thread.
    pub fn try_clone(&self) -> Result<Self> {
        let engine = match &self.engine {
            Engine::AwsLc256 { enc, dec } => {
                Engine::AwsLc256 { enc: enc.try_clone()?, dec: dec.try_clone()? }
            }
            Engine::Composed128 { enc, dec, tweak_key } => Engine::Composed128 {
                enc: enc.try_clone()?,
                dec: dec.try_clone()?,
                tweak_key: tweak_key.clone(),
            },
        };
        Ok(Self { engine })
    }

    /// Key size in bits as cryptsetup prints it (both halves): 256 or 512.
    #[must_use]
    pub fn key_bits(&self) -> usize {
        match self.engine {
            Engine::AwsLc256 { .. } => 512,
            Engine::Composed128 { .. } => 256,
        }
    }

    /// Which implementation runs, for `rampart bench`.
    #[must_use]
    pub fn implementation(&self) -> &'static str {
        let features = cpu::features();
        match self.engine {
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
    pub fn encrypt_sectors(
        &mut self,
        data: &mut [u8],
        sector_size: usize,
        first_tweak: u64,
        tweak_step: u64,
    ) -> Result<()> {
        self.sectors(data, sector_size, first_tweak, tweak_step, true)
    }

    /// The inverse of [`Xts::encrypt_sectors`].
    pub fn decrypt_sectors(
        &mut self,
        data: &mut [u8],
        sector_size: usize,
        first_tweak: u64,
        tweak_step: u64,
    ) -> Result<()> {
        self.sectors(data, sector_size, first_tweak, tweak_step, false)
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
        data: &mut [u8],
        sector_size: usize,
        first_tweak: u64,
        tweak_step: u64,
        encrypt: bool,
    ) -> Result<()> {
        check_sectors(data, sector_size)?;
        check_unit(sector_size)?;
        let mut tweak = first_tweak;
        for sector in data.chunks_exact_mut(sector_size) {
            self.unit(&plain64(tweak), sector, encrypt)?;
            tweak = tweak.wrapping_add(tweak_step);
        }
        Ok(())
    }

    fn unit(&mut self, tweak: &[u8; 16], data: &mut [u8], encrypt: bool) -> Result<()> {
        match &mut self.engine {
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
}
