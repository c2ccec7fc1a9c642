//! Interoperability with the real cryptsetup (Debian's cryptsetup-bin):
//! volumes made by each tool are read, unlocked and modified by the other.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::*;
use rampart_luks::{DataCipher, Error, FormatOptions, HashAlg, Luks, LuksVersion, PbkdfKind};

const PASS: &[u8] = b"correct horse battery staple";

struct CsCase {
    name: &'static str,
    args: &'static [&'static str],
    version: LuksVersion,
    cipher: DataCipher,
    key_bits: usize,
    sector: u32,
    detached: bool,
}

const CS_CASES: &[CsCase] = &[
    CsCase {
        name: "luks2-argon2id-4k-xts512",
        args: &[
            "--type",
            "luks2",
            "--pbkdf",
            "argon2id",
            "--pbkdf-force-iterations",
            "4",
            "--pbkdf-memory",
            "32",
            "--sector-size",
            "4096",
        ],
        version: LuksVersion::Luks2,
        cipher: DataCipher::AesXtsPlain64,
        key_bits: 512,
        sector: 4096,
        detached: false,
    },
    CsCase {
        name: "luks2-argon2i-512-xts256",
        args: &[
            "--type",
            "luks2",
            "--pbkdf",
            "argon2i",
            "--pbkdf-force-iterations",
            "4",
            "--pbkdf-memory",
            "64",
            "--pbkdf-parallel",
            "1",
            "--sector-size",
            "512",
            "--key-size",
            "256",
        ],
        version: LuksVersion::Luks2,
        cipher: DataCipher::AesXtsPlain64,
        key_bits: 256,
        sector: 512,
        detached: false,
    },
    CsCase {
        name: "luks2-pbkdf2-sha512-meta64k-ks1m",
        args: &[
            "--type",
            "luks2",
            "--pbkdf",
            "pbkdf2",
            "--hash",
            "sha512",
            "--pbkdf-force-iterations",
            "1000",
            "--luks2-metadata-size",
            "64k",
            "--luks2-keyslots-size",
            "1m",
        ],
        version: LuksVersion::Luks2,
        cipher: DataCipher::AesXtsPlain64,
        key_bits: 512,
        sector: 4096,
        detached: false,
    },
    CsCase {
        name: "luks2-pbkdf2-sha1-meta1m-ks4m-xts256",
        args: &[
            "--type",
            "luks2",
            "--pbkdf",
            "pbkdf2",
            "--hash",
            "sha1",
            "--pbkdf-force-iterations",
            "1000",
            "--luks2-metadata-size",
            "1m",
            "--luks2-keyslots-size",
            "4m",
            "--key-size",
            "256",
            "--sector-size",
            "512",
        ],
        version: LuksVersion::Luks2,
        cipher: DataCipher::AesXtsPlain64,
        key_bits: 256,
        sector: 512,
        detached: false,
    },
    CsCase {
        name: "luks2-cbc-essiv",
        args: &[
            "--type",
            "luks2",
            "--cipher",
            "aes-cbc-essiv:sha256",
            "--key-size",
            "256",
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            "--sector-size",
            "512",
        ],
        version: LuksVersion::Luks2,
        cipher: DataCipher::AesCbcEssivSha256,
        key_bits: 256,
        sector: 512,
        detached: false,
    },
    CsCase {
        name: "luks2-detached",
        args: &[
            "--type",
            "luks2",
            "--pbkdf",
            "argon2id",
            "--pbkdf-force-iterations",
            "4",
            "--pbkdf-memory",
            "32",
        ],
        version: LuksVersion::Luks2,
        cipher: DataCipher::AesXtsPlain64,
        key_bits: 512,
        sector: 4096,
        detached: true,
    },
    CsCase {
        name: "luks1-default",
        args: &["--type", "luks1", "--pbkdf-force-iterations", "1000"],
        version: LuksVersion::Luks1,
        cipher: DataCipher::AesXtsPlain64,
        key_bits: 512,
        sector: 512,
        detached: false,
    },
    CsCase {
        name: "luks1-sha1-cbc-essiv-128",
        args: &[
            "--type",
            "luks1",
            "--hash",
            "sha1",
            "--cipher",
            "aes-cbc-essiv:sha256",
            "--key-size",
            "128",
            "--pbkdf-force-iterations",
            "1000",
        ],
        version: LuksVersion::Luks1,
        cipher: DataCipher::AesCbcEssivSha256,
        key_bits: 128,
        sector: 512,
        detached: false,
    },
    CsCase {
        name: "luks1-sha512-xts256-cbc-plain64",
        args: &[
            "--type",
            "luks1",
            "--hash",
            "sha512",
            "--cipher",
            "aes-cbc-plain64",
            "--key-size",
            "256",
            "--pbkdf-force-iterations",
            "1000",
        ],
        version: LuksVersion::Luks1,
        cipher: DataCipher::AesCbcPlain64,
        key_bits: 256,
        sector: 512,
        detached: false,
    },
    CsCase {
        name: "luks1-detached",
        args: &["--type", "luks1", "--pbkdf-force-iterations", "1000", "--key-size", "256"],
        version: LuksVersion::Luks1,
        cipher: DataCipher::AesXtsPlain64,
        key_bits: 256,
        sector: 512,
        detached: true,
    },
];

#[test]
fn volumes_made_by_cryptsetup_unlock_in_rampart() {
    for case in CS_CASES {
        let dir = TempDir::new(case.name);
        let data = dir.sparse("data.img", 24 << 20);
        let header = case.detached.then(|| dir.join("header.img"));
        let key_file = dir.file("key", PASS);
        let mut args = vec!["luksFormat", "-q", "--key-file", s(&key_file)];
        args.extend(case.args.iter().copied());
        if let Some(h) = &header {
            args.extend(["--header", s(h)]);
        }
        args.push(s(&data));
        cs_ok(&args);

        let meta_path = header.clone().unwrap_or_else(|| data.clone());
        let file = open_rw(&meta_path);
        let (luks, report) = Luks::load(&file).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(!report.used_secondary, "{}", case.name);
        assert!(report.warnings.is_empty(), "{}: {:?}", case.name, report.warnings);
        assert_eq!(luks.version(), case.version, "{}", case.name);

        let seg = luks.segment().unwrap();
        assert_eq!(seg.cipher, case.cipher, "{}", case.name);
        assert_eq!(seg.key_bytes * 8, case.key_bits, "{}", case.name);
        assert_eq!(seg.sector_size, case.sector, "{}", case.name);
        assert_eq!(seg.size, None);
        assert_eq!(seg.iv_tweak, 0);
        if case.detached {
            assert_eq!(seg.offset, 0, "{}", case.name);
        } else if case.version == LuksVersion::Luks2 {
            let json = cs_json(&data);
            let offset: u64 = json["segments"]["0"]["offset"].as_str().unwrap().parse().unwrap();
            assert_eq!(seg.offset, offset, "{}", case.name);
        } else {
            assert_eq!(seg.offset, if case.key_bits == 128 { 1 << 20 } else { 2 << 20 });
        }

        let (slot, key) = luks.unlock(&file, PASS, None).unwrap();
        assert_eq!(slot, 0);
        let expect = cs_volume_key(&data, header.as_deref(), &key_file);
        assert_eq!(key.expose(), &expect[..], "{}: volume key differs", case.name);
        assert!(luks.verify_volume_key(&key).unwrap());
        assert!(matches!(luks.unlock(&file, b"wrong", None), Err(Error::NoKey)));
        assert!(matches!(luks.unlock(&file, PASS, Some(0)), Ok((0, _))));
        assert!(luks.dump_text().contains(luks.uuid()));
    }
}

struct RampartCase {
    name: &'static str,
    opts: fn() -> FormatOptions,
}

fn luks2_argon() -> FormatOptions {
    FormatOptions { pbkdf: fast_argon2(PbkdfKind::Argon2id), ..FormatOptions::default() }
}

const RAMPART_CASES: &[RampartCase] = &[
    RampartCase { name: "r-luks2-argon2id", opts: luks2_argon },
    RampartCase {
        name: "r-luks2-argon2i-512-xts256-label",
        opts: || FormatOptions {
            key_bytes: 32,
            sector_size: 512,
            pbkdf: fast_argon2(PbkdfKind::Argon2i),
            label: Some("rampart test".into()),
            subsystem: Some("sub".into()),
            ..FormatOptions::default()
        },
    },
    RampartCase {
        name: "r-luks2-pbkdf2-meta64k-ks1m",
        opts: || FormatOptions {
            pbkdf: fast_pbkdf2(HashAlg::Sha512),
            metadata_size: Some(64 << 10),
            keyslots_size: Some(1 << 20),
            ..FormatOptions::default()
        },
    },
    RampartCase {
        name: "r-luks2-pbkdf2-meta4m-cbc",
        opts: || FormatOptions {
            cipher: DataCipher::AesCbcEssivSha256,
            key_bytes: 32,
            sector_size: 1024,
            pbkdf: fast_pbkdf2(HashAlg::Sha1),
            metadata_size: Some(4 << 20),
            uuid: Some("12345678-9ABC-4DEF-8123-456789ABCDEF".into()),
            ..FormatOptions::default()
        },
    },
    RampartCase {
        name: "r-luks2-detached",
        opts: || FormatOptions { detached_header: true, ..luks2_argon() },
    },
    RampartCase {
        name: "r-luks2-data-offset",
        opts: || FormatOptions { data_offset: Some(20 << 20), ..luks2_argon() },
    },
    RampartCase {
        name: "r-luks1",
        opts: || FormatOptions {
            pbkdf: fast_pbkdf2(HashAlg::Sha256),
            ..FormatOptions::default_for(LuksVersion::Luks1)
        },
    },
    RampartCase {
        name: "r-luks1-cbc-plain64-sha1",
        opts: || FormatOptions {
            cipher: DataCipher::AesCbcPlain64,
            key_bytes: 16,
            pbkdf: fast_pbkdf2(HashAlg::Sha1),
            ..FormatOptions::default_for(LuksVersion::Luks1)
        },
    },
    RampartCase {
        name: "r-luks1-detached",
        opts: || FormatOptions {
            detached_header: true,
            pbkdf: fast_pbkdf2(HashAlg::Sha512),
            ..FormatOptions::default_for(LuksVersion::Luks1)
        },
    },
];

#[test]
fn volumes_made_by_rampart_pass_cryptsetup() {
    for case in RAMPART_CASES {
        let opts = (case.opts)();
        let dir = TempDir::new(case.name);
        let data = dir.sparse("data.img", 24 << 20);
        let header = opts.detached_header.then(|| dir.join("header.img"));
        if let Some(h) = &header {
            std::fs::File::create(h).unwrap();
        }
        let key_file = dir.file("key", PASS);
        let meta_path = header.clone().unwrap_or_else(|| data.clone());
        let file = open_rw(&meta_path);
        let (luks, key) =
            Luks::format(&file, &opts, PASS).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        drop(file);

        let mut dump_args = vec!["luksDump"];
        if let Some(h) = &header {
            dump_args.extend(["--header", s(h)]);
        }
        dump_args.push(s(&data));
        let dump = cs_ok(&dump_args);
        assert!(dump.contains(luks.uuid()), "{}: {dump}", case.name);
        if let Some(label) = &opts.label {
            assert!(dump.contains(label.as_str()), "{}", case.name);
        }
        assert!(cs_test_passphrase(&data, header.as_deref(), &key_file, None), "{}", case.name);
        let wrong = dir.file("wrong", b"nope");
        assert!(!cs_test_passphrase(&data, header.as_deref(), &wrong, None), "{}", case.name);
        let theirs = cs_volume_key(&data, header.as_deref(), &key_file);
        assert_eq!(key.expose(), &theirs[..], "{}: volume key differs", case.name);

        if opts.version == LuksVersion::Luks2 {
            let json = cs_json(&meta_path);
            let seg = luks.segment().unwrap();
            assert_eq!(json["segments"]["0"]["offset"].as_str().unwrap(), seg.offset.to_string());
            assert_eq!(
                json["segments"]["0"]["sector_size"].as_u64().unwrap(),
                u64::from(seg.sector_size)
            );
            assert_eq!(json["segments"]["0"]["encryption"].as_str().unwrap(), seg.cipher.spec());
            let hdr = opts.metadata_size.unwrap_or(16 << 10);
            assert_eq!(
                json["config"]["json_size"].as_str().unwrap(),
                (hdr - 4096).to_string(),
                "{}",
                case.name
            );
            if let Some(ks) = opts.keyslots_size {
                assert_eq!(json["config"]["keyslots_size"].as_str().unwrap(), ks.to_string());
            }
            if let Some(off) = opts.data_offset {
                assert_eq!(seg.offset, off);
            } else if opts.detached_header {
                assert_eq!(seg.offset, 0);
            } else {
                assert_eq!(seg.offset % (1 << 20), 0);
            }
        }
        if let Some(uuid) = &opts.uuid {
            assert_eq!(luks.uuid(), uuid.to_ascii_lowercase());
        }
    }
}

#[test]
fn cryptsetup_defaults_match_rampart_layout() {
    // Same options, same geometry: compare Rampart's LUKS2 and LUKS1
    // layouts with cryptsetup's for default metadata sizes.
    let dir = TempDir::new("layout");
    let key_file = dir.file("key", PASS);
    for (version, cs_type) in [(LuksVersion::Luks2, "luks2"), (LuksVersion::Luks1, "luks1")] {
        let theirs = dir.sparse(&format!("cs-{cs_type}.img"), 20 << 20);
        cs_ok(&[
            "luksFormat",
            "-q",
            "--type",
            cs_type,
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            "--key-file",
            s(&key_file),
            s(&theirs),
        ]);
        let ours = dir.sparse(&format!("r-{cs_type}.img"), 20 << 20);
        let file = open_rw(&ours);
        let opts = FormatOptions {
            pbkdf: fast_pbkdf2(HashAlg::Sha256),
            ..FormatOptions::default_for(version)
        };
        Luks::format(&file, &opts, PASS).unwrap();
        let (a, _) = Luks::load(&open_rw(&theirs)).unwrap();
        let (b, _) = Luks::load(&file).unwrap();
        assert_eq!(a.segment().unwrap().offset, b.segment().unwrap().offset, "{cs_type}");
        assert_eq!(a.metadata_end(), b.metadata_end(), "{cs_type}");
        assert_eq!(a.header_bytes(), b.header_bytes(), "{cs_type}");
        let ja = a.to_json();
        let jb = b.to_json();
        assert_eq!(ja["keyslots"][0]["area_offset"], jb["keyslots"][0]["area_offset"]);
        assert_eq!(ja["keyslots"][0]["area_size"], jb["keyslots"][0]["area_size"]);
    }
}

#[test]
fn keyslots_added_and_removed_by_either_tool() {
    for version in [LuksVersion::Luks2, LuksVersion::Luks1] {
        let dir = TempDir::new("keyslots");
        let data = dir.sparse("data.img", 20 << 20);
        let file = open_rw(&data);
        let opts = FormatOptions {
            pbkdf: fast_pbkdf2(HashAlg::Sha256),
            ..FormatOptions::default_for(version)
        };
        let (mut luks, key) = Luks::format(&file, &opts, PASS).unwrap();

        // Rampart adds slots 1 (PBKDF2) and 3 (Argon2i for LUKS2).
        let second = if version == LuksVersion::Luks2 {
            fast_argon2(PbkdfKind::Argon2i)
        } else {
            fast_pbkdf2(HashAlg::Sha256)
        };
        assert_eq!(
            luks.add_keyslot(&file, &key, b"pass one", &fast_pbkdf2(HashAlg::Sha256), None)
                .unwrap(),
            1
        );
        assert_eq!(luks.add_keyslot(&file, &key, b"pass three", &second, Some(3)).unwrap(), 3);
        let k1 = dir.file("k1", b"pass one");
        let k3 = dir.file("k3", b"pass three");
        assert!(cs_test_passphrase(&data, None, &k1, Some(1)));
        assert!(cs_test_passphrase(&data, None, &k3, Some(3)));
        assert!(!cs_test_passphrase(&data, None, &k1, Some(3)));

        // cryptsetup adds slot 2; Rampart opens it.
        let k0 = dir.file("k0", PASS);
        let k2 = dir.file("k2", b"pass two");
        let mut args = vec!["luksAddKey", "-q", "--key-file", s(&k0), "--key-slot", "2"];
        if version == LuksVersion::Luks2 {
            args.extend([
                "--pbkdf",
                "argon2id",
                "--pbkdf-force-iterations",
                "4",
                "--pbkdf-memory",
                "32",
            ]);
        } else {
            args.extend(["--pbkdf-force-iterations", "1000"]);
        }
        args.extend([s(&data), s(&k2)]);
        cs_ok(&args);
        let (mut luks, _) = Luks::load(&file).unwrap();
        assert_eq!(luks.active_keyslots(), vec![0, 1, 2, 3]);
        let (slot, got) = luks.unlock(&file, b"pass two", None).unwrap();
        assert_eq!(slot, 2);
        assert_eq!(got, key);

        // Rampart removes slot 1; cryptsetup no longer opens with it.
        luks.remove_keyslot(&file, 1).unwrap();
        assert!(!cs_test_passphrase(&data, None, &k1, None));
        assert!(cs_test_passphrase(&data, None, &k2, None));
        let dump = cs_ok(&["luksDump", s(&data)]);
        if version == LuksVersion::Luks1 {
            assert!(dump.contains("Key Slot 1: DISABLED"), "{dump}");
        } else {
            assert!(!dump.contains("  1: luks2"), "{dump}");
        }

        // cryptsetup kills slot 3; Rampart no longer sees it.
        cs_ok(&["luksKillSlot", "-q", s(&data), "3"]);
        let (luks, _) = Luks::load(&file).unwrap();
        assert_eq!(luks.active_keyslots(), vec![0, 2]);
        assert!(matches!(luks.unlock(&file, b"pass three", None), Err(Error::NoKey)));
        assert!(matches!(luks.unlock(&file, b"pass one", None), Err(Error::NoKey)));
        assert_eq!(luks.unlock(&file, PASS, None).unwrap().1, key);

        // Slot reuse: Rampart re-adds slot 1 into the freed area.
        let mut luks = luks;
        assert_eq!(
            luks.add_keyslot(&file, &key, b"again", &fast_pbkdf2(HashAlg::Sha256), None).unwrap(),
            1
        );
        let again = dir.file("again", b"again");
        assert!(cs_test_passphrase(&data, None, &again, Some(1)));
    }
}

#[test]
fn tokens_survive_rampart_rewrites() {
    let dir = TempDir::new("tokens");
    let data = dir.sparse("data.img", 20 << 20);
    let key_file = dir.file("key", PASS);
    cs_ok(&[
        "luksFormat",
        "-q",
        "--type",
        "luks2",
        "--pbkdf",
        "pbkdf2",
        "--pbkdf-force-iterations",
        "1000",
        "--key-file",
        s(&key_file),
        s(&data),
    ]);
    // A type no token plugin claims (cryptsetup validates a claimed one
    // through its plugin on import).
    let token = serde_json::json!({
        "type": "vendor-kms",
        "keyslots": ["0"],
        "kms": {"url": "https://kms.example/v1/keys/7", "wrapped": "AAECAwQ=", "n": [1, 2.5, null, true]},
        "unicode": "ключ \u{1F511}",
        "empty": {}
    });
    let token_file = dir.join("token.json");
    std::fs::write(&token_file, serde_json::to_vec(&token).unwrap()).unwrap();
    cs_ok(&["token", "import", "--json-file", s(&token_file), "--token-id", "5", s(&data)]);

    let file = open_rw(&data);
    let (mut luks, _) = Luks::load(&file).unwrap();
    assert_eq!(luks.tokens(), vec![(5, token.clone())]);
    // Rewrites: a plain write, a keyslot added, a token added.
    luks.write(&file).unwrap();
    let (_, key) = luks.unlock(&file, PASS, None).unwrap();
    luks.add_keyslot(&file, &key, b"other", &fast_pbkdf2(HashAlg::Sha256), None).unwrap();
    let ours = serde_json::json!({"type": "rampart-test", "keyslots": ["1"], "x": 1});
    assert_eq!(luks.add_token(&file, ours.clone(), None).unwrap(), 0);

    let exported = cs_ok(&["token", "export", "--token-id", "5", s(&data)]);
    let exported: serde_json::Value = serde_json::from_str(&exported).unwrap();
    assert_eq!(exported, token, "cryptsetup sees the imported token unchanged");
    let exported = cs_ok(&["token", "export", "--token-id", "0", s(&data)]);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&exported).unwrap(), ours);

    // Removing keyslot 1 unbinds it from our token, as cryptsetup does.
    luks.remove_keyslot(&file, 1).unwrap();
    let exported = cs_ok(&["token", "export", "--token-id", "0", s(&data)]);
    let exported: serde_json::Value = serde_json::from_str(&exported).unwrap();
    assert_eq!(exported["keyslots"], serde_json::json!([]));
    luks.remove_token(&file, 0).unwrap();
    assert!(!cs(&["token", "export", "--token-id", "0", s(&data)]).status.success());

    // Tokens that point at missing keyslots or use reserved types are refused.
    let bad = serde_json::json!({"type": "x", "keyslots": ["9"]});
    assert!(matches!(luks.add_token(&file, bad, None), Err(Error::InvalidArgument(_))));
    let reserved = serde_json::json!({"type": "luks2-foo", "keyslots": []});
    assert!(matches!(luks.add_token(&file, reserved, None), Err(Error::InvalidArgument(_))));
    assert!(cs_test_passphrase(&data, None, &key_file, None));
}

#[test]
fn rampart_reads_headers_cryptsetup_repaired_and_keeps_seqid_order() {
    // After a Rampart write, cryptsetup sees a newer epoch, and vice versa.
    let dir = TempDir::new("epoch");
    let data = dir.sparse("data.img", 20 << 20);
    let key_file = dir.file("key", PASS);
    let file = open_rw(&data);
    let opts = FormatOptions { pbkdf: fast_pbkdf2(HashAlg::Sha256), ..FormatOptions::default() };
    let (mut luks, _) = Luks::format(&file, &opts, PASS).unwrap();
    let epoch = |json: &serde_json::Value| json["epoch"].as_u64().unwrap();
    let before = epoch(&luks.to_json());
    luks.write(&file).unwrap();
    let (luks, _) = Luks::load(&file).unwrap();
    assert_eq!(epoch(&luks.to_json()), before + 1);
    cs_ok(&["config", "--label", "from-cryptsetup", s(&data)]);
    let (luks, report) = Luks::load(&file).unwrap();
    assert!(epoch(&luks.to_json()) > before + 1);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(luks.label(), Some("from-cryptsetup"));
    assert!(cs_test_passphrase(&data, None, &key_file, None));
}
