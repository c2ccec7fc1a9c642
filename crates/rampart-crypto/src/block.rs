//! Block ciphers in ECB and CBC mode over whole messages (NIST SP 800-38A),
//! for AES and Triple DES (SP 800-67), with PKCS #5 padding (RFC 8018
//! §6.1.1, generalised to the cipher's block as PKCS #7 does).

use crate::ffi::{CipherCtx, EvpCipher};
use crate::{CryptoError, Result, SecretBytes};

/// The block cipher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockAlg {
    /// AES-128/192/256 by key length.
    Aes,
    /// Triple DES: a 24-byte three-key or 16-byte two-key bundle (SP
    /// 800-67 §3.1 keying options 1 and 2).
    TripleDes,
}

/// The mode of operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockMode {
    Ecb,
    Cbc,
}

impl BlockAlg {
    /// The block size in bytes.
    #[must_use]
    pub fn block_len(self) -> usize {
        match self {
            Self::Aes => 16,
            Self::TripleDes => 8,
        }
    }

    /// The IV length CBC needs.
    #[must_use]
    pub fn iv_len(self) -> usize {
        self.block_len()
    }
}

/// A whole-message ECB or CBC cipher under one key.
#[derive(Debug)]
pub struct BlockCipher {
    alg: BlockAlg,
    mode: BlockMode,
    ctx: CipherCtx,
}

impl BlockCipher {
    /// `key` is 16, 24 or 32 bytes for AES, 16 or 24 for Triple DES.
    pub fn new(alg: BlockAlg, mode: BlockMode, key: &[u8], encrypt: bool) -> Result<Self> {
        let bad = |expected| CryptoError::InvalidKeyLength {
            algorithm: match alg {
                BlockAlg::Aes => "AES",
                BlockAlg::TripleDes => "Triple DES",
            },
            len: key.len(),
            expected,
        };
        let cipher = match (alg, mode, key.len()) {
            (BlockAlg::Aes, BlockMode::Ecb, 16) => EvpCipher::Aes128Ecb,
            (BlockAlg::Aes, BlockMode::Ecb, 24) => EvpCipher::Aes192Ecb,
            (BlockAlg::Aes, BlockMode::Ecb, 32) => EvpCipher::Aes256Ecb,
            (BlockAlg::Aes, BlockMode::Cbc, 16) => EvpCipher::Aes128Cbc,
            (BlockAlg::Aes, BlockMode::Cbc, 24) => EvpCipher::Aes192Cbc,
            (BlockAlg::Aes, BlockMode::Cbc, 32) => EvpCipher::Aes256Cbc,
            (BlockAlg::Aes, _, _) => return Err(bad("16, 24 or 32")),
            (BlockAlg::TripleDes, BlockMode::Ecb, 16 | 24) => EvpCipher::Des3Ecb,
            (BlockAlg::TripleDes, BlockMode::Cbc, 16 | 24) => EvpCipher::Des3Cbc,
            (BlockAlg::TripleDes, _, _) => return Err(bad("16 or 24")),
        };
        let ctx = if alg == BlockAlg::TripleDes && key.len() == 16 {
            // Keying option 2: K3 = K1.
            let mut full = SecretBytes::zeroed(24);
            full.expose_mut()[..16].copy_from_slice(key);
            full.expose_mut()[16..].copy_from_slice(&key[..8]);
            CipherCtx::new(cipher, full.expose(), encrypt)?
        } else {
            CipherCtx::new(cipher, key, encrypt)?
        };
        Ok(Self { alg, mode, ctx })
    }

    /// Transforms `data` (whole blocks) in place; `iv` is the CBC IV (one
    /// block), and must be empty for ECB.
    pub fn apply(&mut self, iv: &[u8], data: &mut [u8]) -> Result<()> {
        if !data.len().is_multiple_of(self.alg.block_len()) {
            return Err(CryptoError::InvalidLength {
                what: "data without padding",
                len: data.len(),
                requirement: "a whole number of cipher blocks",
            });
        }
        let want = match self.mode {
            BlockMode::Ecb => 0,
            BlockMode::Cbc => self.alg.iv_len(),
        };
        if iv.len() != want {
            return Err(CryptoError::InvalidLength {
                what: "IV",
                len: iv.len(),
                requirement: "one cipher block for CBC, none for ECB",
            });
        }
        self.ctx.apply_with_iv_bytes(iv, data)
    }
}

/// `data` with PKCS #5 padding to a multiple of `block` bytes (1 to 255).
#[must_use]
pub fn pkcs5_pad(data: &[u8], block: usize) -> SecretBytes {
    let block = block.clamp(1, 255);
    let pad = block - data.len() % block;
    let mut out = SecretBytes::zeroed(data.len() + pad);
    out.expose_mut()[..data.len()].copy_from_slice(data);
    // pad is at most 255 (clamped above).
    out.expose_mut()[data.len()..].fill(u8::try_from(pad).unwrap_or(u8::MAX));
    out
}

/// The length of `data` without its PKCS #5 padding, or
/// [`CryptoError::AuthenticationFailed`] when the padding is malformed.
pub fn pkcs5_unpadded_len(data: &[u8], block: usize) -> Result<usize> {
    let Some(&last) = data.last() else {
        return Err(CryptoError::AuthenticationFailed);
    };
    let pad = usize::from(last);
    if pad == 0 || pad > block || pad > data.len() || !data.len().is_multiple_of(block) {
        return Err(CryptoError::AuthenticationFailed);
    }
    let (body, tail) = data.split_at(data.len() - pad);
    if tail.iter().any(|&b| b != last) {
        return Err(CryptoError::AuthenticationFailed);
    }
    Ok(body.len())
}
