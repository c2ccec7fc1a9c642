//! Digests and HMACs of data that arrives in parts (KMIP Hash, MAC and MAC
//! Verify, single-part or streamed with a Correlation Value), over
//! `aws-lc-rs`'s incremental contexts.

use aws_lc_rs::{constant_time, digest as lc_digest, hmac as lc_hmac};

use crate::SecretBytes;

/// The digest functions a [`Hasher`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DigestAlg {
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
    Sha512_256,
    Sha3_256,
    Sha3_384,
    Sha3_512,
}

impl DigestAlg {
    fn algorithm(self) -> &'static lc_digest::Algorithm {
        match self {
            Self::Sha1 => &lc_digest::SHA1_FOR_LEGACY_USE_ONLY,
            Self::Sha224 => &lc_digest::SHA224,
            Self::Sha256 => &lc_digest::SHA256,
            Self::Sha384 => &lc_digest::SHA384,
            Self::Sha512 => &lc_digest::SHA512,
            Self::Sha512_256 => &lc_digest::SHA512_256,
            Self::Sha3_256 => &lc_digest::SHA3_256,
            Self::Sha3_384 => &lc_digest::SHA3_384,
            Self::Sha3_512 => &lc_digest::SHA3_512,
        }
    }

    #[must_use]
    pub fn output_len(self) -> usize {
        self.algorithm().output_len()
    }
}

/// A digest being computed over data given in parts.
#[derive(Clone)]
pub struct Hasher(lc_digest::Context);

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hasher(..)")
    }
}

impl Hasher {
    #[must_use]
    pub fn new(alg: DigestAlg) -> Self {
        Self(lc_digest::Context::new(alg.algorithm()))
    }

    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The digest of everything given.
    #[must_use]
    pub fn finish(self) -> Vec<u8> {
        self.0.finish().as_ref().to_vec()
    }
}

/// The HMACs a [`Mac`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MacAlg {
    HmacSha1,
    HmacSha224,
    HmacSha256,
    HmacSha384,
    HmacSha512,
}

impl MacAlg {
    fn algorithm(self) -> lc_hmac::Algorithm {
        match self {
            Self::HmacSha1 => lc_hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            Self::HmacSha224 => lc_hmac::HMAC_SHA224,
            Self::HmacSha256 => lc_hmac::HMAC_SHA256,
            Self::HmacSha384 => lc_hmac::HMAC_SHA384,
            Self::HmacSha512 => lc_hmac::HMAC_SHA512,
        }
    }

    #[must_use]
    pub fn output_len(self) -> usize {
        self.algorithm().digest_algorithm().output_len()
    }
}

/// An HMAC being computed over data given in parts; the key's padded
/// states live in AWS-LC's context, which wipes them on drop.
pub struct Mac(lc_hmac::Context);

impl std::fmt::Debug for Mac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mac(..)")
    }
}

impl Mac {
    #[must_use]
    pub fn new(alg: MacAlg, key: &[u8]) -> Self {
        Self(lc_hmac::Context::with_key(&lc_hmac::Key::new(alg.algorithm(), key)))
    }

    /// A MAC under a key whose pads were computed once ([`crate::HmacKey`]).
    pub(crate) fn from_context(context: lc_hmac::Context) -> Self {
        Self(context)
    }

    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The MAC of everything given.
    #[must_use]
    pub fn finish(self) -> SecretBytes {
        SecretBytes::from_slice(self.0.sign().as_ref())
    }

    /// The MAC of everything given, written into the start of `out` (cut
    /// to `out`'s length when shorter); returns the bytes written. For MACs
    /// that are no secret, such as tags stored beside the data: nothing
    /// is allocated.
    pub fn finish_into(self, out: &mut [u8]) -> usize {
        let mac = self.0.sign();
        let n = mac.as_ref().len().min(out.len());
        out[..n].copy_from_slice(&mac.as_ref()[..n]);
        n
    }

    /// Whether `tag` is the MAC of everything given, compared in constant
    /// time so a forger learns nothing from how long the answer takes.
    #[must_use]
    pub fn verify(self, tag: &[u8]) -> bool {
        let mac = self.0.sign();
        constant_time::verify_slices_are_equal(mac.as_ref(), tag).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn digests_match_fips_180_and_202_vectors_in_parts() {
        // FIPS 180-4 and 202 example values for "abc".
        let cases = [
            (DigestAlg::Sha1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (DigestAlg::Sha224, "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"),
            (DigestAlg::Sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                DigestAlg::Sha3_256,
                "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532",
            ),
        ];
        for (alg, want) in cases {
            let mut h = Hasher::new(alg);
            h.update(b"a");
            h.update(b"bc");
            let got = h.finish();
            assert_eq!(got.len(), alg.output_len());
            assert_eq!(hex(&got), want, "{alg:?}");
        }
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2_and_verifies() {
        let mut m = Mac::new(MacAlg::HmacSha256, b"Jefe");
        m.update(b"what do ya want ");
        m.update(b"for nothing?");
        assert_eq!(
            hex(m.finish().expose()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let tag = Mac::new(MacAlg::HmacSha512, b"Jefe").finish();
        let mut good = Mac::new(MacAlg::HmacSha512, b"Jefe");
        good.update(b"");
        assert!(good.verify(tag.expose()));
        assert!(!Mac::new(MacAlg::HmacSha512, b"Jefe").verify(&tag.expose()[..63]));
    }
}
