use rampart_crypto::{Cbc, CbcIv, CryptoError, SecretBytes, Xts};

/// The data ciphers of LUKS volumes that Rampart supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SectorCipherKind {
    /// `aes-xts-plain64`, 32 or 64-byte keys.
    AesXtsPlain64,
    /// `aes-cbc-essiv:sha256`, 16 or 32-byte keys (LUKS1 legacy).
    AesCbcEssivSha256,
    /// `aes-cbc-plain64`, 16 or 32-byte keys (LUKS1 legacy).
    AesCbcPlain64,
}

/// One keyed instance of a sector cipher. Not `Sync`: a device keeps a pool
/// of them, one per concurrently running request part.
#[derive(Debug)]
pub struct SectorCipher {
    engine: Engine,
}

#[derive(Debug)]
enum Engine {
    Xts(Xts),
    Cbc(Cbc),
}

impl SectorCipher {
    pub fn new(kind: SectorCipherKind, key: &SecretBytes) -> Result<Self, CryptoError> {
        let engine = match kind {
            SectorCipherKind::AesXtsPlain64 => {
                Engine::Xts(Xts::new_accepting_identical_halves(key.expose())?)
            }
            SectorCipherKind::AesCbcEssivSha256 => {
                Engine::Cbc(Cbc::new(key.expose(), CbcIv::EssivSha256)?)
            }
            SectorCipherKind::AesCbcPlain64 => Engine::Cbc(Cbc::new(key.expose(), CbcIv::Plain64)?),
        };
        Ok(Self { engine })
    }

    pub fn try_clone(&self) -> Result<Self, CryptoError> {
        let engine = match &self.engine {
            Engine::Xts(xts) => Engine::Xts(xts.try_clone()?),
            Engine::Cbc(cbc) => Engine::Cbc(cbc.try_clone()?),
        };
        Ok(Self { engine })
    }

    /// Encrypts whole sectors in place; sector `i` uses IV/tweak number
    /// `first + i * step`.
    pub fn encrypt(
        &mut self,
        data: &mut [u8],
        sector_size: usize,
        first: u64,
        step: u64,
    ) -> Result<(), CryptoError> {
        match &mut self.engine {
            Engine::Xts(xts) => xts.encrypt_sectors(data, sector_size, first, step),
            Engine::Cbc(cbc) => cbc.encrypt_sectors(data, sector_size, first, step),
        }
    }

    /// [`SectorCipher::encrypt`] from `src` into `dst` (the same length):
    /// XTS reads the plaintext and writes the ciphertext in one pass; CBC
    /// copies, then encrypts in place.
    pub fn encrypt_to(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        sector_size: usize,
        first: u64,
        step: u64,
    ) -> Result<(), CryptoError> {
        match &mut self.engine {
            Engine::Xts(xts) => xts.encrypt_sectors_to(src, dst, sector_size, first, step),
            Engine::Cbc(cbc) => {
                copy_into(src, dst)?;
                cbc.encrypt_sectors(dst, sector_size, first, step)
            }
        }
    }

    /// The inverse of [`SectorCipher::encrypt`].
    pub fn decrypt(
        &mut self,
        data: &mut [u8],
        sector_size: usize,
        first: u64,
        step: u64,
    ) -> Result<(), CryptoError> {
        match &mut self.engine {
            Engine::Xts(xts) => xts.decrypt_sectors(data, sector_size, first, step),
            Engine::Cbc(cbc) => cbc.decrypt_sectors(data, sector_size, first, step),
        }
    }

    /// [`SectorCipher::decrypt`] from `src` into `dst` (the same length),
    /// reading each byte of `src` once: XTS in one pass; CBC copies, then
    /// decrypts in place.
    pub fn decrypt_to(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        sector_size: usize,
        first: u64,
        step: u64,
    ) -> Result<(), CryptoError> {
        match &mut self.engine {
            Engine::Xts(xts) => xts.decrypt_sectors_to(src, dst, sector_size, first, step),
            Engine::Cbc(cbc) => {
                copy_into(src, dst)?;
                cbc.decrypt_sectors(dst, sector_size, first, step)
            }
        }
    }

    #[must_use]
    pub fn implementation(&self) -> &'static str {
        match &self.engine {
            Engine::Xts(xts) => xts.implementation(),
            Engine::Cbc(cbc) => cbc.implementation(),
        }
    }
}

/// CBC has no out-of-place form: its out-of-place calls copy the input
/// to the output first, then transform the output in place.
fn copy_into(src: &[u8], dst: &mut [u8]) -> Result<(), CryptoError> {
    if src.len() != dst.len() {
        return Err(CryptoError::InvalidLength {
            what: "output buffer",
            len: dst.len(),
            requirement: "the length of the input",
        });
    }
    dst.copy_from_slice(src);
    Ok(())
}
