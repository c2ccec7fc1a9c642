use crate::ffi::{AesBlockKey, CipherCtx, EvpCipher};
use crate::{check_sectors, cpu, digest, plain64, CryptoError, HashAlg, Result, AES_BLOCK};

/// How each sector's CBC IV is derived (dm-crypt IV generators).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CbcIv {
    /// The little-endian 64-bit sector number, zero-padded.
    Plain64,
    /// ESSIV with SHA-256: the `plain64` value encrypted with AES-256 under
    /// SHA-256(volume key).
    EssivSha256,
}

/// AES-CBC over sectors, for LUKS1 legacy volumes (`aes-cbc-plain64`,
/// `aes-cbc-essiv:sha256`). Not `Sync`: clone per thread.
#[derive(Debug)]
pub struct Cbc {
    enc: CipherCtx,
    dec: CipherCtx,
    essiv: Option<AesBlockKey>,
    key_bits: usize,
}

impl Cbc {
    /// `key` is 16, 24 or 32 bytes (AES-128, AES-192 or AES-256).
    pub fn new(key: &[u8], iv_mode: CbcIv) -> Result<Self> {
        let cipher = match key.len() {
            16 => EvpCipher::Aes128Cbc,
            24 => EvpCipher::Aes192Cbc,
            32 => EvpCipher::Aes256Cbc,
            len => {
                return Err(CryptoError::InvalidKeyLength {
                    algorithm: "AES-CBC",
                    len,
                    expected: "16, 24 or 32",
                })
            }
        };
        let essiv = match iv_mode {
            CbcIv::Plain64 => None,
            CbcIv::EssivSha256 => {
                let salt = digest(HashAlg::Sha256, key);
                Some(AesBlockKey::new(salt.expose())?)
            }
        };
        Ok(Self {
            enc: CipherCtx::new(cipher, key, true)?,
            dec: CipherCtx::new(cipher, key, false)?,
            essiv,
            key_bits: key.len() * 8,
        })
    }

    pub fn try_clone(&self) -> Result<Self> {
        Ok(Self {
            enc: self.enc.try_clone()?,
            dec: self.dec.try_clone()?,
            essiv: self.essiv.clone(),
            key_bits: self.key_bits,
        })
    }

    #[must_use]
    pub fn key_bits(&self) -> usize {
        self.key_bits
    }

    #[must_use]
    pub fn implementation(&self) -> &'static str {
        if cpu::features().aes_ni {
            "aws-lc aes-cbc (aes-ni)"
        } else {
            "aws-lc aes-cbc (software)"
        }
    }

    /// The IV of one sector.
    #[must_use]
    pub fn sector_iv(&self, sector: u64) -> [u8; 16] {
        let mut iv = plain64(sector);
        if let Some(essiv) = &self.essiv {
            essiv.encrypt_block(&mut iv);
        }
        iv
    }

    /// Encrypts consecutive sectors in place; sector `i` uses IV number
    /// `first_sector + i * iv_step`.
    pub fn encrypt_sectors(
        &mut self,
        data: &mut [u8],
        sector_size: usize,
        first_sector: u64,
        iv_step: u64,
    ) -> Result<()> {
        self.sectors(data, sector_size, first_sector, iv_step, true)
    }

    /// The inverse of [`Cbc::encrypt_sectors`].
    pub fn decrypt_sectors(
        &mut self,
        data: &mut [u8],
        sector_size: usize,
        first_sector: u64,
        iv_step: u64,
    ) -> Result<()> {
        self.sectors(data, sector_size, first_sector, iv_step, false)
    }

    /// Encrypts `data` (whole 16-byte blocks) with an explicit IV.
    pub fn encrypt_with_iv(&mut self, iv: &[u8; 16], data: &mut [u8]) -> Result<()> {
        check_blocks(data)?;
        self.enc.apply_with_iv(iv, data)
    }

    /// Decrypts `data` (whole 16-byte blocks) with an explicit IV.
    pub fn decrypt_with_iv(&mut self, iv: &[u8; 16], data: &mut [u8]) -> Result<()> {
        check_blocks(data)?;
        self.dec.apply_with_iv(iv, data)
    }

    fn sectors(
        &mut self,
        data: &mut [u8],
        sector_size: usize,
        first_sector: u64,
        iv_step: u64,
        encrypt: bool,
    ) -> Result<()> {
        check_sectors(data, sector_size)?;
        let mut number = first_sector;
        for sector in data.chunks_exact_mut(sector_size) {
            let iv = self.sector_iv(number);
            let ctx = if encrypt { &mut self.enc } else { &mut self.dec };
            ctx.apply_with_iv(&iv, sector)?;
            number = number.wrapping_add(iv_step);
        }
        Ok(())
    }
}

fn check_blocks(data: &[u8]) -> Result<()> {
    if !data.len().is_multiple_of(AES_BLOCK) {
        return Err(CryptoError::InvalidLength {
            what: "CBC data",
            len: data.len(),
            requirement: "a multiple of 16 bytes",
        });
    }
    Ok(())
}
