//! LUKS2 `pbkdf2` digests: how a candidate volume key is recognised, which
//! digest a header checks its volume key against, and how many iterations
//! a new digest gets.

use rampart_crypto::{fill_random, pbkdf2, HashAlg, SecretBytes};

use super::json::{self, b64_decode, b64_encode, DigestJson, IdRef, Pbkdf2Digest};
use super::reencrypt;
use super::segment;
use super::validate::{hash_alg, SALT_LEN};
use super::Luks2;
use crate::pbkdf::{pbkdf2_iterations_for, MIN_PBKDF2_ITERATIONS};
use crate::{Error, Result};

/// Whether `key` matches `digest`.
pub(crate) fn verify(digest: &DigestJson, id: usize, key: &[u8]) -> Result<bool> {
    let DigestJson::Pbkdf2(d) = digest else {
        return Err(Error::UnsupportedCipher(format!(
            "digest {id} is not a pbkdf2 digest Rampart can read (type or fields)"
        )));
    };
    let what = format!("digest {id}");
    let hash = hash_alg(&d.hash, &what)?;
    let salt = b64_decode(&d.salt, &format!("{what} salt"))?;
    if d.iterations == 0 {
        return Err(Error::corrupt(format!("{what}: PBKDF2 iterations is 0")));
    }
    let expected = SecretBytes::new(b64_decode(&d.digest, &format!("{what} value"))?);
    // 20 bytes (LUKS1's SHA-1 digest) or the hash's size. cryptsetup 2.6
    // accepts every passphrase for any other length (its check returns
    // success), so such a header is refused here rather than trusted.
    if expected.len() != 20 && expected.len() != hash.output_len() {
        return Err(Error::corrupt(format!(
            "{what}: a {} digest of {} bytes (20 or {} expected)",
            d.hash,
            expected.len(),
            hash.output_len()
        )));
    }
    let mut computed = SecretBytes::zeroed(expected.len());
    pbkdf2(hash, key, &salt, d.iterations, computed.expose_mut())?;
    Ok(computed == expected)
}

/// A new digest of `key` bound to `keyslots` and `segments`.
pub(crate) fn create(
    key: &[u8],
    hash: HashAlg,
    iterations: u32,
    keyslots: Vec<IdRef>,
    segments: Vec<IdRef>,
) -> Result<DigestJson> {
    let mut salt = [0u8; SALT_LEN];
    fill_random(&mut salt)?;
    let mut value = vec![0u8; hash.output_len()];
    pbkdf2(hash, key, &salt, iterations, &mut value)?;
    Ok(DigestJson::Pbkdf2(Box::new(Pbkdf2Digest {
        kind: "pbkdf2".into(),
        keyslots,
        segments,
        hash: hash.name().into(),
        iterations,
        salt: b64_encode(&salt),
        digest: b64_encode(&value),
        extra: serde_json::Map::new(),
    })))
}

/// Time target of the volume key digest (cryptsetup's `LUKS_MKD_ITERATIONS_MS`).
const DIGEST_ITER_MS: u32 = 125;

/// PBKDF2 iterations of a digest over `len` bytes: the minimum when the
/// user forced the KDF cost (tests, scripts), else timed as cryptsetup does.
pub(super) fn timed_digest_iterations(hash: HashAlg, len: usize, forced: bool) -> Result<u32> {
    if forced {
        Ok(MIN_PBKDF2_ITERATIONS)
    } else {
        pbkdf2_iterations_for(hash, len, DIGEST_ITER_MS)
    }
}

impl Luks2 {
    /// The digest of the volume key: that of the default segment
    /// (cryptsetup's: the `backup-final` segment during a reencryption,
    /// else segment 0). A decryption's final side is plaintext (a `linear`
    /// segment, no digest): then it is the old key's (`backup-previous`),
    /// the only key cryptsetup's activation and `--test-passphrase` open
    /// during a decryption.
    pub(super) fn segment_digest(&self) -> Result<(usize, &DigestJson)> {
        let mut seg_id = segment::default_segment(&self.meta);
        if !matches!(self.meta.segments.get(&seg_id), Some(json::SegmentJson::Crypt(_))) {
            if let Some(previous) = reencrypt::segment_by_flag(&self.meta, "backup-previous") {
                seg_id = previous;
            }
        }
        let (id, digest) = self
            .meta
            .digest_of_segment(seg_id)
            .ok_or_else(|| Error::corrupt(format!("segment {seg_id} has no digest")))?;
        if !self.meta.reachable(json::Section::Digests, id) {
            // cryptsetup finds the digest by iteration, then fails to look
            // it up by id: the volume loads but opens in neither tool.
            return Err(Error::corrupt(format!(
                "digest {id} is not named by its id (\"{id}\"), so it cannot be used"
            )));
        }
        Ok((id, digest))
    }

    pub(crate) fn verify_volume_key(&self, key: &SecretBytes) -> Result<bool> {
        let (id, digest) = self.segment_digest()?;
        verify(digest, id, key.expose())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_then_verify() {
        let key = [3u8; 64];
        let d = create(&key, HashAlg::Sha256, 1000, vec![IdRef(0)], vec![IdRef(0)]).unwrap();
        assert!(verify(&d, 0, &key).unwrap());
        assert!(!verify(&d, 0, &[4u8; 64]).unwrap());
    }
}
