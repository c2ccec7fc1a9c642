use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::Context;
use rampart_bench::{CipherFamily, Report, Settings};
use rampart_crypto::XtsPath;

use crate::cli::BenchArgs;
use crate::UsageError;

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let settings = settings_from(args)?;
    let show_progress = !args.json && std::io::stderr().is_terminal();
    let mut progress = |what: &str| {
        if show_progress {
            eprint!("\r\x1b[2Kmeasuring {what}...");
            let _ = std::io::stderr().flush();
        }
    };
    let report = rampart_bench::run(&settings, &mut progress)?;
    if show_progress {
        eprint!("\r\x1b[2K");
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &report).context("cannot write JSON")?;
        writeln!(stdout)?;
    } else {
        print_table(&mut stdout, &report, &settings)?;
    }
    Ok(())
}

fn settings_from(args: &BenchArgs) -> anyhow::Result<Settings> {
    let mut families = Vec::new();
    for name in &args.cipher {
        let family = CipherFamily::from_name(name).ok_or_else(|| {
            UsageError(format!("unknown cipher '{name}' (expected aes-cbc, aes-xts or aes-gcm)"))
        })?;
        if !families.contains(&family) {
            families.push(family);
        }
    }
    let only_ciphers = !families.is_empty();
    if families.is_empty() {
        families = CipherFamily::ALL.to_vec();
    }
    let mut settings = Settings::new(families, args.size, args.sector, args.threads, args.seconds)
        .map_err(|e| UsageError(e.to_string()))?;
    if !(100..=60_000).contains(&args.iter_time) {
        return Err(UsageError(format!(
            "--iter-time {}: must be between 100 and 60000 ms",
            args.iter_time
        ))
        .into());
    }
    if let Some(span) = args.span {
        settings.set_span(span).map_err(|e| UsageError(e.to_string()))?;
    }
    settings.iter_time = Duration::from_millis(args.iter_time);
    settings.kdf = !only_ciphers;
    settings.rng = !only_ciphers;
    settings.ceiling = args.ceiling;
    settings.cpu_time = args.cpu_time;
    if let Some(name) = &args.xts_path {
        let path = XtsPath::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = XtsPath::ALL.iter().map(|p| p.name()).collect();
            UsageError(format!("unknown XTS path '{name}' (expected one of {})", known.join(", ")))
        })?;
        if !path.available() {
            return Err(UsageError(format!(
                "this CPU lacks the instructions of XTS path '{name}'"
            ))
            .into());
        }
        settings.xts_path = Some(path);
    }
    Ok(settings)
}

fn print_table(out: &mut impl Write, report: &Report, settings: &Settings) -> std::io::Result<()> {
    let missing = if report.cpu.missing.is_empty() {
        "none".to_owned()
    } else {
        report.cpu.missing.join(" ")
    };
    writeln!(
        out,
        "# CPU: {} cores; features: {} (absent: {missing})",
        report.cpu.cores,
        report.cpu.features.join(" ")
    )?;
    writeln!(out, "# Tests are approximate using memory only (no storage IO).")?;
    for row in &report.pbkdf {
        if let Some(per_second) = row.iterations_per_second {
            let name = format!("PBKDF2-{}", row.kdf.trim_start_matches("pbkdf2-"));
            writeln!(
                out,
                "{name:<16}{per_second:>9} iterations per second for {}-bit key",
                row.key_bits
            )?;
        } else {
            let name = match row.kdf.as_str() {
                "argon2i" => "Argon2i",
                "argon2id" => "Argon2id",
                other => other,
            };
            writeln!(
                out,
                "{name:<10}{:>4} iterations, {} memory, {} parallel threads (CPUs) for {}-bit key \
                 (requested {} ms time, took {} ms)",
                row.time_cost.unwrap_or(0),
                row.memory_kib.unwrap_or(0),
                row.parallelism.unwrap_or(0),
                row.key_bits,
                row.requested_ms.unwrap_or(0),
                row.measured_ms.unwrap_or(0),
            )?;
        }
    }
    if !report.ciphers.is_empty() {
        let sectors = if settings.ciphers.iter().any(|f| *f != CipherFamily::AesGcm) {
            format!(", {}-byte sectors for xts/cbc", settings.sector_bytes)
        } else {
            String::new()
        };
        let span = if settings.span_bytes > settings.block_bytes {
            format!(", walking {} bytes of data per thread", settings.span_bytes)
        } else {
            String::new()
        };
        writeln!(
            out,
            "# {}-byte buffers per call{sectors}{span}, {} thread{}",
            settings.block_bytes,
            settings.threads,
            if settings.threads == 1 { "" } else { "s" }
        )?;
        let per_cpu_heading =
            if settings.cpu_time { " |    Enc per CPU-s |    Dec per CPU-s" } else { "" };
        writeln!(
            out,
            "#     Algorithm |       Key |      Encryption |      Decryption{per_cpu_heading} | Implementation"
        )?;
        for row in &report.ciphers {
            let per_cpu = match (row.encrypt_mib_per_cpu_s, row.decrypt_mib_per_cpu_s) {
                (Some(enc), Some(dec)) => format!(" {enc:>12.1} MiB/s {dec:>12.1} MiB/s"),
                _ => String::new(),
            };
            writeln!(
                out,
                "{:>15} {:>10}b {:>12.1} MiB/s {:>12.1} MiB/s{per_cpu}   {}",
                row.cipher, row.key_bits, row.encrypt_mib_s, row.decrypt_mib_s, row.implementation
            )?;
        }
    }
    if let Some(ceiling) = &report.ceiling {
        writeln!(
            out,
            "# AES instruction ceiling ({}, registers only, 1 thread): aes-128 {:.1} MiB/s, aes-256 {:.1} MiB/s",
            ceiling.instructions, ceiling.aes128_mib_s, ceiling.aes256_mib_s
        )?;
        if let (Some(aes128), Some(aes256)) =
            (ceiling.aes128_mib_per_cpu_s, ceiling.aes256_mib_per_cpu_s)
        {
            writeln!(
                out,
                "# AES instruction ceiling per CPU-second: aes-128 {aes128:.1} MiB/s, aes-256 {aes256:.1} MiB/s"
            )?;
        }
    }
    if let Some(rng) = &report.rng {
        writeln!(
            out,
            "# Random bytes: {:.1} MiB/s ({}, {}-byte requests, {} thread{})",
            rng.mib_s,
            rng.implementation,
            rng.block_bytes,
            rng.threads,
            if rng.threads == 1 { "" } else { "s" }
        )?;
    }
    Ok(())
}
