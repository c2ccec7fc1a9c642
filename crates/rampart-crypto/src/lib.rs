//! Rampart's crypto engine.
//!
//! A small, typed API over AWS-LC and Rampart's own AES-XTS engine.
//!
//! Rampart's `unsafe` code lives in two crates: this one and
//! `rampart-token-plugin` (its `ffi` module is the C ABI libcryptsetup
//! loads); every other crate forbids it. Here it is in five modules, each
//! for something safe Rust cannot say: [`ffi`] (the AWS-LC functions
//! `aws-lc-rs` does not expose, and the libc calls that lock memory, keep
//! secrets out of core dumps, take file locks and read clocks),
//! `xts_simd` (the XTS engine on VAES/AES-NI intrinsics), `sha256_lanes`
//! (SHA-256 of several blocks at once on the SHA extensions), `mapped` (a
//! volume's page cache lent in place to the cipher, and the SIGBUS handler
//! that makes that safe) and [`ktls`] (a TLS session's record keys handed
//! to the Linux kernel). Every other module is safe Rust built on those or
//! on `aws-lc-rs` ([`ffi`]'s `pkey` submodule holds the public-key
//! operations behind [`PrivateKey`] and [`PublicKey`]). Every `unsafe`
//! block says why it is sound in a
//! `// SAFETY:` comment (clippy's `undocumented_unsafe_blocks`, denied for
//! the whole workspace).
//!
//! Secrets are held in [`SecretBytes`], which zeroizes on drop, never prints
//! its contents and compares in constant time.

mod aead;
mod asymmetric;
mod block;
mod cbc;
pub mod cpu;
mod ctr;
mod der;
mod error;
mod ffi;
mod gcm;
mod hash;
mod kdf;
pub mod key_formats;
mod keygen;
mod keywrap;
pub mod ktls;
mod mapped;
mod rng;
mod secret;
mod sha256_lanes;
pub mod signature_formats;
mod stream;
mod writeback;
mod xts;
mod xts_simd;

pub use aead::{
    chacha20, chacha20_poly1305_open, chacha20_poly1305_seal, gcm_open, gcm_seal,
    gcm_tag_len_allowed, GcmStream,
};
pub use asymmetric::{Curve, KeyAlg, PrivateKey, PublicKey, RsaEncryption, SignatureScheme};
pub use block::{pkcs5_pad, pkcs5_unpadded_len, BlockAlg, BlockCipher, BlockMode};
pub use cbc::{Cbc, CbcIv};
pub use ctr::Ctr;
pub use error::CryptoError;
pub use ffi::{
    constant_time_eq, disable_core_dumps, is_dumpable, limit_malloc_arenas, lock_all_memory,
    thread_cpu_time, try_lock_byte,
};
pub use gcm::{Gcm, GCM_NONCE_LEN, GCM_TAG_LEN};
pub use hash::{digest, digest_blocks, digest_into, hkdf, hmac, HashAlg, HmacKey, PassphraseHash};
pub use kdf::{argon2, argon2_with_secret, pbkdf2, Argon2Params, Argon2Variant};
pub use keygen::{generate_ec, generate_ed25519, generate_key_pair, generate_rsa, KeyPairDer};
pub use keywrap::{kw_unwrap, kw_wrap, kwp_unwrap, kwp_wrap};
pub use mapped::MappedFile;
pub use rng::{fill_random, random_secret};
pub use secret::SecretBytes;
pub use stream::{DigestAlg, Hasher, Mac, MacAlg};
pub use writeback::start_writeback;
pub use xts::{xts_instruction_ceiling, CeilingRate, Xts, XtsPath};

/// The AES block size in bytes.
pub const AES_BLOCK: usize = 16;

/// The result type of every fallible operation in this crate.
pub type Result<T> = std::result::Result<T, CryptoError>;

/// The `plain64` IV/tweak: the little-endian 64-bit sector number,
/// zero-padded to 16 bytes (dm-crypt's `plain64`, IEEE 1619's data unit
/// sequence number).
#[must_use]
pub fn plain64(sector: u64) -> [u8; 16] {
    let mut iv = [0u8; 16];
    iv[..8].copy_from_slice(&sector.to_le_bytes());
    iv
}

/// Checks that `data` is a whole number of `sector_size` sectors and that
/// `sector_size` is a usable multiple of the AES block.
fn check_sectors(data: &[u8], sector_size: usize) -> Result<usize> {
    if sector_size == 0 || !sector_size.is_multiple_of(AES_BLOCK) {
        return Err(CryptoError::InvalidSectorSize(sector_size));
    }
    if !data.len().is_multiple_of(sector_size) {
        return Err(CryptoError::InvalidLength {
            what: "sector data",
            len: data.len(),
            requirement: "a multiple of the sector size",
        });
    }
    Ok(data.len() / sector_size)
}
