use crate::{CryptoError, Result, SecretBytes};

/// Fills `buf` from AWS-LC's CTR-DRBG, which is seeded from the operating
/// system and mixes in RDRAND where the CPU has it.
pub fn fill_random(buf: &mut [u8]) -> Result<()> {
    aws_lc_rs::rand::fill(buf).map_err(|_| CryptoError::Backend("RAND_bytes"))
}

/// A fresh random secret of `len` bytes (a volume key, a salt).
pub fn random_secret(len: usize) -> Result<SecretBytes> {
    let mut secret = SecretBytes::zeroed(len);
    fill_random(secret.expose_mut())?;
    Ok(secret)
}
