#![allow(clippy::unwrap_used)]
//! Rampart's file bodies against Google Tink's `StreamingAead` (PyPI
//! `tink`, installed by scripts/test): Tink decrypts what Rampart writes
//! and Rampart decrypts what Tink writes, for segment sizes from 4 KiB to
//! 4 MiB and plaintext lengths 0, 1, around the first and second segment
//! boundaries and many segments; a whole Rampart file's body opens in Tink
//! with the file key and the Rampart header as associated data.

use std::path::{Path, PathBuf};
use std::process::Command;

use rampart_crypto::SecretBytes;
use rampart_file::{Identity, RawKey, Recipient, StreamParams};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers/tink_stream.py")
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rampart-tink-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tink(op: &str, key: &[u8], segment: u32, ad: &[u8], input: &[u8], dir: &Path) -> Vec<u8> {
    let (ad_file, in_file, out_file) = (dir.join("ad"), dir.join("in"), dir.join("out"));
    std::fs::write(&ad_file, ad).unwrap();
    std::fs::write(&in_file, input).unwrap();
    let out = Command::new("python3")
        .arg(script())
        .args([op, &hex::encode(key), &segment.to_string()])
        .args([&ad_file, &in_file, &out_file])
        .output()
        .unwrap();
    assert!(out.status.success(), "tink {op} failed: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read(&out_file).unwrap()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8).collect()
}

#[test]
fn tink_and_rampart_read_each_others_streams() {
    let dir = scratch("streams");
    let key = SecretBytes::from_slice(&pattern(32, 7));
    for segment in [4096u32, 65536, 1 << 20, 4 << 20] {
        let params = StreamParams::new(segment).unwrap();
        let first = params.plaintext_len(0);
        let full = params.plaintext_len(1);
        let mut lengths = vec![
            0,
            1,
            first - 1,
            first,
            first + 1,
            first + full - 1,
            first + full,
            first + full + 1,
        ];
        lengths.push(first + 3 * full + full / 2);
        if segment <= 65536 {
            lengths.push(first + 40 * full + 17);
        }
        for len in lengths {
            let plain = pattern(len, len as u8);
            let ad = format!("associated data {segment} {len}").into_bytes();
            let mut ours = Vec::new();
            rampart_file::encrypt_stream(&params, &key, &ad, &mut plain.as_slice(), &mut ours)
                .unwrap();
            assert_eq!(ours.len() as u64, params.stream_len(len as u64), "size {segment}/{len}");
            let theirs = tink("decrypt", key.expose(), segment, &ad, &ours, &dir);
            assert!(theirs == plain, "Tink decrypting Rampart: segment {segment}, length {len}");

            let from_tink = tink("encrypt", key.expose(), segment, &ad, &plain, &dir);
            assert_eq!(
                from_tink.len() as u64,
                params.stream_len(len as u64),
                "Tink's size {segment}/{len}"
            );
            let mut back = Vec::new();
            rampart_file::decrypt_stream(&params, &key, &ad, &mut from_tink.as_slice(), &mut back)
                .unwrap();
            assert!(back == plain, "Rampart decrypting Tink: segment {segment}, length {len}");
            // The associated data is bound.
            let mut wrong = Vec::new();
            assert!(rampart_file::decrypt_stream(
                &params,
                &key,
                b"other",
                &mut from_tink.as_slice(),
                &mut wrong
            )
            .is_err());
            assert!(wrong.is_empty());
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_rampart_files_body_opens_in_tink_with_the_file_key_and_header() {
    let dir = scratch("file");
    let raw = RawKey::new(SecretBytes::from_slice(&[9u8; 32])).unwrap();
    let plain = pattern(200_000, 3);
    let mut file = Vec::new();
    let recipients: [&dyn Recipient; 1] = [&raw];
    rampart_file::encrypt(&mut plain.as_slice(), &mut file, &recipients, 65536, &|_| {}).unwrap();
    let header = rampart_file::read_header(&mut file.as_slice()).unwrap();
    let identities: [&dyn Identity; 1] = [&raw];
    let (file_key, _) = rampart_file::unlock(&header, &identities).unwrap();
    let body = &file[header.as_bytes().len()..];
    let theirs = tink("decrypt", file_key.expose(), 65536, header.as_bytes(), body, &dir);
    assert!(theirs == plain);
    std::fs::remove_dir_all(dir).unwrap();
}
