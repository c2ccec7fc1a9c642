#![allow(clippy::unwrap_used)]
//! Volumes made by `cryptsetup luksFormat` in every
//! supported combination open in Rampart. For each: `rampart test-key`
//! accepts the passphrase (and refuses a wrong one), Rampart's volume key
//! and data offset equal cryptsetup's, `rampart import` then `rampart
//! export` round-trips random data, and the ciphertext on disk decrypts
//! independently (pyca/cryptography, with the key cryptsetup dumps) to that
//! data; data encrypted by pyca/cryptography reads back through Rampart.

use crate::helpers::luks_support as support;

use support::*;

struct Case {
    name: &'static str,
    luks_type: &'static str,
    cipher: &'static str,
    key_bits: u32,
    sector_size: Option<u32>,
    kdf: &'static [&'static str],
    extra: &'static [&'static str],
    detached_header: bool,
}

/// Plaintext bytes written and checked per volume: whole 4096-byte sectors,
/// more than one 8 MiB-free chunk boundary is not needed here.
const LEN: usize = 256 * 1024 + 3 * 4096;

fn seed(name: &str) -> u64 {
    name.bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

fn check(case: &Case) {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new(case.name);
    // The trailing newline is part of the passphrase: key files are exact bytes.
    let key = dir.file("key", format!("passphrase of {}\n", case.name).as_bytes());
    let wrong = dir.file("wrong", format!("passphrase of {}", case.name).as_bytes());
    let volume = dir.sparse("volume.img", 20 << 20);
    let header = if case.detached_header { dir.join("header.img") } else { volume.clone() };

    let key_size = case.key_bits.to_string();
    let sector = case.sector_size.map(|s| s.to_string());
    let mut args = vec![
        "luksFormat",
        "--batch-mode",
        "--type",
        case.luks_type,
        "--cipher",
        case.cipher,
        "--key-size",
        &key_size,
        "--key-file",
        p(&key),
    ];
    if let Some(sector) = &sector {
        args.extend(["--sector-size", sector]);
    }
    args.extend(case.kdf);
    args.extend(case.extra);
    if case.detached_header {
        args.extend(["--header", p(&header)]);
    }
    args.push(p(&volume));
    ok("cryptsetup luksFormat", cryptsetup(&args));

    let mut vol_args = vec![p(&volume)];
    if case.detached_header {
        vol_args.extend(["--header", p(&header)]);
    }
    let with = |verb: &[&str], rest: &[&str]| -> Vec<String> {
        verb.iter().chain(&vol_args).chain(rest).map(|s| (*s).to_owned()).collect()
    };
    let call = |args: Vec<String>| rampart(&args.iter().map(String::as_str).collect::<Vec<_>>());

    // The passphrase opens; a wrong one (the same without the newline) does not.
    let out = ok("rampart test-key", call(with(&["test-key"], &["--key-file", p(&key)])));
    assert!(out.stderr.is_empty(), "warnings from test-key: {}", text(&out.stderr));
    fails_no_key(
        "test-key with a wrong passphrase",
        &call(with(&["test-key"], &["-d", p(&wrong)])),
    );

    // Rampart sees the same header as cryptsetup.
    let cs_key = cryptsetup_volume_key(&header, &key);
    assert_eq!(cs_key.len() * 8, case.key_bits as usize);
    let dump = rampart_json(&volume, case.detached_header.then_some(header.as_path()), Some(&key));
    assert_eq!(dump["volume_key"].as_str().unwrap(), hex(&cs_key), "volume key differs");
    assert_eq!(dump["cipher"].as_str().unwrap(), case.cipher);
    assert_eq!(dump["key_bits"].as_u64().unwrap(), u64::from(case.key_bits));
    let cs_dump = cryptsetup_dump(&header);
    let seg = segment_info(&dump, &header);
    assert_eq!(seg.data_offset, cryptsetup_data_offset(&cs_dump), "data offset differs");
    if case.detached_header {
        assert_eq!(seg.data_offset, 0, "a detached header's data starts at 0");
    }
    if let Some(sector) = case.sector_size {
        assert_eq!(seg.sector_size, u64::from(sector));
    }
    if case.luks_type == "luks1" {
        assert_eq!(seg.sector_size, 512);
    }

    // Import, export: the same bytes; the whole volume is the data area.
    let plain = random_bytes(seed(case.name), LEN);
    let input = dir.file("plain.bin", &plain);
    ok("rampart import", call(with(&["import"], &[p(&input), "--key-file", p(&key)])));
    let exported = dir.join("exported.bin");
    ok("rampart export", call(with(&["export"], &[p(&exported), "--key-file", p(&key)])));
    let exported = std::fs::read(&exported).unwrap();
    assert_eq!(exported.len() as u64, (20 << 20) - seg.data_offset, "exported volume size");
    assert_same("export after import", &exported[..LEN], &plain);

    // The ciphertext decrypts independently with cryptsetup's key.
    let decrypted = python_decrypt(&dir, &volume, &seg, &cs_key, LEN);
    assert_same("pyca/cryptography decryption of Rampart's ciphertext", &decrypted, &plain);

    // And the other way: pyca/cryptography encrypts, Rampart decrypts.
    let plain2 = random_bytes(seed(case.name) ^ 1, LEN);
    python_encrypt(&dir, &volume, &seg, &cs_key, &plain2);
    let exported2 = dir.join("exported2.bin");
    let len = LEN.to_string();
    ok(
        "rampart export",
        call(with(&["export"], &[p(&exported2), "--length", &len, "--key-file", p(&key)])),
    );
    assert_same(
        "Rampart's decryption of pyca/cryptography's ciphertext",
        &std::fs::read(&exported2).unwrap(),
        &plain2,
    );

    // cryptsetup still accepts the volume after Rampart wrote to it.
    assert!(cryptsetup_opens(&volume, case.detached_header.then_some(header.as_path()), &key));
}

#[test]
fn cryptsetup_luks2_pbkdf2_sha1_xts512_sector512() {
    check(&Case {
        name: "luks2-pbkdf2-xts512-s512",
        luks_type: "luks2",
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: Some(512),
        kdf: PBKDF2,
        extra: &["--hash", "sha1"],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks2_argon2i_xts256_sector4096() {
    check(&Case {
        name: "luks2-argon2i-xts256-s4096",
        luks_type: "luks2",
        cipher: "aes-xts-plain64",
        key_bits: 256,
        sector_size: Some(4096),
        kdf: ARGON2I,
        extra: &[],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks2_argon2id_xts512_sector4096() {
    check(&Case {
        name: "luks2-argon2id-xts512-s4096",
        luks_type: "luks2",
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: Some(4096),
        kdf: ARGON2ID,
        extra: &[],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks2_argon2id_xts256_sector512_default_sector() {
    // No --sector-size: whatever cryptsetup picks for a file.
    check(&Case {
        name: "luks2-argon2id-xts256-default-sector",
        luks_type: "luks2",
        cipher: "aes-xts-plain64",
        key_bits: 256,
        sector_size: None,
        kdf: ARGON2ID,
        extra: &[],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks2_metadata_64k_keyslots_2m() {
    check(&Case {
        name: "luks2-md64k-ks2m",
        luks_type: "luks2",
        cipher: "aes-xts-plain64",
        key_bits: 256,
        sector_size: Some(512),
        kdf: PBKDF2,
        extra: &["--luks2-metadata-size", "64k", "--luks2-keyslots-size", "2m"],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks2_metadata_1m_keyslots_4m() {
    check(&Case {
        name: "luks2-md1m-ks4m",
        luks_type: "luks2",
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: Some(4096),
        kdf: ARGON2ID,
        extra: &["--luks2-metadata-size", "1m", "--luks2-keyslots-size", "4m"],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks2_detached_header() {
    check(&Case {
        name: "luks2-detached",
        luks_type: "luks2",
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: Some(4096),
        kdf: ARGON2ID,
        extra: &[],
        detached_header: true,
    });
}

#[test]
fn cryptsetup_luks2_cbc_essiv_sector512() {
    check(&Case {
        name: "luks2-cbc-essiv",
        luks_type: "luks2",
        cipher: "aes-cbc-essiv:sha256",
        key_bits: 256,
        sector_size: Some(512),
        kdf: PBKDF2,
        extra: &[],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks1_xts512() {
    check(&Case {
        name: "luks1-xts512",
        luks_type: "luks1",
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: None,
        kdf: PBKDF2,
        extra: &[],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks1_xts256() {
    check(&Case {
        name: "luks1-xts256",
        luks_type: "luks1",
        cipher: "aes-xts-plain64",
        key_bits: 256,
        sector_size: None,
        kdf: PBKDF2,
        extra: &[],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks1_cbc_essiv_sha256() {
    check(&Case {
        name: "luks1-cbc-essiv",
        luks_type: "luks1",
        cipher: "aes-cbc-essiv:sha256",
        key_bits: 256,
        sector_size: None,
        kdf: PBKDF2,
        extra: &[],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks1_cbc_plain64_sha512() {
    check(&Case {
        name: "luks1-cbc-plain64",
        luks_type: "luks1",
        cipher: "aes-cbc-plain64",
        key_bits: 256,
        sector_size: None,
        kdf: PBKDF2,
        extra: &["--hash", "sha512"],
        detached_header: false,
    });
}

#[test]
fn cryptsetup_luks1_detached_header() {
    check(&Case {
        name: "luks1-detached",
        luks_type: "luks1",
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: None,
        kdf: PBKDF2,
        extra: &[],
        detached_header: true,
    });
}

/// A LUKS2 segment with a non-zero `iv_tweak` (cryptsetup keeps it when it
/// rewrites headers, e.g. after a reencryption): the tweak of the sector at
/// segment byte B is B / 512 + iv_tweak, which pyca/cryptography reproduces.
#[test]
fn cryptsetup_luks2_nonzero_iv_tweak() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("iv-tweak");
    let key = dir.file("key", b"tweaked");
    let volume = dir.sparse("volume.img", 20 << 20);
    let mut args = vec!["luksFormat", "--batch-mode", "--type", "luks2", "--sector-size", "4096"];
    args.extend(PBKDF2);
    args.extend(["--key-file", p(&key), p(&volume)]);
    ok("cryptsetup luksFormat", cryptsetup(&args));
    let mut json = luks2_json(&volume, 0);
    json["segments"]["0"]["iv_tweak"] = "1000000".into();
    python_rewrite_json(&dir, &volume, serde_json::to_string(&json).unwrap().as_bytes());
    // cryptsetup accepts the edited header (its luksDump does not print the tweak).
    cryptsetup_dump(&volume);
    assert!(cryptsetup_opens(&volume, None, &key));
    assert_eq!(luks2_json(&volume, 16384)["segments"]["0"]["iv_tweak"], "1000000");

    let dump = rampart_json(&volume, None, None);
    let seg = segment_info(&dump, &volume);
    assert_eq!(seg.iv_tweak, 1_000_000);
    let cs_key = cryptsetup_volume_key(&volume, &key);
    let plain = random_bytes(77, 64 * 1024);
    let input = dir.file("plain.bin", &plain);
    ok("rampart import", rampart(&["import", p(&volume), p(&input), "-d", p(&key)]));
    let decrypted = python_decrypt(&dir, &volume, &seg, &cs_key, plain.len());
    assert_same("decryption with iv_tweak 1000000", &decrypted, &plain);
}
