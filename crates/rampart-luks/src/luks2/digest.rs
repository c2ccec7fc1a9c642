//! LUKS2 `pbkdf2` digests: how a candidate volume key is recognised.

use rampart_crypto::{fill_random, pbkdf2, HashAlg, SecretBytes};

use super::json::{b64_decode, b64_encode, DigestJson, IdRef, Pbkdf2Digest};
use super::validate::{hash_alg, SALT_LEN};
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
