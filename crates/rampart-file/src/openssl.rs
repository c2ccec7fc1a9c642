//! Reading `openssl enc` files, for migration: `Salted__` || 8-byte salt
//! || ciphertext, with the key and IV derived from the passphrase by
//! PBKDF2 (`-pbkdf2`, `-iter N`, `-md`, default SHA-256 and 10000
//! iterations) or by the legacy `EVP_BytesToKey` (one iteration of `-md`:
//! MD5 before OpenSSL 1.1.0, SHA-256 since). AES-128/256 in CBC (PKCS#7
//! padding) or CTR mode. These files carry no authentication: a modified
//! file decrypts to modified plaintext, and only CBC's padding check
//! catches some wrong passphrases.

use std::io::{Read, Write};

use md5::{Digest, Md5};
use rampart_crypto::{digest, pbkdf2, Cbc, CbcIv, Ctr, HashAlg, SecretBytes};

use crate::pipeline::read_full;
use crate::{Error, Progress, Result};

const MAGIC: &[u8; 8] = b"Salted__";
const CHUNK: usize = 1 << 20;

/// The ciphers `openssl enc` writes that Rampart reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cipher {
    Aes128Cbc,
    Aes256Cbc,
    Aes128Ctr,
    Aes256Ctr,
}

impl Cipher {
    /// `aes-256-cbc`, `aes-128-ctr`, ... (openssl's names).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "aes-128-cbc" => Some(Self::Aes128Cbc),
            "aes-256-cbc" | "aes256" => Some(Self::Aes256Cbc),
            "aes-128-ctr" => Some(Self::Aes128Ctr),
            "aes-256-ctr" => Some(Self::Aes256Ctr),
            _ => None,
        }
    }

    /// The cipher `name` names.
    ///
    /// # Errors
    /// A cipher this reader does not know, in one line listing those it does.
    pub fn parse(name: &str) -> std::result::Result<Self, String> {
        Self::from_name(name).ok_or_else(|| {
            format!(
                "unsupported --openssl cipher '{name}' (expected aes-128-cbc, aes-256-cbc, aes-128-ctr or aes-256-ctr)"
            )
        })
    }

    fn key_len(self) -> usize {
        match self {
            Self::Aes128Cbc | Self::Aes128Ctr => 16,
            Self::Aes256Cbc | Self::Aes256Ctr => 32,
        }
    }

    fn is_cbc(self) -> bool {
        matches!(self, Self::Aes128Cbc | Self::Aes256Cbc)
    }
}

/// The digests `-md` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Md {
    Md5,
    Sha1,
    Sha256,
    Sha512,
}

impl Md {
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "md5" => Some(Self::Md5),
            "sha1" => Some(Self::Sha1),
            "sha256" => Some(Self::Sha256),
            "sha512" => Some(Self::Sha512),
            _ => None,
        }
    }

    fn hash(self) -> Option<HashAlg> {
        match self {
            Self::Md5 => None,
            Self::Sha1 => Some(HashAlg::Sha1),
            Self::Sha256 => Some(HashAlg::Sha256),
            Self::Sha512 => Some(HashAlg::Sha512),
        }
    }

    fn digest(self, data: &[u8]) -> SecretBytes {
        match self.hash() {
            Some(hash) => digest(hash, data),
            None => SecretBytes::from_slice(Md5::digest(data).as_slice()),
        }
    }
}

/// How the key and IV come from the passphrase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kdf {
    /// `-pbkdf2 [-iter N] [-md MD]`.
    Pbkdf2 { md: Md, iterations: u32 },
    /// The legacy default: `EVP_BytesToKey(MD, salt, passphrase, 1)`.
    BytesToKey { md: Md },
}

impl Kdf {
    /// The derivation `openssl enc` was given: `-pbkdf2` (implied by
    /// `-iter`; 10000 iterations by default) or else `EVP_BytesToKey`,
    /// each over `-md` (sha256 by default).
    ///
    /// # Errors
    /// An unknown digest, or no iterations.
    pub fn from_options(
        md: Option<&str>,
        pbkdf2: bool,
        iterations: Option<u32>,
    ) -> std::result::Result<Self, String> {
        let md_name = md.unwrap_or("sha256");
        let md = Md::from_name(md_name).ok_or_else(|| {
            format!("unknown --md '{md_name}' (expected md5, sha1, sha256 or sha512)")
        })?;
        if !pbkdf2 && iterations.is_none() {
            return Ok(Self::BytesToKey { md });
        }
        let iterations = iterations.unwrap_or(10_000);
        if iterations == 0 {
            return Err("--iter must be at least 1".into());
        }
        Ok(Self::Pbkdf2 { md, iterations })
    }
}

/// `EVP_BytesToKey` with one iteration: D_i = MD(D_{i-1} || pass || salt).
fn bytes_to_key(md: Md, passphrase: &[u8], salt: &[u8], out: &mut [u8]) {
    let mut previous = SecretBytes::zeroed(0);
    let mut filled = 0;
    while filled < out.len() {
        let mut input = SecretBytes::zeroed(previous.len() + passphrase.len() + salt.len());
        let buf = input.expose_mut();
        buf[..previous.len()].copy_from_slice(previous.expose());
        buf[previous.len()..previous.len() + passphrase.len()].copy_from_slice(passphrase);
        buf[previous.len() + passphrase.len()..].copy_from_slice(salt);
        previous = md.digest(input.expose());
        let take = previous.len().min(out.len() - filled);
        out[filled..filled + take].copy_from_slice(&previous.expose()[..take]);
        filled += take;
    }
}

fn derive(kdf: Kdf, passphrase: &[u8], salt: &[u8], len: usize) -> Result<SecretBytes> {
    let mut out = SecretBytes::zeroed(len);
    match kdf {
        Kdf::Pbkdf2 { md, iterations } => {
            let hash = md.hash().ok_or_else(|| {
                Error::OpensslFormat(
                    "PBKDF2 with MD5 is not supported (use -md sha256, sha1 or sha512)".into(),
                )
            })?;
            pbkdf2(hash, passphrase, salt, iterations, out.expose_mut())?;
        }
        Kdf::BytesToKey { md } => bytes_to_key(md, passphrase, salt, out.expose_mut()),
    }
    Ok(out)
}

/// Adds `blocks` to a 128-bit big-endian counter block.
fn counter_add(iv: &[u8; 16], blocks: u64) -> [u8; 16] {
    let value = u128::from_be_bytes(*iv).wrapping_add(u128::from(blocks));
    value.to_be_bytes()
}

/// Decrypts an `openssl enc` file; returns the plaintext bytes written.
/// In CBC mode the last block is held back until its padding is checked,
/// so a failed padding check writes no unchecked final block.
pub fn decrypt(
    passphrase: &[u8],
    cipher: Cipher,
    kdf: Kdf,
    input: &mut dyn Read,
    output: &mut dyn Write,
    progress: Progress<'_>,
) -> Result<u64> {
    let mut head = [0u8; 16];
    let got = read_full(input, &mut head)?;
    if got < 16 || &head[..8] != MAGIC {
        return Err(Error::OpensslFormat(
            "not an openssl enc file with a salt (no Salted__ header; -nosalt and base64 (-a) files are not read)".into(),
        ));
    }
    let key_len = cipher.key_len();
    let material = derive(kdf, passphrase, &head[8..16], key_len + 16)?;
    let key = &material.expose()[..key_len];
    let mut iv = [0u8; 16];
    iv.copy_from_slice(&material.expose()[key_len..]);
    let mut buf = vec![0u8; CHUNK + 16];
    let mut written = 0u64;
    if cipher.is_cbc() {
        let mut cbc = Cbc::new(key, CbcIv::Plain64)?;
        // `pending` bytes at the start of `buf` are ciphertext held back.
        let mut pending = 0;
        loop {
            let read = read_full(input, &mut buf[pending..])?;
            let total = pending + read;
            let ended = read < buf.len() - pending;
            if ended {
                if total == 0 || total % 16 != 0 {
                    return Err(Error::OpensslBadDecrypt);
                }
                cbc.decrypt_with_iv(&iv, &mut buf[..total])?;
                let pad = usize::from(buf[total - 1]);
                if pad == 0
                    || pad > 16
                    || buf[total - pad..total].iter().any(|b| usize::from(*b) != pad)
                {
                    buf.fill(0);
                    return Err(Error::OpensslBadDecrypt);
                }
                output.write_all(&buf[..total - pad])?;
                written += (total - pad) as u64;
                progress((total - pad) as u64);
                break;
            }
            // Keep the last block back: it may be the padded one.
            let now = total - 16;
            let mut next_iv = [0u8; 16];
            next_iv.copy_from_slice(&buf[now - 16..now]);
            cbc.decrypt_with_iv(&iv, &mut buf[..now])?;
            iv = next_iv;
            output.write_all(&buf[..now])?;
            written += now as u64;
            progress(now as u64);
            buf.copy_within(now..total, 0);
            pending = 16;
        }
    } else {
        let mut ctr = Ctr::new(key)?;
        let mut blocks = 0u64;
        loop {
            let read = read_full(input, &mut buf[..CHUNK])?;
            if read == 0 {
                break;
            }
            ctr.apply(&counter_add(&iv, blocks), &mut buf[..read])?;
            output.write_all(&buf[..read])?;
            written += read as u64;
            progress(read as u64);
            blocks += (read / 16) as u64;
            if read < CHUNK {
                break;
            }
        }
    }
    buf.fill(0);
    output.flush()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn bytes_to_key_matches_openssl() {
        // `openssl enc -aes-256-cbc -md md5 -k pass -S 0102030405060708 -P`
        let mut out = [0u8; 48];
        bytes_to_key(Md::Md5, b"pass", &[1, 2, 3, 4, 5, 6, 7, 8], &mut out);
        assert_eq!(
            hex::encode_upper(out),
            "86A00079BEB5DCA79870668BB0C56A7EB158E10AC9A1EC44CD2FD6CCF7796367\
             717E513CB7804E1856CD14DACE7097CF"
        );
        assert_eq!(counter_add(&[0xff; 16], 1), [0u8; 16]);
    }
}
