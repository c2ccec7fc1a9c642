#![allow(clippy::unwrap_used)]
//! Rampart's XTS engine on every CPU path (VAES-512, VAES-256, AES-NI)
//! against AWS-LC: AWS-LC's own AES-256-XTS for 64-byte keys, and XTS over
//! AWS-LC's AES-128 for 32-byte keys (itself checked against IEEE 1619,
//! CAVP and pyca/cryptography in kat.rs and differential.rs). Random
//! lengths, tweaks near 0, 2^32 and 2^64, full 128-bit tweaks, unaligned
//! buffers, in place and out of place, many sectors per call and one.

use rampart_crypto::{cpu, fill_random, Xts, XtsPath};

fn random_bytes(len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    fill_random(&mut bytes).unwrap();
    bytes
}

fn random_below(bound: u64) -> u64 {
    let mut word = [0u8; 8];
    fill_random(&mut word).unwrap();
    u64::from_le_bytes(word) % bound
}

fn xts_key(len: usize) -> Vec<u8> {
    loop {
        let key = random_bytes(len);
        if key[..len / 2] != key[len / 2..] {
            return key;
        }
    }
}

fn random_first_sector() -> u64 {
    match random_below(4) {
        0 => random_below(64),
        1 => random_below(1 << 40),
        2 => (1u64 << 32) - random_below(64),
        _ => u64::MAX - random_below(64),
    }
}

/// The engine's paths this CPU runs; AES-NI must be among them on x86-64
/// machines that have it, and the VAES paths wherever the features are.
fn engine_paths() -> Vec<XtsPath> {
    let paths: Vec<XtsPath> = [XtsPath::Vaes512, XtsPath::Vaes256, XtsPath::AesNi]
        .into_iter()
        .filter(|p| p.available())
        .collect();
    let f = cpu::features();
    assert_eq!(paths.contains(&XtsPath::AesNi), f.aes_ni && f.pclmulqdq);
    assert_eq!(
        paths.contains(&XtsPath::Vaes256),
        f.aes_ni && f.pclmulqdq && f.avx2 && f.vaes && f.vpclmulqdq
    );
    assert!(!paths.is_empty() || !f.aes_ni, "AES-NI present but no engine path");
    paths
}

#[test]
fn every_path_can_be_forced_and_reports_itself() {
    for key_len in [32, 64] {
        let key = xts_key(key_len);
        for path in XtsPath::ALL {
            match Xts::with_path(&key, path) {
                Ok(xts) => {
                    assert!(path.available());
                    assert_eq!(xts.path(), path);
                    assert_eq!(xts.try_clone().unwrap().path(), path);
                    let name = xts.implementation();
                    if path == XtsPath::AwsLc {
                        assert!(name.contains("aws-lc"), "{name}");
                    } else {
                        assert!(name.starts_with("rampart xts engine"), "{name}");
                    }
                }
                Err(_) => assert!(!path.available()),
            }
            assert_eq!(XtsPath::from_name(path.name()), Some(path));
        }
        assert!(Xts::with_path(&key, XtsPath::AwsLc).is_ok());
        assert_eq!(Xts::new(&key).unwrap().path(), XtsPath::best());
    }
    engine_paths();
}

#[test]
fn engine_sectors_match_aws_lc_on_every_path() {
    let paths = engine_paths();
    for case in 0..240 {
        let key_len = if case % 2 == 0 { 32 } else { 64 };
        let key = xts_key(key_len);
        let sector = [512usize, 1024, 2048, 4096, 16, 32, 48, 80][random_below(8) as usize];
        let count = 1 + random_below(if case % 5 == 0 { 70 } else { 9 }) as usize;
        let first = random_first_sector();
        let step = [1, sector as u64 / 512 + 1, 8, random_below(1 << 20)][random_below(4) as usize];
        let align = random_below(64) as usize;
        let plain = random_bytes(sector * count);

        let mut reference = Xts::with_path(&key, XtsPath::AwsLc).unwrap();
        let mut expected = plain.clone();
        reference.encrypt_sectors(&mut expected, sector, first, step).unwrap();

        for &path in &paths {
            let mut xts = Xts::with_path(&key, path).unwrap();
            // In place, at an unaligned offset.
            let mut storage = vec![0u8; align + plain.len()];
            let buf = &mut storage[align..];
            buf.copy_from_slice(&plain);
            xts.encrypt_sectors(buf, sector, first, step).unwrap();
            assert_eq!(
                buf,
                &expected[..],
                "{path:?} key {key_len} sector {sector} x{count} first {first} step {step}"
            );
            xts.decrypt_sectors(buf, sector, first, step).unwrap();
            assert_eq!(buf, &plain[..], "{path:?} decrypt");
            // Out of place, source and destination differently aligned.
            let mut out_storage = vec![0u8; 7 + plain.len()];
            let out = &mut out_storage[7..];
            xts.encrypt_sectors_to(&plain, out, sector, first, step).unwrap();
            assert_eq!(out, &expected[..], "{path:?} out of place");
            let mut back = vec![0u8; plain.len()];
            xts.decrypt_sectors_to(out, &mut back, sector, first, step).unwrap();
            assert_eq!(back, plain, "{path:?} out of place decrypt");
            // One call per sector gives the same.
            let mut single = plain.clone();
            for (i, s) in single.chunks_mut(sector).enumerate() {
                xts.encrypt_sectors(s, sector, first.wrapping_add(i as u64 * step), step).unwrap();
            }
            assert_eq!(single, expected, "{path:?} one sector per call");
        }
    }
}

#[test]
fn engine_units_with_stealing_match_aws_lc_on_every_path() {
    let paths = engine_paths();
    for case in 0..400 {
        let key_len = if case % 2 == 0 { 32 } else { 64 };
        let key = xts_key(key_len);
        let len = match case % 4 {
            0 => 16 + random_below(64) as usize,
            1 => 16 + random_below(1100) as usize,
            2 => 4096 + random_below(33) as usize,
            _ => 16 + random_below(70_000) as usize,
        };
        // Full 128-bit tweaks, and plain64 ones near the wrap points.
        let tweak: [u8; 16] = if case % 3 == 0 {
            random_bytes(16).try_into().unwrap()
        } else {
            rampart_crypto::plain64(random_first_sector())
        };
        let plain = random_bytes(len);
        let mut reference = Xts::with_path(&key, XtsPath::AwsLc).unwrap();
        let mut expected = plain.clone();
        reference.encrypt_unit(&tweak, &mut expected).unwrap();
        for &path in &paths {
            let mut xts = Xts::with_path(&key, path).unwrap();
            let align = random_below(64) as usize;
            let mut storage = vec![0u8; align + len];
            let buf = &mut storage[align..];
            buf.copy_from_slice(&plain);
            xts.encrypt_unit(&tweak, buf).unwrap();
            assert_eq!(buf, &expected[..], "{path:?} key {key_len} len {len}");
            xts.decrypt_unit(&tweak, buf).unwrap();
            assert_eq!(buf, &plain[..], "{path:?} decrypt len {len}");
        }
    }
}

#[test]
fn out_of_place_rejects_mismatched_lengths() {
    let key = xts_key(64);
    for path in XtsPath::ALL.into_iter().filter(|p| p.available()) {
        let mut xts = Xts::with_path(&key, path).unwrap();
        let src = vec![0u8; 1024];
        let mut dst = vec![0u8; 512];
        assert!(xts.encrypt_sectors_to(&src, &mut dst, 512, 0, 1).is_err());
        let mut dst = vec![0u8; 1024];
        assert!(xts.encrypt_sectors_to(&src, &mut dst, 48 + 1, 0, 1).is_err());
    }
}
