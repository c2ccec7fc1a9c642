#![allow(clippy::unwrap_used)]
//! `rampart encrypt` / `rampart decrypt` as a user runs them: round trips
//! through files and pipes with passphrases and raw keys, random-access
//! ranges against slices of the plaintext, every kind of tampering
//! (truncation, extension, reordering, segment swaps between files, header
//! edits, wrong keys) refused with one line, exit 2 and no plaintext
//! output, and real `openssl enc` files for each supported cipher and key
//! derivation.

use crate::helpers::common;

use std::path::Path;

use common::{assert_same, ok, p, rampart, rampart_in, random_bytes, run, TempDir};

const CHEAP: &[&str] = &["--pbkdf-force-iterations", "4", "--pbkdf-memory", "1024"];
const SEGMENT: usize = 4096;

fn encrypt(tmp: &TempDir, name: &str, plain: &[u8], extra: &[&str]) -> Vec<u8> {
    let input = tmp.file(&format!("{name}.plain"), plain);
    let output = tmp.join(&format!("{name}.rf"));
    let mut args = vec!["encrypt", p(&input), "-o", p(&output), "--segment-size", "4K"];
    args.extend_from_slice(extra);
    ok("encrypt", rampart(&args));
    std::fs::read(output).unwrap()
}

/// Asserts that decrypting `bytes` fails with exit 2, one line naming
/// `reason`, and leaves no output file.
#[track_caller]
fn refused(tmp: &TempDir, bytes: &[u8], key: &[&str], reason: &str) {
    let input = tmp.file("bad.rf", bytes);
    let output = tmp.join("bad.out");
    let mut args = vec!["decrypt", p(&input), "-o", p(&output)];
    args.extend_from_slice(key);
    let out = rampart(&args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "expected exit 2 ({reason}): {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("rampart: error: ") && err.contains(reason), "{reason}: {err}");
    assert!(!output.exists(), "no partial output ({reason})");
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".rampart-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

fn body_start(file: &[u8]) -> usize {
    u32::from_be_bytes(file[31..35].try_into().unwrap()) as usize
}

#[test]
fn round_trips_with_passphrases_raw_keys_and_pipes() {
    let tmp = TempDir::new("file-roundtrip");
    let pass = tmp.file("pass", b"correct horse");
    let raw = tmp.file("raw", &random_bytes(1, 32));
    for len in [0usize, 1, 4039, 4040, 4041, 100_000] {
        let plain = random_bytes(len as u64, len);
        let mut args = vec!["--key-file", p(&pass), "--raw-key-file", p(&raw)];
        args.extend_from_slice(CHEAP);
        let file = encrypt(&tmp, "rt", &plain, &args);
        let enc = tmp.file("rt.rf", &file);
        for key in [["--key-file", p(&pass)], ["--raw-key-file", p(&raw)]] {
            let out = tmp.join("rt.out");
            ok("decrypt", rampart(&["decrypt", p(&enc), "-o", p(&out), key[0], key[1]]));
            assert_same("file round trip", &std::fs::read(&out).unwrap(), &plain);
        }
        // Standard input to standard output.
        let out = ok("decrypt pipe", rampart_in(&["decrypt", "--raw-key-file", p(&raw)], &file));
        assert_same("pipe round trip", &out.stdout, &plain);
    }
    // Encrypting from a pipe, with a JSON summary.
    let plain = random_bytes(9, 50_000);
    let out = ok(
        "encrypt pipe",
        rampart_in(&["encrypt", "--raw-key-file", p(&raw), "--segment-size", "4K"], &plain),
    );
    let back =
        ok("decrypt", rampart_in(&["decrypt", "--raw-key-file", p(&raw), "--json"], &out.stdout));
    assert_same("pipe", &back.stdout, &plain);
    let summary: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&back.stderr).trim()).unwrap();
    assert_eq!(summary["plaintext_bytes"], 50_000);
    assert_eq!(summary["opened_by"], "raw key");
}

#[test]
fn random_access_reads_equal_slices() {
    let tmp = TempDir::new("file-range");
    let raw = tmp.file("raw", &random_bytes(2, 32));
    let plain = random_bytes(3, 300_000);
    let file = encrypt(&tmp, "range", &plain, &["--raw-key-file", p(&raw)]);
    let enc = tmp.file("range.rf", &file);
    for (offset, length) in [
        (0usize, 1usize),
        (0, 4040),
        (4039, 2),
        (4040, 4080),
        (12345, 67890),
        (299_999, 10),
        (250_000, 50_000),
        (300_000, 5),
    ] {
        let out = ok(
            "range",
            rampart(&[
                "decrypt",
                p(&enc),
                "--raw-key-file",
                p(&raw),
                "--offset",
                &offset.to_string(),
                "--length",
                &length.to_string(),
            ]),
        );
        let end = (offset + length).min(plain.len());
        assert_same(&format!("range {offset}+{length}"), &out.stdout, &plain[offset..end]);
    }
    // A range needs only its own segments: damage elsewhere does not matter.
    let mut damaged = file.clone();
    let last = damaged.len() - 5;
    damaged[last] ^= 1;
    let bad = tmp.file("damaged.rf", &damaged);
    let out = ok(
        "range before the damage",
        rampart(&[
            "decrypt",
            p(&bad),
            "--raw-key-file",
            p(&raw),
            "--offset",
            "5000",
            "--length",
            "10000",
        ]),
    );
    assert_same("range", &out.stdout, &plain[5000..15000]);
}

#[test]
fn tampering_and_wrong_keys_are_refused_without_plaintext() {
    let tmp = TempDir::new("file-tamper");
    let pass = tmp.file("pass", b"the passphrase");
    let wrong = tmp.file("wrong", b"not the passphrase");
    let mut args = vec!["--key-file", p(&pass)];
    args.extend_from_slice(CHEAP);
    let plain = random_bytes(4, 5 * SEGMENT + 100);
    let file = encrypt(&tmp, "a", &plain, &args);
    let other = encrypt(&tmp, "b", &plain, &args);
    let key = ["--key-file", p(&pass)];
    let start = body_start(&file);
    // Segment i (i >= 1) of the stream starts at i * 4096 from its start.
    let seg = |i: usize| start + i * SEGMENT;

    refused(&tmp, &file, &["--key-file", p(&wrong)], "wrong passphrase");
    refused(&tmp, &file[..file.len() - 1], &key, "segment 5 (the last)");
    refused(&tmp, &file[..seg(5)], &key, "segment 4 (the last)");
    refused(&tmp, &file[..start + 40 + 5], &key, "truncated");
    let mut extended = file.clone();
    extended.extend_from_slice(&[0u8; 100]);
    refused(&tmp, &extended, &key, "segment 5 (the last)");
    let mut appended = file.clone();
    appended.extend_from_slice(&file[seg(1)..seg(2)]);
    refused(&tmp, &appended, &key, "segment 5 failed authentication");
    let mut reordered = file.clone();
    reordered[seg(1)..seg(2)].copy_from_slice(&file[seg(2)..seg(3)]);
    reordered[seg(2)..seg(3)].copy_from_slice(&file[seg(1)..seg(2)]);
    refused(&tmp, &reordered, &key, "segment 1 failed authentication");
    let mut swapped = file.clone();
    swapped[seg(2)..seg(3)].copy_from_slice(&other[seg(2)..seg(3)]);
    refused(&tmp, &swapped, &key, "segment 2 failed authentication");
    let mut flipped = file.clone();
    flipped[seg(3) + 7] ^= 0x40;
    refused(&tmp, &flipped, &key, "segment 3 failed authentication");
    // Header edits: the segment size, the file id, the stanza, the MAC,
    // the stream header's salt, and a stanza from another file.
    let mut edited = file.clone();
    edited[13] ^= 1;
    refused(&tmp, &edited, &key, "");
    for at in [20, start - 40, start - 1, start + 5] {
        let mut edited = file.clone();
        edited[at] ^= 1;
        refused(&tmp, &edited, &key, "");
    }
    let mut foreign = file.clone();
    foreign[35..start - 32].copy_from_slice(&other[35..start - 32]);
    refused(&tmp, &foreign, &key, "wrong passphrase");
    refused(&tmp, b"plain text, not encrypted", &key, "not a Rampart encrypted file");
    refused(&tmp, &file[..20], &key, "truncated");

    // A pipe stops before the first unauthenticated segment: what it wrote
    // is exactly the authentic segments before it.
    let out = rampart_in(&["decrypt", "--key-file", p(&pass)], &flipped);
    assert_eq!(out.status.code(), Some(2));
    assert!(plain.starts_with(&out.stdout), "only authentic plaintext");
    assert!(out.stdout.len() < 3 * SEGMENT, "nothing from the bad segment on");
    // An existing output file is left untouched by a failed decryption.
    let keep = tmp.file("keep.out", b"precious");
    let bad = tmp.file("flipped.rf", &flipped);
    let out = rampart(&["decrypt", p(&bad), "-o", p(&keep), "--key-file", p(&pass)]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&keep).unwrap(), b"precious");
}

fn openssl_enc(tmp: &TempDir, plain: &Path, cipher: &str, kdf: &[&str]) -> std::path::PathBuf {
    let out = tmp.join(&format!("{cipher}-{}.enc", kdf.join("_")));
    let mut args = vec!["enc", &format!("-{cipher}"), "-e", "-salt", "-pass", "pass:open sesame"]
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    args.extend(kdf.iter().map(|s| (*s).to_owned()));
    args.extend(["-in".into(), p(plain).to_owned(), "-out".into(), p(&out).to_owned()]);
    ok("openssl enc", run("openssl", &args));
    out
}

#[test]
fn openssl_enc_files_decrypt_for_every_cipher_and_kdf() {
    let tmp = TempDir::new("file-openssl");
    let pass = tmp.file("pass", b"open sesame");
    let wrong = tmp.file("wrong", b"open sesame!");
    for len in [0usize, 15, 16, 17, 1 << 20 | 33] {
        let plain = random_bytes(len as u64 + 11, len);
        let input = tmp.file("plain", &plain);
        for cipher in ["aes-128-cbc", "aes-256-cbc", "aes-128-ctr", "aes-256-ctr"] {
            let kdfs: [(&[&str], &[&str]); 5] = [
                (&["-pbkdf2"], &["--pbkdf2"]),
                (&["-pbkdf2", "-iter", "1234"], &["--iter", "1234"]),
                (&["-pbkdf2", "-md", "sha512", "-iter", "99"], &["--iter", "99", "--md", "sha512"]),
                (&["-md", "md5"], &["--md", "md5"]),
                (&["-md", "sha256"], &[]),
            ];
            for (theirs, ours) in kdfs {
                let enc = openssl_enc(&tmp, &input, cipher, theirs);
                let out = tmp.join("out");
                let mut args = vec![
                    "decrypt",
                    "--openssl",
                    cipher,
                    p(&enc),
                    "-o",
                    p(&out),
                    "--key-file",
                    p(&pass),
                ];
                args.extend_from_slice(ours);
                let run = ok("decrypt --openssl", rampart(&args));
                assert!(
                    String::from_utf8_lossy(&run.stderr).contains("not authenticated"),
                    "warning"
                );
                assert_same(
                    &format!("{cipher} {theirs:?} {len}"),
                    &std::fs::read(&out).unwrap(),
                    &plain,
                );
                if cipher.ends_with("cbc") && len > 0 {
                    // A wrong passphrase almost always breaks the padding.
                    std::fs::remove_file(&out).unwrap();
                    let mut args = vec![
                        "decrypt",
                        "--openssl",
                        cipher,
                        p(&enc),
                        "-o",
                        p(&out),
                        "--key-file",
                        p(&wrong),
                    ];
                    args.extend_from_slice(ours);
                    let bad = rampart(&args);
                    if bad.status.success() {
                        continue; // 1 in 256: valid-looking padding
                    }
                    assert_eq!(bad.status.code(), Some(2));
                    assert!(String::from_utf8_lossy(&bad.stderr).contains("bad decrypt"));
                    assert!(!out.exists(), "no partial output");
                }
            }
        }
    }
}
