#![allow(clippy::unwrap_used)]
//! Differential test: Rampart's XTS, CBC (plain64 and ESSIV) and GCM against
//! pyca/cryptography on random keys, tweaks, sector sizes and lengths; and
//! multi-sector calls against one-sector-at-a-time calls.
//!
//! The XTS engine's CPU paths (VAES-512, VAES-256, AES-NI), each forced in
//! turn, also against AWS-LC: its own AES-256-XTS for 64-byte keys, XTS over
//! its AES-128 for 32-byte keys; random lengths, tweaks near 0, 2^32 and
//! 2^64, full 128-bit tweaks, unaligned buffers, in place and out of place,
//! many sectors per call and one, and one-sector calls in and out of order.
//!
//! Block checksums (`digest_blocks`, SHA-256 on the SHA extensions several
//! blocks at a time) against AWS-LC's one digest per block, for every
//! length that crosses a padding boundary and random block counts.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use rampart_crypto::{cpu, fill_random, Cbc, CbcIv, Gcm, Xts, XtsPath};
use serde_json::json;

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

/// An XTS key whose halves differ (equal halves are rejected by design).
fn xts_key(len: usize) -> Vec<u8> {
    loop {
        let key = random_bytes(len);
        if key[..len / 2] != key[len / 2..] {
            return key;
        }
    }
}

/// Tweaks near 0, near 2^32 and near 2^64 exercise carries and wrapping.
fn random_first_sector() -> u64 {
    match random_below(3) {
        0 => random_below(1 << 20),
        1 => (1u64 << 32) - random_below(64),
        _ => u64::MAX - random_below(64),
    }
}

struct Reference {
    child: std::process::Child,
    reader: BufReader<std::process::ChildStdout>,
}

impl Reference {
    fn start() -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 must be installed (scripts/test installs it with pyca/cryptography)");
        let reader = BufReader::new(child.stdout.take().unwrap());
        Self { child, reader }
    }

    fn ask(&mut self, request: &serde_json::Value) -> Vec<u8> {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "reference.py exited; is pyca/cryptography installed?");
        let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
        hex::decode(answer["out"].as_str().unwrap()).unwrap()
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

const SECTOR_SIZES: [usize; 5] = [16, 512, 1024, 2048, 4096];

#[test]
fn xts_matches_pyca_cryptography() {
    let mut reference = Reference::start();
    for case in 0..160 {
        let key_len = if case % 2 == 0 { 32 } else { 64 };
        let key = xts_key(key_len);
        let sector_size = SECTOR_SIZES[random_below(5) as usize];
        let sectors = 1 + random_below(9) as usize;
        let step = [1, 8, sector_size as u64 / 512 + 1][random_below(3) as usize];
        let first = random_first_sector();
        let plain = random_bytes(sector_size * sectors);

        // Every path this CPU runs, in turn.
        let paths: Vec<XtsPath> = XtsPath::ALL.into_iter().filter(|p| p.available()).collect();
        let path = paths[case % paths.len()];
        let mut xts = Xts::with_path(&key, path).unwrap();
        let mut ours = plain.clone();
        xts.encrypt_sectors(&mut ours, sector_size, first, step).unwrap();
        let request = json!({
            "op": "xts", "key": hex::encode(&key), "sector_size": sector_size,
            "first": first, "step": step, "encrypt": true, "data": hex::encode(&plain),
        });
        assert_eq!(
            hex::encode(&ours),
            hex::encode(reference.ask(&request)),
            "XTS encrypt differs: key {} bits, sector {sector_size}, first {first}, step {step}, {path:?}",
            key_len * 8
        );
        let mut back = ours.clone();
        xts.decrypt_sectors(&mut back, sector_size, first, step).unwrap();
        assert_eq!(back, plain);
        let request = json!({
            "op": "xts", "key": hex::encode(&key), "sector_size": sector_size,
            "first": first, "step": step, "encrypt": false, "data": hex::encode(&ours),
        });
        assert_eq!(reference.ask(&request), plain, "XTS decrypt differs");
    }
}

#[test]
fn xts_units_with_ciphertext_stealing_match_pyca_cryptography() {
    let mut reference = Reference::start();
    for case in 0..120 {
        let key_len = if case % 2 == 0 { 32 } else { 64 };
        let key = xts_key(key_len);
        let len = 16 + random_below(600) as usize;
        let first = random_first_sector();
        let plain = random_bytes(len);
        let paths: Vec<XtsPath> = XtsPath::ALL.into_iter().filter(|p| p.available()).collect();
        let mut xts = Xts::with_path(&key, paths[case % paths.len()]).unwrap();
        let mut ours = plain.clone();
        xts.encrypt_unit(&rampart_crypto::plain64(first), &mut ours).unwrap();
        let request = json!({
            "op": "xts", "key": hex::encode(&key), "sector_size": len,
            "first": first, "step": 1, "encrypt": true, "data": hex::encode(&plain),
        });
        assert_eq!(hex::encode(&ours), hex::encode(reference.ask(&request)), "len {len}");
        xts.decrypt_unit(&rampart_crypto::plain64(first), &mut ours).unwrap();
        assert_eq!(ours, plain, "len {len}");
    }
}

#[test]
fn cbc_plain64_and_essiv_match_pyca_cryptography() {
    let mut reference = Reference::start();
    for case in 0..120 {
        let key = random_bytes(if case % 2 == 0 { 16 } else { 32 });
        let (mode, name) =
            if case % 4 < 2 { (CbcIv::Plain64, "plain64") } else { (CbcIv::EssivSha256, "essiv") };
        let sector_size = SECTOR_SIZES[random_below(5) as usize];
        let sectors = 1 + random_below(6) as usize;
        let first = random_first_sector();
        let plain = random_bytes(sector_size * sectors);
        let mut cbc = Cbc::new(&key, mode).unwrap();
        let mut ours = plain.clone();
        cbc.encrypt_sectors(&mut ours, sector_size, first, 1).unwrap();
        let request = json!({
            "op": "cbc", "key": hex::encode(&key), "iv_mode": name, "sector_size": sector_size,
            "first": first, "step": 1, "encrypt": true, "data": hex::encode(&plain),
        });
        assert_eq!(hex::encode(&ours), hex::encode(reference.ask(&request)), "CBC {name}");
        cbc.decrypt_sectors(&mut ours, sector_size, first, 1).unwrap();
        assert_eq!(ours, plain);
    }
}

#[test]
fn gcm_matches_pyca_cryptography() {
    let mut reference = Reference::start();
    for case in 0..120 {
        let key = random_bytes(if case % 2 == 0 { 16 } else { 32 });
        let nonce: [u8; 12] = random_bytes(12).try_into().unwrap();
        let aad = random_bytes(random_below(64) as usize);
        let plain = random_bytes(random_below(5000) as usize);
        let gcm = Gcm::new(&key).unwrap();
        let mut ours = plain.clone();
        let tag = gcm.seal(&nonce, &aad, &mut ours).unwrap();
        let request = json!({
            "op": "gcm", "key": hex::encode(&key), "nonce": hex::encode(nonce),
            "aad": hex::encode(&aad), "data": hex::encode(&plain),
        });
        let theirs = reference.ask(&request);
        assert_eq!(hex::encode(&theirs[..ours.len()]), hex::encode(&ours));
        assert_eq!(&theirs[ours.len()..], &tag);
        gcm.open(&nonce, &aad, &mut ours, &tag).unwrap();
        assert_eq!(ours, plain);
    }
}

#[test]
fn multi_sector_calls_equal_single_sector_calls() {
    for case in 0..64 {
        let sector_size = SECTOR_SIZES[1 + random_below(4) as usize];
        let sectors = 1 + random_below(40) as usize;
        let first = random_first_sector();
        let step = if case % 2 == 0 { 1 } else { sector_size as u64 / 512 };
        let plain = random_bytes(sector_size * sectors);

        let mut xts = Xts::new(&xts_key(if case % 2 == 0 { 32 } else { 64 })).unwrap();
        let mut cbc = Cbc::new(&random_bytes(32), CbcIv::EssivSha256).unwrap();
        let mut whole_xts = plain.clone();
        let mut whole_cbc = plain.clone();
        xts.encrypt_sectors(&mut whole_xts, sector_size, first, step).unwrap();
        cbc.encrypt_sectors(&mut whole_cbc, sector_size, first, step).unwrap();

        let mut one_xts = plain.clone();
        let mut one_cbc = plain.clone();
        for (i, (a, b)) in
            one_xts.chunks_mut(sector_size).zip(one_cbc.chunks_mut(sector_size)).enumerate()
        {
            let sector = first.wrapping_add(i as u64 * step);
            xts.encrypt_sectors(a, sector_size, sector, step).unwrap();
            cbc.encrypt_sectors(b, sector_size, sector, step).unwrap();
        }
        assert_eq!(whole_xts, one_xts);
        assert_eq!(whole_cbc, one_cbc);

        // A clone on another thread computes the same thing.
        let mut clone = xts.try_clone().unwrap();
        let mut threaded = plain.clone();
        std::thread::scope(|s| {
            s.spawn(|| clone.encrypt_sectors(&mut threaded, sector_size, first, step).unwrap());
        });
        assert_eq!(whole_xts, threaded);
    }
}

/// The engine's paths this CPU runs; AES-NI must be among them on x86-64
/// machines that have it, and the VAES paths wherever the features are.
fn engine_paths() -> Vec<XtsPath> {
    let paths: Vec<XtsPath> =
        XtsPath::ALL.into_iter().filter(|&p| p != XtsPath::AwsLc && p.available()).collect();
    let f = cpu::features();
    assert_eq!(paths.contains(&XtsPath::AesNi), f.aes_ni && f.pclmulqdq);
    assert_eq!(
        paths.contains(&XtsPath::Vaes256),
        f.aes_ni && f.pclmulqdq && f.avx2 && f.vaes && f.vpclmulqdq
    );
    assert!(!paths.is_empty() || !f.aes_ni, "AES-NI present but no engine path");
    assert_eq!(paths.contains(&XtsPath::Vaes512), paths.contains(&XtsPath::Vaes512ByteShift));
    if paths.contains(&XtsPath::Vaes512) {
        // With AVX-512 the default advances tweaks by byte shifts.
        assert_eq!(XtsPath::best(), XtsPath::Vaes512ByteShift);
    }
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
    for case in 0..320 {
        let key_len = if case % 2 == 0 { 32 } else { 64 };
        let key = xts_key(key_len);
        // Besides the usual sizes: sizes that leave vectors and single
        // blocks after the engine's groups of eight vectors (528, 560,
        // 1040, 4112), and one group exactly or more (2048, 8192).
        let sizes = [512usize, 1024, 2048, 4096, 16, 32, 48, 80, 528, 560, 1040, 4112, 8192];
        let sector = sizes[random_below(sizes.len() as u64) as usize];
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

/// One-sector calls reuse the encrypted tweak the call before left for the
/// sector after it: runs in order (every call finds it), repeats, runs
/// backwards, jumps, steps that change between calls, numbers that wrap
/// past 2^64, multi-sector calls in between, decryption after encryption
/// and a clone taken mid-run must all give AWS-LC's result for each call.
#[test]
fn one_sector_calls_in_any_order_match_aws_lc_on_every_path() {
    for key_len in [32, 64] {
        let key = xts_key(key_len);
        let mut reference = Xts::with_path(&key, XtsPath::AwsLc).unwrap();
        for path in engine_paths() {
            let mut xts = Xts::with_path(&key, path).unwrap();
            let sector = [512usize, 4096][random_below(2) as usize];
            let mut calls: Vec<(u64, u64)> = Vec::new();
            let start = random_first_sector();
            calls.extend((0..6).map(|i| (start.wrapping_add(i * 8), 8)));
            calls.extend([(start, 8), (start, 8), (start, 1), (start.wrapping_add(1), 1)]);
            calls.extend((0..4).map(|i| (start.wrapping_sub(i), 1)));
            calls.extend((0..4).map(|i| ((u64::MAX - 1).wrapping_add(i), 1)));
            calls.extend((0..8).map(|_| (random_below(1 << 40), 1 + random_below(16))));
            let mut clone = None;
            for (n, &(number, step)) in calls.iter().enumerate() {
                let plain = random_bytes(sector);
                let mut expected = plain.clone();
                reference.encrypt_sectors(&mut expected, sector, number, step).unwrap();
                let mut ours = plain.clone();
                xts.encrypt_sectors(&mut ours, sector, number, step).unwrap();
                let what = format!("{path:?} key {key_len} call {n}: sector {number} step {step}");
                assert_eq!(ours, expected, "{what}");
                xts.decrypt_sectors(&mut ours, sector, number, step).unwrap();
                assert_eq!(ours, plain, "{what}, decrypted");
                let mut apart = vec![0u8; sector];
                xts.encrypt_sectors_to(&plain, &mut apart, sector, number, step).unwrap();
                assert_eq!(apart, expected, "{what}, out of place");
                if n % 7 == 3 {
                    let mut two = random_bytes(2 * sector);
                    let mut expected_two = two.clone();
                    reference.encrypt_sectors(&mut expected_two, sector, number, step).unwrap();
                    xts.encrypt_sectors(&mut two, sector, number, step).unwrap();
                    assert_eq!(two, expected_two, "{what}, two sectors");
                }
                if n == 5 {
                    clone = Some(xts.try_clone().unwrap());
                }
            }
            // The clone, taken in the middle of an ordered run, continues it.
            let mut clone = clone.unwrap();
            let (number, step) = (start.wrapping_add(6 * 8), 8);
            let plain = random_bytes(sector);
            let mut expected = plain.clone();
            reference.encrypt_sectors(&mut expected, sector, number, step).unwrap();
            let mut ours = plain;
            clone.encrypt_sectors(&mut ours, sector, number, step).unwrap();
            assert_eq!(ours, expected, "{path:?} clone");
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

#[test]
fn block_checksums_match_one_digest_per_block() {
    use rampart_crypto::{digest_blocks, digest_into, HashAlg};
    let mut cases: Vec<(usize, usize)> = Vec::new();
    // Every block length around the one- and two-block paddings.
    for block in 1..=200 {
        cases.push((block, 1 + random_below(7) as usize));
    }
    for block in [512, 4096, 4096 + 55, 65536] {
        cases.push((block, 1 + random_below(9) as usize));
    }
    for (block, count) in cases {
        // A shorter last block as often as not.
        let len = block * count - random_below(block as u64) as usize;
        let data = random_bytes(len);
        for hash in [HashAlg::Sha256, HashAlg::Sha1, HashAlg::Sha512] {
            let hlen = hash.output_len();
            let mut sums = vec![0u8; len.div_ceil(block) * hlen];
            digest_blocks(hash, &data, block, &mut sums).unwrap();
            for (i, (piece, sum)) in data.chunks(block).zip(sums.chunks(hlen)).enumerate() {
                let mut expected = vec![0u8; hlen];
                digest_into(hash, piece, &mut expected).unwrap();
                assert_eq!(
                    sum,
                    &expected[..],
                    "{hash:?}: block {i} of {block} bytes, {len} in all"
                );
            }
        }
    }
    // Wrong sizes are errors, not panics.
    let mut short = [0u8; 31];
    assert!(digest_blocks(HashAlg::Sha256, &[1; 64], 64, &mut short).is_err());
    assert!(digest_blocks(HashAlg::Sha256, &[1; 64], 0, &mut [0u8; 64]).is_err());
}
