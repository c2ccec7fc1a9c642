//! LUKS1 keyslots: key material encrypted with the volume cipher under a
//! PBKDF2-derived key, and the volume key digest.

use rampart_crypto::{fill_random, pbkdf2, HashAlg, SecretBytes};

use super::header::{Header, Slot, DIGEST_SIZE, KEY_ENABLED, SALT_SIZE};
use crate::cipher::{crypt_material, DataCipher};
use crate::io::{read_exact, MetadataIo};
use crate::luks2::json::shorten;
use crate::{af, Error, Result};

/// The header's hash, if Rampart implements it.
pub(crate) fn hash(header: &Header) -> Result<HashAlg> {
    match header.hash_spec.as_str() {
        "sha1" | "sha256" | "sha512" => HashAlg::from_name(&header.hash_spec),
        _ => None,
    }
    .ok_or_else(|| {
        Error::UnsupportedCipher(format!(
            "LUKS1 hash \"{}\" (supported: sha1, sha256, sha512)",
            shorten(&header.hash_spec)
        ))
    })
}

/// The header's cipher, if Rampart implements it with this key size.
pub(crate) fn cipher(header: &Header) -> Result<DataCipher> {
    let cipher = DataCipher::from_name_and_mode(&header.cipher_name, &header.cipher_mode)?;
    cipher.check_key_bytes(header.key_bytes as usize)?;
    Ok(cipher)
}

/// Whether `key` matches the volume key digest.
pub(crate) fn verify_key(header: &Header, key: &[u8]) -> Result<bool> {
    if key.len() != header.key_bytes as usize {
        return Ok(false);
    }
    let mut computed = SecretBytes::zeroed(DIGEST_SIZE);
    pbkdf2(
        hash(header)?,
        key,
        &header.mk_digest_salt,
        header.mk_digest_iter,
        computed.expose_mut(),
    )?;
    Ok(computed == SecretBytes::from_slice(&header.mk_digest))
}

/// A fresh volume key digest (salt, digest) for `key`.
pub(crate) fn new_digest(
    hash: HashAlg,
    key: &[u8],
    iterations: u32,
) -> Result<([u8; SALT_SIZE], [u8; DIGEST_SIZE])> {
    let mut salt = [0u8; SALT_SIZE];
    fill_random(&mut salt)?;
    let mut digest = [0u8; DIGEST_SIZE];
    pbkdf2(hash, key, &salt, iterations, &mut digest)?;
    Ok((salt, digest))
}

/// Recovers the candidate key of keyslot `index` with `passphrase`.
pub(crate) fn open(
    io: &dyn MetadataIo,
    header: &Header,
    index: usize,
    passphrase: &[u8],
) -> Result<SecretBytes> {
    let slot = &header.slots[index];
    let hash = hash(header)?;
    let cipher = cipher(header)?;
    let key_len = header.key_bytes as usize;
    let mut derived = SecretBytes::zeroed(key_len);
    pbkdf2(hash, passphrase, &slot.salt, slot.iterations, derived.expose_mut())?;
    let len = af::split_sectors_bytes(key_len, slot.stripes)?;
    let mut material = SecretBytes::zeroed(len);
    read_exact(
        io,
        u64::from(slot.key_material_offset) * 512,
        material.expose_mut(),
        &format!("LUKS1 keyslot {index} key material"),
    )?;
    crypt_material(cipher, derived.expose(), material.expose_mut(), false)?;
    af::merge(material.expose(), key_len, slot.stripes, hash)
}

/// Stores `key` in keyslot `index` (material written and synced) and
/// returns the updated descriptor; the header itself is not written.
pub(crate) fn store(
    io: &dyn MetadataIo,
    header: &Header,
    index: usize,
    key: &SecretBytes,
    passphrase: &[u8],
    iterations: u32,
) -> Result<Slot> {
    let hash = hash(header)?;
    let cipher = cipher(header)?;
    let mut slot = header.slots[index];
    fill_random(&mut slot.salt)?;
    slot.iterations = iterations;
    let mut derived = SecretBytes::zeroed(header.key_bytes as usize);
    pbkdf2(hash, passphrase, &slot.salt, iterations, derived.expose_mut())?;
    let mut material = af::split(key.expose(), slot.stripes, hash)?;
    crypt_material(cipher, derived.expose(), material.expose_mut(), true)?;
    io.write_at(u64::from(slot.key_material_offset) * 512, material.expose())?;
    io.sync()?;
    slot.active = KEY_ENABLED;
    Ok(slot)
}
