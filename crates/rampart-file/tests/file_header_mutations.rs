#![allow(clippy::unwrap_used)]
//! Damaged files never panic and never yield plaintext: every byte of the
//! header and stream header flipped, every truncation of them, and header
//! lengths and stanza lengths pointing anywhere, each fails with a typed
//! error saying why.

use rampart_crypto::SecretBytes;
use rampart_file::{Error, Identity, RawKey, Recipient};

fn sample() -> (Vec<u8>, RawKey) {
    let raw = RawKey::new(SecretBytes::from_slice(&[5u8; 32])).unwrap();
    let mut file = Vec::new();
    let plain = vec![0x5au8; 10_000];
    let recipients: [&dyn Recipient; 1] = [&raw];
    rampart_file::encrypt(&mut plain.as_slice(), &mut file, &recipients, 4096, &|_| {}).unwrap();
    (file, raw)
}

fn decrypt(bytes: &[u8], raw: &RawKey) -> Result<Vec<u8>, Error> {
    let identities: [&dyn Identity; 1] = [raw];
    let mut input = bytes;
    let opened = rampart_file::open(&mut input, &identities)?;
    let mut out = Vec::new();
    opened.decrypt(&mut input, &mut out, &|_| {})?;
    Ok(out)
}

#[test]
fn every_header_byte_flipped_is_refused() {
    let (file, raw) = sample();
    assert_eq!(decrypt(&file, &raw).unwrap(), vec![0x5au8; 10_000]);
    let header_len = u32::from_be_bytes(file[31..35].try_into().unwrap()) as usize;
    for at in 0..header_len + 40 {
        for bit in [0x01u8, 0x80] {
            let mut bad = file.clone();
            bad[at] ^= bit;
            let error = decrypt(&bad, &raw).expect_err(&format!("byte {at} bit {bit:#x} accepted"));
            let expected = match at {
                0..=7 => matches!(error, Error::NotRampartFile),
                8 => matches!(error, Error::UnsupportedVersion(_)),
                _ => !matches!(error, Error::Io(_)),
            };
            assert!(expected, "byte {at}: unexpected {error:?}");
        }
    }
}

#[test]
fn every_truncation_and_wild_length_is_refused() {
    let (file, raw) = sample();
    for len in 0..200 {
        assert!(decrypt(&file[..len], &raw).is_err(), "{len} bytes accepted");
    }
    for value in [0u32, 1, 35, 67, 68, 69, 1000, 65536, 65537, u32::MAX] {
        let mut bad = file.clone();
        bad[31..35].copy_from_slice(&value.to_be_bytes());
        assert!(decrypt(&bad, &raw).is_err(), "header length {value}");
    }
    for value in [0u16, 1, 59, 61, 200, u16::MAX] {
        let mut bad = file.clone();
        bad[37..39].copy_from_slice(&value.to_be_bytes());
        assert!(decrypt(&bad, &raw).is_err(), "stanza length {value}");
    }
    for count in [0u8, 2, 255] {
        let mut bad = file.clone();
        bad[35] = count;
        assert!(decrypt(&bad, &raw).is_err(), "stanza count {count}");
    }
}
