use crate::ffi::{CipherCtx, EvpCipher};
use crate::{CryptoError, Result};

/// AES-CTR with a full 128-bit big-endian counter block (NIST SP 800-38A).
#[derive(Debug)]
pub struct Ctr {
    ctx: CipherCtx,
}

impl Ctr {
    /// `key` is 16, 24 or 32 bytes.
    pub fn new(key: &[u8]) -> Result<Self> {
        let cipher = match key.len() {
            16 => EvpCipher::Aes128Ctr,
            24 => EvpCipher::Aes192Ctr,
            32 => EvpCipher::Aes256Ctr,
            len => {
                return Err(CryptoError::InvalidKeyLength {
                    algorithm: "AES-CTR",
                    len,
                    expected: "16, 24 or 32",
                })
            }
        };
        Ok(Self { ctx: CipherCtx::new(cipher, key, true)? })
    }

    /// XORs the key stream starting at counter block `iv` into `data`
    /// (encryption and decryption are the same operation).
    pub fn apply(&mut self, iv: &[u8; 16], data: &mut [u8]) -> Result<()> {
        self.ctx.apply_with_iv(iv, data)
    }
}
