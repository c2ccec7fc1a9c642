//! The LUKS anti-forensic information splitter (LUKS1 specification §2.4,
//! the "H1" diffusion that every LUKS implementation uses).
//!
//! A key of `n` bytes is split into `stripes` blocks of `n` bytes: all but
//! the last are random, the last is the key XORed with the diffused XOR-chain
//! of the others, so every stripe is needed to recover the key.

use rampart_crypto::{digest_into, fill_random, HashAlg, SecretBytes};
use zeroize::Zeroize;

use crate::{Error, Result};

/// The stripe count cryptsetup always writes.
pub(crate) const STRIPES: u32 = 4000;
/// The largest stripe count accepted from a header (bounds allocations).
pub(crate) const MAX_STRIPES: u32 = 4000;
/// The largest key accepted from a header (bounds allocations).
pub(crate) const MAX_KEY_BYTES: usize = 128;

/// The size of split material for a key of `key_len` bytes, rounded up to
/// whole 512-byte sectors (what is encrypted and stored on disk).
pub(crate) fn split_sectors_bytes(key_len: usize, stripes: u32) -> Result<usize> {
    check(key_len, stripes)?;
    let raw = key_len * stripes as usize; // ≤ 128 * 4000: no overflow
    Ok(raw.div_ceil(512) * 512)
}

fn check(key_len: usize, stripes: u32) -> Result<()> {
    if key_len == 0 || key_len > MAX_KEY_BYTES {
        return Err(Error::corrupt(format!(
            "key size {key_len} bytes is outside 1..={MAX_KEY_BYTES}"
        )));
    }
    if stripes == 0 || stripes > MAX_STRIPES {
        return Err(Error::corrupt(format!(
            "anti-forensic stripe count {stripes} is outside 1..={MAX_STRIPES}"
        )));
    }
    Ok(())
}

/// H1 diffusion of `buf` in place: each digest-sized block `i` (the last one
/// possibly shorter) becomes `hash(be32(i) || block)`, cut to the block size.
fn diffuse(buf: &mut [u8], hash: HashAlg) {
    let size = hash.output_len();
    let mut input = [0u8; 4 + 64];
    let mut out = [0u8; 64];
    for (i, block) in buf.chunks_mut(size).enumerate() {
        // Blocks are at most MAX_KEY_BYTES long, so the index fits in u32.
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        input[..4].copy_from_slice(&index.to_be_bytes());
        input[4..4 + block.len()].copy_from_slice(block);
        // `out` holds 64 bytes, the longest digest: this cannot fail.
        let _ = digest_into(hash, &input[..4 + block.len()], &mut out);
        let len = block.len();
        block.copy_from_slice(&out[..len]);
    }
    input.zeroize();
    out.zeroize();
}

fn xor_into(acc: &mut [u8], block: &[u8]) {
    for (a, b) in acc.iter_mut().zip(block) {
        *a ^= b;
    }
}

/// Splits `key` into `stripes` stripes. The result is padded with zeros to
/// whole 512-byte sectors, ready to be encrypted.
pub(crate) fn split(key: &[u8], stripes: u32, hash: HashAlg) -> Result<SecretBytes> {
    let total = split_sectors_bytes(key.len(), stripes)?;
    let n = key.len();
    let mut out = SecretBytes::zeroed(total);
    let mut acc = SecretBytes::zeroed(n);
    let material = out.expose_mut();
    for i in 0..(stripes as usize - 1) {
        let block = &mut material[i * n..(i + 1) * n];
        fill_random(block)?;
        xor_into(acc.expose_mut(), block);
        diffuse(acc.expose_mut(), hash);
    }
    let last = &mut material[(stripes as usize - 1) * n..stripes as usize * n];
    last.copy_from_slice(acc.expose());
    xor_into(last, key);
    Ok(out)
}

/// Recovers a `key_len`-byte key from split `material` (at least
/// `key_len * stripes` bytes).
pub(crate) fn merge(
    material: &[u8],
    key_len: usize,
    stripes: u32,
    hash: HashAlg,
) -> Result<SecretBytes> {
    check(key_len, stripes)?;
    let n = key_len;
    let stripes = stripes as usize;
    if material.len() < n * stripes {
        return Err(Error::corrupt(format!(
            "anti-forensic material is {} bytes, expected at least {}",
            material.len(),
            n * stripes
        )));
    }
    let mut acc = SecretBytes::zeroed(n);
    for block in material.chunks_exact(n).take(stripes - 1) {
        xor_into(acc.expose_mut(), block);
        diffuse(acc.expose_mut(), hash);
    }
    xor_into(acc.expose_mut(), &material[(stripes - 1) * n..stripes * n]);
    Ok(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_crypto::digest;

    #[test]
    fn split_then_merge_round_trips() {
        for hash in [HashAlg::Sha1, HashAlg::Sha256, HashAlg::Sha512] {
            for len in [16usize, 32, 33, 64, 100] {
                let key: Vec<u8> = (0..len as u8).collect();
                let split = split(&key, STRIPES, hash).unwrap();
                assert_eq!(split.len() % 512, 0);
                assert!(split.len() >= len * STRIPES as usize);
                let merged = merge(split.expose(), len, STRIPES, hash).unwrap();
                assert_eq!(merged.expose(), &key[..]);
            }
        }
    }

    #[test]
    fn one_stripe_is_the_key_itself() {
        let key = [7u8; 32];
        let split = split(&key, 1, HashAlg::Sha256).unwrap();
        assert_eq!(&split.expose()[..32], &key);
    }

    /// Two stripes by hand: s2 = H1(s1) ^ key, with H1 = sha256(be32(0)||s1).
    #[test]
    fn matches_the_specified_diffusion() {
        let key = [0x42u8; 32];
        let split = split(&key, 2, HashAlg::Sha256).unwrap();
        let s1 = &split.expose()[..32];
        let mut input = vec![0, 0, 0, 0];
        input.extend_from_slice(s1);
        let d = digest(HashAlg::Sha256, &input);
        let expect: Vec<u8> = d.expose().iter().zip(key).map(|(a, b)| a ^ b).collect();
        assert_eq!(&split.expose()[32..64], &expect[..]);
    }

    #[test]
    fn bounds_are_enforced() {
        assert!(split_sectors_bytes(0, 4000).is_err());
        assert!(split_sectors_bytes(129, 4000).is_err());
        assert!(split_sectors_bytes(64, 0).is_err());
        assert!(split_sectors_bytes(64, 4001).is_err());
        assert_eq!(split_sectors_bytes(64, 4000).unwrap(), 256_000);
        assert_eq!(split_sectors_bytes(32, 4000).unwrap(), 128_000);
        assert!(merge(&[0u8; 10], 32, 4000, HashAlg::Sha256).is_err());
    }
}
