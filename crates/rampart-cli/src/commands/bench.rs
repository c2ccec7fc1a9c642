use std::io::{IsTerminal, Write};

use anyhow::Context;
use rampart_bench::{CipherFamily, Report, Request, Settings};

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
    let request = Request {
        ciphers: args.cipher.clone(),
        block_bytes: args.size,
        sector_bytes: args.sector,
        span_bytes: args.span,
        threads: args.threads,
        seconds: args.seconds,
        iter_time_ms: args.iter_time,
        xts_path: args.xts_path.clone(),
        ceiling: args.ceiling,
        cpu_time: args.cpu_time,
    };
    Settings::from_request(&request).map_err(|e| UsageError(e.to_string()).into())
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
