#![allow(clippy::unwrap_used)]
//! `rampart export --offset/--length` (to a file and to
//! `-`, standard output) and `rampart import -` (standard input) at odd
//! lengths and unaligned offsets, checked against an in-memory model of the
//! plaintext. Every import must change only the ciphertext of the sectors
//! it touches; ranges past the end are refused (exit 2, one line) without
//! touching the volume.

use crate::helpers::luks_support as support;

use support::*;

/// The plaintext model and the volume it describes.
struct Model {
    volume: std::path::PathBuf,
    key: std::path::PathBuf,
    plain: Vec<u8>,
    data_offset: usize,
    sector: usize,
}

impl Model {
    fn export(&self, offset: Option<&str>, length: Option<&str>) -> Vec<u8> {
        let mut args = vec!["export", p(&self.volume), "-", "-d", p(&self.key)];
        if let Some(offset) = offset {
            args.extend(["--offset", offset]);
        }
        if let Some(length) = length {
            args.extend(["--length", length]);
        }
        let out = ok("rampart export -", rampart(&args));
        assert!(out.stderr.is_empty(), "export said: {}", text(&out.stderr));
        out.stdout
    }

    fn check_range(&self, offset: usize, len: usize) {
        let got = self.export(Some(&offset.to_string()), Some(&len.to_string()));
        assert_same(
            &format!("export --offset {offset} --length {len}"),
            &got,
            &self.plain[offset..offset + len],
        );
    }

    /// `rampart import -` of `data` at `offset`, then checks which
    /// ciphertext bytes changed.
    fn import_stdin(&mut self, offset: usize, data: &[u8]) {
        let before = std::fs::read(&self.volume).unwrap();
        let off = offset.to_string();
        let out = rampart_in(
            &["import", p(&self.volume), "-", "--offset", &off, "-d", p(&self.key)],
            data,
        );
        ok(&format!("import - at {offset} of {} bytes", data.len()), out);
        let old_plain = self.plain.clone();
        self.plain[offset..offset + data.len()].copy_from_slice(data);
        let after = std::fs::read(&self.volume).unwrap();
        assert_eq!(before.len(), after.len(), "import changed the file size");
        // Only the touched sectors' ciphertext may change.
        let first = self.data_offset + offset / self.sector * self.sector;
        let end = self.data_offset + (offset + data.len()).div_ceil(self.sector) * self.sector;
        let outside = (0..before.len()).find(|&i| (i < first || i >= end) && before[i] != after[i]);
        if let Some(pos) = outside {
            panic!(
                "import at {offset} (+{}) changed byte {pos}, outside [{first}, {end})",
                data.len()
            );
        }
        // Within them, a sector's ciphertext changes exactly when its
        // plaintext does (same key, same IV: deterministic).
        for start in (first..end).step_by(self.sector) {
            let rel = start - self.data_offset;
            let plain_changed =
                old_plain[rel..rel + self.sector] != self.plain[rel..rel + self.sector];
            let cipher_changed =
                before[start..start + self.sector] != after[start..start + self.sector];
            assert_eq!(
                plain_changed,
                cipher_changed,
                "import at {offset} (+{}): sector at plaintext byte {rel}",
                data.len()
            );
        }
    }
}

fn ranges(tag: &str, format_args: &[&str], size: &str) {
    let dir = TempDir::new(tag);
    let key = dir.file("key", format!("ranges {tag}").as_bytes());
    let volume = dir.join("volume.img");
    let mut args = vec!["format", p(&volume), "--size", size, "-d", p(&key)];
    args.extend(PBKDF2);
    args.extend(format_args);
    ok("rampart format", rampart(&args));
    let dump = rampart_json(&volume, None, None);
    let data_offset = usize::try_from(dump["data_offset"].as_u64().unwrap()).unwrap();
    let sector = usize::try_from(dump["sector_size"].as_u64().unwrap()).unwrap();
    let file_len = usize::try_from(std::fs::metadata(&volume).unwrap().len()).unwrap();
    let len = file_len - data_offset;

    // A known start: the whole volume imported from a file.
    let base = random_bytes(40, len);
    let base_file = dir.file("base.bin", &base);
    ok("rampart import", rampart(&["import", p(&volume), p(&base_file), "-d", p(&key)]));
    let mut model = Model { volume, key, plain: base, data_offset, sector };
    assert_same("export of the whole volume to stdout", &model.export(None, None), &model.plain);

    // Imports from standard input: odd lengths at unaligned offsets, within
    // one sector, across sectors, across the 8 MiB copy chunk, at the end.
    let imports: &[(usize, usize)] = &[
        (777, 12_345),
        (4095, 1),
        (4095, 2),
        (511, 514),
        (0, 513),
        (1, 1),
        (8191, 4098),
        (1000, (9 << 20) + 3),
        (len - 7, 7),
        (len - 4097, 4097),
        (len / 2 + 13, 0),
    ];
    for (i, &(offset, n)) in imports.iter().enumerate() {
        let data = random_bytes(100 + i as u64, n);
        model.import_stdin(offset, &data);
        model.check_range(
            offset.saturating_sub(600),
            (n + 1200).min(len - offset.saturating_sub(600)),
        );
    }
    // An import from a file at an unaligned offset.
    let patch = random_bytes(7, 3001);
    let patch_file = dir.file("patch.bin", &patch);
    ok(
        "import FILE --offset",
        rampart(&[
            "import",
            p(&model.volume),
            p(&patch_file),
            "--offset",
            "12289",
            "-d",
            p(&model.key),
        ]),
    );
    model.plain[12289..12289 + patch.len()].copy_from_slice(&patch);

    // Exports of ranges to standard output and to a file.
    for &(offset, n) in &[
        (0, 1),
        (1, 4095),
        (4095, 2),
        (511, 1),
        (12_345, (9 << 20) + 1),
        (len - 1, 1),
        (len, 0),
        (len - 4096, 4096),
    ] {
        model.check_range(offset, n);
    }
    // Size suffixes; a length only; an offset only.
    assert_same(
        "--offset 1K --length 3K",
        &model.export(Some("1K"), Some("3K")),
        &model.plain[1024..4096],
    );
    assert_same("--length 5000", &model.export(None, Some("5000")), &model.plain[..5000]);
    let tail = len - 10_000;
    assert_same(
        "--offset only",
        &model.export(Some(&tail.to_string()), None),
        &model.plain[tail..],
    );
    let out_file = dir.join("range.bin");
    ok(
        "export FILE --offset --length",
        rampart(&[
            "export",
            p(&model.volume),
            p(&out_file),
            "--offset",
            "333",
            "--length",
            "70000",
            "-d",
            p(&model.key),
        ]),
    );
    assert_same("export to a file", &std::fs::read(&out_file).unwrap(), &model.plain[333..70_333]);
    assert_same("everything at the end", &model.export(None, None), &model.plain);

    // Ranges beyond the end: exit 2, one line, nothing written or changed.
    let before = std::fs::read(&model.volume).unwrap();
    let past = (len + 1).to_string();
    let near = (len - 10).to_string();
    let vol = p(&model.volume);
    let k = p(&model.key);
    let refused = [
        (
            "export --offset past the end",
            rampart(&["export", vol, "-", "--offset", &past, "-d", k]),
        ),
        (
            "export --length past the end",
            rampart(&["export", vol, "-", "--offset", &near, "--length", "11", "-d", k]),
        ),
        (
            "import - past the end",
            rampart_in(&["import", vol, "-", "--offset", &near, "-d", k], &[1u8; 11]),
        ),
        (
            "import FILE past the end",
            rampart(&["import", vol, p(&patch_file), "--offset", &near, "-d", k]),
        ),
        (
            "import --offset past the end",
            rampart_in(&["import", vol, "-", "--offset", &past, "-d", k], b"x"),
        ),
    ];
    for (what, out) in &refused {
        fails(what, out, Some(2));
        assert!(out.stdout.is_empty(), "{what} wrote to stdout");
    }
    assert_same("volume after refused ranges", &std::fs::read(&model.volume).unwrap(), &before);
    // An import from stdin larger than the volume: its length is unknown
    // up front, so whole chunks are written until one does not fit; the
    // error says how much was written, and exactly that much was.
    let huge = random_bytes(41, len + 1);
    let line = fails(
        "import - larger than the volume",
        &rampart_in(&["import", vol, "-", "-d", k], &huge),
        Some(2),
    );
    let written: usize = line
        .split("the first ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the error does not say how much was written: {line}"));
    assert!(written < len + 1, "{line}");
    model.plain[..written].copy_from_slice(&huge[..written]);
    assert_same("volume after an oversized import", &model.export(None, None), &model.plain);
}

/// Standard input as the passphrase and the data: a prompt line then the
/// data works; `--key-file -` with `IN -` is refused (exit 2) rather than
/// swallowing the data as the passphrase. `export -` into a pipe whose
/// reader stops early ends quietly with exit 0.
#[test]
fn export_import_stdin_passphrase_and_broken_pipe() {
    let dir = TempDir::new("stdin-pipe");
    let key = dir.file("key", b"stdin passphrase");
    let volume = dir.join("volume.img");
    let mut args = vec!["format", p(&volume), "--size", "20M", "-d", p(&key)];
    args.extend(PBKDF2);
    ok("rampart format", rampart(&args));
    let data = random_bytes(50, 300_007);

    // One line of passphrase, then the data, all on standard input.
    let mut stdin = b"stdin passphrase\n".to_vec();
    stdin.extend_from_slice(&data);
    ok("import - with the passphrase on stdin", rampart_in(&["import", p(&volume), "-"], &stdin));
    let out =
        ok("export -", rampart(&["export", p(&volume), "-", "--length", "300007", "-d", p(&key)]));
    assert_same("data after a stdin passphrase", &out.stdout, &data);

    let before = std::fs::read(&volume).unwrap();
    let line = fails(
        "import - with --key-file -",
        &rampart_in(&["import", p(&volume), "-", "-d", "-"], &stdin),
        Some(2),
    );
    assert!(line.contains("standard input"), "{line}");
    assert_same("volume after a refused import", &std::fs::read(&volume).unwrap(), &before);

    // A reader that goes away after 10 bytes.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["export", p(&volume), "-", "-d", p(&key)])
        .env_remove("RUST_BACKTRACE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 10];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut head).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(head, data[..10]);
    assert!(
        out.status.success(),
        "export into a closed pipe: {} {}",
        out.status,
        text(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "export into a closed pipe said: {}", text(&out.stderr));
}

#[test]
fn export_import_ranges_luks2_sector4096() {
    ranges("ranges-luks2", &[], "40M");
}

#[test]
fn export_import_ranges_luks1_sector512_cbc_essiv() {
    ranges("ranges-luks1", &["--type", "luks1", "--cipher", "aes-cbc-essiv:sha256"], "28M");
}

#[test]
fn export_import_ranges_luks2_sector512_xts256() {
    ranges("ranges-luks2-512", &["--sector-size", "512", "--key-size", "256"], "40M");
}
