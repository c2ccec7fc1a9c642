//! An owned AWS-LC `EVP_PKEY` and the one-shot operations on it that
//! `aws-lc-rs` does not offer with the parameters KMIP names: RSA-PSS
//! with a chosen salt length, OAEP whose MGF1 hash differs from its label
//! hash, SHA-224 and SHA-1 RSA signatures, signatures over a digest the
//! caller computed, and keys smaller than 2048 bits that a client
//! registers. Everything here is parsed from, and serialised to, DER
//! (PKCS#8 and SubjectPublicKeyInfo).

use std::ptr::NonNull;

use aws_lc_sys as sys;

use crate::{CryptoError, Result, SecretBytes};

/// The digests an asymmetric operation uses (for the signature, the OAEP
/// label or MGF1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Md {
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

impl Md {
    fn evp(self) -> *const sys::EVP_MD {
        // SAFETY: these functions return pointers to static method tables.
        unsafe {
            match self {
                Self::Sha1 => sys::EVP_sha1(),
                Self::Sha224 => sys::EVP_sha224(),
                Self::Sha256 => sys::EVP_sha256(),
                Self::Sha384 => sys::EVP_sha384(),
                Self::Sha512 => sys::EVP_sha512(),
            }
        }
    }
}

/// The key types AWS-LC parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PkeyType {
    Rsa,
    /// An EC key on the curve of this NID.
    Ec(i32),
    Ed25519,
    Other,
}

pub(crate) const NID_P256: i32 = sys::NID_X9_62_prime256v1;
pub(crate) const NID_P384: i32 = sys::NID_secp384r1;
pub(crate) const NID_P521: i32 = sys::NID_secp521r1;
/// A PSS verification that accepts whatever salt length the signer chose.
pub(crate) const PSS_SALT_AUTO: i32 = sys::RSA_PSS_SALTLEN_AUTO;

/// How an `EVP_PKEY_CTX` is set up before a sign, verify, encrypt or
/// decrypt: RSA padding and its digests; EC and Ed25519 keys take none
/// but the signature digest.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CtxParams<'a> {
    pub(crate) rsa_padding: Option<RsaPad>,
    /// The OAEP label (empty: none).
    pub(crate) oaep_label: &'a [u8],
    /// The digest a signature is over (RSA, ECDSA).
    pub(crate) signature_md: Option<Md>,
    pub(crate) mgf1_md: Option<Md>,
    pub(crate) oaep_md: Option<Md>,
    /// The PSS salt length in bytes.
    pub(crate) pss_salt_len: Option<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RsaPad {
    Pkcs1,
    Pss,
    Oaep,
}

impl RsaPad {
    fn id(self) -> i32 {
        match self {
            Self::Pkcs1 => sys::RSA_PKCS1_PADDING,
            Self::Pss => sys::RSA_PKCS1_PSS_PADDING,
            Self::Oaep => sys::RSA_PKCS1_OAEP_PADDING,
        }
    }
}

/// An owned `EVP_PKEY` (private or public).
pub(crate) struct Pkey {
    pkey: NonNull<sys::EVP_PKEY>,
}

// SAFETY: an EVP_PKEY is not modified after parsing (every operation here
// takes it through a fresh EVP_PKEY_CTX, which AWS-LC documents as safe on
// a shared key), and it has no thread affinity.
unsafe impl Send for Pkey {}
// SAFETY: as above: concurrent operations each use their own context.
unsafe impl Sync for Pkey {}

impl std::fmt::Debug for Pkey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pkey({:?}, {} bits, redacted)", self.key_type(), self.bits())
    }
}

impl Drop for Pkey {
    fn drop(&mut self) {
        // SAFETY: we own the one reference; AWS-LC cleanses private key
        // material when freeing it.
        unsafe { sys::EVP_PKEY_free(self.pkey.as_ptr()) }
    }
}

/// An owned `EVP_PKEY_CTX`.
struct PkeyCtx(NonNull<sys::EVP_PKEY_CTX>);

impl Drop for PkeyCtx {
    fn drop(&mut self) {
        // SAFETY: we own the context.
        unsafe { sys::EVP_PKEY_CTX_free(self.0.as_ptr()) }
    }
}

/// An owned `EVP_MD_CTX`.
struct MdCtx(NonNull<sys::EVP_MD_CTX>);

impl Drop for MdCtx {
    fn drop(&mut self) {
        // SAFETY: we own the context (and through it any EVP_PKEY_CTX that
        // EVP_DigestSignInit made).
        unsafe { sys::EVP_MD_CTX_free(self.0.as_ptr()) }
    }
}

fn check(ok: i32, what: &'static str) -> Result<()> {
    if ok == 1 {
        Ok(())
    } else {
        clear_errors();
        Err(CryptoError::Backend(what))
    }
}

fn clear_errors() {
    // SAFETY: clears this thread's AWS-LC error queue; no arguments.
    unsafe { sys::ERR_clear_error() }
}

/// The bytes a finished CBB holds, copied out by `take` before the
/// buffer is freed (AWS-LC's `OPENSSL_free` cleanses what it frees).
fn marshal<T>(
    key: &Pkey,
    f: unsafe extern "C" fn(*mut sys::CBB, *const sys::EVP_PKEY) -> i32,
    take: impl FnOnce(&[u8]) -> T,
    what: &'static str,
) -> Result<T> {
    let mut cbb = std::mem::MaybeUninit::<sys::CBB>::uninit();
    // SAFETY: CBB_init initialises the CBB it is given.
    check(unsafe { sys::CBB_init(cbb.as_mut_ptr(), 0) }, what)?;
    // SAFETY: the CBB is initialised and the key is valid.
    if unsafe { f(cbb.as_mut_ptr(), key.pkey.as_ptr()) } != 1 {
        // SAFETY: an initialised CBB is cleaned up once.
        unsafe { sys::CBB_cleanup(cbb.as_mut_ptr()) };
        clear_errors();
        return Err(CryptoError::Backend(what));
    }
    let mut out: *mut u8 = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: on success CBB_finish hands us `out` (len bytes) to free;
    // on failure it leaves the CBB to be cleaned up.
    if unsafe { sys::CBB_finish(cbb.as_mut_ptr(), &mut out, &mut len) } != 1 || out.is_null() {
        // SAFETY: as above.
        unsafe { sys::CBB_cleanup(cbb.as_mut_ptr()) };
        clear_errors();
        return Err(CryptoError::Backend(what));
    }
    // SAFETY: CBB_finish returned a valid buffer of len bytes.
    let value = take(unsafe { std::slice::from_raw_parts(out, len) });
    // SAFETY: the buffer is ours to free, once.
    unsafe { sys::OPENSSL_free(out.cast()) };
    Ok(value)
}

impl Pkey {
    fn parse(
        der: &[u8],
        f: unsafe extern "C" fn(*mut sys::CBS) -> *mut sys::EVP_PKEY,
        what: &'static str,
    ) -> Result<Self> {
        let mut cbs = sys::CBS { data: der.as_ptr(), len: der.len() };
        // SAFETY: the CBS points into `der`, which outlives the call; the
        // parser only reads within it.
        let raw = unsafe { f(&mut cbs) };
        let Some(pkey) = NonNull::new(raw) else {
            clear_errors();
            return Err(CryptoError::InvalidParameter(what));
        };
        let key = Self { pkey };
        // Trailing bytes after the structure are not a key.
        // SAFETY: the CBS is still valid.
        if unsafe { sys::CBS_len(&cbs) } != 0 {
            return Err(CryptoError::InvalidParameter(what));
        }
        Ok(key)
    }

    /// Parses a PKCS#8 PrivateKeyInfo.
    pub(crate) fn parse_private(der: &[u8]) -> Result<Self> {
        Self::parse(der, sys::EVP_parse_private_key, "not a PKCS#8 private key")
    }

    /// Parses a SubjectPublicKeyInfo.
    pub(crate) fn parse_public(der: &[u8]) -> Result<Self> {
        Self::parse(der, sys::EVP_parse_public_key, "not a SubjectPublicKeyInfo public key")
    }

    /// The SubjectPublicKeyInfo of this key (a private key's public half).
    pub(crate) fn public_der(&self) -> Result<Vec<u8>> {
        marshal(self, sys::EVP_marshal_public_key, <[u8]>::to_vec, "EVP_marshal_public_key")
    }

    /// The PKCS#8 PrivateKeyInfo of a private key.
    pub(crate) fn private_der(&self) -> Result<SecretBytes> {
        marshal(
            self,
            sys::EVP_marshal_private_key,
            SecretBytes::from_slice,
            "EVP_marshal_private_key",
        )
    }

    pub(crate) fn key_type(&self) -> PkeyType {
        // SAFETY: the key is valid.
        match unsafe { sys::EVP_PKEY_id(self.pkey.as_ptr()) } {
            sys::EVP_PKEY_RSA => PkeyType::Rsa,
            sys::EVP_PKEY_ED25519 => PkeyType::Ed25519,
            sys::EVP_PKEY_EC => {
                // SAFETY: the key is an EC key, so get0 returns its EC_KEY
                // (borrowed, not to be freed), whose group is set.
                let nid = unsafe {
                    let ec = sys::EVP_PKEY_get0_EC_KEY(self.pkey.as_ptr());
                    if ec.is_null() {
                        0
                    } else {
                        let group = sys::EC_KEY_get0_group(ec);
                        if group.is_null() {
                            0
                        } else {
                            sys::EC_GROUP_get_curve_name(group)
                        }
                    }
                };
                PkeyType::Ec(nid)
            }
            _ => PkeyType::Other,
        }
    }

    /// The key's size in bits (an RSA modulus, an EC field).
    pub(crate) fn bits(&self) -> u32 {
        // SAFETY: the key is valid.
        u32::try_from(unsafe { sys::EVP_PKEY_bits(self.pkey.as_ptr()) }).unwrap_or(0)
    }

    /// The largest signature or ciphertext the key makes, in bytes.
    pub(crate) fn max_output(&self) -> Result<usize> {
        // SAFETY: the key is valid.
        let size = unsafe { sys::EVP_PKEY_size(self.pkey.as_ptr()) };
        usize::try_from(size).ok().filter(|s| *s > 0).ok_or(CryptoError::Backend("EVP_PKEY_size"))
    }

    fn ctx(&self) -> Result<PkeyCtx> {
        // SAFETY: the key is valid; the context takes its own reference.
        let raw = unsafe { sys::EVP_PKEY_CTX_new(self.pkey.as_ptr(), std::ptr::null_mut()) };
        NonNull::new(raw).map(PkeyCtx).ok_or(CryptoError::Backend("EVP_PKEY_CTX_new"))
    }

    /// Applies `params` to a context already initialised for an operation.
    fn configure(ctx: &PkeyCtx, params: &CtxParams<'_>) -> Result<()> {
        let c = ctx.0.as_ptr();
        // Every call below: the context is valid and initialised and the
        // digests are static tables; AWS-LC rejects a setting that does not
        // fit the key or the operation, which is reported.
        if let Some(pad) = params.rsa_padding {
            // SAFETY: as above.
            check(unsafe { sys::EVP_PKEY_CTX_set_rsa_padding(c, pad.id()) }, "RSA padding")?;
        }
        if let Some(md) = params.signature_md {
            // SAFETY: as above.
            check(unsafe { sys::EVP_PKEY_CTX_set_signature_md(c, md.evp()) }, "signature digest")?;
        }
        if let Some(md) = params.oaep_md {
            // SAFETY: as above.
            check(unsafe { sys::EVP_PKEY_CTX_set_rsa_oaep_md(c, md.evp()) }, "OAEP digest")?;
        }
        if !params.oaep_label.is_empty() {
            let len = params.oaep_label.len();
            // SAFETY: a fresh allocation of `len` bytes, filled from the
            // label; on success the context owns it (the "set0" contract),
            // on failure it is freed here.
            unsafe {
                let buf = sys::OPENSSL_malloc(len).cast::<u8>();
                if buf.is_null() {
                    return Err(CryptoError::Backend("OPENSSL_malloc"));
                }
                std::ptr::copy_nonoverlapping(params.oaep_label.as_ptr(), buf, len);
                if sys::EVP_PKEY_CTX_set0_rsa_oaep_label(c, buf, len) != 1 {
                    sys::OPENSSL_free(buf.cast());
                    clear_errors();
                    return Err(CryptoError::Backend("OAEP label"));
                }
            }
        }
        if let Some(md) = params.mgf1_md {
            // SAFETY: as above.
            check(unsafe { sys::EVP_PKEY_CTX_set_rsa_mgf1_md(c, md.evp()) }, "MGF1 digest")?;
        }
        if let Some(len) = params.pss_salt_len {
            // SAFETY: as above.
            check(unsafe { sys::EVP_PKEY_CTX_set_rsa_pss_saltlen(c, len) }, "PSS salt length")?;
        }
        Ok(())
    }

    /// Signs a digest (RSA, ECDSA): `EVP_PKEY_sign`.
    pub(crate) fn sign_digest(&self, params: &CtxParams<'_>, digest: &[u8]) -> Result<Vec<u8>> {
        let ctx = self.ctx()?;
        // SAFETY: the context is valid.
        check(unsafe { sys::EVP_PKEY_sign_init(ctx.0.as_ptr()) }, "EVP_PKEY_sign_init")?;
        Self::configure(&ctx, params)?;
        let mut out = vec![0u8; self.max_output()?];
        let mut len = out.len();
        // SAFETY: `out` has room for `len` bytes (EVP_PKEY_size, the most a
        // signature takes); the digest is a valid slice.
        let ok = unsafe {
            sys::EVP_PKEY_sign(
                ctx.0.as_ptr(),
                out.as_mut_ptr(),
                &mut len,
                digest.as_ptr(),
                digest.len(),
            )
        };
        check(ok, "EVP_PKEY_sign")?;
        out.truncate(len);
        Ok(out)
    }

    /// Checks a signature over a digest (RSA, ECDSA): `EVP_PKEY_verify`.
    /// A set-up the key does not take is an error; a signature that does
    /// not verify is `Ok(false)`.
    pub(crate) fn verify_digest(
        &self,
        params: &CtxParams<'_>,
        digest: &[u8],
        sig: &[u8],
    ) -> Result<bool> {
        let ctx = self.ctx()?;
        // SAFETY: the context is valid.
        check(unsafe { sys::EVP_PKEY_verify_init(ctx.0.as_ptr()) }, "EVP_PKEY_verify_init")?;
        Self::configure(&ctx, params)?;
        // SAFETY: both slices are valid for their lengths.
        let ok = unsafe {
            sys::EVP_PKEY_verify(
                ctx.0.as_ptr(),
                sig.as_ptr(),
                sig.len(),
                digest.as_ptr(),
                digest.len(),
            )
        };
        clear_errors();
        Ok(ok == 1)
    }

    fn md_ctx() -> Result<MdCtx> {
        // SAFETY: plain allocation; null is handled.
        let raw = unsafe { sys::EVP_MD_CTX_new() };
        NonNull::new(raw).map(MdCtx).ok_or(CryptoError::Backend("EVP_MD_CTX_new"))
    }

    /// Signs a whole message with a key that hashes internally (Ed25519):
    /// `EVP_DigestSign` with no digest.
    pub(crate) fn sign_message(&self, msg: &[u8]) -> Result<Vec<u8>> {
        let md = Self::md_ctx()?;
        // SAFETY: the MD context and key are valid; a null digest is what
        // Ed25519 requires; the EVP_PKEY_CTX it makes belongs to the MD context.
        let ok = unsafe {
            sys::EVP_DigestSignInit(
                md.0.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null_mut(),
                self.pkey.as_ptr(),
            )
        };
        check(ok, "EVP_DigestSignInit")?;
        let mut out = vec![0u8; self.max_output()?];
        let mut len = out.len();
        // SAFETY: `out` has room for `len` bytes; `msg` is a valid slice.
        let ok = unsafe {
            sys::EVP_DigestSign(md.0.as_ptr(), out.as_mut_ptr(), &mut len, msg.as_ptr(), msg.len())
        };
        check(ok, "EVP_DigestSign")?;
        out.truncate(len);
        Ok(out)
    }

    /// Checks an Ed25519 signature over a whole message.
    pub(crate) fn verify_message(&self, msg: &[u8], sig: &[u8]) -> Result<bool> {
        let md = Self::md_ctx()?;
        // SAFETY: as in sign_message.
        let ok = unsafe {
            sys::EVP_DigestVerifyInit(
                md.0.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null_mut(),
                self.pkey.as_ptr(),
            )
        };
        check(ok, "EVP_DigestVerifyInit")?;
        // SAFETY: both slices are valid for their lengths.
        let ok = unsafe {
            sys::EVP_DigestVerify(md.0.as_ptr(), sig.as_ptr(), sig.len(), msg.as_ptr(), msg.len())
        };
        clear_errors();
        Ok(ok == 1)
    }

    /// RSA encryption with `params`' padding.
    pub(crate) fn encrypt(&self, params: &CtxParams<'_>, plain: &[u8]) -> Result<Vec<u8>> {
        let ctx = self.ctx()?;
        // SAFETY: the context is valid.
        check(unsafe { sys::EVP_PKEY_encrypt_init(ctx.0.as_ptr()) }, "EVP_PKEY_encrypt_init")?;
        Self::configure(&ctx, params)?;
        let mut out = vec![0u8; self.max_output()?];
        let mut len = out.len();
        // SAFETY: `out` has room for `len` bytes (the modulus size, which
        // every RSA ciphertext has); `plain` is a valid slice, whose length
        // AWS-LC checks against the padding's limit.
        let ok = unsafe {
            sys::EVP_PKEY_encrypt(
                ctx.0.as_ptr(),
                out.as_mut_ptr(),
                &mut len,
                plain.as_ptr(),
                plain.len(),
            )
        };
        if ok != 1 {
            clear_errors();
            return Err(CryptoError::InvalidLength {
                what: "RSA plaintext",
                len: plain.len(),
                requirement: "short enough for the key and padding",
            });
        }
        out.truncate(len);
        Ok(out)
    }

    /// RSA decryption with `params`' padding; a ciphertext whose padding
    /// does not check is `AuthenticationFailed`, with nothing more said
    /// (AWS-LC checks it in constant time).
    pub(crate) fn decrypt(&self, params: &CtxParams<'_>, cipher: &[u8]) -> Result<SecretBytes> {
        let ctx = self.ctx()?;
        // SAFETY: the context is valid.
        check(unsafe { sys::EVP_PKEY_decrypt_init(ctx.0.as_ptr()) }, "EVP_PKEY_decrypt_init")?;
        Self::configure(&ctx, params)?;
        let mut out = SecretBytes::zeroed(self.max_output()?);
        let mut len = out.len();
        // SAFETY: `out` has room for `len` bytes (the modulus size, the
        // most a plaintext takes); `cipher` is a valid slice.
        let ok = unsafe {
            sys::EVP_PKEY_decrypt(
                ctx.0.as_ptr(),
                out.expose_mut().as_mut_ptr(),
                &mut len,
                cipher.as_ptr(),
                cipher.len(),
            )
        };
        if ok != 1 {
            clear_errors();
            return Err(CryptoError::AuthenticationFailed);
        }
        Ok(SecretBytes::from_slice(out.expose().get(..len).unwrap_or_default()))
    }
}
