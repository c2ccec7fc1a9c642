use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::size::parse_size;

/// Rampart: hardware-accelerated encryption of data at rest, on standard
/// LUKS formats, with central key management.
#[derive(Debug, Parser)]
#[command(name = "rampart", version, about, long_about = None, propagate_version = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure KDF costs, cipher throughput and the DRBG on this machine
    /// (like `cryptsetup benchmark` and `openssl speed`).
    Bench(BenchArgs),
    /// Write cryptographically secure random bytes (AWS-LC's DRBG).
    Rand(RandArgs),
}

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Only these cipher families (aes-cbc, aes-xts, aes-gcm); repeatable or
    /// comma-separated. Skips the KDF and DRBG rows.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub cipher: Vec<String>,
    /// Bytes per call, as `openssl speed -bytes` (512, 4096, 16384, 65536...).
    #[arg(long, default_value = "4096", value_parser = parse_usize_size, value_name = "BYTES")]
    pub size: usize,
    /// Sector size within each call for XTS and CBC (512 to 4096; default:
    /// the call size, at most 4096).
    #[arg(long, value_parser = parse_usize_size, value_name = "BYTES")]
    pub sector: Option<usize>,
    /// Worker threads; 0 means one per core, throughput summed.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub threads: usize,
    /// Seconds to measure each direction of each cipher.
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    pub seconds: f64,
    /// Target unlock time in milliseconds for the Argon2 cost search.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub iter_time: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct RandArgs {
    /// How many bytes (suffixes K, M, G, T are powers of 1024).
    #[arg(value_parser = parse_size, value_name = "BYTES")]
    pub bytes: u64,
    /// Write to this file instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

fn parse_usize_size(text: &str) -> Result<usize, String> {
    let size = parse_size(text)?;
    usize::try_from(size).map_err(|_| format!("'{text}' is too large"))
}
