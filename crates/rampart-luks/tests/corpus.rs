//! A corpus of damaged and hostile headers: each either loads (saying how
//! it recovered) or fails with a specific error kind and reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{fast_argon2, fast_pbkdf2};
use rampart_crypto::digest;
use rampart_luks::{
    Error, FormatOptions, HashAlg, LoadReport, Luks, LuksVersion, MemoryIo, PbkdfKind,
};
use serde_json::{json, Value};

const HDR: usize = 16384;

/// A named JSON edit, the error kind it must cause and a fragment of its message.
type Case = (&'static str, Box<dyn Fn(&mut Value)>, &'static str, &'static str);
const PASS: &[u8] = b"pass";

/// A LUKS2 image: 16 KiB header copies, 1 MiB keyslots area, data at 2 MiB;
/// keyslot 0 PBKDF2 ("pass"), keyslot 1 Argon2id ("pass1").
fn luks2_image() -> Vec<u8> {
    let io = MemoryIo::new(3 << 20);
    let opts = FormatOptions {
        pbkdf: fast_pbkdf2(HashAlg::Sha256),
        keyslots_size: Some(1 << 20),
        ..FormatOptions::default()
    };
    let (mut luks, key) = Luks::format(&io, &opts, PASS).unwrap();
    luks.add_keyslot(&io, &key, b"pass1", &fast_argon2(PbkdfKind::Argon2id), None).unwrap();
    io.into_vec()
}

fn luks1_image() -> Vec<u8> {
    let io = MemoryIo::new(3 << 20);
    let opts = FormatOptions {
        pbkdf: fast_pbkdf2(HashAlg::Sha256),
        ..FormatOptions::default_for(LuksVersion::Luks1)
    };
    Luks::format(&io, &opts, PASS).unwrap();
    io.into_vec()
}

/// Recomputes the checksum of the header copy at `off`.
fn reseal(img: &mut [u8], off: usize) {
    let size = u64::from_be_bytes(img[off + 8..off + 16].try_into().unwrap()) as usize;
    let size = if (HDR..=4 << 20).contains(&size) { size } else { HDR };
    img[off + 448..off + 512].fill(0);
    let mut data = img[off..off + 4096].to_vec();
    data.extend_from_slice(&img[off + 4096..off + size]);
    let sum = digest(HashAlg::Sha256, &data);
    img[off + 448..off + 480].copy_from_slice(sum.expose());
}

fn json_at(img: &[u8], off: usize) -> Value {
    let area = &img[off + 4096..off + HDR];
    let end = area.iter().position(|&b| b == 0).unwrap();
    serde_json::from_slice(&area[..end]).unwrap()
}

fn put_json_text(img: &mut [u8], off: usize, text: &[u8]) {
    let area = &mut img[off + 4096..off + HDR];
    area.fill(0);
    area[..text.len()].copy_from_slice(text);
    reseal(img, off);
}

/// Applies `f` to the JSON of both copies and reseals them.
fn edit_json(img: &mut [u8], f: impl Fn(&mut Value)) {
    for off in [0, HDR] {
        let mut v = json_at(img, off);
        f(&mut v);
        put_json_text(img, off, &serde_json::to_vec(&v).unwrap());
    }
}

fn load(img: Vec<u8>) -> (MemoryIo, Result<(Luks, LoadReport), Error>) {
    let io = MemoryIo::from_vec(img);
    let r = Luks::load(&io);
    (io, r)
}

fn kind(e: &Error) -> &'static str {
    match e {
        Error::NoKey => "NoKey",
        Error::UnsupportedCipher(_) => "UnsupportedCipher",
        Error::UnknownRequirement(_) => "UnknownRequirement",
        Error::NotLuks(_) => "NotLuks",
        Error::Corrupt(_) => "Corrupt",
        Error::DeviceTooSmall { .. } => "DeviceTooSmall",
        Error::NoSpace(_) => "NoSpace",
        Error::InvalidArgument(_) => "InvalidArgument",
        Error::Io(_) => "Io",
        Error::Crypto(_) => "Crypto",
        _ => "other",
    }
}

#[track_caller]
fn expect_err(name: &str, img: Vec<u8>, want_kind: &str, fragment: &str) {
    match load(img).1 {
        Ok(_) => panic!("{name}: loaded, expected {want_kind} ({fragment})"),
        Err(e) => {
            let msg = e.to_string();
            assert_eq!(kind(&e), want_kind, "{name}: {msg}");
            assert!(msg.contains(fragment), "{name}: \"{msg}\" lacks \"{fragment}\"");
            assert!(!msg.contains('\n'), "{name}: message is not one line");
        }
    }
}

/// Loads, checks the report, and checks that the header still unlocks.
#[track_caller]
fn expect_ok(name: &str, img: Vec<u8>, secondary: bool, warning: Option<&str>) -> Luks {
    let (io, r) = load(img);
    let (luks, report) = r.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(report.used_secondary, secondary, "{name}: {:?}", report.warnings);
    match warning {
        Some(w) => assert!(
            report.warnings.iter().any(|x| x.contains(w)),
            "{name}: no warning with \"{w}\" in {:?}",
            report.warnings
        ),
        None => assert!(report.warnings.is_empty(), "{name}: {:?}", report.warnings),
    }
    luks.unlock(&io, PASS, Some(0)).unwrap_or_else(|e| panic!("{name}: unlock: {e}"));
    luks
}

/// Values outside what Rampart writes but inside what cryptsetup loads:
/// the header loads, and the keyslot (or segment) is refused when used,
/// with a message naming it (the fragment).
const LOADS_AS_CRYPTSETUP: &[&str] = &[
    "area too small for the key",
    "argon2 memory over 4 GiB",
    "argon2 memory over 32 bits",
    "argon2 time 0",
    "argon2 absurd threads",
    "pbkdf2 iterations 0",
    "negative iterations",
    "unknown kdf",
    "stripes 0",
    "stripes huge",
    "stripes over 32 bits",
    "key size huge",
    "salt wrong length",
    "salt not base64",
    "segment offset + size overflow",
];

/// Loads (as cryptsetup does); every use of the header is an error or a
/// success, never a panic, and the keyslot it names is refused.
#[track_caller]
fn expect_use_refusal(name: &str, img: Vec<u8>, _why: &str) {
    let (io, r) = load(img);
    let (luks, _) = r.unwrap_or_else(|e| panic!("{name}: cryptsetup loads this header: {e}"));
    let _ = luks.segment();
    let _ = luks.dump_text();
    let _ = luks.to_json();
    for slot in [0, 1] {
        let pass: &[u8] = if slot == 0 { PASS } else { b"pass1" };
        if let Err(e) = luks.unlock(&io, pass, Some(slot)) {
            assert!(!e.to_string().contains('\n'), "{name}: {e}");
        }
    }
}

fn set(img: &mut [u8], at: usize, bytes: &[u8]) {
    img[at..at + bytes.len()].copy_from_slice(bytes);
}

#[test]
fn luks2_binary_header_damage() {
    let base = luks2_image();
    expect_ok("pristine", base.clone(), false, None);

    let mut img = base.clone();
    img[0..6].fill(0);
    expect_ok("bad primary magic", img, true, Some("bad magic"));

    let mut img = base.clone();
    img[0..6].fill(0);
    img[HDR..HDR + 6].fill(0);
    expect_err("bad magic in both", img, "NotLuks", "bad magic");

    let mut img = base.clone();
    img[4096 + 10] ^= 0x20;
    expect_ok(
        "bad primary checksum",
        img,
        true,
        Some("primary LUKS2 header is corrupt (checksum mismatch)"),
    );

    let mut img = base.clone();
    img[HDR + 4096 + 10] ^= 0x20;
    expect_ok("bad secondary checksum", img, false, Some("secondary LUKS2 header is unusable"));

    let mut img = base.clone();
    img[4096 + 10] ^= 0x20;
    img[HDR + 4096 + 10] ^= 0x20;
    expect_err("bad checksum in both", img, "Corrupt", "checksum mismatch");

    let mut img = base.clone();
    set(&mut img, 6, &3u16.to_be_bytes());
    set(&mut img, HDR + 6, &3u16.to_be_bytes());
    expect_err("unknown version", img, "Corrupt", "unsupported LUKS version 3");

    // An absurd header size must not be used to size a read: the primary
    // is rejected before its JSON area is read and the secondary is found.
    let mut img = base.clone();
    set(&mut img, 8, &(1u64 << 40).to_be_bytes());
    reseal(&mut img, 0);
    expect_ok("absurd primary hdr_size", img, true, Some("not a LUKS2 header size"));

    let mut img = base.clone();
    set(&mut img, 256, &512u64.to_be_bytes());
    reseal(&mut img, 0);
    expect_ok("misplaced primary", img, true, Some("found at 0"));

    let mut img = base.clone();
    set(&mut img, HDR + 8, &(2 * HDR as u64).to_be_bytes());
    reseal(&mut img, HDR);
    expect_ok("secondary size mismatch", img, false, Some("does not match its offset"));

    let mut img = base.clone();
    set(&mut img, 72, b"md5\0");
    set(&mut img, HDR + 72, b"md5\0");
    expect_err("unknown checksum algorithm", img, "Corrupt", "checksum algorithm \"md5\"");

    // A secondary of another volume (a stale copy) is not used.
    let mut img = base.clone();
    img[HDR + 168] = if img[HDR + 168] == b'0' { b'1' } else { b'0' };
    reseal(&mut img, HDR);
    expect_ok("secondary of another volume", img, false, Some("belongs to another volume"));

    // The secondary is newer (seqid higher): it wins.
    let mut img = base.clone();
    let seq = u64::from_be_bytes(img[16..24].try_into().unwrap());
    set(&mut img, HDR + 16, &(seq + 5).to_be_bytes());
    reseal(&mut img, HDR);
    expect_ok("newer secondary", img, true, Some("newer"));
    // The primary is newer: it wins, and the older secondary is reported.
    let mut img = base.clone();
    set(&mut img, 16, &(seq + 5).to_be_bytes());
    reseal(&mut img, 0);
    expect_ok("newer primary", img, false, Some("older"));
}

#[test]
fn luks2_json_area_damage() {
    let base = luks2_image();

    let mut img = base.clone();
    put_json_text(&mut img, 0, b"[1,2,3]");
    put_json_text(&mut img, HDR, b"[1,2,3]");
    expect_err("json not an object", img, "Corrupt", "JSON metadata is not an object");

    let mut img = base.clone();
    put_json_text(&mut img, 0, br#"{"keyslots":"#);
    put_json_text(&mut img, HDR, br#"{"keyslots":"#);
    expect_err("json does not parse", img, "Corrupt", "does not parse");

    let mut img = base.clone();
    let end = 4096 + img[4096..HDR].iter().position(|&b| b == 0).unwrap();
    img[end + 5] = b'x';
    reseal(&mut img, 0);
    expect_ok("garbage after json", img, true, Some("non-zero bytes after the JSON text"));

    let mut img = base.clone();
    img[4096..HDR].fill(b' ');
    img[4096] = b'{';
    reseal(&mut img, 0);
    expect_ok("json not terminated", img, true, Some("not NUL-terminated"));

    let mut img = base.clone();
    edit_json(&mut img, |v| {
        v.as_object_mut().unwrap().remove("digests");
    });
    expect_err("missing section", img, "Corrupt", "the \"digests\" section is missing");
}

#[test]
fn luks2_config_damage() {
    let base = luks2_image();
    let cases: Vec<Case> = vec![
        (
            "json_size overflow",
            Box::new(|v| v["config"]["json_size"] = json!("99999999999999999999")),
            "Corrupt",
            "does not fit in 64 bits",
        ),
        (
            "json_size mismatch",
            Box::new(|v| v["config"]["json_size"] = json!("28672")),
            "Corrupt",
            "does not match the binary header size",
        ),
        (
            "json_size not a number",
            Box::new(|v| v["config"]["json_size"] = json!("12k")),
            "Corrupt",
            "is not an unsigned decimal number",
        ),
        (
            "json_size as integer",
            Box::new(|v| v["config"]["json_size"] = json!(12288)),
            "Corrupt",
            "config",
        ),
        (
            "keyslots_size unaligned",
            Box::new(|v| v["config"]["keyslots_size"] = json!("1000")),
            "Corrupt",
            "keyslots_size 1000",
        ),
        (
            "keyslots_size into the data",
            Box::new(|v| v["config"]["keyslots_size"] = json!("4194304")),
            "Corrupt",
            "data offset 2097152 lies inside the header and keyslots area",
        ),
        (
            "requirements not an object",
            Box::new(|v| v["config"]["requirements"] = json!(["x"])),
            "Corrupt",
            "config",
        ),
    ];
    for (name, f, want, fragment) in cases {
        let mut img = base.clone();
        edit_json(&mut img, f);
        if LOADS_AS_CRYPTSETUP.contains(&name) {
            expect_use_refusal(name, img, fragment);
        } else {
            expect_err(name, img, want, fragment);
        }
    }
}

#[test]
fn luks2_keyslot_damage() {
    let base = luks2_image();
    let cases: Vec<Case> = vec![
        (
            "area beyond the keyslots area",
            Box::new(|v| v["keyslots"]["0"]["area"]["offset"] = json!("2097152")),
            "Corrupt",
            "lies outside the keyslots area",
        ),
        (
            "area inside the header copies",
            Box::new(|v| v["keyslots"]["0"]["area"]["offset"] = json!("4096")),
            "Corrupt",
            "lies outside the keyslots area",
        ),
        (
            "area offset overflow",
            Box::new(|v| v["keyslots"]["0"]["area"]["offset"] = json!("18446744073709551000")),
            "Corrupt",
            "overflows 64 bits",
        ),
        (
            "area too small for the key",
            Box::new(|v| v["keyslots"]["0"]["area"]["size"] = json!("4096")),
            "Corrupt",
            "smaller than its 256000-byte key material",
        ),
        (
            "overlapping areas",
            Box::new(|v| v["keyslots"]["1"]["area"] = v["keyslots"]["0"]["area"].clone()),
            "Corrupt",
            "overlaps",
        ),
        (
            "argon2 memory over 4 GiB",
            Box::new(|v| v["keyslots"]["1"]["kdf"]["memory"] = json!(4_194_305)),
            "Corrupt",
            "exceeds the 4 GiB limit",
        ),
        (
            "argon2 memory over 32 bits",
            Box::new(|v| v["keyslots"]["1"]["kdf"]["memory"] = json!(5_000_000_000u64)),
            "Corrupt",
            "expected u32",
        ),
        (
            "argon2 time 0",
            Box::new(|v| v["keyslots"]["1"]["kdf"]["time"] = json!(0)),
            "Corrupt",
            "time cost is 0",
        ),
        (
            "argon2 absurd threads",
            Box::new(|v| v["keyslots"]["1"]["kdf"]["cpus"] = json!(1000)),
            "Corrupt",
            "parallelism 1000",
        ),
        (
            "pbkdf2 iterations 0",
            Box::new(|v| v["keyslots"]["0"]["kdf"]["iterations"] = json!(0)),
            "Corrupt",
            "PBKDF2 iterations is 0",
        ),
        (
            "negative iterations",
            Box::new(|v| v["keyslots"]["0"]["kdf"]["iterations"] = json!(-5)),
            "Corrupt",
            "keyslot 0",
        ),
        (
            "unknown kdf",
            Box::new(|v| v["keyslots"]["0"]["kdf"]["type"] = json!("scrypt")),
            "Corrupt",
            "scrypt",
        ),
        (
            "stripes 0",
            Box::new(|v| v["keyslots"]["0"]["af"]["stripes"] = json!(0)),
            "Corrupt",
            "stripe count 0",
        ),
        (
            "stripes huge",
            Box::new(|v| v["keyslots"]["0"]["af"]["stripes"] = json!(4_000_000)),
            "Corrupt",
            "stripe count 4000000",
        ),
        (
            "stripes over 32 bits",
            Box::new(|v| v["keyslots"]["0"]["af"]["stripes"] = json!(1u64 << 40)),
            "Corrupt",
            "expected u32",
        ),
        (
            "key size huge",
            Box::new(|v| v["keyslots"]["0"]["key_size"] = json!(4096)),
            "Corrupt",
            "key size 4096 bytes",
        ),
        (
            "salt wrong length",
            Box::new(|v| v["keyslots"]["0"]["kdf"]["salt"] = json!("AAAAAAAAAAAAAAAAAAAAAA==")),
            "Corrupt",
            "salt is 16 bytes",
        ),
        (
            "salt not base64",
            Box::new(|v| v["keyslots"]["0"]["kdf"]["salt"] = json!("***")),
            "Corrupt",
            "not valid base64",
        ),
        (
            "keyslot without digest",
            Box::new(|v| v["digests"]["0"]["keyslots"] = json!(["0"])),
            "Corrupt",
            "keyslot 1 is assigned to 0 digests",
        ),
        (
            "digest refers to missing keyslot",
            Box::new(|v| v["digests"]["0"]["keyslots"] = json!(["0", "1", "7"])),
            "Corrupt",
            "missing keyslot 7",
        ),
        (
            "keyslot name not a number",
            Box::new(|v| {
                let ks = v["keyslots"]["0"].clone();
                v["keyslots"]["x0"] = ks;
            }),
            "Corrupt",
            "not an object id",
        ),
        (
            "token refers to missing keyslot",
            Box::new(|v| v["tokens"]["0"] = json!({"type": "t", "keyslots": ["9"]})),
            "Corrupt",
            "missing keyslot 9",
        ),
    ];
    for (name, f, want, fragment) in cases {
        let mut img = base.clone();
        edit_json(&mut img, f);
        if LOADS_AS_CRYPTSETUP.contains(&name) {
            expect_use_refusal(name, img, fragment);
        } else {
            expect_err(name, img, want, fragment);
        }
    }
}

#[test]
fn luks2_segment_damage() {
    let base = luks2_image();
    let cases: Vec<Case> = vec![
        (
            "segment offset + size overflow",
            Box::new(|v| {
                v["segments"]["0"]["offset"] = json!("18446744073709550592");
                v["segments"]["0"]["size"] = json!("1048576");
            }),
            "Corrupt",
            "overflows 64 bits",
        ),
        (
            "segment offset overflow",
            Box::new(|v| v["segments"]["0"]["offset"] = json!("18446744073709551616")),
            "Corrupt",
            "does not fit in 64 bits",
        ),
        (
            "segment offset unaligned",
            Box::new(|v| v["segments"]["0"]["offset"] = json!("2097153")),
            "Corrupt",
            "not a multiple of 512",
        ),
        (
            "segment inside the header",
            Box::new(|v| v["segments"]["0"]["offset"] = json!("65536")),
            "Corrupt",
            "data offset 65536 lies inside",
        ),
        (
            "segment size zero",
            Box::new(|v| v["segments"]["0"]["size"] = json!("0")),
            "Corrupt",
            "segment size 0",
        ),
        (
            "bad sector size",
            Box::new(|v| v["segments"]["0"]["sector_size"] = json!(520)),
            "Corrupt",
            "sector size 520",
        ),
        (
            "no segments",
            Box::new(|v| {
                v["segments"] = json!({});
                v["digests"]["0"]["segments"] = json!([]);
            }),
            "Corrupt",
            "segments section is empty",
        ),
        (
            "segment without digest",
            Box::new(|v| v["digests"]["0"]["segments"] = json!([])),
            "Corrupt",
            "segment 0 has no digest",
        ),
    ];
    for (name, f, want, fragment) in cases {
        let mut img = base.clone();
        edit_json(&mut img, f);
        if LOADS_AS_CRYPTSETUP.contains(&name) {
            expect_use_refusal(name, img, fragment);
        } else {
            expect_err(name, img, want, fragment);
        }
    }
}

#[test]
fn luks2_short_devices() {
    let base = luks2_image();
    expect_err("truncated inside the JSON area", base[..10_000].to_vec(), "Corrupt", "truncated");
    expect_err(
        "truncated inside the binary header",
        base[..100].to_vec(),
        "Corrupt",
        "beyond the end",
    );
    expect_err("empty device", Vec::new(), "NotLuks", "no LUKS header found");
    expect_err("zeroed device", vec![0; 1 << 20], "NotLuks", "bad magic");
    // Both header copies intact but the keyslots area runs past the end.
    expect_err(
        "header larger than the file",
        base[..1 << 20].to_vec(),
        "DeviceTooSmall",
        "needs 1081344 bytes",
    );
    // A detached header (data offset 0) with the keyslots area cut short.
    let mut img = base.clone();
    edit_json(&mut img, |v| v["segments"]["0"]["offset"] = json!("0"));
    img.truncate(200_000);
    expect_err("detached header cut short", img, "DeviceTooSmall", "the device has 200000");
}

#[test]
fn luks2_refusals_after_load() {
    let base = luks2_image();

    // Unknown mandatory requirement: inspectable, not unlockable or writable.
    let mut img = base.clone();
    edit_json(&mut img, |v| {
        v["config"]["requirements"] = json!({"mandatory": ["vendor-feature"]});
    });
    let (io, r) = load(img);
    let (mut luks, report) = r.unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("vendor-feature")));
    assert!(luks.dump_text().contains("vendor-feature"));
    // As cryptsetup: the passphrase can be tested; nothing is mapped or written.
    assert!(luks.unlock(&io, PASS, None).is_ok());
    for err in [
        luks.write(&io).unwrap_err(),
        luks.segment().unwrap_err(),
        luks.add_token(&io, json!({"type": "t", "keyslots": []}), None).unwrap_err(),
    ] {
        assert!(matches!(&err, Error::UnknownRequirement(r) if r == "vendor-feature"), "{err}");
    }

    // Unsupported data and keyslot cipher.
    let mut img = base.clone();
    edit_json(&mut img, |v| {
        v["segments"]["0"]["encryption"] = json!("serpent-xts-plain64");
        v["keyslots"]["0"]["area"]["encryption"] = json!("serpent-xts-plain64");
        v["keyslots"]["1"]["area"]["encryption"] = json!("serpent-xts-plain64");
    });
    let (io, r) = load(img);
    let (luks, _) = r.unwrap();
    let err = luks.segment().unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedCipher(_)) && err.to_string().contains("serpent"),
        "{err}"
    );
    let err = luks.unlock(&io, PASS, None).unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedCipher(_)) && err.to_string().contains("only AES"),
        "{err}"
    );

    // Authenticated encryption segment.
    let mut img = base.clone();
    edit_json(&mut img, |v| {
        v["segments"]["0"]["integrity"] = json!({"type": "hmac(sha256)", "journal_encryption": "none", "journal_integrity": "none"});
    });
    let (_, r) = load(img);
    let err = r.unwrap().0.segment().unwrap_err();
    assert!(err.to_string().contains("authenticated encryption"), "{err}");

    // Several segments (reencryption): refused for mapping.
    let mut img = base.clone();
    edit_json(&mut img, |v| {
        v["segments"]["0"]["size"] = json!("1048576");
        let mut second = v["segments"]["0"].clone();
        second["offset"] = json!("3145728");
        second["size"] = json!("dynamic");
        v["segments"]["1"] = second;
        v["digests"]["0"]["segments"] = json!(["0", "1"]);
    });
    let (_, r) = load(img);
    let err = r.unwrap().0.segment().unwrap_err();
    assert!(err.to_string().contains("2 data segments"), "{err}");

    // An unsupported keyslot hash only disables that keyslot.
    let mut img = base.clone();
    edit_json(&mut img, |v| v["keyslots"]["0"]["af"]["hash"] = json!("whirlpool"));
    let (io, r) = load(img);
    let (luks, _) = r.unwrap();
    assert!(matches!(luks.unlock(&io, b"pass1", None), Ok((1, _))));
    let err = luks.unlock(&io, PASS, Some(0)).unwrap_err();
    assert!(err.to_string().contains("whirlpool"), "{err}");
    // The passphrase opens no keyslot Rampart can use: the error names the
    // keyslot it could not try.
    let err = luks.unlock(&io, PASS, None).unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedCipher(_)) && err.to_string().contains("whirlpool"),
        "{err}"
    );
}

#[test]
fn luks2_unknown_fields_are_preserved() {
    let mut img = luks2_image();
    edit_json(&mut img, |v| {
        v["future"] = json!({"x": [1, 2]});
        v["config"]["flags"] = json!(["allow-discards", "vendor-flag"]);
        v["keyslots"]["0"]["vendor"] = json!("kept");
        v["segments"]["0"]["flags"] = json!(["something"]);
    });
    let (io, r) = load(img);
    let (mut luks, _) = r.unwrap();
    luks.write(&io).unwrap();
    let img = io.into_vec();
    let v = json_at(&img, 0);
    assert_eq!(v["future"], json!({"x": [1, 2]}));
    assert_eq!(v["config"]["flags"], json!(["allow-discards", "vendor-flag"]));
    assert_eq!(v["keyslots"]["0"]["vendor"], json!("kept"));
    assert_eq!(v["segments"]["0"]["flags"], json!(["something"]));
    assert_eq!(json_at(&img, HDR), v);
}

const L1_SLOT: usize = 208;

#[test]
fn luks1_damage() {
    let base = luks1_image();
    expect_ok("luks1 pristine", base.clone(), false, None);

    let mut img = base.clone();
    set(&mut img, 6, &3u16.to_be_bytes());
    expect_err("luks1 version 3", img, "Corrupt", "unsupported LUKS version 3");

    let mut img = base.clone();
    set(&mut img, L1_SLOT + 3 * 48 + 44, &0u32.to_be_bytes());
    expect_err("luks1 stripes 0", img, "Corrupt", "keyslot 3: 0 stripes");

    let mut img = base.clone();
    set(&mut img, 108, &100_000u32.to_be_bytes());
    expect_err("luks1 key size", img, "Corrupt", "key size 100000 bytes");

    let mut img = base.clone();
    set(&mut img, L1_SLOT + 7 * 48 + 40, &4095u32.to_be_bytes());
    expect_err("luks1 key material in the data", img, "Corrupt", "reaches into the data");

    let mut img = base.clone();
    set(&mut img, L1_SLOT + 2 * 48 + 40, &600u32.to_be_bytes());
    expect_err("luks1 overlapping key material", img, "Corrupt", "overlapping");

    let mut img = base.clone();
    set(&mut img, 164, &0u32.to_be_bytes());
    expect_err("luks1 digest iterations 0", img, "Corrupt", "digest iterations is 0");

    let mut img = base.clone();
    set(&mut img, L1_SLOT + 4, &0u32.to_be_bytes());
    expect_err("luks1 slot iterations 0", img, "Corrupt", "keyslot 0: iterations is 0");

    expect_err(
        "luks1 truncated",
        base[..1 << 20].to_vec(),
        "DeviceTooSmall",
        "LUKS1 header and keyslots",
    );
    expect_err("luks1 tiny", base[..300].to_vec(), "DeviceTooSmall", "a LUKS1 header");

    let mut img = base.clone();
    set(&mut img, L1_SLOT + 48, &0x1234_5678u32.to_be_bytes());
    expect_ok("luks1 invalid slot state", img, false, Some("keyslot 1 is in an invalid state"));

    // Unsupported cipher: loads for inspection, refuses to map or unlock.
    let mut img = base.clone();
    img[8..40].fill(0);
    set(&mut img, 8, b"serpent");
    let (io, r) = load(img);
    let (luks, _) = r.unwrap();
    assert!(matches!(luks.segment(), Err(Error::UnsupportedCipher(_))));
    assert!(matches!(luks.unlock(&io, PASS, None), Err(Error::UnsupportedCipher(_))));
    assert!(luks.dump_text().contains("serpent"));

    let mut img = base.clone();
    img[72..104].fill(0);
    set(&mut img, 72, b"ripemd160");
    let (io, r) = load(img);
    let err = r.unwrap().0.unlock(&io, PASS, None).unwrap_err();
    assert!(err.to_string().contains("ripemd160"), "{err}");
}
