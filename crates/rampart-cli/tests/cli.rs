#![allow(clippy::unwrap_used)]
//! The `rampart` binary as a user runs it: exit codes, one-line errors,
//! `bench` output (table and JSON) and `rand`.

use std::process::{Command, Output};

fn rampart(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .unwrap()
}

fn stderr_line(output: &Output) -> String {
    let text = String::from_utf8(output.stderr.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "expected exactly one line on stderr, got: {text:?}");
    text
}

#[test]
fn help_lists_commands() {
    let output = rampart(&["--help"]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("bench") && text.contains("rand"), "{text}");
}

#[test]
fn bench_json_reports_every_row_with_documented_fields() {
    let output =
        rampart(&["bench", "--json", "--seconds", "0.02", "--iter-time", "100", "--threads", "2"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();

    assert!(report["cpu"]["cores"].as_u64().unwrap() >= 1);
    assert!(report["cpu"]["features"].is_array());

    let kdfs: Vec<&str> =
        report["pbkdf"].as_array().unwrap().iter().map(|r| r["kdf"].as_str().unwrap()).collect();
    assert_eq!(kdfs, ["pbkdf2-sha1", "pbkdf2-sha256", "pbkdf2-sha512", "argon2i", "argon2id"]);
    for row in &report["pbkdf"].as_array().unwrap()[..3] {
        assert!(row["iterations_per_second"].as_u64().unwrap() > 1000, "{row}");
    }
    for row in &report["pbkdf"].as_array().unwrap()[3..] {
        assert!(row["time_cost"].as_u64().unwrap() >= 4, "{row}");
        assert!(row["memory_kib"].as_u64().unwrap() >= 32 * 1024, "{row}");
        assert_eq!(row["requested_ms"].as_u64(), Some(100));
    }

    let rows: Vec<(String, u64)> = report["ciphers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["cipher"].as_str().unwrap().to_owned(), r["key_bits"].as_u64().unwrap()))
        .collect();
    let expected = [
        ("aes-cbc", 128),
        ("aes-cbc", 256),
        ("aes-xts", 256),
        ("aes-xts", 512),
        ("aes-gcm", 128),
        ("aes-gcm", 256),
    ];
    assert_eq!(rows.len(), expected.len());
    for ((cipher, bits), (want_cipher, want_bits)) in rows.iter().zip(expected) {
        assert_eq!((cipher.as_str(), *bits), (want_cipher, want_bits));
    }
    for row in report["ciphers"].as_array().unwrap() {
        for field in [
            "cipher",
            "mode",
            "key_bits",
            "block_bytes",
            "span_bytes",
            "threads",
            "encrypt_mib_s",
            "decrypt_mib_s",
            "implementation",
        ] {
            assert!(!row[field].is_null(), "field {field} missing in {row}");
        }
        assert_eq!(row["block_bytes"], 4096);
        assert_eq!(row["span_bytes"], 4096);
        assert_eq!(row["threads"], 2);
        assert!(row["encrypt_mib_s"].as_f64().unwrap() > 0.0);
        assert!(row["decrypt_mib_s"].as_f64().unwrap() > 0.0);
        assert!(
            row["implementation"].as_str().unwrap().starts_with("aws-lc")
                || row["implementation"].as_str().unwrap().starts_with("rampart")
        );
    }
    assert!(report["rng"]["mib_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_cpu_time_adds_per_cpu_second_figures() {
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "--cipher", "aes-xts", "--seconds", "0.05"];
        args.extend_from_slice(extra);
        let output = rampart(&args);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let report: serde_json::Value = serde_json::from_str(&run(&["--cpu-time", "--json"])).unwrap();
    let rows = report["ciphers"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        for (wall, cpu) in
            [("encrypt_mib_s", "encrypt_mib_per_cpu_s"), ("decrypt_mib_s", "decrypt_mib_per_cpu_s")]
        {
            let (wall, cpu) = (row[wall].as_f64().unwrap(), row[cpu].as_f64().unwrap());
            // The thread ran at most as long as the wall clock it ran in.
            assert!(cpu > 0.0 && cpu >= wall * 0.99, "{row}");
        }
    }
    let plain: serde_json::Value = serde_json::from_str(&run(&["--json"])).unwrap();
    assert!(plain["ciphers"][0].get("encrypt_mib_per_cpu_s").is_none(), "{plain}");

    let table = run(&["--cpu-time"]);
    assert!(table.contains("|    Enc per CPU-s |    Dec per CPU-s | Implementation"), "{table}");
    let row = table.lines().find(|l| l.trim_start().starts_with("aes-xts")).unwrap();
    assert_eq!(row.matches("MiB/s").count(), 4, "{table}");
}

#[test]
fn bench_ceiling_runs_on_the_widest_aes_vectors_and_bounds_the_engine() {
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let flags: Vec<&str> =
        flags.lines().find(|l| l.starts_with("flags")).unwrap().split_whitespace().collect();
    let has = |f: &str| flags.contains(&f);
    let expected = if ["avx512f", "avx512bw", "vaes", "vpclmulqdq"].iter().all(|f| has(f)) {
        "vaes-512"
    } else if ["avx2", "vaes", "vpclmulqdq"].iter().all(|f| has(f)) {
        "vaes-256"
    } else {
        assert!(has("aes"), "the build machines all have AES-NI");
        "aes-ni"
    };
    let args = ["bench", "--cipher", "aes-xts", "--seconds", "0.2", "--ceiling", "--cpu-time"];
    let output = rampart(&[&args[..], &["--json"]].concat());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let ceiling = &report["ceiling"];
    assert_eq!(ceiling["instructions"], expected, "{report}");
    let per_cpu = |bits: u32| ceiling[format!("aes{bits}_mib_per_cpu_s")].as_f64().unwrap();
    // No mode goes faster than its rounds alone (5% for timing noise).
    for row in report["ciphers"].as_array().unwrap() {
        let bits = row["key_bits"].as_u64().unwrap() / 2;
        let engine = row["encrypt_mib_per_cpu_s"].as_f64().unwrap();
        assert!(engine < per_cpu(bits as u32) * 1.05, "{row} against {ceiling}");
    }

    let output = rampart(&args);
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(
        table
            .contains(&format!("# AES instruction ceiling ({expected}, registers only, 1 thread)")),
        "{table}"
    );
}

#[test]
fn bench_span_walks_through_more_data_than_one_call() {
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "--cipher", "aes-xts,aes-gcm", "--size", "64K"];
        args.extend_from_slice(&["--span", "48M", "--seconds", "0.05"]);
        args.extend_from_slice(extra);
        let output = rampart(&args);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let report: serde_json::Value = serde_json::from_str(&run(&["--json"])).unwrap();
    let rows = report["ciphers"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        assert_eq!(row["span_bytes"], 48 << 20, "{row}");
        assert_eq!(row["block_bytes"], 64 << 10, "{row}");
        // GCM's decryption verifies each tag: data sealed in place at
        // another offset of the span would fail it.
        assert!(row["decrypt_mib_s"].as_f64().unwrap() > 0.0, "{row}");
    }
    let table = run(&[]);
    assert!(table.contains("walking 50331648 bytes of data per thread"), "{table}");
}

#[test]
fn bench_table_with_cipher_filter_and_sector_size() {
    let output = rampart(&[
        "bench",
        "--cipher",
        "aes-xts",
        "--size",
        "65536",
        "--sector",
        "512",
        "--seconds",
        "0.02",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("# CPU: "), "{text}");
    assert!(text.contains("65536-byte buffers per call, 512-byte sectors"), "{text}");
    assert!(text.contains("#     Algorithm |       Key |      Encryption |      Decryption"));
    let rows: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("aes-")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows[0].contains("256b") && rows[1].contains("512b"), "{text}");
    assert!(!text.contains("PBKDF2"), "--cipher skips the KDF rows: {text}");
}

#[test]
fn bench_rejects_bad_settings_with_one_line_and_exit_2() {
    for args in [
        &["bench", "--cipher", "des"][..],
        &["bench", "--size", "100"],
        &["bench", "--size", "4096", "--sector", "8192"],
        &["bench", "--seconds", "0"],
        &["bench", "--iter-time", "5"],
        &["bench", "--size", "4096", "--span", "1000"],
        &["bench", "--size", "4096", "--span", "6000"],
        &["bench", "--span", "9G"],
    ] {
        let output = rampart(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let line = stderr_line(&output);
        assert!(line.starts_with("rampart: error: "), "{line}");
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(rampart(&["no-such-command"]).status.code(), Some(2));
    assert_eq!(rampart(&["rand", "12Q"]).status.code(), Some(2));
}

#[test]
fn rand_writes_exact_counts_to_stdout_and_files() {
    for count in [0usize, 1, 1000, 3 * 1024 * 1024 + 17] {
        let output = rampart(&["rand", &count.to_string()]);
        assert!(output.status.success());
        assert_eq!(output.stdout.len(), count);
    }
    let dir = std::env::temp_dir().join(format!("rampart-rand-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("a");
    let b = dir.join("b");
    assert!(rampart(&["rand", "1M", "--out", a.to_str().unwrap()]).status.success());
    assert!(rampart(&["rand", "1M", "--out", b.to_str().unwrap()]).status.success());
    let a = std::fs::read(a).unwrap();
    let b = std::fs::read(b).unwrap();
    assert_eq!(a.len(), 1 << 20);
    assert_ne!(a, b, "two runs must not repeat output");
    // Crude sanity: every byte value occurs in 1 MiB of random data.
    let mut seen = [false; 256];
    a.iter().for_each(|&x| seen[usize::from(x)] = true);
    assert!(seen.iter().all(|&s| s));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn rand_to_unwritable_path_fails_with_one_line() {
    let output = rampart(&["rand", "16", "--out", "/nonexistent-dir/x"]);
    assert_eq!(output.status.code(), Some(1));
    let line = stderr_line(&output);
    assert!(line.contains("cannot create /nonexistent-dir/x"), "{line}");
}
