use aws_lc_rs::{digest as lc_digest, hmac as lc_hmac};
use zeroize::Zeroize;

use crate::{ffi, Result, SecretBytes};

/// The hash functions LUKS and Rampart use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HashAlg {
    Sha1,
    Sha256,
    Sha512,
}

impl HashAlg {
    /// Parses the names LUKS headers use (`sha1`, `sha256`, `sha512`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "sha1" => Some(Self::Sha1),
            "sha256" => Some(Self::Sha256),
            "sha512" => Some(Self::Sha512),
            _ => None,
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha1 => "sha1",
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }

    #[must_use]
    pub fn output_len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    fn digest_alg(self) -> &'static lc_digest::Algorithm {
        match self {
            Self::Sha1 => &lc_digest::SHA1_FOR_LEGACY_USE_ONLY,
            Self::Sha256 => &lc_digest::SHA256,
            Self::Sha512 => &lc_digest::SHA512,
        }
    }

    fn hmac_alg(self) -> lc_hmac::Algorithm {
        match self {
            Self::Sha1 => lc_hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            Self::Sha256 => lc_hmac::HMAC_SHA256,
            Self::Sha512 => lc_hmac::HMAC_SHA512,
        }
    }

    pub(crate) fn pbkdf2_alg(self) -> aws_lc_rs::pbkdf2::Algorithm {
        match self {
            Self::Sha1 => aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA1,
            Self::Sha256 => aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA256,
            Self::Sha512 => aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }
}

/// The hashes that turn a passphrase into a key the way cryptsetup's
/// plain mode does (`--hash`): the SHA-2 and SHA-3 families, SHA-1 and
/// RIPEMD-160 (cryptsetup's default there), by cryptsetup's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PassphraseHash {
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
    Sha3_256,
    Sha3_384,
    Sha3_512,
    Ripemd160,
}

impl PassphraseHash {
    const ALL: [(Self, &'static str, usize); 9] = [
        (Self::Sha1, "sha1", 20),
        (Self::Sha224, "sha224", 28),
        (Self::Sha256, "sha256", 32),
        (Self::Sha384, "sha384", 48),
        (Self::Sha512, "sha512", 64),
        (Self::Sha3_256, "sha3-256", 32),
        (Self::Sha3_384, "sha3-384", 48),
        (Self::Sha3_512, "sha3-512", 64),
        (Self::Ripemd160, "ripemd160", 20),
    ];

    /// Parses cryptsetup's name (`sha256`, `ripemd160`, `sha3-256`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        let name = name.to_ascii_lowercase();
        Self::ALL.iter().find(|(_, n, _)| *n == name).map(|(h, _, _)| *h)
    }

    /// Every name [`PassphraseHash::from_name`] takes, for messages.
    #[must_use]
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|(_, n, _)| *n).collect()
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(h, _, _)| *h == self).map_or("", |(_, n, _)| n)
    }

    #[must_use]
    pub fn output_len(self) -> usize {
        Self::ALL.iter().find(|(h, _, _)| *h == self).map_or(0, |(_, _, len)| *len)
    }

    /// The digest of `data` into `out`, which must be exactly
    /// [`PassphraseHash::output_len`] bytes (the caller's secret buffer:
    /// the digest exists nowhere else).
    pub fn digest_into(self, data: &[u8], out: &mut [u8]) -> Result<()> {
        ffi::evp_digest(self, data, out)
    }
}

/// The digest of `data`. Returned as a secret because digests of keys (ESSIV
/// salts, AF diffusion) are key material.
#[must_use]
pub fn digest(alg: HashAlg, data: &[u8]) -> SecretBytes {
    SecretBytes::from_slice(lc_digest::digest(alg.digest_alg(), data).as_ref())
}

/// The digest of `data` written into `out` (at least the digest length),
/// for hot loops over key material (the LUKS anti-forensic diffusion) where
/// a locked allocation per digest would cost two system calls. The caller
/// wipes `out`. Returns the digest length.
pub fn digest_into(alg: HashAlg, data: &[u8], out: &mut [u8]) -> Result<usize> {
    let len = alg.output_len();
    let Some(target) = out.get_mut(..len) else {
        return Err(crate::CryptoError::InvalidLength {
            what: "digest output buffer",
            len: out.len(),
            requirement: "at least the digest length",
        });
    };
    target.copy_from_slice(lc_digest::digest(alg.digest_alg(), data).as_ref());
    Ok(len)
}

/// The digest of each `block`-byte piece of `data` (the last may be
/// shorter), one after another in `out`: the checksums a LUKS2
/// reencryption keeps of its hotzone. SHA-256 runs several pieces side
/// by side with the SHA extensions where the CPU has them (see
/// `sha256_lanes`), about twice the rate of one at a time.
pub fn digest_blocks(alg: HashAlg, data: &[u8], block: usize, out: &mut [u8]) -> Result<()> {
    let hlen = alg.output_len();
    let count = if block == 0 { 0 } else { data.len().div_ceil(block) };
    if block == 0 || out.len() < count * hlen {
        return Err(crate::CryptoError::InvalidLength {
            what: "digest blocks",
            len: out.len(),
            requirement: "blocks of at least one byte and room for a digest of each",
        });
    }
    let mut pieces = data.chunks(block).zip(out.chunks_mut(hlen));
    #[cfg(target_arch = "x86_64")]
    if alg == HashAlg::Sha256 && crate::sha256_lanes::available() {
        use crate::sha256_lanes::{digest_lanes, LANES};
        let whole = data.len() / block;
        for _ in 0..whole / LANES {
            let mut messages = [&[][..]; LANES];
            let mut digests: [[u8; 32]; LANES] = [[0; 32]; LANES];
            let mut targets = Vec::with_capacity(LANES);
            for message in &mut messages {
                // `whole / LANES` groups of LANES whole blocks remain.
                let Some((piece, target)) = pieces.next() else { break };
                *message = piece;
                targets.push(target);
            }
            digest_lanes(messages, digests.each_mut());
            for (target, digest) in targets.into_iter().zip(&digests) {
                target.copy_from_slice(digest);
            }
        }
    }
    for (piece, target) in pieces {
        digest_into(alg, piece, target)?;
    }
    Ok(())
}

/// HMAC of `msg` under `key`.
#[must_use]
pub fn hmac(alg: HashAlg, key: &[u8], msg: &[u8]) -> SecretBytes {
    let key = lc_hmac::Key::new(alg.hmac_alg(), key);
    SecretBytes::from_slice(lc_hmac::sign(&key, msg).as_ref())
}

/// An HMAC key prepared once: its inner and outer hash states are
/// computed from the padded key (RFC 2104) when it is made, so each MAC of
/// a short message costs the message's compressions and one for the outer
/// digest, not two more for the pads. AWS-LC wipes its states on drop;
/// the SHA-256 states kept here are wiped by [`Sha256Pads`]' drop.
pub struct HmacKey {
    alg: HashAlg,
    key: lc_hmac::Key,
    sha256: Option<Sha256Pads>,
}

impl std::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HmacKey({}, ..)", self.alg.name())
    }
}

/// HMAC-SHA256's states after the key's inner and outer pad blocks.
///
/// A message of up to [`Sha256Pads::ONE_BLOCK`] bytes fits with its padding
/// in one block, so its MAC is exactly two compressions with the block
/// laid out here: AWS-LC's HMAC context, set up, copied, finished and
/// wiped around the same two compressions, cost as much again (the audit
/// walk MACs every entry's 32-byte hash: BENCHMARKS.md, "Key manager:
/// fleet scale").
struct Sha256Pads {
    inner: [u32; 8],
    outer: [u32; 8],
}

impl Drop for Sha256Pads {
    fn drop(&mut self) {
        self.inner.zeroize();
        self.outer.zeroize();
    }
}

impl Sha256Pads {
    /// The longest message that one block holds with SHA-256's padding
    /// (a 0x80 byte and the 64-bit length).
    const ONE_BLOCK: usize = 64 - 1 - 8;

    fn new(key: &[u8]) -> Self {
        // RFC 2104: a key longer than the block is hashed first.
        let mut padded = [0u8; 64];
        if key.len() > 64 {
            padded[..32].copy_from_slice(lc_digest::digest(&lc_digest::SHA256, key).as_ref());
        } else {
            padded[..key.len()].copy_from_slice(key);
        }
        let state_after = |pad: u8| {
            let mut block = padded.map(|b| b ^ pad);
            let mut state = crate::sha256_lanes::INITIAL;
            ffi::sha256_compress(&mut state, &block);
            block.zeroize();
            state
        };
        let pads = Self { inner: state_after(0x36), outer: state_after(0x5c) };
        padded.zeroize();
        pads
    }

    /// The state after the final block of a message whose first block
    /// was the pad block: `message` (at most [`Self::ONE_BLOCK`] bytes)
    /// with FIPS 180-4's padding.
    fn finish(mut state: [u32; 8], message: &[u8]) -> [u32; 8] {
        let (mut blocks, used) = crate::sha256_lanes::final_blocks(message, 64 + message.len());
        debug_assert_eq!(used, 64, "a message of at most ONE_BLOCK bytes pads to one block");
        if let Some(block) = blocks.first_chunk::<64>() {
            ffi::sha256_compress(&mut state, block);
        }
        // Only the message's bytes (the outer hash's is the inner digest);
        // the rest is padding: zeroing the whole 128 bytes of both calls,
        // byte by byte, was a large part of a MAC's time, and the audit walk
        // makes one MAC per entry (BENCHMARKS.md, "Key manager: fleet scale").
        blocks[..message.len()].zeroize();
        state
    }

    /// The MAC of a message of at most [`Self::ONE_BLOCK`] bytes.
    fn sign(&self, message: &[u8], out: &mut [u8; 32]) {
        let mut inner = Self::finish(self.inner, message);
        let mut inner_digest = [0u8; 32];
        for (bytes, word) in inner_digest.chunks_exact_mut(4).zip(&inner) {
            bytes.copy_from_slice(&word.to_be_bytes());
        }
        let outer = Self::finish(self.outer, &inner_digest);
        for (bytes, word) in out.chunks_exact_mut(4).zip(&outer) {
            bytes.copy_from_slice(&word.to_be_bytes());
        }
        inner.zeroize();
        inner_digest.zeroize();
    }
}

impl HmacKey {
    #[must_use]
    pub fn new(alg: HashAlg, key: &[u8]) -> Self {
        let sha256 = (alg == HashAlg::Sha256).then(|| Sha256Pads::new(key));
        Self { alg, key: lc_hmac::Key::new(alg.hmac_alg(), key), sha256 }
    }

    /// A MAC over data given in parts under this key, which costs no key
    /// set-up: one per sector of dm-crypt's authenticated encryption.
    #[must_use]
    pub fn mac(&self) -> crate::Mac {
        crate::Mac::from_context(lc_hmac::Context::with_key(&self.key))
    }

    /// The HMAC of `msg` written into `out` (at least the digest length).
    /// Returns the digest length.
    pub fn sign_into(&self, msg: &[u8], out: &mut [u8]) -> Result<usize> {
        let len = out.len();
        if let (Some(pads), Some(target)) = (&self.sha256, out.first_chunk_mut::<32>()) {
            if msg.len() <= Sha256Pads::ONE_BLOCK {
                pads.sign(msg, target);
                return Ok(32);
            }
        }
        lc_hmac::sign_to_buffer(&self.key, msg, out).map(|tag| tag.len()).map_err(|_| {
            crate::CryptoError::InvalidLength {
                what: "HMAC output buffer",
                len,
                requirement: "at least the digest length",
            }
        })
    }
}

/// HKDF (RFC 5869) extract-and-expand into `out` (at most 255 digests long).
pub fn hkdf(alg: HashAlg, ikm: &[u8], salt: &[u8], info: &[u8], out: &mut [u8]) -> Result<()> {
    ffi::hkdf(alg, ikm, salt, info, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passphrase_hashes_match_their_published_vectors() {
        for (name, want) in [
            ("ripemd160", "8eb208f7e05d987a9b044a8e98c6b087f15a0bfc"),
            ("sha256", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            ("sha3-256", "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532"),
            ("sha1", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ] {
            let hash = PassphraseHash::from_name(name).unwrap();
            assert_eq!(hash.name(), name);
            let mut out = vec![0u8; hash.output_len()];
            hash.digest_into(b"abc", &mut out).unwrap();
            assert_eq!(hex::encode(&out), want, "{name}");
        }
        assert!(PassphraseHash::from_name("whirlpool").is_none());
        let mut short = [0u8; 8];
        assert!(PassphraseHash::Sha256.digest_into(b"abc", &mut short).is_err());
    }

    #[test]
    fn prepared_sha256_macs_equal_aws_lc_for_every_short_and_long_message() {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 131 % 251) as u8).collect();
        for key_len in [0, 1, 31, 32, 63, 64, 65, 131] {
            let key = HmacKey::new(HashAlg::Sha256, &bytes[..key_len]);
            for msg_len in 0..=130 {
                let msg = &bytes[7..7 + msg_len];
                let mut out = [0u8; 40];
                assert_eq!(key.sign_into(msg, &mut out).unwrap(), 32);
                let want = hmac(HashAlg::Sha256, &bytes[..key_len], msg);
                assert_eq!(&out[..32], want.expose(), "key {key_len} bytes, message {msg_len}");
                assert_eq!(out[32..], [0; 8], "nothing written past the MAC");
            }
        }
    }

    #[test]
    fn a_short_output_buffer_is_refused_on_the_prepared_path_too() {
        let key = HmacKey::new(HashAlg::Sha256, b"key");
        assert!(key.sign_into(b"message", &mut [0u8; 31]).is_err());
    }
}
