//! Thin, owned wrappers over the AWS-LC functions that `aws-lc-rs` does
//! not expose (raw EVP cipher contexts for XTS, CBC, ECB and CTR, the
//! single-block AES function, AES key wrap, HKDF, SHA-256's compression
//! function) and over the libc calls Rampart needs: locking memory and
//! keeping secrets out of swap and core dumps, limiting malloc arenas,
//! file byte-range locks, a thread's CPU time.
//!
//! One of the crate's five modules with `unsafe` code (the crate
//! documentation lists them and why); each block's `// SAFETY:` comment
//! says what makes the call sound.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use aws_lc_sys as sys;

use crate::{CryptoError, Result};

pub(crate) mod pkey;

/// The AWS-LC EVP ciphers Rampart drives directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EvpCipher {
    Aes128Ecb,
    Aes192Ecb,
    Aes256Ecb,
    Aes128Cbc,
    Aes192Cbc,
    Aes256Cbc,
    Aes128Ctr,
    Aes192Ctr,
    Aes256Ctr,
    Aes256Xts,
    /// Three-key Triple DES (SP 800-67), ECB and CBC.
    Des3Ecb,
    Des3Cbc,
}

impl EvpCipher {
    fn key_len(self) -> usize {
        match self {
            Self::Aes128Ecb | Self::Aes128Cbc | Self::Aes128Ctr => 16,
            Self::Aes192Ecb | Self::Aes192Cbc | Self::Aes192Ctr | Self::Des3Ecb | Self::Des3Cbc => {
                24
            }
            Self::Aes256Ecb | Self::Aes256Cbc | Self::Aes256Ctr => 32,
            Self::Aes256Xts => 64,
        }
    }

    /// The IV length the cipher reads on every (re)start.
    fn iv_len(self) -> usize {
        match self {
            Self::Aes128Ecb | Self::Aes192Ecb | Self::Aes256Ecb | Self::Des3Ecb => 0,
            Self::Des3Cbc => 8,
            _ => 16,
        }
    }

    fn evp(self) -> *const sys::EVP_CIPHER {
        // SAFETY: these functions return pointers to static method tables.
        unsafe {
            match self {
                Self::Aes128Ecb => sys::EVP_aes_128_ecb(),
                Self::Aes192Ecb => sys::EVP_aes_192_ecb(),
                Self::Aes256Ecb => sys::EVP_aes_256_ecb(),
                Self::Des3Ecb => sys::EVP_des_ede3(),
                Self::Des3Cbc => sys::EVP_des_ede3_cbc(),
                Self::Aes128Cbc => sys::EVP_aes_128_cbc(),
                Self::Aes192Cbc => sys::EVP_aes_192_cbc(),
                Self::Aes256Cbc => sys::EVP_aes_256_cbc(),
                Self::Aes128Ctr => sys::EVP_aes_128_ctr(),
                Self::Aes192Ctr => sys::EVP_aes_192_ctr(),
                Self::Aes256Ctr => sys::EVP_aes_256_ctr(),
                Self::Aes256Xts => sys::EVP_aes_256_xts(),
            }
        }
    }
}

/// An owned, keyed `EVP_CIPHER_CTX` for one direction.
///
/// The context holds the expanded key schedule; AWS-LC cleanses it in
/// `EVP_CIPHER_CTX_free`.
pub(crate) struct CipherCtx {
    ctx: NonNull<sys::EVP_CIPHER_CTX>,
    cipher: EvpCipher,
}

// SAFETY: an EVP_CIPHER_CTX has no thread affinity; `&mut self` on every
// operation keeps it from being used by two threads at once.
unsafe impl Send for CipherCtx {}

impl std::fmt::Debug for CipherCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CipherCtx").field("cipher", &self.cipher).finish_non_exhaustive()
    }
}

impl CipherCtx {
    /// Keys a new context. The caller has checked the key length; it is
    /// checked again here because a short key would be read out of bounds.
    pub(crate) fn new(cipher: EvpCipher, key: &[u8], encrypt: bool) -> Result<Self> {
        if key.len() != cipher.key_len() {
            return Err(CryptoError::Backend("key length does not match cipher"));
        }
        // SAFETY: plain allocation; null is handled.
        let raw = unsafe { sys::EVP_CIPHER_CTX_new() };
        let ctx = NonNull::new(raw).ok_or(CryptoError::Backend("EVP_CIPHER_CTX_new"))?;
        let this = Self { ctx, cipher };
        // SAFETY: ctx is valid, the cipher table is static and the key is
        // exactly key_len() bytes as checked above.
        let ok = unsafe {
            sys::EVP_CipherInit_ex(
                this.ctx.as_ptr(),
                cipher.evp(),
                std::ptr::null_mut(),
                key.as_ptr(),
                std::ptr::null(),
                i32::from(encrypt),
            )
        };
        if ok != 1 {
            if cipher == EvpCipher::Aes256Xts {
                return Err(CryptoError::XtsDuplicateKeyHalves);
            }
            return Err(CryptoError::Backend("EVP_CipherInit_ex"));
        }
        // SAFETY: ctx is initialised.
        unsafe { sys::EVP_CIPHER_CTX_set_padding(this.ctx.as_ptr(), 0) };
        Ok(this)
    }

    /// A copy with the same key schedule, for use on another thread.
    pub(crate) fn try_clone(&self) -> Result<Self> {
        // SAFETY: plain allocation; null is handled.
        let raw = unsafe { sys::EVP_CIPHER_CTX_new() };
        let ctx = NonNull::new(raw).ok_or(CryptoError::Backend("EVP_CIPHER_CTX_new"))?;
        let copy = Self { ctx, cipher: self.cipher };
        // SAFETY: both contexts are valid; the source is initialised.
        if unsafe { sys::EVP_CIPHER_CTX_copy(copy.ctx.as_ptr(), self.ctx.as_ptr()) } != 1 {
            return Err(CryptoError::Backend("EVP_CIPHER_CTX_copy"));
        }
        Ok(copy)
    }

    /// Sets a fresh 16-byte IV (or XTS tweak) and transforms `data` in place.
    pub(crate) fn apply_with_iv(&mut self, iv: &[u8; 16], data: &mut [u8]) -> Result<()> {
        // SAFETY: ctx is initialised; enc = -1 keeps the direction; the IV is
        // 16 bytes, at least the IV length of every cipher in EvpCipher
        // (AWS-LC reads that many, none for ECB).
        let ok = unsafe {
            sys::EVP_CipherInit_ex(
                self.ctx.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null(),
                iv.as_ptr(),
                -1,
            )
        };
        if ok != 1 {
            return Err(CryptoError::Backend("EVP_CipherInit_ex(iv)"));
        }
        self.apply(data)
    }

    /// Sets a fresh IV of the cipher's own IV length (8 bytes for Triple
    /// DES CBC) and transforms `data` in place.
    pub(crate) fn apply_with_iv_bytes(&mut self, iv: &[u8], data: &mut [u8]) -> Result<()> {
        if iv.len() != self.cipher.iv_len() {
            return Err(CryptoError::InvalidLength {
                what: "IV",
                len: iv.len(),
                requirement: "the cipher's IV length",
            });
        }
        if iv.is_empty() {
            return self.apply(data);
        }
        // SAFETY: ctx is initialised; enc = -1 keeps the direction; the IV
        // is exactly the cipher's IV length, checked above.
        let ok = unsafe {
            sys::EVP_CipherInit_ex(
                self.ctx.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null(),
                iv.as_ptr(),
                -1,
            )
        };
        if ok != 1 {
            return Err(CryptoError::Backend("EVP_CipherInit_ex(iv)"));
        }
        self.apply(data)
    }

    /// Sets a fresh 16-byte IV (or XTS tweak) and transforms `src` into
    /// `dst`, which callers size to `src`'s length.
    pub(crate) fn apply_with_iv_to(
        &mut self,
        iv: &[u8; 16],
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<()> {
        if src.len() != dst.len() {
            return Err(CryptoError::InvalidLength {
                what: "cipher output buffer",
                len: dst.len(),
                requirement: "the length of the input",
            });
        }
        // SAFETY: as in apply_with_iv.
        let ok = unsafe {
            sys::EVP_CipherInit_ex(
                self.ctx.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null(),
                iv.as_ptr(),
                -1,
            )
        };
        if ok != 1 {
            return Err(CryptoError::Backend("EVP_CipherInit_ex(iv)"));
        }
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: src and dst are distinct valid buffers of the same length
        // (a &[u8] and a &mut [u8] cannot overlap).
        let ok = unsafe {
            sys::EVP_Cipher(self.ctx.as_ptr(), dst.as_mut_ptr(), src.as_ptr(), src.len())
        };
        if ok != 1 {
            return Err(CryptoError::Backend("EVP_Cipher"));
        }
        Ok(())
    }

    /// Transforms `data` in place, continuing from the current state.
    /// Callers guarantee a whole number of blocks for ECB/CBC.
    pub(crate) fn apply(&mut self, data: &mut [u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: in and out are the same valid buffer of data.len() bytes;
        // AES ECB/CBC/CTR/XTS in AWS-LC support exact in-place operation.
        let ok = unsafe {
            sys::EVP_Cipher(self.ctx.as_ptr(), data.as_mut_ptr(), data.as_ptr(), data.len())
        };
        if ok != 1 {
            return Err(CryptoError::Backend("EVP_Cipher"));
        }
        Ok(())
    }
}

impl Drop for CipherCtx {
    fn drop(&mut self) {
        // SAFETY: we own the context; free cleanses the key schedule.
        unsafe { sys::EVP_CIPHER_CTX_free(self.ctx.as_ptr()) }
    }
}

/// A keyed AES-GCM `EVP_CIPHER_CTX` for one message, with an IV of any
/// length from 1 byte (SP 800-38D §7.1: a 96-bit IV is used as is, any
/// other length through GHASH) and tags of 1 to 16 bytes; callers enforce
/// the lengths their protocol allows.
pub(crate) struct GcmCtx {
    ctx: NonNull<sys::EVP_CIPHER_CTX>,
    encrypt: bool,
}

// SAFETY: as for CipherCtx: no thread affinity, `&mut self` everywhere.
unsafe impl Send for GcmCtx {}
// SAFETY: no method touches the context through `&self` (Debug reads only
// the direction flag), so shared references cannot race on it.
unsafe impl Sync for GcmCtx {}

impl std::fmt::Debug for GcmCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcmCtx").field("encrypt", &self.encrypt).finish_non_exhaustive()
    }
}

/// An input length as the `int` the EVP update functions take.
fn c_len(len: usize) -> Result<i32> {
    i32::try_from(len).map_err(|_| CryptoError::InvalidLength {
        what: "cipher input",
        len,
        requirement: "less than 2 GiB",
    })
}

impl GcmCtx {
    pub(crate) fn new(key: &[u8], iv: &[u8], encrypt: bool) -> Result<Self> {
        // SAFETY: these functions return pointers to static method tables.
        let cipher = unsafe {
            match key.len() {
                16 => sys::EVP_aes_128_gcm(),
                24 => sys::EVP_aes_192_gcm(),
                32 => sys::EVP_aes_256_gcm(),
                len => {
                    return Err(CryptoError::InvalidKeyLength {
                        algorithm: "AES-GCM",
                        len,
                        expected: "16, 24 or 32",
                    })
                }
            }
        };
        if iv.is_empty() {
            return Err(CryptoError::InvalidLength {
                what: "GCM IV",
                len: 0,
                requirement: "at least 1 byte",
            });
        }
        let iv_len = c_len(iv.len())?;
        // SAFETY: plain allocation; null is handled.
        let raw = unsafe { sys::EVP_CIPHER_CTX_new() };
        let ctx = NonNull::new(raw).ok_or(CryptoError::Backend("EVP_CIPHER_CTX_new"))?;
        let this = Self { ctx, encrypt };
        // SAFETY: ctx is valid and the cipher table static; key and IV are
        // set in the second call, once the IV length is known.
        let ok = unsafe {
            sys::EVP_CipherInit_ex(
                this.ctx.as_ptr(),
                cipher,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
                i32::from(encrypt),
            ) == 1
                && sys::EVP_CIPHER_CTX_ctrl(
                    this.ctx.as_ptr(),
                    sys::EVP_CTRL_GCM_SET_IVLEN,
                    iv_len,
                    std::ptr::null_mut(),
                ) == 1
        };
        if !ok {
            return Err(CryptoError::Backend("EVP_CipherInit_ex(gcm)"));
        }
        // SAFETY: the key is exactly the cipher's key length (chosen from
        // it above) and the IV exactly the IV length just set.
        let ok = unsafe {
            sys::EVP_CipherInit_ex(
                this.ctx.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                key.as_ptr(),
                iv.as_ptr(),
                i32::from(encrypt),
            )
        };
        if ok != 1 {
            return Err(CryptoError::Backend("EVP_CipherInit_ex(gcm key)"));
        }
        Ok(this)
    }

    /// Adds additional authenticated data (before any data).
    pub(crate) fn aad(&mut self, aad: &[u8]) -> Result<()> {
        if aad.is_empty() {
            return Ok(());
        }
        let len = c_len(aad.len())?;
        let mut written = 0;
        // SAFETY: a null output makes this an AAD update; aad is valid for
        // len bytes.
        let ok = unsafe {
            sys::EVP_CipherUpdate(
                self.ctx.as_ptr(),
                std::ptr::null_mut(),
                &mut written,
                aad.as_ptr(),
                len,
            )
        };
        if ok != 1 {
            return Err(CryptoError::Backend("EVP_CipherUpdate(aad)"));
        }
        Ok(())
    }

    /// Encrypts or decrypts `data` in place, continuing the message.
    pub(crate) fn update(&mut self, data: &mut [u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let len = c_len(data.len())?;
        let mut written = 0;
        // SAFETY: GCM is a stream mode: it writes exactly len bytes, and
        // AWS-LC supports in and out being the same buffer.
        let ok = unsafe {
            sys::EVP_CipherUpdate(
                self.ctx.as_ptr(),
                data.as_mut_ptr(),
                &mut written,
                data.as_ptr(),
                len,
            )
        };
        if ok != 1 || written != len {
            return Err(CryptoError::Backend("EVP_CipherUpdate(gcm)"));
        }
        Ok(())
    }

    /// Ends an encryption; the first `tag.len()` (1 to 16) bytes of the tag.
    pub(crate) fn finish_encrypt(self, tag: &mut [u8]) -> Result<()> {
        if !self.encrypt || tag.is_empty() || tag.len() > 16 {
            return Err(CryptoError::InvalidParameter("GCM tag length"));
        }
        let len = c_len(tag.len())?;
        let mut rest = [0u8; 16];
        let mut written = 0;
        // SAFETY: GCM's final writes nothing (rest has room for a block
        // anyway); GET_TAG copies len <= 16 bytes into tag.
        let ok = unsafe {
            sys::EVP_CipherFinal_ex(self.ctx.as_ptr(), rest.as_mut_ptr(), &mut written) == 1
                && sys::EVP_CIPHER_CTX_ctrl(
                    self.ctx.as_ptr(),
                    sys::EVP_CTRL_GCM_GET_TAG,
                    len,
                    tag.as_mut_ptr().cast::<c_void>(),
                ) == 1
        };
        if !ok {
            return Err(CryptoError::Backend("EVP_CipherFinal_ex(gcm)"));
        }
        Ok(())
    }

    /// Ends a decryption: whether `tag` (1 to 16 bytes, a prefix of the
    /// full tag) authenticates what was decrypted.
    pub(crate) fn finish_decrypt(self, tag: &[u8]) -> Result<()> {
        if self.encrypt || tag.is_empty() || tag.len() > 16 {
            return Err(CryptoError::InvalidParameter("GCM tag length"));
        }
        let len = c_len(tag.len())?;
        let mut expected = [0u8; 16];
        expected[..tag.len()].copy_from_slice(tag);
        let mut rest = [0u8; 16];
        let mut written = 0;
        // SAFETY: SET_TAG reads len <= 16 bytes from expected; final writes
        // nothing for GCM and compares the first len bytes of the tag.
        let ok = unsafe {
            sys::EVP_CIPHER_CTX_ctrl(
                self.ctx.as_ptr(),
                sys::EVP_CTRL_GCM_SET_TAG,
                len,
                expected.as_mut_ptr().cast::<c_void>(),
            ) == 1
                && sys::EVP_CipherFinal_ex(self.ctx.as_ptr(), rest.as_mut_ptr(), &mut written) == 1
        };
        if !ok {
            return Err(CryptoError::AuthenticationFailed);
        }
        Ok(())
    }
}

impl Drop for GcmCtx {
    fn drop(&mut self) {
        // SAFETY: we own the context; free cleanses the key schedule.
        unsafe { sys::EVP_CIPHER_CTX_free(self.ctx.as_ptr()) }
    }
}

/// ChaCha20 (RFC 8439 §2.4) of `data` in place: key 32 bytes, nonce 12,
/// first block counter `counter`. The caller keeps the counter from
/// wrapping.
pub(crate) fn chacha20(key: &[u8; 32], nonce: &[u8; 12], counter: u32, data: &mut [u8]) {
    if data.is_empty() {
        return;
    }
    // SAFETY: key and nonce are the fixed sizes the function reads; in and
    // out are the same valid buffer, which CRYPTO_chacha_20 allows.
    unsafe {
        sys::CRYPTO_chacha_20(
            data.as_mut_ptr(),
            data.as_ptr(),
            data.len(),
            key.as_ptr(),
            nonce.as_ptr(),
            counter,
        );
    }
}

/// An `EVP_AEAD_CTX` of ChaCha20-Poly1305 (RFC 8439 §2.8) with a tag of
/// `tag_len` bytes (1 to 16: a truncated tag is a prefix of the full one).
struct AeadCtx(NonNull<sys::EVP_AEAD_CTX>);

impl AeadCtx {
    fn chacha20_poly1305(key: &[u8; 32], tag_len: usize) -> Result<Self> {
        if tag_len == 0 || tag_len > 16 {
            return Err(CryptoError::InvalidParameter("ChaCha20-Poly1305 tag length"));
        }
        // SAFETY: the AEAD table is static; the key is the 32 bytes it
        // reads; null is handled.
        let raw = unsafe {
            sys::EVP_AEAD_CTX_new(sys::EVP_aead_chacha20_poly1305(), key.as_ptr(), 32, tag_len)
        };
        NonNull::new(raw).map(Self).ok_or(CryptoError::Backend("EVP_AEAD_CTX_new"))
    }
}

impl Drop for AeadCtx {
    fn drop(&mut self) {
        // SAFETY: we own the context; free cleanses the key.
        unsafe { sys::EVP_AEAD_CTX_free(self.0.as_ptr()) }
    }
}

/// ChaCha20-Poly1305 encryption of `data` in place under a 12-byte nonce;
/// writes the tag (its first `tag.len()` bytes) into `tag`.
pub(crate) fn chacha20_poly1305_seal(
    key: &[u8; 32],
    nonce: &[u8; 12],
    aad: &[u8],
    data: &mut [u8],
    tag: &mut [u8],
) -> Result<()> {
    let ctx = AeadCtx::chacha20_poly1305(key, tag.len())?;
    let mut tag_len = 0usize;
    // SAFETY: out and in are the same buffer of data.len() bytes (exact
    // aliasing is allowed); tag has room for tag.len() bytes, the context's
    // tag length; nonce and aad are valid for their lengths.
    let ok = unsafe {
        sys::EVP_AEAD_CTX_seal_scatter(
            ctx.0.as_ptr(),
            data.as_mut_ptr(),
            tag.as_mut_ptr(),
            &mut tag_len,
            tag.len(),
            nonce.as_ptr(),
            nonce.len(),
            data.as_ptr(),
            data.len(),
            std::ptr::null(),
            0,
            aad.as_ptr(),
            aad.len(),
        )
    };
    if ok != 1 || tag_len != tag.len() {
        return Err(CryptoError::Backend("EVP_AEAD_CTX_seal_scatter"));
    }
    Ok(())
}

/// The inverse of [`chacha20_poly1305_seal`]; on a mismatch `data` is
/// zeroed and [`CryptoError::AuthenticationFailed`] returned.
pub(crate) fn chacha20_poly1305_open(
    key: &[u8; 32],
    nonce: &[u8; 12],
    aad: &[u8],
    data: &mut [u8],
    tag: &[u8],
) -> Result<()> {
    let ctx = AeadCtx::chacha20_poly1305(key, tag.len())?;
    // SAFETY: out and in are the same buffer (exact aliasing is allowed);
    // tag, nonce and aad are valid for their lengths.
    let ok = unsafe {
        sys::EVP_AEAD_CTX_open_gather(
            ctx.0.as_ptr(),
            data.as_mut_ptr(),
            nonce.as_ptr(),
            nonce.len(),
            data.as_ptr(),
            data.len(),
            tag.as_ptr(),
            tag.len(),
            aad.as_ptr(),
            aad.len(),
        )
    };
    if ok != 1 {
        data.fill(0);
        return Err(CryptoError::AuthenticationFailed);
    }
    Ok(())
}

/// An expanded AES encryption key for single-block use (ESSIV IVs, XTS
/// tweak encryption). Cleansed on drop.
pub(crate) struct AesBlockKey {
    key: Box<sys::AES_KEY>,
}

impl std::fmt::Debug for AesBlockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AesBlockKey(redacted)")
    }
}

impl AesBlockKey {
    /// An encryption key schedule (16, 24 or 32-byte keys).
    pub(crate) fn new(key: &[u8]) -> Result<Self> {
        Self::schedule(key, true)
    }

    fn schedule(key: &[u8], encrypt: bool) -> Result<Self> {
        let bits: u32 = match key.len() {
            16 => 128,
            24 => 192,
            32 => 256,
            len => {
                return Err(CryptoError::InvalidKeyLength {
                    algorithm: "AES",
                    len,
                    expected: "16, 24 or 32",
                })
            }
        };
        let mut schedule = Box::new(sys::AES_KEY { rd_key: [0; 60], rounds: 0 });
        // SAFETY: key holds bits/8 bytes and schedule is a valid AES_KEY.
        let status = unsafe {
            if encrypt {
                sys::AES_set_encrypt_key(key.as_ptr(), bits, &mut *schedule)
            } else {
                sys::AES_set_decrypt_key(key.as_ptr(), bits, &mut *schedule)
            }
        };
        if status != 0 {
            return Err(CryptoError::Backend("AES key schedule"));
        }
        Ok(Self { key: schedule })
    }

    pub(crate) fn encrypt_block(&self, block: &mut [u8; 16]) {
        // SAFETY: 16-byte in/out buffer (in place is allowed) and a valid key.
        unsafe { sys::AES_encrypt(block.as_ptr(), block.as_mut_ptr(), &*self.key) }
    }
}

impl Clone for AesBlockKey {
    fn clone(&self) -> Self {
        Self { key: Box::new(sys::AES_KEY { rd_key: self.key.rd_key, rounds: self.key.rounds }) }
    }
}

impl Drop for AesBlockKey {
    fn drop(&mut self) {
        cleanse(&mut self.key.rd_key);
    }
}

/// AES key wrap (RFC 3394) or key wrap with padding (RFC 5649) of `input`
/// under `kek` (16, 24 or 32 bytes). Length rules are checked by the caller.
pub(crate) fn aes_key_wrap(kek: &[u8], input: &[u8], padded: bool) -> Result<Vec<u8>> {
    let key = AesBlockKey::schedule(kek, true)?;
    let mut out = vec![0u8; input.len().div_ceil(8) * 8 + 8];
    let mut written = 0usize;
    // SAFETY: out has room for the wrapped length (input rounded up to 8
    // bytes, plus the 8-byte integrity block); a null IV selects the
    // default; the key schedule is valid.
    let ok = unsafe {
        if padded {
            sys::AES_wrap_key_padded(
                &*key.key,
                out.as_mut_ptr(),
                &mut written,
                out.len(),
                input.as_ptr(),
                input.len(),
            ) == 1
        } else {
            let len = sys::AES_wrap_key(
                &*key.key,
                std::ptr::null(),
                out.as_mut_ptr(),
                input.as_ptr(),
                input.len(),
            );
            written = usize::try_from(len).unwrap_or(0);
            len > 0
        }
    };
    if !ok {
        return Err(CryptoError::Backend("AES key wrap"));
    }
    out.truncate(written);
    Ok(out)
}

/// The inverse of [`aes_key_wrap`], into `out` (at least `input.len()`
/// bytes); returns the unwrapped length. A failed integrity check is
/// [`CryptoError::AuthenticationFailed`].
pub(crate) fn aes_key_unwrap(
    kek: &[u8],
    input: &[u8],
    padded: bool,
    out: &mut [u8],
) -> Result<usize> {
    if out.len() < input.len() {
        return Err(CryptoError::Backend("key unwrap output too small"));
    }
    let key = AesBlockKey::schedule(kek, false)?;
    let mut written = 0usize;
    // SAFETY: out holds at least input.len() bytes, more than the unwrapped
    // length; the key schedule is valid.
    let ok = unsafe {
        if padded {
            sys::AES_unwrap_key_padded(
                &*key.key,
                out.as_mut_ptr(),
                &mut written,
                out.len(),
                input.as_ptr(),
                input.len(),
            ) == 1
        } else {
            let len = sys::AES_unwrap_key(
                &*key.key,
                std::ptr::null(),
                out.as_mut_ptr(),
                input.as_ptr(),
                input.len(),
            );
            written = usize::try_from(len).unwrap_or(0);
            len > 0
        }
    };
    if !ok {
        return Err(CryptoError::AuthenticationFailed);
    }
    Ok(written)
}

fn cleanse<T: Copy>(value: &mut T) {
    // SAFETY: value is a valid, exclusively borrowed plain-data object.
    unsafe { sys::OPENSSL_cleanse((value as *mut T).cast::<c_void>(), std::mem::size_of::<T>()) }
}

/// Constant-time equality of two byte strings (a length difference is
/// not secret).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    // SAFETY: both buffers are valid for len bytes.
    unsafe { sys::CRYPTO_memcmp(a.as_ptr().cast(), b.as_ptr().cast(), a.len()) == 0 }
}

/// SHA-256's compression function over `block`, one 64-byte block, from
/// and into `state` (AWS-LC's, with the SHA extensions where present).
pub(crate) fn sha256_compress(state: &mut [u32; 8], block: &[u8; 64]) {
    // SAFETY: `state` is eight words and `block` one whole block.
    unsafe { sys::SHA256_TransformBlocks(state.as_mut_ptr(), block.as_ptr(), 1) }
}

/// The digest of `data` by `md` through AWS-LC's one-shot `EVP_Digest`,
/// written straight into `out` (the digest length exactly), for digests
/// that `aws-lc-rs` does not offer (RIPEMD-160) beside those it does.
pub(crate) fn evp_digest(md: crate::PassphraseHash, data: &[u8], out: &mut [u8]) -> Result<()> {
    use crate::PassphraseHash as H;
    if out.len() != md.output_len() {
        return Err(CryptoError::InvalidLength {
            what: "digest output",
            len: out.len(),
            requirement: "the digest length",
        });
    }
    // SAFETY: the EVP_MD getters return static tables.
    let md = unsafe {
        match md {
            H::Sha1 => sys::EVP_sha1(),
            H::Sha224 => sys::EVP_sha224(),
            H::Sha256 => sys::EVP_sha256(),
            H::Sha384 => sys::EVP_sha384(),
            H::Sha512 => sys::EVP_sha512(),
            H::Sha3_256 => sys::EVP_sha3_256(),
            H::Sha3_384 => sys::EVP_sha3_384(),
            H::Sha3_512 => sys::EVP_sha3_512(),
            H::Ripemd160 => sys::EVP_ripemd160(),
        }
    };
    let mut written: std::os::raw::c_uint = 0;
    // SAFETY: `data` is valid for its length, `out` holds the digest
    // length (checked above), no engine is passed.
    let ok = unsafe {
        sys::EVP_Digest(
            data.as_ptr().cast(),
            data.len(),
            out.as_mut_ptr(),
            &mut written,
            md,
            std::ptr::null_mut(),
        )
    };
    if ok != 1 || written as usize != out.len() {
        return Err(CryptoError::Backend("EVP_Digest"));
    }
    Ok(())
}

/// HKDF (RFC 5869) with the given digest.
pub(crate) fn hkdf(
    md: crate::HashAlg,
    ikm: &[u8],
    salt: &[u8],
    info: &[u8],
    out: &mut [u8],
) -> Result<()> {
    // SAFETY: the EVP_MD getters return static tables.
    let md = unsafe {
        match md {
            crate::HashAlg::Sha1 => sys::EVP_sha1(),
            crate::HashAlg::Sha256 => sys::EVP_sha256(),
            crate::HashAlg::Sha512 => sys::EVP_sha512(),
        }
    };
    // SAFETY: all buffers are valid for their lengths.
    let ok = unsafe {
        sys::HKDF(
            out.as_mut_ptr(),
            out.len(),
            md,
            ikm.as_ptr(),
            ikm.len(),
            salt.as_ptr(),
            salt.len(),
            info.as_ptr(),
            info.len(),
        )
    };
    if ok != 1 {
        return Err(CryptoError::InvalidLength {
            what: "HKDF output",
            len: out.len(),
            requirement: "at most 255 times the digest length",
        });
    }
    Ok(())
}

/// Set once the whole process is locked in memory ([`lock_all_memory`]):
/// secrets then need no locking of their own.
static ALL_LOCKED: AtomicBool = AtomicBool::new(false);

/// How many live secrets hold each locked page. `mlock` does not count, so
/// without this, dropping one secret would unlock a page that another one
/// still lives on; and a page already locked costs no system call.
static LOCKED_PAGES: Mutex<BTreeMap<usize, u32>> = Mutex::new(BTreeMap::new());

fn page_size() -> usize {
    static SIZE: OnceLock<usize> = OnceLock::new();
    *SIZE.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).ok().filter(|s| s.is_power_of_two()).unwrap_or(4096)
    })
}

fn pages(buf: &[u8]) -> std::ops::Range<usize> {
    let page = page_size();
    let start = buf.as_ptr() as usize & !(page - 1);
    let end = (buf.as_ptr() as usize + buf.len()).div_ceil(page) * page;
    (start / page)..(end / page)
}

/// Locks the pages holding `buf` in memory so that they are never written to
/// swap. Best effort: a low RLIMIT_MEMLOCK makes it fail, which is harmless.
pub(crate) fn lock_memory(buf: &[u8]) {
    if buf.is_empty() || ALL_LOCKED.load(Ordering::Relaxed) {
        return;
    }
    let page = page_size();
    let mut locked = LOCKED_PAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for index in pages(buf) {
        let count = locked.entry(index).or_insert(0);
        if *count == 0 {
            // SAFETY: mlock only reads the address range; the page holds
            // part of `buf`, so it is mapped.
            let _ = unsafe { libc::mlock((index * page) as *const c_void, page) };
            // Out of core dumps too (should one ever be enabled again, or
            // taken by a debugger that honours the flag).
            // SAFETY: MADV_DONTDUMP only changes the mapping's dump flag.
            let _ =
                unsafe { libc::madvise((index * page) as *mut c_void, page, libc::MADV_DONTDUMP) };
        }
        *count = count.saturating_add(1);
    }
}

/// Undoes [`lock_memory`] before the buffer is freed; a page stays locked
/// while another secret lives on it.
pub(crate) fn unlock_memory(buf: &[u8]) {
    if buf.is_empty() || ALL_LOCKED.load(Ordering::Relaxed) {
        return;
    }
    let page = page_size();
    let mut locked = LOCKED_PAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for index in pages(buf) {
        let Some(count) = locked.get_mut(&index) else { continue };
        *count -= 1;
        if *count == 0 {
            locked.remove(&index);
            // SAFETY: as above.
            let _ = unsafe { libc::munlock((index * page) as *const c_void, page) };
            // SAFETY: as above; the page goes back to the heap.
            let _ =
                unsafe { libc::madvise((index * page) as *mut c_void, page, libc::MADV_DODUMP) };
        }
    }
}

/// Locks every page of the process, present and future, as they are first
/// touched (`MCL_ONFAULT`), so that nothing it holds is ever swapped out.
/// Long-running servers that create secrets per request call this once at
/// start: locking each secret separately costs two system calls and a
/// memory-map change per secret. Returns false when the system refuses
/// (RLIMIT_MEMLOCK); secrets are then locked one by one as before.
pub fn lock_all_memory() -> bool {
    // Under a finite RLIMIT_MEMLOCK, MCL_FUTURE would make later mappings
    // (thread stacks, heap growth) fail once the limit is reached: only lock
    // everything when no limit applies.
    if !memlock_unlimited() {
        return false;
    }
    // SAFETY: mlockall takes flags only.
    let ok = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) };
    if ok == 0 {
        ALL_LOCKED.store(true, Ordering::Relaxed);
    }
    ok == 0
}

/// Caps the malloc arenas of this process at `arenas` (glibc's
/// `M_ARENA_MAX`; by default eight per core). A server whose threads come
/// and go (tokio's blocking pool) otherwise gets an arena for many of
/// them, each keeping the memory its threads freed, so a few arenas keep
/// the key manager's peak memory lower at the same throughput. Call once
/// at start, before the threads.
/// Returns false where the C library has no such setting or refuses it.
pub fn limit_malloc_arenas(arenas: u16) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt takes two integers and changes only the
        // allocator's tuning.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, i32::from(arenas)) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = arenas;
        false
    }
}

/// True when this process may lock any amount of memory: RLIMIT_MEMLOCK is
/// unlimited, or it holds CAP_IPC_LOCK (which bypasses the limit).
fn memlock_unlimited() -> bool {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one valid rlimit struct.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    if ok == 0 && limit.rlim_cur == libc::RLIM_INFINITY {
        return true;
    }
    const CAP_IPC_LOCK: u32 = 14;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
            u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// Keeps keys in this process's memory out of core files and away from
/// other processes of the same user: core dumps off (`RLIMIT_CORE` 0) and
/// the process marked non-dumpable (`PR_SET_DUMPABLE` 0), which also
/// refuses `ptrace` attaches and `/proc/PID/mem` reads by anyone but root.
/// Call once at start-up of any program that holds keys.
pub fn disable_core_dumps() {
    let zero = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: setrlimit reads a valid rlimit struct.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) };
    // SAFETY: PR_SET_DUMPABLE takes integer arguments only.
    let _ = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
}

/// Whether this process is marked dumpable (`PR_GET_DUMPABLE`).
#[must_use]
pub fn is_dumpable() -> bool {
    // SAFETY: PR_GET_DUMPABLE takes no pointer arguments.
    unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) != 0 }
}

/// Takes a non-blocking open-file-description (OFD) lock on the single
/// byte at `offset` of `file`: a write lock when `exclusive`, else a read
/// lock. Returns false when another open file description holds a
/// conflicting lock. OFD locks belong to the open file (not the process, as
/// classic POSIX locks do), are released when it is closed, and do not
/// interact with `flock` — so a byte far beyond any data can mark "a writer
/// has this volume open" without disturbing cryptsetup's `flock` protocol
/// or QEMU's image locks on bytes 100 and 200.
pub fn try_lock_byte(file: &std::fs::File, offset: u64, exclusive: bool) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let start = libc::off_t::try_from(offset).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "lock offset out of range")
    })?;
    // SAFETY: an all-zero `flock` is a valid value of the plain C struct.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = if exclusive { libc::F_WRLCK } else { libc::F_RDLCK } as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = start;
    lock.l_len = 1;
    lock.l_pid = 0; // required to be 0 for OFD locks
                    // SAFETY: the descriptor is valid for the borrow of `file`, and
                    // F_OFD_SETLK reads one valid `flock` struct.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN | libc::EACCES) => Ok(false),
        _ => Err(err),
    }
}

/// CPU time the calling thread has run (`CLOCK_THREAD_CPUTIME_ID`): a
/// throughput per CPU-second of the measuring thread hardly moves when
/// other processes load the machine, where a wall-clock rate does. `None`
/// if the kernel refuses the clock.
#[must_use]
pub fn thread_cpu_time() -> Option<std::time::Duration> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one valid timespec; this clock exists
    // on every Linux since 2.6.12.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if ok != 0 {
        return None;
    }
    Some(std::time::Duration::new(
        u64::try_from(now.tv_sec).ok()?,
        u32::try_from(now.tv_nsec).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_the_arena_cap() {
        assert!(limit_malloc_arenas(2), "glibc refused M_ARENA_MAX");
        // Threads started after it still allocate and free as ever.
        let sums: Vec<usize> = (0..8)
            .map(|i| std::thread::spawn(move || vec![i; 1 << 16].iter().sum::<usize>()))
            .map(|t| t.join().unwrap())
            .collect();
        assert_eq!(sums, (0..8).map(|i| i << 16).collect::<Vec<_>>());
    }

    fn lock_count(index: usize) -> u32 {
        LOCKED_PAGES.lock().unwrap().get(&index).copied().unwrap_or(0)
    }

    #[test]
    fn a_page_stays_locked_while_any_secret_lives_on_it() {
        // Two secrets side by side at the start of one page.
        let page_len = page_size();
        let buffer = vec![7u8; 2 * page_len];
        let start = page_len - buffer.as_ptr() as usize % page_len;
        let (first, second) = buffer[start..start + 64].split_at(32);
        let page = pages(first).start;
        assert_eq!(pages(second).start, page);
        let before = lock_count(page);
        lock_memory(first);
        lock_memory(second);
        assert_eq!(lock_count(page), before + 2);
        unlock_memory(first);
        assert_eq!(lock_count(page), before + 1, "the second secret's page was unlocked");
        unlock_memory(second);
        assert_eq!(lock_count(page), before);
    }

    #[test]
    fn page_ranges_cover_the_whole_buffer() {
        let page = page_size();
        let buffer = vec![0u8; 3 * page];
        // Two bytes either side of a page boundary.
        let last = page - 1 - buffer.as_ptr() as usize % page;
        assert_eq!(pages(&buffer[last..last + 2]).len(), 2);
        assert_eq!(pages(&buffer[last + 1..last + 2]).len(), 1);
    }

    /// The `VmFlags` of the mapping holding `address`, from /proc/self/smaps.
    fn vm_flags(address: usize) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((start, end)) = range.split_once('-') {
                    if let (Ok(start), Ok(end)) =
                        (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16))
                    {
                        inside = (start..end).contains(&address);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.split_whitespace().map(str::to_owned).collect();
                }
            }
        }
        panic!("no mapping holds {address:#x}");
    }

    #[test]
    fn secret_pages_are_left_out_of_core_dumps_while_they_live() {
        let page_len = page_size();
        let buffer = vec![7u8; 3 * page_len];
        let start = page_len - buffer.as_ptr() as usize % page_len;
        let secret = &buffer[start..start + 32];
        let address = secret.as_ptr() as usize;
        lock_memory(secret);
        assert!(vm_flags(address).iter().any(|f| f == "dd"), "{:?}", vm_flags(address));
        unlock_memory(secret);
        assert!(!vm_flags(address).iter().any(|f| f == "dd"), "{:?}", vm_flags(address));
    }

    #[test]
    fn processes_holding_keys_are_not_dumpable() {
        disable_core_dumps();
        assert!(!is_dumpable());
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let core = limits.lines().find(|l| l.starts_with("Max core file size")).unwrap();
        assert_eq!(core.split_whitespace().nth(4), Some("0"), "{core}");
    }

    #[test]
    fn a_byte_lock_excludes_other_open_files_only() {
        let path = std::env::temp_dir().join(format!("rampart-ofd-{}", std::process::id()));
        std::fs::write(&path, b"x").unwrap();
        let open = || std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let (first, second) = (open(), open());
        let far = i64::MAX as u64 - 1;
        assert!(try_lock_byte(&first, far, true).unwrap());
        // Same process, another open file: refused (a POSIX lock would not be).
        assert!(!try_lock_byte(&second, far, true).unwrap());
        assert!(!try_lock_byte(&second, far, false).unwrap());
        // Other bytes and flock are independent of it.
        assert!(try_lock_byte(&second, 100, true).unwrap());
        flock_whole_file(&second);
        drop(first);
        assert!(try_lock_byte(&second, far, true).unwrap(), "closing the file releases it");
        std::fs::remove_file(&path).unwrap();
    }

    fn flock_whole_file(file: &std::fs::File) {
        use std::os::fd::AsRawFd;
        // SAFETY: flock takes a valid descriptor and an operation.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(rc, 0, "flock conflicts with the byte lock");
    }
}
