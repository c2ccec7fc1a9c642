//! File encryption's readers: Rampart files (a header with recipient
//! stanzas over a Tink streaming AEAD body) and `openssl enc` files.

use std::io::{Seek, SeekFrom, Write};

use rampart_crypto::{pbkdf2, Argon2Params, Argon2Variant, Cbc, CbcIv, Ctr, HashAlg, SecretBytes};
use rampart_file::openssl::{self, Cipher, Kdf, Md};
use rampart_file::recipient::{passphrase_stanza_params, STANZA_RAW_KEY};
use rampart_file::{Identity, Passphrase, RawKey, Recipient, UnwrapFailure};

/// The seeds' passphrase and raw key (`make_file_seeds.sh`).
const PASSPHRASE: &[u8] = b"rampart-fuzz";
const RAW_KEY: [u8; 32] = [0x11; 32];

/// The smallest ciphertext segment with AES-256: the stream header (40
/// bytes), the tag (16) and one byte (`StreamParams::validate`).
const MIN_SEGMENT: u32 = 57;

/// A Rampart file. The first byte picks how the rest is used:
///
/// - even: the rest is a file, opened with the seeds' raw key and
///   passphrase (the latter only when its stanza's Argon2 cost is tiny)
///   and decrypted to the end;
/// - odd: the rest describes a file that the target encrypts with
///   `rampart_file::encrypt` (a segment size, decoy stanzas, a
///   plaintext), then opens and decrypts whole and by a range, which
///   must give the plaintext back; then changes it once (a flipped bit,
///   a truncation or an extension, at a place the input picks), after
///   which opening or decrypting it must fail.
pub fn file_format(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 0 {
        open_as_given(rest);
    } else {
        round_trip(rest);
    }
}

fn open_as_given(file: &[u8]) {
    let raw = RawKey::new(SecretBytes::from_slice(&RAW_KEY)).expect("a 32-byte raw key");
    let passphrase = CheapPassphrase(Passphrase::new(
        SecretBytes::from_slice(PASSPHRASE),
        Argon2Params { variant: Argon2Variant::Argon2id, time: 1, memory_kib: 8, parallelism: 1 },
    ));
    let identities: [&dyn Identity; 2] = [&raw, &passphrase];
    let mut input = file;
    let Ok(opened) = rampart_file::open(&mut input, &identities) else { return };
    let _ = opened.plaintext_len(file.len() as u64);
    let mut plaintext = Vec::new();
    if opened.decrypt(&mut input, &mut plaintext, &|_| {}).is_ok() {
        assert!(plaintext.len() <= file.len(), "more plaintext than ciphertext");
    }
}

/// A passphrase identity that refuses stanzas asking for more than a
/// token Argon2 cost, so that an input cannot make one run take seconds.
struct CheapPassphrase(Passphrase);

impl Identity for CheapPassphrase {
    fn kind(&self) -> u8 {
        Identity::kind(&self.0)
    }

    fn describe(&self) -> String {
        Identity::describe(&self.0)
    }

    fn unwrap(&self, body: &[u8], context: &[u8]) -> Result<SecretBytes, UnwrapFailure> {
        match passphrase_stanza_params(body) {
            Ok(p) if p.time <= 4 && p.memory_kib <= 64 && p.parallelism <= 2 => {
                self.0.unwrap(body, context)
            }
            _ => Err(UnwrapFailure::refused("too costly for fuzzing")),
        }
    }
}

/// A recipient whose stanza is the file key itself (so that the target
/// can open what it encrypted without a KDF), or a decoy whose stanza is
/// any bytes under any type.
struct Plain {
    kind: u8,
    decoy: Option<Vec<u8>>,
}

impl Recipient for Plain {
    fn kind(&self) -> u8 {
        self.kind
    }

    fn describe(&self) -> String {
        "plain".into()
    }

    fn wrap(&self, file_key: &SecretBytes, _context: &[u8]) -> rampart_file::Result<Vec<u8>> {
        Ok(self.decoy.clone().unwrap_or_else(|| file_key.expose().to_vec()))
    }
}

/// Opens a [`Plain`] stanza: any 32-byte body is taken as the file key.
struct PlainIdentity;

/// The stanza type of [`Plain`] recipients: one no real identity reads.
const PLAIN_KIND: u8 = 0xf0;

impl Identity for PlainIdentity {
    fn kind(&self) -> u8 {
        PLAIN_KIND
    }

    fn describe(&self) -> String {
        "plain".into()
    }

    fn unwrap(&self, body: &[u8], _context: &[u8]) -> Result<SecretBytes, UnwrapFailure> {
        if body.len() == 32 {
            Ok(SecretBytes::from_slice(body))
        } else {
            Err(UnwrapFailure::refused("not a plain stanza"))
        }
    }
}

/// Bytes taken from the front of the input.
struct Take<'a>(&'a [u8]);

impl<'a> Take<'a> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }
}

fn round_trip(input: &[u8]) {
    let mut take = Take(input);
    // Small segments, so that short inputs span several: from the
    // smallest the format allows up to 1 KiB more.
    let segment_size = MIN_SEGMENT + u32::from(take.u16() % 1024);
    let decoys: Vec<Plain> = (0..take.byte() % 3)
        .map(|_| {
            let kind = take.byte();
            let len = usize::from(take.byte() % 64);
            let kind = if kind == PLAIN_KIND { STANZA_RAW_KEY } else { kind };
            Plain { kind, decoy: Some(take.bytes(len).to_vec()) }
        })
        .collect();
    let key_first = take.byte() & 1 == 0;
    let change = (take.byte(), take.u16(), take.byte());
    let range = (take.u16(), take.u16());
    let plaintext = take.0;

    let real = Plain { kind: PLAIN_KIND, decoy: None };
    let mut recipients: Vec<&dyn Recipient> = decoys.iter().map(|d| d as &dyn Recipient).collect();
    if key_first {
        recipients.insert(0, &real);
    } else {
        recipients.push(&real);
    }
    let mut file = Vec::new();
    let mut source = plaintext;
    let summary = rampart_file::encrypt(&mut source, &mut file, &recipients, segment_size, &|_| {})
        .expect("encrypting into memory");
    assert_eq!(summary.ciphertext_bytes, file.len() as u64, "the summary's ciphertext length");

    let identities: [&dyn Identity; 1] = [&PlainIdentity];
    let mut reader = &file[..];
    let opened =
        rampart_file::open(&mut reader, &identities).expect("opening what was just written");
    let mut back = Vec::new();
    opened.decrypt(&mut reader, &mut back, &|_| {}).expect("decrypting what was just written");
    assert!(back == plaintext, "a file decrypts to other bytes than were encrypted");
    assert_eq!(opened.plaintext_len(file.len() as u64).ok(), Some(plaintext.len() as u64));

    let mut disk = scratch_file(&file);
    let (offset, length) = (u64::from(range.0), u64::from(range.1));
    let mut part = Vec::new();
    match opened.decrypt_range(&mut disk, offset, length, &mut part, &|_| {}) {
        Ok(_) => {
            let start = (offset as usize).min(plaintext.len());
            let end = (start + length as usize).min(plaintext.len());
            assert!(part == plaintext[start..end], "a range decrypts to other bytes");
        }
        Err(e) => assert!(offset > plaintext.len() as u64, "a range inside the file failed: {e}"),
    }

    let (what, at, value) = change;
    let mut changed = file.clone();
    let at = usize::from(at) % file.len();
    match what % 3 {
        0 => changed[at] ^= 1 << (value % 8),
        1 => changed.truncate(at),
        _ => changed.extend(std::iter::repeat_n(value, usize::from(what / 3 % 32) + 1)),
    }
    let mut reader = &changed[..];
    let verdict = rampart_file::open(&mut reader, &identities)
        .and_then(|opened| opened.decrypt(&mut reader, &mut std::io::sink(), &|_| {}));
    assert!(verdict.is_err(), "a changed file (change {what} at {at}) still decrypted");
}

/// The bytes in an unnamed scratch file (`decrypt_range` reads a `File`).
fn scratch_file(bytes: &[u8]) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("rampart-fuzz-file-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("a scratch file in the temporary directory");
    // Unlinked at once: the open file is all the target needs, and no
    // fuzzing run leaves one behind.
    let _ = std::fs::remove_file(&path);
    file.write_all(bytes).expect("writing the scratch file");
    file.seek(SeekFrom::Start(0)).expect("seeking the scratch file");
    file
}

/// An `openssl enc` file. The first byte picks the cipher (AES-128/256,
/// CBC/CTR) and the key derivation (PBKDF2-SHA256 with one iteration, or
/// `EVP_BytesToKey` with MD5 or SHA-256), the rest is the file, decrypted
/// with the seeds' passphrase (`make_file_seeds.sh`): it must fail or give
/// back no more than the ciphertext (CTR: exactly as much). Then, with
/// PBKDF2, the rest is taken as a plaintext, encrypted here the way
/// `openssl enc` does (salt from the input, PKCS#7 padding in CBC) and
/// decrypted back, which must give the plaintext.
pub fn openssl_enc(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let cipher = [Cipher::Aes128Cbc, Cipher::Aes256Cbc, Cipher::Aes128Ctr, Cipher::Aes256Ctr]
        [usize::from(selector & 3)];
    let cbc = matches!(cipher, Cipher::Aes128Cbc | Cipher::Aes256Cbc);
    let kdf = match (selector >> 2) % 3 {
        0 => Kdf::Pbkdf2 { md: Md::Sha256, iterations: 1 },
        1 => Kdf::BytesToKey { md: Md::Md5 },
        _ => Kdf::BytesToKey { md: Md::Sha256 },
    };
    let mut input = rest;
    let mut out = Vec::new();
    if let Ok(written) = openssl::decrypt(PASSPHRASE, cipher, kdf, &mut input, &mut out, &|_| {}) {
        assert_eq!(written, out.len() as u64, "the count of plaintext bytes written");
        let body = rest.len().saturating_sub(16);
        if cbc {
            assert!(out.len() < body && body - out.len() <= 16, "CBC plaintext length");
        } else {
            assert_eq!(out.len(), body, "CTR plaintext length");
        }
    }

    let Kdf::Pbkdf2 { .. } = kdf else { return };
    let Some((salt, plaintext)) = rest.split_first_chunk::<8>() else { return };
    let key_len = if matches!(cipher, Cipher::Aes128Cbc | Cipher::Aes128Ctr) { 16 } else { 32 };
    let mut material = SecretBytes::zeroed(key_len + 16);
    pbkdf2(HashAlg::Sha256, PASSPHRASE, salt, 1, material.expose_mut()).expect("PBKDF2");
    let (key, iv) = material.expose().split_at(key_len);
    let iv: [u8; 16] = iv.try_into().expect("16 bytes of IV");
    let mut body = plaintext.to_vec();
    if cbc {
        let pad = 16 - body.len() % 16;
        body.extend(std::iter::repeat_n(pad as u8, pad));
        Cbc::new(key, CbcIv::Plain64)
            .and_then(|mut c| c.encrypt_with_iv(&iv, &mut body))
            .expect("CBC");
    } else {
        Ctr::new(key).and_then(|mut c| c.apply(&iv, &mut body)).expect("CTR");
    }
    let mut file = b"Salted__".to_vec();
    file.extend_from_slice(salt);
    file.extend_from_slice(&body);
    let mut back = Vec::new();
    openssl::decrypt(PASSPHRASE, cipher, kdf, &mut &file[..], &mut back, &|_| {})
        .expect("decrypting what was encrypted as openssl enc does");
    assert!(back == plaintext, "an openssl enc file decrypts to other bytes");
}
