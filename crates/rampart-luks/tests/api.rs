//! The public API on in-memory devices: formatting options, keyslot and
//! token management, reports and refusals.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{fast_argon2, fast_pbkdf2};
use rampart_luks::{
    pbkdf_for_time, DataCipher, Error, FormatOptions, HashAlg, IntegrityKind, KdfParams, Luks,
    LuksVersion, MemoryIo, MetadataIo, PbkdfKind, SecretBytes,
};
use serde_json::json;

fn luks2_opts() -> FormatOptions {
    FormatOptions {
        pbkdf: fast_pbkdf2(HashAlg::Sha256),
        keyslots_size: Some(1 << 20),
        ..FormatOptions::default()
    }
}

fn luks1_opts() -> FormatOptions {
    FormatOptions {
        pbkdf: fast_pbkdf2(HashAlg::Sha256),
        ..FormatOptions::default_for(LuksVersion::Luks1)
    }
}

#[test]
fn no_key_message_is_exact() {
    assert_eq!(Error::NoKey.to_string(), "no key available with this passphrase");
}

#[test]
fn defaults_are_cryptsetups() {
    let o = FormatOptions::default();
    assert_eq!(o.version, LuksVersion::Luks2);
    assert_eq!(o.cipher, DataCipher::AesXtsPlain64);
    assert_eq!(o.key_bytes, 64);
    assert_eq!(o.sector_size, 4096);
    assert_eq!(o.pbkdf.kind, PbkdfKind::Argon2id);
    assert_eq!(o.pbkdf.iter_time_ms, 2000);
    assert_eq!(o.pbkdf.memory_kib, 1 << 20);
    assert!((1..=4).contains(&o.pbkdf.parallel));
    let o = FormatOptions::default_for(LuksVersion::Luks1);
    assert_eq!(o.pbkdf.kind, PbkdfKind::Pbkdf2);
    assert_eq!(o.pbkdf.hash, HashAlg::Sha256);
    assert_eq!(o.sector_size, 512);
}

#[test]
fn luks2_format_layout_and_reports() {
    let io = MemoryIo::new(20 << 20);
    let opts = FormatOptions {
        label: Some("data".into()),
        subsystem: Some("rampart".into()),
        pbkdf: fast_argon2(PbkdfKind::Argon2id),
        ..FormatOptions::default()
    };
    let (luks, key) = Luks::format(&io, &opts, b"pw").unwrap();
    assert_eq!(key.len(), 64);
    assert_eq!(luks.version(), LuksVersion::Luks2);
    assert_eq!(luks.label(), Some("data"));
    assert_eq!(luks.subsystem(), Some("rampart"));
    assert_eq!(luks.metadata_end(), 16 << 20);
    assert_eq!(luks.header_bytes(), 16 << 20);
    let seg = luks.segment().unwrap();
    assert_eq!((seg.offset, seg.size, seg.sector_size, seg.key_bytes), (16 << 20, None, 4096, 64));
    assert_eq!(luks.active_keyslots(), vec![0]);

    let j = luks.to_json();
    assert_eq!(j["version"], 2);
    assert_eq!(j["uuid"], luks.uuid());
    assert_eq!(j["label"], "data");
    assert_eq!(j["data_offset"], 16 << 20);
    assert_eq!(j["sector_size"], 4096);
    assert_eq!(j["cipher"], "aes-xts-plain64");
    assert_eq!(j["key_bits"], 512);
    assert_eq!(j["keyslots"][0]["kdf"]["type"], "argon2id");
    assert_eq!(j["keyslots"][0]["area_offset"], 32768);
    assert_eq!(j["keyslots"][0]["area_size"], 258_048);
    assert_eq!(j["tokens"], json!([]));

    let dump = luks.dump_text();
    for needle in [
        "Version:       \t2",
        "Label:         \tdata",
        "offset: 16777216 [bytes]",
        "PBKDF:      argon2id",
        "Area length:258048 [bytes]",
        "Digest ID:  0",
    ] {
        assert!(dump.contains(needle), "{needle} missing from:\n{dump}");
    }

    // Reload: same view, and the key unlocks.
    let (again, report) = Luks::load(&io).unwrap();
    assert!(report.warnings.is_empty() && !report.used_secondary);
    assert_eq!(again.to_json(), j);
    let (slot, got) = again.unlock(&io, b"pw", None).unwrap();
    assert_eq!((slot, &got), (0, &key));
    assert!(matches!(again.unlock(&io, b"pW", None), Err(Error::NoKey)));
    assert!(matches!(again.unlock(&io, b"pw", Some(5)), Err(Error::InvalidArgument(_))));
    assert!(!again.verify_volume_key(&SecretBytes::from_slice(&[7; 64])).unwrap());
    assert!(!again.verify_volume_key(&SecretBytes::from_slice(&[7; 32])).unwrap());

    // Debug shows neither the key nor key-derived material.
    let debug = format!("{again:?}");
    assert!(debug.contains(again.uuid()));
    let key_hex: String = key.expose().iter().map(|b| format!("{b:02x}")).collect();
    assert!(!debug.contains(&key_hex[..16]));
}

#[test]
fn format_with_key_and_detached_header() {
    let io = MemoryIo::new(0);
    let key = SecretBytes::from_slice(&(0u8..32).collect::<Vec<_>>());
    let opts =
        FormatOptions { detached_header: true, key_bytes: 32, sector_size: 512, ..luks2_opts() };
    let luks = Luks::format_with_key(&io, &opts, &key, b"pw").unwrap();
    assert_eq!(luks.segment().unwrap().offset, 0);
    assert_eq!(luks.metadata_end(), 32768 + (1 << 20));
    assert_eq!(luks.header_bytes(), luks.metadata_end());
    assert_eq!(io.len().unwrap(), luks.metadata_end());
    let (luks, _) = Luks::load(&io).unwrap();
    assert_eq!(luks.unlock(&io, b"pw", None).unwrap().1, key);

    let wrong_len = SecretBytes::from_slice(&[1; 16]);
    assert!(matches!(
        Luks::format_with_key(&io, &opts, &wrong_len, b"pw"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn format_option_refusals() {
    let io = MemoryIo::new(20 << 20);
    let cases: Vec<(FormatOptions, &str)> = vec![
        (FormatOptions { sector_size: 8192, ..luks2_opts() }, "sector size 8192"),
        (FormatOptions { sector_size: 1000, ..luks2_opts() }, "sector size 1000"),
        (FormatOptions { metadata_size: Some(20000), ..luks2_opts() }, "metadata size 20000"),
        (FormatOptions { keyslots_size: Some(1000), ..luks2_opts() }, "keyslots size 1000"),
        (FormatOptions { keyslots_size: Some(256 << 20), ..luks2_opts() }, "keyslots size"),
        (FormatOptions { label: Some("x".repeat(48)), ..luks2_opts() }, "label"),
        (FormatOptions { uuid: Some("nope".into()), ..luks2_opts() }, "not a UUID"),
        (FormatOptions { data_offset: Some(1000), ..luks2_opts() }, "data offset 1000"),
        (
            FormatOptions { data_offset: Some(16384), ..luks2_opts() },
            "smaller than the two header copies",
        ),
        (FormatOptions { data_offset: Some(0), ..luks2_opts() }, "requires a detached header"),
        (FormatOptions { key_bytes: 48, ..luks2_opts() }, "384-bit key"),
        (FormatOptions { pbkdf: fast_argon2(PbkdfKind::Argon2id), ..luks1_opts() }, "PBKDF2 only"),
        (FormatOptions { sector_size: 4096, ..luks1_opts() }, "512-byte sectors"),
        (FormatOptions { label: Some("x".into()), ..luks1_opts() }, "LUKS2 features"),
        (
            FormatOptions {
                pbkdf: rampart_luks::PbkdfChoice {
                    forced_iterations: Some(5),
                    ..fast_pbkdf2(HashAlg::Sha256)
                },
                ..luks2_opts()
            },
            "below the minimum",
        ),
    ];
    for (opts, fragment) in cases {
        let err = Luks::format(&io, &opts, b"pw").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(fragment), "{fragment}: got \"{msg}\"");
    }
    // Too small for the data offset.
    let small = MemoryIo::new(1 << 20);
    assert!(matches!(
        Luks::format(&small, &FormatOptions { keyslots_size: None, ..luks2_opts() }, b"pw"),
        Err(Error::DeviceTooSmall { required: 16_777_216, .. })
    ));
    // A keyslots area too small for one keyslot.
    assert!(matches!(
        Luks::format(&io, &FormatOptions { keyslots_size: Some(4096), ..luks2_opts() }, b"pw"),
        Err(Error::NoSpace(_))
    ));
}

#[test]
fn luks2_keyslot_management() {
    let io = MemoryIo::new(3 << 20);
    let (mut luks, key) = Luks::format(&io, &luks2_opts(), b"p0").unwrap();
    let pb = fast_pbkdf2(HashAlg::Sha256);
    // 1 MiB holds four 252 KiB areas.
    assert_eq!(luks.add_keyslot(&io, &key, b"p1", &pb, None).unwrap(), 1);
    assert_eq!(
        luks.add_keyslot(&io, &key, b"p31", &fast_argon2(PbkdfKind::Argon2i), Some(31)).unwrap(),
        31
    );
    assert_eq!(luks.add_keyslot(&io, &key, b"p2", &pb, None).unwrap(), 2);
    assert!(matches!(luks.add_keyslot(&io, &key, b"p3", &pb, None), Err(Error::NoSpace(_))));
    assert!(matches!(
        luks.add_keyslot(&io, &key, b"p", &pb, Some(1)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        luks.add_keyslot(&io, &key, b"p", &pb, Some(32)),
        Err(Error::InvalidArgument(_))
    ));
    let wrong = SecretBytes::from_slice(&[9; 64]);
    assert!(matches!(
        luks.add_keyslot(&io, &wrong, b"p", &pb, None),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(luks.active_keyslots(), vec![0, 1, 2, 31]);

    // Removing frees the area for reuse.
    luks.remove_keyslot(&io, 1).unwrap();
    assert!(matches!(luks.remove_keyslot(&io, 1), Err(Error::InvalidArgument(_))));
    assert_eq!(luks.add_keyslot(&io, &key, b"p1b", &pb, None).unwrap(), 1);

    let (luks, _) = Luks::load(&io).unwrap();
    for (pass, slot) in [(&b"p0"[..], 0), (b"p1b", 1), (b"p2", 2), (b"p31", 31)] {
        assert_eq!(luks.unlock(&io, pass, None).unwrap(), (slot, key.clone()));
    }
    assert!(matches!(luks.unlock(&io, b"p1", None), Err(Error::NoKey)));
    assert!(matches!(luks.unlock(&io, b"p2", Some(0)), Err(Error::NoKey)));

    // Removing every keyslot keeps the digest bound to the segment, so the
    // key can still be verified and re-added.
    let mut luks = luks;
    for slot in luks.active_keyslots() {
        luks.remove_keyslot(&io, slot).unwrap();
    }
    let (mut luks, _) = Luks::load(&io).unwrap();
    assert!(luks.active_keyslots().is_empty());
    assert!(luks.verify_volume_key(&key).unwrap());
    assert_eq!(luks.add_keyslot(&io, &key, b"back", &pb, None).unwrap(), 0);
    assert_eq!(luks.unlock(&io, b"back", None).unwrap().1, key);
}

#[test]
fn luks2_format_with_integrity_is_cryptsetups_header() {
    for (integrity, key_bytes, encryption) in [
        (IntegrityKind::HmacSha256, 96, "aes-xts-plain64"),
        (IntegrityKind::HmacSha512, 128, "aes-xts-plain64"),
        (IntegrityKind::Aead, 32, "aes-gcm-random"),
    ] {
        let io = MemoryIo::new(3 << 20);
        let opts = FormatOptions { key_bytes, integrity: Some(integrity.clone()), ..luks2_opts() };
        let (mut luks, key) = Luks::format(&io, &opts, b"p0").unwrap();
        assert_eq!(key.len(), key_bytes);
        let mut area = vec![0; 12 << 10];
        io.read_at(4096, &mut area).unwrap();
        let end = area.iter().position(|&b| b == 0).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&area[..end]).unwrap();
        let segment = &json["segments"]["0"];
        assert_eq!(segment["encryption"], encryption);
        assert_eq!(
            segment["integrity"],
            json!({"type": integrity.spec(), "journal_encryption": "none", "journal_integrity": "none"})
        );
        // cryptsetup's keyslot cipher where the segment authenticates:
        // AES-256-XTS, whatever the volume key's size.
        let keyslot = &json["keyslots"]["0"];
        assert_eq!(keyslot["key_size"], key_bytes);
        assert_eq!(keyslot["area"]["encryption"], "aes-xts-plain64");
        assert_eq!(keyslot["area"]["key_size"], 64);
        let dumped = luks.to_json();
        assert_eq!(
            (&dumped["cipher"], &dumped["integrity"]),
            (&json!(encryption), &json!(integrity.spec()))
        );
        assert_eq!(dumped["key_bits"], key_bytes * 8);

        let pb = fast_pbkdf2(HashAlg::Sha256);
        assert_eq!(luks.add_keyslot(&io, &key, b"p1", &pb, None).unwrap(), 1);
        let (luks, _) = Luks::load(&io).unwrap();
        assert_eq!(luks.unlock(&io, b"p1", None).unwrap(), (1, key.clone()));
        let described = luks.integrity_segment().unwrap().unwrap();
        assert_eq!(
            (described.encryption.as_str(), described.volume_key_bytes),
            (encryption, key_bytes)
        );
        let refused = luks.segment().unwrap_err().to_string();
        assert!(refused.contains("authenticated encryption"), "{refused}");
    }
    // Writing without the journal is recorded where cryptsetup keeps it.
    let io = MemoryIo::new(3 << 20);
    let direct = FormatOptions {
        key_bytes: 32,
        integrity: Some(IntegrityKind::Aead),
        integrity_no_journal: true,
        ..luks2_opts()
    };
    let (luks, _) = Luks::format(&io, &direct, b"p").unwrap();
    assert_eq!(luks.persistent_flags(), vec!["no-journal".to_owned()]);
    let plain = FormatOptions { integrity_no_journal: true, ..luks2_opts() };
    assert!(matches!(Luks::format(&io, &plain, b"p"), Err(Error::InvalidArgument(_))));
    // LUKS1 has no place for it, and the key must fit the cipher.
    let io = MemoryIo::new(3 << 20);
    let luks1 =
        FormatOptions { integrity: Some(IntegrityKind::HmacSha256), key_bytes: 96, ..luks1_opts() };
    assert!(matches!(Luks::format(&io, &luks1, b"p"), Err(Error::InvalidArgument(_))));
    let short =
        FormatOptions { integrity: Some(IntegrityKind::HmacSha256), key_bytes: 48, ..luks2_opts() };
    let message = Luks::format(&io, &short, b"p").unwrap_err().to_string();
    assert!(message.contains("aes-xts-plain64 with a 128-bit key"), "{message}");
}

#[test]
fn luks2_tokens() {
    let io = MemoryIo::new(3 << 20);
    let (mut luks, _) = Luks::format(&io, &luks2_opts(), b"p0").unwrap();
    let t = json!({"type": "vendor-kms", "keyslots": ["0"], "nested": {"a": [1, "b"]}});
    assert_eq!(luks.add_token(&io, t.clone(), None).unwrap(), 0);
    assert_eq!(luks.add_token(&io, t.clone(), Some(7)).unwrap(), 7);
    assert!(matches!(luks.add_token(&io, t.clone(), Some(7)), Err(Error::InvalidArgument(_))));
    for bad in [
        json!("string"),
        json!({"keyslots": []}),
        json!({"type": 1, "keyslots": []}),
        json!({"type": "x"}),
        json!({"type": "x", "keyslots": [0]}),
        json!({"type": "x", "keyslots": ["3"]}),
        json!({"type": "luks2-other", "keyslots": []}),
    ] {
        assert!(
            matches!(luks.add_token(&io, bad.clone(), None), Err(Error::InvalidArgument(_))),
            "{bad}"
        );
    }
    let keyring = json!({"type": "luks2-keyring", "keyslots": ["0"], "key_description": "k"});
    assert_eq!(luks.add_token(&io, keyring, None).unwrap(), 1);

    let (mut luks, _) = Luks::load(&io).unwrap();
    let tokens = luks.tokens();
    assert_eq!(tokens.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![0, 1, 7]);
    assert_eq!(tokens[0].1, t);
    luks.remove_token(&io, 7).unwrap();
    assert!(matches!(luks.remove_token(&io, 7), Err(Error::InvalidArgument(_))));
    assert_eq!(Luks::load(&io).unwrap().0.tokens().len(), 2);
    assert!(luks.to_json()["tokens"][0]["json"]["nested"]["a"][1] == "b");

    // Replacing a token is one header write; a bad or missing one is refused.
    let newer = json!({"type": "vendor-kms", "keyslots": ["0"], "key_version": 2});
    luks.replace_token(&io, 0, newer.clone()).unwrap();
    assert_eq!(Luks::load(&io).unwrap().0.tokens()[0].1, newer);
    assert!(matches!(luks.replace_token(&io, 9, newer.clone()), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        luks.replace_token(&io, 0, json!({"type": "x", "keyslots": ["5"]})),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(Luks::load(&io).unwrap().0.tokens()[0].1, newer);

    // A token too large for the JSON area is refused without writing.
    let huge = json!({"type": "x", "keyslots": [], "blob": "a".repeat(20_000)});
    assert!(matches!(luks.add_token(&io, huge, None), Err(Error::NoSpace(_))));
    assert_eq!(Luks::load(&io).unwrap().0.tokens().len(), 2);
}

#[test]
fn luks1_management() {
    let io = MemoryIo::new(3 << 20);
    let (mut luks, key) = Luks::format(&io, &luks1_opts(), b"p0").unwrap();
    assert_eq!(luks.version(), LuksVersion::Luks1);
    assert_eq!(luks.segment().unwrap().offset, 2 << 20);
    assert_eq!(luks.header_bytes(), 2 << 20);
    assert_eq!(luks.metadata_end(), (3536 + 500) * 512);
    assert!(luks.tokens().is_empty());
    assert!(matches!(
        luks.add_token(&io, json!({"type": "x", "keyslots": []}), None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(luks.remove_token(&io, 0), Err(Error::InvalidArgument(_))));
    let pb = fast_pbkdf2(HashAlg::Sha512); // LUKS1 keeps the header hash
    for i in 1..8 {
        assert_eq!(luks.add_keyslot(&io, &key, format!("p{i}").as_bytes(), &pb, None).unwrap(), i);
    }
    assert!(matches!(luks.add_keyslot(&io, &key, b"p8", &pb, None), Err(Error::NoSpace(_))));
    assert!(matches!(
        luks.add_keyslot(&io, &key, b"x", &fast_argon2(PbkdfKind::Argon2id), None),
        Err(Error::InvalidArgument(_))
    ));
    luks.remove_keyslot(&io, 4).unwrap();
    let (luks, _) = Luks::load(&io).unwrap();
    assert_eq!(luks.active_keyslots(), vec![0, 1, 2, 3, 5, 6, 7]);
    assert_eq!(luks.unlock(&io, b"p7", None).unwrap(), (7, key.clone()));
    assert!(matches!(luks.unlock(&io, b"p4", None), Err(Error::NoKey)));
    assert!(matches!(luks.unlock(&io, b"p7", Some(4)), Err(Error::InvalidArgument(_))));
    let dump = luks.dump_text();
    assert!(
        dump.contains("Key Slot 4: DISABLED") && dump.contains("Key Slot 7: ENABLED"),
        "{dump}"
    );
    let j = luks.to_json();
    assert_eq!(j["version"], 1);
    assert_eq!(j["data_offset"], 2 << 20);
    assert_eq!(j["key_bits"], 512);
}

#[test]
fn calibration_helper() {
    let choice = rampart_luks::PbkdfChoice {
        kind: PbkdfKind::Pbkdf2,
        iter_time_ms: 20,
        forced_iterations: None,
        ..rampart_luks::PbkdfChoice::default()
    };
    match pbkdf_for_time(&choice, 64).unwrap() {
        KdfParams::Pbkdf2 { hash, iterations } => {
            assert_eq!(hash, HashAlg::Sha256);
            assert!(iterations >= 1000);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn file_io_works_on_regular_files() {
    let dir = common::TempDir::new("fileio");
    let path = dir.sparse("v.img", 3 << 20);
    let file = common::open_rw(&path);
    let (mut luks, key) = Luks::format(&file, &luks2_opts(), b"pw").unwrap();
    luks.write(&file).unwrap();
    let (luks, _) = Luks::load(&std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(luks.unlock(&file, b"pw", None).unwrap().1, key);
    let mut buf = [0u8; 16];
    let err = file.read_at((3 << 20) - 8, &mut buf).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
}

#[test]
fn concurrent_updates_are_refused() {
    let io = MemoryIo::new(3 << 20);
    let (_, key) = Luks::format(&io, &luks2_opts(), b"p0").unwrap();
    let (mut first, _) = Luks::load(&io).unwrap();
    let (mut second, _) = Luks::load(&io).unwrap();
    first.add_token(&io, json!({"type": "x", "keyslots": []}), None).unwrap();
    let pb = fast_pbkdf2(HashAlg::Sha256);
    for err in [
        second.write(&io).unwrap_err(),
        second.add_keyslot(&io, &key, b"p1", &pb, None).unwrap_err(),
        second.remove_keyslot(&io, 0).unwrap_err(),
        second.add_token(&io, json!({"type": "y", "keyslots": []}), None).unwrap_err(),
    ] {
        assert!(err.to_string().contains("changed on disk"), "{err}");
    }
    // The first update is intact and the refused ones left no trace.
    let (luks, report) = Luks::load(&io).unwrap();
    assert!(report.warnings.is_empty());
    assert_eq!(luks.tokens().len(), 1);
    assert_eq!(luks.active_keyslots(), vec![0]);
    assert_eq!(luks.unlock(&io, b"p0", None).unwrap().1, key);
}

/// A reencryption that rebinds key-manager tokens: tokens for the new
/// keyslots land in the header write that starts it, each key opens from
/// the secret of a keyslot of its own side, and at the end the bindings of
/// the old keyslots go while other token types stay (as cryptsetup keeps
/// them).
#[test]
fn reencryption_with_tokens_for_the_new_keyslots() {
    let io = MemoryIo::new(20 << 20);
    let opts = luks2_opts();
    let (mut luks, old_key) = Luks::format(&io, &opts, b"pw").unwrap();
    let pbkdf = fast_pbkdf2(HashAlg::Sha256);
    luks.add_keyslot(&io, &old_key, b"old secret", &pbkdf, Some(1)).unwrap();
    let binding = |slot: usize| json!({"type": "rampart-kms", "keyslots": [slot.to_string()]});
    luks.add_token(&io, binding(1), Some(0)).unwrap();
    luks.add_token(&io, json!({"type": "other", "keyslots": ["1"]}), Some(1)).unwrap();

    let new_key = SecretBytes::new((0..64u8).map(|i| i.wrapping_mul(7).wrapping_add(1)).collect());
    let ids = luks.free_keyslots(2);
    assert_eq!(ids, vec![2, 3]);
    let resilience = rampart_luks::Resilience::None;
    // A token naming an old keyslot is refused, and nothing is written.
    let err = luks
        .reencrypt_init_with_tokens(
            &io,
            &old_key,
            &new_key,
            DataCipher::AesXtsPlain64,
            4096,
            resilience.clone(),
            &pbkdf,
            &[b"pw", b"new secret"],
            &[binding(1)],
            &[],
        )
        .unwrap_err();
    assert!(err.to_string().contains("only new keyslots"), "{err}");
    let (mut luks, _) = Luks::load(&io).unwrap();
    assert!(luks.reencrypt_state().unwrap().is_none());

    let slots = luks
        .reencrypt_init_with_tokens(
            &io,
            &old_key,
            &new_key,
            DataCipher::AesXtsPlain64,
            4096,
            resilience,
            &pbkdf,
            &[b"pw", b"new secret"],
            &[binding(3)],
            &[&pbkdf, &pbkdf],
        )
        .unwrap();
    assert_eq!(slots, ids);
    let (luks, _) = Luks::load(&io).unwrap();
    let tokens = luks.tokens();
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    assert!(tokens.iter().any(|(id, t)| *id == 2 && t["keyslots"] == json!(["3"])));
    // Each key from a secret of its own side; secrets of one side only
    // open nothing.
    let (old, new) = luks
        .reencrypt_unlock_slots(&io, &[(1, b"old secret".as_slice()), (3, b"new secret")])
        .unwrap();
    assert_eq!(old.expose(), old_key.expose());
    assert_eq!(new.expose(), new_key.expose());
    assert!(matches!(
        luks.reencrypt_unlock_slots(&io, &[(1, b"old secret".as_slice()), (3, b"wrong")]),
        Err(Error::NoKey)
    ));
    assert!(luks.reencrypt_unlock_slots(&io, &[(1, b"old secret".as_slice())]).is_err());

    // The end (the data itself is not moved here): the old keyslots go,
    // with the binding that named them; the other token stays, naming none.
    let mut luks = luks;
    luks.reencrypt_finish(&io).unwrap();
    let (luks, _) = Luks::load(&io).unwrap();
    assert_eq!(luks.active_keyslots(), vec![2, 3]);
    let tokens = luks.tokens();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert!(tokens
        .iter()
        .any(|(id, t)| *id == 1 && t["type"] == "other" && t["keyslots"] == json!([])));
    assert!(tokens.iter().any(|(id, t)| *id == 2 && t["keyslots"] == json!(["3"])));
}
