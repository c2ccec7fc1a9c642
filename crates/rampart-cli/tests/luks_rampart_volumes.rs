#![allow(clippy::unwrap_used)]
//! Volumes formatted by `rampart format` are accepted
//! by cryptsetup 2.6: `cryptsetup luksDump` exits 0 and shows the label,
//! cipher, sector size and KDF; `cryptsetup open --test-passphrase` accepts
//! the passphrase and refuses a wrong one; the volume key cryptsetup dumps
//! equals `rampart dump --dump-volume-key --json`'s `volume_key`; the data
//! offsets agree; and data Rampart imports decrypts independently
//! (pyca/cryptography) with cryptsetup's key.

use crate::helpers::luks_support as support;

use support::*;

struct Case {
    name: &'static str,
    /// Arguments of `rampart format` besides the volume and key file.
    args: &'static [&'static str],
    detached_header: bool,
    /// Lines (trimmed) that `cryptsetup luksDump` must show.
    dump_lines: &'static [&'static str],
    cipher: &'static str,
    key_bits: usize,
    sector_size: u64,
    /// Expected data offset (None: the default layout, whatever it is, as
    /// long as cryptsetup agrees).
    data_offset: Option<u64>,
}

const SIZE: u64 = 24 << 20;

fn check(case: &Case) {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new(case.name);
    let key = dir.file("key", format!("{} passphrase\0with a NUL", case.name).as_bytes());
    let wrong = dir.file("wrong", format!("{} passphrase", case.name).as_bytes());
    let volume = dir.join("volume.img");
    let header = if case.detached_header { dir.join("header.img") } else { volume.clone() };
    let header_opt = case.detached_header.then_some(header.as_path());

    let size = SIZE.to_string();
    let mut args = vec!["format", p(&volume), "--size", &size, "--key-file", p(&key)];
    if case.detached_header {
        args.extend(["--header", p(&header)]);
    }
    args.extend(case.args);
    let out = ok("rampart format", rampart(&args));
    assert!(out.stderr.is_empty(), "format said: {}", text(&out.stderr));
    assert_eq!(std::fs::metadata(&volume).unwrap().len(), SIZE);
    if case.detached_header {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&header).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "a new detached header holds keyslots: owner-only");
    }

    // cryptsetup reads the header and shows what was asked for.
    let cs_dump = cryptsetup_dump(&header);
    let lines: Vec<&str> = cs_dump.lines().map(str::trim).collect();
    for want in case.dump_lines {
        let want_words: Vec<&str> = want.split_whitespace().collect();
        assert!(
            lines.iter().any(|l| l.split_whitespace().collect::<Vec<_>>() == want_words),
            "cryptsetup luksDump does not show {want:?}:\n{cs_dump}"
        );
    }
    assert_eq!(cryptsetup_keyslots(&cs_dump), [0], "{cs_dump}");

    // cryptsetup opens it with the passphrase, and only with it.
    assert!(cryptsetup_opens(&volume, header_opt, &key), "cryptsetup refuses the passphrase");
    assert!(!cryptsetup_opens(&volume, header_opt, &wrong), "cryptsetup accepts a wrong one");

    // The same volume key and layout on both sides.
    let cs_key = cryptsetup_volume_key(&header, &key);
    let dump = rampart_json(&volume, header_opt, Some(&key));
    assert_eq!(dump["volume_key"].as_str().unwrap(), hex(&cs_key));
    assert_eq!(cs_key.len() * 8, case.key_bits);
    assert_eq!(dump["unlocked_keyslot"], 0);
    let seg = segment_info(&dump, &header);
    assert_eq!(seg.cipher, case.cipher);
    assert_eq!(seg.sector_size, case.sector_size);
    assert_eq!(seg.data_offset, cryptsetup_data_offset(&cs_dump), "{cs_dump}");
    if let Some(offset) = case.data_offset {
        assert_eq!(seg.data_offset, offset);
    }

    // Data written by Rampart decrypts with cryptsetup's key.
    let plain = random_bytes(case.name.len() as u64 * 7919, 128 * 1024);
    let input = dir.file("plain.bin", &plain);
    let mut args = vec!["import", p(&volume), p(&input), "--key-file", p(&key)];
    if case.detached_header {
        args.extend(["--header", p(&header)]);
    }
    ok("rampart import", rampart(&args));
    let decrypted = python_decrypt(&dir, &volume, &seg, &cs_key, plain.len());
    assert_same("pyca/cryptography decryption", &decrypted, &plain);
}

#[test]
fn rampart_luks2_defaults_with_label() {
    check(&Case {
        name: "r-luks2-default",
        args: &[
            "--pbkdf-force-iterations",
            "4",
            "--pbkdf-memory",
            "32768",
            "--label",
            "rampart-data",
            "--subsystem",
            "tests",
        ],
        detached_header: false,
        dump_lines: &[
            "Version: 2",
            "Label: rampart-data",
            "Subsystem: tests",
            "cipher: aes-xts-plain64",
            "sector: 4096 [bytes]",
            "Key: 512 bits",
            "PBKDF: argon2id",
            "Memory: 32768",
            "Time cost: 4",
        ],
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: 4096,
        data_offset: Some(16 << 20),
    });
}

#[test]
fn rampart_luks2_pbkdf2_sector512_xts256_unicode_label() {
    check(&Case {
        name: "r-luks2-s512",
        args: &[
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            "--sector-size",
            "512",
            "--key-size",
            "256",
            "--label",
            "Données chiffrées",
        ],
        detached_header: false,
        dump_lines: &[
            "Label: Données chiffrées",
            "sector: 512 [bytes]",
            "Key: 256 bits",
            "PBKDF: pbkdf2",
            "Iterations: 1000",
        ],
        cipher: "aes-xts-plain64",
        key_bits: 256,
        sector_size: 512,
        data_offset: None,
    });
}

#[test]
fn rampart_luks2_argon2i_small_metadata_and_uuid() {
    check(&Case {
        name: "r-luks2-md",
        args: &[
            "--pbkdf",
            "argon2i",
            "--pbkdf-force-iterations",
            "4",
            "--pbkdf-memory",
            "32768",
            "--luks2-metadata-size",
            "64K",
            "--luks2-keyslots-size",
            "1M",
            "--uuid",
            "0b7a3a52-3b5e-4b58-9f43-6a2f4c1d9e01",
        ],
        detached_header: false,
        dump_lines: &[
            "Metadata area: 65536 [bytes]",
            "Keyslots area: 1048576 [bytes]",
            "UUID: 0b7a3a52-3b5e-4b58-9f43-6a2f4c1d9e01",
            "PBKDF: argon2i",
        ],
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: 4096,
        data_offset: None,
    });
}

#[test]
fn rampart_luks2_explicit_offset() {
    check(&Case {
        name: "r-luks2-offset",
        args: &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--offset", "36864"],
        detached_header: false,
        dump_lines: &["offset: 18874368 [bytes]"],
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: 4096,
        data_offset: Some(18 << 20),
    });
}

#[test]
fn rampart_luks2_cbc_essiv() {
    check(&Case {
        name: "r-luks2-essiv",
        args: &[
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            "--cipher",
            "aes-cbc-essiv:sha256",
            "--sector-size",
            "512",
        ],
        detached_header: false,
        dump_lines: &["cipher: aes-cbc-essiv:sha256", "Key: 256 bits"],
        cipher: "aes-cbc-essiv:sha256",
        key_bits: 256,
        sector_size: 512,
        data_offset: None,
    });
}

#[test]
fn rampart_luks2_detached_header_with_label() {
    check(&Case {
        name: "r-luks2-detached",
        args: &["--pbkdf-force-iterations", "4", "--pbkdf-memory", "32768", "--label", "detached"],
        detached_header: true,
        dump_lines: &["Label: detached", "offset: 0 [bytes]", "cipher: aes-xts-plain64"],
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: 4096,
        data_offset: Some(0),
    });
}

#[test]
fn rampart_luks1_defaults() {
    check(&Case {
        name: "r-luks1-default",
        args: &["--type", "luks1", "--pbkdf-force-iterations", "1000"],
        detached_header: false,
        dump_lines: &[
            "Version: 1",
            "Cipher name: aes",
            "Cipher mode: xts-plain64",
            "Hash spec: sha256",
            "MK bits: 512",
            "Payload offset: 4096",
        ],
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: 512,
        data_offset: Some(2 << 20),
    });
}

#[test]
fn rampart_luks1_cbc_essiv_sha1() {
    check(&Case {
        name: "r-luks1-essiv",
        args: &[
            "--type",
            "luks1",
            "--pbkdf-force-iterations",
            "1000",
            "--cipher",
            "aes-cbc-essiv:sha256",
            "--key-size",
            "256",
            "--hash",
            "sha1",
        ],
        detached_header: false,
        dump_lines: &["Cipher mode: cbc-essiv:sha256", "Hash spec: sha1", "MK bits: 256"],
        cipher: "aes-cbc-essiv:sha256",
        key_bits: 256,
        sector_size: 512,
        data_offset: None,
    });
}

#[test]
fn rampart_luks1_cbc_plain64() {
    check(&Case {
        name: "r-luks1-plain64",
        args: &[
            "--type",
            "luks1",
            "--pbkdf-force-iterations",
            "1000",
            "--cipher",
            "aes-cbc-plain64",
            "--key-size",
            "128",
        ],
        detached_header: false,
        dump_lines: &["Cipher mode: cbc-plain64", "MK bits: 128"],
        cipher: "aes-cbc-plain64",
        key_bits: 128,
        sector_size: 512,
        data_offset: None,
    });
}

#[test]
fn rampart_luks1_detached_header() {
    check(&Case {
        name: "r-luks1-detached",
        args: &["--type", "luks1", "--pbkdf-force-iterations", "1000"],
        detached_header: true,
        dump_lines: &["Version: 1", "Payload offset: 0"],
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector_size: 512,
        data_offset: Some(0),
    });
}

/// `rampart format` refuses to overwrite an existing header without
/// `--batch-mode` (exit 2, one line, volume unchanged) and overwrites it with.
#[test]
fn rampart_format_refuses_to_overwrite_without_batch_mode() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("r-overwrite");
    let key = dir.file("key", b"first");
    let volume = dir.sparse("volume.img", 20 << 20);
    let mut args = vec!["luksFormat", "--batch-mode", "--type", "luks2", "--key-file", p(&key)];
    args.extend(PBKDF2);
    args.push(p(&volume));
    ok("cryptsetup luksFormat", cryptsetup(&args));
    let before = std::fs::read(&volume).unwrap();
    let key2 = dir.file("key2", b"second");
    let mut args = vec!["format", p(&volume), "--key-file", p(&key2)];
    args.extend(PBKDF2);
    let line = fails("format over a LUKS volume", &rampart(&args), Some(2));
    assert!(line.contains("--batch-mode"), "{line}");
    assert_same("volume after a refused format", &std::fs::read(&volume).unwrap(), &before);
    args.push("--batch-mode");
    ok("rampart format --batch-mode", rampart(&args));
    assert!(cryptsetup_opens(&volume, None, &key2));
    assert!(!cryptsetup_opens(&volume, None, &key));
}
